//! The WASI backend's own concerns against the real CPython WASI module:
//! pinned artifacts, provenance, workspaces, cancellation, worker processes,
//! fuel and the CPU-time limit. What a program can and cannot do under it is
//! the conformance battery's (`tests/conformance`), run there beside runc
//! and gVisor, with guests in worker processes and in-process.
//!
//! Needs `scripts/setup-wasi.sh` to have run (it writes the profile fragment
//! these tests read). The compiled module is cached where progscore itself
//! keeps it (`WasiOptions`' default cache folder), so the module is compiled
//! once per machine, by whichever of these tests, the end-to-end tests or a
//! `progscore` run comes first; within this binary, by one test while the
//! others wait ([`compiled`]): two compiles at once of the 100 MB module
//! took minutes each on 2 cores.

use progscore_sandbox::SandboxClientExt as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use progscore_sandbox::{
    Invocation, Outcome, ProfileSpec, ProgramRun, RuntimeProfile, SandboxClient, SandboxError,
};
use progscore_wasi::{Execution, WasiClient, WasiOptions, WorkerCommand};

const FRAGMENT: &str = "/var/cache/progscore/wasi-profile.toml";
const WORKER: &str = env!("CARGO_BIN_EXE_progscore-wasi-worker");

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

/// Where progscore keeps compiled modules by default: shared with the
/// end-to-end tests' `progscore` runs and kept across checkouts.
fn cache_dir() -> PathBuf {
    WasiOptions::in_process().cache_dir
}

/// The standard profile's module compiled into the cache, once for this
/// binary: every test that makes a client of its own waits for it first, so
/// that no two tests compile the same module at once.
async fn compiled() {
    static COMPILED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    COMPILED
        .get_or_init(|| async { client().prepare("wasi").await.expect("prepare") })
        .await;
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

async fn square(client: &WasiClient, profile: &str) -> ProgramRun {
    let run = client
        .execute(
            b"import sys\nprint(int(sys.argv[1]) ** 2)\n",
            profile,
            &[Invocation::with_args(["3"])],
        )
        .await
        .expect("run");
    assert_eq!(
        run.events[0].outcome,
        Outcome::Exited { exit_code: 0 },
        "{run:#?}"
    );
    assert_eq!(run.events[0].stdout.data.as_bytes(), b"9\n");
    run
}

#[tokio::test]
async fn square_with_argv_and_provenance() {
    let run = square(client(), "wasi").await;
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
async fn without_scratch_there_is_no_tmp() {
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
    compiled().await;
    let root = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .expect("tempdir");
    let client = WasiClient::new(profiles(), options(execution, root.path())).expect("client");
    client.prepare("wasi-scratch").await.expect("prepare");
    let program = b"import time\nopen('/tmp/mark', 'w').write('x')\nprint('sleeping', flush=True)\ntime.sleep(60)\n";
    let invocations = [Invocation::default()];
    let mut execute = client.execute(program, "wasi-scratch", &invocations);
    // Dropped once the guest is inside its sleep: its mark is in a scratch folder.
    let mark_written = async {
        loop {
            let marks = walk(client.owner_dir())
                .into_iter()
                .filter(|p| p.ends_with("mark"))
                .count();
            if marks > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        run = &mut execute => panic!("the guest should still be sleeping: {run:?}"),
        () = mark_written => {}
    }
    drop(execute);
    // The cleanup happened inside that drop.
    let left = walk(client.owner_dir());
    assert!(left.is_empty(), "left behind: {left:?}");
    // The client still works afterwards.
    square(&client, "wasi").await;
}

/// Every file and folder below `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
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
// Compiles a second, fuel-metered module (about a minute, once per machine).
async fn fuel_runs_out_as_timed_out() {
    // After the standard module: one compile at a time.
    compiled().await;
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

/// A worker process that dies in the middle of a run: the invocation is a
/// sandbox error (the program's behaviour is unknown), the later ones are
/// not run, and the client goes on with a new worker.
#[tokio::test]
async fn a_crashed_worker_is_a_sandbox_error() {
    compiled().await;
    let root = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .expect("tempdir");
    // A tag in the worker's environment finds this test's worker, and no other.
    let tag = format!("crash-{}", std::process::id());
    let mut command = WorkerCommand::new(WORKER);
    command
        .env
        .push(("PROGSCORE_TEST_WORKER".into(), tag.clone().into()));
    let execution = Execution::Workers {
        command,
        workers: 1,
    };
    let client = WasiClient::new(profiles(), options(execution, root.path())).expect("client");
    client.prepare("wasi").await.expect("prepare");
    let program = b"import time\nprint('started', flush=True)\ntime.sleep(60)\n";
    let invocations = [Invocation::default(), Invocation::default()];
    let run = client.execute(program, "wasi", &invocations);
    let kill = async {
        loop {
            if let Some(pid) = worker_tagged(&tag) {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (run, ()) = tokio::join!(run, kill);
    let run = run.expect("run");
    assert!(
        matches!(&run.events[0].outcome, Outcome::SandboxError { message } if message.contains("worker")),
        "{run:#?}"
    );
    assert!(
        matches!(run.events[1].outcome, Outcome::NotRun { .. }),
        "{run:#?}"
    );
    square(&client, "wasi").await;
}

/// The pid of the worker whose environment holds `tag`.
fn worker_tagged(tag: &str) -> Option<i32> {
    let needle = format!("PROGSCORE_TEST_WORKER={tag}");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            environ
                .split(|&b| b == 0)
                .any(|var| var == needle.as_bytes())
                .then_some(pid)
        })
}

/// The CPU-time limit is the guest thread's CPU time: exceeding it is a
/// proven timeout, long before the wall limit; CPU time and memory are
/// reported for every run.
#[tokio::test]
async fn the_cpu_time_limit_and_usage_figures() {
    compiled().await;
    let limited = profile("wasi-cpu", |s| s.limits.cpu_time = Some("300ms".into()));
    let root = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .expect("tempdir");
    let execution = Execution::Workers {
        command: WorkerCommand::new(WORKER),
        workers: 1,
    };
    let client = WasiClient::new([limited], options(execution, root.path())).expect("client");
    let run = client
        .execute(
            b"while True:\n    pass\n",
            "wasi-cpu",
            &[Invocation::default()],
        )
        .await
        .expect("run");
    assert_eq!(
        run.events[0].outcome,
        Outcome::TimedOut {
            limit: progscore_sandbox::TimeLimit::Cpu,
            unconfirmed: None
        },
        "{run:#?}"
    );
    let usage = run.events[0].usage.clone().expect("usage");
    assert!(usage.cpu_ms.is_some_and(|cpu| cpu >= 300), "{usage:?}");
    assert!(
        usage.peak_memory_bytes.is_some_and(|peak| peak > 0),
        "{usage:?}"
    );
}

/// A refused memory growth is the program's to handle: one that catches
/// the `MemoryError` and exits on its own (whatever the code, 1 included)
/// gets its exit; one that lets it go uncaught (or traps) hit the limit.
#[tokio::test]
async fn an_exit_after_a_refused_growth_is_the_programs_own() {
    let grow =
        "try:\n    x = bytearray(1 << 30)\nexcept MemoryError:\n    print('caught', flush=True)\n";
    let cases: [(String, Outcome); 6] = [
        (
            format!("import sys\n{grow}    sys.exit(1)\n"),
            Outcome::Exited { exit_code: 1 },
        ),
        (
            format!("import os\n{grow}    os._exit(1)\n"),
            Outcome::Exited { exit_code: 1 },
        ),
        (
            format!("import sys\n{grow}    sys.exit(3)\n"),
            Outcome::Exited { exit_code: 3 },
        ),
        (
            format!("{grow}    pass\n"),
            Outcome::Exited { exit_code: 0 },
        ),
        ("x = bytearray(1 << 30)\n".to_string(), Outcome::MemoryLimit),
        (
            "blocks = []\nwhile True:\n    blocks.append(bytearray(8 << 20))\n".to_string(),
            Outcome::MemoryLimit,
        ),
    ];
    for (program, expected) in cases {
        let run = client()
            .execute(
                program.as_bytes(),
                "wasi-small-memory",
                &[Invocation::default()],
            )
            .await
            .expect("run");
        assert_eq!(run.events[0].outcome, expected, "{program}\n{run:#?}");
        if expected != Outcome::MemoryLimit {
            assert_eq!(run.events[0].stdout.data.as_bytes(), b"caught\n");
        }
    }
}
