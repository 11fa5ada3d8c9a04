//! What happens to a container from outside progscore is never the
//! program's outcome: a kill or a removal progscore did not ask for is a
//! sandbox error, while what the program does to itself (a SIGKILL under
//! gVisor, `exit(137)`, filling the page cache) stays its own.

use progscore_sandbox::SandboxClientExt as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bollard::query_parameters::{KillContainerOptionsBuilder, RemoveContainerOptionsBuilder};

use super::*;

/// The first of the client's containers seen running (by the engine).
async fn running_container(h: &Harness) -> String {
    wait_for_owned_container(h).await;
    owned_by(h.client.owner()).await.remove(0)
}

async fn kill_from_outside(name: &str) {
    let options = KillContainerOptionsBuilder::new().signal("SIGKILL").build();
    docker()
        .kill_container(name, Some(options))
        .await
        .unwrap_or_else(|e| panic!("docker kill {name}: {e}"));
}

fn sandbox_error(run: &ProgramRun, index: usize) -> String {
    match &run.events[index].outcome {
        Outcome::SandboxError { message } => message.clone(),
        other => panic!("invocation {index} is not a sandbox error: {other:?}; {run:#?}"),
    }
}

const SELF_KILL: &str = "import os, sys, time\nprint('ready', flush=True)\nif sys.argv[1] == 'self':\n    os.kill(os.getpid(), 9)\ntime.sleep(60)\nprint('slept')\n";

/// Under gVisor a program can SIGKILL itself: that is its own exit (137),
/// a proven failure; the same program killed by `docker kill` is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gvisor_program_killing_itself_exits_137_and_one_killed_from_outside_is_undetermined() {
    let h = harness(vec![profile(GVISOR)]);
    let run = run_past_other_oom_kills(&h, GVISOR, SELF_KILL, &["self"]).await;
    assert_eq!(exit_code(&run, 0), 137, "{run:#?}");
    assert_eq!(stdout(&run, 0), "ready\n");

    let call = h.run_one(GVISOR, SELF_KILL, &["wait"]);
    let fault = async { kill_from_outside(&running_container(&h).await).await };
    let (run, ()) = tokio::join!(call, fault);
    let message = sandbox_error(&run, 0);
    assert!(message.contains("killed from outside"), "{message}");
    h.assert_clean().await;
}

/// Under runc too (where the program, PID 1, could not have sent it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runc_program_killed_from_outside_is_undetermined_and_later_cases_do_not_run() {
    let h = harness(vec![profile(RUNC)]);
    let invocations = [
        Invocation::with_args(["wait"]),
        Invocation::with_args(["wait"]),
    ];
    let call = h.client.execute(SELF_KILL.as_bytes(), RUNC, &invocations);
    let fault = async { kill_from_outside(&running_container(&h).await).await };
    let (run, ()) = tokio::join!(call, fault);
    let run = run.expect("run");
    let message = sandbox_error(&run, 0);
    assert!(message.contains("killed from outside"), "{message}");
    assert!(
        matches!(run.events[1].outcome, Outcome::NotRun { .. }),
        "{run:#?}"
    );
    h.assert_clean().await;
}

/// The compile step killed from outside is not a compile error: the build
/// is a sandbox error and no case is decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compile_killed_from_outside_is_undetermined() {
    let h = harness(vec![profile("c")]);
    // Enough functions to keep the compiler busy for a while.
    let mut program = String::from("#include <stdio.h>\nstatic volatile int v;\n");
    for i in 0..3000 {
        program.push_str(&format!(
            "int f{i}(int x) {{ for (int j = 0; j < x; j++) v += j * {i}; return v; }}\n"
        ));
    }
    program.push_str("int main(void) { printf(\"%d\\n\", f1(3)); return 0; }\n");
    let invocations = [Invocation::default()];
    let call = h.client.execute(program.as_bytes(), "c", &invocations);
    let fault = async { kill_from_outside(&running_container(&h).await).await };
    let (run, ()) = tokio::join!(call, fault);
    let run = run.expect("run");
    let compile = run.compile.as_ref().expect("a compile event");
    match &compile.event.outcome {
        Outcome::SandboxError { message } => {
            assert!(message.contains("killed from outside"), "{message}");
        }
        other => panic!("the killed compile came back {other:?}: {run:#?}"),
    }
    assert!(
        matches!(
            run.events[0].outcome,
            Outcome::SandboxError { .. } | Outcome::NotRun { .. }
        ),
        "{run:#?}"
    );
    h.assert_clean().await;
}

/// A container removed (`docker rm -f`) while its program runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_removed_from_outside_is_undetermined() {
    let h = harness(vec![profile(RUNC), profile(GVISOR)]);
    for name in [RUNC, GVISOR] {
        let call = h.run_one(name, SELF_KILL, &["wait"]);
        let fault = async {
            let container = running_container(&h).await;
            let options = RemoveContainerOptionsBuilder::new().force(true).build();
            docker()
                .remove_container(&container, Some(options))
                .await
                .unwrap_or_else(|e| panic!("docker rm -f {container}: {e}"));
        };
        let (run, ()) = tokio::join!(call, fault);
        // Killed, or already gone when the engine was asked about it.
        let message = sandbox_error(&run, 0);
        assert!(
            message.contains("killed from outside") || message.contains("No such container"),
            "{message}"
        );
        // The engine's removal in progress is waited for, not a failure.
        assert!(
            run.sandbox_warnings.is_empty(),
            "{:?}",
            run.sandbox_warnings
        );
        h.assert_clean().await;
        assert_no_cgroups_of(&h);
    }
}

/// Nothing is left of the client's cgroups.
fn assert_no_cgroups_of(h: &Harness) {
    let cgroups = Path::new("/sys/fs/cgroup/memory/progscore").join(h.client.owner());
    let left: Vec<_> = std::fs::read_dir(&cgroups)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "cgroups left: {left:?}");
}

/// When the engine's events cannot be watched, an exit code 137 progscore
/// did not cause cannot be told from a kill: undetermined, not a failure.
/// Other exits stand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_engines_events_an_unexplained_137_is_undetermined() {
    let proxy = proxy::EngineProxy::start();
    proxy.faults.fail_events.store(true, Ordering::SeqCst);
    let h = harness_with_socket(vec![profile(GVISOR)], Some(proxy.socket()));
    let run = h.run_one(GVISOR, "import os\nos._exit(137)\n", &[]).await;
    let message = sandbox_error(&run, 0);
    assert!(message.contains("events"), "{message}");
    let run = h.run_one(GVISOR, SQUARE, &["3"]).await;
    assert_eq!(exit_code(&run, 0), 0, "{run:#?}");
    assert_eq!(stdout(&run, 0), "9\n");
    h.assert_clean().await;
}

/// Runs `program`, again (a few times) while its exit 137 is undetermined
/// because the host's OOM killer acted meanwhile (under cgroup v1 nothing
/// tells whether it was the program's: the other tests' memory hogs).
async fn run_past_other_oom_kills(
    h: &Harness,
    name: &str,
    program: &str,
    args: &[&str],
) -> ProgramRun {
    let mut run = h.run_one(name, program, args).await;
    for _ in 0..5 {
        match &run.events[0].outcome {
            Outcome::SandboxError { message } if message.contains("host's OOM killer") => {
                run = h.run_one(name, program, args).await;
            }
            _ => break,
        }
    }
    run
}

/// `exit(137)` with nothing done from outside is the program's own exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_137_of_the_program_itself_is_its_exit() {
    let h = harness(vec![profile(RUNC), profile(GVISOR)]);
    for name in [RUNC, GVISOR] {
        let run = run_past_other_oom_kills(&h, name, "import os\nos._exit(137)\n", &[]).await;
        assert_eq!(exit_code(&run, 0), 137, "{name}: {run:#?}");
    }
    h.assert_clean().await;
}

/// The page cache reaches the memory cap without any OOM kill: a program
/// that fills it and then exits 137 itself exited 137 (the peak at the cap
/// is no proof of a memory kill); a real memory hog is the memory limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_page_cache_then_exit_137_is_not_a_memory_kill() {
    let p = profile_with(RUNC, |s| s.limits.memory = "32MiB".into());
    let h = harness(vec![p]);
    // Drops what the host cached of the image's files, so that reading them
    // again is charged to this container, well past its cap.
    let program = "import os\nfor _ in range(2):\n    for root, _, files in os.walk('/usr'):\n        for f in files:\n            try:\n                fd = os.open(os.path.join(root, f), os.O_RDONLY)\n            except OSError:\n                continue\n            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)\n            while os.read(fd, 1 << 20):\n                pass\n            os.close(fd)\nprint('read', flush=True)\nos._exit(137)\n";
    let run = run_past_other_oom_kills(&h, RUNC, program, &[]).await;
    assert_eq!(exit_code(&run, 0), 137, "{run:#?}");
    assert_eq!(stdout(&run, 0), "read\n");
    let peak = run.events[0]
        .usage
        .as_ref()
        .and_then(|u| u.peak_memory_bytes)
        .expect("peak measured");
    assert!(
        peak >= 32 * 1024 * 1024,
        "the page cache stayed below the cap: {peak}"
    );

    let hog = "chunks = []\nwhile True:\n    chunks.append(bytearray(8 * 1024 * 1024))\n";
    let run = h.run_one(RUNC, hog, &[]).await;
    assert_eq!(run.events[0].outcome, Outcome::MemoryLimit, "{run:#?}");
    h.assert_clean().await;
}

/// An attach stream that the connection cuts (in a frame, or between
/// frames while the container runs) is not the program's complete output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_stream_cut_early_is_a_sandbox_error() {
    let program = "import sys, time\nsys.stdout.write('a' * 20)\nsys.stdout.flush()\ntime.sleep(1)\nprint('rest')\n";
    // Inside the first frame (8 bytes of header, then 20 of payload).
    let proxy = proxy::EngineProxy::start();
    proxy
        .faults
        .cut_attach_after_bytes
        .store(8 + 5, Ordering::SeqCst);
    let h = harness_with_socket(vec![profile(RUNC)], Some(proxy.socket()));
    let run = h.run_one(RUNC, program, &[]).await;
    let message = sandbox_error(&run, 0);
    assert!(message.contains("inside a frame"), "{message}");
    h.assert_clean().await;
    // Right after the first frame, with stdin attached: the engine would
    // have held the stream open until the container stopped.
    proxy
        .faults
        .cut_attach_after_bytes
        .store(8 + 20, Ordering::SeqCst);
    let run = h
        .run(RUNC, program, &[Invocation::default().stdin(b"x".to_vec())])
        .await;
    let message = sandbox_error(&run, 0);
    assert!(message.contains("still ran"), "{message}");
    h.assert_clean().await;
}

/// Containers of a batch of correct programs (more than the CPUs, runc and
/// gVisor) are killed, removed and paused from outside while they run:
/// every program is correct or undetermined, never wrong; the batch run
/// again with nothing done to it is all correct; nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_removals_and_pauses_from_outside_never_make_a_correct_program_wrong() {
    let h = Arc::new(harness(vec![profile(RUNC), profile(GVISOR)]));
    // Long enough to be caught running; prints its square.
    let program = "import sys, time\ntime.sleep(1.5)\nprint(int(sys.argv[1]) ** 2)\n";
    let batch = |h: Arc<Harness>| async move {
        let mut calls = Vec::new();
        for index in 0..8_i64 {
            let h = h.clone();
            let name = if index % 2 == 0 { RUNC } else { GVISOR };
            calls.push(tokio::spawn(async move {
                let arg = index.to_string();
                (index, name, h.run_one(name, program, &[&arg]).await)
            }));
        }
        let mut runs = Vec::new();
        for call in calls {
            runs.push(call.await.expect("call"));
        }
        runs
    };
    let first = tokio::spawn(batch(h.clone()));
    let faults = {
        let h = h.clone();
        let first = &first;
        async move {
            let engine = docker();
            let mut done = std::collections::HashSet::new();
            let mut kind = 0;
            // Kill, remove, pause in turn, each to a container seen running,
            // until the batch is done.
            while !first.is_finished() {
                for name in owned_by(h.client.owner()).await {
                    if done.contains(&name) {
                        continue;
                    }
                    let running = engine
                        .inspect_container(&name, None::<InspectContainerOptions>)
                        .await
                        .ok()
                        .and_then(|i| i.state)
                        .is_some_and(|s| s.running == Some(true) && s.paused != Some(true));
                    if !running {
                        continue;
                    }
                    done.insert(name.clone());
                    match kind % 3 {
                        0 => {
                            let _ = engine
                                .kill_container(
                                    &name,
                                    Some(
                                        KillContainerOptionsBuilder::new()
                                            .signal("SIGKILL")
                                            .build(),
                                    ),
                                )
                                .await;
                        }
                        1 => {
                            let options = RemoveContainerOptionsBuilder::new().force(true).build();
                            let _ = engine.remove_container(&name, Some(options)).await;
                        }
                        _ => {
                            if engine.pause_container(&name).await.is_ok() {
                                // Unpaused once the engine reports it paused.
                                loop {
                                    let paused = engine
                                        .inspect_container(&name, None::<InspectContainerOptions>)
                                        .await
                                        .ok()
                                        .and_then(|i| i.state)
                                        .and_then(|s| s.paused);
                                    if paused != Some(false) {
                                        break;
                                    }
                                    tokio::time::sleep(Duration::from_millis(20)).await;
                                }
                                let _ = engine.unpause_container(&name).await;
                            }
                        }
                    }
                    kind += 1;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    faults.await;
    let runs = first.await.expect("batch");
    let mut undetermined = 0;
    for (index, name, run) in &runs {
        match &run.events[0].outcome {
            Outcome::Exited { exit_code: 0 } => {
                assert_eq!(
                    stdout(run, 0),
                    format!("{}\n", index * index),
                    "{name}: {run:#?}"
                );
            }
            Outcome::SandboxError { .. } | Outcome::NotRun { .. } => undetermined += 1,
            other => panic!("{name} item {index}: a correct program came back {other:?}: {run:#?}"),
        }
    }
    assert!(
        undetermined >= 1,
        "no fault reached a running program: {runs:#?}"
    );
    // Nothing was done to the second batch: every program is correct.
    for (index, name, run) in batch(h.clone()).await {
        assert_eq!(exit_code(&run, 0), 0, "{name}: {run:#?}");
        assert_eq!(stdout(&run, 0), format!("{}\n", index * index));
    }
    h.assert_clean().await;
    assert_no_cgroups_of(&h);
}

/// Holds 160 MiB (touched), well within its own 256 MiB, then says so.
const HOLDS_160_MIB: &str = "chunks = []\nfor _ in range(20):\n    chunks.append(b'x' * (8 << 20))\nprint('held', len(chunks))\n";

/// Puts a memory limit of `bytes` on the cgroup of `owner` (above every
/// invocation's own cgroup and its limit), as an operator's slice or a
/// busy host would; `None` lifts it.
pub(crate) fn limit_memory_above_invocations(owner: &str, bytes: Option<u64>) {
    let v1 = Path::new("/sys/fs/cgroup/memory/progscore").join(owner);
    let v2 = Path::new("/sys/fs/cgroup/progscore").join(owner);
    let value = bytes.map_or("-1".to_string(), |b| b.to_string());
    if Path::new("/sys/fs/cgroup/memory").is_dir() {
        std::fs::create_dir_all(&v1).expect("owner's memory cgroup");
        // No swap on the hosts this runs on; memsw follows when it exists.
        std::fs::write(v1.join("memory.limit_in_bytes"), &value).expect("limit");
    } else {
        std::fs::create_dir_all(&v2).expect("owner's cgroup");
        let value = if bytes.is_some() { value } else { "max".into() };
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
    let h = harness(vec![profile(RUNC), profile(GVISOR)]);
    for name in [RUNC, GVISOR] {
        limit_memory_above_invocations(h.client.owner(), Some(64 << 20));
        let run = h.run_one(name, HOLDS_160_MIB, &[]).await;
        limit_memory_above_invocations(h.client.owner(), None);
        let message = sandbox_error(&run, 0);
        assert!(message.contains("OOM"), "{name}: {message}");

        let run = h.run_one(name, HOLDS_160_MIB, &[]).await;
        assert_eq!(exit_code(&run, 0), 0, "{name}: {run:#?}");
        assert_eq!(stdout(&run, 0), "held 20\n");
        let hog = "chunks = []\nwhile True:\n    chunks.append(b'x' * (8 << 20))\n";
        let run = h.run_one(name, hog, &[]).await;
        assert_eq!(
            run.events[0].outcome,
            Outcome::MemoryLimit,
            "{name}: {run:#?}"
        );
    }
    h.assert_clean().await;
}
