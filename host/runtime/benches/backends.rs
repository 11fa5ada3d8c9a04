//! The same generated programs through every backend at its best
//! parallelism, and through plain `python3` processes with no sandbox, in one
//! run: wall time, programs/s, and the ratio to the no-sandbox baseline.
//!
//! `cargo bench -p progscore-runtime --bench backends` (after scripts/setup.sh).
//! PROGSCORE_BENCH_PROGRAMS sets how many programs (default 120).

use progscore_sandbox::SandboxClientExt as _;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use progscore_runtime::backends::Backends;
use progscore_runtime::config::Config;
use progscore_sandbox::{Invocation, Outcome, RuntimeProfile};

fn main() {
    let count: usize = std::env::var("PROGSCORE_BENCH_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let path = progscore_test_kit::generated_config_path();
    let config = Config::load(&path).expect("progscore.toml: run scripts/setup.sh");
    let names = [
        "python",
        "python-gvisor",
        "python-wasi",
        "python-oci",
        "python-oci-gvisor",
    ];
    let profiles: Vec<RuntimeProfile> = names
        .iter()
        .map(|name| config.profile(name).expect("profile").clone())
        .collect();
    let backends = Backends::new(profiles).expect("backends");
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

    println!("{count} generated programs per backend, each at its best parallelism");
    // Warm-up: the WASI module is compiled (or loaded from the cache) once;
    // the OCI image is fetched and unpacked once.
    for warm in ["python-wasi", "python-oci", "python-oci-gvisor"] {
        runtime.block_on(run_backend(&backends, warm, &programs[..2], 1));
    }

    let mut rows = Vec::new();
    let baseline = best(&[1, 2, 4], |jobs| run_plain(&programs, jobs));
    rows.push(("no sandbox (python3)", baseline));
    for (label, profile) in [
        ("docker runc", "python"),
        ("docker gVisor (runsc)", "python-gvisor"),
        ("wasi (wasmtime)", "python-wasi"),
        ("oci runc", "python-oci"),
        ("oci gVisor (runsc)", "python-oci-gvisor"),
    ] {
        let probe = &programs[..programs.len().min(30)];
        let (jobs, _) = best(&[2, 4, 6, 8], |jobs| {
            runtime.block_on(run_backend(&backends, profile, probe, jobs))
        });
        let wall = runtime.block_on(run_backend(&backends, profile, &programs, jobs));
        rows.push((label, (jobs, wall)));
    }
    println!();
    println!(
        "  {:<24} {:>5} {:>10} {:>12} {:>16}",
        "backend", "jobs", "wall (s)", "programs/s", "x no-sandbox"
    );
    let base = rows[0].1.1.as_secs_f64();
    for (label, (jobs, wall)) in &rows {
        println!(
            "  {:<24} {:>5} {:>10.2} {:>12.1} {:>16.2}",
            label,
            jobs,
            wall.as_secs_f64(),
            count as f64 / wall.as_secs_f64(),
            wall.as_secs_f64() / base
        );
    }
    let runc = rows[1].1.1.as_secs_f64();
    let gvisor = rows[2].1.1.as_secs_f64();
    let wasi = rows[3].1.1.as_secs_f64();
    println!("  wasi / no sandbox: {:.2}x (target <= 1.5x)", wasi / base);
    println!(
        "  gVisor / runc:     {:.2}x (target <= 1.5x)",
        gvisor / runc
    );
}

/// Tries each parallelism on a probe run; returns the best and its wall time.
fn best(levels: &[usize], mut run: impl FnMut(usize) -> Duration) -> (usize, Duration) {
    levels
        .iter()
        .map(|&jobs| (jobs, run(jobs)))
        .min_by_key(|(_, wall)| *wall)
        .expect("at least one level")
}

async fn run_backend(
    backends: &Backends,
    profile: &str,
    programs: &[(String, String)],
    jobs: usize,
) -> Duration {
    let started = Instant::now();
    futures_util::stream::iter(programs.iter())
        .map(|(program, arg)| async move {
            let run = backends
                .execute(
                    program.as_bytes(),
                    profile,
                    &[Invocation::with_args([arg.clone()])],
                )
                .await
                .unwrap_or_else(|e| panic!("{profile}: {e}"));
            assert!(
                matches!(run.events[0].outcome, Outcome::Exited { exit_code: 0 }),
                "{profile}: {run:?}"
            );
        })
        .buffer_unordered(jobs)
        .collect::<Vec<()>>()
        .await;
    started.elapsed()
}

fn run_plain(programs: &[(String, String)], jobs: usize) -> Duration {
    let dir = tempfile::tempdir().expect("temp dir");
    let paths: Vec<_> = programs
        .iter()
        .enumerate()
        .map(|(i, (program, _))| {
            let path = dir.path().join(format!("p{i}.py"));
            std::fs::write(&path, program).expect("write");
            path
        })
        .collect();
    let started = Instant::now();
    let mut next = 0;
    let mut running: Vec<std::process::Child> = Vec::new();
    while next < programs.len() || !running.is_empty() {
        while running.len() < jobs && next < programs.len() {
            running.push(
                std::process::Command::new("python3")
                    .arg("-I")
                    .arg(&paths[next])
                    .arg(&programs[next].1)
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .expect("python3"),
            );
            next += 1;
        }
        let child = running.remove(0);
        let output = child.wait_with_output().expect("wait");
        assert!(output.status.success() && !output.stdout.is_empty());
    }
    started.elapsed()
}
