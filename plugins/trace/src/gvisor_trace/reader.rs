//! Turns the stream's messages into behaviour events: which points count,
//! how paths and addresses are read, and when the trace can no longer be
//! trusted to be whole.

use std::net::{Ipv4Addr, Ipv6Addr};

use progscore_sandbox::behaviour::{
    Action, ActionKind, BehaviourEvent, BehaviourTrace, FileAccess, MAX_EVENT_ARGV, PathPattern,
    bounded_text,
};
use prost::Message;

use super::config::{CROSS_CHECKED, Side};
use super::wire::{self, Header, message_type};
use crate::resolve::{ResolvedPath, TaskView, names_a_path, resolve_fd, resolve_path};

// amd64 system call numbers of the calls whose messages share a type.
const SYS_CREAT: u64 = 85;
const SYS_OPENAT: u64 = 257;
const SYS_EXECVEAT: u64 = 322;
const SYS_KILL: u64 = 62;
const SYS_TKILL: u64 = 200;
const SYS_TGKILL: u64 = 234;
const SYS_PTRACE: u64 = 101;
const SYS_PROCESS_VM_READV: u64 = 310;
const SYS_PROCESS_VM_WRITEV: u64 = 311;
/// The ptrace requests a process_vm_readv / process_vm_writev does the
/// work of (`PTRACE_PEEKDATA`, `PTRACE_POKEDATA`).
const PTRACE_PEEKDATA: i64 = 2;
const PTRACE_POKEDATA: i64 = 5;
const SYS_UNLINK: u64 = 87;
const SYS_UNLINKAT: u64 = 263;
const SYS_RENAME: u64 = 82;
const SYS_RENAMEAT: u64 = 264;
const SYS_RENAMEAT2: u64 = 316;
const SYS_SENDTO: u64 = 44;
const SYS_SENDMSG: u64 = 46;
const SYS_SENDMMSG: u64 = 307;
const SYS_RT_SIGQUEUEINFO: u64 = 129;
const SYS_RT_TGSIGQUEUEINFO: u64 = 297;
const SYS_PIDFD_SEND_SIGNAL: u64 = 424;
const SYS_SYMLINK: u64 = 88;
const SYS_SYMLINKAT: u64 = 266;
const SYS_LINK: u64 = 86;
const SYS_LINKAT: u64 = 265;
const SYS_CHROOT: u64 = 161;
const SYS_PIVOT_ROOT: u64 = 155;
const SYS_MOUNT: u64 = 165;
const SYS_OPENAT2: u64 = 437;
const SYS_OPEN_BY_HANDLE_AT: u64 = 304;
const SYS_TRUNCATE: u64 = 76;
const SYS_MKNOD: u64 = 133;
const SYS_MKNODAT: u64 = 259;

/// `MSG_FASTOPEN`: a send that connects first.
pub(crate) const MSG_FASTOPEN: u64 = 0x2000_0000;
const ENOSYS: i64 = 38;

pub(crate) const AT_FDCWD: i64 = crate::resolve::AT_FDCWD;
const AT_EMPTY_PATH: u32 = 0x1000;
const O_NOFOLLOW: u32 = libc::O_NOFOLLOW as u32;
pub(crate) const O_WRITES: u32 =
    (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u32;
pub(crate) const CLONE_THREAD: u64 = libc::CLONE_THREAD as u64;

/// Reads one trace stream, message by message, into a [`BehaviourTrace`].
pub(crate) struct Reader {
    trace: BehaviourTrace,
    sensitive: Vec<PathPattern>,
    /// The first message's time: the program's start.
    origin_ns: Option<i64>,
    /// The latest time seen, for a message that carries none.
    latest_ns: i64,
    /// Set once a message could not be read: nothing after it is recorded,
    /// since the stream may be out of step.
    broken: bool,
    /// The largest count of points the sandbox said it dropped.
    dropped_by_sandbox: u32,
    /// Per call of [`CROSS_CHECKED`]: its raw points, and its full points.
    cross_check: [(u64, u64); CROSS_CHECKED.len()],
}

impl Reader {
    /// A reader recording reads of paths matching `sensitive`.
    pub fn new(sensitive: Vec<PathPattern>) -> Reader {
        Reader {
            trace: BehaviourTrace::new(ActionKind::ALL.to_vec()),
            sensitive,
            origin_ns: None,
            latest_ns: 0,
            broken: false,
            dropped_by_sandbox: 0,
            cross_check: [(0, 0); CROSS_CHECKED.len()],
        }
    }

    /// Reads one message (header and payload); `possibly_cut` when it may
    /// have been longer than what was received.
    pub fn message(&mut self, message: &[u8], possibly_cut: bool) {
        if self.broken {
            return;
        }
        if possibly_cut {
            self.stop_reading(format!(
                "a trace message filled the reader's {}-byte buffer and may be cut",
                message.len()
            ));
            return;
        }
        let (header, payload) = match Header::split(message) {
            Ok(split) => split,
            Err(bad) => {
                self.stop_reading(bad.to_string());
                return;
            }
        };
        self.dropped_by_sandbox = self.dropped_by_sandbox.max(header.dropped_count);
        if let Err(error) = self.payload(header.message_type, payload) {
            self.stop_reading(format!(
                "a trace message of type {} does not decode: {error}",
                header.message_type
            ));
        }
    }

    /// The time of the latest point read that carried one (ns since the
    /// Unix epoch, the sandbox's clock): a point without a time was sent
    /// after it.
    pub fn latest_time_ns(&self) -> Option<i64> {
        (self.latest_ns > 0).then_some(self.latest_ns)
    }

    /// Marks the trace incomplete and records nothing more.
    pub fn stop_reading(&mut self, reason: impl Into<String>) {
        self.broken = true;
        self.trace.mark_incomplete(reason);
    }

    /// The trace read so far.
    pub fn finish(mut self) -> BehaviourTrace {
        if self.dropped_by_sandbox > 0 {
            self.trace.mark_incomplete(format!(
                "the sandbox dropped {} trace messages",
                self.dropped_by_sandbox
            ));
        }
        let unreported: u64 = self
            .cross_check
            .iter()
            .map(|(raw, full)| raw.saturating_sub(*full))
            .sum();
        if unreported > 0 {
            // runsc drops, uncounted, a point whose text is not UTF-8.
            self.trace.mark_incomplete(format!(
                "the sandbox did not report {unreported} of the program's opens and execs \
                 (a path, argument or folder that is not UTF-8?)"
            ));
        }
        self.trace
    }

    /// Counts a point of a cross-checked call: `raw` or full.
    fn cross_check(&mut self, sysno: u64, side: Side, raw: bool) {
        let checked = CROSS_CHECKED
            .iter()
            .position(|&checked| checked == (sysno, side));
        if let Some(counts) = checked.and_then(|index| self.cross_check.get_mut(index)) {
            let count = if raw { &mut counts.0 } else { &mut counts.1 };
            *count += 1;
        }
    }

    fn payload(&mut self, kind: u16, payload: &[u8]) -> Result<(), prost::DecodeError> {
        match kind {
            message_type::SYSCALL_RAW => self.raw(wire::Syscall::decode(payload)?),
            message_type::SYSCALL_OPEN => self.open(wire::Open::decode(payload)?),
            message_type::SYSCALL_CONNECT => {
                let connect = wire::Connect::decode(payload)?;
                let at_ms = self.at_ms(connect.context_data.as_ref());
                let (family, address, port) = socket_address(&connect.address);
                let action = Action::NetConnect {
                    family,
                    address,
                    port,
                };
                self.record(at_ms, action, connect.exit.as_ref());
            }
            message_type::SYSCALL_BIND => {
                let bind = wire::Bind::decode(payload)?;
                let at_ms = self.at_ms(bind.context_data.as_ref());
                let (family, address, port) = socket_address(&bind.address);
                let action = Action::NetBind {
                    family,
                    address,
                    port,
                };
                self.record(at_ms, action, bind.exit.as_ref());
            }
            message_type::SYSCALL_SOCKET => {
                let socket = wire::Socket::decode(payload)?;
                let at_ms = self.at_ms(socket.context_data.as_ref());
                let action = Action::NetSocket {
                    family: socket_family(socket.domain),
                    socket_type: socket_type(socket.socket_type),
                };
                self.record(at_ms, action, socket.exit.as_ref());
            }
            message_type::SYSCALL_EXECVE => self.exec(wire::Execve::decode(payload)?),
            message_type::SYSCALL_CLONE => {
                let clone = wire::Clone::decode(payload)?;
                let at_ms = self.at_ms(clone.context_data.as_ref());
                // A new thread is not a new process.
                if clone.flags & CLONE_THREAD == 0 {
                    self.record(at_ms, Action::ProcSpawn {}, clone.exit.as_ref());
                }
            }
            message_type::SYSCALL_FORK => {
                let fork = wire::Fork::decode(payload)?;
                let at_ms = self.at_ms(fork.context_data.as_ref());
                self.record(at_ms, Action::ProcSpawn {}, fork.exit.as_ref());
            }
            // gVisor's rule: a reader ignores the types it does not know.
            _ => {}
        }
        Ok(())
    }

    fn open(&mut self, open: wire::Open) {
        let at_ms = self.at_ms(open.context_data.as_ref());
        self.cross_check(open.sysno, side(open.exit.as_ref()), false);
        let access = if open.sysno == SYS_CREAT || open.flags & O_WRITES != 0 {
            FileAccess::Write
        } else {
            FileAccess::Read
        };
        let dirfd = if open.sysno == SYS_OPENAT {
            open.fd
        } else {
            AT_FDCWD
        };
        let cwd = cwd(open.context_data.as_ref());
        let fd_path = text(&open.fd_path);
        let view = PointView::new(&cwd, dirfd, &fd_path);
        let path = resolve_path(
            &view,
            dirfd,
            &text(&open.pathname),
            open.flags & O_NOFOLLOW == 0,
        );
        // A read is an event when it may have reached a sensitive path: by
        // its object, any name on the way, or an object unknown.
        if access == FileAccess::Read && !sensitive(&self.sensitive, &path) {
            return;
        }
        let action = Action::FsOpen {
            path: bounded_text(&path.path),
            access,
        };
        self.record_path(at_ms, action, open.exit.as_ref(), &path);
    }

    fn exec(&mut self, exec: wire::Execve) {
        let at_ms = self.at_ms(exec.context_data.as_ref());
        self.cross_check(exec.sysno, side(exec.exit.as_ref()), false);
        let fd_path = text(&exec.fd_path);
        let cwd = cwd(exec.context_data.as_ref());
        let dirfd = if exec.sysno == SYS_EXECVEAT {
            exec.fd
        } else {
            AT_FDCWD
        };
        let view = PointView::new(&cwd, dirfd, &fd_path);
        let mut path = if exec.sysno == SYS_EXECVEAT
            && exec.pathname.is_empty()
            && exec.flags & AT_EMPTY_PATH != 0
        {
            // fexecve: the program is the descriptor itself.
            resolve_fd(&view, dirfd)
        } else {
            resolve_path(&view, dirfd, &text(&exec.pathname), true)
        };
        // A program is named by the path a filter would give (`/bin/sh`);
        // reached from a folder the sandbox resolved, its name may lack the
        // image's symlinks on the way, so which filter names it is unknown.
        // (Opens are not: the sensitive paths are no symlinks' names.)
        if view.used_resolved_base.get() {
            path.resolved = false;
            path.path = path.spelled.clone();
            path.via.clear();
        }
        let argv = exec
            .argv
            .iter()
            .take(MAX_EVENT_ARGV)
            .map(|argument| bounded_text(&text(argument)))
            .collect();
        let action = Action::ProcExec {
            path: bounded_text(&path.path),
            argv,
        };
        self.record_path(at_ms, action, exec.exit.as_ref(), &path);
    }

    fn raw(&mut self, call: wire::Syscall) {
        let at_ms = self.at_ms(call.context_data.as_ref());
        self.cross_check(call.sysno, side(call.exit.as_ref()), true);
        // The other raw enter points are enabled only so that the exit
        // points carry their context (see the config); the exit has the
        // result.
        let Some(exit) = call.exit.as_ref() else {
            return;
        };
        // Registers hold C `int`s (pids, signals) in their low 32 bits, as
        // the kernel reads them.
        let int = |register: u64| i64::from(register as i32);
        let action = match call.sysno {
            SYS_KILL | SYS_TKILL => Action::ProcSignal {
                target: int(call.arg1),
                signal: int(call.arg2),
            },
            SYS_TGKILL => Action::ProcSignal {
                target: int(call.arg2),
                signal: int(call.arg3),
            },
            SYS_PTRACE => Action::ProcPtrace {
                request: call.arg1 as i64,
                target: int(call.arg2),
            },
            // Another process's memory read or written without ptrace: the
            // same access as a PTRACE_PEEKDATA or PTRACE_POKEDATA of it.
            SYS_PROCESS_VM_READV => Action::ProcPtrace {
                request: PTRACE_PEEKDATA,
                target: int(call.arg1),
            },
            SYS_PROCESS_VM_WRITEV => Action::ProcPtrace {
                request: PTRACE_POKEDATA,
                target: int(call.arg1),
            },
            SYS_RT_SIGQUEUEINFO => Action::ProcSignal {
                target: int(call.arg1),
                signal: int(call.arg2),
            },
            SYS_RT_TGSIGQUEUEINFO => Action::ProcSignal {
                target: int(call.arg2),
                signal: int(call.arg3),
            },
            SYS_PIDFD_SEND_SIGNAL => {
                // The target is a descriptor's process, which the raw point
                // does not name.
                let action = Action::ProcSignal {
                    target: 0,
                    signal: int(call.arg2),
                };
                self.record_unresolved(at_ms, action, Some(exit));
                return;
            }
            // A send that names a destination, or connects first
            // (`MSG_FASTOPEN`), is a connection; the raw point carries the
            // destination's pointer only, never the address.
            SYS_SENDTO if call.arg4 & MSG_FASTOPEN != 0 || call.arg5 != 0 => {
                let action = Action::NetConnect {
                    family: "unknown".to_string(),
                    address: None,
                    port: None,
                };
                self.record_unresolved(at_ms, action, Some(exit));
                return;
            }
            SYS_SENDTO => return,
            SYS_SENDMSG | SYS_SENDMMSG => {
                // Its destination is in the program's memory, which the
                // trace does not show: whether it connected is unknown.
                self.trace.stop_covering(
                    ActionKind::NetConnect,
                    "a sendmsg or sendmmsg, whose destination gVisor's raw point does not show",
                );
                return;
            }
            // Writes onto a path without an open (a new name, a truncated
            // file): fs.open writes, whose paths the raw point does not show.
            SYS_TRUNCATE | SYS_MKNOD | SYS_MKNODAT => {
                self.record_unresolved(at_ms, unknown_write(), Some(exit));
                return;
            }
            SYS_SYMLINK | SYS_SYMLINKAT | SYS_LINK | SYS_LINKAT | SYS_CHROOT | SYS_PIVOT_ROOT
            | SYS_MOUNT => {
                if matches!(
                    call.sysno,
                    SYS_SYMLINK | SYS_SYMLINKAT | SYS_LINK | SYS_LINKAT
                ) {
                    self.record_unresolved(at_ms, unknown_write(), Some(exit));
                }
                if exit.errorno == 0 {
                    self.trace.mark_paths_unresolved(format!(
                        "the program made a link or changed its root ({}), which gVisor's \
                         trace does not follow",
                        path_call_name(call.sysno)
                    ));
                }
                return;
            }
            SYS_OPENAT2 | SYS_OPEN_BY_HANDLE_AT => {
                // Opens whose points carry no path: what they opened is
                // unknown (at this runsc, openat2 is not implemented).
                if exit.errorno != ENOSYS {
                    self.trace.stop_covering(
                        ActionKind::FsOpen,
                        "an openat2 or open_by_handle_at, whose path gVisor's raw point does \
                         not show",
                    );
                }
                return;
            }
            // Raw points carry pointers only, never the paths: which files
            // they named is unknown.
            SYS_UNLINK | SYS_UNLINKAT => {
                self.record_unresolved(at_ms, Action::FsUnlink { path: None }, Some(exit));
                return;
            }
            SYS_RENAME | SYS_RENAMEAT | SYS_RENAMEAT2 => {
                let action = Action::FsRename {
                    from: None,
                    to: None,
                };
                self.record_unresolved(at_ms, action, Some(exit));
                return;
            }
            _ => return,
        };
        self.record(at_ms, action, Some(exit));
    }

    fn record_unresolved(&mut self, at_ms: u64, action: Action, exit: Option<&wire::Exit>) {
        let mut event =
            BehaviourEvent::new(at_ms, action, exit.map(|exit| errno_name(exit.errorno)));
        event.unresolved = true;
        self.trace.record(event);
    }

    fn record_path(
        &mut self,
        at_ms: u64,
        action: Action,
        exit: Option<&wire::Exit>,
        path: &ResolvedPath,
    ) {
        self.trace.record(path_event(
            at_ms,
            action,
            exit.map(|exit| errno_name(exit.errorno)),
            path,
        ));
    }

    fn record(&mut self, at_ms: u64, action: Action, exit: Option<&wire::Exit>) {
        let result = exit.map(|exit| errno_name(exit.errorno));
        self.trace
            .record(BehaviourEvent::new(at_ms, action, result));
    }

    /// Milliseconds from the first message's time to this one's; a
    /// message without a time is taken to be as late as the latest seen.
    fn at_ms(&mut self, context: Option<&wire::ContextData>) -> u64 {
        if let Some(time_ns) = context.map(|context| context.time_ns).filter(|&ns| ns != 0) {
            self.origin_ns.get_or_insert(time_ns);
            self.latest_ns = time_ns;
        }
        let origin = self.origin_ns.unwrap_or(self.latest_ns);
        let elapsed_ns = self.latest_ns.saturating_sub(origin).max(0);
        (elapsed_ns / 1_000_000) as u64
    }
}

/// The side of the call a point with this exit is on.
fn side(exit: Option<&wire::Exit>) -> Side {
    match exit {
        Some(_) => Side::Exit,
        None => Side::Enter,
    }
}

/// Text from the sandbox; a byte that is not UTF-8 becomes U+FFFD.
fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

fn cwd(context: Option<&wire::ContextData>) -> std::borrow::Cow<'_, str> {
    text(
        context
            .map(|context| context.cwd.as_slice())
            .unwrap_or_default(),
    )
}

/// What one point tells of its task: the working folder (a context
/// field) and the folder of the call's own descriptor (`fd_path`). Symlinks
/// inside the sandbox are not visible to the host: a program that makes one
/// marks the trace's paths unresolved (see the raw points), and the image's
/// own are taken as named.
struct PointView<'a> {
    cwd: &'a str,
    dirfd: i64,
    fd_path: &'a str,
    /// Set once the walk started from a folder the sandbox resolved (the
    /// working folder, a descriptor's): that name is the object's, without
    /// the image's symlinks a filter may name it by (`/bin/sh` for
    /// `/usr/bin/dash`), which this trace cannot see.
    used_resolved_base: std::cell::Cell<bool>,
}

impl<'a> PointView<'a> {
    fn new(cwd: &'a str, dirfd: i64, fd_path: &'a str) -> PointView<'a> {
        PointView {
            cwd,
            dirfd,
            fd_path,
            used_resolved_base: std::cell::Cell::new(false),
        }
    }
}

impl TaskView for PointView<'_> {
    fn cwd(&self) -> Option<String> {
        self.used_resolved_base.set(true);
        names_a_path(self.cwd).then(|| self.cwd.to_string())
    }

    fn fd_path(&self, fd: i64) -> Option<String> {
        self.used_resolved_base.set(true);
        (fd == self.dirfd && fd >= 0 && names_a_path(self.fd_path))
            .then(|| self.fd_path.to_string())
    }

    fn exe(&self) -> Option<String> {
        None
    }

    fn read_link(&self, _path: &str) -> Result<Option<String>, ()> {
        Ok(None)
    }
}

/// Whether an open may have reached a sensitive path: its object, a name
/// on the way, or an object the tracer could not resolve.
pub(crate) fn sensitive(patterns: &[PathPattern], path: &ResolvedPath) -> bool {
    !path.resolved
        || std::iter::once(&path.path)
            .chain(&path.via)
            .any(|name| patterns.iter().any(|pattern| pattern.matches(name)))
}

/// An event of a call on `path`: its object, its spelling, the names on
/// the way, or that it is unresolved.
pub(crate) fn path_event(
    at_ms: u64,
    action: Action,
    result: Option<String>,
    path: &ResolvedPath,
) -> BehaviourEvent {
    let mut event = BehaviourEvent::new(at_ms, action, result);
    event.spelled = path.spelled_if_different().map(|text| bounded_text(&text));
    event.via = path.via.iter().map(|name| bounded_text(name)).collect();
    event.unresolved = !path.resolved;
    event
}

/// A write onto a path the raw point does not show.
fn unknown_write() -> Action {
    Action::FsOpen {
        path: String::new(),
        access: FileAccess::Write,
    }
}

fn path_call_name(sysno: u64) -> &'static str {
    match sysno {
        SYS_SYMLINK => "symlink",
        SYS_SYMLINKAT => "symlinkat",
        SYS_LINK => "link",
        SYS_LINKAT => "linkat",
        SYS_CHROOT => "chroot",
        SYS_PIVOT_ROOT => "pivot_root",
        _ => "mount",
    }
}

/// A `sockaddr`'s family, address and port, when readable: `inet` and
/// `inet6` with their address and port, `unix` with its path (`@name` for
/// an abstract one), `family N` for the others.
pub(crate) fn socket_address(sockaddr: &[u8]) -> (String, Option<String>, Option<u16>) {
    let Some(&[low, high]) = sockaddr.first_chunk::<2>() else {
        // Too short to name a family (the call fails with EINVAL).
        return ("unknown".to_string(), None, None);
    };
    // sa_family is in the host's byte order (the sandbox runs on this host).
    let family = i32::from(u16::from_ne_bytes([low, high]));
    let port = |bytes: &[u8]| {
        bytes
            .get(2..4)
            .map(|port| u16::from_be_bytes([port[0], port[1]]))
    };
    match family {
        libc::AF_INET => {
            let address = sockaddr
                .get(4..8)
                .and_then(|octets| <[u8; 4]>::try_from(octets).ok())
                .map(|octets| Ipv4Addr::from(octets).to_string());
            let port = address.as_ref().and(port(sockaddr));
            ("inet".to_string(), address, port)
        }
        libc::AF_INET6 => {
            let address = sockaddr
                .get(8..24)
                .and_then(|octets| <[u8; 16]>::try_from(octets).ok())
                .map(|octets| Ipv6Addr::from(octets).to_string());
            let port = address.as_ref().and(port(sockaddr));
            ("inet6".to_string(), address, port)
        }
        libc::AF_UNIX => {
            let path = sockaddr.get(2..).unwrap_or_default();
            let address = match path.split_first() {
                // An unnamed socket (autobind).
                None => None,
                Some((0, name)) => Some(format!("@{}", until_nul(name))),
                Some(_) => Some(until_nul(path).into_owned()),
            };
            (
                "unix".to_string(),
                address.map(|path| bounded_text(&path)),
                None,
            )
        }
        family => (format!("family {family}"), None, None),
    }
}

fn until_nul(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    let end = bytes
        .iter()
        .position(|&byte| byte == 0)
        .unwrap_or(bytes.len());
    text(&bytes[..end])
}

/// A `socket` domain's name, as [`Action::NetSocket`] writes it.
pub(crate) fn socket_family(domain: i32) -> String {
    match domain {
        libc::AF_UNIX => "unix".to_string(),
        libc::AF_INET => "inet".to_string(),
        libc::AF_INET6 => "inet6".to_string(),
        libc::AF_NETLINK => "netlink".to_string(),
        domain => format!("family {domain}"),
    }
}

/// A `socket` type's name, its flags (`SOCK_CLOEXEC`, `SOCK_NONBLOCK`) set
/// aside.
pub(crate) fn socket_type(socket_type: i32) -> String {
    match socket_type & 0xf {
        libc::SOCK_STREAM => "stream".to_string(),
        libc::SOCK_DGRAM => "dgram".to_string(),
        libc::SOCK_RAW => "raw".to_string(),
        libc::SOCK_SEQPACKET => "seqpacket".to_string(),
        other => format!("type {other}"),
    }
}

/// `ok`, an errno's name, or `errno N` for one without a name here.
pub(crate) fn errno_name(errno: i64) -> String {
    let name = match errno {
        0 => "ok",
        1 => "EPERM",
        2 => "ENOENT",
        3 => "ESRCH",
        4 => "EINTR",
        5 => "EIO",
        6 => "ENXIO",
        7 => "E2BIG",
        8 => "ENOEXEC",
        9 => "EBADF",
        10 => "ECHILD",
        11 => "EAGAIN",
        12 => "ENOMEM",
        13 => "EACCES",
        14 => "EFAULT",
        16 => "EBUSY",
        17 => "EEXIST",
        18 => "EXDEV",
        19 => "ENODEV",
        20 => "ENOTDIR",
        21 => "EISDIR",
        22 => "EINVAL",
        23 => "ENFILE",
        24 => "EMFILE",
        26 => "ETXTBSY",
        27 => "EFBIG",
        28 => "ENOSPC",
        30 => "EROFS",
        31 => "EMLINK",
        32 => "EPIPE",
        36 => "ENAMETOOLONG",
        38 => "ENOSYS",
        39 => "ENOTEMPTY",
        40 => "ELOOP",
        88 => "ENOTSOCK",
        91 => "EPROTOTYPE",
        93 => "EPROTONOSUPPORT",
        95 => "EOPNOTSUPP",
        97 => "EAFNOSUPPORT",
        98 => "EADDRINUSE",
        99 => "EADDRNOTAVAIL",
        100 => "ENETDOWN",
        101 => "ENETUNREACH",
        103 => "ECONNABORTED",
        104 => "ECONNRESET",
        106 => "EISCONN",
        110 => "ETIMEDOUT",
        111 => "ECONNREFUSED",
        113 => "EHOSTUNREACH",
        114 => "EALREADY",
        115 => "EINPROGRESS",
        errno => return format!("errno {errno}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_with_what_a_point_tells() {
        let resolve = |pathname: &str, dirfd: i64, fd_path: &str, cwd: &str| {
            let view = PointView::new(cwd, dirfd, fd_path);
            let path = resolve_path(&view, dirfd, pathname, true);
            (path.path, path.resolved)
        };
        let known = |path: &str| (path.to_string(), true);
        let unknown = |path: &str| (path.to_string(), false);
        assert_eq!(resolve("x", AT_FDCWD, "", "/sandbox"), known("/sandbox/x"));
        assert_eq!(
            resolve("../etc//./shadow", AT_FDCWD, "", "/tmp"),
            known("/etc/shadow")
        );
        assert_eq!(
            resolve("/../../etc/shadow", AT_FDCWD, "", "/"),
            known("/etc/shadow")
        );
        assert_eq!(
            resolve("/proc/self/root/etc/shadow", AT_FDCWD, "", "/"),
            known("/etc/shadow")
        );
        assert_eq!(
            resolve("/proc/self/cwd/x", AT_FDCWD, "", "/tmp"),
            known("/tmp/x")
        );
        assert_eq!(resolve("y", 3, "/data", "/sandbox"), known("/data/y"));
        assert_eq!(
            resolve("/proc/self/fd/3/y", 3, "/data", "/"),
            known("/data/y")
        );
        // What a point does not tell: unresolved, as spelled.
        assert_eq!(
            resolve("/proc/self/fd/4/shadow", 3, "/etc", "/"),
            unknown("/proc/self/fd/4/shadow")
        );
        assert_eq!(
            resolve("/dev/fd/4/shadow", AT_FDCWD, "", "/"),
            unknown("/dev/fd/4/shadow")
        );
        assert_eq!(
            resolve("y", 3, "[err: FD not found]", "/sandbox"),
            unknown("y")
        );
        assert_eq!(resolve("y", -5, "", "/sandbox"), unknown("y"));
        assert_eq!(resolve("y", AT_FDCWD, "", ""), unknown("y"));
        assert_eq!(resolve("", AT_FDCWD, "", "/sandbox"), known(""));
    }

    #[test]
    fn an_exec_from_a_folder_the_sandbox_resolved_is_unresolved() {
        let exec = |fd: i64, fd_path: &str, pathname: &str, flags: u32| {
            let mut reader = Reader::new(Vec::new());
            reader.exec(wire::Execve {
                sysno: SYS_EXECVEAT,
                fd,
                fd_path: fd_path.as_bytes().to_vec(),
                pathname: pathname.as_bytes().to_vec(),
                flags,
                context_data: Some(wire::ContextData {
                    time_ns: 1,
                    cwd: b"/usr/bin".to_vec(),
                }),
                ..wire::Execve::default()
            });
            let event = reader.finish().events.remove(0);
            (event.action, event.unresolved)
        };
        let program = |path: &str| Action::ProcExec {
            path: path.into(),
            argv: Vec::new(),
        };
        // By name from the root: the name a filter gives.
        assert_eq!(
            exec(AT_FDCWD, "", "/proc/self/root/bin/sh", 0),
            (program("/bin/sh"), false)
        );
        // From a folder or a descriptor the sandbox resolved (`/bin` is
        // `/usr/bin` in the image): which filter names it is unknown.
        assert_eq!(exec(3, "/usr/bin", "sh", 0), (program("sh"), true));
        assert_eq!(exec(AT_FDCWD, "", "./sh", 0), (program("./sh"), true));
        assert_eq!(
            exec(3, "/usr/bin/dash", "", AT_EMPTY_PATH),
            (program("/proc/self/fd/3"), true)
        );
    }

    #[test]
    fn socket_addresses_read_as_the_kernel_has_them() {
        let mut inet = vec![2, 0, 0x01, 0xbb, 1, 1, 1, 1];
        inet.extend([0; 8]);
        assert_eq!(
            socket_address(&inet),
            ("inet".into(), Some("1.1.1.1".into()), Some(443))
        );
        let mut inet6 = vec![10, 0, 0, 80, 0, 0, 0, 0];
        inet6.extend(Ipv6Addr::LOCALHOST.octets());
        assert_eq!(
            socket_address(&inet6),
            ("inet6".into(), Some("::1".into()), Some(80))
        );
        assert_eq!(
            socket_address(b"\x01\x00/run/x.sock\x00junk"),
            ("unix".into(), Some("/run/x.sock".into()), None)
        );
        assert_eq!(
            socket_address(b"\x01\x00\x00name"),
            ("unix".into(), Some("@name".into()), None)
        );
        assert_eq!(socket_address(&[1, 0]), ("unix".into(), None, None));
        assert_eq!(socket_address(&[2, 0, 1]), ("inet".into(), None, None));
        assert_eq!(
            socket_address(&[16, 0, 0, 0]),
            ("family 16".into(), None, None)
        );
        assert_eq!(socket_address(&[2]), ("unknown".into(), None, None));
        assert_eq!(
            socket_type(libc::SOCK_STREAM | libc::SOCK_CLOEXEC),
            "stream"
        );
        assert_eq!(socket_type(9), "type 9");
        assert_eq!(socket_family(libc::AF_NETLINK), "netlink");
        assert_eq!(errno_name(101), "ENETUNREACH");
        assert_eq!(errno_name(512), "errno 512");
    }
}
