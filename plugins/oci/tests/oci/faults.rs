//! Faults from outside the sandbox: a SIGKILL from the host to a running
//! program's processes, the invocation's cgroup removed, runsc's file server
//! killed. None of them is the program's doing: the run is a sandbox error
//! (undetermined, never stored), never a wrong exit code; a rerun completes;
//! nothing is left behind. And what a program that exits 137 by itself gets.

use progscore_sandbox::SandboxClientExt as _;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use progscore_oci::OciClient;
use progscore_sandbox::{Invocation, Outcome};

use super::{client, leftovers, run, stdout};

/// A correct program: prints 9 after a while (long enough to be hit).
fn correct(index: usize) -> String {
    format!("import time\n# {index}\ntime.sleep(1.5)\nprint(9)\n")
}

/// The invocation cgroups of `owner` in one hierarchy.
fn invocation_cgroups(hierarchy: &str, owner: &str) -> Vec<PathBuf> {
    std::fs::read_dir(
        Path::new("/sys/fs/cgroup")
            .join(hierarchy)
            .join("progscore")
            .join(owner),
    )
    .map(|entries| {
        entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect()
    })
    .unwrap_or_default()
}

/// Every process in `dir` and below, with its command line.
fn processes(dir: &Path) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        found.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten().filter(|e| e.path().is_dir()) {
            found.extend(processes(&entry.path()));
        }
    }
    found
}

fn kill(pid: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Removes an invocation's cgroup in every hierarchy (its leaf first), as
/// an administrator's cleanup would: retried while its killed processes
/// are still leaving it.
async fn remove_cgroup(owner: &str, name: &str) {
    for hierarchy in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        let dir = hierarchy.path().join("progscore").join(owner).join(name);
        for _ in 0..500 {
            let leaf = dir.join("ctr");
            let _ = std::fs::remove_dir(&leaf);
            match std::fs::remove_dir(&dir) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                // Busy: its processes are still dying (a state, polled).
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }
}

/// How one invocation is hit: SIGKILL to its processes.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// SIGKILL to every process of the invocation.
    All,
    /// The same, then its cgroup removed.
    AllAndCgroup,
    /// runsc: SIGKILL to the file server (gofer) alone.
    FileServer,
}

/// Hits every invocation of `owner` once its program runs (its process
/// seen in the invocation's cgroup), until `done`. Returns the faults dealt.
async fn hit_while_running(owner: String, runsc: bool, done: Arc<AtomicBool>) -> Vec<Fault> {
    let mut hit = BTreeSet::new();
    let mut dealt = Vec::new();
    while !done.load(Ordering::SeqCst) {
        for dir in invocation_cgroups("pids", &owner) {
            let name = dir.file_name().unwrap().to_string_lossy().to_string();
            if hit.contains(&name) {
                continue;
            }
            let procs = processes(&dir);
            // The program runs: python3 under runc, the sandbox under runsc.
            let started = procs.iter().any(|(_, cmd)| {
                cmd.starts_with("python3") || (runsc && cmd.starts_with("runsc-sandbox"))
            });
            if !started {
                continue;
            }
            let fault = match (dealt.len() % 3, runsc) {
                (0, _) => Fault::All,
                (1, _) => Fault::AllAndCgroup,
                (_, true) => Fault::FileServer,
                (_, false) => Fault::All,
            };
            match fault {
                Fault::All | Fault::AllAndCgroup => {
                    procs.iter().for_each(|(pid, _)| kill(*pid));
                }
                Fault::FileServer => procs
                    .iter()
                    .filter(|(_, cmd)| cmd.starts_with("runsc-gofer"))
                    .for_each(|(pid, _)| kill(*pid)),
            }
            if matches!(fault, Fault::AllAndCgroup) {
                remove_cgroup(&owner, &name).await;
            }
            hit.insert(name);
            dealt.push(fault);
        }
        // Polls the cgroups' state for new programs.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    dealt
}

async fn batch(client: &Arc<OciClient>, profile: &str, programs: usize) -> Vec<Outcome> {
    let mut calls = tokio::task::JoinSet::new();
    for index in 0..programs {
        let client = Arc::clone(client);
        let profile = profile.to_string();
        calls.spawn(async move {
            let run = client
                .execute(
                    correct(index).as_bytes(),
                    &profile,
                    &[Invocation::default()],
                )
                .await
                .unwrap_or_else(|e| panic!("{profile}: {e}"));
            let event = &run.events[0];
            if event.outcome == (Outcome::Exited { exit_code: 0 }) {
                assert_eq!(event.stdout.data.to_string_lossy(), "9\n", "{run:?}");
            }
            event.outcome.clone()
        });
    }
    calls.join_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_and_cgroup_removals_from_outside_are_sandbox_errors_never_exit_codes() {
    let client = Arc::new(client());
    for (profile, runsc) in [("python-oci", false), ("python-oci-gvisor", true)] {
        let programs = 6;
        let done = Arc::new(AtomicBool::new(false));
        let hitter = tokio::spawn(hit_while_running(
            client.owner().to_string(),
            runsc,
            Arc::clone(&done),
        ));
        let outcomes = batch(&client, profile, programs).await;
        done.store(true, Ordering::SeqCst);
        let dealt = hitter.await.unwrap();
        let errors = outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::SandboxError { .. }))
            .count();
        for outcome in &outcomes {
            assert!(
                matches!(
                    outcome,
                    Outcome::Exited { exit_code: 0 } | Outcome::SandboxError { .. }
                ),
                "{profile}: a correct program hit from outside got {outcome:?} (faults {dealt:?})"
            );
        }
        // Each fault landed on a running program: each made a sandbox error.
        assert_eq!(dealt.len(), programs, "{profile}: {dealt:?} {outcomes:?}");
        assert_eq!(errors, programs, "{profile}: {dealt:?} {outcomes:?}");
        assert_eq!(leftovers(&client), Vec::<String>::new(), "{profile}");

        // Run again, untouched: every one completes.
        let outcomes = batch(&client, profile, programs).await;
        assert!(
            outcomes
                .iter()
                .all(|o| *o == (Outcome::Exited { exit_code: 0 })),
            "{profile}: {outcomes:?}"
        );
        assert_eq!(leftovers(&client), Vec::<String>::new(), "{profile}");
    }
}

/// Under runc the program is PID 1 of its namespace and cannot SIGKILL
/// itself, and `runc run` reports its own `exit(137)` as it reports a
/// SIGKILL from outside: 137 cannot be told apart, and is a sandbox error.
/// Under runsc a program can SIGKILL itself, and the sandbox notes that it
/// ended on its own: exit 137 is the program's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_137_is_a_sandbox_error_under_runc_and_the_programs_under_runsc() {
    let client = client();
    let exits = "import sys\nprint('bye', flush=True)\nsys.exit(137)\n";
    let kills = "import os\nprint('bye', flush=True)\nos.kill(os.getpid(), 9)\nprint('alive')\n";

    let run_exits = run(&client, "python-oci", exits).await;
    match &run_exits.events[0].outcome {
        Outcome::SandboxError { message } => {
            assert!(message.contains("cannot tell apart"), "{message}")
        }
        other => panic!("runc, exit(137): {other:?}"),
    }
    // The kernel ignores PID 1's SIGKILL to itself: it goes on.
    let run_kills = run(&client, "python-oci", kills).await;
    assert_eq!(
        run_kills.events[0].outcome,
        Outcome::Exited { exit_code: 0 },
        "{run_kills:?}"
    );
    assert_eq!(stdout(&run_kills), "bye\nalive\n");

    for program in [exits, kills] {
        let run = run(&client, "python-oci-gvisor", program).await;
        assert_eq!(
            run.events[0].outcome,
            Outcome::Exited { exit_code: 137 },
            "runsc: {run:?}"
        );
        assert_eq!(stdout(&run), "bye\n");
    }
    assert_eq!(leftovers(&client), Vec::<String>::new());
}

/// Holds 160 MiB (touched), well within its own 256 MiB, then says so.
const HOLDS_160_MIB: &str = "chunks = []\nfor _ in range(20):\n    chunks.append(b'x' * (8 << 20))\nprint('held', len(chunks))\n";

/// Puts a memory limit of `bytes` on the cgroup of `owner` (above every
/// invocation's own cgroup and its limit), as an operator's slice or a
/// busy host would; `None` lifts it.
fn limit_memory_above_invocations(owner: &str, bytes: Option<u64>) {
    let v1 = Path::new("/sys/fs/cgroup/memory/progscore").join(owner);
    let v2 = Path::new("/sys/fs/cgroup/progscore").join(owner);
    if Path::new("/sys/fs/cgroup/memory").is_dir() {
        std::fs::create_dir_all(&v1).expect("owner's memory cgroup");
        let value = bytes.map_or("-1".to_string(), |b| b.to_string());
        std::fs::write(v1.join("memory.limit_in_bytes"), value).expect("limit");
    } else {
        std::fs::create_dir_all(&v2).expect("owner's cgroup");
        let value = bytes.map_or("max".to_string(), |b| b.to_string());
        std::fs::write(v2.join("memory.max"), value).expect("limit");
    }
}

/// An OOM kill by an OOM killer other than the program's own limit's (here
/// a cgroup above the invocation's, which is what the host's OOM killer is
/// to every cgroup) is not the program's `memory_limit`: a sandbox error.
/// The same program without it holds its memory; a real hog still hits its
/// own limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oom_kill_above_the_programs_own_limit_is_a_sandbox_error() {
    let client = client();
    for profile in ["python-oci", "python-oci-gvisor"] {
        limit_memory_above_invocations(client.owner(), Some(64 << 20));
        let held = run(&client, profile, HOLDS_160_MIB).await;
        limit_memory_above_invocations(client.owner(), None);
        let Outcome::SandboxError { message } = &held.events[0].outcome else {
            panic!("{profile}: killed above its limit: {held:#?}");
        };
        assert!(message.contains("OOM"), "{profile}: {message}");

        let held = run(&client, profile, HOLDS_160_MIB).await;
        assert_eq!(
            held.events[0].outcome,
            Outcome::Exited { exit_code: 0 },
            "{profile}: {held:#?}"
        );
        assert_eq!(stdout(&held), "held 20\n");
        let hog = "chunks = []\nwhile True:\n    chunks.append(b'x' * (8 << 20))\n";
        let hog = run(&client, profile, hog).await;
        assert_eq!(
            hog.events[0].outcome,
            Outcome::MemoryLimit,
            "{profile}: {hog:#?}"
        );
    }
    assert_eq!(leftovers(&client), Vec::<String>::new());
}
