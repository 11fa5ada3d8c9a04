//! Turns a notified call (its number, registers, and what its arguments
//! point to in the program's memory) into a behaviour action, with the
//! rules of the gVisor reader: which opens count (writes, or any open of a
//! sensitive path), paths resolved against the working directory or the
//! folder a descriptor names, a thread is not a spawn.

use progscore_sandbox::behaviour::{
    Action, ActionKind, FileAccess, MAX_EVENT_ARGV, MAX_EVENT_TEXT, PathPattern, bounded_text,
};

use crate::gvisor_trace::reader::{
    AT_FDCWD, CLONE_THREAD, MSG_FASTOPEN, O_WRITES, sensitive, socket_address, socket_family,
    socket_type,
};
use crate::resolve::{ResolvedPath, TaskView, resolve_fd, resolve_path};

/// The longest path the kernel takes (`PATH_MAX`, with its NUL).
const PATH_MAX: usize = 4096;

/// The longest socket address read.
const SOCKADDR_MAX: usize = 128;

/// The most messages of one `sendmmsg` read (the kernel's `UIO_MAXIOV`).
const SENDMMSG_MAX: u64 = 1024;

const AT_EMPTY_PATH: u64 = 0x1000;
const O_NOFOLLOW: u64 = libc::O_NOFOLLOW as u64;

/// The process a call came from, as the listener reads it.
pub(crate) trait Target {
    /// Up to `len` bytes at `address`: fewer where the memory ends, `None`
    /// when nothing there can be read.
    fn read(&self, address: u64, len: usize) -> Option<Vec<u8>>;
    /// The process's working directory.
    fn cwd(&self) -> Option<String>;
    /// The path descriptor `fd` names in the process.
    fn fd_path(&self, fd: i32) -> Option<String>;
    /// The process's executable.
    fn exe(&self) -> Option<String>;
    /// Whether `path` (absolute in the process's root, its folders
    /// resolved) is a symlink, and where to; `Err(())` when unknown.
    fn read_link(&self, path: &str) -> Result<Option<String>, ()>;
}

/// A notified call as an event: the action, the path it reached (for the
/// calls with one), and whether what it named is unknown.
#[derive(Debug)]
pub(crate) struct Traced {
    pub action: Action,
    pub path: Option<ResolvedPath>,
    pub unresolved: bool,
}

impl Traced {
    fn plain(action: Action) -> Traced {
        Traced {
            action,
            path: None,
            unresolved: false,
        }
    }
}

/// The process as the resolver asks it.
struct View<'a>(&'a dyn Target);

impl TaskView for View<'_> {
    fn cwd(&self) -> Option<String> {
        self.0.cwd()
    }
    fn fd_path(&self, fd: i64) -> Option<String> {
        i32::try_from(fd).ok().and_then(|fd| self.0.fd_path(fd))
    }
    fn exe(&self) -> Option<String> {
        self.0.exe()
    }
    fn read_link(&self, path: &str) -> Result<Option<String>, ()> {
        self.0.read_link(path)
    }
}

/// A C string at `address` (at most `max` bytes), as text (a byte that is
/// not UTF-8 becomes U+FFFD); `None` when unreadable.
fn string(target: &dyn Target, address: u64, max: usize) -> Option<String> {
    if address == 0 {
        return None;
    }
    let bytes = target.read(address, max)?;
    let end = bytes
        .iter()
        .position(|&byte| byte == 0)
        .unwrap_or(bytes.len());
    Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
}

/// A C `int` in a register's low 32 bits, as the kernel reads it.
fn int(register: u64) -> i64 {
    i64::from(register as i32)
}

/// The object the path at `address` reaches, relative to `dirfd`;
/// unresolved (and empty) when the path cannot be read.
fn path_at(target: &dyn Target, dirfd: i64, address: u64, follow_last: bool) -> ResolvedPath {
    match string(target, address, PATH_MAX) {
        Some(pathname) => resolve_path(&View(target), dirfd, &pathname, follow_last),
        None => ResolvedPath {
            path: String::new(),
            spelled: String::new(),
            resolved: false,
            via: Vec::new(),
            through_proc: false,
        },
    }
}

/// A u64 in the program's memory.
fn word(target: &dyn Target, address: u64) -> Option<u64> {
    target
        .read(address, 8)
        .and_then(|bytes| <[u8; 8]>::try_from(bytes.as_slice()).ok())
        .map(u64::from_ne_bytes)
}

/// The action call `nr` (amd64) with these registers is, or `None` when it
/// is no event (a thread, a read of a path that is not sensitive, a send
/// on a connected socket, a call not traced).
pub(crate) fn action(
    nr: i64,
    args: &[u64; 6],
    target: &dyn Target,
    sensitive_paths: &[PathPattern],
) -> Option<Traced> {
    let open = |dirfd: i64, address: u64, flags: u64, creat: bool| {
        let access = if creat || flags & u64::from(O_WRITES) != 0 {
            FileAccess::Write
        } else {
            FileAccess::Read
        };
        let path = path_at(target, dirfd, address, flags & O_NOFOLLOW == 0);
        if access == FileAccess::Read && !sensitive(sensitive_paths, &path) {
            return None;
        }
        Some(Traced {
            action: Action::FsOpen {
                path: bounded_text(&path.path),
                access,
            },
            unresolved: !path.resolved,
            path: Some(path),
        })
    };
    let sockaddr = |address: u64, len: u64| {
        let len = (len as u32 as usize).min(SOCKADDR_MAX);
        let bytes = if len == 0 || address == 0 {
            Vec::new()
        } else {
            target.read(address, len).unwrap_or_default()
        };
        socket_address(&bytes)
    };
    // A send that names a destination (or connects first, MSG_FASTOPEN)
    // is a connection; one on a connected socket is not.
    let send = |address: u64, len: u64, flags: u64| {
        if address == 0 && flags & MSG_FASTOPEN == 0 {
            return None;
        }
        let (family, address, port) = sockaddr(address, len);
        Some(Traced::plain(Action::NetConnect {
            family,
            address,
            port,
        }))
    };
    // A msghdr: its name and the name's length come first.
    let message = |header: u64, flags: u64| {
        let start = target.read(header, 16)?;
        let word = |at: usize| {
            start
                .get(at..at + 8)
                .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
                .map(u64::from_ne_bytes)
        };
        send(word(0)?, word(8).unwrap_or(0), flags)
    };
    let action = match nr {
        libc::SYS_connect => {
            let (family, address, port) = sockaddr(args[1], args[2]);
            Action::NetConnect {
                family,
                address,
                port,
            }
        }
        libc::SYS_sendto => return send(args[4], args[5], args[3]),
        libc::SYS_sendmsg => {
            return match message(args[1], args[2]) {
                Some(traced) => Some(traced),
                // A header the listener cannot read may still name one.
                None if word(target, args[1]).is_none() => Some(Traced {
                    action: unknown_connect(),
                    path: None,
                    unresolved: true,
                }),
                None => None,
            };
        }
        libc::SYS_sendmmsg => {
            // struct mmsghdr: a msghdr (56 bytes) and its length, padded to 64.
            for index in 0..(args[2] & 0xffff_ffff).min(SENDMMSG_MAX) {
                let header = args[1].wrapping_add(index * 64);
                if word(target, header).is_none() {
                    return Some(Traced {
                        action: unknown_connect(),
                        path: None,
                        unresolved: true,
                    });
                }
                if let Some(traced) = message(header, args[3]) {
                    return Some(traced);
                }
            }
            return None;
        }
        libc::SYS_bind => {
            let (family, address, port) = sockaddr(args[1], args[2]);
            Action::NetBind {
                family,
                address,
                port,
            }
        }
        libc::SYS_socket => Action::NetSocket {
            family: socket_family(args[0] as i32),
            socket_type: socket_type(args[1] as i32),
        },
        libc::SYS_execve => {
            return Some(exec(
                target,
                path_at(target, AT_FDCWD, args[0], true),
                args[1],
            ));
        }
        libc::SYS_execveat => {
            let dirfd = int(args[0]);
            let pathname = string(target, args[1], PATH_MAX).unwrap_or_default();
            let path = if pathname.is_empty() && args[4] & AT_EMPTY_PATH != 0 {
                // fexecve: the program is the descriptor itself.
                resolve_fd(&View(target), dirfd)
            } else {
                path_at(target, dirfd, args[1], true)
            };
            return Some(exec(target, path, args[2]));
        }
        // Writes onto a path without an open: the path made or changed (a
        // new name is not followed; a truncated file is).
        libc::SYS_truncate => return Some(written(path_at(target, AT_FDCWD, args[0], true))),
        libc::SYS_mknod => return Some(written(path_at(target, AT_FDCWD, args[0], false))),
        libc::SYS_mknodat => {
            return Some(written(path_at(target, int(args[0]), args[1], false)));
        }
        libc::SYS_symlink | libc::SYS_link => {
            return Some(written(path_at(target, AT_FDCWD, args[1], false)));
        }
        libc::SYS_symlinkat => {
            return Some(written(path_at(target, int(args[1]), args[2], false)));
        }
        libc::SYS_linkat => return Some(written(path_at(target, int(args[2]), args[3], false))),
        libc::SYS_open => return open(AT_FDCWD, args[0], args[1], false),
        libc::SYS_creat => return open(AT_FDCWD, args[0], 0, true),
        libc::SYS_openat => return open(int(args[0]), args[1], args[2], false),
        libc::SYS_openat2 => {
            // struct open_how begins with its u64 flags.
            let flags = word(target, args[2]).unwrap_or(0);
            return open(int(args[0]), args[1], flags, false);
        }
        // A new thread is not a new process.
        libc::SYS_clone if args[0] & CLONE_THREAD != 0 => return None,
        libc::SYS_clone | libc::SYS_fork | libc::SYS_vfork => Action::ProcSpawn {},
        libc::SYS_kill | libc::SYS_tkill | libc::SYS_rt_sigqueueinfo => Action::ProcSignal {
            target: int(args[0]),
            signal: int(args[1]),
        },
        libc::SYS_tgkill | libc::SYS_rt_tgsigqueueinfo => Action::ProcSignal {
            target: int(args[1]),
            signal: int(args[2]),
        },
        libc::SYS_pidfd_send_signal => {
            // The target is the descriptor's process, not named here.
            return Some(Traced {
                action: Action::ProcSignal {
                    target: 0,
                    signal: int(args[1]),
                },
                path: None,
                unresolved: true,
            });
        }
        libc::SYS_ptrace => Action::ProcPtrace {
            request: args[0] as i64,
            target: int(args[1]),
        },
        // The same access as a PTRACE_PEEKDATA or PTRACE_POKEDATA.
        libc::SYS_process_vm_readv => Action::ProcPtrace {
            request: libc::PTRACE_PEEKDATA as i64,
            target: int(args[0]),
        },
        libc::SYS_process_vm_writev => Action::ProcPtrace {
            request: libc::PTRACE_POKEDATA as i64,
            target: int(args[0]),
        },
        libc::SYS_unlink => Action::FsUnlink {
            path: Some(bounded_text(
                &path_at(target, AT_FDCWD, args[0], false).path,
            )),
        },
        libc::SYS_unlinkat => Action::FsUnlink {
            path: Some(bounded_text(
                &path_at(target, int(args[0]), args[1], false).path,
            )),
        },
        libc::SYS_rename => Action::FsRename {
            from: Some(bounded_text(
                &path_at(target, AT_FDCWD, args[0], false).path,
            )),
            to: Some(bounded_text(
                &path_at(target, AT_FDCWD, args[1], false).path,
            )),
        },
        libc::SYS_renameat | libc::SYS_renameat2 => Action::FsRename {
            from: Some(bounded_text(
                &path_at(target, int(args[0]), args[1], false).path,
            )),
            to: Some(bounded_text(
                &path_at(target, int(args[2]), args[3], false).path,
            )),
        },
        _ => return None,
    };
    Some(Traced::plain(action))
}

/// Whether call `nr`'s event (or its being one) rests on what the listener
/// read from the program's memory: paths, socket addresses, message
/// headers, argv. The others' arguments are registers, which the program
/// cannot change once the call is made.
pub(crate) fn reads_memory(nr: i64) -> bool {
    !matches!(
        nr,
        libc::SYS_socket
            | libc::SYS_clone
            | libc::SYS_fork
            | libc::SYS_vfork
            | libc::SYS_kill
            | libc::SYS_tkill
            | libc::SYS_tgkill
            | libc::SYS_rt_sigqueueinfo
            | libc::SYS_rt_tgsigqueueinfo
            | libc::SYS_pidfd_send_signal
            | libc::SYS_ptrace
            | libc::SYS_process_vm_readv
            | libc::SYS_process_vm_writev
    )
}

/// The kind of call `nr` when whether it is an event at all was decided on
/// the program's memory (an open is one when its path is sensitive; a
/// `sendmsg` when its header names a destination).
pub(crate) fn event_decided_by_memory(nr: i64) -> Option<ActionKind> {
    match nr {
        libc::SYS_open | libc::SYS_openat | libc::SYS_openat2 | libc::SYS_creat => {
            Some(ActionKind::FsOpen)
        }
        libc::SYS_sendmsg | libc::SYS_sendmmsg => Some(ActionKind::NetConnect),
        _ => None,
    }
}

/// A write onto `path` done without an open.
fn written(path: ResolvedPath) -> Traced {
    Traced {
        action: Action::FsOpen {
            path: bounded_text(&path.path),
            access: FileAccess::Write,
        },
        unresolved: !path.resolved,
        path: Some(path),
    }
}

fn unknown_connect() -> Action {
    Action::NetConnect {
        family: "unknown".into(),
        address: None,
        port: None,
    }
}

/// An exec of `path` with the argv array at `argv_address`.
fn exec(target: &dyn Target, path: ResolvedPath, argv_address: u64) -> Traced {
    let mut argv = Vec::new();
    if argv_address != 0
        && let Some(pointers) = target.read(argv_address, 8 * MAX_EVENT_ARGV)
    {
        for pointer in pointers.chunks_exact(8) {
            let pointer = u64::from_ne_bytes(pointer.try_into().unwrap_or([0; 8]));
            if pointer == 0 {
                break;
            }
            // One byte beyond the kept text, so that a longer one is cut.
            let argument = string(target, pointer, MAX_EVENT_TEXT + 4).unwrap_or_default();
            argv.push(bounded_text(&argument));
        }
    }
    Traced {
        action: Action::ProcExec {
            path: bounded_text(&path.path),
            argv,
        },
        unresolved: !path.resolved,
        path: Some(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Memory as a few strings and blobs at addresses.
    #[derive(Default)]
    struct Fake {
        memory: HashMap<u64, Vec<u8>>,
        cwd: Option<String>,
        fds: HashMap<i32, String>,
        links: HashMap<String, String>,
    }

    impl Fake {
        fn put(&mut self, address: u64, bytes: &[u8]) -> u64 {
            self.memory.insert(address, bytes.to_vec());
            address
        }
    }

    impl Target for Fake {
        fn read(&self, address: u64, len: usize) -> Option<Vec<u8>> {
            let bytes = self.memory.get(&address)?;
            Some(bytes[..len.min(bytes.len())].to_vec())
        }
        fn cwd(&self) -> Option<String> {
            self.cwd.clone()
        }
        fn fd_path(&self, fd: i32) -> Option<String> {
            self.fds.get(&fd).cloned()
        }
        fn exe(&self) -> Option<String> {
            None
        }
        fn read_link(&self, path: &str) -> Result<Option<String>, ()> {
            Ok(self.links.get(path).cloned())
        }
    }

    fn sensitive() -> Vec<PathPattern> {
        vec![PathPattern::new("/etc/shadow").unwrap()]
    }

    fn act(nr: i64, args: [u64; 6], target: &Fake) -> Option<Action> {
        action(nr, &args, target, &sensitive()).map(|traced| traced.action)
    }

    #[test]
    fn opens_are_events_when_they_write_or_read_a_sensitive_path() {
        let mut fake = Fake {
            cwd: Some("/tmp".into()),
            ..Fake::default()
        };
        fake.fds.insert(5, "/etc".into());
        let x = fake.put(0x10, b"x\0junk");
        let shadow = fake.put(0x20, b"shadow\0");
        let passwd = fake.put(0x30, b"/etc/passwd\0");
        let dotdot = fake.put(0x40, b"../etc/./shadow\0");
        let write = (libc::O_WRONLY | libc::O_CREAT) as u64;
        let at_cwd = AT_FDCWD as u64;
        assert_eq!(
            act(libc::SYS_openat, [at_cwd, x, write, 0, 0, 0], &fake),
            Some(Action::FsOpen {
                path: "/tmp/x".into(),
                access: FileAccess::Write
            })
        );
        // A read elsewhere is no event; of a sensitive path, by any route, is.
        assert_eq!(act(libc::SYS_open, [passwd, 0, 0, 0, 0, 0], &fake), None);
        assert_eq!(act(libc::SYS_openat, [at_cwd, x, 0, 0, 0, 0], &fake), None);
        let shadow_read = Some(Action::FsOpen {
            path: "/etc/shadow".into(),
            access: FileAccess::Read,
        });
        assert_eq!(
            act(libc::SYS_openat, [5, shadow, 0, 0, 0, 0], &fake),
            shadow_read
        );
        assert_eq!(
            act(libc::SYS_open, [dotdot, 0, 0, 0, 0, 0], &fake),
            shadow_read
        );
        assert_eq!(
            act(libc::SYS_creat, [x, 0o644, 0, 0, 0, 0], &fake),
            Some(Action::FsOpen {
                path: "/tmp/x".into(),
                access: FileAccess::Write
            })
        );
        // openat2: the flags are in memory.
        let how = fake.put(0x50, &(libc::O_TRUNC as u64).to_ne_bytes());
        assert_eq!(
            act(libc::SYS_openat2, [at_cwd, x, how, 24, 0, 0], &fake),
            Some(Action::FsOpen {
                path: "/tmp/x".into(),
                access: FileAccess::Write
            })
        );
        // A folder the listener cannot name: the path stays as given.
        assert_eq!(
            act(libc::SYS_openat, [9, x, write, 0, 0, 0], &fake),
            Some(Action::FsOpen {
                path: "x".into(),
                access: FileAccess::Write
            })
        );
        // An unreadable path: written to "" (the call fails with EFAULT).
        assert_eq!(
            act(libc::SYS_open, [0x999, write, 0, 0, 0, 0], &fake),
            Some(Action::FsOpen {
                path: String::new(),
                access: FileAccess::Write
            })
        );
    }

    #[test]
    fn network_process_and_file_calls_read_their_arguments() {
        let mut fake = Fake {
            cwd: Some("/sandbox".into()),
            ..Fake::default()
        };
        let mut inet = vec![2, 0, 0x01, 0xbb, 1, 1, 1, 1];
        inet.extend([0; 8]);
        let address = fake.put(0x100, &inet);
        assert_eq!(
            act(libc::SYS_connect, [3, address, 16, 0, 0, 0], &fake),
            Some(Action::NetConnect {
                family: "inet".into(),
                address: Some("1.1.1.1".into()),
                port: Some(443)
            })
        );
        assert!(matches!(
            act(libc::SYS_bind, [3, address, 16, 0, 0, 0], &fake),
            Some(Action::NetBind {
                port: Some(443),
                ..
            })
        ));
        assert_eq!(
            act(libc::SYS_socket, [17, 3 | 0o2000000, 0, 0, 0, 0], &fake),
            Some(Action::NetSocket {
                family: "family 17".into(),
                socket_type: "raw".into()
            })
        );
        let sh = fake.put(0x200, b"/bin/sh\0");
        let dash_c = fake.put(0x210, b"-c\0");
        let true_ = fake.put(0x220, b"true\0");
        let mut argv = Vec::new();
        for pointer in [sh, dash_c, true_, 0] {
            argv.extend(pointer.to_ne_bytes());
        }
        let argv = fake.put(0x300, &argv);
        assert_eq!(
            act(libc::SYS_execve, [sh, argv, 0, 0, 0, 0], &fake),
            Some(Action::ProcExec {
                path: "/bin/sh".into(),
                argv: vec!["/bin/sh".into(), "-c".into(), "true".into()]
            })
        );
        let thread = (libc::CLONE_VM | libc::CLONE_THREAD) as u64;
        assert_eq!(act(libc::SYS_clone, [thread, 0, 0, 0, 0, 0], &fake), None);
        assert_eq!(
            act(libc::SYS_clone, [17, 0, 0, 0, 0, 0], &fake),
            Some(Action::ProcSpawn {})
        );
        assert_eq!(
            act(libc::SYS_vfork, [0; 6], &fake),
            Some(Action::ProcSpawn {})
        );
        // Registers hold C ints: -1 stays -1.
        assert_eq!(
            act(libc::SYS_kill, [0xffff_ffff, 9, 0, 0, 0, 0], &fake),
            Some(Action::ProcSignal {
                target: -1,
                signal: 9
            })
        );
        assert_eq!(
            act(libc::SYS_tgkill, [7, 8, 15, 0, 0, 0], &fake),
            Some(Action::ProcSignal {
                target: 8,
                signal: 15
            })
        );
        assert_eq!(
            act(libc::SYS_ptrace, [16, 1, 0, 0, 0, 0], &fake),
            Some(Action::ProcPtrace {
                request: 16,
                target: 1
            })
        );
        let old = fake.put(0x400, b"a\0");
        let new = fake.put(0x410, b"/tmp/b\0");
        assert_eq!(
            act(libc::SYS_rename, [old, new, 0, 0, 0, 0], &fake),
            Some(Action::FsRename {
                from: Some("/sandbox/a".into()),
                to: Some("/tmp/b".into())
            })
        );
        assert_eq!(
            act(
                libc::SYS_unlinkat,
                [AT_FDCWD as u64, old, 0, 0, 0, 0],
                &fake
            ),
            Some(Action::FsUnlink {
                path: Some("/sandbox/a".into())
            })
        );
        assert_eq!(act(libc::SYS_read, [0; 6], &fake), None);
    }

    #[test]
    fn sends_that_connect_other_signals_and_aliases_are_events() {
        let mut fake = Fake {
            cwd: Some("/sandbox".into()),
            ..Fake::default()
        };
        let mut inet = vec![2, 0, 0, 9, 127, 0, 0, 1];
        inet.extend([0; 8]);
        let address = fake.put(0x100, &inet);
        let to_9 = Some(Action::NetConnect {
            family: "inet".into(),
            address: Some("127.0.0.1".into()),
            port: Some(9),
        });
        // sendto: with a destination, or MSG_FASTOPEN; not on a connected socket.
        assert_eq!(
            act(libc::SYS_sendto, [3, 0, 1, 0, address, 16], &fake),
            to_9
        );
        let fastopen = MSG_FASTOPEN;
        assert_eq!(
            act(libc::SYS_sendto, [3, 0, 1, fastopen, address, 16], &fake),
            to_9
        );
        assert_eq!(act(libc::SYS_sendto, [3, 0, 1, 0, 0, 0], &fake), None);
        // sendmsg: the msghdr's name; sendmmsg: any message's.
        let mut header = address.to_ne_bytes().to_vec();
        header.extend(16u64.to_ne_bytes());
        let named = fake.put(0x200, &header);
        let mut unnamed = 0u64.to_ne_bytes().to_vec();
        unnamed.extend(0u64.to_ne_bytes());
        let unnamed = fake.put(0x300, &unnamed);
        assert_eq!(act(libc::SYS_sendmsg, [3, named, 0, 0, 0, 0], &fake), to_9);
        assert_eq!(
            act(libc::SYS_sendmsg, [3, unnamed, 0, 0, 0, 0], &fake),
            None
        );
        let mut messages = vec![0u8; 64];
        messages.extend(header.iter().copied());
        let mut headers = Fake {
            cwd: fake.cwd.clone(),
            ..Fake::default()
        };
        headers.put(0x100, &inet);
        // Two mmsghdrs: the first unnamed, the second to 127.0.0.1:9.
        headers.put(0x400, &[0u8; 16]);
        headers.put(0x440, &header);
        assert_eq!(
            act(libc::SYS_sendmmsg, [3, 0x400, 2, 0, 0, 0], &headers),
            to_9
        );
        // An unreadable header may name anything: unknown, not absent.
        let unreadable = action(
            libc::SYS_sendmsg,
            &[3, 0x999, 0, 0, 0, 0],
            &fake,
            &sensitive(),
        );
        assert!(unreadable.is_some_and(|traced| traced.unresolved));
        // The other signalling calls.
        assert_eq!(
            act(libc::SYS_rt_sigqueueinfo, [7, 10, 0x10, 0, 0, 0], &fake),
            Some(Action::ProcSignal {
                target: 7,
                signal: 10
            })
        );
        assert_eq!(
            act(libc::SYS_rt_tgsigqueueinfo, [7, 8, 10, 0x10, 0, 0], &fake),
            Some(Action::ProcSignal {
                target: 8,
                signal: 10
            })
        );
        let pidfd = action(
            libc::SYS_pidfd_send_signal,
            &[4, 9, 0, 0, 0, 0],
            &fake,
            &sensitive(),
        );
        assert!(pidfd.is_some_and(|traced| traced.unresolved
            && matches!(traced.action, Action::ProcSignal { signal: 9, .. })));
        // A symlink in the process's filesystem: the object, spelled beside it.
        fake.links.insert("/tmp/e".into(), "/etc".into());
        let through = fake.put(0x500, b"/tmp/e/shadow\0");
        let traced = action(
            libc::SYS_open,
            &[through, 0, 0, 0, 0, 0],
            &fake,
            &sensitive(),
        )
        .expect("a sensitive read");
        assert_eq!(
            traced.action,
            Action::FsOpen {
                path: "/etc/shadow".into(),
                access: FileAccess::Read
            }
        );
        assert_eq!(
            traced.path.map(|path| path.spelled),
            Some("/tmp/e/shadow".into())
        );
        // Writes onto a path without an open are writes: the new name, or
        // the truncated file.
        let name = fake.put(0x600, b"planted\0");
        let write = |path: &str| {
            Some(Action::FsOpen {
                path: path.into(),
                access: FileAccess::Write,
            })
        };
        let at_cwd = AT_FDCWD as u64;
        let planted = write("/sandbox/planted");
        assert_eq!(
            act(libc::SYS_symlink, [0x500, name, 0, 0, 0, 0], &fake),
            planted
        );
        let linkat = [at_cwd, 0x500, at_cwd, name, 0, 0];
        assert_eq!(act(libc::SYS_linkat, linkat, &fake), planted);
        let mknodat = [at_cwd, name, 0o100644, 0, 0, 0];
        assert_eq!(act(libc::SYS_mknodat, mknodat, &fake), planted);
        let truncate = [through, 0, 0, 0, 0, 0];
        assert_eq!(
            act(libc::SYS_truncate, truncate, &fake),
            write("/etc/shadow")
        );
    }
}
