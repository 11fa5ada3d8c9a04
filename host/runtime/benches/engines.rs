//! The engine pool's overhead: the same batch of small `python` programs (2
//! cases each) at the same total concurrency C, once on one configured
//! engine (the local one, capacity C) and once on a pool of two engines on
//! this same machine (the local one and the second one of
//! `scripts/second-engine.sh`, capacity C/2 each). Both engines share the
//! machine's CPUs, so the difference is what the pool costs (choosing an
//! engine, a second daemon), not extra CPUs. The implicit engine (local
//! socket, no bound of its own) runs the batch too, as a third column.
//!
//! Rounds are interleaved (one, pool, implicit; one, pool, implicit; ...) and
//! every figure is a ratio within a round, as the machine is shared and noisy.
//! Every run's stdout is checked, and the pool rounds count the programs per
//! engine from the provenance's `engine_name` (both engines must run some).
//!
//! A second table, "delivery to an engine elsewhere", then runs the same
//! batch on the second engine alone, capacity C each way: through its unix
//! socket (the program bind-mounted from this host) and the very same engine
//! over mutual TLS at tcp://127.0.0.1:2376 (the program in volumes filled
//! through a never-started loader container's archive API, as for an engine
//! on another machine). Both reach one daemon on the same CPUs, so the ratio
//! tls/unix is what delivering through volumes and TLS costs, not a slower
//! machine; the engine's ID is compared over both ways first. Its rounds are
//! interleaved too (unix, tls; tls, unix; ...: the order alternates), every
//! run's stdout is checked, and the figure is the median ratio tls/unix.
//!
//! `cargo bench -p progscore-runtime --bench engines` after `scripts/setup.sh` and
//! `bash scripts/second-engine.sh start`. PROGSCORE_BENCH_PROGRAMS sets the
//! programs per run (default 60), PROGSCORE_BENCH_JOBS the total concurrency
//! C (default 6), PROGSCORE_BENCH_ROUNDS the rounds of each table (default
//! 3); PROGSCORE_CONFIG the config (default the workspace's progscore.toml),
//! PROGSCORE_SECOND_ENGINE the second engine's socket (default
//! unix:///run/docker-second.sock; its TLS address and files are those of
//! `scripts/second-engine.sh`: 127.0.0.1:2376, /var/lib/docker-second/tls).

use progscore_sandbox::SandboxClientExt as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use progscore_docker::{Capacity, DockerOptions, Endpoint, EngineOptions};
use progscore_runtime::backends::{Backends, WasiWorkers};
use progscore_runtime::config::Config;
use progscore_sandbox::{Invocation, Outcome, SandboxClient};

const PROFILE: &str = "python";
/// The second engine over mutual TLS (`scripts/second-engine.sh`).
const SECOND_TLS_ADDRESS: &str = "127.0.0.1:2376";
const SECOND_TLS_DIR: &str = "/var/lib/docker-second/tls";

fn main() {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let count = env("PROGSCORE_BENCH_PROGRAMS", 60);
    let jobs = env("PROGSCORE_BENCH_JOBS", 6);
    let rounds = env("PROGSCORE_BENCH_ROUNDS", 3).max(1);
    assert!(
        jobs >= 2,
        "PROGSCORE_BENCH_JOBS must be at least 2 (one place per engine)"
    );
    let config_path = progscore_test_kit::generated_config_path();
    let config = Config::load(&config_path).expect("progscore.toml: run scripts/setup.sh");
    let profile = config
        .profile(PROFILE)
        .expect("the `python` profile: run scripts/setup.sh")
        .clone();

    let first_endpoint = EngineOptions::implicit().endpoint;
    let second_socket = second_socket();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(require_second_engine(&second_socket));

    let engine = |name: &str, endpoint: Endpoint, capacity: usize| EngineOptions {
        name: name.into(),
        endpoint,
        capacity: Capacity::Fixed(capacity),
    };
    let client = |engines: Vec<EngineOptions>| {
        let options = DockerOptions {
            engines,
            ..config.docker.options()
        };
        Backends::build(
            vec![profile.clone()],
            options,
            config.oci.clone(),
            WasiWorkers::Auto,
        )
        .expect("backends")
    };
    let first_half = jobs.div_ceil(2);
    let one = client(vec![engine("first", first_endpoint.clone(), jobs)]);
    let pool = client(vec![
        engine("first", first_endpoint.clone(), first_half),
        engine(
            "second",
            Endpoint::Unix(second_socket.clone()),
            jobs - first_half,
        ),
    ]);
    let implicit = client(vec![EngineOptions::implicit()]);

    // Every engine of the pool reached, the profile ready on it; then a
    // warm-up batch per client (connections, image checks, sweeps), untimed.
    runtime.block_on(check_pool(&pool, &second_socket));
    for (label, backends) in [("one", &one), ("pool", &pool), ("implicit", &implicit)] {
        warm_up(&runtime, label, backends, jobs, "first");
    }

    println!(
        "{count} programs x 2 cases, {jobs} at a time: one engine (first, capacity {jobs}) vs a \
         pool of two on this machine (first {first_half} + second {}), plus the implicit engine; \
         {rounds} interleaved rounds",
        jobs - first_half
    );
    let mut rows = Vec::new();
    let mut pool_engines: BTreeMap<String, usize> = BTreeMap::new();
    for round in 1..=rounds {
        let (one_wall, _) = runtime.block_on(run_batch(
            &one,
            &format!("r{round}-one"),
            count,
            jobs,
            "first",
        ));
        let (pool_wall, engines) = runtime.block_on(run_batch(
            &pool,
            &format!("r{round}-pool"),
            count,
            jobs,
            "first",
        ));
        let (implicit_wall, _) = runtime.block_on(run_batch(
            &implicit,
            &format!("r{round}-implicit"),
            count,
            jobs,
            "first",
        ));
        assert!(
            engines.contains_key("first") && engines.contains_key("second"),
            "round {round}: the pool ran programs on one engine only: {engines:?}"
        );
        for (name, n) in engines {
            *pool_engines.entry(name).or_default() += n;
        }
        rows.push((round, one_wall, pool_wall, implicit_wall));
    }

    println!();
    println!(
        "  {:>5} {:>9} {:>11} {:>9} {:>11} {:>9} {:>13} {:>11} {:>13}",
        "round",
        "one (s)",
        "programs/s",
        "pool (s)",
        "programs/s",
        "pool/one",
        "implicit (s)",
        "programs/s",
        "implicit/one"
    );
    let per_second = |wall: Duration| count as f64 / wall.as_secs_f64();
    let mut ratios = Vec::new();
    for (round, one_wall, pool_wall, implicit_wall) in &rows {
        let ratio = pool_wall.as_secs_f64() / one_wall.as_secs_f64();
        ratios.push(ratio);
        println!(
            "  {:>5} {:>9.2} {:>11.2} {:>9.2} {:>11.2} {:>9.3} {:>13.2} {:>11.2} {:>13.3}",
            round,
            one_wall.as_secs_f64(),
            per_second(*one_wall),
            pool_wall.as_secs_f64(),
            per_second(*pool_wall),
            ratio,
            implicit_wall.as_secs_f64(),
            per_second(*implicit_wall),
            implicit_wall.as_secs_f64() / one_wall.as_secs_f64()
        );
    }
    let median = median(&mut ratios);
    println!(
        "  programs per engine in the pool rounds: {}",
        pool_engines
            .iter()
            .map(|(name, n)| format!("{name} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("  median pool/one: {median:.3}");
    let overhead = (median - 1.0) * 100.0;
    if median < 1.10 {
        println!("  pool overhead {overhead:+.1}%: under 10% (target met)");
    } else {
        println!("  pool overhead {overhead:+.1}%: NOT under 10% (target missed)");
    }
    drop((one, pool, implicit));

    // Delivery to an engine elsewhere: the second engine alone, on its unix
    // socket (bind mounts) and over TLS (volumes), capacity C each.
    let tls_endpoint = second_tls_endpoint();
    assert!(Endpoint::Unix(second_socket.clone()).is_local() && !tls_endpoint.is_local());
    let unix = client(vec![engine(
        "second",
        Endpoint::Unix(second_socket.clone()),
        jobs,
    )]);
    let tls = client(vec![engine("second-tls", tls_endpoint.clone(), jobs)]);
    runtime.block_on(check_pool(&unix, &second_socket));
    runtime.block_on(check_pool(&tls, &second_socket));
    runtime.block_on(require_same_engine(&second_socket, &tls_endpoint));
    for (label, backends) in [("unix", &unix), ("tls", &tls)] {
        warm_up(&runtime, label, backends, jobs, label);
    }

    println!();
    println!(
        "delivery to an engine elsewhere: {count} programs x 2 cases, {jobs} at a time, on the \
         second engine alone (capacity {jobs}): its unix socket {} (bind mounts) vs the same \
         engine over TLS at {} (volumes); {rounds} interleaved rounds, the order alternating",
        Endpoint::Unix(second_socket.clone()).url(),
        tls_endpoint.url()
    );
    let mut delivery_rows = Vec::new();
    for round in 1..=rounds {
        let mut unix_wall = Duration::ZERO;
        let mut tls_wall = Duration::ZERO;
        let order = if round % 2 == 1 {
            ["unix", "tls"]
        } else {
            ["tls", "unix"]
        };
        for label in order {
            let (backends, wall) = if label == "unix" {
                (&unix, &mut unix_wall)
            } else {
                (&tls, &mut tls_wall)
            };
            let (elapsed, engines) = runtime.block_on(run_batch(
                backends,
                &format!("d{round}-{label}"),
                count,
                jobs,
                label,
            ));
            assert_eq!(
                engines.keys().collect::<Vec<_>>(),
                [label],
                "round {round}: {engines:?}"
            );
            *wall = elapsed;
        }
        delivery_rows.push((round, unix_wall, tls_wall));
    }

    println!();
    println!(
        "  {:>5} {:>9} {:>11} {:>9} {:>11} {:>9}",
        "round", "unix (s)", "programs/s", "tls (s)", "programs/s", "tls/unix"
    );
    let mut delivery_ratios = Vec::new();
    for (round, unix_wall, tls_wall) in &delivery_rows {
        let ratio = tls_wall.as_secs_f64() / unix_wall.as_secs_f64();
        delivery_ratios.push(ratio);
        println!(
            "  {:>5} {:>9.2} {:>11.2} {:>9.2} {:>11.2} {:>9.3}",
            round,
            unix_wall.as_secs_f64(),
            per_second(*unix_wall),
            tls_wall.as_secs_f64(),
            per_second(*tls_wall),
            ratio
        );
    }
    let delivery_median = crate::median(&mut delivery_ratios);
    println!("  median tls/unix: {delivery_median:.3}");
    println!(
        "  delivery through volumes over TLS: {:+.1}% wall time",
        (delivery_median - 1.0) * 100.0
    );
}

/// The second engine over mutual TLS, with the client files of
/// `scripts/second-engine.sh`.
fn second_tls_endpoint() -> Endpoint {
    let dir = Path::new(SECOND_TLS_DIR);
    let files = progscore_docker::TlsFiles {
        ca: dir.join("ca.pem"),
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    for file in [&files.ca, &files.cert, &files.key] {
        assert!(
            file.exists(),
            "no {}: run bash scripts/second-engine.sh start",
            file.display()
        );
    }
    Endpoint::Tcp {
        address: SECOND_TLS_ADDRESS.into(),
        tls: Some(files),
    }
}

/// The engine over TLS is the one on the socket (same engine ID), so the
/// second table compares two ways to one daemon, not two daemons.
/// Called after the TLS client reached the engine: that installed rustls's
/// process-wide crypto provider, which bollard's TLS transport needs.
async fn require_same_engine(socket: &Path, tls: &Endpoint) {
    let Endpoint::Tcp {
        address,
        tls: Some(files),
    } = tls
    else {
        panic!("not a TLS endpoint: {}", tls.url());
    };
    let unix = bollard::Docker::connect_with_unix(
        &socket.display().to_string(),
        10,
        bollard::API_DEFAULT_VERSION,
    )
    .expect("the second engine's socket");
    let remote = bollard::Docker::connect_with_ssl(
        address,
        &files.key,
        &files.cert,
        &files.ca,
        10,
        bollard::API_DEFAULT_VERSION,
    )
    .unwrap_or_else(|e| panic!("cannot open {}: {e}", tls.url()));
    let unix_id = unix.info().await.expect("info over the socket").id;
    let remote_id = remote
        .info()
        .await
        .unwrap_or_else(|e| panic!("info over {}: {e}", tls.url()))
        .id;
    assert!(
        unix_id.is_some() && unix_id == remote_id,
        "unix://{} ({unix_id:?}) and {} ({remote_id:?}) are not the same engine",
        socket.display(),
        tls.url()
    );
}

/// The second engine's socket (PROGSCORE_SECOND_ENGINE, a unix:// URL).
fn second_socket() -> PathBuf {
    let url = std::env::var("PROGSCORE_SECOND_ENGINE")
        .unwrap_or_else(|_| "unix:///run/docker-second.sock".into());
    match Endpoint::parse(&url, None, None) {
        Ok(Endpoint::Unix(path)) => path,
        Ok(other) => panic!(
            "PROGSCORE_SECOND_ENGINE: {} is not a unix socket (the bench needs an engine on this machine)",
            other.url()
        ),
        Err(e) => panic!("PROGSCORE_SECOND_ENGINE: {e}"),
    }
}

/// Fails with what to do when the second engine does not answer.
async fn require_second_engine(socket: &Path) {
    let hint = "run bash scripts/second-engine.sh start";
    assert!(
        socket.exists(),
        "no second Docker engine at unix://{}: {hint}",
        socket.display()
    );
    let docker = bollard::Docker::connect_with_unix(
        &socket.display().to_string(),
        10,
        bollard::API_DEFAULT_VERSION,
    )
    .unwrap_or_else(|e| {
        panic!(
            "cannot open the second Docker engine at unix://{}: {e}; {hint}",
            socket.display()
        )
    });
    if let Err(e) = docker.ping().await {
        panic!(
            "the second Docker engine at unix://{} does not answer: {e}; {hint}",
            socket.display()
        );
    }
}

/// Both engines of the pool reached and ready for the profile (a pool runs
/// on without an engine that is down, which would make this a one-engine run).
async fn check_pool(pool: &Backends, second: &Path) {
    let reports = pool.docker_report().await.expect("a Docker client");
    for report in &reports {
        let profile_ok = report.profiles.iter().all(|p| p.ok);
        let hint = if report.name.starts_with("second") {
            format!(
                "; run bash scripts/second-engine.sh start (socket unix://{})",
                second.display()
            )
        } else {
            String::new()
        };
        assert!(
            report.engine_ok && profile_ok,
            "engine `{}` at {} is not ready: {} {:?} {:?}{hint}",
            report.name,
            report.endpoint,
            report.engine,
            report.problems,
            report
                .profiles
                .iter()
                .map(|p| format!("{}: {}", p.profile, p.detail))
                .collect::<Vec<_>>()
        );
    }
}

/// Runs `count` distinct programs (distinct per `tag`), `jobs` at a time,
/// checks every case's stdout; returns the wall time and the programs per
/// engine (`single` for a client of one engine, whose provenance names none).
async fn run_batch(
    backends: &Backends,
    tag: &str,
    count: usize,
    jobs: usize,
    single: &str,
) -> (Duration, BTreeMap<String, usize>) {
    let programs: Vec<(String, [i64; 2])> = (0..count)
        .map(|i| {
            (
                format!(
                    "import sys\nn = int(sys.argv[1])\nprint(n * n)\n# engines bench {tag} program {i} {}\n",
                    std::process::id()
                ),
                [(i % 50) as i64 + 2, -((i % 30) as i64 + 3)],
            )
        })
        .collect();
    let started = Instant::now();
    let engines: Vec<String> = futures_util::stream::iter(programs.iter())
        .map(|(program, cases)| async move {
            let invocations: Vec<Invocation> = cases
                .iter()
                .map(|n| Invocation::with_args([n.to_string()]))
                .collect();
            let run = backends
                .execute(program.as_bytes(), PROFILE, &invocations)
                .await
                .unwrap_or_else(|e| panic!("{tag}: {e}"));
            assert_eq!(run.events.len(), cases.len(), "{tag}: {run:?}");
            let mut names = std::collections::BTreeSet::new();
            for (event, n) in run.events.iter().zip(cases) {
                let square = format!("{}\n", n * n);
                assert!(
                    matches!(event.outcome, Outcome::Exited { exit_code: 0 })
                        && event.stdout.data.as_bytes() == square.as_bytes(),
                    "{tag}: expected {square:?}: {run:?}"
                );
                names.insert(
                    event
                        .provenance
                        .as_ref()
                        .and_then(|p| p.engine_name.clone())
                        .unwrap_or_else(|| single.to_string()),
                );
            }
            assert_eq!(names.len(), 1, "{tag}: one program, one engine: {names:?}");
            names.into_iter().next().expect("one engine")
        })
        .buffer_unordered(jobs)
        .collect()
        .await;
    let wall = started.elapsed();
    let mut per_engine = BTreeMap::new();
    for name in engines {
        *per_engine.entry(name).or_default() += 1;
    }
    (wall, per_engine)
}

/// The client's preflight, then one untimed batch (connections, image
/// checks, sweeps); a single engine's programs count as `count_as`.
fn warm_up(
    runtime: &tokio::runtime::Runtime,
    label: &str,
    backends: &Backends,
    jobs: usize,
    count_as: &str,
) {
    runtime
        .block_on(backends.preflight(PROFILE))
        .unwrap_or_else(|e| panic!("{label}: preflight: {e}"));
    runtime.block_on(run_batch(
        backends,
        &format!("warm-{label}"),
        jobs,
        jobs,
        count_as,
    ));
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}
