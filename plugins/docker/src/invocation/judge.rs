//! The outcome as the engine's events and the cgroups explain it, once the
//! container is gone: whose kill, whose OOM killer, and whether a pause
//! undid a timeout proven on fair time.

use progscore_container::{MemoryKill, host_oom_kills};
use progscore_sandbox::Outcome;

use super::context::Observed;
use super::lifecycle::Lifecycle;
use crate::events::Seen;

impl Lifecycle<'_, '_> {
    /// The outcome as the engine's events explain it, once the container is
    /// gone (`seen` holds everything the engine reported about it): a kill
    /// progscore did not ask for is a sandbox fault, whatever the exit code
    /// says; an OOM kill is the memory cap's only when the cgroups show it
    /// was the container's own limit's (another OOM killer's is a sandbox
    /// fault); an exit code 137 progscore did not cause is the program's
    /// own when the events were watched throughout and show no kill and the
    /// host's OOM killer did not act meanwhile, and unknown otherwise.
    pub(super) fn judge(&self, mut observed: Observed, seen: &Seen) -> Result<Observed, String> {
        let ours = self.kills_sent.load(std::sync::atomic::Ordering::SeqCst);
        if seen.kills.len() > ours {
            let signals: Vec<String> = seen.kills.iter().map(|s| format!("signal {s}")).collect();
            return Err(format!(
                "container {} was killed from outside progscore ({}; progscore sent {ours}): \
                 the program's outcome is unknown",
                self.name,
                signals.join(", ")
            ));
        }
        // A paused sandbox may not die of progscore's kill (a paused gVisor
        // sandbox refuses it) and run on once unpaused: an exit after the
        // kill at its limit is then not one before the limit.
        if seen.pauses > 0
            && observed.killed_at_limit
            && matches!(observed.outcome, Outcome::Exited { exit_code } if exit_code != 137)
        {
            return Err(format!(
                "container {} was paused from outside as progscore killed it at its limit, and \
                 it exited afterwards: whether it ended within its limit is unknown",
                self.name
            ));
        }
        // A pause the window could not place (the engine reports it after
        // the fact, and under gVisor no cgroup shows it) may have eaten the
        // time a fair-time proof counted as the program's.
        if seen.pauses > 0
            && observed.by_fair_time
            && let Outcome::TimedOut {
                unconfirmed: unconfirmed @ None,
                ..
            } = &mut observed.outcome
        {
            let why = format!(
                "container {} was paused from outside (docker pause) {} time(s) in its life, \
                 and its timeout rests on time the program may have spent frozen",
                self.name, seen.pauses
            );
            *unconfirmed = Some(why.clone());
            observed.confirm = Some(why);
        }
        // Only a kill at the program's own limit is its `memory_limit`:
        // the engine reports any OOM kill it hears of (containerd under
        // cgroup v2 counts every OOM killer's kills; under v1 an OOM of a
        // cgroup above the container's is notified to it too).
        let engine_oom = observed.engine_oom || seen.oom;
        let memory = match &observed.oom {
            Some(reading) => reading.verdict(engine_oom),
            None if engine_oom => MemoryKill::NotItsOwn(
                "the engine reports an OOM kill, and the container's cgroups cannot be read \
                 here to tell its own memory limit from the host's OOM killer"
                    .into(),
            ),
            None => MemoryKill::None,
        };
        match memory {
            MemoryKill::OwnLimit => {
                observed.outcome = Outcome::MemoryLimit;
                observed.confirm = None;
                return Ok(observed);
            }
            MemoryKill::NotItsOwn(why) => {
                return Err(format!(
                    "container {} was hit by an OOM killer that is not its own memory limit's: \
                     {why}; the program's outcome is unknown",
                    self.name
                ));
            }
            MemoryKill::None if engine_oom => {
                return Err(format!(
                    "the engine reports an OOM kill of container {} that its cgroups do not \
                     show: the program's outcome is unknown",
                    self.name
                ));
            }
            MemoryKill::None => {}
        }
        if observed.unexplained_sigkill {
            // A SIGKILL straight to a process bypasses the engine: the
            // host's OOM killer, acting while it ran, may have sent it.
            // Under cgroup v1 nothing left to read counts its kills of the
            // container's processes, so any OOM kill on the host meanwhile
            // (the host's count includes every cgroup's) leaves it unknown.
            let host_kills = host_oom_kills()
                .zip(self.host_oom_kills)
                .map(|(now, then)| now.saturating_sub(then));
            let v1_watch = observed
                .oom
                .as_ref()
                .is_some_and(|reading| !reading.counts_every_kill());
            if v1_watch && host_kills != Some(0) {
                return Err(format!(
                    "container {} ended with code 137 (a SIGKILL?) that progscore did not send, \
                     while the host's OOM killer {}: the program's outcome is unknown",
                    self.name,
                    match host_kills {
                        Some(kills) => format!("killed {kills} process(es)"),
                        None => "could not be watched".into(),
                    }
                ));
            }
            if !seen.complete() {
                let why = seen.broken.clone().unwrap_or_else(|| {
                    "its events were not seen from its creation to its removal".into()
                });
                return Err(format!(
                    "container {} ended with code 137 (a SIGKILL?) that progscore did not send, \
                     and the engine's events cannot say who sent it: {why}",
                    self.name
                ));
            }
        }
        Ok(observed)
    }
}
