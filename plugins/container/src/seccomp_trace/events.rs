//! Turns a notified call (its number, registers, and what its arguments
//! point to in the program's memory) into a behaviour action, with the
//! rules of the gVisor reader: which opens count (writes, or any open of a
//! sensitive path), paths resolved against the working directory or the
//! folder a descriptor names, a thread is not a spawn.

use progscore_sandbox::behaviour::{
    Action, FileAccess, MAX_EVENT_ARGV, MAX_EVENT_TEXT, PathPattern, bounded_text,
};

use crate::gvisor_trace::reader::{
    AT_FDCWD, CLONE_THREAD, O_WRITES, resolve, socket_address, socket_family, socket_type,
};

/// The longest path the kernel takes (`PATH_MAX`, with its NUL).
const PATH_MAX: usize = 4096;

/// The longest socket address read.
const SOCKADDR_MAX: usize = 128;

const AT_EMPTY_PATH: u64 = 0x1000;

/// The process a call came from, as the listener reads it.
pub(crate) trait Target {
    /// Up to `len` bytes at `address`: fewer where the memory ends, `None`
    /// when nothing there can be read.
    fn read(&self, address: u64, len: usize) -> Option<Vec<u8>>;
    /// The process's working directory.
    fn cwd(&self) -> Option<String>;
    /// The path descriptor `fd` names in the process.
    fn fd_path(&self, fd: i32) -> Option<String>;
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

/// The absolute path `address` names relative to `dirfd`, resolved as the
/// gVisor reader does; empty when unreadable (the call fails with EFAULT).
fn path_at(target: &dyn Target, dirfd: i64, address: u64) -> String {
    let Some(pathname) = string(target, address, PATH_MAX) else {
        return String::new();
    };
    if pathname.starts_with('/') || pathname.is_empty() {
        return resolve(&pathname, dirfd, "", "");
    }
    let (fd_path, cwd) = if dirfd == AT_FDCWD {
        (String::new(), target.cwd().unwrap_or_default())
    } else if dirfd >= 0 {
        (
            target.fd_path(dirfd as i32).unwrap_or_default(),
            String::new(),
        )
    } else {
        (String::new(), String::new())
    };
    resolve(&pathname, dirfd, &fd_path, &cwd)
}

/// The action call `nr` (amd64) with these registers is, or `None` when it
/// is no event (a thread, a read of a path that is not sensitive, a call
/// not traced).
pub(crate) fn action(
    nr: i64,
    args: &[u64; 6],
    target: &dyn Target,
    sensitive: &[PathPattern],
) -> Option<Action> {
    let open = |dirfd: i64, address: u64, flags: u64, creat: bool| {
        let access = if creat || flags & u64::from(O_WRITES) != 0 {
            FileAccess::Write
        } else {
            FileAccess::Read
        };
        let path = path_at(target, dirfd, address);
        if access == FileAccess::Read && !sensitive.iter().any(|pattern| pattern.matches(&path)) {
            return None;
        }
        Some(Action::FsOpen {
            path: bounded_text(&path),
            access,
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
    let action = match nr {
        libc::SYS_connect => {
            let (family, address, port) = sockaddr(args[1], args[2]);
            Action::NetConnect {
                family,
                address,
                port,
            }
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
        libc::SYS_execve => exec(target, path_at(target, AT_FDCWD, args[0]), args[1]),
        libc::SYS_execveat => {
            let dirfd = int(args[0]);
            let pathname = string(target, args[1], PATH_MAX).unwrap_or_default();
            let path = if pathname.is_empty() && args[4] & AT_EMPTY_PATH != 0 {
                // fexecve: the program is the descriptor itself.
                target.fd_path(dirfd as i32).unwrap_or_default()
            } else {
                path_at(target, dirfd, args[1])
            };
            exec(target, path, args[2])
        }
        libc::SYS_open => return open(AT_FDCWD, args[0], args[1], false),
        libc::SYS_creat => return open(AT_FDCWD, args[0], 0, true),
        libc::SYS_openat => return open(int(args[0]), args[1], args[2], false),
        libc::SYS_openat2 => {
            // struct open_how begins with its u64 flags.
            let flags = target
                .read(args[2], 8)
                .and_then(|bytes| <[u8; 8]>::try_from(bytes.as_slice()).ok())
                .map(u64::from_ne_bytes)
                .unwrap_or(0);
            return open(int(args[0]), args[1], flags, false);
        }
        // A new thread is not a new process.
        libc::SYS_clone if args[0] & CLONE_THREAD != 0 => return None,
        libc::SYS_clone | libc::SYS_fork | libc::SYS_vfork => Action::ProcSpawn {},
        libc::SYS_kill | libc::SYS_tkill => Action::ProcSignal {
            target: int(args[0]),
            signal: int(args[1]),
        },
        libc::SYS_tgkill => Action::ProcSignal {
            target: int(args[1]),
            signal: int(args[2]),
        },
        libc::SYS_ptrace => Action::ProcPtrace {
            request: args[0] as i64,
            target: int(args[1]),
        },
        libc::SYS_unlink => Action::FsUnlink {
            path: Some(bounded_text(&path_at(target, AT_FDCWD, args[0]))),
        },
        libc::SYS_unlinkat => Action::FsUnlink {
            path: Some(bounded_text(&path_at(target, int(args[0]), args[1]))),
        },
        libc::SYS_rename => Action::FsRename {
            from: Some(bounded_text(&path_at(target, AT_FDCWD, args[0]))),
            to: Some(bounded_text(&path_at(target, AT_FDCWD, args[1]))),
        },
        libc::SYS_renameat | libc::SYS_renameat2 => Action::FsRename {
            from: Some(bounded_text(&path_at(target, int(args[0]), args[1]))),
            to: Some(bounded_text(&path_at(target, int(args[2]), args[3]))),
        },
        _ => return None,
    };
    Some(action)
}

/// An exec of `path` with the argv array at `argv_address`.
fn exec(target: &dyn Target, path: String, argv_address: u64) -> Action {
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
    Action::ProcExec {
        path: bounded_text(&path),
        argv,
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
    }

    fn sensitive() -> Vec<PathPattern> {
        vec![PathPattern::new("/etc/shadow").unwrap()]
    }

    fn act(nr: i64, args: [u64; 6], target: &Fake) -> Option<Action> {
        action(nr, &args, target, &sensitive())
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
}
