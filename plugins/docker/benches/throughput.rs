//! Throughput of the Docker backend against a loop of hardened `docker run`
//! CLI calls with the same limits, each at its best parallelism, in one run.
//!
//! `cargo bench -p progscore-docker --bench throughput` (after scripts/setup.sh).
//! PROGSCORE_BENCH_PROGRAMS sets how many programs (default 120).

use progscore_sandbox::SandboxClientExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use progscore_docker::{DockerClient, DockerOptions};
use progscore_sandbox::{Invocation, Outcome, ProfileSpec, RuntimeProfile};

fn main() {
    let count: usize = std::env::var("PROGSCORE_BENCH_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let spec: ProfileSpec = progscore_test_kit::generated_profile("python");
    let profile = RuntimeProfile::from_spec("python", &spec, Path::new(".")).expect("profile");
    let programs: Vec<(String, String)> = (0..count)
        .map(|i| {
            (
                format!(
                    "import sys\nn = int(sys.argv[1])\nprint(sum(k * k for k in range(n)), {i})\n"
                ),
                (1000 + i).to_string(),
            )
        })
        .collect();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let client = Arc::new(
        DockerClient::new(vec![profile.clone()], DockerOptions::default()).expect("client"),
    );

    println!(
        "progscore Docker backend vs hardened `docker run` loop, {count} programs, one container each"
    );
    let probe = &programs[..count.min(40)];
    let mut best_backend = (0usize, f64::MAX);
    for jobs in [2, 4, 6, 8] {
        let (wall, _) = runtime.block_on(run_backend(&client, probe, jobs));
        println!(
            "  probe backend  jobs={jobs:<2} {:>6.2}/s",
            probe.len() as f64 / wall.as_secs_f64()
        );
        if wall.as_secs_f64() < best_backend.1 {
            best_backend = (jobs, wall.as_secs_f64());
        }
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let image = profile.image().expect("docker image").to_string();
    let mut best_cli = (0usize, f64::MAX);
    for jobs in [2, 4, 6, 8] {
        let wall = run_cli(dir.path(), &image, probe, jobs);
        println!(
            "  probe cli      jobs={jobs:<2} {:>6.2}/s",
            probe.len() as f64 / wall.as_secs_f64()
        );
        if wall.as_secs_f64() < best_cli.1 {
            best_cli = (jobs, wall.as_secs_f64());
        }
    }

    let (backend_wall, latencies) =
        runtime.block_on(run_backend(&client, &programs, best_backend.0));
    let cli_wall = run_cli(dir.path(), &image, &programs, best_cli.0);
    let mut latencies = latencies;
    latencies.sort();
    let median = latencies[latencies.len() / 2];
    let backend_rate = count as f64 / backend_wall.as_secs_f64();
    let cli_rate = count as f64 / cli_wall.as_secs_f64();
    println!();
    println!(
        "  {:<28} {:>6} {:>10} {:>12}",
        "", "jobs", "wall (s)", "programs/s"
    );
    println!(
        "  {:<28} {:>6} {:>10.2} {:>12.2}",
        "progscore Docker backend",
        best_backend.0,
        backend_wall.as_secs_f64(),
        backend_rate
    );
    println!(
        "  {:<28} {:>6} {:>10.2} {:>12.2}",
        "docker run CLI loop",
        best_cli.0,
        cli_wall.as_secs_f64(),
        cli_rate
    );
    println!(
        "  throughput ratio (backend / CLI): {:.2}x  (target >= 1.5x)",
        backend_rate / cli_rate
    );
    println!(
        "  per-invocation latency median (backend): {} ms",
        median.as_millis()
    );
}

async fn run_backend(
    client: &Arc<DockerClient>,
    programs: &[(String, String)],
    jobs: usize,
) -> (Duration, Vec<Duration>) {
    let started = Instant::now();
    let latencies: Vec<Duration> = futures_util::stream::iter(programs.iter())
        .map(|(program, arg)| {
            let client = client.clone();
            async move {
                let began = Instant::now();
                let run = client
                    .execute(
                        program.as_bytes(),
                        "python",
                        &[Invocation::with_args([arg.clone()])],
                    )
                    .await
                    .expect("run");
                assert!(
                    matches!(run.events[0].outcome, Outcome::Exited { exit_code: 0 }),
                    "{run:?}"
                );
                let n: u64 = arg.parse().expect("a number");
                let sum: u64 = (0..n).map(|k| k * k).sum();
                let index = program
                    .rsplit(", ")
                    .next()
                    .unwrap_or("")
                    .trim_end_matches(")\n");
                assert_eq!(
                    run.events[0].stdout.data.to_string_lossy().trim(),
                    format!("{sum} {index}")
                );
                began.elapsed()
            }
        })
        .buffer_unordered(jobs)
        .collect()
        .await;
    (started.elapsed(), latencies)
}

/// The same programs through `docker run` with the same hardening and limits,
/// output captured to files, `jobs` at a time.
fn run_cli(dir: &Path, image: &str, programs: &[(String, String)], jobs: usize) -> Duration {
    // A fresh folder per pass: no output of an earlier pass can stand in.
    let pass = tempfile::tempdir_in(dir).expect("pass folder");
    let dir = pass.path();
    let mut lines = String::new();
    for (i, (program, arg)) in programs.iter().enumerate() {
        let path: PathBuf = dir.join(format!("p{i}.py"));
        std::fs::write(&path, program).expect("write program");
        lines.push_str(&format!("{} {arg} {i}\n", path.display()));
    }
    let list = dir.join("list");
    std::fs::write(&list, lines).expect("write list");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/docker-run-loop.sh");
    let started = Instant::now();
    let status = Command::new("bash")
        .arg(&script)
        .arg(image)
        .arg(jobs.to_string())
        .arg(&list)
        .arg(dir)
        .status()
        .expect("run the CLI loop");
    let wall = started.elapsed();
    assert!(status.success(), "the CLI loop failed");
    for (i, (_, arg)) in programs.iter().enumerate() {
        let out = std::fs::read_to_string(dir.join(format!("out-{i}"))).unwrap_or_default();
        let n: u64 = arg.parse().expect("a number");
        let sum: u64 = (0..n).map(|k| k * k).sum();
        assert_eq!(out.trim(), format!("{sum} {i}"), "CLI run {i}");
    }
    wall
}
