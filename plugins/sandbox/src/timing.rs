//! When a wall-clock timeout proves something about the program.
//!
//! A program's wall-clock limit is the time it may take on a machine that
//! gives it the CPU its profile promises. On a machine running more programs
//! than it has CPUs (or beside other load) a program can be kept waiting for a
//! CPU while ready to run; that time is the machine's, not the program's. So
//! every backend applies the same rule, from what it can measure:
//!
//! 1. **Fair time.** The program's clock is wall time minus the time it
//!    waited for a CPU beyond its own CPU quota (every task's waits,
//!    including tasks that already exited: a backend that cannot count
//!    those reports the waits as not measured; an over-count errs towards
//!    more time, never less). When the wall limit fires, the program gets the
//!    time it lost, again and again, until it has had its limit in fair
//!    time, or its window reaches [`MAX_STRETCH`] times the limit.
//! 2. **Proven.** A timeout is proven when the program had (nearly, see
//!    [`FAIR_SHARE`]) its limit in fair time, or used nearly its promised CPU
//!    (`min(cpus, 1)` × the limit: one busy thread's worth), unless it was
//!    still writing output at the end while using less CPU than that (a busy
//!    reader may have held it up, and that is not measured). By fair time
//!    alone it is proven only when it had a CPU of its own (no more programs
//!    than CPUs by the backend's count, disk stalls measured) or ran alone:
//!    in a crowd, a program using little CPU may have been held in ways no
//!    counter shows (a kernel lock whose holder waits for the disk).
//! 3. **Otherwise** the timeout is not proven. The backend runs the invocation
//!    again with no other program of its own beside it, under the same rule,
//!    up to [`ALONE_RUNS`] times (a burst of load from outside, which no
//!    backend holds back, passes); if none proves it, it stays unconfirmed
//!    and decides nothing.
//!    Time stalled on block I/O (a binary paged in from a busy disk) is
//!    the machine's too: counted with the waits where the kernel measures
//!    it ([`CpuWindow::io_measured`]); where it does not, a program that
//!    looks as if it chose to sleep beside other programs may have waited
//!    for the disk, and its timeout is confirmed alone (step 3).
//! 4. **Not measured.** Without a measurement of the program's CPU waits
//!    (an engine whose cgroups this process cannot see: another host, the
//!    systemd cgroup driver, a cgroup namespace), only the CPU it used can
//!    prove a wall-clock timeout. How many programs the backend itself runs
//!    says nothing about what else the machine runs (another progscore, any
//!    CPU hog), so running alone proves nothing by itself. Where the CPU
//!    time is measured (waits of exited tasks are what is missing), the
//!    invocation runs again alone so that it may get its CPU, and is proven
//!    only by that CPU; where nothing is measured (an engine elsewhere) the
//!    timeout is unconfirmed at once ([`CpuWindow::oversubscribed`] only
//!    words its reason).
//!
//! 5. **Frozen is not running.** Time the sandbox was frozen from outside
//!    (`docker pause`, the cgroup freezer, a paused gVisor sandbox) is
//!    neither the program's nor a wait the kernel counts: its tasks
//!    neither run nor wait for a CPU, exactly like a program that chose to
//!    sleep. It is taken out of the program's clock (an over-count errs
//!    towards more time), within [`MAX_FROZEN`]; a limit never fires while
//!    the sandbox is frozen. A timeout after a freeze is proven by fair
//!    time only when the freeze was measured ([`CpuWindow::frozen`]); a
//!    freeze only reported ([`CpuWindow::frozen_unmeasured`]) leaves it to
//!    the CPU the program used, else it is confirmed alone or unconfirmed.
//!
//! 6. **The tracer's time is not the program's.** A traced program's calls
//!    wait for a tracer outside its cgroup (runc's seccomp listener,
//!    gVisor's trace reader), neither running nor waiting for a CPU: again
//!    what a sleeper shows. An upper bound of that wait
//!    ([`CpuWindow::tracer_wait`]) is taken out of the program's clock
//!    like frozen time (the window gives it back, within [`MAX_STRETCH`]),
//!    and a timeout is proven by fair time only if it had its limit after
//!    that bound too; the CPU it used proves it as before (the tracer's
//!    CPU is not in the program's cgroup). One that had its time only with
//!    the tracer's share counted is confirmed alone, then unconfirmed,
//!    with a reason naming the tracer.
//!
//! A CPU-time limit (`limits.cpu_time`) does not depend on load: exceeding it
//! is always proven.

use std::time::Duration;

/// Share of its limit a program must have had in fair time (or of its
/// promised CPU it must have used) for its timeout to be proven. A program
/// that needs within this margin of its limit may be judged either way, as on
/// any judge whose clock has jitter.
pub const FAIR_SHARE: f64 = 0.9;

/// How many times an unproven timeout is run again alone before it is left
/// unconfirmed. Measured: on a shared machine a sleeper under gVisor (whose
/// many sentry threads all count their waits) ran alone once and still
/// looked starved, from load outside progscore.
pub const ALONE_RUNS: u32 = 3;

/// The warning an invocation leaves each time it runs again alone (`run` of
/// [`ALONE_RUNS`]), with why its timeout was not proven yet.
pub fn alone_run_warning(index: usize, run: u32, why: &str) -> String {
    format!(
        "invocation {index} ran again with no other program beside it ({run} of {ALONE_RUNS}): {why}"
    )
}

/// How far a program's window may stretch to make up for time lost to
/// contention, as a multiple of its wall-clock limit; past it, the timeout
/// is confirmed by running alone.
pub const MAX_STRETCH: u32 = 4;

/// How much frozen time (the sandbox stopped from outside) a window gives
/// back: past it, the window ends and a timeout is not proven by fair time
/// (a sandbox paused for good must not hold the call for good).
pub const MAX_FROZEN: Duration = Duration::from_secs(60);

/// What a backend measured about a program over its window, as far as it can.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuWindow {
    /// The program's wall-clock limit.
    pub limit: Duration,
    /// Its window: from its start to the moment it was stopped.
    pub elapsed: Duration,
    /// CPU time it used in the window, if measured.
    pub cpu: Option<Duration>,
    /// Time its threads waited for a CPU while ready to run, beyond its own
    /// CPU quota, if measured.
    pub cpu_wait: Option<Duration>,
    /// Whether `cpu_wait` includes the time its tasks stalled on block
    /// I/O (Linux delay accounting on).
    pub io_measured: bool,
    /// Whether it was writing output near the end of the window.
    pub output_active: bool,
    /// Whether more programs than CPUs were running beside it (the backend's
    /// own count). It never proves a timeout: other processes are not
    /// counted. It only says why an unmeasured timeout is not believed.
    pub oversubscribed: bool,
    /// Time the sandbox may have been frozen from outside in the window
    /// (an upper bound: time not observed counts as frozen), not the
    /// program's.
    pub frozen: Duration,
    /// Whether a freeze was reported that `frozen` does not measure (a
    /// gVisor sandbox paused through the engine stops no cgroup), or the
    /// window ended frozen: fair time then proves nothing.
    pub frozen_unmeasured: bool,
    /// Upper bound of the time its calls waited for its behaviour tracer
    /// (a seccomp listener's answer, room in gVisor's trace socket): not
    /// the program's, taken out of its clock like frozen time.
    pub tracer_wait: Duration,
}

/// The verdict on a wall-clock timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeoutProof {
    /// The timeout says something about the program.
    Proven,
    /// Run it again alone before believing it; the text says why.
    Confirm(String),
    /// Not proven even alone; the text says what was measured.
    Unconfirmed(String),
}

/// More time for a program whose wall-clock limit fired after `elapsed` of
/// which it spent `cpu_wait` waiting for a CPU: what it lost, within
/// [`MAX_STRETCH`]. `None` when it has had its limit in fair time, or when
/// its window cannot stretch further.
pub fn fair_extension(limit: Duration, elapsed: Duration, cpu_wait: Duration) -> Option<Duration> {
    let fair = elapsed.saturating_sub(cpu_wait);
    if fair.as_secs_f64() >= FAIR_SHARE * limit.as_secs_f64() {
        return None;
    }
    let room = (limit * MAX_STRETCH).saturating_sub(elapsed);
    let more = limit.saturating_sub(fair).min(room);
    (!more.is_zero()).then_some(more)
}

impl CpuWindow {
    /// Applies the rule above. `cpus` is the profile's CPU quota; `alone` is
    /// whether no other program of the backend ran beside this one.
    pub fn judge(&self, cpus: f64, alone: bool) -> TimeoutProof {
        let promised = self.limit.mul_f64(cpus.clamp(0.0, 1.0));
        if self.got_its_cpu(cpus) {
            return TimeoutProof::Proven;
        }
        let what = format!(
            "it was stopped at its {} ms limit after {} ms",
            self.limit.as_millis(),
            self.elapsed.as_millis()
        );
        let Some(wait) = self.cpu_wait else {
            // Nothing says the machine gave it its time, and running alone
            // would not say it either (other processes are not held): only
            // the CPU it used can prove the timeout. Run alone, a program
            // whose CPU is measured may get enough of it to be proven by
            // it (the common case: this client's own programs held it up).
            let beside = if self.oversubscribed {
                "; more programs than CPUs were running"
            } else {
                ""
            };
            let why = format!(
                "its CPU waits could not be measured ({}{beside}): a wall-clock timeout is \
                 proven there only by the CPU the program used (a CPU-time limit always is)",
                self.describe(promised)
            );
            return if self.cpu.is_some() && !alone {
                TimeoutProof::Confirm(format!("{what} while the machine was busy, and {why}"))
            } else {
                TimeoutProof::Unconfirmed(format!("{what}, and {why}"))
            };
        };
        let fair = self
            .elapsed
            .saturating_sub(wait)
            .saturating_sub(self.frozen);
        let fair_share = FAIR_SHARE * self.limit.as_secs_f64();
        let had_its_time = !self.frozen_unmeasured
            && fair.saturating_sub(self.tracer_wait).as_secs_f64() >= fair_share;
        // It would have had its time but for its waits on the tracer.
        let held_by_tracer =
            !self.frozen_unmeasured && !had_its_time && fair.as_secs_f64() >= fair_share;
        // Beside more programs than CPUs, a program that used little CPU
        // may have been held in ways no counter shows (a kernel lock whose
        // holder waits for the disk; under gVisor, sentry threads that
        // ended and took their waits along): measured on a 32-job batch,
        // correct programs were "proven" timed out both ways. Only running
        // alone tells.
        let crowded = self.oversubscribed || !self.io_measured;
        if had_its_time && (alone || (!self.output_active && !crowded)) {
            return TimeoutProof::Proven;
        }
        let why = if self.frozen_unmeasured {
            format!(
                "was paused from outside for a time that was not measured ({})",
                self.describe(promised)
            )
        } else if had_its_time && self.output_active {
            format!(
                "it was still writing output, which a busy reader can hold up ({})",
                self.describe(promised)
            )
        } else if had_its_time && !self.io_measured {
            format!(
                "{}, and its block-I/O stalls were not measured (kernel.task_delayacct is \
                 off): it may have waited for the disk rather than slept",
                self.describe(promised)
            )
        } else if had_its_time {
            format!(
                "{}, beside more programs than CPUs: it may have been held up in ways not \
                 measured rather than slept",
                self.describe(promised)
            )
        } else {
            self.describe(promised)
        };
        if held_by_tracer {
            let why = format!(
                "{why}: time its calls waited for its behaviour tracer is the tracer's, and its \
                 timeout cannot be told apart from that wait"
            );
            return if alone {
                TimeoutProof::Unconfirmed(format!("{what}, and even running alone it {why}"))
            } else {
                TimeoutProof::Confirm(format!("{what} while the machine was busy: it {why}"))
            };
        }
        if alone {
            TimeoutProof::Unconfirmed(format!(
                "{what}, and even running alone it {why}; the machine is too busy to tell a slow \
                 program from a starved one"
            ))
        } else {
            TimeoutProof::Confirm(format!("{what} while the machine was busy: it {why}"))
        }
    }

    /// Whether the CPU the program used proves its timeout by itself
    /// (nearly the CPU its profile promises over the limit, `cpus` its quota),
    /// whatever else happened in the window.
    pub fn got_its_cpu(&self, cpus: f64) -> bool {
        let promised = self.limit.mul_f64(cpus.clamp(0.0, 1.0));
        self.cpu
            .is_some_and(|cpu| cpu.as_secs_f64() >= FAIR_SHARE * promised.as_secs_f64())
    }

    fn describe(&self, promised: Duration) -> String {
        let mut parts = Vec::new();
        if let Some(cpu) = self.cpu {
            parts.push(format!(
                "got {} ms of CPU of the {} ms its profile promises",
                cpu.as_millis(),
                promised.as_millis()
            ));
        }
        if let Some(wait) = self.cpu_wait {
            let what = if self.io_measured {
                "a CPU or the disk"
            } else {
                "a CPU"
            };
            parts.push(format!("waited {} ms for {what}", wait.as_millis()));
        }
        if !self.frozen.is_zero() {
            parts.push(format!(
                "was frozen from outside for up to {} ms",
                self.frozen.as_millis()
            ));
        }
        if !self.tracer_wait.is_zero() {
            parts.push(format!(
                "waited up to {} ms for its behaviour tracer",
                self.tracer_wait.as_millis()
            ));
        }
        if parts.is_empty() {
            "nothing was measured".into()
        } else {
            parts.join(" and ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn window(elapsed: u64, cpu: Option<u64>, wait: Option<u64>) -> CpuWindow {
        CpuWindow {
            limit: ms(1000),
            elapsed: ms(elapsed),
            cpu: cpu.map(ms),
            cpu_wait: wait.map(ms),
            io_measured: true,
            output_active: false,
            oversubscribed: true,
            frozen: Duration::ZERO,
            frozen_unmeasured: false,
            tracer_wait: Duration::ZERO,
        }
    }

    #[test]
    fn time_lost_to_contention_is_given_back_within_the_stretch() {
        // Had its second, less 10%: done.
        assert_eq!(fair_extension(ms(1000), ms(1000), ms(50)), None);
        // Lost 600 ms of its first second: it gets them back.
        assert_eq!(fair_extension(ms(1000), ms(1000), ms(600)), Some(ms(600)));
        // Near the stretch, only what is left of it.
        assert_eq!(fair_extension(ms(1000), ms(3800), ms(3000)), Some(ms(200)));
        assert_eq!(fair_extension(ms(1000), ms(4000), ms(3500)), None);
    }

    #[test]
    fn a_spinner_that_got_its_cpu_is_proven_under_any_load() {
        assert_eq!(
            window(1000, Some(950), Some(600)).judge(1.0, false),
            TimeoutProof::Proven
        );
        // Half a core promised, half a core used: its quota, not the machine, stopped it.
        assert_eq!(
            window(1000, Some(480), Some(0)).judge(0.5, false),
            TimeoutProof::Proven
        );
    }

    #[test]
    fn a_program_that_had_its_time_in_fair_time_is_proven() {
        // A sleeper: no CPU, no wait, no more programs than CPUs.
        let mut sleeper = window(1000, Some(30), Some(5));
        sleeper.oversubscribed = false;
        assert_eq!(sleeper.judge(1.0, false), TimeoutProof::Proven);
        // Starved, then given back what it lost.
        let mut starved = window(2500, Some(700), Some(1500));
        starved.oversubscribed = false;
        assert_eq!(starved.judge(1.0, false), TimeoutProof::Proven);
    }

    #[test]
    fn a_sleeper_beside_more_programs_than_cpus_is_confirmed_alone() {
        // What held it may not show in any counter: only alone tells.
        let crowded = window(1529, Some(18), Some(600));
        assert!(crowded.oversubscribed);
        let TimeoutProof::Confirm(why) = crowded.judge(1.0, false) else {
            panic!("a sleeper-looking timeout in a crowd must be confirmed alone");
        };
        assert!(why.contains("more programs than CPUs"), "{why}");
        assert_eq!(crowded.judge(1.0, true), TimeoutProof::Proven);
    }

    #[test]
    fn a_program_starved_past_the_stretch_is_confirmed_alone_then_unconfirmed() {
        let starved = window(4000, Some(400), Some(3500));
        let TimeoutProof::Confirm(why) = starved.judge(1.0, false) else {
            panic!("a starved program must be confirmed");
        };
        assert!(
            why.contains("got 400 ms of CPU") && why.contains("waited 3500 ms"),
            "{why}"
        );
        let TimeoutProof::Unconfirmed(why) = starved.judge(1.0, true) else {
            panic!("still starved alone: not proven");
        };
        assert!(why.contains("even running alone"), "{why}");
    }

    #[test]
    fn a_sleeper_whose_disk_stalls_were_not_measured_is_confirmed_alone() {
        // 9 ms of CPU, no run-queue wait, 2 s: slept, or paged in from a
        // busy disk? Without delay accounting nothing tells.
        let mut unmeasured = window(2000, Some(9), Some(0));
        unmeasured.io_measured = false;
        unmeasured.oversubscribed = false;
        let TimeoutProof::Confirm(why) = unmeasured.judge(1.0, false) else {
            panic!("an unmeasured disk stall beside other programs must be confirmed");
        };
        assert!(why.contains("block-I/O stalls were not measured"), "{why}");
        assert_eq!(unmeasured.judge(1.0, true), TimeoutProof::Proven);
        // Measured: the stall is given back like a CPU wait.
        let stalled = window(2000, Some(9), Some(1990));
        assert!(matches!(
            stalled.judge(1.0, false),
            TimeoutProof::Confirm(_)
        ));
        // A spinner needs no such measure: its CPU proves it.
        let mut spinner = window(1000, Some(950), Some(0));
        spinner.io_measured = false;
        assert_eq!(spinner.judge(1.0, false), TimeoutProof::Proven);
    }

    #[test]
    fn writing_output_at_the_end_needs_a_confirmation() {
        let mut flood = window(1000, Some(300), Some(10));
        flood.output_active = true;
        assert!(matches!(flood.judge(1.0, false), TimeoutProof::Confirm(_)));
        assert_eq!(flood.judge(1.0, true), TimeoutProof::Proven);
    }

    #[test]
    fn without_measured_waits_a_wall_timeout_is_never_proven_by_the_backends_own_count() {
        // Another progscore, or any CPU hog, is not in this process's count:
        // neither few programs of its own nor running alone proves anything.
        let mut blind = window(1000, None, None);
        for oversubscribed in [false, true] {
            blind.oversubscribed = oversubscribed;
            for alone in [false, true] {
                let TimeoutProof::Unconfirmed(why) = blind.judge(1.0, alone) else {
                    panic!(
                        "unmeasured, oversubscribed {oversubscribed}, alone {alone}: not proven"
                    );
                };
                assert!(why.contains("could not be measured"), "{why}");
            }
        }
        // CPU time measured, waits not: a sleeper (or a starved program)
        // runs again alone, where only the CPU it gets can prove it; still
        // short of it alone, it stays unconfirmed, ...
        let idle = window(1000, Some(30), None);
        assert!(matches!(idle.judge(1.0, false), TimeoutProof::Confirm(_)));
        assert!(matches!(
            idle.judge(1.0, true),
            TimeoutProof::Unconfirmed(_)
        ));
        // ... but a program that used its promised CPU is proven: what it
        // used is its own, whatever else ran.
        assert_eq!(
            window(1000, Some(950), None).judge(1.0, false),
            TimeoutProof::Proven
        );
    }

    #[test]
    fn time_frozen_from_outside_is_never_the_programs() {
        // A sleeper stopped at 2 s that was frozen for 1.5 s of them (no
        // CPU, no wait: exactly what a sleeper shows) did not have its time.
        let mut paused = window(2000, Some(8), Some(0));
        paused.limit = ms(2000);
        paused.oversubscribed = false;
        paused.frozen = ms(1500);
        for alone in [false, true] {
            let (TimeoutProof::Confirm(why) | TimeoutProof::Unconfirmed(why)) =
                paused.judge(1.0, alone)
            else {
                panic!("a frozen sleeper's timeout must not be proven (alone {alone})");
            };
            assert!(
                why.contains("frozen from outside for up to 1500 ms"),
                "{why}"
            );
        }
        // Given the frozen time back and still asleep: proven.
        paused.elapsed = ms(3600);
        assert_eq!(paused.judge(1.0, false), TimeoutProof::Proven);
        // A pause that was reported but not measured proves nothing by
        // fair time, ...
        paused.frozen_unmeasured = true;
        let TimeoutProof::Unconfirmed(why) = paused.judge(1.0, true) else {
            panic!("an unmeasured pause leaves the timeout unconfirmed");
        };
        assert!(why.contains("paused from outside"), "{why}");
        // ... but a spinner's CPU still does.
        paused.cpu = Some(ms(1900));
        assert_eq!(paused.judge(1.0, false), TimeoutProof::Proven);
    }

    #[test]
    fn time_waiting_for_the_tracer_never_proves_a_timeout() {
        // 20,000 opens under a 2 s limit, each answered late by a starved
        // listener: 40 ms of CPU, no CPU wait, 1.9 s waiting on the tracer.
        let mut held = window(2000, Some(40), Some(0));
        held.limit = ms(2000);
        held.oversubscribed = false;
        held.tracer_wait = ms(1900);
        let TimeoutProof::Confirm(why) = held.judge(1.0, false) else {
            panic!("a timeout held by the tracer must be confirmed alone");
        };
        assert!(
            why.contains("waited up to 1900 ms for its behaviour tracer")
                && why.contains("cannot be told apart"),
            "{why}"
        );
        let TimeoutProof::Unconfirmed(why) = held.judge(1.0, true) else {
            panic!("held by the tracer even alone: unconfirmed, never proven");
        };
        assert!(why.contains("behaviour tracer"), "{why}");
        // Given the tracer's time back and still not done: proven.
        held.elapsed = ms(3950);
        assert_eq!(held.judge(1.0, false), TimeoutProof::Proven);
        // A spinner's CPU proves it whatever the tracer did.
        let mut spinner = window(2000, Some(1950), Some(0));
        spinner.limit = ms(2000);
        spinner.tracer_wait = ms(1500);
        assert_eq!(spinner.judge(1.0, false), TimeoutProof::Proven);
    }

    #[test]
    fn measured_waits_decide_when_the_program_had_a_cpu_of_its_own() {
        // Waits without CPU time still tell fair time.
        let mut unhurried = window(1000, None, Some(5));
        unhurried.oversubscribed = false;
        assert_eq!(unhurried.judge(1.0, false), TimeoutProof::Proven);
        assert!(matches!(
            window(1000, None, Some(600)).judge(1.0, false),
            TimeoutProof::Confirm(_)
        ));
    }
}
