//! A container frozen from outside by the cgroup freezer (as `runc pause`,
//! a node's checkpoint or an operator does) is not running: the time it
//! spends frozen is never the program's, however the freeze and the
//! deadline interleave. A program that would finish in time is correct or
//! its timeout unconfirmed, never a proven timeout; a program that loops
//! with nothing done to it is still a proven timeout.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use progscore_sandbox::{Outcome, ProgramRun, TimeLimit};

use super::{client, leftovers, run, stdout};

/// Needs about 1.2 s of its own time: short sleeps, each of which a freeze
/// holds up (one long sleep would run out while frozen). The profiles'
/// limit is 3 s.
const SLEEPS_IN_STEPS: &str =
    "import time\nfor _ in range(120):\n    time.sleep(0.01)\nprint('done')\n";

/// The freezer files of the one invocation of `owner` whose program runs
/// (cgroup v1: `freezer.state`; v2: `cgroup.freeze`, read back from
/// `cgroup.events`).
fn running_leaf(owner: &str) -> Option<PathBuf> {
    for top in [
        Path::new("/sys/fs/cgroup/freezer/progscore"),
        Path::new("/sys/fs/cgroup/progscore"),
    ] {
        let Ok(invocations) = std::fs::read_dir(top.join(owner)) else {
            continue;
        };
        for invocation in invocations.flatten() {
            let leaf = invocation.path().join("ctr");
            let procs = std::fs::read_to_string(leaf.join("cgroup.procs")).unwrap_or_default();
            if !procs.trim().is_empty() {
                return Some(leaf);
            }
        }
    }
    None
}

/// Writes the freezer's state of `leaf`, and waits until the kernel
/// reports it reached (false once the cgroup is gone).
async fn set_frozen(leaf: &Path, frozen: bool) -> bool {
    let v1 = leaf.join("freezer.state").exists();
    let written = if v1 {
        std::fs::write(
            leaf.join("freezer.state"),
            if frozen { "FROZEN" } else { "THAWED" },
        )
    } else {
        std::fs::write(leaf.join("cgroup.freeze"), if frozen { "1" } else { "0" })
    };
    if written.is_err() {
        return false;
    }
    loop {
        let reached = if v1 {
            std::fs::read_to_string(leaf.join("freezer.state"))
                .map(|s| s.trim() == if frozen { "FROZEN" } else { "THAWED" })
        } else {
            std::fs::read_to_string(leaf.join("cgroup.events"))
                .map(|s| s.contains(if frozen { "frozen 1" } else { "frozen 0" }))
        };
        match reached {
            Ok(true) => return true,
            Ok(false) => tokio::time::sleep(Duration::from_millis(5)).await,
            Err(_) => return false,
        }
    }
}

/// Freezes the owner's running program as `freezes` say: each `(after,
/// held)` waits `after` (from the program seen running, or the previous
/// thaw), freezes, keeps it frozen for `held` from the moment the kernel
/// reports it frozen, and thaws it. Where in the program's window a freeze
/// lands is what is tested, so the offsets are wall time; every state is
/// waited for. Returns early once `finished` says the run is over.
async fn freeze_the_running_program(
    owner: &str,
    freezes: &[(Duration, Duration)],
    finished: impl Fn() -> bool,
) {
    let leaf = loop {
        if finished() {
            return;
        }
        if let Some(leaf) = running_leaf(owner) {
            break leaf;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    for &(after, held) in freezes {
        tokio::time::sleep(after).await;
        if finished() || !set_frozen(&leaf, true).await {
            return;
        }
        tokio::time::sleep(held).await;
        set_frozen(&leaf, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_cgroup_is_never_the_programs_time() {
    let client = Arc::new(client());
    let ms = Duration::from_millis;
    for profile in ["python-oci", "python-oci-gvisor"] {
        // As it starts; across the deadline; at its start and again just at
        // the (first) deadline.
        for (at, freezes) in [
            ("as it starts", vec![(ms(0), ms(3500))]),
            ("across the deadline", vec![(ms(700), ms(3000))]),
            (
                "twice, the second at the deadline",
                vec![(ms(0), ms(2900)), (ms(700), ms(1000))],
            ),
        ] {
            let call = {
                let client = client.clone();
                tokio::spawn(async move { run(&client, profile, SLEEPS_IN_STEPS).await })
            };
            freeze_the_running_program(client.owner(), &freezes, || call.is_finished()).await;
            let run = call.await.expect("run");
            match &run.events[0].outcome {
                Outcome::Exited { exit_code: 0 } => {
                    assert_eq!(stdout(&run), "done\n", "{profile} {at}");
                }
                Outcome::TimedOut {
                    unconfirmed: Some(why),
                    ..
                } => assert!(why.contains("frozen"), "{profile} {at}: {why}"),
                // A freeze that lands while runc itself is starting the
                // container can make runc fail ("invalid state transition
                // from stopped to paused"): the sandbox's fault, said so,
                // never the program's.
                Outcome::SandboxError { .. } => {}
                other => panic!(
                    "{profile}, frozen {at}: a program that finishes in time came out \
                     {other:?}: {run:#?}"
                ),
            }
        }
        // Nothing done to it: a loop is a proven timeout.
        let looping = run(&client, profile, "while True:\n    pass\n").await;
        assert_proven_unless_the_machine_is_too_busy(&looping);
    }
    assert_eq!(leftovers(&client), Vec::<String>::new());
}

/// A loop nothing was done to is a proven timeout, unless the machine
/// (shared, beside other load) did not give it its CPU even alone: then the
/// timeout is unconfirmed for that, never for a pause.
fn assert_proven_unless_the_machine_is_too_busy(run: &ProgramRun) {
    match &run.events[0].outcome {
        Outcome::TimedOut {
            limit: TimeLimit::Wall,
            unconfirmed: None,
        } => {}
        Outcome::TimedOut {
            limit: TimeLimit::Wall,
            unconfirmed: Some(why),
        } if why.contains("too busy") && !why.contains("paused") => {}
        other => panic!("a loop came out {other:?}: {run:#?}"),
    }
}
