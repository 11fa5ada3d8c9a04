//! The daemonless OCI backend against the Docker backend, runc and runsc,
//! and against its floor: a plain `runc run` loop over bundles prepared
//! before the clock starts, each with the very `config.json` the backend
//! writes (`progscore_oci::container_config`: the same hardening, seccomp
//! included), nothing measured, nothing cleaned up beyond what runc does.
//! The same corpus of small programs, the same parallelism, in alternating
//! order, with each pair's ratio and the median.
//!
//! `cargo bench -p progscore-runtime --bench oci` (after scripts/setup.sh).
//! PROGSCORE_BENCH_PROGRAMS sets how many programs (default 120),
//! PROGSCORE_BENCH_JOBS the parallelism (default 4), PROGSCORE_BENCH_PAIRS
//! the rounds (default 3).

use progscore_sandbox::SandboxClientExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use progscore_oci_image::{CacheOptions, ImageCache, MountPoints};
use progscore_runtime::backends::Backends;
use progscore_runtime::config::Config;
use progscore_sandbox::{Invocation, Outcome, RuntimeProfile, SandboxClient};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let count = env_or("PROGSCORE_BENCH_PROGRAMS", 120);
    let jobs = env_or("PROGSCORE_BENCH_JOBS", 4);
    let pairs = env_or("PROGSCORE_BENCH_PAIRS", 3);
    let path = progscore_test_kit::generated_config_path();
    let config = Config::load(&path).expect("progscore.toml: run scripts/setup.sh");
    let names = ["python", "python-gvisor", "python-oci", "python-oci-gvisor"];
    let profiles: Vec<RuntimeProfile> = names
        .iter()
        .map(|name| config.profile(name).expect("profile").clone())
        .collect();
    let backends = Backends::new(profiles.clone()).expect("backends");
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
    // Images fetched and unpacked, engines checked: not part of any figure.
    for name in names {
        runtime
            .block_on(backends.preflight(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        runtime.block_on(run_backend(&backends, name, &programs[..2], 2));
    }
    let reference = profiles[0].image().expect("image").to_string();
    let image = runtime
        .block_on(
            ImageCache::new("/var/cache/progscore/oci", CacheOptions::default())
                .expect("cache")
                .prepare(&reference, &MountPoints::new().file("/sandbox/program")),
        )
        .expect("image");
    let scratch = tempfile::tempdir().expect("temp dir");

    println!("{count} small programs, {jobs} at a time, one fresh container each; {pairs} rounds");
    let mut oci_vs_docker = Vec::new();
    let mut oci_vs_plain = Vec::new();
    for round in 0..pairs {
        let bundles = prepare_bundles(
            scratch.path(),
            &profiles[2],
            &image.rootfs,
            &image.facts.env,
            &programs,
            round,
        );
        let mut walls = [Duration::ZERO; 3];
        // Rotate who goes first.
        for step in 0..3 {
            let which = (step + round) % 3;
            walls[which] = match which {
                0 => runtime.block_on(run_backend(&backends, "python-oci", &programs, jobs)),
                1 => runtime.block_on(run_backend(&backends, "python", &programs, jobs)),
                _ => run_plain_runc(&bundles, jobs, scratch.path()),
            };
        }
        let [oci, docker, plain] = walls.map(|w| w.as_secs_f64());
        println!(
            "  round {}: oci runc {oci:6.2} s ({:5.1}/s)  docker runc {docker:6.2} s ({:5.1}/s)  plain runc loop {plain:6.2} s ({:5.1}/s)  docker/oci {:.2}x  oci/plain {:.2}x",
            round + 1,
            count as f64 / oci,
            count as f64 / docker,
            count as f64 / plain,
            docker / oci,
            oci / plain
        );
        oci_vs_docker.push(docker / oci);
        oci_vs_plain.push(oci / plain);
    }
    let mut gvisor = Vec::new();
    for round in 0..pairs {
        let mut walls = [Duration::ZERO; 2];
        for step in 0..2 {
            let which = (step + round) % 2;
            let profile = ["python-oci-gvisor", "python-gvisor"][which];
            walls[which] = runtime.block_on(run_backend(&backends, profile, &programs, jobs));
        }
        let [oci, docker] = walls.map(|w| w.as_secs_f64());
        println!(
            "  round {}: oci runsc {oci:6.2} s ({:5.1}/s)  docker runsc {docker:6.2} s ({:5.1}/s)  docker/oci {:.2}x",
            round + 1,
            count as f64 / oci,
            count as f64 / docker,
            docker / oci
        );
        gvisor.push(docker / oci);
    }
    println!(
        "median: oci runc is {:.2}x the Docker backend's throughput (target >= 2.5x), {:.2}x the plain loop's time (target <= 1.3x); oci runsc is {:.2}x Docker runsc's throughput (target >= 1.5x)",
        median(&mut oci_vs_docker),
        median(&mut oci_vs_plain),
        median(&mut gvisor)
    );
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
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

/// One bundle per program, written before the clock starts: the program
/// file, and the backend's own config.json for it.
fn prepare_bundles(
    root: &Path,
    profile: &RuntimeProfile,
    rootfs: &Path,
    env: &[String],
    programs: &[(String, String)],
    round: usize,
) -> Vec<(String, PathBuf)> {
    programs
        .iter()
        .enumerate()
        .map(|(i, (program, arg))| {
            let id = format!("bench-{}-{round}-{i}", std::process::id());
            let dir = root.join(&id);
            std::fs::create_dir_all(&dir).expect("bundle dir");
            let program_path = dir.join("program");
            std::fs::write(&program_path, program).expect("program");
            let config = progscore_oci::container_config(
                profile,
                rootfs,
                env,
                &program_path,
                &format!("/progscore-bench/{id}"),
                std::slice::from_ref(arg),
            )
            .expect("config");
            std::fs::write(dir.join("config.json"), config).expect("config");
            (id, dir)
        })
        .collect()
}

/// `runc run` per bundle, `jobs` at a time (each worker takes the next
/// bundle when its container ends), output read through a pipe.
fn run_plain_runc(bundles: &[(String, PathBuf)], jobs: usize, state: &Path) -> Duration {
    let state = state.join("runc-state");
    let next = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some((id, dir)) = bundles.get(index) else {
                        return;
                    };
                    let output = Command::new("runc")
                        .arg("--root")
                        .arg(&state)
                        .args(["run", "--bundle"])
                        .arg(dir)
                        .arg(id)
                        .stdin(Stdio::null())
                        .output()
                        .expect("runc");
                    assert!(
                        output.status.success() && !output.stdout.is_empty(),
                        "runc run: {}",
                        String::from_utf8_lossy(&output.stderr)
                    );
                }
            });
        }
    });
    let elapsed = started.elapsed();
    // runc removes each container's cgroup; the folder above is the bench's.
    if let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") {
        for hierarchy in hierarchies.flatten() {
            let _ = std::fs::remove_dir(hierarchy.path().join("progscore-bench"));
        }
    }
    elapsed
}
