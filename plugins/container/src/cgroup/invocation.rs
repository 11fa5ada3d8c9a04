//! One invocation's parent cgroup: created with its limits, read for CPU
//! time, peak memory, waits and the freezer, removed after the program.

use super::oom::*;
use super::waits::*;
use super::*;

/// One invocation's parent cgroup.
#[derive(Debug, Clone)]
pub struct InvocationCgroup {
    pub(super) cgroups: Cgroups,
    pub(super) relative: String,
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

    pub(super) fn dir(&self, hierarchy: &Path) -> PathBuf {
        hierarchy.join(&self.relative)
    }

    pub(super) fn leaf(&self, hierarchy: &Path, id: &str) -> PathBuf {
        self.dir(hierarchy).join(id)
    }
}
