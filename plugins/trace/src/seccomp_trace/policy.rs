//! Which calls a traced container's seccomp profile hands to the listener,
//! and the verdict the untraced profile gives each of them.
//!
//! The OCI backend's profile (`progscore-oci`'s `seccomp.rs`) is built from
//! these constants: the calls in [`NOTIFIED`] get `SCMP_ACT_NOTIFY` instead
//! of their own rule, and the listener must answer exactly what that rule
//! would have done. The rules that matter are few and decided by register
//! arguments only (which the program cannot change once the call is made):
//! `clone` is refused with namespace flags, `socket` outside
//! [`SOCKET_FAMILIES`], `ptrace` always; the rest are allowed. That backend's
//! tests evaluate its untraced profile against [`verdict`] call by call.

/// `EPERM`: what the profile's default action and refusals return.
pub const EPERM: i32 = 1;

/// The namespace flags of `clone` (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC,
/// NEWUSER, NEWPID, NEWNET): any of them set, and `clone` is refused.
pub const CLONE_NAMESPACE_FLAGS: u64 = 0x7E02_0000;

/// Address families a program may open sockets of: unix, inet, netlink, inet6.
pub const SOCKET_FAMILIES: [u64; 4] = [1, 2, 16, 10];

/// `AUDIT_ARCH_X86_64`: the only architecture whose calls the listener
/// decides (a 32-bit call, `int 0x80` or x32, is numbered differently).
pub const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;

/// x32 system calls have this bit set in their number.
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// How the untraced profile treats a notified call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// In the allowlist, unconditionally.
    Allowed,
    /// Allowed only when none of [`CLONE_NAMESPACE_FLAGS`] is in argument 0.
    CloneWithoutNamespaces,
    /// Allowed only when argument 0 is one of [`SOCKET_FAMILIES`].
    SocketOfFamily,
    /// Not in the allowlist: the default action (EPERM).
    Refused,
}

/// The calls a traced profile notifies: name, amd64 number, and the rule
/// the untraced profile has for it.
pub const NOTIFIED: &[(&str, i64, Rule)] = &[
    ("connect", libc::SYS_connect, Rule::Allowed),
    ("bind", libc::SYS_bind, Rule::Allowed),
    ("socket", libc::SYS_socket, Rule::SocketOfFamily),
    ("execve", libc::SYS_execve, Rule::Allowed),
    ("execveat", libc::SYS_execveat, Rule::Allowed),
    ("open", libc::SYS_open, Rule::Allowed),
    ("openat", libc::SYS_openat, Rule::Allowed),
    ("openat2", libc::SYS_openat2, Rule::Allowed),
    ("creat", libc::SYS_creat, Rule::Allowed),
    ("clone", libc::SYS_clone, Rule::CloneWithoutNamespaces),
    ("fork", libc::SYS_fork, Rule::Allowed),
    ("vfork", libc::SYS_vfork, Rule::Allowed),
    ("kill", libc::SYS_kill, Rule::Allowed),
    ("tkill", libc::SYS_tkill, Rule::Allowed),
    ("tgkill", libc::SYS_tgkill, Rule::Allowed),
    ("rt_sigqueueinfo", libc::SYS_rt_sigqueueinfo, Rule::Allowed),
    (
        "rt_tgsigqueueinfo",
        libc::SYS_rt_tgsigqueueinfo,
        Rule::Allowed,
    ),
    (
        "pidfd_send_signal",
        libc::SYS_pidfd_send_signal,
        Rule::Allowed,
    ),
    ("sendto", libc::SYS_sendto, Rule::Allowed),
    ("sendmsg", libc::SYS_sendmsg, Rule::Allowed),
    ("sendmmsg", libc::SYS_sendmmsg, Rule::Allowed),
    // A hard link gives an object a second name, which no path resolution
    // can tell from its first: the trace's paths are then unresolved.
    ("link", libc::SYS_link, Rule::Allowed),
    ("linkat", libc::SYS_linkat, Rule::Allowed),
    // Writes onto a path without an open: fs.open events (write).
    ("truncate", libc::SYS_truncate, Rule::Allowed),
    ("mknod", libc::SYS_mknod, Rule::Allowed),
    ("mknodat", libc::SYS_mknodat, Rule::Allowed),
    ("symlink", libc::SYS_symlink, Rule::Allowed),
    ("symlinkat", libc::SYS_symlinkat, Rule::Allowed),
    ("ptrace", libc::SYS_ptrace, Rule::Refused),
    // Another process's memory without ptrace: proc.ptrace events.
    (
        "process_vm_readv",
        libc::SYS_process_vm_readv,
        Rule::Refused,
    ),
    (
        "process_vm_writev",
        libc::SYS_process_vm_writev,
        Rule::Refused,
    ),
    ("unlink", libc::SYS_unlink, Rule::Allowed),
    ("unlinkat", libc::SYS_unlinkat, Rule::Allowed),
    ("rename", libc::SYS_rename, Rule::Allowed),
    ("renameat", libc::SYS_renameat, Rule::Allowed),
    ("renameat2", libc::SYS_renameat2, Rule::Allowed),
];

/// The answer to a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Let the kernel run the call (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`).
    Continue,
    /// Fail it with this errno, as the profile's rule does.
    Errno(i32),
}

/// The rule of notified call `nr` (amd64), if it is one.
pub fn rule(nr: i64) -> Option<Rule> {
    NOTIFIED
        .iter()
        .find(|(_, number, _)| *number == nr)
        .map(|(_, _, rule)| *rule)
}

/// Whether a call of architecture `arch` numbered `nr` is one the listener
/// cannot decode (a 32-bit call, `int 0x80`, or an x32 call): it is
/// refused with [`ENOSYS`], as a kernel without that ABI would, and the
/// program runs on.
pub fn undecodable(arch: u32, nr: i64) -> bool {
    arch != AUDIT_ARCH_X86_64 || nr & X32_SYSCALL_BIT != 0
}

/// `ENOSYS`: the answer to a call the listener cannot decode.
pub const ENOSYS: i32 = 38;

/// The verdict the untraced profile gives call `nr` of architecture `arch`
/// with these register arguments, compared as libseccomp compiles the rules
/// on amd64 (all 64 bits); `None` when the call is not one the listener can
/// decide (another architecture, an x32 call, a call it does not notify).
pub fn verdict(arch: u32, nr: i64, args: &[u64; 6]) -> Option<Verdict> {
    if arch != AUDIT_ARCH_X86_64 || nr & X32_SYSCALL_BIT != 0 {
        return None;
    }
    let allowed = match rule(nr)? {
        Rule::Allowed => true,
        Rule::CloneWithoutNamespaces => args[0] & CLONE_NAMESPACE_FLAGS == 0,
        Rule::SocketOfFamily => SOCKET_FAMILIES.contains(&args[0]),
        Rule::Refused => false,
    };
    Some(if allowed {
        Verdict::Continue
    } else {
        Verdict::Errno(EPERM)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(nr: i64, args: [u64; 6]) -> Option<Verdict> {
        verdict(AUDIT_ARCH_X86_64, nr, &args)
    }

    #[test]
    fn allowed_calls_continue_and_refused_ones_fail_with_eperm() {
        let continue_ = Some(Verdict::Continue);
        let eperm = Some(Verdict::Errno(EPERM));
        assert_eq!(call(libc::SYS_connect, [3, 0x1000, 16, 0, 0, 0]), continue_);
        assert_eq!(call(libc::SYS_openat, [0; 6]), continue_);
        assert_eq!(call(libc::SYS_execve, [0; 6]), continue_);
        assert_eq!(call(libc::SYS_kill, [1, 9, 0, 0, 0, 0]), continue_);
        // ptrace is never allowed, whatever its request.
        assert_eq!(call(libc::SYS_ptrace, [0; 6]), eperm);
        assert_eq!(call(libc::SYS_ptrace, [16, 1, 0, 0, 0, 0]), eperm);
        // socket: by family, all 64 bits of the register.
        for family in [1, 2, 10, 16] {
            assert_eq!(call(libc::SYS_socket, [family, 1, 0, 0, 0, 0]), continue_);
        }
        assert_eq!(call(libc::SYS_socket, [17, 3, 0, 0, 0, 0]), eperm); // AF_PACKET
        assert_eq!(
            call(libc::SYS_socket, [0x1_0000_0002, 1, 0, 0, 0, 0]),
            eperm
        );
        // clone: a thread or a process, never a namespace.
        let thread = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
        assert_eq!(call(libc::SYS_clone, [thread, 0, 0, 0, 0, 0]), continue_);
        assert_eq!(
            call(libc::SYS_clone, [libc::SIGCHLD as u64, 0, 0, 0, 0, 0]),
            continue_
        );
        for flag in [
            libc::CLONE_NEWNS,
            libc::CLONE_NEWCGROUP,
            libc::CLONE_NEWUTS,
            libc::CLONE_NEWIPC,
            libc::CLONE_NEWUSER,
            libc::CLONE_NEWPID,
            libc::CLONE_NEWNET,
        ] {
            assert_eq!(
                call(libc::SYS_clone, [flag as u64 | 17, 0, 0, 0, 0, 0]),
                eperm
            );
        }
        // The upper half of the flags register holds no namespace flag.
        assert_eq!(call(libc::SYS_clone, [1 << 40, 0, 0, 0, 0, 0]), continue_);
    }

    #[test]
    fn what_the_listener_cannot_decide_is_said() {
        // A call it does not notify, a 32-bit call, an x32 call.
        assert_eq!(call(libc::SYS_read, [0; 6]), None);
        assert_eq!(verdict(0x4000_0003, 11, &[0; 6]), None);
        assert_eq!(call(libc::SYS_openat | 0x4000_0000, [0; 6]), None);
        assert!(undecodable(0x4000_0003, 11));
        assert!(undecodable(
            AUDIT_ARCH_X86_64,
            libc::SYS_openat | 0x4000_0000
        ));
        assert!(!undecodable(AUDIT_ARCH_X86_64, libc::SYS_read));
        let mut numbers: Vec<i64> = NOTIFIED.iter().map(|(_, nr, _)| *nr).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), NOTIFIED.len());
    }
}
