//! The program's window, written once for every container backend: from the
//! moment the program was released until it ended, was killed at a limit, or
//! the call was cancelled; then the end of its output, its usage, and
//! whether a timeout is proven.
//!
//! The timing rule (`progscore_sandbox::timing`) is applied here and
//! nowhere else: the wall limit from the program's start, the fair extension
//! for time it waited for a CPU, the CPU-time limit, and the [`CpuWindow`]
//! measured before the kill that decides whether the timeout is proven,
//! to be confirmed alone, or unconfirmed. What differs between backends
//! (how a program's end is awaited, how it is killed, what a fault is) is
//! the [`Program`] a backend hands in; starting it and reading its exit
//! status stay with the backend.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use progscore_sandbox::{
    CpuWindow, Limits, MAX_FROZEN, Outcome, ResourceUsage, TimeLimit, TimeoutProof, fair_extension,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cgroup::{EndedTasks, InvocationCgroup, WaitSample, cpu_limit_reached};
use crate::output::output_was_active;
use crate::schedule::Load;
use progscore_trace::tracer_hold::TracerHold;

/// A started program, as its backend sees it.
pub trait Program {
    /// How the program ended, as the backend learns it from its wait.
    type Exit;
    /// A fault of the backend (the program's behaviour is then unknown).
    type Fault;

    /// Resolves when the program has ended. Dropped when the window ends
    /// otherwise.
    fn wait(&self) -> impl Future<Output = Result<Self::Exit, Self::Fault>> + Send;

    /// Whether the program ended by itself as a limit fired (asked before
    /// the kill): its exit when it did.
    fn ended(&self) -> impl Future<Output = Result<Option<Self::Exit>, Self::Fault>> + Send;

    /// Kills the program at a limit (a failed kill is the removal's to
    /// settle).
    fn kill(&self) -> impl Future<Output = ()> + Send;

    /// Waits, within the backend's bound, for the program killed at a limit.
    fn wait_killed(&self) -> impl Future<Output = Result<Self::Exit, Self::Fault>> + Send;

    /// Kills the program because the call was cancelled, and waits for it
    /// as far as the backend must before removal.
    fn kill_cancelled(&self) -> impl Future<Output = ()> + Send;

    /// Whether the output's end before the program's is believable: `Err`
    /// says why not (e.g. the connection carrying it was cut).
    fn output_ended(
        &self,
        ended: Result<(), String>,
    ) -> impl Future<Output = Result<(), String>> + Send {
        std::future::ready(ended)
    }

    /// A fault that is about the program's output (the message says what).
    fn output_fault(&self, message: String) -> Self::Fault;

    /// Whether the backend sees the sandbox paused from outside now (the
    /// Docker engine's `pause`, which under gVisor stops the sandbox
    /// without the cgroup freezer).
    fn paused(&self) -> bool {
        false
    }
}

/// The invocation's cgroup as measured at the program's start.
pub struct Measured<'a> {
    /// The cgroup, when its figures are the program's.
    pub cgroup: Option<&'a InvocationCgroup>,
    /// The container's own id inside it (its CPU waits are sampled there).
    pub leaf: &'a str,
    pub cpu_at_start: Option<Duration>,
    pub waits_at_start: Option<WaitSample>,
    /// Whether the waits of tasks that ended are counted (gVisor: the
    /// cgroup's tasks are the sandbox's own).
    pub ended_tasks: EndedTasks,
}

impl Measured<'_> {
    /// CPU time used since the start, if measured.
    fn cpu(&self) -> Option<Duration> {
        self.cgroup
            .and_then(InvocationCgroup::cpu_usage)
            .zip(self.cpu_at_start)
            .map(|(now, then)| now.saturating_sub(then))
    }

    /// Whether block-I/O stalls are in [`Self::cpu_wait`].
    fn io_measured(&self) -> bool {
        self.waits_at_start
            .as_ref()
            .is_some_and(WaitSample::io_measured)
    }

    /// Whether the cgroup freezer holds the program now (`None`: not
    /// readable).
    fn frozen(&self) -> Option<bool> {
        self.cgroup.and_then(|cgroup| cgroup.frozen(self.leaf))
    }

    /// Time waited for a CPU (and stalled on block I/O, where measured)
    /// since the start beyond the program's own quota, if measured.
    fn cpu_wait(&self) -> Option<Duration> {
        self.cgroup
            .and_then(|cgroup| cgroup.sample_waits(self.leaf))
            .and_then(|now| {
                now.excess_since(
                    &self.waits_at_start.clone().unwrap_or_default(),
                    self.ended_tasks,
                )
            })
    }
}

/// How often the window looks whether the sandbox is frozen.
const FREEZE_POLL: Duration = Duration::from_millis(10);

/// A gap between two looks longer than this (the window's task was not
/// run) is time not observed: it counts as frozen, an error on the side of
/// more time.
const FREEZE_GAP: Duration = Duration::from_millis(50);

/// The time the sandbox may have spent frozen from outside, as the window
/// looked: every stretch between two looks of which either saw it frozen,
/// and the unobserved part of every long gap between looks.
#[derive(Debug)]
struct FrozenClock {
    last: Instant,
    was_frozen: bool,
    /// Upper bound of the time frozen so far.
    frozen: Duration,
    /// A freeze was seen only by the backend's report (no cgroup freezer
    /// state said so): its length is not measured.
    unmeasured: bool,
    /// Whether any look saw the sandbox frozen.
    seen: bool,
}

impl FrozenClock {
    fn new(started: Instant) -> FrozenClock {
        FrozenClock {
            last: started,
            was_frozen: false,
            frozen: Duration::ZERO,
            unmeasured: false,
            seen: false,
        }
    }

    /// Records a look at `at`: `by_cgroup` is the freezer's state (`None`
    /// when unreadable), `by_backend` the backend's report. Whether the
    /// sandbox is frozen now.
    fn look(&mut self, at: Instant, by_cgroup: Option<bool>, by_backend: bool) -> bool {
        let frozen = by_cgroup == Some(true) || by_backend;
        if by_backend && by_cgroup != Some(true) {
            self.unmeasured = true;
        }
        let gap = at.saturating_duration_since(self.last);
        if frozen || self.was_frozen {
            self.frozen += gap;
        } else if gap > FREEZE_GAP {
            self.frozen += gap - FREEZE_POLL;
        }
        self.seen |= frozen;
        self.last = at;
        self.was_frozen = frozen;
        frozen
    }
}

/// What one window needs besides the program.
pub struct Window<'a> {
    /// The container's name, for messages.
    pub name: &'a str,
    pub limits: &'a Limits,
    /// This client's programs inside their window.
    pub load: &'a Load,
    /// The CPUs of the machine that runs the program.
    pub cpus: usize,
    /// Whether no other program of this client may run beside it.
    pub alone: bool,
    pub token: &'a CancellationToken,
    /// How long the output may take to end once the program ended (the
    /// backend's own bound, never the program's time).
    pub output_bound: Duration,
    /// The program's behaviour tracer, when one may hold its calls: the
    /// time they waited for it is not the program's.
    pub tracer: Option<&'a TracerHold>,
}

/// progscore's kill of a program at a limit.
#[derive(Debug, Clone)]
pub struct Killed {
    pub limit: TimeLimit,
    /// Why the timeout is not proven, when it is not.
    pub unconfirmed: Option<String>,
    /// Whether a proof rests on fair time (not on the CPU the program used
    /// or its CPU-time limit): a pause from outside that the window did
    /// not see (reported late) undoes it.
    pub by_fair_time: bool,
}

/// What the window showed.
pub struct Watched<E> {
    /// How the program ended; `None` when the call was cancelled (the
    /// program was killed and nothing was measured).
    pub exit: Option<E>,
    /// Set when progscore killed the program at a limit.
    pub killed: Option<Killed>,
    /// From the program's start to its end or its kill.
    pub duration: Duration,
    pub usage: Option<ResourceUsage>,
    /// Run it again alone: its timeout is not proven yet (the text says why).
    pub confirm: Option<String>,
}

impl<E> Watched<E> {
    /// The outcome of a program whose exit code is `code` (the memory limit
    /// is the backend's to tell first): the limit's when progscore's kill
    /// ended it (137, SIGKILL), else its own exit, which confirms nothing.
    pub fn outcome(&mut self, code: i64) -> Outcome {
        match &self.killed {
            Some(killed) if code == 137 => Outcome::TimedOut {
                limit: killed.limit,
                unconfirmed: killed.unconfirmed.clone(),
            },
            // Exited on its own (before the kill landed, if there was one).
            _ => {
                self.confirm = None;
                Outcome::Exited { exit_code: code }
            }
        }
    }
}

/// How the window's select ended.
enum End<E, F> {
    Exited(E),
    Limit(TimeLimit),
    Cancelled,
    Fault(F),
}

impl Window<'_> {
    /// Watches `program` from its release (now) until it ends, a limit fires
    /// or the call is cancelled, while `io` feeds its input and drains its
    /// output (stamping `last_output`). `measure` reads the cgroup at the
    /// start; `ended` is the exit of a program seen to end before its
    /// window opened.
    pub async fn watch<'m, P, Io>(
        &self,
        program: &P,
        measure: impl FnOnce() -> Measured<'m>,
        io: Io,
        last_output: &Mutex<Option<Instant>>,
        ended: Option<P::Exit>,
    ) -> Result<Watched<P::Exit>, P::Fault>
    where
        P: Program,
        Io: Future<Output = Result<(), String>>,
    {
        // The program's clock starts here.
        let started = Instant::now();
        let running = self.load.enter();
        let load_at_start = self.load.now();
        let measured = measure();
        let limits = self.limits;
        let token = self.token;
        tokio::pin!(io);
        let mut io_end: Option<Result<(), String>> = None;
        let mut frozen = FrozenClock::new(started);
        // What the tracer held before the program's start (the runtime's own
        // calls) is not in its window (its floor: more is never less).
        let tracer_at_start = self.tracer.map(TracerHold::settled);
        let tracer_wait = || {
            self.tracer
                .zip(tracer_at_start)
                .map_or(Duration::ZERO, |(tracer, at_start)| {
                    tracer.bound().saturating_sub(at_start)
                })
        };

        let end = match ended {
            Some(exit) => End::Exited(exit),
            None => {
                let exit = program.wait();
                tokio::pin!(exit);
                let cpu_limit =
                    cpu_limit_reached(measured.cgroup, measured.cpu_at_start, limits.cpu_time());
                tokio::pin!(cpu_limit);
                let deadline = tokio::time::sleep_until(started + limits.timeout());
                tokio::pin!(deadline);
                let mut freeze_poll = tokio::time::interval(FREEZE_POLL);
                freeze_poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        biased;
                        () = token.cancelled() => break End::Cancelled,
                        waited = &mut exit => break match waited {
                            Ok(exit) => End::Exited(exit),
                            Err(fault) => End::Fault(fault),
                        },
                        // The streams may end before the program does (it
                        // closed them): keep waiting for the exit.
                        ended = &mut io, if io_end.is_none() => {
                            io_end = Some(program.output_ended(ended).await);
                        }
                        () = &mut deadline => {
                            let now = Instant::now();
                            // A frozen program is not running: its limit
                            // waits until it thaws (within the bound).
                            let frozen_now = frozen.look(now, measured.frozen(), program.paused());
                            if frozen_now && frozen.frozen < MAX_FROZEN {
                                deadline.as_mut().reset(now + FREEZE_POLL);
                                continue;
                            }
                            // The CPU it used proves its timeout whatever it
                            // waited for (a spinner whose calls wait on its
                            // tracer need not stretch its window).
                            let used = CpuWindow {
                                limit: limits.timeout(),
                                cpu: measured.cpu(),
                                ..CpuWindow::default()
                            };
                            if used.got_its_cpu(limits.cpus) {
                                break End::Limit(TimeLimit::Wall);
                            }
                            // Time the program waited for a CPU, time it was
                            // frozen and time its calls waited for its
                            // tracer are given back: frozen time whatever
                            // the stretch (within its own bound), the waits
                            // within the stretch (a tracer that holds a
                            // program for good must not hold the call).
                            let elapsed = now.duration_since(started);
                            let given = frozen.frozen.min(MAX_FROZEN);
                            let tracer = tracer_wait();
                            let more = match measured.cpu_wait() {
                                Some(wait) => fair_extension(
                                    limits.timeout(),
                                    elapsed.saturating_sub(given),
                                    wait + tracer,
                                ),
                                None if !given.is_zero() || !tracer.is_zero() => fair_extension(
                                    limits.timeout(),
                                    elapsed.saturating_sub(given),
                                    tracer,
                                ),
                                None => None,
                            };
                            match more {
                                Some(more) => deadline.as_mut().reset(now + more),
                                None => break End::Limit(TimeLimit::Wall),
                            }
                        }
                        _ = freeze_poll.tick() => {
                            frozen.look(Instant::now(), measured.frozen(), program.paused());
                        }
                        () = &mut cpu_limit => break End::Limit(TimeLimit::Cpu),
                    }
                }
            }
        };
        let window = started.elapsed();

        let mut confirm = None;
        let mut starved = None;
        let mut killed = None;
        let exit = match end {
            End::Fault(fault) => return Err(fault),
            End::Cancelled => {
                program.kill_cancelled().await;
                return Ok(Watched {
                    exit: None,
                    killed: None,
                    duration: Duration::ZERO,
                    usage: None,
                    confirm: None,
                });
            }
            End::Exited(exit) => exit,
            End::Limit(limit) => {
                // Measured before the kill, while the program still runs.
                let cpu_window = CpuWindow {
                    limit: limits.timeout(),
                    elapsed: window,
                    cpu: measured.cpu(),
                    cpu_wait: measured.cpu_wait(),
                    io_measured: measured.io_measured(),
                    output_active: output_was_active(last_output, window),
                    oversubscribed: load_at_start.max(self.load.now()) > self.cpus,
                    frozen: frozen.frozen,
                    // Ended frozen (past the bound), or frozen for a time
                    // only reported: fair time proves nothing.
                    frozen_unmeasured: frozen.unmeasured
                        || frozen.was_frozen
                        || frozen.frozen >= MAX_FROZEN,
                    tracer_wait: tracer_wait(),
                };
                starved = cpu_window.cpu_wait;
                match program.ended().await? {
                    // It ended on its own as the limit fired.
                    Some(exit) => exit,
                    None => {
                        program.kill().await;
                        let proof = match limit {
                            TimeLimit::Cpu => TimeoutProof::Proven,
                            TimeLimit::Wall => cpu_window.judge(limits.cpus, self.alone),
                        };
                        let unconfirmed = match proof {
                            TimeoutProof::Proven => None,
                            TimeoutProof::Confirm(why) => {
                                confirm = Some(why.clone());
                                Some(why)
                            }
                            TimeoutProof::Unconfirmed(why) => {
                                // Alone and still unproven: what held it was
                                // outside this client, and may pass. Another
                                // run alone can tell where the CPU time is
                                // measured (the client bounds the runs).
                                if self.alone && cpu_window.cpu.is_some() {
                                    confirm = Some(why.clone());
                                }
                                Some(why)
                            }
                        };
                        let by_fair_time =
                            limit == TimeLimit::Wall && !cpu_window.got_its_cpu(limits.cpus);
                        killed = Some(Killed {
                            limit,
                            unconfirmed,
                            by_fair_time,
                        });
                        program.wait_killed().await?
                    }
                }
            }
        };
        drop(running);

        // The program has ended: its output must end too, within the
        // backend's bound.
        if io_end.is_none() {
            let bound = self.output_bound;
            io_end = Some(match tokio::time::timeout(bound, &mut io).await {
                Ok(ended) => ended,
                Err(_) => Err(format!(
                    "the output of container {} did not end within {bound:?} of its exit",
                    self.name
                )),
            });
        }
        // Output cut short is not the program's whole output.
        if let Some(Err(message)) = io_end {
            return Err(program.output_fault(message));
        }

        let usage = measured.cgroup.map(|cgroup| ResourceUsage {
            cpu_ms: cgroup
                .cpu_usage()
                .zip(measured.cpu_at_start)
                .map(|(end, start)| millis(end.saturating_sub(start))),
            peak_memory_bytes: cgroup.peak_memory(),
            cpu_wait_ms: starved.map(millis),
        });
        Ok(Watched {
            exit: Some(exit),
            killed,
            duration: window,
            usage,
            confirm,
        })
    }
}

/// A duration in whole milliseconds, as events record it.
pub fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod watch_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frozen_time_is_over_counted_never_under_counted() {
        let ms = Duration::from_millis;
        let start = Instant::now();
        let mut clock = FrozenClock::new(start);
        // Thawed looks close together: nothing frozen.
        assert!(!clock.look(start + ms(10), Some(false), false));
        assert!(!clock.look(start + ms(20), Some(false), false));
        assert_eq!(clock.frozen, Duration::ZERO);
        // Frozen from some moment after the look at 20 ms to some moment
        // before the look at 520 ms: all of it counts.
        assert!(clock.look(start + ms(30), Some(true), false));
        assert!(clock.look(start + ms(510), Some(true), false));
        assert!(!clock.look(start + ms(520), Some(false), false));
        assert_eq!(clock.frozen, ms(500));
        assert!(!clock.unmeasured);
        // A look delayed by 300 ms: what happened in between is unseen.
        clock.look(start + ms(820), Some(false), false);
        assert_eq!(clock.frozen, ms(500 + 290));
        // Paused as the backend reports it, with no freezer state: the
        // time counts, but it is not measured.
        assert!(clock.look(start + ms(830), Some(false), true));
        assert!(clock.unmeasured);
    }
}
