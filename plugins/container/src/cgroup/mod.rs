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
//! In rooms: `invocation.rs` (one invocation's cgroup), `waits.rs` (its
//! tasks' CPU waits and block-I/O stalls), `oom.rs` (whose OOM killer acted).

mod invocation;
mod oom;
mod waits;

pub use invocation::*;
pub use oom::*;
pub use waits::*;

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
