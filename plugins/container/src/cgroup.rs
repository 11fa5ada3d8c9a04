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
//! driver's `cc1`/`as`/`ld`, a shell's children): a per-task reading misses
//! them, and a starved program would look as if it had its time. Where the
//! kernel keeps pressure stall information (PSI) for the invocation's
//! cgroup, that is read: the parent's `cpu.pressure` `some` total in the v2
//! hierarchy (on a v1 host, the `cgroup2` mount beside the v1 ones, where
//! runc places every container too, and progscore moves runsc's processes,
//! which runsc leaves out) counts the time any task below it was
//! ready to run and kept waiting, for every task that ever ran there. Without
//! it (no `cgroup2` mount, a kernel booted with `psi=0`), the live tasks'
//! `/proc/TID/schedstat` waits are summed, and trusted only when the live
//! tasks account for all the CPU time the cgroup counted over the window:
//! a task that exited (it ran, so its CPU time is in the cgroup's total and
//! in no live task's) leaves its waits unknown, and then the waits are
//! reported as not measured, which leaves a wall-clock timeout unconfirmed
//! (see `progscore_sandbox::timing`), never proven.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The folder under every hierarchy's root that holds progscore's cgroups.
const ROOT: &str = "progscore";

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
        /// The `cgroup2` hierarchy mounted beside the v1 ones (a "hybrid"
        /// host): no controllers, but the kernel's CPU pressure figures.
        unified: Option<PathBuf>,
    },
    V2 {
        root: PathBuf,
    },
}

/// The figures of one sample of a running container's CPU waits.
#[derive(Debug, Clone, Default)]
pub struct WaitSample {
    /// Nanoseconds during which at least one task below the invocation's
    /// parent was ready to run but kept waiting for a CPU (PSI `some`
    /// total), every task that ever ran there included; `None` where the
    /// kernel keeps no pressure figures for the cgroup.
    stalled: Option<u64>,
    /// Per live task: nanoseconds on a CPU and waiting on a run queue.
    tasks: HashMap<u32, TaskTimes>,
    /// CPU time (ns) the container's cgroup counted, read before and after
    /// its tasks (so that a reading's own delay can only make a task look
    /// exited, never hide one).
    usage_before: Option<u64>,
    usage_after: Option<u64>,
    /// Nanoseconds the container's CPU quota held it back.
    throttled: u64,
}

/// One task's `/proc/TID/schedstat` figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct TaskTimes {
    ran: u64,
    waited: u64,
}

/// CPU time (ns) the cgroup may count beyond its live tasks' without any
/// task having exited: cgroup v2 reports it in whole microseconds.
const USAGE_ROUNDING: u64 = 2_000;

impl WaitSample {
    /// The time the program waited for a CPU since `earlier`, less the time
    /// its own CPU quota held it back. From the cgroup-wide stall total when
    /// both samples have it; else summed over the live tasks (more than the
    /// program lost when several waited at once: an error on the side of
    /// more time), and then `None` (not measured) when some task ran in the
    /// window that is not alive now: its waits are unknown.
    pub fn excess_since(&self, earlier: &WaitSample) -> Option<Duration> {
        let throttled = self.throttled.saturating_sub(earlier.throttled);
        if let (Some(now), Some(then)) = (self.stalled, earlier.stalled) {
            return Some(Duration::from_nanos(
                now.saturating_sub(then).saturating_sub(throttled),
            ));
        }
        let (Some(after), Some(before)) = (self.usage_after, earlier.usage_before) else {
            return None;
        };
        let (mut ran, mut waited) = (0u64, 0u64);
        for (tid, now) in &self.tasks {
            let then = earlier.tasks.get(tid).copied().unwrap_or_default();
            // A task id reused by a new task reads lower than before: its
            // CPU time then shows as unaccounted below.
            if now.ran < then.ran {
                continue;
            }
            ran += now.ran - then.ran;
            waited += now.waited.saturating_sub(then.waited);
        }
        let unaccounted = after.saturating_sub(before).saturating_sub(ran);
        if unaccounted > USAGE_ROUNDING {
            return None;
        }
        Some(Duration::from_nanos(waited.saturating_sub(throttled)))
    }
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

    /// Whether the kernel keeps CPU pressure figures (PSI) in a v2
    /// hierarchy here: then the CPU waits of tasks that already exited are
    /// counted; without them a program that starts processes has its
    /// wall-clock timeouts unconfirmed (see [`InvocationCgroup::sample_waits`]).
    pub fn counts_exited_waits(&self) -> bool {
        let root = match &self.layout {
            Layout::V1 { unified, .. } => unified.as_deref(),
            Layout::V2 { root } => Some(root.as_path()),
        };
        root.and_then(|root| fs::read_to_string(root.join("cpu.pressure")).ok())
            .is_some_and(|text| pressure_total(&text, "some").is_some())
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
                if matches!(option, "cpu" | "cpuacct" | "memory" | "pids") {
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
                unified: v2,
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

    /// Removes the empty cgroup folders of `kind` owners whose process is
    /// gone (owners are named `progscore-<kind>-<pid>-<hex>`), whether or
    /// not their owner record survived (a client that ended before it
    /// released its folder, a crash). A folder that still holds processes
    /// cannot be removed and is left to the owner's sweep.
    pub fn sweep_orphans(&self, kind: &str) {
        let prefix = format!("progscore-{kind}-");
        for hierarchy in &self.hierarchies {
            let Ok(entries) = fs::read_dir(hierarchy.join(ROOT)) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(pid) = name
                    .to_str()
                    .and_then(|n| n.strip_prefix(&prefix))
                    .and_then(|rest| rest.split('-').next())
                    .and_then(|pid| pid.parse::<libc::pid_t>().ok())
                else {
                    continue;
                };
                if pid > 0 && !process_exists(pid) {
                    let _ = remove_tree(&entry.path());
                }
            }
        }
    }

    /// Removes every cgroup folder of `owner` (depth first). Folders still
    /// holding processes cannot be removed; they are reported.
    pub fn remove_owner(&self, owner: &str) -> Result<(), String> {
        let mut problems = Vec::new();
        for hierarchy in &self.hierarchies {
            let top = hierarchy.join(ROOT).join(owner);
            if let Err(e) = remove_tree(&top) {
                problems.push(format!("{}: {e}", top.display()));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!("cannot remove cgroups {}", problems.join("; ")))
        }
    }
}

/// Counts the OOM kills of an invocation's memory limit.
#[derive(Debug)]
pub enum OomWatch {
    /// A cgroup v1 OOM notification: an eventfd the kernel signals.
    V1 { events: OwnedFd, _control: fs::File },
    /// cgroup v2: the parent's `memory.events`.
    V2 { events: PathBuf },
}

impl OomWatch {
    /// Whether the kernel's OOM killer acted on the limit since the watch
    /// began. Read before the cgroup is removed (v1 signals its removal too).
    pub fn fired(&self) -> bool {
        match self {
            OomWatch::V1 { events, .. } => {
                let mut count = [0u8; 8];
                // SAFETY: reads 8 bytes into a buffer of 8 from an eventfd
                // this watch owns (non-blocking: an unsignalled one fails).
                let read = unsafe {
                    libc::read(events.as_raw_fd(), count.as_mut_ptr().cast(), count.len())
                };
                read == 8 && u64::from_ne_bytes(count) > 0
            }
            OomWatch::V2 { events } => fs::read_to_string(events)
                .ok()
                .and_then(|text| stat_field(&text, "oom_kill"))
                .is_some_and(|kills| kills > 0),
        }
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
    /// so an OOM kill is counted here ([`InvocationCgroup::oom_kills`]).
    pub fn create_with_memory_limit(&self, bytes: u64) -> Result<(), String> {
        let write = |dir: &Path, file: &str, value: &str| {
            fs::write(dir.join(file), value)
                .map_err(|e| format!("cannot write {}: {e}", dir.join(file).display()))
        };
        match &self.cgroups.layout {
            Layout::V1 { memory, .. } => {
                let dir = self.dir(memory);
                fs::create_dir_all(&dir)
                    .map_err(|e| format!("cannot create cgroup {}: {e}", dir.display()))?;
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
                            return Err(format!("cannot create cgroup {}: {e}", dir.display()));
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

    /// Starts counting the OOM events of the parent's memory limit; call
    /// after [`InvocationCgroup::create_with_memory_limit`], before the
    /// program starts. cgroup v1 counts an OOM kill in the cgroup of the
    /// killed process (the runtime's, gone by the time it is read), so the
    /// kernel's OOM notification on the parent is registered instead; v2
    /// counts kills hierarchically, in the parent's `memory.events`.
    pub fn watch_oom(&self) -> Result<OomWatch, String> {
        match &self.cgroups.layout {
            Layout::V1 { memory, .. } => {
                let dir = self.dir(memory);
                let control = fs::File::open(dir.join("memory.oom_control")).map_err(|e| {
                    format!("cannot open {}/memory.oom_control: {e}", dir.display())
                })?;
                // SAFETY: eventfd has no memory preconditions; the result is checked.
                let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
                if raw < 0 {
                    return Err(format!("eventfd: {}", io::Error::last_os_error()));
                }
                // SAFETY: `raw` is a fresh descriptor this process owns.
                let events = unsafe { OwnedFd::from_raw_fd(raw) };
                fs::write(
                    dir.join("cgroup.event_control"),
                    format!("{} {}", events.as_raw_fd(), control.as_raw_fd()),
                )
                .map_err(|e| format!("cannot watch OOM events of {}: {e}", dir.display()))?;
                Ok(OomWatch::V1 {
                    events,
                    _control: control,
                })
            }
            Layout::V2 { root } => Ok(OomWatch::V2 {
                events: self.dir(root).join("memory.events"),
            }),
        }
    }

    /// Whether the container `id` is where it should be (its cgroup exists
    /// below the parent): only then do the figures describe it.
    pub fn holds(&self, id: &str) -> bool {
        self.leaf(self.cpu_hierarchy(), id).is_dir()
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

    /// CPU waits (of every task the invocation ran, where the kernel keeps
    /// them) and quota throttling of the running container `id`; compare
    /// two samples with [`WaitSample::excess_since`].
    pub fn sample_waits(&self, id: &str) -> Option<WaitSample> {
        let leaf = self.leaf(self.cpu_hierarchy(), id);
        let stat = fs::read_to_string(leaf.join("cpu.stat")).ok()?;
        let (throttled, pressure) = match &self.cgroups.layout {
            Layout::V1 { unified, .. } => (
                stat_field(&stat, "throttled_time")?,
                unified.as_deref().map(|u| self.dir(u)),
            ),
            Layout::V2 { root } => (
                stat_field(&stat, "throttled_usec")? * 1000,
                Some(self.dir(root)),
            ),
        };
        // Only where every process of the container is in its leaf there
        // (runc places them; runsc, on a hybrid host, ignores the v2
        // hierarchy, and its processes are moved there first).
        let stalled = pressure
            .filter(|dir| self.joined_pressure_leaf(dir, id))
            .and_then(|dir| fs::read_to_string(dir.join("cpu.pressure")).ok())
            .and_then(|text| pressure_total(&text, "some"))
            .map(|micros| micros.saturating_mul(1000));
        if stalled.is_some() {
            // Every task's waits are in it: nothing more to read.
            return Some(WaitSample {
                stalled,
                throttled,
                ..WaitSample::default()
            });
        }
        self.read_tasks(id, throttled)
    }

    /// Whether every process of the container `id` (its leaf in the cpu
    /// hierarchy) is in its leaf below `parent` in the v2 hierarchy, whose
    /// stall total then counts them and every process they start. On a
    /// hybrid host, processes a runtime left outside it are moved in (the
    /// v2 hierarchy enforces nothing there); a process forked meanwhile by
    /// one not yet moved is caught by the next pass. `false` when they
    /// cannot all be placed: the stall total would miss some.
    fn joined_pressure_leaf(&self, parent: &Path, id: &str) -> bool {
        let procs = |dir: &Path| -> Option<std::collections::BTreeSet<u32>> {
            let text = fs::read_to_string(dir.join("cgroup.procs")).ok()?;
            Some(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
        };
        let leaf = parent.join(id);
        let hybrid = matches!(self.cgroups.layout, Layout::V1 { .. });
        if hybrid && !leaf.is_dir() && fs::create_dir_all(&leaf).is_err() {
            return false;
        }
        let cpu_leaf = self.leaf(self.cpu_hierarchy(), id);
        for _ in 0..4 {
            let (Some(wanted), Some(placed)) = (procs(&cpu_leaf), procs(&leaf)) else {
                return false;
            };
            let missing: Vec<u32> = wanted.difference(&placed).copied().collect();
            if missing.is_empty() {
                return !wanted.is_empty();
            }
            if !hybrid {
                return false;
            }
            for pid in missing {
                // A process that exited meanwhile cannot be moved: fine.
                let _ = fs::write(leaf.join("cgroup.procs"), pid.to_string());
            }
        }
        false
    }

    /// The live tasks' waits, between two readings of the cgroup's CPU time.
    fn read_tasks(&self, id: &str, throttled: u64) -> Option<WaitSample> {
        let threads_file = match &self.cgroups.layout {
            Layout::V1 { .. } => "tasks",
            Layout::V2 { .. } => "cgroup.threads",
        };
        let usage_before = self.leaf_usage(id);
        let tasks =
            fs::read_to_string(self.leaf(self.cpu_hierarchy(), id).join(threads_file)).ok()?;
        let tasks = tasks
            .lines()
            .filter_map(|tid| tid.trim().parse::<u32>().ok())
            .filter_map(|tid| {
                // Fields: time on a CPU, time waiting on a run queue, slices (ns).
                let schedstat = fs::read_to_string(format!("/proc/{tid}/schedstat")).ok()?;
                let mut fields = schedstat.split_whitespace();
                let ran = fields.next()?.parse().ok()?;
                let waited = fields.next()?.parse().ok()?;
                Some((tid, TaskTimes { ran, waited }))
            })
            .collect();
        Some(WaitSample {
            stalled: None,
            tasks,
            usage_before,
            usage_after: self.leaf_usage(id),
            throttled,
        })
    }

    /// The per-task reading of [`InvocationCgroup::sample_waits`] alone.
    #[cfg(test)]
    fn sample_tasks(&self, id: &str) -> Option<WaitSample> {
        let sample = self.sample_waits(id)?;
        Some(WaitSample {
            stalled: None,
            ..self.read_tasks(id, sample.throttled)?
        })
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
    pub fn remove(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        for hierarchy in &self.cgroups.hierarchies {
            if let Err(e) = remove_tree(&self.dir(hierarchy)) {
                problems.push(format!("{}: {e}", self.dir(hierarchy).display()));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!("cannot remove cgroup {}", problems.join("; ")))
        }
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

fn process_exists(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let found = unsafe { libc::kill(pid, 0) } == 0;
    found || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
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

fn stat_field(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == key).then(|| value.trim().parse().ok()).flatten()
    })
}

/// The `total=` (microseconds) of the `kind` line (`some`, `full`) of a
/// pressure file.
fn pressure_total(text: &str, kind: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|line| line.split_whitespace().next() == Some(kind))?;
    line.split_whitespace()
        .find_map(|field| field.strip_prefix("total="))?
        .parse()
        .ok()
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
    fn v2_and_missing_controllers() {
        let v2 = "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let cgroups = Cgroups::from_mountinfo(v2, Some("2")).unwrap();
        assert!(matches!(cgroups.layout, Layout::V2 { .. }));
        assert!(Cgroups::from_mountinfo(v2, Some("1")).is_none());
    }

    #[test]
    fn a_hybrid_host_has_its_unified_hierarchy_for_pressure() {
        let cgroups = Cgroups::from_mountinfo(HYBRID, Some("1")).unwrap();
        let Layout::V1 { unified, .. } = &cgroups.layout else {
            panic!("v1 expected");
        };
        assert_eq!(
            unified.as_deref(),
            Some(Path::new("/sys/fs/cgroup/unified"))
        );
        let pressure = "some avg10=1.00 avg60=0.50 avg300=0.10 total=941311\n\
                        full avg10=0.00 avg60=0.00 avg300=0.00 total=458076\n";
        assert_eq!(pressure_total(pressure, "some"), Some(941_311));
        assert_eq!(pressure_total(pressure, "full"), Some(458_076));
        assert_eq!(pressure_total("", "some"), None);
    }

    fn task(ran: u64, waited: u64) -> TaskTimes {
        TaskTimes { ran, waited }
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
            ..WaitSample::default()
        };
        assert_eq!(
            later.excess_since(&earlier),
            Some(Duration::from_nanos(650))
        );
        // A child ran 1 ms in the window and exited: it may have waited for
        // long, and nothing tells how long. Not measured, never "no wait".
        let child_gone = WaitSample {
            usage_before: Some(1_011_000),
            usage_after: Some(1_011_000),
            ..later.clone()
        };
        assert_eq!(child_gone.excess_since(&earlier), None);
        // Task 2 was alive at the start and exited since: the same.
        let mut thread_gone = later.clone();
        thread_gone.tasks.remove(&2);
        assert_eq!(thread_gone.excess_since(&earlier), None);
        // Its id reused by a new task that ran less: its time is unaccounted.
        let mut reused = later.clone();
        reused.tasks.insert(1, task(500, 10));
        assert_eq!(reused.excess_since(&earlier), None);
        // Without the cgroup's CPU time nothing can be checked.
        let blind = WaitSample {
            usage_after: None,
            ..later.clone()
        };
        assert_eq!(blind.excess_since(&earlier), None);
    }

    #[test]
    fn the_cgroup_wide_stall_counts_exited_tasks_less_the_quota() {
        let earlier = WaitSample {
            stalled: Some(1_000_000),
            ..WaitSample::default()
        };
        // No live task at all (they exited): the stall total still counts them.
        let later = WaitSample {
            stalled: Some(401_000_000),
            throttled: 100_000_000,
            ..WaitSample::default()
        };
        assert_eq!(
            later.excess_since(&earlier),
            Some(Duration::from_millis(300))
        );
        assert_eq!(unescape_mount_path(r"/a\040b"), "/a b");
    }

    /// A real cgroup on this host: a shell pinned to one CPU beside a CPU
    /// hog runs short-lived children one after another, each starved to
    /// about half the CPU, and reports when they all exited; only the shell
    /// is alive at the second sample. Their waits must count: a reading of
    /// the live tasks alone sees almost none of them.
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
            Layout::V1 {
                cpu,
                cpuacct,
                unified,
                ..
            } => {
                let mut joins = vec![
                    invocation.leaf(cpu, leaf).join("tasks"),
                    invocation.leaf(cpuacct, leaf).join("tasks"),
                ];
                if let Some(unified) = unified {
                    joins.push(invocation.leaf(unified, leaf).join("cgroup.procs"));
                }
                joins
            }
            Layout::V2 { root } => vec![invocation.leaf(root, leaf).join("cgroup.procs")],
        };
        for join in &joins {
            fs::create_dir_all(join.parent().unwrap()).unwrap();
        }
        let hog = Command::new("taskset")
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
        let start_tasks = invocation.sample_tasks(leaf).unwrap();
        let cpu_at_start = invocation.leaf_usage(leaf).unwrap();
        writeln!(input, "go").unwrap();
        assert_eq!(lines.next().unwrap().unwrap(), "done");
        let end = invocation.sample_waits(leaf).unwrap();
        let end_tasks = invocation.sample_tasks(leaf).unwrap();
        let children_cpu =
            Duration::from_nanos(invocation.leaf_usage(leaf).unwrap() - cpu_at_start);
        drop(input);
        program.wait().unwrap();
        let mut hog = hog;
        hog.kill().unwrap();
        hog.wait().unwrap();
        invocation.remove().unwrap();
        let _ = cgroups.remove_owner(&owner);

        // What the live tasks alone show (the shell, waiting for its children).
        let live_only: u64 = end_tasks
            .tasks
            .iter()
            .map(|(tid, t)| {
                t.waited
                    .saturating_sub(start_tasks.tasks.get(tid).map_or(0, |s| s.waited))
            })
            .sum();
        let live_only = Duration::from_nanos(live_only);
        // The per-task reading knows it missed exited tasks: not measured.
        assert_eq!(end_tasks.excess_since(&start_tasks), None);
        match end.excess_since(&start) {
            // Where the kernel keeps the cgroup's stall total, the children's
            // waits are in it: at least a quarter of their CPU time (they
            // shared one CPU with the hog), far more than the live tasks show.
            Some(waited) => {
                assert!(
                    waited >= children_cpu / 4 && waited > live_only * 2,
                    "waited {waited:?}, children ran {children_cpu:?}, live tasks waited {live_only:?}"
                );
            }
            // Elsewhere: not measured, which leaves a timeout unconfirmed.
            None => assert!(start.stalled.is_none()),
        }
    }
}
