//! One conformance battery for every backend: runc and gVisor (runsc) through
//! Docker, runc through a Docker engine reached over TCP with TLS (the
//! program delivered in volumes, nothing measured from this host's cgroups),
//! the same two run directly by the daemonless OCI backend, and WASI with
//! guests in worker processes and in-process.
//!
//! Each probe runs the same program through the contract (`SandboxClient`)
//! under each backend's profile and checks what a user relies on. Where a
//! backend cannot support a probe the probe says so in the test output, and
//! checks the documented alternative (e.g. under WASI, `fork` fails as an
//! ordinary exception), instead of skipping silently. No probe measures wall
//! time: each waits for the outcome that proves its point.

use progscore_sandbox::SandboxClientExt as _;
use std::collections::BTreeMap;
use std::path::Path;

use progscore_docker::{Capacity, DockerClient, DockerOptions, Endpoint, EngineOptions, TlsFiles};
use progscore_runtime::backends::Backends;
use progscore_sandbox::{
    ByteString, Invocation, Outcome, ProfileSpec, ProgramFiles, ProgramRun, RuntimeProfile,
    SandboxClient, SandboxError, TimeLimit, sha256_hex,
};
use progscore_wasi::{WasiClient, WasiOptions};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Runc,
    /// runc on the second engine (scripts/second-engine.sh), reached over
    /// TCP with mutual TLS as a remote engine is.
    RuncOverTls,
    Gvisor,
    /// WASI, guests in worker processes (what the CLI uses).
    Wasi,
    /// WASI, guests on threads of this process.
    WasiInProcess,
    /// The OCI backend with runc.
    OciRunc,
    /// The OCI backend with runsc.
    OciGvisor,
}

impl Kind {
    fn profile(self) -> &'static str {
        match self {
            Kind::Runc | Kind::RuncOverTls => "python",
            Kind::Gvisor => "python-gvisor",
            Kind::Wasi | Kind::WasiInProcess => "python-wasi",
            Kind::OciRunc => "python-oci",
            Kind::OciGvisor => "python-oci-gvisor",
        }
    }

    fn is_gvisor(self) -> bool {
        matches!(self, Kind::Gvisor | Kind::OciGvisor)
    }

    fn is_wasi(self) -> bool {
        matches!(self, Kind::Wasi | Kind::WasiInProcess)
    }

    /// The kind's profile with a compile step (not for WASI).
    fn compiled_profile(self) -> String {
        format!("{}-compiled", self.profile())
    }
}

/// The compile step of the `-compiled` profiles: the program is its own
/// build script (run with `--build`), so a probe decides what its compile
/// does: succeed, fail, loop, exhaust memory.
const BUILD_COMMAND: [&str; 3] = ["python3", "/sandbox/main.py", "--build"];
/// Their compile's time limit.
const COMPILE_TIMEOUT_MS: u64 = 3000;

const TIMEOUT: &str = "4s";
const PIDS: u32 = 32;
const OUTPUT: u64 = 4096;
const TMP: u64 = 1024 * 1024;

#[derive(serde::Deserialize)]
struct GeneratedConfig {
    profiles: BTreeMap<String, ProfileSpec>,
}

/// The generated profiles with tighter limits, so the probes are quick.
fn profiles() -> Vec<RuntimeProfile> {
    let path = progscore_e2e::generated_config();
    let text = std::fs::read_to_string(&path).expect("run scripts/setup.sh");
    let config: GeneratedConfig = toml::from_str(&text).expect("config");
    [
        Kind::Runc,
        Kind::Gvisor,
        Kind::Wasi,
        Kind::OciRunc,
        Kind::OciGvisor,
    ]
    .into_iter()
    .flat_map(|kind| {
        let mut spec = config
            .profiles
            .get(kind.profile())
            .unwrap_or_else(|| panic!("{} missing from {}", kind.profile(), path.display()))
            .clone();
        spec.limits.timeout = TIMEOUT.into();
        // Enough for 31 sleeping children under gVisor, whose own
        // kernel's memory counts too: the fork bomb must meet the
        // process limit, not the memory cap.
        spec.limits.memory = "192MiB".into();
        spec.limits.output = format!("{OUTPUT}B");
        spec.limits.pids = PIDS;
        if kind.is_wasi() {
            spec.scratch = true;
        } else {
            spec.limits.tmp = format!("{TMP}B");
        }
        let plain =
            RuntimeProfile::from_spec(kind.profile(), &spec, Path::new(".")).expect("profile");
        if kind.is_wasi() {
            return vec![plain];
        }
        spec.source = Some("main.py".into());
        spec.compile = Some(BUILD_COMMAND.map(String::from).to_vec());
        spec.compile_limits = Some(progscore_sandbox::PartialLimitsSpec {
            timeout: Some(format!("{COMPILE_TIMEOUT_MS}ms")),
            memory: Some("192MiB".into()),
            pids: Some(PIDS),
            tmp: Some(format!("{TMP}B")),
            ..Default::default()
        });
        spec.command = vec!["python3".into(), "/build/main.py".into()];
        let compiled = RuntimeProfile::from_spec(&kind.compiled_profile(), &spec, Path::new("."))
            .expect("compiled profile");
        vec![plain, compiled]
    })
    .collect()
}

/// One client per kind for the whole battery. The WASI module is verified and
/// compiled before any probe runs (about a minute on a fresh machine).
async fn client(kind: Kind) -> &'static dyn SandboxClient {
    static BACKENDS: tokio::sync::OnceCell<Backends> = tokio::sync::OnceCell::const_new();
    static IN_PROCESS: tokio::sync::OnceCell<WasiClient> = tokio::sync::OnceCell::const_new();
    static OVER_TLS: std::sync::OnceLock<DockerClient> = std::sync::OnceLock::new();
    if kind == Kind::RuncOverTls {
        return OVER_TLS.get_or_init(|| {
            let runc = profiles()
                .into_iter()
                .filter(|p| p.name == "python" || p.name == "python-compiled")
                .collect();
            let tls = Path::new("/var/lib/docker-second/tls");
            let options = DockerOptions {
                engines: vec![EngineOptions {
                    name: "over-tls".into(),
                    endpoint: Endpoint::Tcp {
                        address: "127.0.0.1:2376".into(),
                        tls: Some(TlsFiles {
                            ca: tls.join("ca.pem"),
                            cert: tls.join("cert.pem"),
                            key: tls.join("key.pem"),
                        }),
                    },
                    capacity: Capacity::PerCpu(progscore_docker::DEFAULT_CALLS_PER_CPU),
                }],
                ..DockerOptions::default()
            };
            DockerClient::new(runc, options).expect("client of the engine over TLS")
        });
    }
    if kind == Kind::WasiInProcess {
        return IN_PROCESS
            .get_or_init(|| async {
                let wasi = profiles().into_iter().filter(|p| p.name == "python-wasi");
                let client = WasiClient::new(wasi, WasiOptions::in_process()).expect("client");
                client.prepare("python-wasi").await.expect("prepare");
                client
            })
            .await;
    }
    BACKENDS
        .get_or_init(|| async {
            let backends = Backends::new(profiles()).expect("backends");
            for (profile, prepared) in backends.wasi_report().await {
                if let Err(err) = prepared {
                    panic!("{profile}: {err}");
                }
            }
            backends
        })
        .await
}

async fn run_all(kind: Kind, program: &str, invocations: &[Invocation]) -> ProgramRun {
    client(kind)
        .await
        .execute(program.as_bytes(), kind.profile(), invocations)
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: refused: {e}"))
}

async fn run(kind: Kind, program: &str, invocation: Invocation) -> ProgramRun {
    run_all(kind, program, &[invocation]).await
}

fn out(run: &ProgramRun) -> String {
    run.events[0].stdout.data.to_string_lossy()
}

fn exited(run: &ProgramRun) -> i64 {
    match &run.events[0].outcome {
        Outcome::Exited { exit_code } => *exit_code,
        other => panic!(
            "did not exit: {other:?}; stderr {}",
            run.events[0].stderr.data.to_string_lossy()
        ),
    }
}

/// Says, in the test output, that a backend cannot support a probe and what is
/// checked instead.
fn not_supported(kind: Kind, probe: &str, instead: &str) {
    println!("conformance: {probe} is not supported under {kind:?}; checking instead: {instead}");
}

macro_rules! battery {
    ($($probe:ident),* $(,)?) => {
        mod runc { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $probe() { super::$probe(super::Kind::Runc).await })* }
        mod runc_over_tls { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $probe() { super::$probe(super::Kind::RuncOverTls).await })* }
        mod gvisor { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $probe() { super::$probe(super::Kind::Gvisor).await })* }
        mod wasi { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $probe() { super::$probe(super::Kind::Wasi).await })* }
        mod wasi_in_process { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $probe() { super::$probe(super::Kind::WasiInProcess).await })* }
        mod oci_runc { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $probe() { super::$probe(super::Kind::OciRunc).await })* }
        mod oci_gvisor { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $probe() { super::$probe(super::Kind::OciGvisor).await })* }
    };
}

battery!(
    exit_codes_and_uncaught_exceptions,
    no_network,
    cannot_write_the_program_or_outside_scratch,
    not_root_and_no_host_paths,
    memory_hog_is_a_memory_limit,
    a_memory_error_is_the_programs_own,
    busy_loop_times_out,
    sleep_times_out,
    fork_bomb_is_stopped_by_the_process_limit,
    ten_megabytes_of_output_is_truncated_and_counted,
    stdin_and_argv_are_exact,
    program_bytes_are_verbatim,
    non_utf8_output_is_kept_as_bytes,
    orphans_do_not_keep_the_run_alive,
    scratch_is_fresh_per_invocation,
    the_scratch_folder_is_size_limited,
    exit_137_and_a_self_kill_stay_exits,
    dangerous_system_calls_fail,
    kernel_files_are_masked_and_apparmor_confines,
    a_compiled_program_runs_from_a_read_only_build,
    a_program_that_does_not_compile_is_a_compile_error,
    a_compile_past_its_limits_is_a_compile_error,
    a_compiler_saying_the_disk_is_full_is_judged_by_the_disk_it_used,
    a_programs_own_limits_apply_and_nothing_else_may_change,
    a_programs_files_are_beside_it_read_only_for_its_compile_and_cases,
    each_case_is_told_as_it_ends_and_is_the_runs_own_event,
);

/// A request's sink is told every case, in order, with the build it ran
/// against, and each told event is the one the run returns.
async fn each_case_is_told_as_it_ends_and_is_the_runs_own_event(kind: Kind) {
    let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = {
        let told = told.clone();
        progscore_sandbox::CaseSink::new(move |done| told.lock().unwrap().push(done))
    };
    let invocations: Vec<Invocation> = ["a", "b", "c"]
        .iter()
        .map(|arg| Invocation {
            args: vec![(*arg).to_string()],
            ..Invocation::default()
        })
        .collect();
    let program = "import sys\nprint(sys.argv[1])\n";
    let request =
        progscore_sandbox::RunRequest::new(program.as_bytes(), kind.profile(), &invocations)
            .on_case(sink);
    let run = client(kind)
        .await
        .run(request)
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: refused: {e}"));
    let told = told.lock().unwrap().clone();
    assert_eq!(
        told.iter().map(|done| done.index).collect::<Vec<_>>(),
        vec![0, 1, 2],
        "{kind:?}"
    );
    for (done, event) in told.iter().zip(&run.events) {
        assert_eq!(&done.event, event, "{kind:?}: case {}", done.index);
        assert_eq!(done.compile, run.compile, "{kind:?}");
    }
    assert_eq!(
        run.events
            .iter()
            .map(|e| e.stdout.data.to_string_lossy())
            .collect::<Vec<_>>(),
        vec!["a\n", "b\n", "c\n"],
        "{kind:?}"
    );
}

/// A program that is its own build script: with `--build` it runs `build`,
/// then copies itself into `/build`; otherwise it runs `body`.
fn self_building(build: &str, body: &str) -> String {
    format!(
        "import sys\nif sys.argv[1:] == ['--build']:\n{build}    open('/build/main.py', 'w').write(open('/sandbox/main.py').read())\n    print('built')\n    sys.exit(0)\n{body}"
    )
}

async fn run_compiled(kind: Kind, program: &str, invocations: &[Invocation]) -> Option<ProgramRun> {
    if kind.is_wasi() {
        not_supported(
            kind,
            "a compile step",
            "a profile with `compile` is refused when the config loads",
        );
        let spec: ProfileSpec = toml::from_str(
            "backend = \"wasi\"\ncommand = [\"python\"]\ncompile = [\"cc\"]\n\
             [module]\npath = \"m.wasm\"\nsha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\n",
        )
        .unwrap();
        let err = RuntimeProfile::from_spec("w", &spec, Path::new(".")).unwrap_err();
        assert!(err.to_string().contains("`compile`"), "{err}");
        return None;
    }
    let run = client(kind)
        .await
        .execute(program.as_bytes(), &kind.compiled_profile(), invocations)
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: refused: {e}"));
    Some(run)
}

async fn a_compiled_program_runs_from_a_read_only_build(kind: Kind) {
    let program = self_building(
        "",
        "print(int(sys.argv[1]) ** 2)\nfor path in ('/build/main.py', '/build/new', '/sandbox/main.py'):\n    try:\n        open(path, 'a').write('x')\n        print(path, 'writable')\n    except OSError:\n        print(path, 'refused')\n",
    );
    let invocations = [Invocation::with_args(["3"]), Invocation::with_args(["4"])];
    let Some(run) = run_compiled(kind, &program, &invocations).await else {
        return;
    };
    let compile = run.compile.as_ref().expect("a compile event");
    assert!(compile.succeeded(), "{kind:?}: {compile:?}");
    assert_eq!(compile.event.stdout.data.to_string_lossy(), "built\n");
    let provenance = compile.event.provenance.as_ref().unwrap();
    assert_eq!(provenance.command, BUILD_COMMAND);
    assert_eq!(provenance.limits.timeout_ms, COMPILE_TIMEOUT_MS);
    // The build is the program's bytes: its hash is the same every time.
    let artifact = compile.artifact_sha256.clone().expect("the build's hash");
    let again = run_compiled(kind, &program, &invocations[..1])
        .await
        .unwrap();
    assert_eq!(again.compile.unwrap().artifact_sha256, Some(artifact));
    for (event, square) in run.events.iter().zip(["9", "16"]) {
        assert_eq!(event.outcome, Outcome::Exited { exit_code: 0 }, "{event:?}");
        assert_eq!(
            event.stdout.data.to_string_lossy(),
            format!(
                "{square}\n/build/main.py refused\n/build/new refused\n/sandbox/main.py refused\n"
            )
        );
        let command = &event.provenance.as_ref().unwrap().command;
        assert_eq!(command[..2], ["python3", "/build/main.py"]);
    }
}

async fn a_program_that_does_not_compile_is_a_compile_error(kind: Kind) {
    let program = self_building(
        "    print('checking', file=sys.stderr)\n    raise SystemExit('error: no main() here')\n",
        "print(9)\n",
    );
    let Some(run) = run_compiled(
        kind,
        &program,
        &[Invocation::default(), Invocation::default()],
    )
    .await
    else {
        return;
    };
    let compile = run.compile.as_ref().unwrap();
    assert_eq!(
        compile.event.outcome,
        Outcome::Exited { exit_code: 1 },
        "{compile:?}"
    );
    assert_eq!(
        compile.event.stderr.data.to_string_lossy(),
        "checking\nerror: no main() here\n"
    );
    assert_eq!(compile.artifact_sha256, None);
    for event in &run.events {
        let Outcome::CompileError { reason } = &event.outcome else {
            panic!("{kind:?}: {event:?}");
        };
        assert_eq!(
            reason,
            "the compiler exited with code 1: error: no main() here"
        );
    }
    // A proven failure of the program, reusable as evidence.
    assert!(!run.rests_on_unproven_conditions());
}

async fn a_compiler_saying_the_disk_is_full_is_judged_by_the_disk_it_used(kind: Kind) {
    let program = self_building(
        "    raise SystemExit('/usr/bin/ld: final link failed: No space left on device')\n",
        "print(9)\n",
    );
    let Some(run) = run_compiled(kind, &program, &[Invocation::default()]).await else {
        return;
    };
    let compile = run.compile.as_ref().unwrap();
    if kind == Kind::RuncOverTls {
        // The engine's disk cannot be measured from here: its words decide.
        let Outcome::SandboxError { message } = &compile.event.outcome else {
            panic!("{kind:?}: a sandbox error expected: {compile:?}");
        };
        assert!(message.contains("says the disk is full"), "{message}");
        assert!(
            matches!(run.events[0].outcome, Outcome::NotRun { .. }),
            "{run:?}"
        );
        assert!(run.rests_on_unproven_conditions());
    } else {
        // This host's build disk has room (measured): the program's failure.
        assert_eq!(
            compile.event.outcome,
            Outcome::Exited { exit_code: 1 },
            "{kind:?}: {compile:?}"
        );
        assert!(
            matches!(run.events[0].outcome, Outcome::CompileError { .. }),
            "{run:?}"
        );
    }
}

async fn a_compile_past_its_limits_is_a_compile_error(kind: Kind) {
    let looping = self_building("    while True:\n        pass\n", "print(9)\n");
    let Some(run) = run_compiled(kind, &looping, &[Invocation::default()]).await else {
        return;
    };
    let compile = run.compile.as_ref().unwrap();
    assert_wall_timeout(kind, &compile.event.outcome, compile);
    let unproven = matches!(
        compile.event.outcome,
        Outcome::TimedOut {
            unconfirmed: Some(_),
            ..
        }
    );
    if kind == Kind::RuncOverTls || unproven {
        // Unproven (an engine elsewhere, or a machine too busy to prove
        // it): the cases are not run and nothing is reusable.
        assert!(
            matches!(run.events[0].outcome, Outcome::NotRun { .. }),
            "{run:?}"
        );
        assert!(run.rests_on_unproven_conditions());
    } else {
        assert_eq!(
            run.events[0].outcome,
            Outcome::CompileError {
                reason: "the compile timed out".into()
            }
        );
    }
    let hog = self_building(
        "    blocks = []\n    while True:\n        blocks.append(bytearray(8 * 1024 * 1024))\n",
        "print(9)\n",
    );
    let alone = ONE_MEMORY_KILL_AT_A_TIME.lock().await;
    let run = run_compiled(kind, &hog, &[Invocation::default()])
        .await
        .unwrap();
    drop(alone);
    let compile = &run.compile.as_ref().unwrap().event.outcome;
    assert_memory_limit(kind, compile, &run);
    if kind != Kind::RuncOverTls {
        assert_eq!(
            run.events[0].outcome,
            Outcome::CompileError {
                reason: "the compile exceeded its memory limit".into()
            }
        );
    }
}

async fn exit_codes_and_uncaught_exceptions(kind: Kind) {
    let square = run(
        kind,
        "import sys\nprint(int(sys.argv[1]) ** 2)\n",
        Invocation::with_args(["3"]),
    )
    .await;
    assert_eq!(exited(&square), 0, "{square:?}");
    assert_eq!(out(&square), "9\n");
    let three = run(
        kind,
        "import sys\nprint('bye')\nsys.exit(3)\n",
        Invocation::default(),
    )
    .await;
    assert_eq!(exited(&three), 3, "{three:?}");
    assert_eq!(out(&three), "bye\n");
    let raised = run(
        kind,
        "def f():\n    return 1 / 0\nf()\n",
        Invocation::default(),
    )
    .await;
    assert_eq!(exited(&raised), 1, "{raised:?}");
    let stderr = raised.events[0].stderr.data.to_string_lossy();
    assert!(
        stderr.contains("Traceback") && stderr.contains("ZeroDivisionError"),
        "{stderr}"
    );
}

async fn no_network(kind: Kind) {
    let program = "import socket\nfor what in ['connect', 'resolve']:\n    try:\n        if what == 'connect':\n            socket.create_connection(('1.1.1.1', 53), timeout=2)\n        else:\n            socket.getaddrinfo('example.com', 80)\n        print(what, 'allowed')\n    except Exception as e:\n        print(what, 'refused', type(e).__name__)\n";
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    let text = out(&run);
    assert!(
        text.contains("connect refused") && text.contains("resolve refused"),
        "{kind:?}: {text}"
    );
}

async fn cannot_write_the_program_or_outside_scratch(kind: Kind) {
    let program = "import sys\nfor path in (sys.argv[0], '/etc/probe', '/usr/probe', '/probe'):\n    try:\n        open(path, 'ab').write(b'x')\n        print(path, 'writable')\n    except Exception:\n        print(path, 'refused')\n";
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    let text = out(&run);
    assert!(!text.contains("writable"), "{kind:?}: {text}");
    assert_eq!(text.lines().count(), 4, "{text}");
}

async fn not_root_and_no_host_paths(kind: Kind) {
    let program = "import os\ntry:\n    print('root:', sorted(os.listdir('/')))\nexcept OSError as e:\n    print('root: unlistable', e.errno)\nfor p in ['/root', '/home', '/var/cache/progscore', '/proc/self/environ']:\n    print(p, os.path.exists(p))\ntry:\n    print('uid', os.getuid())\nexcept Exception as e:\n    print('uid unavailable')\n";
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    let text = out(&run);
    assert!(
        text.contains("/var/cache/progscore False"),
        "the host's folders are visible: {text}"
    );
    if kind.is_wasi() {
        // No users exist inside WASI; what matters is that no host path is visible.
        not_supported(kind, "not root", "only the preopened folders are visible");
        let root = text.lines().next().unwrap_or_default();
        if let Some(names) = root.strip_prefix("root: [") {
            let allowed = ["'program'", "'usr'", "'tmp'"];
            let extra: Vec<&str> = names
                .trim_end_matches(']')
                .split(", ")
                .filter(|n| !n.is_empty() && !allowed.contains(n))
                .collect();
            assert!(extra.is_empty(), "`/` lists more than the preopens: {root}");
        }
        for line in text.lines().filter(|l| l.starts_with('/')) {
            assert!(
                line.ends_with(" False"),
                "host path visible under WASI: {line}"
            );
        }
    } else {
        let uid_line = text.lines().find(|l| l.starts_with("uid")).unwrap();
        assert_ne!(uid_line, "uid 0", "{kind:?} runs as root");
    }
}

/// One memory kill at a time in this binary: a program's own kill is told
/// from the host's OOM killer by the host's count of OOM kills, and a kill
/// of another test's program at the same moment rightly makes it unknown
/// (a sandbox error), which is not what these tests look at.
static ONE_MEMORY_KILL_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The outcome of a program killed at its memory limit. An engine reached
/// over TLS is elsewhere as far as progscore knows: its cgroups cannot be
/// read, so its OOM report cannot tell the program's own limit from the
/// host's OOM killer, and the kill proves nothing (a sandbox error saying
/// so, never a wrong `memory_limit`).
fn assert_memory_limit(kind: Kind, outcome: &Outcome, run: &ProgramRun) {
    if kind == Kind::RuncOverTls {
        assert!(
            matches!(outcome, Outcome::SandboxError { message } if message.contains("cannot be read here")),
            "{kind:?}: {run:?}"
        );
    } else {
        assert_eq!(*outcome, Outcome::MemoryLimit, "{kind:?}: {run:?}");
    }
}

async fn memory_hog_is_a_memory_limit(kind: Kind) {
    let program = "blocks = []\nwhile True:\n    blocks.append(bytearray(8 * 1024 * 1024))\n";
    let alone = ONE_MEMORY_KILL_AT_A_TIME.lock().await;
    let run = run(kind, program, Invocation::default()).await;
    drop(alone);
    assert_memory_limit(kind, &run.events[0].outcome, &run);
    // The sandbox survives it: the next program runs.
    let next = run_all(kind, "print(9)\n", &[Invocation::default()]).await;
    assert_eq!(out(&next), "9\n");
}

async fn a_memory_error_is_the_programs_own(kind: Kind) {
    // 1 GiB: more than the cap, yet addressable by a 32-bit WASI guest.
    let program = "try:\n    x = bytearray(1 << 30)\n    print('allocated')\nexcept MemoryError:\n    print('caught')\n";
    let alone = ONE_MEMORY_KILL_AT_A_TIME.lock().await;
    let run = run(kind, program, Invocation::default()).await;
    drop(alone);
    if kind.is_wasi() {
        // Growth is refused: the program sees MemoryError and may recover.
        assert_eq!(exited(&run), 0, "{run:?}");
        assert_eq!(out(&run), "caught\n");
    } else {
        not_supported(
            kind,
            "a catchable MemoryError",
            "the kernel overcommits, so touching the memory is a memory_limit kill",
        );
        assert_memory_limit(kind, &run.events[0].outcome, &run);
    }
}

/// A wall-clock timeout as the backend can prove it. An engine elsewhere
/// measures neither the program's CPU time nor its waits, so nothing can tell
/// a slow program from a starved one: its timeout stays unconfirmed (the
/// verdict undetermined), never proven. Elsewhere it is proven, unless
/// other work on the machine starved the program even when it ran again
/// alone: then, and only with that reason, it stays unconfirmed (no test
/// may depend on the machine being quiet).
fn assert_wall_timeout(kind: Kind, outcome: &Outcome, run: &dyn std::fmt::Debug) {
    if let Outcome::TimedOut {
        limit: TimeLimit::Wall,
        unconfirmed: Some(why),
    } = outcome
        && kind != Kind::RuncOverTls
        && why.contains("even running alone")
        && why.contains("the machine is too busy")
    {
        return;
    }
    if kind == Kind::RuncOverTls {
        not_supported(
            kind,
            "a proven wall-clock timeout",
            "the timeout is unconfirmed: nothing is measured on an engine elsewhere",
        );
        let Outcome::TimedOut {
            limit: TimeLimit::Wall,
            unconfirmed: Some(why),
        } = outcome
        else {
            panic!("{kind:?}: an unconfirmed timeout expected: {run:?}");
        };
        assert!(why.contains("could not be measured"), "{why}");
    } else {
        assert_eq!(outcome, &Outcome::timed_out(), "{kind:?}: {run:?}");
    }
}

async fn busy_loop_times_out(kind: Kind) {
    let run = run(kind, "while True:\n    pass\n", Invocation::default()).await;
    assert_wall_timeout(kind, &run.events[0].outcome, &run);
}

async fn sleep_times_out(kind: Kind) {
    let run = run(
        kind,
        "import time\ntime.sleep(600)\n",
        Invocation::default(),
    )
    .await;
    assert_wall_timeout(kind, &run.events[0].outcome, &run);
}

async fn fork_bomb_is_stopped_by_the_process_limit(kind: Kind) {
    // Children that only sleep: little memory, so only the process limit can
    // stop the loop; the program reports how far it got and exits 0.
    let program = "import os, time\nn = 0\ntry:\n    while n < 10000:\n        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n        n += 1\n    print('forked', n)\nexcept Exception as e:\n    print('refused after', n, type(e).__name__)\n";
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{kind:?}: {run:?}");
    let text = out(&run);
    let forked: u32 = text
        .split_whitespace()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        text.starts_with("refused after"),
        "{kind:?}: not stopped: {text}"
    );
    if kind.is_wasi() {
        not_supported(
            kind,
            "fork bomb",
            "fork is unavailable: an ordinary exception at the first fork",
        );
        assert_eq!(forked, 0, "{text}");
    } else {
        assert!(forked < PIDS, "{kind:?}: {text}");
    }
}

async fn ten_megabytes_of_output_is_truncated_and_counted(kind: Kind) {
    let program = "import sys\nchunk = 'y' * 65536\nfor _ in range(160):\n    sys.stdout.write(chunk)\nsys.stdout.flush()\nprint('done', file=sys.stderr)\n";
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    let stdout = &run.events[0].stdout;
    assert_eq!(
        stdout.data.as_bytes(),
        vec![b'y'; OUTPUT as usize].as_slice()
    );
    assert!(stdout.truncated);
    assert_eq!(stdout.total_bytes, 160 * 65536);
    assert_eq!(run.events[0].stderr.data.as_bytes(), b"done\n");
}

async fn stdin_and_argv_are_exact(kind: Kind) {
    let program = "import sys\nprint(b'\\0'.join(a.encode() for a in sys.argv[1:]).hex())\nprint(sys.stdin.buffer.read().hex())\n";
    let args = ["two words", "", "ünï", "--x=1"];
    let stdin = b"a\nb\x00\xff".to_vec();
    let run = run(
        kind,
        program,
        Invocation::with_args(args).stdin(stdin.clone()),
    )
    .await;
    assert_eq!(exited(&run), 0, "{run:?}");
    let text = out(&run);
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap(), hex(args.join("\0").as_bytes()));
    assert_eq!(lines.next().unwrap(), hex(&stdin));
}

async fn program_bytes_are_verbatim(kind: Kind) {
    let program = "import hashlib, sys  \r\n# ünïcödé \r\nprint(hashlib.sha256(open(sys.argv[0], 'rb').read()).hexdigest())\t\r\n# no newline";
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    assert_eq!(out(&run).trim(), sha256_hex(program.as_bytes()));
}

async fn non_utf8_output_is_kept_as_bytes(kind: Kind) {
    let program = "import sys\nsys.stdout.buffer.write(bytes([0xc3, 0x28, 0xff, 0x00, 0x41]))\nsys.stdout.flush()\nsys.stderr.buffer.write(b'\\xc3\\x28')\n";
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    assert_eq!(
        run.events[0].stdout.data.as_bytes(),
        &[0xc3, 0x28, 0xff, 0x00, 0x41]
    );
    assert_eq!(run.events[0].stderr.data.as_bytes(), b"\xc3\x28");
}

async fn orphans_do_not_keep_the_run_alive(kind: Kind) {
    // The orphan sleeps far past the limit: had it kept the run alive, the
    // run would have timed out instead of exiting.
    let program = "import os, time\ntry:\n    if os.fork() == 0:\n        time.sleep(60)\n        os._exit(0)\n    print('parent done')\nexcept Exception as e:\n    print('no processes', type(e).__name__)\n";
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    if kind.is_wasi() {
        not_supported(
            kind,
            "orphaned children",
            "there are no processes to orphan",
        );
        assert!(out(&run).starts_with("no processes"), "{}", out(&run));
    } else {
        assert_eq!(out(&run), "parent done\n");
    }
}

async fn scratch_is_fresh_per_invocation(kind: Kind) {
    let program = "import os, sys\npath = os.path.join(os.environ.get('TMPDIR', '/tmp'), 'mark')\nprint('seen' if os.path.exists(path) else 'fresh')\nopen(path, 'w').write(sys.argv[1])\nprint(open(path).read())\n";
    let run = run_all(
        kind,
        program,
        &[
            Invocation::with_args(["one"]),
            Invocation::with_args(["two"]),
        ],
    )
    .await;
    for (index, arg) in ["one", "two"].into_iter().enumerate() {
        assert_eq!(
            run.events[index].outcome,
            Outcome::Exited { exit_code: 0 },
            "{run:?}"
        );
        assert_eq!(
            run.events[index].stdout.data.to_string_lossy(),
            format!("fresh\n{arg}\n")
        );
    }
}

async fn the_scratch_folder_is_size_limited(kind: Kind) {
    let program = format!(
        "import os\npath = os.path.join(os.environ.get('TMPDIR', '/tmp'), 'big')\nwritten = 0\ntry:\n    with open(path, 'wb') as f:\n        while written < {}:\n            f.write(b'z' * 65536)\n            f.flush()\n            written += 65536\n    print('wrote', written)\nexcept OSError as e:\n    print('full after', written, e.errno)\n",
        2 * TMP
    );
    let run = run(kind, &program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    let text = out(&run);
    if kind.is_wasi() {
        not_supported(
            kind,
            "a size-limited /tmp",
            "the scratch folder lives on the host's disk, bounded by the deadline",
        );
        assert!(text.starts_with("wrote"), "{text}");
    } else {
        assert!(
            text.starts_with("full after"),
            "{kind:?}: /tmp is unbounded: {text}"
        );
    }
}

async fn exit_137_and_a_self_kill_stay_exits(kind: Kind) {
    // 137 is what a memory kill looks like, but only the container's state
    // says a memory kill happened: these are the program's own exits.
    let mut run137 = run(kind, "import sys\nsys.exit(137)\n", Invocation::default()).await;
    // Under Docker on cgroup v1, an exit 137 while the host's OOM killer
    // acted (another test's memory hog) is undetermined: nothing tells
    // whether it killed the program. Run again past them (bounded).
    for _ in 0..5 {
        match &run137.events[0].outcome {
            Outcome::SandboxError { message } if message.contains("host's OOM killer") => {
                run137 = run(kind, "import sys\nsys.exit(137)\n", Invocation::default()).await;
            }
            _ => break,
        }
    }
    match (kind, &run137.events[0].outcome) {
        // `runc run` reports the program's exit(137) as it reports a SIGKILL
        // from outside the sandbox (which PID 1 cannot send itself): the two
        // cannot be told apart, and the run proves nothing.
        (Kind::OciRunc, Outcome::SandboxError { message }) => {
            not_supported(kind, "an exit(137)", "it is a sandbox error");
            assert!(message.contains("cannot tell apart"), "{message}");
        }
        (_, outcome) => assert_eq!(*outcome, Outcome::Exited { exit_code: 137 }, "{kind:?}"),
    }
    let program = "import os, signal\ntry:\n    os.kill(os.getpid(), signal.SIGKILL)\n    print('survived')\nexcept Exception as e:\n    print('no signals', type(e).__name__)\n";
    let killed = run(kind, program, Invocation::default()).await;
    match kind {
        Kind::Wasi | Kind::WasiInProcess => {
            not_supported(kind, "a self-kill", "signals are unavailable");
            assert_eq!(exited(&killed), 0, "{killed:?}");
            assert!(out(&killed).starts_with("no signals"), "{}", out(&killed));
        }
        Kind::Runc | Kind::RuncOverTls | Kind::OciRunc => {
            // The program is the container's init: the kernel does not
            // deliver it a signal it sent itself without a handler.
            not_supported(kind, "a self-kill", "init survives its own SIGKILL");
            assert_eq!(exited(&killed), 0, "{killed:?}");
            assert_eq!(out(&killed), "survived\n");
        }
        Kind::Gvisor | Kind::OciGvisor => assert_eq!(
            killed.events[0].outcome,
            Outcome::Exited { exit_code: 137 },
            "{killed:?}"
        ),
    }
}
/// Calls that let a program out of a container or into the host's kernel
/// internals, each made directly (perl's `syscall`, x86_64 numbers): every
/// one must fail. Docker's default seccomp profile and the OCI backend's
/// refuse them; under gVisor they reach gVisor's kernel, not the host's.
async fn dangerous_system_calls_fail(kind: Kind) {
    let program = r#"import subprocess, sys
calls = {
    'keyctl': 'syscall(250, 0, -1, 0)',
    'bpf': 'syscall(321, 0, 0, 0)',
    'perf_event_open': 'syscall(298, 0, 0, -1, -1, 0)',
    'kexec_load': 'syscall(246, 0, 0, 0, 0)',
    'open_by_handle_at': 'syscall(304, 0, 0, 0)',
    'unshare_user': 'syscall(272, 0x10000000)',
    'mount': 'syscall(165, $s = "none", $t = "/tmp", $f = "tmpfs", 0, 0)',
}
for name, call in calls.items():
    try:
        done = subprocess.run(['perl', '-e', '$r = ' + call + '; print(($r == -1) ? "refused " . ($!+0) : "allowed")'], capture_output=True, text=True, timeout=20)
        print(name, done.stdout.strip() or 'failed ' + done.stderr.strip())
    except Exception as e:
        print(name, 'no subprocess', type(e).__name__)
"#;
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    let text = out(&run);
    assert_eq!(text.lines().count(), 7, "{text}");
    if kind.is_wasi() {
        not_supported(
            kind,
            "system calls",
            "there are no subprocesses to make them",
        );
        assert!(text.lines().all(|l| l.contains("no subprocess")), "{text}");
        return;
    }
    for line in text.lines() {
        // gVisor implements user namespaces in its own kernel: a namespace
        // there is not one of the host's.
        if kind.is_gvisor() && line.starts_with("unshare_user") {
            continue;
        }
        assert!(line.contains("refused"), "{kind:?}: {line}\n{text}");
    }
}

/// What Docker masks (`HostConfig.MaskedPaths` of a running container, with
/// `/sys/devices/virtual/powercap` since Docker 25) is absent or empty
/// everywhere; where the host has AppArmor, runc's containers (Docker's and
/// the OCI backend's) run confined by a profile (`docker-default`, or the
/// OCI backend's), never `unconfined`.
async fn kernel_files_are_masked_and_apparmor_confines(kind: Kind) {
    let program = r#"import os
for path in ['/proc/asound', '/proc/acpi', '/proc/kcore', '/proc/keys', '/proc/latency_stats', '/proc/timer_list', '/proc/timer_stats', '/proc/sched_debug', '/proc/scsi', '/sys/firmware', '/sys/devices/virtual/powercap']:
    try:
        if os.path.isdir(path):
            seen = len(os.listdir(path))
        else:
            with open(path, 'rb') as f:
                seen = len(f.read(4096))
        print(path, 'empty' if seen == 0 else 'visible %d' % seen)
    except FileNotFoundError:
        print(path, 'absent')
    except OSError as e:
        print(path, 'refused', e.errno)
for path in ['/proc/self/attr/apparmor/current', '/proc/self/attr/current']:
    try:
        print('apparmor', open(path).read().strip() or 'none')
        break
    except OSError as e:
        print('apparmor unreadable', path, e.errno)
"#;
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    let text = out(&run);
    for line in text.lines().filter(|l| l.starts_with('/')) {
        assert!(
            !line.contains("visible"),
            "{kind:?}: a path Docker masks is readable: {line}\n{text}"
        );
    }
    assert_eq!(
        text.lines().filter(|l| l.starts_with('/')).count(),
        11,
        "{text}"
    );
    let host_has_apparmor = std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|enabled| enabled.trim() == "Y");
    if !host_has_apparmor {
        println!(
            "conformance: the AppArmor check is skipped under {kind:?}: this host has no AppArmor \
             (/sys/module/apparmor/parameters/enabled is missing or not Y)"
        );
        return;
    }
    if kind.is_wasi() || kind.is_gvisor() {
        not_supported(
            kind,
            "an AppArmor profile",
            "the program reaches no host kernel interface AppArmor would guard (WASI has none; \
             gVisor's own kernel answers)",
        );
        return;
    }
    let label = text
        .lines()
        .find_map(|l| l.strip_prefix("apparmor "))
        .unwrap_or_default();
    assert!(
        !label.is_empty() && !label.starts_with("unconfined") && !label.starts_with("none"),
        "{kind:?} runs without an AppArmor profile on a host that has AppArmor: {text}"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A program that brings its own limits runs under a variant of its profile
/// (`SandboxClient::execute_variant`): the same program that fits the
/// profile's memory and time is stopped by the tighter ones. A "variant"
/// that changes more than limits is refused.
async fn a_programs_own_limits_apply_and_nothing_else_may_change(kind: Kind) {
    let program = "import sys, time\nif sys.argv[1] == 'memory':\n    try:\n        x = b'x' * (100 << 20)\n        print('allocated')\n    except MemoryError:\n        print('caught')\nelse:\n    time.sleep(1.5)\n    print('slept')\n";
    let invocations = [
        Invocation::with_args(["memory"]),
        Invocation::with_args(["sleep"]),
    ];
    let client = client(kind).await;
    let profile = client.profile(kind.profile()).expect("the kind's profile");
    let plain = client
        .execute(program.as_bytes(), kind.profile(), &invocations)
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: refused: {e}"));
    for event in &plain.events {
        assert_eq!(
            event.outcome,
            Outcome::Exited { exit_code: 0 },
            "{kind:?}: {plain:?}"
        );
    }
    assert_eq!(plain.events[0].stdout.data.to_string_lossy(), "allocated\n");

    let tight = progscore_sandbox::PartialLimitsSpec {
        memory: Some("64MiB".into()),
        timeout: Some("700ms".into()),
        ..Default::default()
    };
    let variant = profile.with_limits(Some(&tight), None).expect("a variant");
    let alone = ONE_MEMORY_KILL_AT_A_TIME.lock().await;
    let run = client
        .execute_variant(program.as_bytes(), &variant, &invocations)
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: variant refused: {e}"));
    drop(alone);
    if kind.is_wasi() {
        assert_eq!(out(&run), "caught\n", "{kind:?}: {run:?}");
    } else {
        assert_memory_limit(kind, &run.events[0].outcome, &run);
    }
    if kind == Kind::RuncOverTls {
        // After a case that proved nothing, the rest are not run.
        assert!(
            matches!(run.events[1].outcome, Outcome::NotRun { .. }),
            "{kind:?}: {run:?}"
        );
    } else {
        assert_wall_timeout(kind, &run.events[1].outcome, &run);
    }

    let mut other = variant.clone();
    other.command.push("-u".into());
    let err = client
        .execute_variant(program.as_bytes(), &other, &invocations)
        .await
        .expect_err("a changed command is not a variant");
    assert!(
        err.to_string().contains("limits, nothing else"),
        "{kind:?}: {err}"
    );
}

/// Files a program brings (`SandboxClient::execute_with_files`) are in its
/// folder, beside it, read-only, for every case and for its compile; the
/// program alone does not see them; a file in the program's own place is
/// refused before anything runs.
async fn a_programs_files_are_beside_it_read_only_for_its_compile_and_cases(kind: Kind) {
    let reader = "import os, sys\nhere = os.path.dirname(os.path.abspath(__file__))\nprint(open(os.path.join(here, 'data', 'in.txt')).read().strip(), sys.argv[1], open(os.path.join(here, 'raw.bin'), 'rb').read().hex())\nfor path in (os.path.join(here, 'data', 'in.txt'), os.path.join(here, 'new.txt')):\n    try:\n        open(path, 'a').write('x')\n        print('writable')\n    except OSError:\n        print('refused')\n";
    let files = ProgramFiles::new([
        ("data/in.txt".to_string(), ByteString::from("hello\n")),
        ("raw.bin".to_string(), ByteString(vec![0, 255])),
    ])
    .unwrap();
    let client = client(kind).await;
    let profile = client
        .profile(kind.profile())
        .expect("the kind's profile")
        .clone();
    let invocations = [Invocation::with_args(["1"]), Invocation::with_args(["2"])];
    let run = client
        .execute_with_files(reader.as_bytes(), &profile, &files, &invocations)
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: refused: {e}"));
    for (event, case) in run.events.iter().zip(["1", "2"]) {
        assert_eq!(
            event.outcome,
            Outcome::Exited { exit_code: 0 },
            "{kind:?}: {run:?}"
        );
        assert_eq!(
            event.stdout.data.to_string_lossy(),
            format!("hello {case} 00ff\nrefused\nrefused\n"),
            "{kind:?}: {run:?}"
        );
    }
    let alone = client
        .execute(reader.as_bytes(), kind.profile(), &invocations[..1])
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: refused: {e}"));
    assert_eq!(
        alone.events[0].outcome,
        Outcome::Exited { exit_code: 1 },
        "{kind:?}: {alone:?}"
    );
    assert!(
        alone.events[0]
            .stderr
            .data
            .to_string_lossy()
            .contains("FileNotFoundError"),
        "{kind:?}: {alone:?}"
    );

    let source = if kind.is_wasi() {
        "main.py".to_string()
    } else {
        profile
            .program_path()
            .trim_start_matches("/sandbox/")
            .to_string()
    };
    let clash =
        ProgramFiles::new([(source.clone(), ByteString::from("print('replaced')"))]).unwrap();
    let err = client
        .execute_with_files(reader.as_bytes(), &profile, &clash, &invocations)
        .await
        .expect_err("a file in the program's place");
    assert!(
        matches!(&err, SandboxError::InvalidFiles(invalid) if invalid.path() == Some(source.as_str())),
        "{kind:?}: {err}"
    );

    if kind.is_wasi() {
        return;
    }
    // In a container the program starts in its folder: relative paths
    // find its files, as where it came from (a sandbox service's
    // working folder); /tmp stays writable.
    let relative = "import os\nprint(os.getcwd(), open('data/in.txt').read().strip())\nopen('/tmp/scratch', 'w').write('x')\n";
    let run = client
        .execute_with_files(relative.as_bytes(), &profile, &files, &invocations[..1])
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: refused: {e}"));
    assert_eq!(out(&run), "/sandbox hello\n", "{kind:?}: {run:?}");
    let program = self_building(
        "    print(open('/sandbox/data/in.txt').read().strip())\n",
        "print(open('/sandbox/data/in.txt').read().strip(), sys.argv[1])\n",
    );
    let compiled = client
        .profile(&kind.compiled_profile())
        .expect("the compiled profile")
        .clone();
    let run = client
        .execute_with_files(program.as_bytes(), &compiled, &files, &invocations[..1])
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: refused: {e}"));
    let compile = run.compile.as_ref().expect("a compile event");
    assert!(compile.succeeded(), "{kind:?}: {compile:?}");
    assert_eq!(
        compile.event.stdout.data.to_string_lossy(),
        "hello\nbuilt\n"
    );
    assert_eq!(out(&run), "hello 1\n", "{kind:?}: {run:?}");
}
