//! The CPU waits of an invocation's tasks, sampled while it runs.
//!
//! **CPU waits** ([`InvocationCgroup::sample_waits`]) must count every task
//! the program ran, also those that exited before the reading (a compiler
//! driver's `cc1`/`as`/`ld`, a shell's children), or a starved program would
//! look as if it had its time. The kernel keeps a task's waits
//! (`/proc/TID/schedstat`) only while the task lives, and nothing
//! cgroup-wide here: cgroup v1 has no wait counter without `CONFIG_SCHEDSTATS`,
//! and the pressure figures (PSI `some` of a cgroup) are an average over
//! CPUs weighted by each CPU's busy time, which on a machine of several CPUs
//! reads less than a task waited when it moved between CPUs (measured: a
//! correct program starved beside others on 2 CPUs had its timeout
//! "proven" from it). So the live tasks' waits are summed, and trusted only when the
//! live tasks account for all the CPU time the cgroup counted over the
//! window: a task that exited (it ran, so its CPU time is in the cgroup's
//! total and in no live task's) leaves its waits unknown, and then the waits
//! are reported as not measured, which leaves a wall-clock timeout
//! unconfirmed (see `progscore_sandbox::timing`), never proven. (The one
//! allowance, [`START_TRANSIENT`], is for the runtime's own threads that end
//! as the program starts.)
//!
//! **Block-I/O stalls** count as waits too: a task that waits for the disk
//! (its binary and libraries paged in from a busy disk) neither runs nor
//! waits on a run queue, and looked like a program that chose to sleep
//! (measured: a correct Python program beside a 32-job batch was stopped at
//! its 1 s limit after 9 ms of CPU and no run-queue wait, its timeout
//! "proven"). The kernel counts them per task with delay accounting
//! (`/proc/TID/stat` field 42, `delayacct_blkio_ticks`) only while
//! `kernel.task_delayacct` is on; a sample says whether it was
//! ([`WaitSample::io_measured`]), and a window without it cannot prove a
//! starved-looking timeout beside other programs.

use super::*;

/// The figures of one sample of a running container's CPU waits.
#[derive(Debug, Clone, Default)]
pub struct WaitSample {
    /// Per live task: nanoseconds on a CPU and waiting on a run queue.
    pub(super) tasks: HashMap<u32, TaskTimes>,
    /// CPU time (ns) the container's cgroup counted, read before and after
    /// its tasks (so that a reading's own delay can only make a task look
    /// exited, never hide one).
    pub(super) usage_before: Option<u64>,
    pub(super) usage_after: Option<u64>,
    /// Nanoseconds the container's CPU quota held it back.
    pub(super) throttled: u64,
    /// Whether the kernel's delay accounting was on, so that the tasks'
    /// block-I/O stalls are in `TaskTimes::blocked`.
    pub(super) io_measured: bool,
    /// When it was read: no task stalls longer than the time between two
    /// samples (a task that joined the cgroup in between brings the stalls
    /// of its whole life along).
    pub(super) taken: Option<std::time::Instant>,
}

/// One task's `/proc/TID/schedstat` figures, and its block-I/O stalls.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct TaskTimes {
    pub(super) ran: u64,
    pub(super) waited: u64,
    /// Nanoseconds stalled on block I/O (whole clock ticks; 0 when delay
    /// accounting is off).
    pub(super) blocked: u64,
}

/// One clock tick (`USER_HZ` = 100 on Linux), the unit of
/// `delayacct_blkio_ticks`; a delta may be short by up to one.
pub(super) const TICK_NS: u64 = 10_000_000;

/// CPU time (ns) the cgroup may count beyond its live tasks' without any
/// task having exited: cgroup v2 reports whole microseconds, and a reading
/// can straddle the kernel's accounting by a few.
pub(super) const USAGE_ROUNDING: u64 = 50_000;

/// CPU time (ns) in the window allowed to tasks that were alive at its
/// start and are gone at its end, before their waits count as unknown. The
/// runtime's own threads end there as the program starts: runc's `init` is
/// a Go program whose other threads end when it executes the program
/// (measured: 50-520 µs of CPU after the first reading). A task of the
/// program that ran this little and ended is the one case not caught; a
/// task born in the window and ended before its end is always caught.
pub(super) const START_TRANSIENT: u64 = 2_000_000;

/// Which tasks that ended in the window leave the program's waits unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedTasks {
    /// Every one (runc: the program's processes and threads are host tasks
    /// of the container's cgroup, and one that ended took its waits along).
    Unknown,
    /// None (gVisor): the cgroup's host tasks are the sandbox's own (its
    /// kernel's threads, its helpers), started and ended by the sandbox as
    /// it sees fit, even for a program that only sleeps; the live tasks'
    /// waits are summed as they are. (Measured: under runsc the window of
    /// a program that only sleeps sees host tasks end with more than
    /// [`START_TRANSIENT`] of CPU, so with `Unknown` no timeout of a
    /// sleeper could ever be proven there, even alone.) A known limit:
    /// under gVisor the waits of host tasks that ended are not counted.
    Counted,
}

impl WaitSample {
    /// Whether block-I/O stalls are counted in this sample's waits.
    pub fn io_measured(&self) -> bool {
        self.io_measured
    }

    /// The time the program waited for a CPU since `earlier`, summed over
    /// its live tasks (more than it lost when several waited at once: an
    /// error on the side of more time), less the time its own CPU quota
    /// held it back, plus the time they stalled on block I/O when both
    /// samples measured it (each task's rounded up by a tick); `None` (not
    /// measured) when some task ran in the window that is not alive now
    /// and `ended` says its waits are unknown.
    pub fn excess_since(&self, earlier: &WaitSample, ended: EndedTasks) -> Option<Duration> {
        let throttled = self.throttled.saturating_sub(earlier.throttled);
        let (Some(after), Some(before)) = (self.usage_after, earlier.usage_before) else {
            return None;
        };
        let io_measured = self.io_measured && earlier.io_measured;
        let between = match (self.taken, earlier.taken) {
            (Some(now), Some(then)) => {
                u64::try_from(now.duration_since(then).as_nanos()).unwrap_or(u64::MAX)
            }
            _ => u64::MAX,
        };
        let (mut ran, mut waited, mut blocked) = (0u64, 0u64, 0u64);
        let mut ended_since_start = earlier
            .tasks
            .keys()
            .any(|tid| !self.tasks.contains_key(tid));
        for (tid, now) in &self.tasks {
            let then = earlier.tasks.get(tid).copied().unwrap_or_default();
            // A task id reused by a new task reads lower than before: the
            // first task ended, and its CPU time shows as unaccounted below.
            if now.ran < then.ran {
                ended_since_start = true;
                continue;
            }
            ran += now.ran - then.ran;
            waited += now.waited.saturating_sub(then.waited);
            if io_measured && now.blocked > then.blocked {
                blocked += (now.blocked - then.blocked + TICK_NS).min(between);
            }
        }
        let unaccounted = after.saturating_sub(before).saturating_sub(ran);
        let allowed = if ended == EndedTasks::Counted {
            u64::MAX
        } else if ended_since_start {
            START_TRANSIENT
        } else {
            USAGE_ROUNDING
        };
        if unaccounted > allowed {
            return None;
        }
        Some(Duration::from_nanos(
            waited.saturating_sub(throttled).saturating_add(blocked),
        ))
    }
}

/// Whether the kernel counts tasks' block-I/O stalls (`kernel.task_delayacct`).
pub fn delay_accounting_on() -> bool {
    fs::read_to_string("/proc/sys/kernel/task_delayacct").is_ok_and(|text| text.trim() == "1")
}

/// A task's block-I/O stalls in nanoseconds, from `/proc/TID/stat`.
pub(super) fn blkio_stalls(tid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    // The name (field 2) may hold spaces and parentheses: count from its end.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let ticks: u64 = after_name.split_whitespace().nth(42 - 3)?.parse().ok()?;
    Some(ticks.saturating_mul(TICK_NS))
}
