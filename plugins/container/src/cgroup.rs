//! The cgroup progscore gives each invocation, and what is read from it.
//!
//! Each container is created with its own parent cgroup,
//! `/progscore/<owner>/<container name>` (Docker's `CgroupParent`). The
//! container's cgroup is created below it by the runtime and removed with the
//! container, but the parent stays until progscore removes it, and in it the
//! kernel keeps the totals of everything that ran below: CPU time and the
//! memory high-water mark. So they can be read after the program exited,
//! exactly, without racing the engine's cleanup.
//!
//! This needs an engine on this host using the `cgroupfs` cgroup driver, and
//! this process seeing the host's cgroup mounts (no cgroup namespace between
//! them). When that does not hold, nothing is measured and the backend falls
//! back to counting its own programs (see `progscore_sandbox::timing`).
//!
//! The OCI backend also sets the memory limit on the parent
//! ([`InvocationCgroup::create_with_memory_limit`]): the kernel then counts an
//! OOM kill there, where it can still be read after the runtime removed the
//! container's own cgroup.
//! cgroup v1 is what this project's machines run; the v2 reading follows the
//! kernel's documented files (`cpu.stat`, `memory.peak`, `cgroup.threads`).
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

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::path_error::PathError;

/// The folder under every hierarchy's root that holds progscore's cgroups.
const ROOT: &str = "progscore";

/// How often, and how far apart, a cgroup the kernel calls busy is removed
/// again (2 s in all: its killed tasks are exiting).
const BUSY_TRIES: u32 = 100;
const BUSY_PAUSE: Duration = Duration::from_millis(20);

/// Where the cgroup hierarchies are mounted, as seen from this process.
#[derive(Debug, Clone)]
pub struct Cgroups {
    layout: Layout,
    /// Every hierarchy the runtime creates folders in (removal visits all).
    hierarchies: Vec<PathBuf>,
}

#[derive(Debug, Clone)]
enum Layout {
    V1 {
        cpuacct: PathBuf,
        cpu: PathBuf,
        memory: PathBuf,
        pids: Option<PathBuf>,
        /// Where `docker pause` and other freezers stop the tasks.
        freezer: Option<PathBuf>,
    },
    V2 {
        root: PathBuf,
    },
}

/// The figures of one sample of a running container's CPU waits.
#[derive(Debug, Clone, Default)]
pub struct WaitSample {
    /// Per live task: nanoseconds on a CPU and waiting on a run queue.
    tasks: HashMap<u32, TaskTimes>,
    /// CPU time (ns) the container's cgroup counted, read before and after
    /// its tasks (so that a reading's own delay can only make a task look
    /// exited, never hide one).
    usage_before: Option<u64>,
    usage_after: Option<u64>,
    /// Nanoseconds the container's CPU quota held it back.
    throttled: u64,
    /// Whether the kernel's delay accounting was on, so that the tasks'
    /// block-I/O stalls are in `TaskTimes::blocked`.
    io_measured: bool,
    /// When it was read: no task stalls longer than the time between two
    /// samples (a task that joined the cgroup in between brings the stalls
    /// of its whole life along).
    taken: Option<std::time::Instant>,
}

/// One task's `/proc/TID/schedstat` figures, and its block-I/O stalls.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct TaskTimes {
    ran: u64,
    waited: u64,
    /// Nanoseconds stalled on block I/O (whole clock ticks; 0 when delay
    /// accounting is off).
    blocked: u64,
}

/// One clock tick (`USER_HZ` = 100 on Linux), the unit of
/// `delayacct_blkio_ticks`; a delta may be short by up to one.
const TICK_NS: u64 = 10_000_000;

/// CPU time (ns) the cgroup may count beyond its live tasks' without any
/// task having exited: cgroup v2 reports whole microseconds, and a reading
/// can straddle the kernel's accounting by a few.
const USAGE_ROUNDING: u64 = 50_000;

/// CPU time (ns) in the window allowed to tasks that were alive at its
/// start and are gone at its end, before their waits count as unknown. The
/// runtime's own threads end there as the program starts: runc's `init` is
/// a Go program whose other threads end when it executes the program
/// (measured: 50-520 µs of CPU after the first reading). A task of the
/// program that ran this little and ended is the one case not caught; a
/// task born in the window and ended before its end is always caught.
const START_TRANSIENT: u64 = 2_000_000;

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
fn blkio_stalls(tid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    // The name (field 2) may hold spaces and parentheses: count from its end.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let ticks: u64 = after_name.split_whitespace().nth(42 - 3)?.parse().ok()?;
    Some(ticks.saturating_mul(TICK_NS))
}

impl Cgroups {
    /// The host's cgroup mounts, when the engine's cgroups can be found in
    /// them: the engine uses the `cgroupfs` driver and the hierarchies are
    /// mounted here at their roots.
    pub fn discover(driver: Option<&str>, version: Option<&str>) -> Option<Cgroups> {
        if driver != Some("cgroupfs") {
            return None;
        }
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
        Cgroups::from_mountinfo(&mountinfo, version)
    }

    /// This host's cgroup mounts as an OCI runtime with the cgroupfs driver
    /// uses them: v1 when its cpu, cpuacct and memory hierarchies are
    /// mounted, else v2.
    pub fn discover_host() -> Option<Cgroups> {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
        Cgroups::from_mountinfo(&mountinfo, Some("1"))
            .or_else(|| Cgroups::from_mountinfo(&mountinfo, Some("2")))
    }

    /// The controllers progscore needs to enforce a profile's limits that
    /// this host does not offer: memory (with swap accounting, so that
    /// swap can be capped too), cpu, and pids.
    pub fn missing_controllers(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        match &self.layout {
            Layout::V1 {
                cpu, memory, pids, ..
            } => {
                if !memory.join("memory.memsw.limit_in_bytes").exists() {
                    missing.push("memory swap accounting (memory.memsw.limit_in_bytes)");
                }
                if !cpu.join("cpu.cfs_quota_us").exists() {
                    missing.push("cpu quota (cpu.cfs_quota_us)");
                }
                if pids.is_none() {
                    missing.push("pids");
                }
            }
            Layout::V2 { root } => {
                let offered = fs::read_to_string(root.join("cgroup.subtree_control"))
                    .or_else(|_| fs::read_to_string(root.join("cgroup.controllers")))
                    .unwrap_or_default();
                for controller in ["memory", "cpu", "pids"] {
                    if !offered.split_whitespace().any(|c| c == controller) {
                        missing.push(controller);
                    }
                }
            }
        }
        missing
    }

    fn from_mountinfo(mountinfo: &str, version: Option<&str>) -> Option<Cgroups> {
        let mut v1: HashMap<String, PathBuf> = HashMap::new();
        let mut v2 = None;
        let mut hierarchies = Vec::new();
        for line in mountinfo.lines() {
            // id parent major:minor root mountpoint options [optional...] - fstype source superoptions
            let Some((before, after)) = line.split_once(" - ") else {
                continue;
            };
            let fields: Vec<&str> = before.split(' ').collect();
            let rest: Vec<&str> = after.split(' ').collect();
            let (Some(root), Some(mountpoint), Some(fstype)) =
                (fields.get(3), fields.get(4), rest.first())
            else {
                continue;
            };
            // A mount of a sub-tree (a cgroup namespace) shows other paths
            // than the engine's; such a hierarchy is unusable.
            if *root != "/" || !matches!(*fstype, "cgroup" | "cgroup2") {
                continue;
            }
            let mountpoint = PathBuf::from(unescape_mount_path(mountpoint));
            hierarchies.push(mountpoint.clone());
            if *fstype == "cgroup2" {
                v2 = Some(mountpoint);
                continue;
            }
            for option in rest.get(2).copied().unwrap_or("").split(',') {
                if matches!(option, "cpu" | "cpuacct" | "memory" | "pids" | "freezer") {
                    v1.insert(option.to_string(), mountpoint.clone());
                }
            }
        }
        let layout = match (v1.get("cpuacct"), v1.get("cpu"), v1.get("memory")) {
            (Some(cpuacct), Some(cpu), Some(memory)) if version != Some("2") => Layout::V1 {
                cpuacct: cpuacct.clone(),
                cpu: cpu.clone(),
                memory: memory.clone(),
                pids: v1.get("pids").cloned(),
                freezer: v1.get("freezer").cloned(),
            },
            _ if version == Some("2") => Layout::V2 { root: v2? },
            _ => return None,
        };
        Some(Cgroups {
            layout,
            hierarchies,
        })
    }

    /// The cgroup of one invocation of `owner`, named after its container.
    pub fn invocation(&self, owner: &str, container: &str) -> InvocationCgroup {
        InvocationCgroup {
            cgroups: self.clone(),
            relative: format!("{ROOT}/{owner}/{container}"),
        }
    }

    /// Removes the owner's own (empty) cgroup folder in every hierarchy, as
    /// its client ends; one still holding an invocation's cgroup is left
    /// for the sweep. Without this, each finished client would leave one
    /// empty cgroup per hierarchy behind for good.
    pub fn release_owner(&self, owner: &str) {
        for hierarchy in &self.hierarchies {
            let _ = fs::remove_dir(hierarchy.join(ROOT).join(owner));
        }
    }

    /// Removes the empty cgroup folders of `kind` owners (named
    /// `progscore-<kind>-<pid>-<hex>`) that are provably gone: whose lock
    /// file in `owner_root` can be taken (see `progscore_sandbox::owner`),
    /// whether or not their folder survived. A pid proves nothing: an owner
    /// in another PID namespace sharing this cgroup tree looks dead by its
    /// pid while it runs. An owner with no lock file in this root (another
    /// root, another machine sharing the tree) is never judged gone. A
    /// folder that still holds processes cannot be removed and is left to
    /// the owner's sweep.
    pub fn sweep_orphans(&self, kind: &str, owner_root: &Path) {
        let prefix = format!("progscore-{kind}-");
        for hierarchy in &self.hierarchies {
            let Ok(entries) = fs::read_dir(hierarchy.join(ROOT)) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(name) = name.to_str().filter(|n| n.starts_with(&prefix)) else {
                    continue;
                };
                if owner_is_gone(owner_root, name) {
                    let _ = remove_tree(&entry.path());
                }
            }
        }
    }

    /// Ends every process left in the cgroups of `owner`, an owner that is
    /// provably gone and whose containers no engine holds any more; how many
    /// there were. An engine that crashed mid-start leaves a runtime's init
    /// waiting in its container's cgroup for good, and nothing else would
    /// end it. Returns once they left the cgroups (or a short bound passed:
    /// the removal that follows then reports what stays).
    pub fn kill_owner_processes(&self, owner: &str) -> usize {
        let tops: Vec<PathBuf> = self
            .hierarchies
            .iter()
            .map(|hierarchy| hierarchy.join(ROOT).join(owner))
            .collect();
        let remaining = || {
            let mut pids = std::collections::BTreeSet::new();
            for top in &tops {
                collect_procs(top, &mut pids);
            }
            pids
        };
        let pids = remaining();
        for &pid in &pids {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        let until = std::time::Instant::now() + OWNER_KILL_BOUND;
        while !pids.is_empty() && std::time::Instant::now() < until {
            let left = remaining();
            if left.is_empty() {
                break;
            }
            // Sent again: a process may have forked between the listing and the kill.
            for &pid in &left {
                // SAFETY: as above.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        pids.len()
    }

    /// Removes every cgroup folder of `owner` (depth first). Folders still
    /// holding processes cannot be removed; they are reported.
    pub fn remove_owner(&self, owner: &str) -> Result<(), PathError> {
        let mut problems = Vec::new();
        for hierarchy in &self.hierarchies {
            let top = hierarchy.join(ROOT).join(owner);
            if let Err(e) = remove_tree(&top) {
                problems.push(PathError::io("remove cgroup", top, e));
            }
        }
        PathError::collect(problems)
    }
}

/// Whose OOM killer acted on an invocation, as its cgroups tell.
///
/// Only a kill at the program's own memory limit is the program's
/// (`memory_limit`). The kernel also counts, in the same cgroup, kills by
/// any other OOM killer: the host's (the machine ran out of memory) and
/// that of a cgroup above the invocation's (an operator's slice): those are
/// the machine's, and the program's outcome is then unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryKill {
    /// No OOM killer acted on it.
    None,
    /// Killed at its own memory limit.
    OwnLimit,
    /// Killed (or possibly killed) by an OOM killer that is not its own
    /// limit's: the text says what was seen.
    NotItsOwn(String),
}

/// The verdict of a cgroup v2 `memory.events` (hierarchical counts) of the
/// cgroup holding the program's limit, or of one above it that holds
/// nothing else: `oom` counts the times a limit at or below it was reached
/// and its OOM killer invoked, which kills at most one process each;
/// `oom_kill` counts the kills of its processes by any OOM killer. More
/// kills than OOMs of its own limits means another OOM killer acted.
pub fn memory_kill_from_events(events: &str) -> MemoryKill {
    let count = |key| stat_field(events, key).unwrap_or(0);
    let (ooms, kills) = (count("oom"), count("oom_kill"));
    if kills == 0 {
        MemoryKill::None
    } else if kills <= ooms {
        MemoryKill::OwnLimit
    } else if ooms == 0 {
        MemoryKill::NotItsOwn(format!(
            "{kills} of its processes were killed by an OOM killer while its own memory limit \
             was never reached: the host's OOM killer, or a cgroup's above it"
        ))
    } else {
        MemoryKill::NotItsOwn(format!(
            "{kills} of its processes were killed by an OOM killer, more than the {ooms} time(s) \
             its own memory limit was reached: the host's OOM killer, or a cgroup's above it, \
             killed some"
        ))
    }
}

/// The verdict of cgroup v1's OOM notifications, which the kernel sends
/// for an OOM at a cgroup's limit to that cgroup and every cgroup below it
/// (never for the host's own OOM killer): `at_limit` from the cgroup that
/// holds the program's limit, `above` from the cgroup right above it (its
/// limit is not the program's, so a notification there is an OOM above).
pub fn memory_kill_from_notifications(at_limit: bool, above: bool) -> MemoryKill {
    if above {
        MemoryKill::NotItsOwn(
            "a cgroup above its own was out of memory and its OOM killer acted on it".into(),
        )
    } else if at_limit {
        MemoryKill::OwnLimit
    } else {
        MemoryKill::None
    }
}

/// How many processes the host's OOM killers killed so far (every kind:
/// the host's own and every cgroup's), from `/proc/vmstat`.
pub fn host_oom_kills() -> Option<u64> {
    let vmstat = fs::read_to_string("/proc/vmstat").ok()?;
    stat_field(&vmstat, "oom_kill")
}

/// One cgroup v1 OOM notification: an eventfd the kernel signals.
#[derive(Debug)]
struct OomNotification {
    events: OwnedFd,
    _control: fs::File,
}

impl OomNotification {
    /// Registers for the OOM notifications of the cgroup `dir`.
    fn register(dir: &Path) -> Result<OomNotification, PathError> {
        let control_path = dir.join("memory.oom_control");
        let control =
            fs::File::open(&control_path).map_err(|e| PathError::io("open", control_path, e))?;
        // SAFETY: eventfd has no memory preconditions; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if raw < 0 {
            return Err(PathError::io(
                "create an eventfd for the OOM events of",
                dir,
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: `raw` is a fresh descriptor this process owns.
        let events = unsafe { OwnedFd::from_raw_fd(raw) };
        fs::write(
            dir.join("cgroup.event_control"),
            format!("{} {}", events.as_raw_fd(), control.as_raw_fd()),
        )
        .map_err(|e| PathError::io("watch the OOM events of", dir, e))?;
        Ok(OomNotification {
            events,
            _control: control,
        })
    }

    /// Whether it was signalled (a read consumes it).
    fn fired(&self) -> bool {
        let mut count = [0u8; 8];
        // SAFETY: reads 8 bytes into a buffer of 8 from an eventfd this
        // watch owns (non-blocking: an unsignalled one fails).
        let read = unsafe {
            libc::read(
                self.events.as_raw_fd(),
                count.as_mut_ptr().cast(),
                count.len(),
            )
        };
        read == 8 && u64::from_ne_bytes(count) > 0
    }
}

/// Watches the OOM kills of an invocation, to tell its own memory limit's
/// from any other OOM killer's ([`MemoryKill`]).
#[derive(Debug)]
pub struct OomWatch(Watch);

#[derive(Debug)]
enum Watch {
    /// cgroup v1: the notifications of the cgroup holding the limit (`None`
    /// when the engine holds that watch and reports it) and of the cgroup
    /// right above it.
    V1 {
        at_limit: Option<OomNotification>,
        above: OomNotification,
    },
    /// cgroup v2: the `memory.events` of the invocation's parent.
    V2 { events: PathBuf },
}

impl OomWatch {
    /// Reads what the watch saw so far. Read once, after the program ended
    /// and before its cgroup is removed (v1 signals a removal as an OOM,
    /// and a read consumes a notification).
    pub fn read(&self) -> OomReading {
        OomReading(match &self.0 {
            Watch::V1 { at_limit, above } => Reading::V1 {
                at_limit: at_limit.as_ref().map(OomNotification::fired),
                above: above.fired(),
            },
            Watch::V2 { events } => Reading::V2(
                fs::read_to_string(events).map_err(|e| format!("{}: {e}", events.display())),
            ),
        })
    }

    /// Whose OOM killer acted since the watch began ([`OomReading::verdict`]
    /// of a [`Self::read`]).
    pub fn verdict(&self, engine_reported: bool) -> MemoryKill {
        self.read().verdict(engine_reported)
    }
}

/// What an [`OomWatch`] saw.
#[derive(Debug, Clone)]
pub struct OomReading(Reading);

#[derive(Debug, Clone)]
enum Reading {
    /// Whether the limit's cgroup (`None`: the engine's to report) and the
    /// one above it were notified.
    V1 { at_limit: Option<bool>, above: bool },
    /// The parent's `memory.events`, or why it could not be read.
    V2(Result<String, String>),
}

impl OomReading {
    /// Whose OOM killer acted; `engine_reported` is the engine's word on
    /// an OOM at the limit, used where the watch does not see the limit's
    /// own cgroup (Docker under cgroup v1: the engine's notification is
    /// registered on the container's cgroup, which it creates).
    pub fn verdict(&self, engine_reported: bool) -> MemoryKill {
        match &self.0 {
            Reading::V1 { at_limit, above } => {
                memory_kill_from_notifications(at_limit.unwrap_or(engine_reported), *above)
            }
            Reading::V2(Ok(events)) => memory_kill_from_events(events),
            Reading::V2(Err(why)) => {
                MemoryKill::NotItsOwn(format!("its OOM kills could not be counted ({why})"))
            }
        }
    }

    /// Whether the watch counts every OOM killer's kills of the program's
    /// processes (cgroup v2), so that a kill it does not show was no OOM
    /// killer's. cgroup v1 keeps the count in the killed process's own
    /// cgroup, which the runtime removes with the container, and notifies
    /// no cgroup of the host's own OOM kills.
    pub fn counts_every_kill(&self) -> bool {
        matches!(self.0, Reading::V2(_))
    }
}

/// One invocation's parent cgroup.
#[derive(Debug, Clone)]
pub struct InvocationCgroup {
    cgroups: Cgroups,
    relative: String,
}

impl InvocationCgroup {
    /// The value of the container's `CgroupParent`.
    pub fn parent(&self) -> String {
        format!("/{}", self.relative)
    }

    /// The path an OCI runtime is given (`linux.cgroupsPath`) for the
    /// container's own cgroup, `leaf`, below the parent.
    pub fn runtime_path(&self, leaf: &str) -> String {
        format!("/{}/{leaf}", self.relative)
    }

    /// Creates the parent in the memory hierarchy with a memory limit and
    /// the same limit on memory plus swap (no swap). The runtime creates
    /// the container's cgroup below it, without a memory limit of its own,
    /// so an OOM kill is counted here ([`InvocationCgroup::watch_oom`]).
    pub fn create_with_memory_limit(&self, bytes: u64) -> Result<(), PathError> {
        let write = |dir: &Path, file: &str, value: &str| {
            fs::write(dir.join(file), value).map_err(|e| PathError::io("write", dir.join(file), e))
        };
        match &self.cgroups.layout {
            Layout::V1 { memory, .. } => {
                let dir = self.dir(memory);
                fs::create_dir_all(&dir).map_err(|e| PathError::io("create cgroup", &dir, e))?;
                write(&dir, "memory.limit_in_bytes", &bytes.to_string())?;
                write(&dir, "memory.memsw.limit_in_bytes", &bytes.to_string())
            }
            Layout::V2 { root } => {
                // Every level down to the parent must delegate the controllers.
                let mut dir = root.clone();
                for part in self.relative.split('/') {
                    let _ = fs::write(dir.join("cgroup.subtree_control"), "+memory +cpu +pids");
                    dir = dir.join(part);
                    match fs::create_dir(&dir) {
                        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                            return Err(PathError::io("create cgroup", dir, e));
                        }
                        _ => {}
                    }
                }
                write(&dir, "cgroup.subtree_control", "+memory +cpu +pids")?;
                write(&dir, "memory.max", &bytes.to_string())?;
                write(&dir, "memory.swap.max", "0")
            }
        }
    }

    /// Starts watching the OOM kills of the parent's memory limit; call
    /// after [`InvocationCgroup::create_with_memory_limit`], before the
    /// program starts. cgroup v1 counts an OOM kill in the cgroup of the
    /// killed process (the runtime's, gone by the time it is read), so the
    /// kernel's OOM notifications are registered instead, on the parent
    /// and on the owner's cgroup above it; v2 counts OOMs and kills
    /// hierarchically, in the parent's `memory.events`.
    pub fn watch_oom(&self) -> Result<OomWatch, PathError> {
        match &self.cgroups.layout {
            Layout::V1 { memory, .. } => {
                let dir = self.dir(memory);
                let above = dir.parent().unwrap_or(&dir);
                Ok(OomWatch(Watch::V1 {
                    at_limit: Some(OomNotification::register(&dir)?),
                    above: OomNotification::register(above)?,
                }))
            }
            Layout::V2 { root } => Ok(OomWatch(Watch::V2 {
                events: self.dir(root).join("memory.events"),
            })),
        }
    }

    /// Starts watching the OOM kills of a container whose memory limit the
    /// engine sets on its own cgroup, below this parent (Docker); call
    /// before the container is created. cgroup v1: the parent is created
    /// in the memory hierarchy (the engine then uses it) and its
    /// notifications registered: it has no limit, so a notification there
    /// is an OOM above the container's; the engine reports its own.
    pub fn watch_oom_below(&self) -> Result<OomWatch, PathError> {
        match &self.cgroups.layout {
            Layout::V1 { memory, .. } => {
                let dir = self.dir(memory);
                fs::create_dir_all(&dir).map_err(|e| PathError::io("create cgroup", &dir, e))?;
                Ok(OomWatch(Watch::V1 {
                    at_limit: None,
                    above: OomNotification::register(&dir)?,
                }))
            }
            Layout::V2 { root } => Ok(OomWatch(Watch::V2 {
                events: self.dir(root).join("memory.events"),
            })),
        }
    }

    /// Whether the container `id` is where it should be (its cgroup exists
    /// below the parent): only then do the figures describe it.
    pub fn holds(&self, id: &str) -> bool {
        self.leaf(self.cpu_hierarchy(), id).is_dir()
    }

    /// Whether the container `id`'s tasks are frozen (or being frozen) by
    /// the cgroup freezer, as `docker pause` under runc and any writer of
    /// the freezer's files do: frozen tasks neither run nor wait for a CPU,
    /// so only this tells a frozen program from one that chose to sleep.
    /// The effective state, which an ancestor's freeze sets too; read from
    /// the parent once the container's own cgroup is gone. `None` when it
    /// cannot be read (no freezer hierarchy).
    pub fn frozen(&self, id: &str) -> Option<bool> {
        let read = |dir: PathBuf, file: &str| fs::read_to_string(dir.join(file)).ok();
        match &self.cgroups.layout {
            Layout::V1 { freezer, .. } => {
                let freezer = freezer.as_ref()?;
                let state = read(self.leaf(freezer, id), "freezer.state")
                    .or_else(|| read(self.dir(freezer), "freezer.state"))?;
                Some(freezer_state_is_frozen(&state))
            }
            Layout::V2 { root } => {
                let leaf = self.leaf(root, id);
                let dir = if leaf.is_dir() { leaf } else { self.dir(root) };
                let events = read(dir.clone(), "cgroup.events")?;
                // `cgroup.freeze` set is a freeze under way (`frozen` says 1
                // only once every task stopped).
                let freezing = read(dir, "cgroup.freeze").is_some_and(|f| f.trim() == "1");
                Some(freezing || stat_field(&events, "frozen").is_some_and(|f| f == 1))
            }
        }
    }

    /// CPU time of everything that ran below the parent so far.
    pub fn cpu_usage(&self) -> Option<Duration> {
        match &self.cgroups.layout {
            Layout::V1 { cpuacct, .. } => {
                let text = fs::read_to_string(self.dir(cpuacct).join("cpuacct.usage")).ok()?;
                text.trim().parse().ok().map(Duration::from_nanos)
            }
            Layout::V2 { root } => {
                let stat = fs::read_to_string(self.dir(root).join("cpu.stat")).ok()?;
                stat_field(&stat, "usage_usec").map(Duration::from_micros)
            }
        }
    }

    /// The memory high-water mark of everything that ran below the parent.
    pub fn peak_memory(&self) -> Option<u64> {
        let (dir, file) = match &self.cgroups.layout {
            Layout::V1 { memory, .. } => (self.dir(memory), "memory.max_usage_in_bytes"),
            Layout::V2 { root } => (self.dir(root), "memory.peak"),
        };
        fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()
    }

    /// CPU waits of the live tasks, the CPU time that tells whether any
    /// task exited, and quota throttling of the running container `id`;
    /// compare two samples with [`WaitSample::excess_since`].
    pub fn sample_waits(&self, id: &str) -> Option<WaitSample> {
        let stat = fs::read_to_string(self.leaf(self.cpu_hierarchy(), id).join("cpu.stat")).ok()?;
        let throttled = match &self.cgroups.layout {
            Layout::V1 { .. } => stat_field(&stat, "throttled_time")?,
            Layout::V2 { .. } => stat_field(&stat, "throttled_usec")? * 1000,
        };
        self.read_tasks(id, throttled)
    }

    /// The live tasks' waits, between two readings of the cgroup's CPU time.
    /// Read again (a few times) until both readings agree: the kernel
    /// charged no CPU time to the cgroup meanwhile, so the tasks' figures
    /// and the cgroup's are one consistent snapshot, and CPU time no live
    /// task accounts for can only be a task that exited.
    fn read_tasks(&self, id: &str, throttled: u64) -> Option<WaitSample> {
        let threads_file = match &self.cgroups.layout {
            Layout::V1 { .. } => "tasks",
            Layout::V2 { .. } => "cgroup.threads",
        };
        let threads = self.leaf(self.cpu_hierarchy(), id).join(threads_file);
        let io_measured = delay_accounting_on();
        let mut sample = None;
        for _ in 0..8 {
            let usage_before = self.leaf_usage(id);
            let tasks = fs::read_to_string(&threads).ok()?;
            let tasks = tasks
                .lines()
                .filter_map(|tid| tid.trim().parse::<u32>().ok())
                .filter_map(|tid| {
                    // Fields: time on a CPU, time waiting on a run queue, slices (ns).
                    let schedstat = fs::read_to_string(format!("/proc/{tid}/schedstat")).ok()?;
                    let mut fields = schedstat.split_whitespace();
                    let ran = fields.next()?.parse().ok()?;
                    let waited = fields.next()?.parse().ok()?;
                    let blocked = if io_measured { blkio_stalls(tid)? } else { 0 };
                    Some((
                        tid,
                        TaskTimes {
                            ran,
                            waited,
                            blocked,
                        },
                    ))
                })
                .collect();
            let usage_after = self.leaf_usage(id);
            let consistent = usage_before.is_some() && usage_before == usage_after;
            sample = Some(WaitSample {
                tasks,
                usage_before,
                usage_after,
                throttled,
                io_measured,
                taken: Some(std::time::Instant::now()),
            });
            if consistent {
                break;
            }
        }
        sample
    }

    /// CPU time (ns) counted in the container `id`'s own cgroup.
    fn leaf_usage(&self, id: &str) -> Option<u64> {
        match &self.cgroups.layout {
            Layout::V1 { cpuacct, .. } => {
                let text = fs::read_to_string(self.leaf(cpuacct, id).join("cpuacct.usage")).ok()?;
                text.trim().parse().ok()
            }
            Layout::V2 { root } => {
                let stat = fs::read_to_string(self.leaf(root, id).join("cpu.stat")).ok()?;
                stat_field(&stat, "usage_usec").map(|micros| micros.saturating_mul(1000))
            }
        }
    }

    /// Sends SIGKILL to every process still in the invocation's cgroups (in
    /// any hierarchy, at any depth); how many there were. A runtime's init
    /// whose `run` was killed before it started the program waits there for
    /// good, and nothing else would end it. The cgroup is the invocation's
    /// alone, so nothing else is touched.
    pub fn kill_remaining(&self) -> usize {
        let mut pids = std::collections::BTreeSet::new();
        for hierarchy in &self.cgroups.hierarchies {
            collect_procs(&self.dir(hierarchy), &mut pids);
        }
        for &pid in &pids {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        pids.len()
    }

    /// Removes the container's cgroup (if the runtime left it) and the
    /// parent, in every hierarchy. A folder already gone is fine.
    pub fn remove(&self) -> Result<(), PathError> {
        self.try_remove()
    }

    /// [`Self::remove`], tried again for a while as long as the kernel
    /// says a folder is busy: the tasks of a program just killed leave
    /// their cgroup only once they have exited, which on a busy machine
    /// takes a moment after they left its task list (measured: removal
    /// failing with EBUSY under a 32-job batch left an owner's record for
    /// the next sweep).
    pub async fn remove_settled(&self) -> Result<(), PathError> {
        let mut tries = 0;
        loop {
            match self.try_remove() {
                Ok(()) => return Ok(()),
                Err(e) if e.all_busy() && tries < BUSY_TRIES => {
                    tries += 1;
                    tokio::time::sleep(BUSY_PAUSE).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Removes every hierarchy's folder, naming each that failed.
    fn try_remove(&self) -> Result<(), PathError> {
        let problems = self
            .cgroups
            .hierarchies
            .iter()
            .filter_map(|hierarchy| {
                let dir = self.dir(hierarchy);
                remove_tree(&dir)
                    .err()
                    .map(|e| PathError::io("remove cgroup", dir, e))
            })
            .collect();
        PathError::collect(problems)
    }

    fn cpu_hierarchy(&self) -> &Path {
        match &self.cgroups.layout {
            Layout::V1 { cpu, .. } => cpu,
            Layout::V2 { root } => root,
        }
    }

    fn dir(&self, hierarchy: &Path) -> PathBuf {
        hierarchy.join(&self.relative)
    }

    fn leaf(&self, hierarchy: &Path, id: &str) -> PathBuf {
        self.dir(hierarchy).join(id)
    }
}

/// `rmdir` of a cgroup folder and its sub-folders, deepest first. cgroup
/// folders hold only kernel files, which go with the folder.
/// How long the processes a dead owner left are given to leave its cgroups
/// once killed (they are gone within milliseconds unless the kernel is stuck).
const OWNER_KILL_BOUND: Duration = Duration::from_secs(5);

/// How often a CPU-time limit is checked against the cgroup's counter.
const CPU_LIMIT_POLL: Duration = Duration::from_millis(20);

/// Resolves when the CPU time counted in `cgroup` since `at_start` reaches
/// `limit`; never without a limit or a measured cgroup (preflight refuses
/// such profiles).
pub async fn cpu_limit_reached(
    cgroup: Option<&InvocationCgroup>,
    at_start: Option<Duration>,
    limit: Option<Duration>,
) {
    let (Some(cgroup), Some(at_start), Some(limit)) = (cgroup, at_start, limit) else {
        return std::future::pending().await;
    };
    let mut ticker = tokio::time::interval(CPU_LIMIT_POLL);
    loop {
        ticker.tick().await;
        if let Some(now) = cgroup.cpu_usage()
            && now.saturating_sub(at_start) >= limit
        {
            return;
        }
    }
}

/// The pids in `dir`'s `cgroup.procs` and those of its sub-folders.
fn collect_procs(dir: &Path, pids: &mut std::collections::BTreeSet<libc::pid_t>) {
    if let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(
            procs
                .lines()
                .filter_map(|line| line.trim().parse::<libc::pid_t>().ok()),
        );
    }
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                collect_procs(&entry.path(), pids);
            }
        }
    }
}

/// Whether the owner `name` is provably gone: its lock file in `owner_root`
/// exists and no process holds it (the kernel releases it however its
/// owner died). The lock is let go at once.
pub fn owner_is_gone(owner_root: &Path, name: &str) -> bool {
    let path = owner_root.join(format!("{name}.lock"));
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .is_ok_and(|lock| lock.try_lock().is_ok())
}

fn remove_tree(top: &Path) -> io::Result<()> {
    let entries = match fs::read_dir(top) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&entry.path())?;
        }
    }
    match fs::remove_dir(top) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Whether a cgroup v1 `freezer.state` says its tasks are stopped: `FROZEN`,
/// or `FREEZING` (some already are).
fn freezer_state_is_frozen(state: &str) -> bool {
    matches!(state.trim(), "FROZEN" | "FREEZING")
}

fn stat_field(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == key).then(|| value.trim().parse().ok()).flatten()
    })
}

/// Mount paths in mountinfo escape space, tab, newline and backslash as octal.
fn unescape_mount_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(byte) => {
                out.push(byte as char);
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
33 25 0:29 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
34 33 0:30 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
35 33 0:31 / /sys/fs/cgroup/systemd rw,nosuid - cgroup cgroup rw,xattr,name=systemd
36 33 0:32 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
37 33 0:33 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
38 33 0:34 /docker/abc /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
";

    #[test]
    fn v1_hierarchies_are_found_and_namespaced_ones_skipped() {
        let cgroups = Cgroups::from_mountinfo(HYBRID, Some("1")).unwrap();
        let Layout::V1 {
            cpuacct,
            cpu,
            memory,
            ..
        } = &cgroups.layout
        else {
            panic!("v1 expected");
        };
        assert_eq!(cpuacct, Path::new("/sys/fs/cgroup/cpu,cpuacct"));
        assert_eq!(cpu, cpuacct);
        assert_eq!(memory, Path::new("/sys/fs/cgroup/memory"));
        // The pids hierarchy is mounted from a sub-tree: not the engine's view.
        assert!(!cgroups.hierarchies.iter().any(|h| h.ends_with("pids")));
        assert_eq!(cgroups.hierarchies.len(), 4);
        let invocation = cgroups.invocation("progscore-docker-1-ab", "progscore-cd-0");
        assert_eq!(
            invocation.parent(),
            "/progscore/progscore-docker-1-ab/progscore-cd-0"
        );
    }

    #[test]
    fn only_a_kill_at_the_programs_own_limit_is_its_memory_limit() {
        let events = |oom: u64, oom_kill: u64| {
            format!(
                "low 0\nhigh 0\nmax {}\noom {oom}\noom_kill {oom_kill}\noom_group_kill 0\n",
                oom * 3
            )
        };
        // Never at its limit, nothing killed.
        assert_eq!(memory_kill_from_events(&events(0, 0)), MemoryKill::None);
        // At its limit, nothing killed (the victim was already exiting).
        assert_eq!(memory_kill_from_events(&events(1, 0)), MemoryKill::None);
        // At its limit, and its OOM killer killed: the program's.
        assert_eq!(memory_kill_from_events(&events(1, 1)), MemoryKill::OwnLimit);
        assert_eq!(memory_kill_from_events(&events(3, 2)), MemoryKill::OwnLimit);
        // Killed, its own limit never reached: the host's OOM killer (or
        // a cgroup's above it).
        let MemoryKill::NotItsOwn(why) = memory_kill_from_events(&events(0, 1)) else {
            panic!("a kill below no OOM of its own is not its own");
        };
        assert!(why.contains("never reached"), "{why}");
        // More kills than its own OOMs: some were another OOM killer's.
        let MemoryKill::NotItsOwn(why) = memory_kill_from_events(&events(1, 3)) else {
            panic!("kills beyond its own OOMs are not all its own");
        };
        assert!(why.contains("more than the 1 time(s)"), "{why}");
        // An older kernel's file without the counts: nothing proven killed.
        assert_eq!(memory_kill_from_events("low 0\n"), MemoryKill::None);

        // cgroup v1: the limit's own notification, unless the one above fired too.
        assert_eq!(
            memory_kill_from_notifications(false, false),
            MemoryKill::None
        );
        assert_eq!(
            memory_kill_from_notifications(true, false),
            MemoryKill::OwnLimit
        );
        for at_limit in [false, true] {
            assert!(matches!(
                memory_kill_from_notifications(at_limit, true),
                MemoryKill::NotItsOwn(_)
            ));
        }
    }

    #[test]
    fn the_hosts_oom_kills_are_counted() {
        assert!(host_oom_kills().is_some(), "/proc/vmstat has oom_kill");
    }

    #[test]
    fn v2_and_missing_controllers() {
        let v2 = "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let cgroups = Cgroups::from_mountinfo(v2, Some("2")).unwrap();
        assert!(matches!(cgroups.layout, Layout::V2 { .. }));
        assert!(Cgroups::from_mountinfo(v2, Some("1")).is_none());
    }

    fn task(ran: u64, waited: u64) -> TaskTimes {
        TaskTimes {
            ran,
            waited,
            blocked: 0,
        }
    }

    #[test]
    fn block_io_stalls_count_as_waits_only_when_both_samples_measured_them() {
        let stalled = |blocked: u64, io_measured: bool, usage: u64| WaitSample {
            tasks: HashMap::from([(
                1,
                TaskTimes {
                    ran: usage,
                    waited: 0,
                    blocked,
                },
            )]),
            usage_before: Some(usage),
            usage_after: Some(usage),
            throttled: 0,
            io_measured,
            taken: None,
        };
        // A Python start paged in from a busy disk: 2 s stalled, 9 ms run.
        let earlier = stalled(0, true, 1_000_000);
        let later = stalled(2_000_000_000, true, 10_000_000);
        assert_eq!(
            later.excess_since(&earlier, EndedTasks::Unknown),
            Some(Duration::from_nanos(2_000_000_000 + TICK_NS))
        );
        // Accounting switched on or off in the window: only run-queue waits.
        let unmeasured = stalled(0, false, 1_000_000);
        assert_eq!(
            later.excess_since(&unmeasured, EndedTasks::Unknown),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn this_process_block_io_stalls_are_read_from_its_stat_line() {
        let tid = std::process::id();
        let stalls = blkio_stalls(tid).expect("field 42 of /proc/self/stat");
        assert_eq!(stalls % TICK_NS, 0);
    }

    #[test]
    fn live_tasks_waits_count_only_when_they_account_for_all_the_cpu_time() {
        let earlier = WaitSample {
            tasks: HashMap::from([(1, task(1_000, 100)), (2, task(0, 0))]),
            usage_before: Some(1_000),
            usage_after: Some(1_000),
            ..WaitSample::default()
        };
        // Task 3 started in the window and is alive: all its time is seen.
        let later = WaitSample {
            tasks: HashMap::from([
                (1, task(5_000, 600)),
                (2, task(3_000, 300)),
                (3, task(2_000, 50)),
            ]),
            usage_before: Some(11_000),
            usage_after: Some(11_000),
            throttled: 200,
            io_measured: false,
            taken: None,
        };
        assert_eq!(
            later.excess_since(&earlier, EndedTasks::Unknown),
            Some(Duration::from_nanos(650))
        );
        // A child ran 1 ms in the window and exited: it may have waited for
        // long, and nothing tells how long. Not measured, never "no wait".
        let child_gone = WaitSample {
            usage_before: Some(1_011_000),
            usage_after: Some(1_011_000),
            ..later.clone()
        };
        assert_eq!(child_gone.excess_since(&earlier, EndedTasks::Unknown), None);
        // Task 2 was alive at the start and exited since, having run 3 ms
        // more: the same. (Under 2 ms, as the runtime's own threads that end
        // when it executes the program, it would pass.)
        let mut thread_gone = later.clone();
        thread_gone.tasks.remove(&2);
        thread_gone.usage_before = Some(11_000 + 3_000_000);
        thread_gone.usage_after = thread_gone.usage_before;
        assert_eq!(
            thread_gone.excess_since(&earlier, EndedTasks::Unknown),
            None
        );
        let mut runtime_gone = thread_gone.clone();
        runtime_gone.usage_after = Some(11_000 + 500_000);
        assert!(
            runtime_gone
                .excess_since(&earlier, EndedTasks::Unknown)
                .is_some()
        );
        // Its id reused by a new task that ran less: its time is unaccounted.
        let mut reused = thread_gone.clone();
        reused.tasks.insert(1, task(500, 10));
        assert_eq!(reused.excess_since(&earlier, EndedTasks::Unknown), None);
        // Without the cgroup's CPU time nothing can be checked.
        let blind = WaitSample {
            usage_after: None,
            ..later.clone()
        };
        assert_eq!(blind.excess_since(&earlier, EndedTasks::Unknown), None);
    }

    /// A real cgroup on this host: a shell pinned to one CPU beside a CPU
    /// hog runs short-lived children one after another, each starved to
    /// about half the CPU, and reports when they all exited; only the shell
    /// is alive at the second sample. A reading of the live tasks alone
    /// sees almost none of their waits: it must say it measured nothing.
    #[test]
    fn a_starved_program_whose_waits_were_in_exited_children_is_not_given_them_for_free() {
        use std::io::{BufRead, BufReader, Write as _};
        use std::process::{Command, Stdio};

        let cgroups = Cgroups::discover_host()
            .expect("this test needs the host's cgroups (run as root, no cgroup namespace)");
        let owner = format!("progscore-test-{}-waits", std::process::id());
        let invocation = cgroups.invocation(&owner, "starved");
        let leaf = "leaf";
        // The folders a runtime would create, and the files that place a task.
        let joins: Vec<PathBuf> = match &cgroups.layout {
            Layout::V1 { cpu, cpuacct, .. } => vec![
                invocation.leaf(cpu, leaf).join("tasks"),
                invocation.leaf(cpuacct, leaf).join("tasks"),
            ],
            Layout::V2 { root } => vec![invocation.leaf(root, leaf).join("cgroup.procs")],
        };
        for join in &joins {
            fs::create_dir_all(join.parent().unwrap()).unwrap();
        }
        let mut hog = Command::new("taskset")
            .args(["-c", "0", "sh", "-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let script = format!(
            "for f in {}; do echo $$ > $f || exit 9; done; echo ready; read go; \
             for n in 1 2 3 4 5 6 7 8; do sh -c 'i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done'; done; \
             echo done; read end",
            joins
                .iter()
                .map(|j| j.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        );
        let mut program = Command::new("taskset")
            .args(["-c", "0", "sh", "-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = program.stdin.take().unwrap();
        let mut lines = BufReader::new(program.stdout.take().unwrap()).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "ready");
        let start = invocation.sample_waits(leaf).unwrap();
        writeln!(input, "go").unwrap();
        assert_eq!(lines.next().unwrap().unwrap(), "done");
        let end = invocation.sample_waits(leaf).unwrap();
        drop(input);
        program.wait().unwrap();
        hog.kill().unwrap();
        hog.wait().unwrap();
        invocation.remove().unwrap();
        let _ = cgroups.remove_owner(&owner);

        // What the live task (the shell, waiting for its children) waited:
        // what a reading of the live tasks alone would have given.
        let live_only: u64 = end
            .tasks
            .iter()
            .map(|(tid, t)| {
                t.waited
                    .saturating_sub(start.tasks.get(tid).map_or(0, |s| s.waited))
            })
            .sum();
        let children_cpu = end.usage_after.unwrap() - start.usage_before.unwrap();
        // The children ran (and waited about as long, beside the hog), and
        // exited: none of that is in a live task's figures.
        assert!(
            children_cpu > 50_000_000,
            "the children ran {children_cpu} ns; the live shell waited {live_only} ns"
        );
        assert_eq!(
            end.excess_since(&start, EndedTasks::Unknown),
            None,
            "the children's waits are unknown: not measured, never a small wait"
        );
    }
}
