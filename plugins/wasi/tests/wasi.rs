//! The WASI backend against the real CPython WASI module.
//!
//! Needs `scripts/setup-wasi.sh` to have run (it writes the profile fragment
//! these tests read). The compiled module is cached in the target folder, so
//! only the first run of this binary on a machine compiles it (about a minute).

mod probes;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use progscore_sandbox::{
    Invocation, Outcome, ProfileSpec, ProgramRun, RuntimeProfile, SandboxClient, SandboxError,
};
use progscore_wasi::{Execution, WasiClient, WasiOptions, WorkerCommand};

use probes::{Isolation, Probe};

const FRAGMENT: &str = "/var/cache/progscore/wasi-profile.toml";
const WORKER: &str = env!("CARGO_BIN_EXE_progscore-wasi-worker");
/// Deadline for the probes that must time out, and the slack allowed past it.
const SHORT_TIMEOUT: Duration = Duration::from_secs(1);
const GRACE: Duration = Duration::from_secs(2);

/// The profile `scripts/setup-wasi.sh` wrote.
fn base_spec() -> ProfileSpec {
    let text = std::fs::read_to_string(FRAGMENT)
        .unwrap_or_else(|e| panic!("{FRAGMENT}: {e}; run scripts/setup-wasi.sh first"));
    let mut table: toml::Table = toml::from_str(&text).expect("the fragment is TOML");
    let profiles = table.remove("profiles").expect("a [profiles] table");
    let mut profiles: toml::Table = profiles.try_into().expect("profiles is a table");
    let spec = profiles
        .remove("python-wasi")
        .expect("[profiles.python-wasi]");
    spec.try_into().expect("a valid profile spec")
}

fn profile(name: &str, edit: impl FnOnce(&mut ProfileSpec)) -> RuntimeProfile {
    let mut spec = base_spec();
    spec.limits.timeout = "20s".into();
    edit(&mut spec);
    RuntimeProfile::from_spec(name, &spec, Path::new("/")).expect("profile")
}

fn profiles() -> Vec<RuntimeProfile> {
    vec![
        profile("wasi", |_| {}),
        profile("wasi-short", |s| s.limits.timeout = "1s".into()),
        profile("wasi-small-output", |s| s.limits.output = "4KiB".into()),
        profile("wasi-small-memory", |s| s.limits.memory = "128MiB".into()),
        profile("wasi-scratch", |s| s.scratch = true),
    ]
}

fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("wasi-cache")
}

fn options(execution: Execution, owner_root: &Path) -> WasiOptions {
    WasiOptions {
        cache_dir: cache_dir(),
        owner_root: owner_root.to_path_buf(),
        execution,
    }
}

/// One client for the whole binary: the module is verified and loaded once.
fn client() -> &'static WasiClient {
    static CLIENT: OnceLock<WasiClient> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let execution = Execution::Workers {
            command: WorkerCommand::new(WORKER),
            workers: 2,
        };
        WasiClient::new(
            profiles(),
            options(execution, &progscore_sandbox::default_owner_root()),
        )
        .expect("client")
    })
}

async fn run_probe(client: &WasiClient, profile: &str, probe: Probe) -> ProgramRun {
    let run = client
        .execute(&probe.program, profile, &probe.invocations)
        .await
        .unwrap_or_else(|e| panic!("{}: refused: {e}", probe.name));
    if let Err(message) = (probe.check)(&run) {
        panic!("{} under {profile}: {message}\nrun: {run:#?}", probe.name);
    }
    run
}

#[tokio::test]
async fn square_with_argv_and_provenance() {
    let run = run_probe(client(), "wasi", probes::square()).await;
    let provenance = run.events[0].provenance.as_ref().expect("provenance");
    assert_eq!(provenance.backend, "wasi");
    assert_eq!(
        provenance.runtime,
        format!("wasmtime {}", progscore_wasi::WASMTIME_VERSION)
    );
    let profile = client().profile("wasi").expect("profile");
    let progscore_sandbox::Artifact::WasmModule { module, .. } = &profile.artifact else {
        panic!("not a wasm profile");
    };
    assert_eq!(provenance.artifact, format!("sha256:{}", module.sha256));
    let mut argv = profile.command.clone();
    argv.extend(["/program/main.py".to_string(), "3".to_string()]);
    assert_eq!(provenance.command, argv);
    assert_eq!(provenance.limits, profile.limits);
    assert!(
        run.sandbox_warnings.is_empty(),
        "{:?}",
        run.sandbox_warnings
    );
}

#[tokio::test]
async fn common_probes() {
    for probe in probes::common() {
        run_probe(client(), "wasi", probe).await;
    }
}

#[tokio::test]
async fn no_host_paths() {
    run_probe(
        client(),
        "wasi",
        probes::no_host_paths(Isolation::WasiPreopens),
    )
    .await;
    run_probe(
        client(),
        "wasi-scratch",
        probes::no_host_paths(Isolation::WasiPreopens),
    )
    .await;
}

#[tokio::test]
async fn subprocess_and_fork_are_ordinary_failures() {
    // Explicitly: WASI has no processes, so there is no fork bomb to contain;
    // the attempt is an exception inside the program.
    run_probe(client(), "wasi", probes::no_subprocess()).await;
}

#[tokio::test]
async fn busy_loop_and_sleep_time_out_within_the_deadline() {
    // Verify and compile first (about a minute on a fresh target folder), so
    // the clock below measures the invocation, not the compiler.
    client().prepare("wasi-short").await.expect("prepare");
    for probe in [probes::busy_loop(), probes::long_sleep()] {
        let name = probe.name;
        let started = Instant::now();
        let run = run_probe(client(), "wasi-short", probe).await;
        let took = started.elapsed();
        assert!(took < SHORT_TIMEOUT + GRACE, "{name}: took {took:?}");
        assert!(
            run.events[0].duration_ms >= 900,
            "{name}: {} ms",
            run.events[0].duration_ms
        );
    }
}

#[tokio::test]
async fn memory_hog_hits_the_limit() {
    let run = run_probe(client(), "wasi-small-memory", probes::memory_hog()).await;
    assert_eq!(run.events[0].outcome, Outcome::MemoryLimit, "{run:#?}");
    // The host is fine: the next program runs.
    run_probe(client(), "wasi-small-memory", probes::square()).await;
}

#[tokio::test]
async fn output_flood_is_truncated_and_counted() {
    run_probe(client(), "wasi-small-output", probes::output_flood(4096)).await;
}

#[tokio::test]
async fn scratch_is_writable_and_fresh_per_invocation() {
    run_probe(client(), "wasi-scratch", probes::scratch_is_fresh()).await;
    // Without `scratch`, /tmp does not exist.
    let program = b"open('/tmp/x', 'w')\n";
    let run = client()
        .execute(program, "wasi", &[Invocation::default()])
        .await
        .expect("run");
    assert_eq!(run.events[0].outcome, Outcome::Exited { exit_code: 1 });
}

#[tokio::test]
async fn a_sandbox_error_stops_later_invocations() {
    // Not a sandbox error: a failing program does not stop the next invocation.
    let invocations = [Invocation::with_args(["x"]), Invocation::with_args(["4"])];
    let run = client()
        .execute(
            b"import sys\nprint(int(sys.argv[1]) ** 2)\n",
            "wasi",
            &invocations,
        )
        .await
        .expect("run");
    assert_eq!(run.events[0].outcome, Outcome::Exited { exit_code: 1 });
    assert_eq!(run.events[1].outcome, Outcome::Exited { exit_code: 0 });
    assert_eq!(run.events[1].stdout.data.as_bytes(), b"16\n");
}

#[tokio::test]
async fn a_wrong_sha256_is_refused_naming_both_hashes() {
    let wrong = "0".repeat(64);
    let bad = profile("wasi-bad-pin", |s| {
        if let Some(module) = s.module.as_mut() {
            module.sha256 = wrong.clone();
        }
    });
    let scratch = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .expect("tempdir");
    let client = WasiClient::new(
        [bad],
        options(Execution::InProcess { parallelism: 1 }, scratch.path()),
    )
    .expect("client");
    let err = client
        .execute(b"print(1)\n", "wasi-bad-pin", &[Invocation::default()])
        .await
        .expect_err("refused");
    let message = err.to_string();
    assert!(
        matches!(err, SandboxError::ArtifactRefused { .. }),
        "{err:?}"
    );
    let actual = base_spec().module.expect("module").sha256;
    assert!(
        message.contains(&wrong) && message.contains(&actual),
        "{message}"
    );
}

#[tokio::test]
async fn a_missing_module_names_the_setup_script() {
    let missing = profile("wasi-missing", |s| {
        if let Some(module) = s.module.as_mut() {
            module.path = "/nonexistent/python.wasm".into();
        }
    });
    let scratch = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .expect("tempdir");
    let client = WasiClient::new(
        [missing],
        options(Execution::InProcess { parallelism: 1 }, scratch.path()),
    )
    .expect("client");
    let err = client
        .execute(b"print(1)\n", "wasi-missing", &[Invocation::default()])
        .await
        .expect_err("refused");
    assert!(
        matches!(err, SandboxError::ArtifactMissing { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("setup-wasi.sh"), "{err}");
    assert!(matches!(
        client.execute(b"", "nope", &[]).await,
        Err(SandboxError::UnknownProfile { .. })
    ));
}

/// Drops `execute` while the guest sleeps; when the drop returns, the guest has
/// stopped and the workspace (with its scratch folder) is gone.
async fn cancellation_leaves_nothing(execution: Execution) {
    let root = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .expect("tempdir");
    let client = WasiClient::new(profiles(), options(execution, root.path())).expect("client");
    client.prepare("wasi-scratch").await.expect("prepare");
    let program = b"import time\nopen('/tmp/mark', 'w').write('x')\nprint('sleeping', flush=True)\ntime.sleep(60)\n";
    let invocations = [Invocation::default()];
    let execute = client.execute(program, "wasi-scratch", &invocations);
    let started = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_millis(1500), execute).await;
    assert!(outcome.is_err(), "the program should still be running");
    // The timeout dropped the future; cleanup happened inside that drop.
    assert!(started.elapsed() < Duration::from_secs(5));
    let left: Vec<_> = std::fs::read_dir(client.owner_dir())
        .expect("read the owner folder")
        .map(|entry| entry.map(|e| e.path()))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    // The client still works afterwards.
    run_probe(&client, "wasi", probes::square()).await;
}

#[tokio::test]
async fn cancellation_with_workers_leaves_no_workspace() {
    cancellation_leaves_nothing(Execution::Workers {
        command: WorkerCommand::new(WORKER),
        workers: 1,
    })
    .await;
}

#[tokio::test]
async fn cancellation_in_process_leaves_no_workspace() {
    cancellation_leaves_nothing(Execution::InProcess { parallelism: 1 }).await;
}

#[tokio::test]
async fn in_process_execution_runs_the_same_probes() {
    let root = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .expect("tempdir");
    let client = WasiClient::new(
        profiles(),
        options(Execution::InProcess { parallelism: 2 }, root.path()),
    )
    .expect("client");
    run_probe(&client, "wasi", probes::square()).await;
    run_probe(&client, "wasi", probes::stdin_exact()).await;
    run_probe(&client, "wasi-short", probes::long_sleep()).await;
    run_probe(&client, "wasi-small-memory", probes::memory_hog()).await;
}

#[tokio::test]
// Compiles a second, fuel-metered module (about a minute, once per machine).
async fn fuel_runs_out_as_timed_out() {
    let fueled = profile("wasi-fuel", |s| s.limits.fuel = Some(500_000_000));
    let root = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .expect("tempdir");
    let client = WasiClient::new(
        [fueled],
        options(
            Execution::Workers {
                command: WorkerCommand::new(WORKER),
                workers: 1,
            },
            root.path(),
        ),
    )
    .expect("client");
    let run = client
        .execute(
            b"print('started')\nwhile True:\n    pass\n",
            "wasi-fuel",
            &[Invocation::default()],
        )
        .await
        .expect("run");
    // 500 M units are plenty for start-up and exit (about 50 M), so the
    // budget ran out in the program's own loop.
    assert_eq!(run.events[0].outcome, Outcome::timed_out(), "{run:#?}");
    assert_eq!(run.events[0].stdout.data.as_bytes(), b"started\n");
    assert!(
        run.sandbox_warnings.iter().any(|w| w.contains("fuel")),
        "{:?}",
        run.sandbox_warnings
    );
}
