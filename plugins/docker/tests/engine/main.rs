//! The Docker backend against the real engine that scripts/setup.sh starts.
//!
//! Every property is proven by what the program observes from inside the
//! container, or by what the engine reports, not by reading back what was
//! sent. Probes that do not depend on the kernel run under both runc
//! (`python`) and gVisor (`python-gvisor`).

mod conversation;
mod kills;
mod pool;
mod proxy;

use progscore_sandbox::SandboxClientExt as _;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::InspectContainerOptions;
use progscore_docker::{DockerClient, DockerOptions};
use progscore_sandbox::{
    Invocation, Outcome, ProfileSpec, ProgramRun, RuntimeProfile, SandboxClient, SandboxError,
    TimeLimit, sha256_hex,
};

const RUNC: &str = "python";
const GVISOR: &str = "python-gvisor";

/// The profile as setup.sh generated it, adjusted by `tweak`.
fn profile_with(name: &str, tweak: impl FnOnce(&mut ProfileSpec)) -> RuntimeProfile {
    let mut spec: ProfileSpec = progscore_test_kit::generated_profile(name);
    tweak(&mut spec);
    RuntimeProfile::from_spec(name, &spec, Path::new(".")).expect("profile is valid")
}

fn profile(name: &str) -> RuntimeProfile {
    profile_with(name, |_| {})
}

struct Harness {
    client: DockerClient,
    /// The owner root (private to the test).
    _root: tempfile::TempDir,
}

fn harness_with_socket(profiles: Vec<RuntimeProfile>, socket: Option<&Path>) -> Harness {
    let root = private_tempdir();
    let mut options = DockerOptions {
        owner_root: root.path().to_path_buf(),
        ..DockerOptions::default()
    };
    if let Some(socket) = socket {
        options = options.with_socket(socket);
    }
    Harness {
        client: DockerClient::new(profiles, options).expect("client"),
        _root: root,
    }
}

/// A temporary folder with mode 0700, as an owner root must be.
fn private_tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .expect("owner root")
}

fn harness(profiles: Vec<RuntimeProfile>) -> Harness {
    harness_with_socket(profiles, None)
}

impl Harness {
    async fn run(&self, profile: &str, program: &str, invocations: &[Invocation]) -> ProgramRun {
        self.client
            .execute(program.as_bytes(), profile, invocations)
            .await
            .unwrap_or_else(|e| panic!("execute refused: {e}"))
    }

    async fn run_one(&self, profile: &str, program: &str, args: &[&str]) -> ProgramRun {
        self.run(
            profile,
            program,
            &[Invocation::with_args(args.iter().copied())],
        )
        .await
    }

    /// Nothing this client created is left: containers or workspaces.
    async fn assert_clean(&self) {
        let left = self
            .client
            .owned_containers()
            .await
            .expect("list containers");
        assert!(left.is_empty(), "containers left behind: {left:?}");
        let workspaces: Vec<_> = std::fs::read_dir(self.client.owner_dir())
            .map(|dir| dir.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(
            workspaces.is_empty(),
            "workspaces left behind: {workspaces:?}"
        );
    }
}

fn stdout(run: &ProgramRun, index: usize) -> String {
    run.events[index].stdout.data.to_string_lossy()
}

fn exit_code(run: &ProgramRun, index: usize) -> i64 {
    match &run.events[index].outcome {
        Outcome::Exited { exit_code } => *exit_code,
        other => panic!(
            "invocation {index} did not exit: {other:?}; stderr: {}",
            run.events[index].stderr.data.to_string_lossy()
        ),
    }
}

fn docker() -> Docker {
    Docker::connect_with_unix_defaults().expect("engine socket")
}

/// Runs the same probe under runc and gVisor.
macro_rules! on_both_runtimes {
    ($($name:ident => $body:expr;)*) => {
        mod runc {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { ($body)(RUNC).await })*
        }
        mod gvisor {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { ($body)(GVISOR).await })*
        }
    };
}

const SQUARE: &str = "import sys\nprint(int(sys.argv[1]) ** 2)\n";

on_both_runtimes! {
    square_of_three_prints_nine => |name: &'static str| async move {
        let h = harness(vec![profile(name)]);
        let run = h.run_one(name, SQUARE, &["3"]).await;
        assert_eq!(exit_code(&run, 0), 0);
        assert_eq!(stdout(&run, 0), "9\n");
        let provenance = run.events[0].provenance.as_ref().expect("provenance");
        assert_eq!(provenance.backend, "docker");
        assert_eq!(provenance.runtime, if name == GVISOR { "runsc" } else { "runc" });
        assert!(provenance.image_id.as_deref().unwrap_or("").starts_with("sha256:"));
        assert!(provenance.repo_digests.iter().any(|d| d.starts_with("127.0.0.1:5000/python-sandbox@sha256:")));
        assert_eq!(provenance.command, ["python3", "-I", "/sandbox/program", "3"]);
        assert!(provenance.engine.starts_with("Docker Engine"));
        assert_eq!(run.program_sha256, sha256_hex(SQUARE.as_bytes()));
        h.assert_clean().await;
    };

    program_bytes_run_verbatim => |name: &'static str| async move {
        // CRLF line ends, trailing spaces, non-ASCII text and no final newline.
        let program = "import hashlib   \r\n# déjà vu — ✓ \r\nprint(hashlib.sha256(open(__file__, 'rb').read()).hexdigest())  \r\n# end";
        let h = harness(vec![profile(name)]);
        let run = h.run_one(name, program, &[]).await;
        assert_eq!(exit_code(&run, 0), 0, "{run:?}");
        assert_eq!(stdout(&run, 0).trim(), sha256_hex(program.as_bytes()));
    };

    argv_and_stdin_arrive_exactly => |name: &'static str| async move {
        // python3-minimal has no json module: argv goes out as hex of NUL-joined UTF-8.
        let program = "import sys\nprint(b'\\0'.join(a.encode() for a in sys.argv[1:]).hex())\nprint(sys.stdin.buffer.read().hex())\n";
        let args = ["two words", "", "--flag", "ünï", "$HOME", "a\"b"];
        let stdin = b"line one\n\x00\xffno newline at end".to_vec();
        let h = harness(vec![profile(name)]);
        let run = h
            .run(name, program, &[Invocation::with_args(args).stdin(stdin.clone())])
            .await;
        assert_eq!(exit_code(&run, 0), 0, "{run:?}");
        let out = stdout(&run, 0);
        let mut lines = out.lines();
        assert_eq!(lines.next().unwrap(), hex(args.join("\0").as_bytes()));
        assert_eq!(lines.next().unwrap(), hex(&stdin));
    };

    no_stdin_means_immediate_eof => |name: &'static str| async move {
        let program = "import sys\ndata = sys.stdin.buffer.read()\nprint(len(data))\n";
        let h = harness(vec![profile(name)]);
        let run = h.run_one(name, program, &[]).await;
        assert_eq!(exit_code(&run, 0), 0);
        assert_eq!(stdout(&run, 0), "0\n");
    };

    every_invocation_gets_a_fresh_container => |name: &'static str| async move {
        let program = "import os\nseen = os.path.exists('/tmp/marker')\nopen('/tmp/marker', 'w').write('x')\nprint('stale' if seen else 'fresh')\n";
        let h = harness(vec![profile(name)]);
        let run = h.run(name, program, &[Invocation::default(), Invocation::default(), Invocation::default()]).await;
        for index in 0..3 {
            assert_eq!(stdout(&run, index), "fresh\n");
        }
        let names: std::collections::HashSet<_> = run.events.iter()
            .map(|e| e.provenance.as_ref().unwrap().container.clone().unwrap()).collect();
        assert_eq!(names.len(), 3);
        h.assert_clean().await;
    };

    only_the_loopback_interface_exists => |name: &'static str| async move {
        let program = "import os, socket\nprint(sorted(os.listdir('/sys/class/net')) if os.path.exists('/sys/class/net') else sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n    print('connected')\nexcept OSError as e:\n    print('no route')\n";
        let h = harness(vec![profile(name)]);
        let run = h.run_one(name, program, &[]).await;
        assert_eq!(exit_code(&run, 0), 0, "{run:?}");
        assert_eq!(stdout(&run, 0), "['lo']\nno route\n");
    };

    runs_as_non_root_without_capabilities => |name: &'static str| async move {
        let program = "import os\nprint(os.getuid(), os.getgid(), os.geteuid())\nfor line in open('/proc/self/status'):\n    if line.startswith(('CapEff', 'CapBnd', 'CapPrm', 'NoNewPrivs')):\n        print(line.strip())\n";
        let h = harness(vec![profile(name)]);
        let run = h.run_one(name, program, &[]).await;
        assert_eq!(exit_code(&run, 0), 0, "{run:?}");
        let out = stdout(&run, 0);
        let ids: Vec<&str> = out.lines().next().unwrap().split(' ').collect();
        assert!(ids.iter().all(|id| *id != "0"), "runs as root: {out}");
        assert!(out.contains("CapEff:\t0000000000000000"), "{out}");
        assert!(out.contains("CapPrm:\t0000000000000000"), "{out}");
        if name == GVISOR {
            // gVisor's /proc/self/status has no NoNewPrivs line; say so rather than skip.
            assert!(!out.contains("NoNewPrivs"), "gVisor now reports NoNewPrivs: assert it is 1");
        } else {
            assert!(out.contains("NoNewPrivs:\t1"), "{out}");
        }
    };

    program_and_root_filesystem_are_read_only => |name: &'static str| async move {
        let program = "import sys\nfor path in (__file__, '/etc/progscore-probe', '/usr/bin/probe', '/tmp/ok'):\n    try:\n        open(path, 'ab').write(b'x')\n        print(path, 'writable')\n    except OSError as e:\n        print(path, 'refused')\n";
        let h = harness(vec![profile(name)]);
        let run = h.run_one(name, program, &[]).await;
        assert_eq!(exit_code(&run, 0), 0, "{run:?}");
        assert_eq!(stdout(&run, 0), "/sandbox/program refused\n/etc/progscore-probe refused\n/usr/bin/probe refused\n/tmp/ok writable\n");
    };

    memory_hog_is_a_memory_limit => |name: &'static str| async move {
        let p = profile_with(name, |s| s.limits.memory = "64MiB".into());
        let program = "chunks = []\nwhile True:\n    chunks.append(bytearray(8 * 1024 * 1024))\n";
        let h = harness(vec![p]);
        let run = h.run_one(name, program, &[]).await;
        assert_eq!(run.events[0].outcome, Outcome::MemoryLimit, "{run:?}");
        h.assert_clean().await;
    };

    fork_bomb_is_contained => |name: &'static str| async move {
        let p = profile_with(name, |s| s.limits.pids = 32);
        let program = "import os, time\nn = 0\ntry:\n    while n < 10000:\n        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n        n += 1\nexcept OSError as e:\n    print('fork refused after', n)\n";
        let h = harness(vec![p]);
        let run = h.run_one(name, program, &[]).await;
        assert_eq!(exit_code(&run, 0), 0, "{run:?}");
        let out = stdout(&run, 0);
        let forked: u32 = out.trim().rsplit(' ').next().unwrap().parse().expect(&out);
        assert!(forked < 32, "{out}");
        h.assert_clean().await;
    };

    busy_loop_and_sleep_time_out => |name: &'static str| async move {
        let p = profile_with(name, |s| s.limits.timeout = "2s".into());
        let h = harness(vec![p]);
        for program in ["while True:\n    pass\n", "import time\nprint('started', flush=True)\ntime.sleep(60)\n"] {
            let run = h.run_one(name, program, &[]).await;
            // Proven, or (a machine too busy to give it its CPU even alone)
            // unconfirmed with that reason: never anything else.
            let outcome = &run.events[0].outcome;
            let busy = matches!(
                outcome,
                Outcome::TimedOut { unconfirmed: Some(why), .. } if why.contains("the machine is too busy")
            );
            assert!(busy || *outcome == Outcome::timed_out(), "{run:?}");
        }
        h.assert_clean().await;
    };

    engine_latency_is_not_program_time => |name: &'static str| async move {
        // The engine answers `start`, then `wait`, two seconds late; the
        // program itself needs milliseconds of its one-second limit.
        let p = profile_with(name, |s| s.limits.timeout = "1s".into());
        for delay_wait in [false, true] {
            let proxy = proxy::EngineProxy::start();
            let delay = if delay_wait { &proxy.faults.delay_wait_ms } else { &proxy.faults.delay_start_ms };
            delay.store(2000, std::sync::atomic::Ordering::SeqCst);
            let h = harness_with_socket(vec![p.clone()], Some(proxy.socket()));
            let run = h.run_one(name, SQUARE, &["3"]).await;
            assert_eq!(exit_code(&run, 0), 0, "delayed wait {delay_wait}: {run:?}");
            assert_eq!(stdout(&run, 0), "9\n");
            h.assert_clean().await;
        }
    };

    cpu_time_and_peak_memory_are_measured => |name: &'static str| async move {
        let program = "import time\nx = bytearray(64 * 1024 * 1024)\nend = time.process_time() + 0.4\nwhile time.process_time() < end:\n    pass\n";
        let h = harness(vec![profile(name)]);
        let run = h.run_one(name, program, &[]).await;
        assert_eq!(exit_code(&run, 0), 0, "{run:?}");
        let usage = run.events[0].usage.clone().expect("usage measured");
        let cpu = usage.cpu_ms.expect("cpu time");
        // gVisor's guest clock (what the program spins on) is the sentry's
        // estimate; on a busy host it runs ahead of the CPU the cgroup
        // charged (318 ms measured for 400 ms of guest time under load).
        let least = if name == GVISOR { 200 } else { 350 };
        assert!((least..5000).contains(&cpu), "cpu {cpu} ms");
        let peak = usage.peak_memory_bytes.expect("peak memory");
        assert!(peak >= 64 * 1024 * 1024, "peak {peak}");
        // The invocation's own cgroups are gone with it.
        let cgroups = Path::new("/sys/fs/cgroup/memory/progscore").join(h.client.owner());
        let left: Vec<_> = std::fs::read_dir(&cgroups)
            .map(|d| d.flatten().filter(|e| e.path().is_dir()).map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "cgroups left: {left:?}");
        h.assert_clean().await;
    };

    a_cpu_time_limit_is_a_proven_timeout => |name: &'static str| async move {
        let p = profile_with(name, |s| s.limits.cpu_time = Some("300ms".into()));
        let h = harness(vec![p]);
        let run = h.run_one(name, "print('spin', flush=True)\nwhile True:\n    pass\n", &[]).await;
        assert_eq!(
            run.events[0].outcome,
            Outcome::TimedOut { limit: TimeLimit::Cpu, unconfirmed: None },
            "{run:?}"
        );
        assert_eq!(stdout(&run, 0), "spin\n");
        h.assert_clean().await;
    };

    timeouts_under_contention_are_confirmed_alone => |name: &'static str| async move {
        // Three times as many programs as CPUs, with a one-second limit:
        // spinners must still be proven timeouts, and programs that need a
        // third of a second of CPU must still exit, however starved their
        // first run was. (Only a machine busy beyond this test, which
        // starves even the run alone, leaves a spinner unproven, saying so:
        // the honest answer, never a wrong one.)
        let p = profile_with(name, |s| s.limits.timeout = "1s".into());
        let h = std::sync::Arc::new(harness(vec![p]));
        let spinner = "while True:\n    pass\n";
        let worker = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end:\n    pass\nprint('ok')\n";
        let mut calls = Vec::new();
        for index in 0..6 {
            let h = h.clone();
            let program = if index % 2 == 0 { spinner } else { worker };
            calls.push(tokio::spawn(async move { (program, h.run_one(name, program, &[]).await) }));
        }
        let mut confirmed = 0;
        for call in calls {
            let (program, run) = call.await.expect("call");
            confirmed += run.sandbox_warnings.iter().filter(|w| w.contains("ran again with no other program")).count();
            if program == spinner {
                let starved_alone = matches!(
                    &run.events[0].outcome,
                    Outcome::TimedOut { unconfirmed: Some(why), .. } if why.contains("even running alone")
                );
                if starved_alone {
                    println!("{name}: a spinner was starved even alone: {:?}", run.events[0].outcome);
                } else {
                    assert_eq!(run.events[0].outcome, Outcome::timed_out(), "{run:#?}");
                }
            } else {
                assert_eq!(exit_code(&run, 0), 0, "{run:#?}");
                assert_eq!(stdout(&run, 0), "ok\n");
            }
        }
        println!("{name}: {confirmed} of 6 invocations were confirmed alone");
        h.assert_clean().await;
    };

    closed_streams_do_not_end_the_run => |name: &'static str| async move {
        let p = profile_with(name, |s| s.limits.timeout = "2s".into());
        let program = "import os, time\nprint('bye', flush=True)\nos.close(1)\nos.close(2)\ntime.sleep(60)\n";
        let h = harness(vec![p]);
        let run = h.run_one(name, program, &[]).await;
        assert_eq!(run.events[0].outcome, Outcome::timed_out(), "{run:?}");
        assert_eq!(stdout(&run, 0), "bye\n");
    };

    output_is_capped_per_stream_and_counted => |name: &'static str| async move {
        let p = profile_with(name, |s| s.limits.output = "128B".into());
        let program = "import sys\nsys.stdout.write('x' * 1000000)\nsys.stdout.flush()\nsys.stderr.write('e' * 300000)\nsys.stderr.flush()\n";
        let h = harness(vec![p]);
        let run = h.run_one(name, program, &[]).await;
        assert_eq!(exit_code(&run, 0), 0, "{run:?}");
        let event = &run.events[0];
        assert_eq!(event.stdout.data.as_bytes(), vec![b'x'; 128].as_slice());
        assert!(event.stdout.truncated);
        assert_eq!(event.stdout.total_bytes, 1_000_000);
        assert_eq!(event.stderr.data.as_bytes(), vec![b'e'; 128].as_slice());
        assert!(event.stderr.truncated);
        assert_eq!(event.stderr.total_bytes, 300_000);
    };

    non_utf8_output_is_kept_as_bytes => |name: &'static str| async move {
        let program = "import sys\nsys.stdout.buffer.write(bytes([0xff, 0xfe, 0x00, 0x41]))\n";
        let h = harness(vec![profile(name)]);
        let run = h.run_one(name, program, &[]).await;
        assert_eq!(exit_code(&run, 0), 0);
        assert_eq!(run.events[0].stdout.data.as_bytes(), &[0xff, 0xfe, 0x00, 0x41]);
    };

    exit_codes_and_crashes_are_reported => |name: &'static str| async move {
        let h = harness(vec![profile(name)]);
        let run = h.run(name, "import sys\nsys.exit(int(sys.argv[1]))\n", &[Invocation::with_args(["3"]), Invocation::with_args(["0"])]).await;
        assert_eq!(exit_code(&run, 0), 3);
        assert_eq!(exit_code(&run, 1), 0);
        let run = h.run_one(name, "raise ValueError('boom')\n", &[]).await;
        assert_eq!(exit_code(&run, 0), 1);
        assert!(run.events[0].stderr.data.to_string_lossy().contains("ValueError: boom"));
    };

    orphaned_children_do_not_keep_the_run_alive => |name: &'static str| async move {
        let program = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\n    os._exit(0)\nprint('parent done')\n";
        // The orphan sleeps past the limit: had it kept the run alive, the run
        // would have timed out instead of exiting.
        let h = harness(vec![profile_with(name, |s| s.limits.timeout = "20s".into())]);
        let run = h.run_one(name, program, &[]).await;
        assert_eq!(exit_code(&run, 0), 0, "{run:?}");
    };
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn unknown_profile_is_refused() {
    let h = harness(vec![profile(RUNC)]);
    let err = h
        .client
        .execute(SQUARE.as_bytes(), "pyhton", &[Invocation::default()])
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::UnknownProfile { .. }));
    assert!(err.to_string().contains("pyhton") && err.to_string().contains("python"));
}

#[tokio::test]
async fn a_tagged_image_never_loads() {
    let err = RuntimeProfile::from_spec(
        "python",
        &toml::from_str("backend = \"docker\"\nimage = \"127.0.0.1:5000/python-sandbox:bookworm\"\ncommand = [\"python3\"]\n").unwrap(),
        Path::new("."),
    )
    .unwrap_err();
    assert!(err.to_string().contains("not pinned"), "{err}");
}

#[tokio::test]
async fn an_absent_image_is_refused_and_not_pulled() {
    let missing = "127.0.0.1:5000/python-sandbox@sha256:0000000000000000000000000000000000000000000000000000000000000000";
    let p = profile_with(RUNC, |s| s.image = Some(missing.into()));
    let h = harness(vec![p]);
    let err = h
        .client
        .execute(SQUARE.as_bytes(), RUNC, &[Invocation::default()])
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::ArtifactMissing { .. }), "{err}");
    assert!(err.to_string().contains("never pulls"), "{err}");
    assert!(
        docker().inspect_image(missing).await.is_err(),
        "the image was pulled"
    );
    h.assert_clean().await;
}

async fn image_id(reference: &str) -> String {
    docker()
        .inspect_image(reference)
        .await
        .unwrap_or_else(|e| panic!("{reference}: {e}; run scripts/setup.sh"))
        .id
        .unwrap()
}

#[tokio::test]
async fn an_image_that_declares_a_volume_is_refused() {
    let id = image_id("progscore/fixture-volume:latest").await;
    let h = harness(vec![profile_with(RUNC, |s| s.image = Some(id))]);
    let err = h
        .client
        .execute(SQUARE.as_bytes(), RUNC, &[Invocation::default()])
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::ArtifactRefused { .. }), "{err}");
    assert!(err.to_string().contains("/data"), "{err}");
    h.assert_clean().await;
}

#[tokio::test]
async fn the_profile_command_wins_over_the_image_entrypoint() {
    let id = image_id("progscore/fixture-entrypoint:latest").await;
    let h = harness(vec![profile_with(RUNC, |s| s.image = Some(id))]);
    let run = h.run_one(RUNC, SQUARE, &["4"]).await;
    assert_eq!(exit_code(&run, 0), 0, "{run:?}");
    assert_eq!(stdout(&run, 0), "16\n");
}

#[tokio::test]
async fn a_runtime_the_engine_does_not_list_is_refused() {
    let p = profile_with(RUNC, |s| s.runtime = Some("kata".into()));
    let h = harness(vec![p]);
    let err = h
        .client
        .execute(SQUARE.as_bytes(), RUNC, &[Invocation::default()])
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::RuntimeMissing { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("kata") && message.contains("runsc"),
        "{message}"
    );
}

/// An engine whose `/info` denies one kind of limit is refused before
/// anything runs, by `execute` and by `diagnose`, naming the limit.
async fn an_engine_without(flag: &'static str, named: &str) {
    let proxy = proxy::EngineProxy::start();
    proxy.faults.hide_support(flag);
    let h = harness_with_socket(vec![profile(RUNC)], Some(proxy.socket()));
    let err = h
        .client
        .execute(SQUARE.as_bytes(), RUNC, &[Invocation::default()])
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::EngineUnsupported { .. }),
        "{err}"
    );
    assert!(err.to_string().contains(named), "{err}");
    let report = h.client.diagnose().await.remove(0);
    assert!(!report.engine_ok);
    assert!(
        report.problems.iter().any(|p| p.contains(named)),
        "{report:?}"
    );
    h.assert_clean().await;
}

#[tokio::test]
async fn an_engine_without_memory_limits_is_refused() {
    an_engine_without("MemoryLimit", "memory limits").await;
}

#[tokio::test]
async fn an_engine_without_swap_limits_is_refused() {
    an_engine_without("SwapLimit", "swap limits").await;
}

#[tokio::test]
async fn an_engine_without_cpu_quotas_is_refused() {
    an_engine_without("CpuCfsQuota", "CPU quotas").await;
}

#[tokio::test]
async fn an_engine_without_pids_limits_is_refused() {
    an_engine_without("PidsLimit", "pids limits").await;
}

#[tokio::test]
async fn doctor_reports_a_usable_engine_and_profiles() {
    let h = harness(vec![profile(RUNC), profile(GVISOR)]);
    let report = h.client.diagnose().await.remove(0);
    assert!(report.engine_ok, "{report:?}");
    assert!(report.runtimes.iter().any(|r| r == "runsc"));
    assert!(report.profiles.iter().all(|p| p.ok), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workspace_is_private_while_running_and_gone_after() {
    let h = harness(vec![profile(RUNC)]);
    // The program waits until the test has looked, then ends.
    let program = "import time\ntime.sleep(60)\n";
    let invocations = [Invocation::default()];
    let mut run = h.client.execute(program.as_bytes(), RUNC, &invocations);
    let observe = async {
        wait_for_owned_container(&h).await;
        let name = owned_by(h.client.owner()).await.pop().expect("a container");
        let inspect = docker()
            .inspect_container(&name, None::<InspectContainerOptions>)
            .await
            .expect("inspect");
        let source = inspect
            .mounts
            .unwrap_or_default()
            .into_iter()
            .find(|m| m.destination.as_deref() == Some("/sandbox/program"))
            .and_then(|m| m.source)
            .expect("program mount");
        let folder = Path::new(&source).parent().unwrap().to_path_buf();
        let mode = std::fs::metadata(&folder).unwrap().permissions().mode() & 0o777;
        (folder, mode)
    };
    let (folder, mode) = tokio::select! {
        run = &mut run => panic!("the program should still be running: {run:?}"),
        seen = observe => seen,
    };
    // Dropping the call stops it; its cleanup is done when the drop returns.
    drop(run);
    assert_eq!(mode, 0o700, "workspace {folder:?} mode {mode:o}");
    assert!(folder.starts_with(h.client.owner_dir()));
    assert!(!folder.exists(), "workspace {folder:?} still exists");
    h.assert_clean().await;
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellations_at_random_points_leave_nothing_behind() {
    let h = harness(vec![profile(RUNC)]);
    let volumes_before = volume_count().await;
    let program = "import time\ntime.sleep(0.3)\nprint('x')\n";
    let invocations = [Invocation::default(), Invocation::default()];
    // A small deterministic generator: the points spread over the whole call.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut completed = 0;
    for _ in 0..100 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let after = Duration::from_millis(seed % 900);
        let call = h.client.execute(program.as_bytes(), RUNC, &invocations);
        if tokio::time::timeout(after, call).await.is_ok() {
            completed += 1;
        }
        // Dropping the call returned only after its cleanup.
        h.assert_clean().await;
    }
    assert!(completed < 100, "no call was cancelled");
    assert_eq!(volume_count().await, volumes_before);
}

async fn volume_count() -> usize {
    docker()
        .list_volumes(None::<bollard::query_parameters::ListVolumesOptions>)
        .await
        .expect("list volumes")
        .volumes
        .unwrap_or_default()
        .len()
}

/// The engine (through the proxy) goes away during a run and comes back:
/// the invocation it dropped runs again in a fresh container, the dropped
/// container is removed once the engine answers, and the run is complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_vanishes_and_returns_reruns_the_invocation() {
    let mut proxy = proxy::EngineProxy::start();
    let h = harness_with_socket(vec![profile(RUNC)], Some(proxy.socket()));
    let program = "import time\nprint('started', flush=True)\ntime.sleep(2)\nprint('done')\n";
    let invocations = [Invocation::default(), Invocation::default()];
    let run = h.client.execute(program.as_bytes(), RUNC, &invocations);
    let outage = async {
        wait_for_owned_container(&h).await;
        proxy.stop();
        tokio::time::sleep(Duration::from_secs(2)).await;
        proxy.restart();
    };
    let (run, ()) = tokio::join!(run, outage);
    let run = run.expect("the engine came back within the outage wait");
    for index in 0..2 {
        assert_eq!(exit_code(&run, index), 0, "{run:#?}");
        assert_eq!(stdout(&run, index), "started\ndone\n");
    }
    assert!(
        run.sandbox_warnings
            .iter()
            .any(|w| w.contains("stopped answering") && w.contains("run again")),
        "{:?}",
        run.sandbox_warnings
    );
    h.assert_clean().await;
}

/// The engine goes away and stays away past the outage wait: nothing of the
/// run is evidence, so the call is refused with where and why, and the
/// container it could not remove is the only one left (for the next start's
/// sweep, or the engine's return).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_stays_gone_refuses_the_run() {
    let mut proxy = proxy::EngineProxy::start();
    let root = private_tempdir();
    let options = DockerOptions {
        owner_root: root.path().to_path_buf(),
        outage_wait: Duration::from_secs(2),
        ..DockerOptions::default()
    }
    .with_socket(proxy.socket());
    let client = DockerClient::new(vec![profile(RUNC)], options).expect("client");
    let program = "import time\nprint('started', flush=True)\ntime.sleep(30)\n";
    let invocations = [Invocation::default()];
    let run = client.execute(program.as_bytes(), RUNC, &invocations);
    let outage = async {
        // The program is running (and will for 30 s) when the engine goes.
        wait_for_running_container_of(client.owner()).await;
        proxy.stop();
    };
    let (run, ()) = tokio::join!(run, outage);
    let err = run.expect_err("the engine never came back");
    assert!(
        matches!(err, SandboxError::EngineUnavailable { .. }),
        "{err:?}"
    );
    let message = err.to_string();
    let endpoint = format!("unix://{}", proxy.socket().display());
    assert!(
        message.contains(&format!("cannot reach the Docker engine at {endpoint}")),
        "{message}"
    );
    let left = owned_by(client.owner()).await;
    assert_eq!(left.len(), 1, "{left:?}");
    remove_for_real(&left[0]).await;
    let workspaces = entries(client.owner_dir());
    assert!(
        workspaces.is_empty(),
        "workspaces left behind: {workspaces:?}"
    );
}

/// What a folder holds.
// After the macro, which it uses.
mod frozen;

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Names of the real engine's containers labelled with `owner`.
async fn owned_by(owner: &str) -> Vec<String> {
    pool::owned_on(&docker(), owner).await
}

/// Returns once the client has a container running.
async fn wait_for_owned_container(h: &Harness) {
    wait_for_running_container_of(h.client.owner()).await;
}

/// Returns once a client of `owner` has a container running.
async fn wait_for_running_container_of(owner: &str) {
    for _ in 0..400 {
        let owned = owned_by(owner).await;
        if !owned.is_empty() {
            let state = docker()
                .inspect_container(&owned[0], None::<InspectContainerOptions>)
                .await
                .ok()
                .and_then(|i| i.state)
                .and_then(|s| s.running);
            if state == Some(true) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the client never had a running container");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_removal_is_a_warning_and_stops_later_invocations() {
    let proxy = proxy::EngineProxy::start();
    proxy
        .faults
        .fail_container_removal
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let h = harness_with_socket(vec![profile(RUNC)], Some(proxy.socket()));
    let invocations = [
        Invocation::with_args(["2"]),
        Invocation::with_args(["3"]),
        Invocation::with_args(["4"]),
    ];
    let run = h
        .client
        .execute(SQUARE.as_bytes(), RUNC, &invocations)
        .await
        .expect("run");
    assert_eq!(exit_code(&run, 0), 0);
    assert_eq!(stdout(&run, 0), "4\n");
    let name = run.events[0]
        .provenance
        .as_ref()
        .unwrap()
        .container
        .clone()
        .unwrap();
    assert_eq!(run.sandbox_warnings.len(), 1, "{:?}", run.sandbox_warnings);
    assert!(
        run.sandbox_warnings[0].contains(&name),
        "{:?}",
        run.sandbox_warnings
    );
    assert!(matches!(run.events[1].outcome, Outcome::NotRun { .. }));
    assert!(matches!(run.events[2].outcome, Outcome::NotRun { .. }));
    // Exactly one container was created, and it is the one named.
    assert_eq!(
        h.client.owned_containers().await.unwrap(),
        vec![name.clone()]
    );
    // The workspace goes even when a container could not.
    let workspaces = entries(h.client.owner_dir());
    assert!(
        workspaces.is_empty(),
        "workspaces left behind: {workspaces:?}"
    );
    // The client keeps it: once the engine removes containers again, the
    // next call removes it first.
    proxy
        .faults
        .fail_container_removal
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let next = h
        .client
        .execute(SQUARE.as_bytes(), RUNC, &invocations[..1])
        .await
        .expect("run");
    assert_eq!(stdout(&next, 0), "4\n");
    assert!(
        next.sandbox_warnings.is_empty(),
        "{:?}",
        next.sandbox_warnings
    );
    assert_eq!(
        h.client.owned_containers().await.unwrap(),
        Vec::<String>::new()
    );
}

/// A container the engine would not remove during the calls is removed when
/// the client is dropped, once the engine removes containers again; the
/// owner's files then go too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_left_by_a_failed_removal_goes_when_the_client_is_dropped() {
    let proxy = proxy::EngineProxy::start();
    proxy
        .faults
        .fail_container_removal
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let h = harness_with_socket(vec![profile(RUNC)], Some(proxy.socket()));
    let run = h
        .client
        .execute(SQUARE.as_bytes(), RUNC, &[Invocation::with_args(["2"])])
        .await
        .expect("run");
    let name = run.events[0]
        .provenance
        .as_ref()
        .and_then(|p| p.container.clone())
        .unwrap();
    assert_eq!(run.sandbox_warnings.len(), 1, "{:?}", run.sandbox_warnings);
    proxy
        .faults
        .fail_container_removal
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let root = h._root.path().to_path_buf();
    drop(h.client);
    let inspected = docker()
        .inspect_container(
            &name,
            None::<bollard::query_parameters::InspectContainerOptions>,
        )
        .await;
    assert!(inspected.is_err(), "{name} outlived its client");
    remove_for_real(&name).await;
    assert_eq!(
        entries(&root),
        Vec::<std::path::PathBuf>::new(),
        "owner files left"
    );
}

/// A caller on a current-thread runtime drops a running call: the drop waits
/// for the cleanup, which runs on the client's own runtime, so it neither
/// deadlocks the caller's nor leaves anything behind.
#[tokio::test]
async fn dropping_a_call_on_a_current_thread_runtime_cleans_up() {
    let h = harness(vec![profile(RUNC)]);
    let invocations = [Invocation::default()];
    let mut run = h
        .client
        .execute(b"import time\ntime.sleep(60)\n", RUNC, &invocations);
    tokio::select! {
        run = &mut run => panic!("the program should still be running: {run:?}"),
        () = wait_for_owned_container(&h) => {}
    }
    drop(run);
    h.assert_clean().await;
}

async fn remove_for_real(name: &str) {
    let options = bollard::query_parameters::RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    let _ = docker().remove_container(name, Some(options)).await;
}

/// Creates a long-running container labelled as `owner`'s.
async fn container_of(owner: &str, name: &str) {
    let engine = docker();
    let image = profile(RUNC).image().unwrap().to_string();
    let body = bollard::models::ContainerCreateBody {
        image: Some(image),
        entrypoint: Some(vec!["python3".into()]),
        cmd: Some(vec!["-c".into(), "import time; time.sleep(600)".into()]),
        labels: Some(std::collections::HashMap::from([(
            "progscore.owner".to_string(),
            owner.to_string(),
        )])),
        host_config: Some(bollard::models::HostConfig {
            network_mode: Some("none".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let options = bollard::query_parameters::CreateContainerOptionsBuilder::new()
        .name(name)
        .build();
    engine
        .create_container(Some(options), body)
        .await
        .expect("create container");
    engine
        .start_container(
            name,
            None::<bollard::query_parameters::StartContainerOptions>,
        )
        .await
        .expect("start container");
}

/// What a progscore process killed with SIGKILL leaves, its lock released:
/// the lock file, its folder with a workspace holding a program, and a
/// running container with its label. A live client beside it, and an owner
/// whose lock is not in this root (another machine, another namespace), keep
/// theirs. The next client's first use removes the dead owner's, and only those.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_of_a_killed_progscore_are_swept_before_anything_runs() {
    let root = private_tempdir();
    let tag = std::process::id();
    let dead = format!("progscore-docker-{tag}-dead");
    std::fs::write(root.path().join(format!("{dead}.lock")), b"").unwrap();
    let workspace = root.path().join(&dead).join("progscore-ws-x");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("program"), b"print('secret')\n").unwrap();
    let dead_container = format!("progscore-swept-{tag}");
    container_of(&dead, &dead_container).await;
    let elsewhere = format!("progscore-docker-{tag}-elsewhere");
    let foreign_container = format!("progscore-foreign-{tag}");
    container_of(&elsewhere, &foreign_container).await;

    let options = || DockerOptions {
        owner_root: root.path().to_path_buf(),
        ..DockerOptions::default()
    };
    let live = DockerClient::new(vec![profile(RUNC)], options()).expect("live client");
    let live_container = format!("progscore-live-{tag}");
    container_of(live.owner(), &live_container).await;

    let next = DockerClient::new(vec![profile(RUNC)], options()).expect("next client");
    let report = next.diagnose().await.remove(0);
    assert!(report.engine_ok, "{report:?}");
    let exists = |name: String| async move {
        docker()
            .inspect_container(&name, None::<InspectContainerOptions>)
            .await
            .is_ok()
    };
    assert!(
        !exists(dead_container).await,
        "the dead owner's container is still there"
    );
    assert!(
        !root.path().join(&dead).exists(),
        "its workspaces are still there"
    );
    assert!(!root.path().join(format!("{dead}.lock")).exists());
    assert!(
        exists(live_container.clone()).await,
        "a live owner's container was removed"
    );
    assert!(
        exists(foreign_container.clone()).await,
        "an owner not provably dead lost its container"
    );
    assert!(live.owner_dir().is_dir());
    remove_for_real(&live_container).await;
    remove_for_real(&foreign_container).await;
}

/// An engine killed mid-start leaves a runtime's init in the cgroup of a
/// container it no longer knows. Once the owner is provably dead and no
/// engine holds its containers, the next client ends what is left in its
/// cgroups and removes them, then forgets the owner; before, the cgroups
/// stayed busy for good and every later start warned about them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_left_in_a_dead_owners_cgroups_are_ended_and_the_cgroups_removed() {
    let pids_hierarchy = Path::new("/sys/fs/cgroup/pids");
    if !pids_hierarchy.join("cgroup.procs").exists() {
        eprintln!("skipped: no cgroup v1 pids hierarchy here");
        return;
    }
    let root = private_tempdir();
    let dead = format!("progscore-docker-{}-crashed", std::process::id());
    std::fs::write(root.path().join(format!("{dead}.lock")), b"").unwrap();
    let owner_cgroup = pids_hierarchy.join("progscore").join(&dead);
    let leaf = owner_cgroup.join("progscore-gone-0");
    std::fs::create_dir_all(&leaf).unwrap();
    // Stands for the runtime's init: a process nothing will ever end.
    let mut left = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("sleep");
    std::fs::write(leaf.join("cgroup.procs"), left.id().to_string()).unwrap();

    let client = DockerClient::new(
        vec![profile(RUNC)],
        DockerOptions {
            owner_root: root.path().to_path_buf(),
            ..DockerOptions::default()
        },
    )
    .expect("client");
    let report = client.diagnose().await.remove(0);
    assert!(report.engine_ok, "{report:?}");
    let status = left.try_wait().expect("wait");
    let ended = match status {
        Some(status) => status,
        None => {
            let _ = left.kill();
            panic!("the process left in the dead owner's cgroup still runs");
        }
    };
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&ended),
        Some(9),
        "ended by SIGKILL"
    );
    assert!(
        !owner_cgroup.exists(),
        "the dead owner's cgroups are still there"
    );
    assert!(
        !root.path().join(format!("{dead}.lock")).exists(),
        "the dead owner is not forgotten"
    );
}

/// The created container is what the profile says: no log driver, swap
/// equal to memory (no swap), the CPU quota, the pids limit, the user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_container_is_created_as_the_profile_says() {
    let p = profile_with(RUNC, |s| {
        s.limits.memory = "200MiB".into();
        s.limits.cpus = 0.5;
        s.limits.pids = 40;
        s.user = Some("12345:23456".into());
    });
    let h = harness(vec![p]);
    let run = h.run_one(RUNC, "import time\ntime.sleep(2)\n", &[]);
    let observe = async {
        wait_for_owned_container(&h).await;
        let name = owned_by(h.client.owner()).await.pop().unwrap();
        docker()
            .inspect_container(&name, None::<InspectContainerOptions>)
            .await
            .expect("inspect")
    };
    let (run, inspect) = tokio::join!(run, observe);
    assert_eq!(exit_code(&run, 0), 0, "{run:?}");
    let host = inspect.host_config.expect("host config");
    assert_eq!(host.log_config.and_then(|l| l.typ).as_deref(), Some("none"));
    assert_eq!(host.memory, Some(200 * 1024 * 1024));
    assert_eq!(host.memory_swap, host.memory);
    assert_eq!(host.cpu_period, Some(100_000));
    assert_eq!(host.cpu_quota, Some(50_000));
    assert_eq!(host.pids_limit, Some(40));
    assert_eq!(host.runtime.as_deref(), Some("runc"));
    assert_eq!(
        inspect.config.and_then(|c| c.user).as_deref(),
        Some("12345:23456")
    );
    let provenance = run.events[0].provenance.as_ref().unwrap();
    assert_eq!(provenance.user.as_deref(), Some("12345:23456"));
    h.assert_clean().await;
}

/// An invocation the program cannot be given is refused before any
/// container exists.
#[tokio::test]
async fn undeliverable_invocations_are_refused_before_anything_runs() {
    let h = harness(vec![profile(RUNC)]);
    let nul = h
        .client
        .execute(
            SQUARE.as_bytes(),
            RUNC,
            &[Invocation::default(), Invocation::with_args(["3\u{0}4"])],
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&nul, SandboxError::InvalidInvocation(refused) if refused.index == 1 && refused.error.field == "args[0]"),
        "{nul:?}"
    );
    let many = Invocation::with_args(vec!["y".repeat(1000); 5000]);
    let err = h
        .client
        .execute(SQUARE.as_bytes(), RUNC, &[many])
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::InvalidInvocation(_)), "{err:?}");
    assert!(owned_by(h.client.owner()).await.is_empty());
    h.assert_clean().await;
}
