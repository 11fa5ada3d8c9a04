//! Opens done by the listener for the program, on arguments it can no
//! longer change.
//!
//! For `open`, `openat`, `openat2` and `creat`, the listener copies the
//! path once, resolves it to the object's path `P` in the program's root
//! (its working folder, the folder a descriptor names, every symlink,
//! `..`: [`crate::resolve`]), opens exactly `P` itself and hands the
//! descriptor back (`SECCOMP_IOCTL_NOTIF_ADDFD` with
//! `SECCOMP_ADDFD_FLAG_SEND`), or the errno the open failed with. The
//! event's path is `P`: the program's other threads can change its memory,
//! not what the listener opened.
//!
//! The open cannot reach anything the program could not reach itself:
//! - `P` is opened with `openat2` from the program's root
//!   (`/proc/TID/root` as the folder), `RESOLVE_IN_ROOT` and
//!   `RESOLVE_NO_SYMLINKS` (and so no magic links): nothing of the host,
//!   no symlink the listener did not resolve inside the root, and a
//!   symlink made since makes the open fail (`ELOOP`: left to the kernel).
//! - On the listener's thread, during the open, with the calling thread's
//!   credentials (`/proc/TID/status`): its fs uid and gid and groups, and
//!   no capability it lacks (the effective set is the program's; fsuid
//!   from 0 drops the fs capabilities too), its umask. The descriptor keeps
//!   these credentials (`f_cred`), so no later check on it finds root's.
//! - Only regular files, folders and the memory devices every runc
//!   container has (`/dev/null`, `zero`, `full`, `random`, `urandom`):
//!   anything else (a FIFO that would block the listener, a device the
//!   container's device cgroup, which does not hold the listener, may
//!   deny) is checked before the open and again after it, and is left to
//!   the kernel. Nothing under `/proc` or `/sys` (objects that depend on
//!   who opens them; AppArmor's container profile denies only there) and no
//!   path through `/proc/<pid>` or `/dev/fd` whose object the resolver
//!   cannot name: left to the kernel.
//! - The kernel's own walk of the spelled path (`O_PATH`, no side effect,
//!   with the program's credentials) must reach the same object as `P`, or
//!   fail the same way: otherwise (a component that is not a folder before
//!   `..`, a folder the program cannot search on a symlink's way, a race)
//!   the call is left to the kernel.
//!
//! A call left to the kernel is answered "continue" as before, and its
//! event is marked unverified.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use progscore_sandbox::behaviour::{Action, FileAccess, PathPattern, bounded_text};

use crate::gvisor_trace::reader::{AT_FDCWD, O_WRITES, sensitive};
use crate::resolve::{ResolvedPath, TaskView, names_a_path, resolve_path};

/// `struct open_how` (openat2(2)); the libc crate does not have it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct OpenHow {
    pub flags: u64,
    pub mode: u64,
    pub resolve: u64,
}

/// openat2's `RESOLVE_*` flags (linux/openat2.h; not in the libc crate).
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_IN_ROOT: u64 = 0x10;

/// The kernel's `VALID_OPEN_FLAGS` and `O_PATH_FLAGS` (x86_64), which
/// `open` and `openat` apply to their flags before opening (`build_open_how`).
const VALID_OPEN_FLAGS: u64 = (libc::O_RDONLY
    | libc::O_WRONLY
    | libc::O_RDWR
    | libc::O_CREAT
    | libc::O_EXCL
    | libc::O_NOCTTY
    | libc::O_TRUNC
    | libc::O_APPEND
    | libc::O_NONBLOCK
    | libc::O_SYNC
    | libc::O_DSYNC
    | libc::O_ASYNC
    | libc::O_DIRECT
    | libc::O_LARGEFILE
    | libc::O_DIRECTORY
    | libc::O_NOFOLLOW
    | libc::O_NOATIME
    | libc::O_CLOEXEC
    | libc::O_PATH
    | libc::O_TMPFILE) as u64;
const O_PATH_FLAGS: u64 =
    (libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_PATH | libc::O_CLOEXEC) as u64;
const O_CREAT: u64 = libc::O_CREAT as u64;
const O_EXCL: u64 = libc::O_EXCL as u64;
const O_TMPFILE: u64 = libc::O_TMPFILE as u64;
const O_NOFOLLOW: u64 = libc::O_NOFOLLOW as u64;
const O_NONBLOCK: u64 = libc::O_NONBLOCK as u64;
const O_CLOEXEC: u64 = libc::O_CLOEXEC as u64;
const O_PATH: u64 = libc::O_PATH as u64;

/// The longest path the kernel takes (`PATH_MAX`, with its NUL).
const PATH_MAX: usize = 4096;

/// An open call's arguments, as the kernel would take them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpenCall {
    pub dirfd: i64,
    pub path: Vec<u8>,
    pub how: OpenHow,
}

/// Why a call is left to the kernel.
pub(crate) type LeftToKernel = &'static str;

/// The open call `nr` with these registers, its memory read once through
/// `read`; `Err` when it is one the listener leaves to the kernel.
pub(crate) fn decode(
    nr: i64,
    args: &[u64; 6],
    read: &dyn Fn(u64, usize) -> Option<Vec<u8>>,
) -> Result<OpenCall, LeftToKernel> {
    // open and openat take int flags and a mode, cleaned as the kernel does.
    let legacy = |flags: u64, mode: u64| {
        let mut flags = u64::from(flags as u32) & VALID_OPEN_FLAGS | libc::O_LARGEFILE as u64;
        if flags & O_PATH != 0 {
            flags &= O_PATH_FLAGS;
        }
        let creates = flags & O_CREAT != 0 || flags & O_TMPFILE == O_TMPFILE;
        OpenHow {
            flags,
            mode: if creates { mode & 0o7777 } else { 0 },
            resolve: 0,
        }
    };
    let (dirfd, address, how) = match nr {
        libc::SYS_open => (AT_FDCWD, args[0], legacy(args[1], args[2])),
        libc::SYS_creat => (
            AT_FDCWD,
            args[0],
            legacy(
                (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64,
                args[1],
            ),
        ),
        libc::SYS_openat => (i64::from(args[0] as i32), args[1], legacy(args[2], args[3])),
        libc::SYS_openat2 => {
            // A larger struct (a newer kernel's fields) or resolve flags
            // of the program's own: the kernel's to check.
            if args[3] != std::mem::size_of::<OpenHow>() as u64 {
                return Err("openat2 with another open_how size");
            }
            let bytes = read(args[2], 24).filter(|bytes| bytes.len() == 24);
            let Some(bytes) = bytes else {
                return Err("openat2's open_how cannot be read");
            };
            let word =
                |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
            let how = OpenHow {
                flags: word(0),
                mode: word(8),
                resolve: word(16),
            };
            if how.resolve != 0 {
                return Err("openat2 with resolve flags");
            }
            (i64::from(args[0] as i32), args[1], how)
        }
        _ => return Err("not an open"),
    };
    let path = c_string(read, address).ok_or("the path cannot be read whole")?;
    Ok(OpenCall { dirfd, path, how })
}

/// The NUL-terminated bytes at `address` (without the NUL), if all of
/// them can be read within `PATH_MAX`.
fn c_string(read: &dyn Fn(u64, usize) -> Option<Vec<u8>>, address: u64) -> Option<Vec<u8>> {
    if address == 0 {
        return None;
    }
    let bytes = read(address, PATH_MAX)?;
    let end = bytes.iter().position(|&byte| byte == 0)?;
    Some(bytes[..end].to_vec())
}

/// What the listener did with an open call.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Opened (the descriptor to hand back) or failed with this errno:
    /// `P`, and whether the call is an event.
    Done {
        result: Result<OwnedFd, i32>,
        path: ResolvedPath,
        access: FileAccess,
        event: bool,
    },
    /// Left to the kernel (continue), for this reason.
    Kernel(LeftToKernel),
}

/// The calling thread as the open needs it: its `/proc` folder (the task,
/// held), its root, its credentials.
pub(crate) struct Caller {
    proc_dir: OwnedFd,
    root: OwnedFd,
    credentials: Credentials,
}

impl Caller {
    /// Opens `/proc/TID` and its root and reads its credentials. The
    /// caller checks that the notification is still valid afterwards (the
    /// TID was not reused).
    pub(crate) fn open(tid: i32) -> Result<Caller, LeftToKernel> {
        let proc_dir = open_at(
            libc::AT_FDCWD,
            &format!("/proc/{tid}"),
            libc::O_PATH | libc::O_DIRECTORY,
        )
        .map_err(|_| "the caller's /proc folder cannot be opened")?;
        let root = open_at(
            proc_dir.as_raw_fd(),
            "root",
            libc::O_PATH | libc::O_DIRECTORY,
        )
        .map_err(|_| "the caller's root cannot be opened")?;
        let status = open_at(proc_dir.as_raw_fd(), "status", libc::O_RDONLY)
            .ok()
            .and_then(|fd| std::io::read_to_string(std::fs::File::from(fd)).ok())
            .ok_or("the caller's status cannot be read")?;
        let credentials = Credentials::parse(&status).ok_or("the caller's status is not read")?;
        // Capabilities in another user namespace are not the host's.
        let user_ns = |dir: RawFd, path: &str| read_link_at(dir, path).ok();
        let own = user_ns(libc::AT_FDCWD, "/proc/thread-self/ns/user");
        if own.is_none() || user_ns(proc_dir.as_raw_fd(), "ns/user") != own {
            return Err("the caller is in another user namespace");
        }
        Ok(Caller {
            proc_dir,
            root,
            credentials,
        })
    }
}

impl TaskView for Caller {
    fn cwd(&self) -> Option<String> {
        read_link_at(self.proc_dir.as_raw_fd(), "cwd").ok()
    }
    fn fd_path(&self, fd: i64) -> Option<String> {
        read_link_at(self.proc_dir.as_raw_fd(), &format!("fd/{fd}")).ok()
    }
    fn exe(&self) -> Option<String> {
        read_link_at(self.proc_dir.as_raw_fd(), "exe").ok()
    }
    /// Through the root descriptor, following nothing: a name that became
    /// a symlink since the walk passed it fails (unknown), never leads the
    /// host elsewhere.
    fn read_link(&self, path: &str) -> Result<Option<String>, ()> {
        let how = OpenHow {
            flags: (libc::O_PATH | libc::O_NOFOLLOW) as u64,
            mode: 0,
            resolve: RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS,
        };
        let fd = match openat2(self.root.as_raw_fd(), path.as_bytes(), &how) {
            Ok(fd) => fd,
            Err(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) => {
                return Ok(None);
            }
            Err(_) => return Err(()),
        };
        if !file_type(&fd).is_ok_and(|mode| mode == libc::S_IFLNK) {
            return Ok(None);
        }
        read_link_at(fd.as_raw_fd(), "").map(Some).map_err(|_| ())
    }
}

/// Resolves, checks and performs the open `call` as `caller` would.
/// `Err` is a fault of the listener (its own credentials could not be
/// restored): the run cannot go on.
pub(crate) fn perform(
    caller: &Caller,
    call: &OpenCall,
    sensitive_paths: &[PathPattern],
) -> Result<Outcome, String> {
    let Ok(spelled) = std::str::from_utf8(&call.path) else {
        return Ok(Outcome::Kernel("a path that is not UTF-8"));
    };
    let flags = call.how.flags;
    // O_CREAT | O_EXCL does not follow a last symlink, as O_NOFOLLOW.
    let follow_last = flags & O_NOFOLLOW == 0 && flags & (O_CREAT | O_EXCL) != O_CREAT | O_EXCL;
    let path = resolve_path(caller, call.dirfd, spelled, follow_last);
    if !path.resolved {
        return Ok(Outcome::Kernel("the path's object is unknown"));
    }
    if path.path.contains('\u{FFFD}') {
        return Ok(Outcome::Kernel("a symlink on the way is not UTF-8"));
    }
    let under = |root: &str| path.path == root || path.path.starts_with(&format!("{root}/"));
    if under("/proc") || under("/sys") {
        return Ok(Outcome::Kernel("a path under /proc or /sys"));
    }
    if flags & O_PATH != 0 {
        // ADDFD takes no O_PATH descriptor (fget refuses them).
        return Ok(Outcome::Kernel(
            "an O_PATH open, whose descriptor cannot be handed over",
        ));
    }
    if spelled.is_empty() {
        // ENOENT, as the kernel says of an empty path (no AT_EMPTY_PATH).
        return Ok(done(Err(libc::ENOENT), path, flags, sensitive_paths));
    }
    // The same object the kernel would name, by its own walk (a trailing
    // slash kept: it asks for a folder).
    let object = if spelled.ends_with('/') && !path.path.ends_with('/') {
        format!("{}/", path.path)
    } else {
        path.path.clone()
    };
    let absolute_spelled = if spelled.starts_with('/') {
        Some(spelled.to_string())
    } else {
        let base = if call.dirfd == AT_FDCWD {
            caller.cwd()
        } else {
            caller.fd_path(call.dirfd)
        };
        base.filter(|base| names_a_path(base))
            .map(|base| format!("{}/{spelled}", base.trim_end_matches('/')))
    };
    let switched = Switched::to(&caller.credentials)
        .map_err(|error| format!("the listener could not take the program's credentials: {error}"));
    let switched = match switched {
        Ok(switched) => switched,
        // Not restored fully: a fault. Taken partly and put back: the kernel's.
        Err(fault) if fault.contains("restore") => return Err(fault),
        Err(_) => return Ok(Outcome::Kernel("the program's credentials cannot be taken")),
    };
    let outcome = open_as_caller(caller, call, &object, absolute_spelled.as_deref(), &path);
    switched
        .restore()
        .map_err(|error| format!("the listener could not restore its credentials: {error}"))?;
    Ok(match outcome {
        Ok(result) => done(result, path, flags, sensitive_paths),
        Err(why) => Outcome::Kernel(why),
    })
}

fn done(
    result: Result<OwnedFd, i32>,
    path: ResolvedPath,
    flags: u64,
    sensitive_paths: &[PathPattern],
) -> Outcome {
    let access = if flags & u64::from(O_WRITES) != 0 {
        FileAccess::Write
    } else {
        FileAccess::Read
    };
    let event = access == FileAccess::Write || sensitive(sensitive_paths, &path);
    Outcome::Done {
        result,
        path,
        access,
        event,
    }
}

/// The action of a performed open.
pub(crate) fn action(path: &ResolvedPath, access: FileAccess) -> Action {
    Action::FsOpen {
        path: bounded_text(&path.path),
        access,
    }
}

/// With the program's credentials taken: the checks, then the open of
/// `object`.
fn open_as_caller(
    caller: &Caller,
    call: &OpenCall,
    object: &str,
    absolute_spelled: Option<&str>,
    path: &ResolvedPath,
) -> Result<Result<OwnedFd, i32>, LeftToKernel> {
    let root = caller.root.as_raw_fd();
    let nofollow =
        call.how.flags & O_NOFOLLOW != 0 || call.how.flags & (O_CREAT | O_EXCL) == O_CREAT | O_EXCL;
    let locate = |name: &str, resolve: u64| {
        let how = OpenHow {
            flags: O_PATH | if nofollow { O_NOFOLLOW } else { 0 },
            mode: 0,
            resolve: RESOLVE_IN_ROOT | resolve,
        };
        openat2(root, name.as_bytes(), &how)
    };
    let at_object = locate(object, RESOLVE_NO_SYMLINKS);
    // The kernel's own walk of the spelled path (magic links aside, which
    // the resolver followed and a scoped walk refuses).
    if !path.through_proc {
        let Some(spelled) = absolute_spelled else {
            return Err("the folder of a relative path is unknown");
        };
        let by_kernel = locate(spelled, RESOLVE_NO_MAGICLINKS);
        let same = match (&at_object, &by_kernel) {
            (Ok(a), Ok(b)) => identity(a).is_some() && identity(a) == identity(b),
            (Err(a), Err(b)) => a == b,
            _ => false,
        };
        if !same {
            return Err("the kernel's walk of the path reaches another object");
        }
    }
    if let Ok(found) = &at_object
        && !openable(found)
    {
        return Err("not a regular file, folder or memory device");
    }
    // A missing object is created only where the kernel would create it:
    // the same folder by both walks.
    if at_object.is_err() && call.how.flags & O_CREAT != 0 && !path.through_proc {
        let parent = |name: &str, resolve: u64| {
            let trimmed = name.trim_end_matches('/');
            let folder = match trimmed.rfind('/') {
                Some(0) | None => "/",
                Some(at) => &trimmed[..at],
            };
            let how = OpenHow {
                flags: (libc::O_PATH | libc::O_DIRECTORY) as u64,
                mode: 0,
                resolve: RESOLVE_IN_ROOT | resolve,
            };
            openat2(root, folder.as_bytes(), &how)
        };
        let kernel_parent = absolute_spelled.map(|spelled| parent(spelled, RESOLVE_NO_MAGICLINKS));
        let object_parent = parent(object, RESOLVE_NO_SYMLINKS);
        let same = match (&object_parent, &kernel_parent) {
            (Ok(a), Some(Ok(b))) => identity(a).is_some() && identity(a) == identity(b),
            (Err(a), Some(Err(b))) => a == b,
            _ => false,
        };
        if !same {
            return Err("a created object's folder differs from the kernel's");
        }
    }
    // Never blocking the listener (a FIFO, a lease), never making a
    // terminal the host's, never leaking the descriptor to a child of ours.
    let asked_nonblock = call.how.flags & O_NONBLOCK != 0;
    // O_PATH takes no other flags (openat2 refuses them) and opens nothing.
    let ours = if call.how.flags & O_PATH != 0 {
        O_CLOEXEC
    } else {
        O_NONBLOCK | libc::O_NOCTTY as u64 | O_CLOEXEC
    };
    let how = OpenHow {
        flags: call.how.flags | ours,
        mode: call.how.mode,
        resolve: RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS,
    };
    match openat2(root, object.as_bytes(), &how) {
        Ok(fd) => {
            if !openable(&fd) {
                return Err("the object opened is not a regular file, folder or memory device");
            }
            if !asked_nonblock && call.how.flags & O_PATH == 0 {
                // SAFETY: fcntl on a descriptor we own.
                let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
                if flags < 0
                    // SAFETY: as above.
                    || unsafe {
                        libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK)
                    } < 0
                {
                    return Err("the descriptor's O_NONBLOCK cannot be cleared");
                }
            }
            Ok(Ok(fd))
        }
        // A symlink made since the walk, a scoped walk's refusal, or what
        // O_NONBLOCK (ours) changed: the kernel's.
        Err(libc::ELOOP | libc::EXDEV | libc::EAGAIN | libc::ENXIO) => {
            Err("the open met what only the kernel can answer")
        }
        Err(errno) => Ok(Err(errno)),
    }
}

/// Regular files, folders, symlinks opened `O_PATH`, and the memory
/// devices of every container (1:3 null, 1:5 zero, 1:7 full, 1:8 random,
/// 1:9 urandom).
fn openable(fd: &OwnedFd) -> bool {
    let Some(stat) = fstat(fd) else {
        return false;
    };
    match stat.st_mode & libc::S_IFMT {
        libc::S_IFREG | libc::S_IFDIR | libc::S_IFLNK => true,
        libc::S_IFCHR => {
            libc::major(stat.st_rdev) == 1 && matches!(libc::minor(stat.st_rdev), 3 | 5 | 7 | 8 | 9)
        }
        _ => false,
    }
}

fn fstat(fd: &OwnedFd) -> Option<libc::stat> {
    // SAFETY: a zeroed stat is valid; fstat fills it.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat on a descriptor we own into a stat we own.
    (unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } == 0).then_some(stat)
}

fn identity(fd: &OwnedFd) -> Option<(u64, u64)> {
    fstat(fd).map(|stat| (stat.st_dev, stat.st_ino))
}

fn file_type(fd: &OwnedFd) -> Result<u32, ()> {
    fstat(fd).map(|stat| stat.st_mode & libc::S_IFMT).ok_or(())
}

/// Hands `fd` to the notification's caller as the call's result. `Ok` with
/// the caller's descriptor number, or the errno (`ENOENT`: the call is
/// gone; another: the call still waits for an answer).
pub(crate) fn hand_back(notify: RawFd, id: u64, fd: &OwnedFd, cloexec: bool) -> Result<i32, i32> {
    let mut addfd = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: fd.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: ADDFD reads a seccomp_notif_addfd we own.
    let installed = unsafe { libc::ioctl(notify, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &mut addfd) };
    if installed < 0 {
        return Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    Ok(installed)
}

/// Whether the program asked for `O_CLOEXEC` (the descriptor's flag, given
/// with ADDFD: the file itself is opened close-on-exec on our side).
pub(crate) fn cloexec(call: &OpenCall) -> bool {
    call.how.flags & O_CLOEXEC != 0
}

/// A thread's credentials, as `/proc/TID/status` says them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Credentials {
    pub fsuid: u32,
    pub fsgid: u32,
    pub groups: Vec<u32>,
    pub effective: u64,
    pub umask: u32,
}

impl Credentials {
    pub(crate) fn parse(status: &str) -> Option<Credentials> {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        // Real, effective, saved, fs: the fs ids are what the kernel checks.
        let fs_id = |name: &str| field(name)?.split_whitespace().nth(3)?.parse().ok();
        Some(Credentials {
            fsuid: fs_id("Uid")?,
            fsgid: fs_id("Gid")?,
            groups: field("Groups")?
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?,
            effective: u64::from_str_radix(field("CapEff")?, 16).ok()?,
            umask: u32::from_str_radix(field("Umask")?, 8).ok()?,
        })
    }
}

/// `struct __user_cap_header_struct` and `__user_cap_data_struct`
/// (linux/capability.h; not in the libc crate), version 3: two data words.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

fn capget() -> io::Result<[CapData; 2]> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget fills two data structs we own.
    check(unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) })?;
    Ok(data)
}

fn capset(data: &[CapData; 2]) -> io::Result<()> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    // SAFETY: capset reads two data structs we own; pid 0 is this thread.
    check(unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) }).map(|_| ())
}

fn check(result: libc::c_long) -> io::Result<libc::c_long> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// This thread's groups (raw syscall: glibc's setgroups would change every
/// thread of the process).
fn groups() -> io::Result<Vec<u32>> {
    // SAFETY: a count query.
    let count =
        check(unsafe { libc::syscall(libc::SYS_getgroups, 0, std::ptr::null_mut::<u32>()) })?;
    let mut groups = vec![0u32; count as usize];
    // SAFETY: fills `count` gids into our buffer.
    let count = check(unsafe { libc::syscall(libc::SYS_getgroups, count, groups.as_mut_ptr()) })?;
    groups.truncate(count as usize);
    Ok(groups)
}

fn set_groups(groups: &[u32]) -> io::Result<()> {
    // SAFETY: reads `len` gids from our slice; affects this thread only.
    check(unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) }).map(|_| ())
}

/// setfsuid/setfsgid return the previous id and never fail visibly: the
/// id is checked by asking again (with -1, which changes nothing).
fn set_fs_id(call: libc::c_long, id: u32) -> io::Result<()> {
    // SAFETY: per-thread id changes.
    unsafe { libc::syscall(call, id) };
    // SAFETY: as above; -1 is never valid, so it only reports.
    let now = unsafe { libc::syscall(call, u32::MAX) } as u32;
    if now == id {
        Ok(())
    } else {
        Err(io::Error::other(format!("the fs id is {now}, not {id}")))
    }
}

/// The listener thread under the program's credentials until restored.
struct Switched {
    capabilities: [CapData; 2],
    groups: Vec<u32>,
    fsuid: u32,
    fsgid: u32,
    umask: u32,
}

impl Switched {
    /// Takes `credentials` on this thread; an error says whether what was
    /// taken could be put back (else it contains "restore").
    fn to(credentials: &Credentials) -> Result<Switched, String> {
        let capabilities = capget().map_err(|error| error.to_string())?;
        let groups = groups().map_err(|error| error.to_string())?;
        // SAFETY: -1 only reports the current fs ids.
        let fsuid = unsafe { libc::syscall(libc::SYS_setfsuid, u32::MAX) } as u32;
        // SAFETY: as above.
        let fsgid = unsafe { libc::syscall(libc::SYS_setfsgid, u32::MAX) } as u32;
        // SAFETY: umask only swaps this thread's mask (CLONE_FS unshared).
        let umask = unsafe { libc::umask(credentials.umask as libc::mode_t) } as u32;
        let switched = Switched {
            capabilities,
            groups,
            fsuid,
            fsgid,
            umask,
        };
        let effective = credentials.effective;
        let taken = set_groups(&credentials.groups)
            .and_then(|()| set_fs_id(libc::SYS_setfsgid, credentials.fsgid))
            .and_then(|()| set_fs_id(libc::SYS_setfsuid, credentials.fsuid))
            .and_then(|()| {
                // The program's effective set, within what we may hold.
                let mut lowered = capabilities;
                lowered[0].effective = (effective as u32) & capabilities[0].permitted;
                lowered[1].effective = ((effective >> 32) as u32) & capabilities[1].permitted;
                capset(&lowered)
            });
        match taken {
            Ok(()) => Ok(switched),
            Err(error) => match switched.restore() {
                Ok(()) => Err(error.to_string()),
                Err(fault) => Err(format!("{error}; could not restore: {fault}")),
            },
        }
    }

    /// Puts the listener's own credentials back.
    fn restore(self) -> io::Result<()> {
        // Capabilities first: setting the ids back needs them.
        capset(&self.capabilities)?;
        set_fs_id(libc::SYS_setfsuid, self.fsuid)?;
        set_fs_id(libc::SYS_setfsgid, self.fsgid)?;
        set_groups(&self.groups)?;
        // SAFETY: this thread's mask only.
        unsafe { libc::umask(self.umask as libc::mode_t) };
        Ok(())
    }
}

/// Makes this thread's umask its own (it is the process's otherwise): the
/// listener's thread calls it once before performing opens.
pub(crate) fn own_umask() -> io::Result<()> {
    // SAFETY: unshares this thread's fs attributes only.
    check(unsafe { libc::unshare(libc::CLONE_FS) } as libc::c_long).map(|_| ())
}

fn openat2(dirfd: RawFd, path: &[u8], how: &OpenHow) -> Result<OwnedFd, i32> {
    let path = CString::new(path).map_err(|_| libc::EINVAL)?;
    loop {
        // SAFETY: a NUL-terminated path and an open_how we own, its size given.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dirfd,
                path.as_ptr(),
                how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if fd >= 0 {
            // SAFETY: a new descriptor nobody else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        }
        let errno = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        if errno != libc::EINTR {
            return Err(errno);
        }
    }
}

fn open_at(dirfd: RawFd, path: &str, flags: i32) -> Result<OwnedFd, i32> {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: 0,
    };
    openat2(dirfd, path.as_bytes(), &how)
}

/// The target of symlink `path` (empty: `dirfd` itself, an `O_PATH`
/// descriptor of the link) or of a `/proc` magic link.
fn read_link_at(dirfd: RawFd, path: &str) -> Result<String, i32> {
    let path = CString::new(path).map_err(|_| libc::EINVAL)?;
    let mut buffer = vec![0u8; PATH_MAX];
    // SAFETY: readlinkat writes at most buffer.len() bytes into our buffer.
    let len = unsafe {
        libc::readlinkat(
            dirfd,
            path.as_ptr(),
            buffer.as_mut_ptr().cast(),
            buffer.len(),
        )
    };
    if len < 0 {
        return Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    buffer.truncate(len as usize);
    Ok(String::from_utf8_lossy(&buffer).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_the_fs_ids_groups_capabilities_and_umask() {
        let status = "Name:\tpython3\nUmask:\t0027\nUid:\t1000\t1001\t1002\t1003\n\
                      Gid:\t2000\t2001\t2002\t2003\nGroups:\t4 27 \nCapEff:\t0000000000000400\n";
        assert_eq!(
            Credentials::parse(status),
            Some(Credentials {
                fsuid: 1003,
                fsgid: 2003,
                groups: vec![4, 27],
                effective: 0x400,
                umask: 0o027,
            })
        );
        let no_groups = status.replace("Groups:\t4 27 ", "Groups:\t");
        assert_eq!(
            Credentials::parse(&no_groups).unwrap().groups,
            Vec::<u32>::new()
        );
        assert_eq!(Credentials::parse("Uid:\t1\n"), None);
    }

    #[test]
    fn open_calls_are_taken_as_the_kernel_takes_them() {
        let memory = |address: u64, len: usize| -> Option<Vec<u8>> {
            let mut bytes = match address {
                0x100 => b"/etc/shadow\0junk".to_vec(),
                0x200 => vec![b'a'; PATH_MAX],
                0x300 => {
                    let mut how = (libc::O_RDONLY as u64).to_ne_bytes().to_vec();
                    how.extend(0u64.to_ne_bytes());
                    how.extend(RESOLVE_IN_ROOT.to_ne_bytes());
                    how
                }
                _ => return None,
            };
            bytes.truncate(len);
            Some(bytes)
        };
        // open: unknown flag bits dropped, no mode without O_CREAT.
        let call = decode(
            libc::SYS_open,
            &[0x100, 0x8000_0000, 0o644, 0, 0, 0],
            &memory,
        )
        .unwrap();
        assert_eq!(call.path, b"/etc/shadow");
        assert_eq!(call.dirfd, AT_FDCWD);
        assert_eq!(call.how.flags, libc::O_LARGEFILE as u64);
        assert_eq!(call.how.mode, 0);
        // creat: a write that creates and truncates, with its mode.
        let call = decode(libc::SYS_creat, &[0x100, 0o600, 0, 0, 0, 0], &memory).unwrap();
        assert_eq!(
            call.how.flags & (O_CREAT | libc::O_WRONLY as u64 | libc::O_TRUNC as u64),
            O_CREAT | libc::O_WRONLY as u64 | libc::O_TRUNC as u64
        );
        assert_eq!(call.how.mode, 0o600);
        // openat: the folder descriptor is a C int; O_PATH keeps its own flags.
        let flags = (libc::O_PATH | libc::O_WRONLY | libc::O_CLOEXEC) as u64;
        let call = decode(
            libc::SYS_openat,
            &[0xffff_ff9c, 0x100, flags, 0, 0, 0],
            &memory,
        )
        .unwrap();
        assert_eq!(call.dirfd, AT_FDCWD);
        assert_eq!(call.how.flags, (libc::O_PATH | libc::O_CLOEXEC) as u64);
        // What the listener leaves to the kernel: a path without its end
        // within PATH_MAX, an unreadable one, openat2's own resolve flags.
        assert!(decode(libc::SYS_open, &[0x200, 0, 0, 0, 0, 0], &memory).is_err());
        assert!(decode(libc::SYS_open, &[0x999, 0, 0, 0, 0, 0], &memory).is_err());
        assert!(decode(libc::SYS_openat2, &[3, 0x100, 0x300, 24, 0, 0], &memory).is_err());
        assert!(decode(libc::SYS_openat2, &[3, 0x100, 0x300, 32, 0, 0], &memory).is_err());
    }
}
