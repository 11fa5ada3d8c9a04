//! One conformance battery for every backend: runc, gVisor (runsc) and WASI.
//!
//! Each probe runs the same program through the contract (`SandboxClient`)
//! under each backend's profile and checks what a user relies on. Where a
//! backend cannot support a probe the probe says so, and checks the
//! documented alternative (e.g. under WASI, `fork` fails as an ordinary
//! exception), instead of skipping silently.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use progscore::backends::Backends;
use progscore_sandbox::{
    Invocation, Outcome, ProfileSpec, ProgramRun, RuntimeProfile, SandboxClient, sha256_hex,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Runc,
    Gvisor,
    Wasi,
}

impl Kind {
    fn profile(self) -> &'static str {
        match self {
            Kind::Runc => "python",
            Kind::Gvisor => "python-gvisor",
            Kind::Wasi => "python-wasi",
        }
    }
}

const TIMEOUT_SECS: u64 = 4;

#[derive(serde::Deserialize)]
struct GeneratedConfig {
    profiles: BTreeMap<String, ProfileSpec>,
}

/// One client for the whole battery, over the generated profiles with
/// tighter limits so the probes are quick. The WASI module is verified and
/// compiled before any probe runs (about a minute on a fresh machine), so no
/// probe's clock measures the compiler.
async fn backends() -> &'static Backends {
    static BACKENDS: tokio::sync::OnceCell<Backends> = tokio::sync::OnceCell::const_new();
    BACKENDS
        .get_or_init(|| async {
            let path = progscore_e2e::generated_config();
            let text = std::fs::read_to_string(&path).expect("run scripts/setup.sh");
            let config: GeneratedConfig = toml::from_str(&text).expect("config");
            let profiles = [Kind::Runc, Kind::Gvisor, Kind::Wasi]
                .into_iter()
                .map(|kind| {
                    let mut spec = config
                        .profiles
                        .get(kind.profile())
                        .unwrap_or_else(|| {
                            panic!("{} missing from {}", kind.profile(), path.display())
                        })
                        .clone();
                    spec.limits.timeout = format!("{TIMEOUT_SECS}s");
                    spec.limits.memory = "96MiB".into();
                    spec.limits.output = "4KiB".into();
                    spec.limits.pids = 32;
                    RuntimeProfile::from_spec(kind.profile(), &spec, Path::new("."))
                        .expect("profile")
                })
                .collect();
            let backends = Backends::new(profiles).expect("backends");
            for (profile, prepared) in backends.wasi_report().await {
                if let Err(err) = prepared {
                    panic!("{profile}: {err}");
                }
            }
            backends
        })
        .await
}

async fn run(kind: Kind, program: &str, invocation: Invocation) -> ProgramRun {
    backends()
        .await
        .execute(program.as_bytes(), kind.profile(), &[invocation])
        .await
        .unwrap_or_else(|e| panic!("{kind:?}: refused: {e}"))
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
        mod gvisor { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $probe() { super::$probe(super::Kind::Gvisor).await })* }
        mod wasi { $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $probe() { super::$probe(super::Kind::Wasi).await })* }
    };
}

battery!(
    no_network,
    cannot_write_the_program_or_outside_scratch,
    not_root_and_no_host_paths,
    memory_hog_is_stopped_cleanly,
    busy_loop_times_out,
    sleep_times_out,
    fork_bomb_is_contained,
    ten_megabytes_of_output_is_truncated_and_counted,
    stdin_and_argv_are_exact,
    program_bytes_are_verbatim,
    non_utf8_output_is_kept_as_bytes,
    orphans_do_not_keep_the_run_alive,
);

async fn no_network(kind: Kind) {
    let program = "import socket\ntry:\n    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n    s.settimeout(2)\n    s.connect(('1.1.1.1', 53))\n    print('connected')\nexcept Exception as e:\n    print('refused', type(e).__name__)\n";
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    assert!(out(&run).starts_with("refused"), "{kind:?}: {}", out(&run));
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
    let program = "import os\ntry:\n    print(sorted(os.listdir('/')))\nexcept OSError as e:\n    print('no root folder', e.errno)\nprint(os.path.exists('/etc/passwd'), os.path.exists('/root'))\ntry:\n    print('uid', os.getuid())\nexcept Exception as e:\n    print('uid unavailable')\n";
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    let text = out(&run);
    if kind == Kind::Wasi {
        // No users exist inside WASI; what matters is that no host path is visible.
        not_supported(kind, "not root", "only the preopened folders are visible");
        let root = text.lines().next().unwrap();
        assert!(
            !root.contains("'etc'") && !root.contains("'root'") && !root.contains("'home'"),
            "{text}"
        );
        assert!(text.contains("False False"), "{text}");
    } else {
        let uid_line = text.lines().find(|l| l.starts_with("uid")).unwrap();
        assert_ne!(uid_line, "uid 0", "{kind:?} runs as root");
    }
}

async fn memory_hog_is_stopped_cleanly(kind: Kind) {
    let program = "blocks = []\nwhile True:\n    blocks.append(bytearray(8 * 1024 * 1024))\n";
    let run = run(kind, program, Invocation::default()).await;
    match &run.events[0].outcome {
        Outcome::MemoryLimit => {}
        // A clean failure: the program saw MemoryError and exited non-zero.
        Outcome::Exited { exit_code } if *exit_code != 0 => {
            assert!(
                run.events[0]
                    .stderr
                    .data
                    .to_string_lossy()
                    .contains("MemoryError"),
                "{run:?}"
            );
        }
        other => panic!("{kind:?}: memory hog ended as {other:?}"),
    }
}

async fn timeout_probe(kind: Kind, program: &str) {
    backends().await; // set up (and compile) before the clock starts
    let started = Instant::now();
    let run = run(kind, program, Invocation::default()).await;
    let took = started.elapsed();
    assert_eq!(
        run.events[0].outcome,
        Outcome::timed_out(),
        "{kind:?}: {run:?}"
    );
    assert!(
        took < Duration::from_secs(TIMEOUT_SECS + 8),
        "{kind:?}: took {took:?}"
    );
}

async fn busy_loop_times_out(kind: Kind) {
    timeout_probe(kind, "while True:\n    pass\n").await;
}

async fn sleep_times_out(kind: Kind) {
    timeout_probe(kind, "import time\ntime.sleep(600)\n").await;
}

async fn fork_bomb_is_contained(kind: Kind) {
    let program = "import os, time\nn = 0\ntry:\n    while n < 10000:\n        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n        n += 1\nexcept Exception as e:\n    print('fork refused after', n, type(e).__name__)\n";
    let run = run(kind, program, Invocation::default()).await;
    if matches!(
        run.events[0].outcome,
        Outcome::MemoryLimit | Outcome::TimedOut { .. }
    ) {
        // Also contained: the processes ran into the memory cap before the
        // process cap (gVisor accounts the sandbox's own memory too), or a
        // loaded machine let the deadline end it first; either way the run
        // ended within its limits and took nothing else down.
        println!(
            "conformance: fork bomb under {kind:?} was stopped by {:?}",
            run.events[0].outcome
        );
        return;
    }
    assert_eq!(exited(&run), 0, "{kind:?}: {run:?}");
    let text = out(&run);
    let forked: u32 = text
        .split_whitespace()
        .nth(3)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    if kind == Kind::Wasi {
        not_supported(
            kind,
            "fork bomb",
            "fork is unavailable: an ordinary exception at the first fork",
        );
        assert_eq!(forked, 0, "{text}");
    } else {
        assert!(forked < 32, "{kind:?}: {text}");
    }
}

async fn ten_megabytes_of_output_is_truncated_and_counted(kind: Kind) {
    let program = "import sys\nchunk = 'y' * 65536\nfor _ in range(160):\n    sys.stdout.write(chunk)\nsys.stdout.flush()\n";
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    let stdout = &run.events[0].stdout;
    assert_eq!(stdout.data.as_bytes(), vec![b'y'; 4096].as_slice());
    assert!(stdout.truncated);
    assert_eq!(stdout.total_bytes, 160 * 65536);
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
    let program = "import sys\nsys.stdout.buffer.write(bytes([0xc3, 0x28, 0xff, 0x00, 0x41]))\nsys.stdout.flush()\n";
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    assert_eq!(
        run.events[0].stdout.data.as_bytes(),
        &[0xc3, 0x28, 0xff, 0x00, 0x41]
    );
}

async fn orphans_do_not_keep_the_run_alive(kind: Kind) {
    let program = "import os, time\ntry:\n    if os.fork() == 0:\n        time.sleep(60)\n        os._exit(0)\n    print('parent done')\nexcept Exception as e:\n    print('no processes', type(e).__name__)\n";
    backends().await; // set up (and compile) before the clock starts
    let started = Instant::now();
    let run = run(kind, program, Invocation::default()).await;
    assert_eq!(exited(&run), 0, "{run:?}");
    assert!(
        started.elapsed() < Duration::from_secs(TIMEOUT_SECS),
        "{kind:?}: an orphan kept the run alive"
    );
    if kind == Kind::Wasi {
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
