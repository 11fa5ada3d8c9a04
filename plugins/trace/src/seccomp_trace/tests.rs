//! The listener against a real seccomp filter: a child installs one the way
//! runc does (notify on the traced calls, allow the rest), hands runc's
//! message with the notify descriptor to the listener, then executes a
//! shell; and against connections that are not runc's.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::time::Duration;

use progscore_sandbox::behaviour::{Action, FileAccess};

use super::*;

const GRACE: Duration = Duration::from_secs(5);

fn sensitive() -> Vec<PathPattern> {
    vec![PathPattern::new("/etc/shadow").unwrap()]
}

/// A BPF program: amd64 calls of [`policy::NOTIFIED`] are notified, the
/// rest allowed.
fn filter() -> Vec<libc::sock_filter> {
    let statement = |code: u16, k: u32| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    const RET_ALLOW: u32 = 0x7fff_0000;
    const RET_USER_NOTIF: u32 = 0x7fc0_0000;
    let mut program = vec![
        statement(LD_W_ABS, 4),
        libc::sock_filter {
            code: JEQ_K,
            jt: 1,
            jf: 0,
            k: policy::AUDIT_ARCH_X86_64,
        },
        statement(RET_K, RET_ALLOW),
        statement(LD_W_ABS, 0),
    ];
    // runc hands the notify descriptor over from outside the filter; this
    // child sends it itself with `sendmsg`, which must not wait on the
    // listener it is handing over.
    for (_, nr, _) in policy::NOTIFIED
        .iter()
        .filter(|(name, ..)| *name != "sendmsg")
    {
        program.push(libc::sock_filter {
            code: JEQ_K,
            jt: 0,
            jf: 1,
            k: *nr as u32,
        });
        program.push(statement(RET_K, RET_USER_NOTIF));
    }
    program.push(statement(RET_K, RET_ALLOW));
    program
}

/// Runs `sh -c script` under the filter, handing its notify descriptor to
/// `trace` as runc does; its exit status.
fn run_filtered(trace: &SeccompTrace, script: &str) -> std::process::ExitStatus {
    run_filtered_as(trace, script, None)
}

/// [`run_filtered`], as user and group `id` (no other groups) when given.
fn run_filtered_as(
    trace: &SeccompTrace,
    script: &str,
    id: Option<u32>,
) -> std::process::ExitStatus {
    let filter = filter();
    // SAFETY: a zeroed sockaddr_un is valid; the path is copied in below.
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    address.sun_family = libc::AF_UNIX as u16;
    let path = trace.listener_path().as_os_str().as_encoded_bytes();
    for (slot, byte) in address.sun_path.iter_mut().zip(path) {
        *slot = *byte as libc::c_char;
    }
    let state = br#"{"ociVersion":"1.0.2","fds":["seccompFd"],"pid":1,"state":{}}"#.to_vec();
    let mut command = std::process::Command::new("/bin/sh");
    command.args(["-c", script]);
    // SAFETY: only system calls on data prepared before the fork.
    unsafe {
        command.pre_exec(move || {
            let fail = || Err(io::Error::last_os_error());
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return fail();
            }
            // Connected first: socket and connect are notified once filtered.
            let socket = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if libc::connect(
                socket,
                (&raw const address).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as u32,
            ) != 0
            {
                return fail();
            }
            if let Some(id) = id
                && (libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(id) != 0
                    || libc::setuid(id) != 0)
            {
                return fail();
            }
            let program = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            let fd = libc::syscall(
                libc::SYS_seccomp,
                1, // SECCOMP_SET_MODE_FILTER
                8, // SECCOMP_FILTER_FLAG_NEW_LISTENER
                &raw const program,
            );
            if fd < 0 {
                return fail();
            }
            let mut control = [0u64; 4];
            let mut iov = libc::iovec {
                iov_base: state.as_ptr() as *mut libc::c_void,
                iov_len: state.len(),
            };
            let mut message: libc::msghdr = std::mem::zeroed();
            message.msg_iov = &mut iov;
            message.msg_iovlen = 1;
            message.msg_control = control.as_mut_ptr().cast();
            message.msg_controllen = libc::CMSG_SPACE(4) as usize;
            let header = libc::CMSG_FIRSTHDR(&message);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(4) as usize;
            libc::CMSG_DATA(header)
                .cast::<i32>()
                .write_unaligned(fd as i32);
            if libc::sendmsg(socket, &message, 0) < 0 {
                return fail();
            }
            libc::close(socket);
            libc::close(fd as i32);
            Ok(())
        });
    }
    command.status().expect("the filtered shell runs")
}

#[tokio::test]
async fn a_filtered_program_is_traced_and_answered_as_the_profile_would() {
    let dir = tempfile::tempdir().unwrap();
    let trace = SeccompTrace::listen(dir.path(), sensitive()).unwrap();
    let out = dir.path().join("out");
    let script = format!(
        "echo hi > {out}; cat /etc/hostname > /dev/null; /bin/true; kill -0 $$; \
         cat /proc/self/root/etc/shadow > /dev/null; ln -s /etc {dir}/e; \
         cat {dir}/e/shadow > /dev/null; cd {dir} && rm out",
        out = out.display(),
        dir = dir.path().display()
    );
    let listener = trace.listener_path().to_path_buf();
    let status = tokio::task::spawn_blocking(move || {
        let trace = trace;
        let status = run_filtered(&trace, &script);
        (trace, status)
    })
    .await
    .unwrap();
    let (trace, status) = status;
    assert!(status.success(), "{status}");
    let (behaviour, fault) = trace.finish(GRACE).await;
    assert_eq!(fault, None);
    let trace = behaviour.trace().expect("traced").clone();
    assert_eq!(trace.incomplete, None, "{trace:?}");
    // Opens are the listener's own: verified, with their results; the
    // exec the kernel ran read its path from the shell's memory.
    assert_eq!(trace.arguments_unverified, None);
    let write = trace
        .events
        .iter()
        .find(|event| {
            event.action
                == Action::FsOpen {
                    path: out.display().to_string(),
                    access: FileAccess::Write,
                }
        })
        .expect("the write");
    assert!(!write.unverified, "{write:?}");
    assert_eq!(write.result.as_deref(), Some("ok"));
    assert!(
        trace
            .events
            .iter()
            .filter(|event| matches!(event.action, Action::ProcExec { .. }))
            .all(|event| event.unverified && event.result.is_none()),
        "{:?}",
        trace.events
    );
    assert!(
        trace.traces(ActionKind::FsOpen),
        "no open left to the kernel"
    );
    let actions: Vec<&Action> = trace.events.iter().map(|event| &event.action).collect();
    let out = out.display().to_string();
    assert!(
        actions.contains(&&Action::FsOpen {
            path: out.clone(),
            access: FileAccess::Write
        }),
        "{actions:?}"
    );
    assert!(actions.contains(&&Action::ProcSpawn {}), "{actions:?}");
    // The object each path reached, by any alias, with its spelling and
    // the names on the way.
    assert!(
        trace.events.iter().any(|event| matches!(
            &event.action,
            Action::ProcExec { path, .. }
                if path == "/bin/true" || event.via.iter().any(|name| name == "/bin/true")
        )),
        "{actions:?}"
    );
    let shadow_spellings: Vec<Option<&str>> = trace
        .events
        .iter()
        .filter(|event| {
            event.action
                == Action::FsOpen {
                    path: "/etc/shadow".into(),
                    access: FileAccess::Read,
                }
        })
        .inspect(|event| assert!(!event.unverified && event.result.as_deref() == Some("ok")))
        .map(|event| event.spelled.as_deref())
        .collect();
    let through_link = format!("{}/e/shadow", dir.path().display());
    assert_eq!(
        shadow_spellings,
        [
            Some("/proc/self/root/etc/shadow"),
            Some(through_link.as_str())
        ],
        "{:?}",
        trace.events
    );
    assert!(
        actions.iter().any(
            |action| matches!(action, Action::ProcSignal { target, signal: 0 } if *target > 1)
        ),
        "{actions:?}"
    );
    // The relative unlink resolves against the shell's working directory.
    assert!(
        actions.contains(&&Action::FsUnlink { path: Some(out) }),
        "{actions:?}"
    );
    // The shell's own exec (runc's, in a container) is not an event, and
    // reads of paths that are not sensitive are none either.
    assert!(
        !actions
            .iter()
            .any(|action| matches!(action, Action::ProcExec { path, .. } if path == "/bin/sh"))
    );
    assert!(
        !actions
            .iter()
            .any(|action| matches!(action, Action::FsOpen { path, .. } if path == "/etc/hostname"))
    );
    assert!(!listener.exists(), "the socket is removed");
}

#[tokio::test]
async fn no_connection_or_a_connection_that_is_not_runcs_is_a_fault() {
    let dir = tempfile::tempdir().unwrap();
    let trace = SeccompTrace::listen(dir.path(), sensitive()).unwrap();
    let (behaviour, fault) = trace.finish(GRACE).await;
    assert!(matches!(behaviour, Behaviour::NotTraced { .. }));
    assert!(fault.unwrap().contains("never connected"));

    let trace = SeccompTrace::listen(dir.path(), sensitive()).unwrap();
    let mut stream = UnixStream::connect(trace.listener_path()).unwrap();
    stream.write_all(br#"{"fds":["seccompFd"]}"#).unwrap();
    drop(stream);
    let (behaviour, fault) = trace.finish(GRACE).await;
    assert!(matches!(behaviour, Behaviour::NotTraced { .. }));
    assert!(fault.unwrap().contains("descriptors"), "not runc's message");

    // A long folder is reached through its descriptor.
    let deep = dir.path().join("d".repeat(120));
    std::fs::create_dir(&deep).unwrap();
    let trace = SeccompTrace::listen(&deep, sensitive()).unwrap();
    assert!(trace.listener_path().starts_with("/proc/"));
    assert!(deep.join(SOCKET_NAME).exists());
    let stream = UnixStream::connect(trace.listener_path()).unwrap();
    assert!(stream.as_raw_fd() >= 0);
    drop(trace);
    assert!(!deep.join(SOCKET_NAME).exists());
}

/// The listener opens as the program would: with its user, groups and
/// umask, never with root's rights; the errno it meets is the program's.
#[tokio::test]
async fn opens_are_performed_with_the_programs_credentials() {
    const NOBODY: u32 = 65534;
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let root_only = dir.path().join("root-only");
    std::fs::create_dir(&root_only).unwrap();
    std::fs::set_permissions(&root_only, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let trace = SeccompTrace::listen(&shared, sensitive()).unwrap();
    let made = shared.join("made");
    let denied = root_only.join("planted");
    let script = format!(
        "umask 027; echo hi > {made}; cat {made} > /dev/null; cat /etc/shadow > /dev/null 2>&1; \
         (echo x > {denied}) 2>/dev/null; true",
        made = made.display(),
        denied = denied.display(),
    );
    let (trace, status) = tokio::task::spawn_blocking(move || {
        let status = run_filtered_as(&trace, &script, Some(NOBODY));
        (trace, status)
    })
    .await
    .unwrap();
    assert!(status.success(), "{status}");
    let (behaviour, fault) = trace.finish(GRACE).await;
    assert_eq!(fault, None);
    let trace = behaviour.trace().expect("traced").clone();
    // The file made is the program's, with its umask.
    let metadata = std::fs::metadata(&made).unwrap();
    assert_eq!((metadata.uid(), metadata.gid()), (NOBODY, NOBODY));
    assert_eq!(metadata.permissions().mode() & 0o777, 0o640);
    assert!(!denied.exists(), "root's rights were not lent");
    let result_of = |path: &Path, access: FileAccess| {
        trace
            .events
            .iter()
            .find(|event| {
                event.action
                    == Action::FsOpen {
                        path: path.display().to_string(),
                        access,
                    }
            })
            .map(|event| (event.result.clone(), event.unverified))
    };
    assert_eq!(
        result_of(&made, FileAccess::Write),
        Some((Some("ok".into()), false))
    );
    assert_eq!(
        result_of(Path::new("/etc/shadow"), FileAccess::Read),
        Some((Some("EACCES".into()), false))
    );
    assert_eq!(
        result_of(&denied, FileAccess::Write),
        Some((Some("EACCES".into()), false))
    );
    // Every open of the test's own files was performed and verified (the
    // kind stays covered). Another open of the shell's (its libraries, a
    // locale) left to the kernel withdraws the kind, which is sound and
    // says which path: seen twice on fresh-clone runs, as "the kernel's
    // walk of the path reaches another object", never here.
    if let Some(why) = trace.uncovered_because(ActionKind::FsOpen) {
        let ours = [&made, &denied]
            .iter()
            .any(|path| why.contains(path.display().to_string().as_str()))
            || why.contains("/etc/shadow");
        assert!(!ours, "{why}");
        eprintln!("fs.open left the trace's coverage: {why}");
    }
}
