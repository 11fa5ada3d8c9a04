//! The seccomp profile every OCI container gets: an allowlist.
//!
//! How it was chosen. Docker's default profile (moby `profiles/seccomp`) is
//! the reference users trust: an allowlist, everything else failing with
//! EPERM. This one starts from the calls that profile allows *unconditionally*
//! to a container without capabilities (ours have none), and then leaves out
//! what a program being scored has no use for and what has been a way out of
//! containers, even where Docker allows it:
//!
//! - everything Docker gates on a capability (mount, unshare, setns,
//!   pivot_root, chroot, bpf, perf_event_open, keyctl and friends, module and
//!   clock setting calls, reboot, swap, quotas, NUMA policy calls, ...);
//! - also `ptrace`, `process_vm_readv`/`writev`, `kcmp`, `pidfd_getfd` and
//!   `process_madvise` (reaching into another process), `userfaultfd`,
//!   `io_uring_*` (a large, often-patched kernel surface), `fanotify_init`,
//!   `name_to_handle_at`, `personality` beyond the default and the query,
//!   and sockets beyond unix, inet, inet6 and netlink (the network namespace
//!   has only `lo` anyway).
//!
//! As in Docker's profile, `clone` is allowed only without namespace flags,
//! and `clone3` fails with ENOSYS (its flags are in memory a filter cannot
//! read), so that libc falls back to `clone`. So the set is a subset of
//! Docker's: at least as strict. `tests/oci` checks that blocked calls fail
//! and that ordinary programs (threads, subprocesses, sockets on `lo`) work.
//!
//! gVisor (runsc) does not apply a container's seccomp profile to the
//! program by default: its own kernel stands between the program and the
//! host's, and filters its own calls to the host.

//!
//! A traced runc invocation gets the same profile with a `listenerPath`
//! (progscore's seccomp listener, `progscore_trace::seccomp_trace`) and
//! the calls it traces ([`policy::NOTIFIED`]) given `SCMP_ACT_NOTIFY`
//! instead of their rules; the listener answers each with the verdict the
//! rule would have given ([`policy::verdict`]), so the policy is unchanged.
//! The tests below evaluate the untraced profile call by call against it.

use std::path::Path;

use oci_spec::runtime::{
    Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompArgBuilder,
    LinuxSeccompOperator, LinuxSyscall,
};
use progscore_trace::seccomp_trace::policy::{
    self, CLONE_NAMESPACE_FLAGS, NOTIFIED, SOCKET_FAMILIES,
};

const EPERM: u32 = policy::EPERM as u32;
const ENOSYS: u32 = 38;

/// `personality` values allowed: the default persona, and the query.
const PERSONALITIES: [u64; 2] = [0, 0xffff_ffff];

/// Allowed without conditions, grouped by what they are for.
const ALLOWED: &[&str] = &[
    // Files and descriptors.
    "access",
    "chdir",
    "chmod",
    "chown",
    "close",
    "close_range",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fallocate",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchown",
    "fchownat",
    "fcntl",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstatfs",
    "fsync",
    "ftruncate",
    "getcwd",
    "getdents",
    "getdents64",
    "getxattr",
    "ioctl",
    "lchown",
    "lgetxattr",
    "link",
    "linkat",
    "listxattr",
    "llistxattr",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "newfstatat",
    "open",
    "openat",
    "openat2",
    "pipe",
    "pipe2",
    "poll",
    "ppoll",
    "pread64",
    "preadv",
    "preadv2",
    "pselect6",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "removexattr",
    "rename",
    "renameat",
    "renameat2",
    "rmdir",
    "select",
    "sendfile",
    "setxattr",
    "splice",
    "stat",
    "statfs",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "tee",
    "truncate",
    "umask",
    "unlink",
    "unlinkat",
    "utime",
    "utimensat",
    "utimes",
    "vmsplice",
    "write",
    "writev",
    // Event and notification descriptors.
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "eventfd",
    "eventfd2",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "signalfd",
    "signalfd4",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_settime",
    // Memory.
    "brk",
    "madvise",
    "membarrier",
    "memfd_create",
    "mincore",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mprotect",
    "mremap",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    // Processes and threads (clone is below, with its condition).
    "arch_prctl",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "fork",
    "futex",
    "futex_waitv",
    "get_robust_list",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrlimit",
    "getrusage",
    "getsid",
    "gettid",
    "pidfd_open",
    "pidfd_send_signal",
    "prctl",
    "prlimit64",
    "restart_syscall",
    "rseq",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "set_robust_list",
    "set_tid_address",
    "setpgid",
    "setpriority",
    "setrlimit",
    "setsid",
    "vfork",
    "wait4",
    "waitid",
    // Identity (without capabilities, changing it can only drop privileges).
    "capget",
    "capset",
    "getegid",
    "geteuid",
    "getgid",
    "getgroups",
    "getresgid",
    "getresuid",
    "getuid",
    "setfsgid",
    "setfsuid",
    "setgid",
    "setgroups",
    "setregid",
    "setresgid",
    "setresuid",
    "setreuid",
    "setuid",
    // Signals.
    "kill",
    "pause",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_tgsigqueueinfo",
    "sigaltstack",
    "tgkill",
    "tkill",
    // Time and timers.
    "alarm",
    "clock_getres",
    "clock_gettime",
    "clock_nanosleep",
    "getitimer",
    "gettimeofday",
    "nanosleep",
    "setitimer",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_settime",
    "times",
    // Inter-process communication (the container has its own IPC namespace).
    "io_cancel",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "io_setup",
    "io_submit",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedsend",
    "mq_unlink",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    // Sockets (socket itself is below, by address family).
    "accept",
    "accept4",
    "bind",
    "connect",
    "getpeername",
    "getsockname",
    "getsockopt",
    "listen",
    "recvfrom",
    "recvmmsg",
    "recvmsg",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "setsockopt",
    "shutdown",
    "socketpair",
    // The rest of what programs and their runtimes ask.
    "getcpu",
    "getrandom",
    "ioprio_get",
    "ioprio_set",
    "seccomp",
    "sysinfo",
    "uname",
];

/// The container's seccomp profile; with `listener` (a traced runc
/// invocation), the traced calls are notified to that socket instead.
pub(crate) fn profile(listener: Option<&Path>) -> LinuxSeccomp {
    let notified = |name: &str| listener.is_some() && NOTIFIED.iter().any(|(n, ..)| *n == name);
    let allow =
        |names: &[&str]| LinuxSyscall::default().with(names, LinuxSeccompAction::ScmpActAllow);
    let allowed: Vec<&str> = ALLOWED
        .iter()
        .copied()
        .filter(|name| !notified(name))
        .collect();
    let mut syscalls = vec![allow(&allowed)];
    // clone: only without namespace flags.
    if !notified("clone") {
        syscalls.push(allow(&["clone"]).with_args(vec![arg(
            0,
            CLONE_NAMESPACE_FLAGS,
            0,
            LinuxSeccompOperator::ScmpCmpMaskedEq,
        )]));
    }
    // One rule per allowed value: rules are alternatives, conditions within a rule all hold.
    if !notified("socket") {
        for family in SOCKET_FAMILIES {
            syscalls.push(allow(&["socket"]).with_args(vec![arg(
                0,
                family,
                0,
                LinuxSeccompOperator::ScmpCmpEq,
            )]));
        }
    }
    if listener.is_some() {
        let names: Vec<&str> = NOTIFIED.iter().map(|(name, ..)| *name).collect();
        syscalls.push(LinuxSyscall::default().with(&names, LinuxSeccompAction::ScmpActNotify));
    }
    for persona in PERSONALITIES {
        syscalls.push(allow(&["personality"]).with_args(vec![arg(
            0,
            persona,
            0,
            LinuxSeccompOperator::ScmpCmpEq,
        )]));
    }
    let mut clone3 = LinuxSyscall::default().with(&["clone3"], LinuxSeccompAction::ScmpActErrno);
    clone3.set_errno_ret(Some(ENOSYS));
    syscalls.push(clone3);

    let mut seccomp = LinuxSeccomp::default();
    seccomp.set_default_action(LinuxSeccompAction::ScmpActErrno);
    seccomp.set_default_errno_ret(Some(EPERM));
    seccomp.set_architectures(Some(vec![
        Arch::ScmpArchX86_64,
        Arch::ScmpArchX86,
        Arch::ScmpArchX32,
    ]));
    seccomp.set_syscalls(Some(syscalls));
    seccomp.set_listener_path(listener.map(Path::to_path_buf));
    seccomp
}

fn arg(index: usize, value: u64, value_two: u64, op: LinuxSeccompOperator) -> LinuxSeccompArg {
    LinuxSeccompArgBuilder::default()
        .index(index)
        .value(value)
        .value_two(value_two)
        .op(op)
        .build()
        .expect("every field of a seccomp argument is set")
}

trait SyscallRule {
    fn with(self, names: &[&str], action: LinuxSeccompAction) -> LinuxSyscall;
    fn with_args(self, args: Vec<LinuxSeccompArg>) -> LinuxSyscall;
}

impl SyscallRule for LinuxSyscall {
    fn with(mut self, names: &[&str], action: LinuxSeccompAction) -> LinuxSyscall {
        self.set_names(names.iter().map(|n| n.to_string()).collect());
        self.set_action(action);
        self
    }

    fn with_args(mut self, args: Vec<LinuxSeccompArg>) -> LinuxSyscall {
        self.set_args(Some(args));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls Docker's default profile refuses to a container without
    /// capabilities, and those this one refuses beyond it.
    const REFUSED: &[&str] = &[
        "mount",
        "umount2",
        "unshare",
        "setns",
        "pivot_root",
        "chroot",
        "bpf",
        "perf_event_open",
        "keyctl",
        "add_key",
        "request_key",
        "init_module",
        "finit_module",
        "delete_module",
        "kexec_load",
        "kexec_file_load",
        "reboot",
        "swapon",
        "swapoff",
        "settimeofday",
        "clock_settime",
        "clock_adjtime",
        "adjtimex",
        "acct",
        "quotactl",
        "syslog",
        "iopl",
        "ioperm",
        "open_by_handle_at",
        "name_to_handle_at",
        "mbind",
        "set_mempolicy",
        "move_pages",
        "userfaultfd",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "kcmp",
        "pidfd_getfd",
        "process_madvise",
        "io_uring_setup",
        "io_uring_enter",
        "fanotify_init",
        "lookup_dcookie",
        "uselib",
        "vhangup",
        "sethostname",
        "setdomainname",
    ];

    #[test]
    fn nothing_refused_is_allowed_and_names_are_unique() {
        for name in REFUSED {
            assert!(!ALLOWED.contains(name), "{name} must not be allowed");
        }
        let mut sorted: Vec<&str> = ALLOWED.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ALLOWED.len(), "a name is listed twice");
    }

    /// What `profile` does with call `name` and these register arguments,
    /// read from its rules as libseccomp applies them on amd64: a matching
    /// rule's action, else the default.
    fn evaluate(profile: &LinuxSeccomp, name: &str, args: &[u64; 6]) -> policy::Verdict {
        let holds = |condition: &LinuxSeccompArg| {
            let value = args[condition.index()];
            match condition.op() {
                LinuxSeccompOperator::ScmpCmpEq => value == condition.value(),
                LinuxSeccompOperator::ScmpCmpMaskedEq => {
                    value & condition.value() == condition.value_two().unwrap_or(0)
                }
                other => panic!("no evaluation of {other:?}"),
            }
        };
        let verdict = |action: LinuxSeccompAction, errno: Option<u32>| match action {
            LinuxSeccompAction::ScmpActAllow => policy::Verdict::Continue,
            LinuxSeccompAction::ScmpActErrno => policy::Verdict::Errno(errno.unwrap_or(1) as i32),
            other => panic!("no evaluation of {other:?}"),
        };
        let matching = profile.syscalls().as_ref().unwrap().iter().find(|rule| {
            rule.names().iter().any(|n| n == name)
                && rule
                    .args()
                    .as_ref()
                    .is_none_or(|args| args.iter().all(holds))
        });
        match matching {
            Some(rule) => verdict(rule.action(), rule.errno_ret()),
            None => verdict(profile.default_action(), profile.default_errno_ret()),
        }
    }

    #[test]
    fn the_listener_answers_every_notified_call_as_the_untraced_profile_does() {
        let untraced = profile(None);
        let mut samples: Vec<[u64; 6]> = vec![[0; 6], [u64::MAX; 6], [1 << 40, 1, 2, 3, 4, 5]];
        for value in (0..64).chain([0x7E02_0000, 0x1_0000_0002, 0xffff_ffff]) {
            samples.push([value, 1, 0, 0, 0, 0]);
        }
        for bit in 0..64 {
            samples.push([(1u64 << bit) | 17, 0, 0, 0, 0, 0]);
        }
        for (name, nr, _) in NOTIFIED {
            for args in &samples {
                assert_eq!(
                    policy::verdict(policy::AUDIT_ARCH_X86_64, *nr, args),
                    Some(evaluate(&untraced, name, args)),
                    "{name}{args:?}"
                );
            }
        }
        // The evaluation is that of the rules: a refusal is seen as one.
        let eperm = policy::Verdict::Errno(1);
        assert_eq!(evaluate(&untraced, "ptrace", &[0; 6]), eperm);
        assert_eq!(evaluate(&untraced, "socket", &[17, 3, 0, 0, 0, 0]), eperm);
        assert_eq!(
            evaluate(&untraced, "clone", &[0x1000_0000, 0, 0, 0, 0, 0]),
            eperm
        );
        assert_eq!(
            evaluate(&untraced, "read", &[0; 6]),
            policy::Verdict::Continue
        );
    }

    #[test]
    fn a_traced_profile_notifies_the_traced_calls_and_changes_nothing_else() {
        let listener = Path::new("/run/progscore/x/seccomp.sock");
        let untraced = serde_json::to_value(profile(None)).unwrap();
        let traced = serde_json::to_value(profile(Some(listener))).unwrap();
        assert_eq!(traced["listenerPath"], "/run/progscore/x/seccomp.sock");
        assert!(untraced.get("listenerPath").is_none());
        for field in ["defaultAction", "defaultErrnoRet", "architectures"] {
            assert_eq!(traced[field], untraced[field], "{field}");
        }
        let notified: Vec<&str> = NOTIFIED.iter().map(|(name, ..)| *name).collect();
        let rules = |json: &serde_json::Value| -> Vec<(String, serde_json::Value)> {
            let mut pairs = Vec::new();
            for rule in json["syscalls"].as_array().unwrap() {
                for name in rule["names"].as_array().unwrap() {
                    let mut rule = rule.clone();
                    rule.as_object_mut().unwrap().remove("names");
                    pairs.push((name.as_str().unwrap().to_string(), rule));
                }
            }
            pairs
        };
        let (traced_notify, traced_other): (Vec<_>, Vec<_>) = rules(&traced)
            .into_iter()
            .partition(|(name, _)| notified.contains(&name.as_str()));
        let untraced_other: Vec<_> = rules(&untraced)
            .into_iter()
            .filter(|(name, _)| !notified.contains(&name.as_str()))
            .collect();
        assert_eq!(traced_other, untraced_other);
        assert_eq!(traced_notify.len(), NOTIFIED.len(), "one rule each");
        for (name, rule) in traced_notify {
            assert_eq!(rule["action"], "SCMP_ACT_NOTIFY", "{name}");
            assert!(rule.get("args").is_none_or(|a| a.is_null()), "{name}");
        }
        // runc cannot notify `write` (its own message to the agent).
        assert!(!notified.contains(&"write"));
    }

    #[test]
    fn the_profile_refuses_by_default_and_conditions_clone_and_socket() {
        let json = serde_json::to_value(profile(None)).unwrap();
        assert_eq!(json["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(json["defaultErrnoRet"], 1);
        let rules = json["syscalls"].as_array().unwrap();
        let rules_for = |name: &str| -> Vec<&serde_json::Value> {
            rules
                .iter()
                .filter(|r| r["names"].as_array().unwrap().iter().any(|n| n == name))
                .collect()
        };
        let clone = rules_for("clone");
        assert_eq!(clone.len(), 1);
        assert_eq!(clone[0]["args"][0]["op"], "SCMP_CMP_MASKED_EQ");
        assert_eq!(clone[0]["args"][0]["value"], CLONE_NAMESPACE_FLAGS);
        assert_eq!(rules_for("socket").len(), SOCKET_FAMILIES.len());
        assert_eq!(rules_for("clone3")[0]["errnoRet"], ENOSYS);
        for name in REFUSED {
            assert!(rules_for(name).is_empty(), "{name} has a rule");
        }
    }
}
