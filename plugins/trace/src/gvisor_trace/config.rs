//! The pod init config that makes runsc stream the points the reader
//! turns into behaviour (`runsc --pod-init-config=FILE`).

use std::path::Path;

use serde_json::{Value, json};

/// The context fields of a point: when it happened.
const TIME: &[&str] = &["time"];

/// ... and the task's working directory, to resolve relative paths. Only the
/// points with a path ask for it: runsc cannot encode a point whose text is
/// not UTF-8 and then drops it silently (not counted), so a program working
/// in such a folder would hide every point that carries the folder.
const TIME_AND_CWD: &[&str] = &["time", "cwd"];

/// Every point the config enables: its name, its optional fields, its
/// context fields. Each name exists in runsc 0.0~20221219.0's point
/// metadata (`pkg/sentry/seccheck/metadata*.go`): runsc refuses to start on
/// a name it does not know.
const POINTS: &[(&str, &[&str], &[&str])] = &[
    // Opens resolve relative paths against the directory descriptor
    // (`fd_path`); `open` has no such field.
    ("syscall/open/exit", &[], TIME_AND_CWD),
    ("syscall/openat/exit", &["fd_path"], TIME_AND_CWD),
    ("syscall/creat/exit", &["fd_path"], TIME_AND_CWD),
    ("syscall/connect/exit", &[], TIME),
    ("syscall/bind/exit", &[], TIME),
    ("syscall/socket/exit", &[], TIME),
    // An exec that succeeds never returns, so it is seen on entry.
    ("syscall/execve/enter", &[], TIME_AND_CWD),
    ("syscall/execveat/enter", &["fd_path"], TIME_AND_CWD),
    ("syscall/clone/exit", &[], TIME),
    ("syscall/fork/exit", &[], TIME),
    ("syscall/vfork/exit", &[], TIME),
];

/// The system calls seen as raw points (their number and registers only),
/// amd64 numbers: kill, tkill, tgkill, ptrace, unlink, unlinkat, rename,
/// renameat, renameat2; the other signals (rt_sigqueueinfo,
/// rt_tgsigqueueinfo, pidfd_send_signal); the sends that may connect
/// (sendto, sendmsg, sendmmsg); the calls after which a path may reach
/// another object than its name says (symlink, symlinkat, link, linkat,
/// chroot, pivot_root, mount); the opens without a path point (openat2,
/// open_by_handle_at); and the writes onto a path without an open
/// (truncate, mknod, mknodat; symlink and link above); and the reads and
/// writes of another process's memory without ptrace (process_vm_readv,
/// process_vm_writev).
const RAW_SYSCALLS: [u64; 29] = [
    62, 200, 234, 101, 87, 263, 82, 264, 316, 129, 297, 424, 44, 46, 307, 88, 266, 86, 265, 161,
    155, 165, 437, 304, 76, 133, 259, 310, 311,
];

/// The calls whose points carry text (open, creat, openat on exit; execve,
/// execveat on entry, as above), also asked for as raw points on the same
/// side, without context: a raw point holds no text, so it always arrives,
/// and one without its full point says that the full point was lost.
pub(crate) const CROSS_CHECKED: [(u64, Side); 5] = [
    (2, Side::Exit),
    (85, Side::Exit),
    (257, Side::Exit),
    (59, Side::Enter),
    (322, Side::Enter),
];

/// Which side of a system call a point is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Enter,
    Exit,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Enter => "enter",
            Side::Exit => "exit",
        }
    }
}

/// How often runsc retries a message the socket has no room for before it
/// drops it: practically forever, so that a slow reader slows the traced
/// program instead of losing its events. A reader that stops reading
/// closes its end, which ends the retries (runsc then drops, and counts).
const SEND_RETRIES: u64 = 1_000_000_000;

/// The longest pause between those retries.
const SEND_BACKOFF_MAX: &str = "1ms";

/// The pod init config that streams this reader's points to the remote
/// sink listening on `socket` (an absolute path: runsc connects to it from
/// the host, when the sandbox is created; one that is not UTF-8 is written
/// lossily, and [`GvisorTrace::listen`](super::GvisorTrace::listen) refuses
/// it).
pub fn pod_init_config(socket: &Path) -> Value {
    let mut points: Vec<Value> = POINTS
        .iter()
        .map(|(name, optional_fields, context_fields)| {
            json!({
                "name": name,
                "optional_fields": optional_fields,
                "context_fields": context_fields,
            })
        })
        .collect();
    for sysno in RAW_SYSCALLS {
        // At this runsc, a raw exit point carries the context fields of the
        // raw *enter* point (task_syscall.go asks the enter point for its
        // field set on both sides), so the enter point is enabled with the
        // same fields; the reader ignores the enter messages themselves.
        for side in [Side::Enter, Side::Exit] {
            points.push(json!({
                "name": format!("syscall/sysno/{sysno}/{}", side.name()),
                "context_fields": TIME,
            }));
        }
    }
    for (sysno, side) in CROSS_CHECKED {
        points.push(json!({ "name": format!("syscall/sysno/{sysno}/{}", side.name()) }));
    }
    json!({
        "trace_session": {
            "name": "Default",
            "points": points,
            "sinks": [{
                "name": "remote",
                "config": {
                    "endpoint": socket.to_string_lossy(),
                    "retries": SEND_RETRIES,
                    "backoff_max": SEND_BACKOFF_MAX,
                },
            }],
        },
    })
}
