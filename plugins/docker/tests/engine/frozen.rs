//! A container paused from outside (`docker pause`: the cgroup freezer
//! under runc, a stopped sandbox under gVisor) is not running: the time it
//! spends frozen is never the program's, however the pause and the
//! deadline interleave. A program that would finish in time is correct or
//! its timeout unconfirmed, never a proven timeout; a program that loops
//! with nothing done to it is still a proven timeout.

use std::sync::Arc;

use super::*;

/// Needs about 1.2 s of its own time: short sleeps, each of which a freeze
/// holds up (one long sleep would run out while frozen).
const SLEEPS_IN_STEPS: &str =
    "import time\nfor _ in range(120):\n    time.sleep(0.01)\nprint('done')\n";

/// Its wall limit: the program fits well inside it, but not with the
/// freezes added.
const LIMIT: &str = "3s";

/// Whether the engine reports the container `name` paused.
async fn paused(name: &str) -> Option<bool> {
    docker()
        .inspect_container(name, None::<InspectContainerOptions>)
        .await
        .ok()
        .and_then(|i| i.state)
        .and_then(|s| s.paused)
}

/// Pauses the owner's running container as `pauses` say: each `(after,
/// held)` waits `after` (from the start seen, or the previous unpause),
/// pauses, keeps it paused for `held` from the moment the engine reports it
/// paused, and unpauses it. Where in the program's window a freeze lands is
/// what is tested, so the offsets are wall time; every state is waited for.
/// Returns early once `finished` says the run is over.
async fn pause_the_running_container(
    owner: &str,
    pauses: &[(Duration, Duration)],
    finished: impl Fn() -> bool,
) {
    let engine = docker();
    wait_for_running_container_of(owner).await;
    let Some(name) = owned_by(owner).await.into_iter().next() else {
        return;
    };
    for &(after, held) in pauses {
        tokio::time::sleep(after).await;
        if finished() || engine.pause_container(&name).await.is_err() {
            return;
        }
        while paused(&name).await != Some(true) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(held).await;
        // Gone already if progscore ended the window while it was frozen.
        let _ = engine.unpause_container(&name).await;
    }
}

/// What the run of a program that would have finished in time may be: its
/// own exit with its output, or a timeout that says it is unconfirmed.
fn correct_or_unconfirmed(name: &str, at: &str, run: &ProgramRun) {
    match &run.events[0].outcome {
        Outcome::Exited { exit_code: 0 } => assert_eq!(stdout(run, 0), "done\n", "{name} {at}"),
        Outcome::TimedOut {
            unconfirmed: Some(why),
            ..
        } => assert!(
            why.contains("frozen") || why.contains("paused"),
            "{name} {at}: {why}"
        ),
        other => panic!(
            "{name}, paused {at}: a program that finishes in time came out {other:?}: {run:#?}"
        ),
    }
}

on_both_runtimes! {
    a_paused_container_is_never_the_programs_time => |name: &'static str| async move {
        let p = profile_with(name, |s| s.limits.timeout = LIMIT.into());
        let h = Arc::new(harness(vec![p]));
        let ms = Duration::from_millis;
        // As it starts; across the deadline; at its start and again just at
        // the (first) deadline.
        for (at, pauses) in [
            ("as it starts", vec![(ms(0), ms(2500))]),
            ("across the deadline", vec![(ms(700), ms(2800))]),
            ("twice, the second at the deadline", vec![(ms(0), ms(1900)), (ms(1000), ms(1000))]),
        ] {
            let run = {
                let h = h.clone();
                tokio::spawn(async move { h.run_one(name, SLEEPS_IN_STEPS, &[]).await })
            };
            pause_the_running_container(h.client.owner(), &pauses, || run.is_finished()).await;
            let run = run.await.expect("run");
            correct_or_unconfirmed(name, at, &run);
        }
        // Nothing done to it: a loop is a proven timeout.
        let run = h.run_one(name, "while True:\n    pass\n", &[]).await;
        assert_proven_unless_the_machine_is_too_busy(&run);
        h.assert_clean().await;
    };
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
