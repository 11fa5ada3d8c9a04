//! Whose OOM killer acted on an invocation: its own memory limit's (the
//! program's `memory_limit`) or another's (the machine's fault), as cgroup
//! v1's notifications or v2's `memory.events` tell.

use super::*;

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
pub(super) struct OomNotification {
    events: OwnedFd,
    _control: fs::File,
}

impl OomNotification {
    /// Registers for the OOM notifications of the cgroup `dir`.
    pub(super) fn register(dir: &Path) -> Result<OomNotification, PathError> {
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
    pub(super) fn fired(&self) -> bool {
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
pub struct OomWatch(pub(super) Watch);

#[derive(Debug)]
pub(super) enum Watch {
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
pub struct OomReading(pub(super) Reading);

#[derive(Debug, Clone)]
pub(super) enum Reading {
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
