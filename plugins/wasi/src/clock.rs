//! The program's clock in a guest: its limits counted from its start on the
//! thread that runs it, the CPU time and CPU waits of that thread, and the
//! time given back when the thread waited for a CPU.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use progscore_sandbox::{Limits, fair_extension};

/// Why the host interrupted a guest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Stop {
    Deadline,
    CpuLimit,
    Cancelled,
}

/// The program's limits, counted from its start on the thread running it
/// (guests run on the thread that polls them, and so does the host timer).
pub(crate) struct ProgramClock {
    pub(crate) started: Instant,
    limit: Duration,
    /// When the wall limit fires; moved later by the time the guest waited
    /// for a CPU (see `progscore_sandbox::timing`).
    pub(crate) deadline: Instant,
    cpu_limit: Option<Duration>,
    cpu_at_start: Option<Duration>,
    wait_at_start: Option<Duration>,
}

impl ProgramClock {
    pub(crate) fn start(limits: &Limits) -> ProgramClock {
        let started = Instant::now();
        ProgramClock {
            started,
            limit: limits.timeout(),
            deadline: started + limits.timeout(),
            cpu_limit: limits.cpu_time(),
            cpu_at_start: thread_cpu_time(),
            wait_at_start: thread_cpu_wait(),
        }
    }

    pub(crate) fn limit_reached(&mut self) -> Option<Stop> {
        if Instant::now() >= self.deadline && !self.extend() {
            return Some(Stop::Deadline);
        }
        let limit = self.cpu_limit?;
        (self.cpu_used()? >= limit).then_some(Stop::CpuLimit)
    }

    /// At the deadline: gives back the time the guest waited for a CPU, if
    /// any is owed. Returns whether the deadline moved.
    pub(crate) fn extend(&mut self) -> bool {
        let Some(wait) = self.wait_since_start() else {
            return false;
        };
        match fair_extension(self.limit, self.started.elapsed(), wait) {
            Some(more) => {
                self.deadline = Instant::now() + more;
                true
            }
            None => false,
        }
    }

    /// CPU time of this thread (the guest's) since the program started.
    pub(crate) fn cpu_used(&self) -> Option<Duration> {
        Some(thread_cpu_time()?.saturating_sub(self.cpu_at_start?))
    }

    pub(crate) fn wait_since_start(&self) -> Option<Duration> {
        Some(thread_cpu_wait()?.saturating_sub(self.wait_at_start?))
    }
}

pub(crate) fn lock(clock: &Mutex<ProgramClock>) -> std::sync::MutexGuard<'_, ProgramClock> {
    // A few instants and durations: consistent even if a holder panicked.
    clock
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// CPU time of the calling thread: guests run on the thread that polls them.
fn thread_cpu_time() -> Option<Duration> {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) } == 0;
    ok.then(|| {
        Duration::new(
            u64::try_from(time.tv_sec).unwrap_or(0),
            u32::try_from(time.tv_nsec).unwrap_or(0),
        )
    })
}

/// How long the calling thread has waited for a CPU while ready to run.
fn thread_cpu_wait() -> Option<Duration> {
    // Fields: time on a CPU, time waiting on a run queue, slices (ns).
    let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let wait = schedstat.split_whitespace().nth(1)?.parse().ok()?;
    Some(Duration::from_nanos(wait))
}
