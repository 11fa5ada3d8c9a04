//! The WASI backend's behaviour trace: the host's own WASI imports that touch
//! paths (`path_open`, `path_unlink_file`, `path_rename`), recorded as the
//! host answers them.
//!
//! Here the sandbox is progscore's own process: every path a guest opens
//! reaches this host as an import call, so opens, removals and renames are
//! seen whole, and their arguments are read after the guest stopped to make
//! the call (it runs on no other thread), so they are exact. Other kinds are
//! not traced: WASI preview 1 gives a guest no way to create a socket or run a
//! program, so an attempt (Python's `socket.connect`, `os.system`) fails
//! inside the guest's libc and never reaches the host. A condition on them
//! stays undetermined under WASI rather than being proven by an absence the
//! sandbox could not have seen.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use progscore_sandbox::behaviour::{
    Action, ActionKind, Behaviour, BehaviourEvent, BehaviourTrace, FileAccess, PathPattern,
    bounded_text, normalise_path,
};
use wasmtime::{Caller, Extern, Linker};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p1::wasi_snapshot_preview1 as p1;
use wiggle::GuestMemory;

/// The kinds a WASI trace covers.
pub(crate) const TRACED_KINDS: [ActionKind; 3] = [
    ActionKind::FsOpen,
    ActionKind::FsUnlink,
    ActionKind::FsRename,
];

/// `oflags` of `path_open` that create or truncate.
const OFLAGS_WRITE: i32 = 0x1 | 0x8;
/// The `fd_write` right.
const RIGHT_FD_WRITE: i64 = 1 << 6;
/// `fdflags` append.
const FDFLAGS_APPEND: i32 = 0x1;
/// The descriptor of the first preopened folder (0–2 are the standard streams).
const FIRST_PREOPEN_FD: u32 = 3;

/// One invocation's trace while the guest runs.
pub(crate) struct WasiTrace {
    started: Instant,
    sensitive: Arc<Vec<PathPattern>>,
    /// The guest path of each descriptor known to be a folder or file it
    /// opened (preopens first), to resolve paths given relative to one.
    fd_paths: HashMap<u32, String>,
    trace: BehaviourTrace,
}

impl WasiTrace {
    /// A trace of a guest whose preopened folders appear at `preopens`, in
    /// the order they were preopened; reads of paths matching `sensitive`
    /// are recorded, writes always are.
    pub(crate) fn new(sensitive: &[String], preopens: &[&str]) -> WasiTrace {
        let fd_paths = (FIRST_PREOPEN_FD..)
            .zip(preopens.iter().map(|path| path.to_string()))
            .collect();
        WasiTrace {
            started: Instant::now(),
            sensitive: compiled(sensitive),
            fd_paths,
            trace: BehaviourTrace::new(TRACED_KINDS.to_vec()),
        }
    }

    /// The program's clock starts now: event times count from here.
    pub(crate) fn start_clock(&mut self) {
        self.started = Instant::now();
    }

    /// The trace as the invocation records it.
    pub(crate) fn finish(self) -> Behaviour {
        Behaviour::Traced(self.trace)
    }

    /// The guest path of `relative` under descriptor `fd`, folded (`.` and
    /// `..` taken away, never above the root).
    fn path(&self, fd: i32, relative: &str) -> String {
        let base = u32::try_from(fd)
            .ok()
            .and_then(|fd| self.fd_paths.get(&fd).cloned())
            .unwrap_or_else(|| format!("/<fd {fd}>"));
        if relative.starts_with('/') {
            normalise_path(relative)
        } else {
            normalise_path(&format!("{base}/{relative}"))
        }
    }

    fn record(&mut self, action: Action, errno: i32) {
        let at_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.trace
            .record(BehaviourEvent::new(at_ms, action, Some(errno_name(errno))));
    }

    #[allow(clippy::too_many_arguments)]
    fn opened(
        &mut self,
        fd: i32,
        relative: &str,
        oflags: i32,
        rights_base: i64,
        fdflags: i32,
        errno: i32,
        opened: Option<u32>,
    ) {
        let path = self.path(fd, relative);
        if let Some(opened) = opened {
            self.fd_paths.insert(opened, path.clone());
        }
        let writes = oflags & OFLAGS_WRITE != 0
            || rights_base & RIGHT_FD_WRITE != 0
            || fdflags & FDFLAGS_APPEND != 0;
        let access = if writes {
            FileAccess::Write
        } else {
            FileAccess::Read
        };
        if access == FileAccess::Read && !self.sensitive.iter().any(|p| p.matches(&path)) {
            return;
        }
        self.record(
            Action::FsOpen {
                path: bounded_text(&path),
                access,
            },
            errno,
        );
    }
}

/// The patterns compiled once per list, not once per invocation (each is
/// a regular expression).
fn compiled(sensitive: &[String]) -> Arc<Vec<PathPattern>> {
    /// The last list as written, and compiled.
    type Compiled = (Vec<String>, Arc<Vec<PathPattern>>);
    static LAST: Mutex<Option<Compiled>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((written, patterns)) = &*last
        && written.as_slice() == sensitive
    {
        return patterns.clone();
    }
    let patterns = Arc::new(
        sensitive
            .iter()
            .filter_map(|pattern| PathPattern::new(pattern).ok())
            .collect::<Vec<_>>(),
    );
    *last = Some((sensitive.to_vec(), patterns.clone()));
    patterns
}

/// WASI's errno as the other backends name errors (`ENOENT`), `ok` for success.
fn errno_name(errno: i32) -> String {
    const NAMES: &[(i32, &str)] = &[
        (0, "ok"),
        (2, "EACCES"),
        (8, "EBADF"),
        (20, "EEXIST"),
        (28, "EINVAL"),
        (29, "EIO"),
        (31, "EISDIR"),
        (44, "ENOENT"),
        (51, "ENOSPC"),
        (52, "ENOSYS"),
        (54, "ENOTDIR"),
        (55, "ENOTEMPTY"),
        (58, "ENOTSUP"),
        (63, "EPERM"),
        (69, "EROFS"),
        (76, "ENOTCAPABLE"),
    ];
    NAMES
        .iter()
        .find(|(code, _)| *code == errno)
        .map(|(_, name)| name.to_string())
        .unwrap_or_else(|| format!("errno {errno}"))
}

/// The guest's text at `ptr..ptr + len`, lossy, or empty when out of bounds
/// (wasmtime-wasi then refuses the call itself).
fn guest_text(memory: &[u8], ptr: i32, len: i32) -> String {
    let (Ok(start), Ok(len)) = (usize::try_from(ptr), usize::try_from(len)) else {
        return String::new();
    };
    start
        .checked_add(len)
        .and_then(|end| memory.get(start..end))
        .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
        .unwrap_or_default()
}

/// The guest's linear memory, as wasmtime-wasi's own imports find it.
fn memory<T>(caller: &mut Caller<'_, T>) -> wasmtime::Result<wasmtime::Memory> {
    match caller.get_export("memory") {
        Some(Extern::Memory(memory)) => Ok(memory),
        _ => Err(wasmtime::Error::msg("the guest exports no memory")),
    }
}

const MODULE: &str = "wasi_snapshot_preview1";

/// What the traced imports need of a guest's store data: the WASI state
/// that answers, and the trace that records (none when not traced).
pub(crate) trait TracedStore: Send + 'static {
    /// The WASI preview 1 state.
    fn wasi(&mut self) -> &mut WasiP1Ctx;
    /// The invocation's trace, when it is traced.
    fn trace(&mut self) -> Option<&mut WasiTrace>;
}

/// Puts the traced imports in place of wasmtime-wasi's (added before): each
/// reads its arguments, lets wasmtime-wasi answer, and records the answer
/// when the invocation is traced.
pub(crate) fn add_to_linker<T: TracedStore>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.func_wrap_async(
        MODULE,
        "path_open",
        |mut caller: Caller<'_, T>,
         (
            fd,
            dirflags,
            path_ptr,
            path_len,
            oflags,
            rights_base,
            rights_inheriting,
            fdflags,
            opened_ptr,
        ): (i32, i32, i32, i32, i32, i64, i64, i32, i32)| {
            Box::new(async move {
                let memory = memory(&mut caller)?;
                let (bytes, state) = memory.data_and_store_mut(&mut caller);
                let relative = guest_text(bytes, path_ptr, path_len);
                let errno = {
                    let mut guest = GuestMemory::Unshared(&mut *bytes);
                    p1::path_open(
                        state.wasi(),
                        &mut guest,
                        fd,
                        dirflags,
                        path_ptr,
                        path_len,
                        oflags,
                        rights_base,
                        rights_inheriting,
                        fdflags,
                        opened_ptr,
                    )
                    .await?
                };
                if let Some(trace) = state.trace() {
                    let opened = (errno == 0)
                        .then(|| {
                            let at = usize::try_from(opened_ptr).ok()?;
                            let word = bytes.get(at..at.checked_add(4)?)?;
                            Some(u32::from_le_bytes(word.try_into().ok()?))
                        })
                        .flatten();
                    trace.opened(fd, &relative, oflags, rights_base, fdflags, errno, opened);
                }
                Ok(errno)
            })
        },
    )?;
    linker.func_wrap_async(
        MODULE,
        "path_unlink_file",
        |mut caller: Caller<'_, T>, (fd, path_ptr, path_len): (i32, i32, i32)| {
            Box::new(async move {
                let memory = memory(&mut caller)?;
                let (bytes, state) = memory.data_and_store_mut(&mut caller);
                let relative = guest_text(bytes, path_ptr, path_len);
                let errno = {
                    let mut guest = GuestMemory::Unshared(&mut *bytes);
                    p1::path_unlink_file(state.wasi(), &mut guest, fd, path_ptr, path_len).await?
                };
                if let Some(trace) = state.trace() {
                    let path = trace.path(fd, &relative);
                    trace.record(
                        Action::FsUnlink {
                            path: Some(bounded_text(&path)),
                        },
                        errno,
                    );
                }
                Ok(errno)
            })
        },
    )?;
    linker.func_wrap_async(
        MODULE,
        "path_rename",
        |mut caller: Caller<'_, T>,
         (fd, old_ptr, old_len, new_fd, new_ptr, new_len): (i32, i32, i32, i32, i32, i32)| {
            Box::new(async move {
                let memory = memory(&mut caller)?;
                let (bytes, state) = memory.data_and_store_mut(&mut caller);
                let old = guest_text(bytes, old_ptr, old_len);
                let new = guest_text(bytes, new_ptr, new_len);
                let errno = {
                    let mut guest = GuestMemory::Unshared(&mut *bytes);
                    p1::path_rename(
                        state.wasi(),
                        &mut guest,
                        fd,
                        old_ptr,
                        old_len,
                        new_fd,
                        new_ptr,
                        new_len,
                    )
                    .await?
                };
                if let Some(trace) = state.trace() {
                    let from = trace.path(fd, &old);
                    let to = trace.path(new_fd, &new);
                    trace.record(
                        Action::FsRename {
                            from: Some(bounded_text(&from)),
                            to: Some(bounded_text(&to)),
                        },
                        errno,
                    );
                }
                Ok(errno)
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace() -> WasiTrace {
        WasiTrace::new(
            &["/program/**".to_string()],
            &["/usr/local/lib", "/program", "/tmp"],
        )
    }

    #[test]
    fn paths_resolve_against_the_preopens_and_fold() {
        let trace = trace();
        assert_eq!(trace.path(5, "out.txt"), "/tmp/out.txt");
        assert_eq!(trace.path(4, "./a/../main.py"), "/program/main.py");
        assert_eq!(trace.path(5, "../../etc/passwd"), "/etc/passwd");
        assert_eq!(trace.path(9, "x"), "/<fd 9>/x");
    }

    #[test]
    fn writes_are_events_and_reads_only_of_sensitive_paths() {
        let mut trace = trace();
        trace.opened(3, "python315.zip", 0, 0, 0, 0, Some(6));
        trace.opened(4, "main.py", 0, 0, 0, 0, Some(7));
        trace.opened(5, "out.txt", 0x1, RIGHT_FD_WRITE, 0, 0, Some(8));
        trace.opened(4, "x", 0x1, RIGHT_FD_WRITE, 0, 69, None);
        let Behaviour::Traced(trace) = trace.finish() else {
            panic!("traced");
        };
        let opens: Vec<_> = trace
            .events
            .iter()
            .map(|e| (e.action.clone(), e.result.clone().unwrap()))
            .collect();
        assert_eq!(
            opens,
            [
                (
                    Action::FsOpen {
                        path: "/program/main.py".into(),
                        access: FileAccess::Read
                    },
                    "ok".into()
                ),
                (
                    Action::FsOpen {
                        path: "/tmp/out.txt".into(),
                        access: FileAccess::Write
                    },
                    "ok".into()
                ),
                (
                    Action::FsOpen {
                        path: "/program/x".into(),
                        access: FileAccess::Write
                    },
                    "EROFS".into()
                ),
            ]
        );
        assert!(trace.incomplete.is_none() && trace.arguments_unverified.is_none());
    }
}
