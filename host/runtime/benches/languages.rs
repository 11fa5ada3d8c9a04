//! Per language, small programs with 3 cases each: through progscore (one
//! compile container, then one container per case) beside a loop of plain
//! hardened `docker run`s that compiles and runs them the same way
//! (`scripts/docker-compile-run-loop.sh`), at the same parallelism, in one
//! run: wall time, programs/s and the ratio.
//!
//! `cargo bench -p progscore-runtime --bench languages` after
//! `scripts/setup.sh --languages all`. PROGSCORE_BENCH_PROGRAMS sets how many
//! programs per language (default 8); PROGSCORE_BENCH_JOBS the parallelism
//! (default 4).

use progscore_sandbox::SandboxClientExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use progscore_runtime::backends::Backends;
use progscore_runtime::config::Config;
use progscore_sandbox::{Invocation, Outcome};

const LANGUAGES: [(&str, &str); 6] = [
    ("c", "c"),
    ("cpp", "cpp"),
    ("rust", "rs"),
    ("go", "go"),
    ("java", "java"),
    ("javascript", "js"),
];
const ARGS: [&str; 3] = ["3", "12", "-5"];
const SQUARES: [&str; 3] = ["9\n", "144\n", "25\n"];

fn main() {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let count = env("PROGSCORE_BENCH_PROGRAMS", 8);
    let jobs = env("PROGSCORE_BENCH_JOBS", 4);
    let root = progscore_test_kit::workspace_root();
    let config = Config::load(&progscore_test_kit::generated_config_path())
        .expect("progscore.toml: run scripts/setup.sh");
    let present: Vec<_> = LANGUAGES
        .into_iter()
        .filter(|(language, _)| config.profile(language).is_some())
        .collect();
    let profiles = present
        .iter()
        .map(|(language, _)| config.profile(language).expect("profile").clone())
        .collect();
    let backends = Backends::new(profiles).expect("backends");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    println!(
        "{count} programs x {} cases per language, {jobs} programs at a time",
        ARGS.len()
    );

    let mut rows = Vec::new();
    for (language, extension) in &present {
        let square = std::fs::read_to_string(root.join(format!(
            "examples/languages/{language}/square-correct.{extension}"
        )))
        .expect("the example's square");
        // A different comment per program: each one is compiled anew.
        let programs: Vec<String> = (0..count)
            .map(|i| format!("{square}\n// bench program {i} {}\n", std::process::id()))
            .collect();
        let ours = runtime.block_on(run_progscore(&backends, language, &programs, jobs));
        let image = config
            .profile(language)
            .and_then(|p| p.image())
            .expect("an image")
            .to_string();
        let theirs = run_docker_loop(&root, language, extension, &image, &programs, jobs);
        rows.push((language, ours, theirs));
    }
    println!();
    println!(
        "  {:<11} {:>14} {:>12} {:>18} {:>12} {:>14}",
        "language", "progscore (s)", "programs/s", "docker run (s)", "programs/s", "docker / ours"
    );
    for (language, ours, theirs) in rows {
        let (ours, theirs) = (ours.as_secs_f64(), theirs.as_secs_f64());
        println!(
            "  {:<11} {:>14.2} {:>12.2} {:>18.2} {:>12.2} {:>14.2}",
            language,
            ours,
            count as f64 / ours,
            theirs,
            count as f64 / theirs,
            theirs / ours
        );
    }
}

async fn run_progscore(
    backends: &Backends,
    profile: &str,
    programs: &[String],
    jobs: usize,
) -> Duration {
    let invocations: Vec<Invocation> = ARGS.iter().map(|a| Invocation::with_args([*a])).collect();
    let invocations = &invocations;
    let started = Instant::now();
    futures_util::stream::iter(programs)
        .map(|program| async move {
            let run = backends
                .execute(program.as_bytes(), profile, invocations)
                .await
                .unwrap_or_else(|e| panic!("{profile}: {e}"));
            for (event, square) in run.events.iter().zip(SQUARES) {
                assert!(
                    matches!(event.outcome, Outcome::Exited { exit_code: 0 })
                        && event.stdout.data.as_bytes() == square.as_bytes(),
                    "{profile}: {run:?}"
                );
            }
        })
        .buffer_unordered(jobs)
        .collect::<Vec<()>>()
        .await;
    started.elapsed()
}

fn run_docker_loop(
    root: &Path,
    language: &str,
    extension: &str,
    image: &str,
    programs: &[String],
    jobs: usize,
) -> Duration {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut list = String::new();
    for (index, program) in programs.iter().enumerate() {
        let path = dir.path().join(format!("p{index}.{extension}"));
        std::fs::write(&path, program).expect("write");
        list.push_str(&format!("{} {index} {}\n", path.display(), ARGS.join(" ")));
    }
    let list_path = dir.path().join("list");
    std::fs::write(&list_path, list).expect("write list");
    let out = dir.path().join("out");
    std::fs::create_dir(&out).expect("out dir");
    let started = Instant::now();
    let status = std::process::Command::new("bash")
        .arg(root.join("scripts/docker-compile-run-loop.sh"))
        .args([language, image, &jobs.to_string()])
        .arg(&list_path)
        .arg(&out)
        .status()
        .expect("docker-compile-run-loop.sh");
    let wall = started.elapsed();
    assert!(status.success(), "{language}: the docker loop failed");
    for index in 0..programs.len() {
        for (k, square) in SQUARES.iter().enumerate() {
            let got = std::fs::read_to_string(out.join(format!("out-{index}-{}", k + 1)))
                .unwrap_or_default();
            assert_eq!(
                &got, square,
                "{language}: the docker loop's program {index} case {k}"
            );
        }
    }
    wall
}
