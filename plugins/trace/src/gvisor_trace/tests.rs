//! The reader against a client playing runsc, then against runsc itself.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use progscore_sandbox::behaviour::{
    Action, ActionKind, Behaviour, BehaviourEvent, BehaviourTrace, FileAccess, MAX_KEPT_EVENTS,
    PathPattern,
};
use progscore_sandbox::profile::DEFAULT_SENSITIVE_PATHS;
use prost::Message;
use tokio_seqpacket::UnixSeqpacket;

use super::wire::{self, Header, message_type};
use super::{GvisorTrace, NEVER_CONNECTED};

const SECOND: u64 = 1_000_000_000;
/// The program's start, as runsc would stamp it (nanoseconds since the epoch).
const START_NS: i64 = 1_700_000_000 * SECOND as i64;
const GRACE: Duration = Duration::from_secs(5);

fn default_sensitive() -> Vec<PathPattern> {
    DEFAULT_SENSITIVE_PATHS
        .iter()
        .map(|pattern| PathPattern::new(pattern).unwrap())
        .collect()
}

fn listen(dir: &Path) -> GvisorTrace {
    GvisorTrace::listen(dir, default_sensitive()).unwrap()
}

/// The socket the pod init config names (what runsc would connect to).
fn endpoint(trace: &GvisorTrace) -> PathBuf {
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(trace.pod_init_config_path()).unwrap()).unwrap();
    let endpoint = &config["trace_session"]["sinks"][0]["config"]["endpoint"];
    PathBuf::from(endpoint.as_str().unwrap())
}

fn context(after_ms: u64, cwd: &str) -> Option<wire::ContextData> {
    Some(wire::ContextData {
        time_ns: START_NS + (after_ms * 1_000_000) as i64,
        cwd: cwd.as_bytes().to_vec(),
    })
}

fn exit(errorno: i64) -> Option<wire::Exit> {
    Some(wire::Exit {
        result: if errorno == 0 { 0 } else { -errorno },
        errorno,
    })
}

/// A client doing what runsc's remote sink does.
struct FakeRunsc {
    socket: UnixSeqpacket,
}

impl FakeRunsc {
    /// Connects and completes the handshake, checking the reader's answer.
    async fn connect(trace: &GvisorTrace) -> FakeRunsc {
        let runsc = FakeRunsc::connect_only(trace).await;
        runsc
            .send_bytes(&wire::Handshake { version: 1 }.encode_to_vec())
            .await;
        let mut answer = [0; 64];
        let info = runsc.socket.recv(&mut answer).await.unwrap();
        let answer = wire::Handshake::decode(&answer[..info.bytes_read()]).unwrap();
        assert!(answer.version >= 1, "runsc requires version 1 or later");
        runsc
    }

    async fn connect_only(trace: &GvisorTrace) -> FakeRunsc {
        FakeRunsc {
            socket: UnixSeqpacket::connect(endpoint(trace)).await.unwrap(),
        }
    }

    async fn send(&self, message_type: u16, message: impl Message) {
        self.send_counting_drops(message_type, 0, message).await;
    }

    async fn send_counting_drops(
        &self,
        message_type: u16,
        dropped_count: u32,
        message: impl Message,
    ) {
        let header = Header {
            header_size: wire::HEADER_SIZE as u16,
            message_type,
            dropped_count,
        };
        let mut bytes = header.to_bytes().to_vec();
        message.encode(&mut bytes).unwrap();
        self.send_bytes(&bytes).await;
    }

    async fn send_bytes(&self, bytes: &[u8]) {
        assert_eq!(self.socket.send(bytes).await.unwrap(), bytes.len());
    }

    async fn connect_to_1111(&self, after_ms: u64) {
        let mut address = vec![2, 0, 0x01, 0xbb, 1, 1, 1, 1];
        address.extend([0; 8]);
        let connect = wire::Connect {
            context_data: context(after_ms, "/sandbox"),
            exit: exit(libc::ENETUNREACH.into()),
            sysno: 42,
            address,
        };
        self.send(message_type::SYSCALL_CONNECT, connect).await;
    }
}

async fn finished_trace(trace: GvisorTrace) -> BehaviourTrace {
    match trace.finish(GRACE).await {
        Behaviour::Traced(trace) => trace,
        Behaviour::NotTraced { reason } => panic!("not traced: {reason}"),
    }
}

fn open(
    after_ms: u64,
    sysno: u64,
    cwd: &str,
    pathname: &str,
    flags: i32,
    errorno: i64,
) -> wire::Open {
    wire::Open {
        context_data: context(after_ms, cwd),
        exit: exit(errorno),
        sysno,
        fd: -100,
        fd_path: Vec::new(),
        pathname: pathname.as_bytes().to_vec(),
        flags: flags as u32,
        mode: 0o644,
    }
}

fn raw(after_ms: u64, sysno: u64, args: [u64; 3], exit: Option<wire::Exit>) -> wire::Syscall {
    wire::Syscall {
        context_data: context(after_ms, "/sandbox"),
        exit,
        sysno,
        arg1: args[0],
        arg2: args[1],
        arg3: args[2],
        ..wire::Syscall::default()
    }
}

#[tokio::test]
async fn what_runsc_streams_becomes_the_programs_events() {
    let dir = tempfile::tempdir().unwrap();
    let trace = listen(dir.path());
    let runsc = FakeRunsc::connect(&trace).await;
    // A benign read opens the stream: it is the program's start, and no event.
    let library = open(
        0,
        257,
        "/sandbox",
        "/usr/lib/x",
        libc::O_RDONLY | libc::O_CLOEXEC,
        0,
    );
    runsc.send(message_type::SYSCALL_OPEN, library).await;
    runsc.connect_to_1111(3).await;
    let write = open(
        5,
        257,
        "/sandbox",
        "./data/../x",
        libc::O_WRONLY | libc::O_CREAT,
        0,
    );
    runsc.send(message_type::SYSCALL_OPEN, write).await;
    let shadow = open(6, 2, "/", "etc/shadow", libc::O_RDONLY, libc::EACCES.into());
    runsc.send(message_type::SYSCALL_OPEN, shadow).await;
    let thread = wire::Clone {
        context_data: context(7, "/sandbox"),
        exit: exit(0),
        sysno: 56,
        flags: (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64,
    };
    runsc.send(message_type::SYSCALL_CLONE, thread).await;
    let exec = wire::Execve {
        context_data: context(8, "/sandbox"),
        exit: None,
        sysno: 59,
        pathname: b"/bin/sh".to_vec(),
        argv: vec![b"sh".to_vec(), b"-c".to_vec(), b"true".to_vec()],
        ..wire::Execve::default()
    };
    runsc.send(message_type::SYSCALL_EXECVE, exec).await;
    // tgkill(tgid 1, tid 7, SIGKILL): its enter point carries nothing to record.
    let args = [1, 7, libc::SIGKILL as u64];
    runsc
        .send(message_type::SYSCALL_RAW, raw(9, 234, args, None))
        .await;
    runsc
        .send(message_type::SYSCALL_RAW, raw(9, 234, args, exit(0)))
        .await;
    // A point type this reader does not know is skipped, as gVisor's rule has it.
    let unknown = wire::Fork {
        context_data: context(10, "/sandbox"),
        exit: exit(0),
        sysno: 57,
    };
    runsc.send(99, unknown).await;
    drop(runsc);

    let trace = finished_trace(trace).await;
    let event = |at_ms, action, result: Option<&str>| {
        BehaviourEvent::new(at_ms, action, result.map(String::from))
    };
    let mut expected = vec![
        event(
            3,
            Action::NetConnect {
                family: "inet".into(),
                address: Some("1.1.1.1".into()),
                port: Some(443),
            },
            Some("ENETUNREACH"),
        ),
        event(
            5,
            Action::FsOpen {
                path: "/sandbox/x".into(),
                access: FileAccess::Write,
            },
            Some("ok"),
        ),
        event(
            6,
            Action::FsOpen {
                path: "/etc/shadow".into(),
                access: FileAccess::Read,
            },
            Some("EACCES"),
        ),
        event(
            8,
            Action::ProcExec {
                path: "/bin/sh".into(),
                argv: vec!["sh".into(), "-c".into(), "true".into()],
            },
            None,
        ),
        event(
            9,
            Action::ProcSignal {
                target: 7,
                signal: 9,
            },
            Some("ok"),
        ),
    ];
    // Relative paths keep their spelling beside the object.
    expected[1].spelled = Some("./data/../x".into());
    expected[2].spelled = Some("etc/shadow".into());
    assert_eq!(trace.events, expected);
    assert_eq!(trace.incomplete, None);
    assert_eq!(trace.traced_kinds, ActionKind::ALL.to_vec());
    assert_eq!(
        trace.count(ActionKind::ProcSpawn),
        0,
        "a thread is no process"
    );
    assert_eq!(trace.counts.values().sum::<u64>(), 5);
}

#[tokio::test]
async fn spawns_signals_and_files_are_read_from_every_call_that_makes_them() {
    let dir = tempfile::tempdir().unwrap();
    let trace = listen(dir.path());
    let runsc = FakeRunsc::connect(&trace).await;
    let fork = |sysno, errorno| wire::Fork {
        context_data: context(1, "/"),
        exit: exit(errorno),
        sysno,
    };
    runsc.send(message_type::SYSCALL_FORK, fork(57, 0)).await;
    runsc
        .send(message_type::SYSCALL_FORK, fork(58, libc::EAGAIN.into()))
        .await;
    let process = wire::Clone {
        context_data: context(1, "/"),
        exit: exit(0),
        sysno: 56,
        flags: libc::SIGCHLD as u64,
    };
    runsc.send(message_type::SYSCALL_CLONE, process).await;
    // creat is a write whatever its flags say.
    runsc
        .send(message_type::SYSCALL_OPEN, open(2, 85, "/tmp", "new", 0, 0))
        .await;
    let relative_to_fd = wire::Open {
        fd: 5,
        fd_path: b"/data".to_vec(),
        ..open(2, 257, "/tmp", "out", libc::O_RDWR, 0)
    };
    runsc.send(message_type::SYSCALL_OPEN, relative_to_fd).await;
    // kill(-1, SIGTERM), ptrace(PTRACE_ATTACH, 1), unlinkat, renameat2.
    let minus_one = u64::MAX;
    runsc
        .send(
            message_type::SYSCALL_RAW,
            raw(3, 62, [minus_one, 15, 0], exit(libc::EPERM.into())),
        )
        .await;
    runsc
        .send(
            message_type::SYSCALL_RAW,
            raw(3, 101, [16, 1, 0], exit(libc::EPERM.into())),
        )
        .await;
    runsc
        .send(
            message_type::SYSCALL_RAW,
            raw(3, 263, [0; 3], exit(libc::ENOENT.into())),
        )
        .await;
    runsc
        .send(message_type::SYSCALL_RAW, raw(3, 316, [0; 3], exit(0)))
        .await;
    let socket = wire::Socket {
        context_data: context(4, "/"),
        exit: exit(0),
        sysno: 41,
        domain: libc::AF_INET6,
        socket_type: libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
        protocol: 0,
    };
    runsc.send(message_type::SYSCALL_SOCKET, socket).await;
    let bind = wire::Bind {
        context_data: context(4, "/"),
        exit: exit(libc::EADDRINUSE.into()),
        sysno: 49,
        address: b"\x01\x00\x00abstract\x00".to_vec(),
    };
    runsc.send(message_type::SYSCALL_BIND, bind).await;
    drop(runsc);

    let trace = finished_trace(trace).await;
    let actions: Vec<(&Action, Option<&str>)> = trace
        .events
        .iter()
        .map(|event| (&event.action, event.result.as_deref()))
        .collect();
    assert_eq!(
        actions,
        vec![
            (&Action::ProcSpawn {}, Some("ok")),
            (&Action::ProcSpawn {}, Some("EAGAIN")),
            (&Action::ProcSpawn {}, Some("ok")),
            (
                &Action::FsOpen {
                    path: "/tmp/new".into(),
                    access: FileAccess::Write
                },
                Some("ok")
            ),
            (
                &Action::FsOpen {
                    path: "/data/out".into(),
                    access: FileAccess::Write
                },
                Some("ok")
            ),
            (
                &Action::ProcSignal {
                    target: -1,
                    signal: 15
                },
                Some("EPERM")
            ),
            (
                &Action::ProcPtrace {
                    request: 16,
                    target: 1
                },
                Some("EPERM")
            ),
            (&Action::FsUnlink { path: None }, Some("ENOENT")),
            (
                &Action::FsRename {
                    from: None,
                    to: None
                },
                Some("ok")
            ),
            (
                &Action::NetSocket {
                    family: "inet6".into(),
                    socket_type: "dgram".into()
                },
                Some("ok")
            ),
            (
                &Action::NetBind {
                    family: "unix".into(),
                    address: Some("@abstract".into()),
                    port: None
                },
                Some("EADDRINUSE")
            ),
        ]
    );
    assert_eq!(trace.incomplete, None);
}

/// Sends a handshake, then `bytes`, then a connect that must not be
/// recorded; the trace is incomplete, with a reason containing `reason`.
async fn assert_broken_by(bytes: &[u8], reason: &str) {
    let dir = tempfile::tempdir().unwrap();
    let trace = listen(dir.path());
    let runsc = FakeRunsc::connect(&trace).await;
    runsc.connect_to_1111(1).await;
    runsc.send_bytes(bytes).await;
    // The reader drains what follows, recording nothing: the stream may be
    // out of step.
    for at in 0..100 {
        runsc.connect_to_1111(at).await;
    }
    drop(runsc);
    let trace = finished_trace(trace).await;
    let incomplete = trace
        .incomplete
        .as_deref()
        .unwrap_or_else(|| panic!("complete after {bytes:?}"));
    assert!(incomplete.contains(reason), "{incomplete}");
    assert_eq!(
        trace.count(ActionKind::NetConnect),
        1,
        "only what came before"
    );
}

#[tokio::test]
async fn a_malformed_stream_is_never_a_clean_trace() {
    assert_broken_by(
        b"this is not a trace message",
        "header says it is 26740 bytes",
    )
    .await;
    assert_broken_by(&[8, 0, 10], "shorter than its 8-byte header").await;
    assert_broken_by(&[4, 0, 10, 0, 0, 0, 0, 0, 1, 2], "less than 8").await;
    assert_broken_by(
        &[64, 0, 10, 0, 0, 0, 0, 0, 1, 2],
        "longer than the 10-byte message",
    )
    .await;
    // A connect payload that is not protobuf (a length running past the end).
    assert_broken_by(
        &[8, 0, 10, 0, 0, 0, 0, 0, 0x32, 0x7f, 1],
        "type 10 does not decode",
    )
    .await;
}

#[tokio::test]
async fn a_longer_header_is_skipped_and_a_message_that_may_be_cut_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let trace = GvisorTrace::listen_with_buffer(dir.path(), default_sensitive(), 1024).unwrap();
    let runsc = FakeRunsc::connect(&trace).await;
    // A later runsc's longer header: the payload starts where it says.
    let mut longer = vec![
        12,
        0,
        message_type::SYSCALL_FORK as u8,
        0,
        0,
        0,
        0,
        0,
        0xaa,
        0xbb,
        0xcc,
        0xdd,
    ];
    wire::Fork {
        context_data: context(0, "/"),
        exit: exit(0),
        sysno: 57,
    }
    .encode(&mut longer)
    .unwrap();
    runsc.send_bytes(&longer).await;
    let long_exec = wire::Execve {
        context_data: context(1, "/"),
        sysno: 59,
        pathname: b"/bin/sh".to_vec(),
        argv: vec![vec![b'a'; 2000]],
        ..wire::Execve::default()
    };
    runsc.send(message_type::SYSCALL_EXECVE, long_exec).await;
    drop(runsc);
    let trace = finished_trace(trace).await;
    assert_eq!(trace.count(ActionKind::ProcSpawn), 1);
    assert_eq!(trace.count(ActionKind::ProcExec), 0);
    let incomplete = trace.incomplete.unwrap();
    assert!(incomplete.contains("may be cut"), "{incomplete}");
}

#[tokio::test]
async fn an_open_or_exec_runsc_could_not_encode_makes_the_trace_incomplete() {
    // runsc sends a raw point (registers only) before each full open point,
    // and after each raw exec point; a full point it cannot encode (text
    // that is not UTF-8) never comes, uncounted.
    let write = || open(1, 257, "/sandbox", "x", libc::O_WRONLY | libc::O_CREAT, 0);
    let raw_openat = || raw(1, 257, [0; 3], exit(0));
    let raw_execve = || raw(2, 59, [0; 3], None);
    let exec = || wire::Execve {
        context_data: context(2, "/sandbox"),
        sysno: 59,
        pathname: b"/bin/true".to_vec(),
        ..wire::Execve::default()
    };
    for lost in [None, Some("open"), Some("exec")] {
        let dir = tempfile::tempdir().unwrap();
        let trace = listen(dir.path());
        let runsc = FakeRunsc::connect(&trace).await;
        runsc.send(message_type::SYSCALL_RAW, raw_openat()).await;
        runsc.send(message_type::SYSCALL_OPEN, write()).await;
        runsc.send(message_type::SYSCALL_RAW, raw_openat()).await;
        if lost != Some("open") {
            runsc.send(message_type::SYSCALL_OPEN, write()).await;
        }
        runsc.send(message_type::SYSCALL_RAW, raw_execve()).await;
        if lost != Some("exec") {
            runsc.send(message_type::SYSCALL_EXECVE, exec()).await;
        }
        drop(runsc);
        let trace = finished_trace(trace).await;
        assert_eq!(
            trace.count(ActionKind::FsOpen),
            if lost == Some("open") { 1 } else { 2 }
        );
        match lost {
            None => assert_eq!(trace.incomplete, None),
            Some(_) => assert_eq!(
                trace.incomplete.as_deref(),
                Some(
                    "the sandbox did not report 1 of the program's opens and execs \
                     (a path, argument or folder that is not UTF-8?)"
                ),
                "{lost:?}"
            ),
        }
    }
}

#[tokio::test]
async fn points_the_sandbox_dropped_make_the_trace_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    let trace = listen(dir.path());
    let runsc = FakeRunsc::connect(&trace).await;
    runsc.connect_to_1111(0).await;
    let fork = wire::Fork {
        context_data: context(1, "/"),
        exit: exit(0),
        sysno: 57,
    };
    runsc
        .send_counting_drops(message_type::SYSCALL_FORK, 3, fork)
        .await;
    drop(runsc);
    let trace = finished_trace(trace).await;
    assert_eq!(
        trace.incomplete.as_deref(),
        Some("the sandbox dropped 3 trace messages")
    );
    // What did arrive is still recorded.
    assert_eq!(trace.count(ActionKind::NetConnect), 1);
    assert_eq!(trace.count(ActionKind::ProcSpawn), 1);
}

#[tokio::test]
async fn a_stream_that_does_not_end_is_cut_at_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = listen(dir.path());
    let runsc = FakeRunsc::connect(&trace).await;
    runsc.connect_to_1111(0).await;
    let started = Instant::now();
    let grace = Duration::from_millis(300);
    let trace = match trace.finish(grace).await {
        Behaviour::Traced(trace) => trace,
        other => panic!("{other:?}"),
    };
    assert!(started.elapsed() >= grace);
    assert_eq!(
        trace.incomplete.as_deref(),
        Some("the trace stream did not end")
    );
    assert_eq!(trace.count(ActionKind::NetConnect), 1);
    // The reader closed its end: runsc's next point fails instead of waiting.
    let mut buffer = [0; 16];
    let closed = runsc
        .socket
        .recv(&mut buffer)
        .await
        .map(|info| info.bytes_read());
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
}

#[tokio::test]
async fn no_connection_or_no_handshake_is_no_trace() {
    // Nobody connected: said at once, without waiting out the grace.
    let dir = tempfile::tempdir().unwrap();
    let trace = listen(dir.path());
    let started = Instant::now();
    assert_eq!(
        trace.finish(Duration::from_secs(30)).await,
        Behaviour::not_traced(NEVER_CONNECTED)
    );
    assert!(started.elapsed() < Duration::from_secs(10));

    // A connection waiting when the sandbox is gone is still read.
    let dir = tempfile::tempdir().unwrap();
    let trace = listen(dir.path());
    let late = FakeRunsc::connect_only(&trace).await;
    late.send_bytes(&wire::Handshake { version: 1 }.encode_to_vec())
        .await;
    let finishing = tokio::spawn(trace.finish(GRACE));
    let mut answer = [0; 16];
    late.socket.recv(&mut answer).await.unwrap();
    late.connect_to_1111(0).await;
    drop(late);
    let behaviour = finishing.await.unwrap();
    assert_eq!(
        behaviour
            .trace()
            .map(|trace| trace.count(ActionKind::NetConnect)),
        Some(1)
    );

    // Not runsc's handshake: version 0, garbage, nothing before closing,
    // nothing before the grace.
    let cases: [(&[u8], &str); 3] = [
        (&[0x08, 0x00], "gives version 0"),
        (&[0xff, 0xff, 0xff], "not a handshake message"),
        (b"GET / HTTP/1.1\r\n", "not a handshake message"),
    ];
    for (bytes, reason) in cases {
        let dir = tempfile::tempdir().unwrap();
        let trace = listen(dir.path());
        let client = FakeRunsc::connect_only(&trace).await;
        client.send_bytes(bytes).await;
        let behaviour = trace.finish(GRACE).await;
        let Behaviour::NotTraced { reason: said } = &behaviour else {
            panic!("{bytes:?} gave {behaviour:?}");
        };
        assert!(said.contains(reason), "{bytes:?}: {said}");
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = listen(dir.path());
    let client = FakeRunsc::connect_only(&trace).await;
    drop(client);
    assert_eq!(
        trace.finish(GRACE).await,
        Behaviour::not_traced("the sandbox closed its trace before the handshake")
    );
    let dir = tempfile::tempdir().unwrap();
    let trace = listen(dir.path());
    let _silent = FakeRunsc::connect_only(&trace).await;
    assert_eq!(
        trace.finish(Duration::from_millis(200)).await,
        Behaviour::not_traced("the sandbox sent no trace handshake")
    );
}

#[tokio::test]
async fn a_flood_is_counted_whole_and_kept_bounded() {
    const FLOOD: u64 = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let trace = listen(dir.path());
    let runsc = FakeRunsc::connect(&trace).await;
    let sender = tokio::spawn(async move {
        for at in 0..FLOOD {
            runsc.connect_to_1111(at).await;
        }
    });
    sender.await.unwrap();
    let trace = finished_trace(trace).await;
    assert_eq!(trace.count(ActionKind::NetConnect), FLOOD);
    assert_eq!(trace.events.len(), MAX_KEPT_EVENTS);
    assert_eq!(trace.dropped, FLOOD - MAX_KEPT_EVENTS as u64);
    assert_eq!(
        trace.events.last().map(|event| event.at_ms),
        Some(MAX_KEPT_EVENTS as u64 - 1)
    );
    assert_eq!(trace.incomplete, None);
}

#[tokio::test]
async fn dropping_the_trace_closes_the_stream_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let trace = listen(dir.path());
    let socket = endpoint(&trace);
    assert_eq!(socket, dir.path().join("trace.sock"));
    let runsc = FakeRunsc::connect(&trace).await;
    drop(trace);
    let mut buffer = [0; 16];
    let closed = runsc
        .socket
        .recv(&mut buffer)
        .await
        .map(|info| info.bytes_read());
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");

    // A listener nobody connected to goes the same way.
    let trace = listen(dir.path());
    drop(trace);
    assert!(UnixSeqpacket::connect(&socket).await.is_err());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn a_folder_too_deep_for_a_socket_path_is_reached_through_its_descriptor() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("d".repeat(100));
    std::fs::create_dir(&deep).unwrap();
    assert!(deep.join("trace.sock").as_os_str().len() > 107);
    let trace = GvisorTrace::listen(&deep, default_sensitive()).unwrap();
    // runsc is told a short path through this process's descriptor of the
    // folder, and reaches the socket in the deep folder through it.
    let told = endpoint(&trace);
    assert!(
        told.starts_with(format!("/proc/{}/fd/", std::process::id()))
            && told.as_os_str().len() <= 107,
        "{}",
        told.display()
    );
    assert!(deep.join("trace.sock").exists());
    let runsc = FakeRunsc::connect(&trace).await;
    runsc
        .send(
            message_type::SYSCALL_FORK,
            wire::Fork {
                context_data: context(1, "/"),
                exit: exit(0),
                sysno: 57,
            },
        )
        .await;
    drop(runsc);
    let behaviour = trace.finish(Duration::from_secs(5)).await;
    let trace = behaviour.trace().expect("traced");
    assert_eq!(trace.count(ActionKind::ProcSpawn), 1, "{trace:?}");
    assert_eq!(std::fs::read_dir(&deep).unwrap().count(), 0);
}

#[test]
fn listening_outside_a_runtime_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let error = GvisorTrace::listen(dir.path(), Vec::new()).unwrap_err();
    assert!(error.to_string().contains("tokio runtime"), "{error}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn the_config_asks_for_the_points_read() {
    let config = super::pod_init_config(Path::new("/run/x/trace.sock"));
    let session = &config["trace_session"];
    assert_eq!(session["name"], "Default");
    let points: Vec<&str> = session["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|point| point["name"].as_str().unwrap())
        .collect();
    for name in [
        "syscall/openat/exit",
        "syscall/open/exit",
        "syscall/creat/exit",
        "syscall/connect/exit",
        "syscall/bind/exit",
        "syscall/socket/exit",
        "syscall/execve/enter",
        "syscall/execveat/enter",
        "syscall/clone/exit",
        "syscall/fork/exit",
        "syscall/vfork/exit",
        "syscall/sysno/62/exit",
        "syscall/sysno/234/enter",
        "syscall/sysno/316/exit",
    ] {
        assert!(points.contains(&name), "{name} missing");
    }
    let context = |name: &str| {
        let point = session["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|point| point["name"] == name);
        point.unwrap()["context_fields"].clone()
    };
    // The folder only where a path is resolved: a point whose text runsc
    // cannot encode is lost.
    assert_eq!(
        context("syscall/openat/exit"),
        serde_json::json!(["time", "cwd"])
    );
    assert_eq!(
        context("syscall/execve/enter"),
        serde_json::json!(["time", "cwd"])
    );
    assert_eq!(context("syscall/connect/exit"), serde_json::json!(["time"]));
    assert_eq!(
        context("syscall/sysno/62/enter"),
        serde_json::json!(["time"])
    );
    assert_eq!(context("syscall/sysno/257/exit"), serde_json::Value::Null);
    let sink = &session["sinks"][0];
    assert_eq!(sink["name"], "remote");
    assert_eq!(sink["config"]["endpoint"], "/run/x/trace.sock");
    assert!(sink["config"]["retries"].as_u64().unwrap() >= 1_000_000);
}

/// runsc, when it can run here: root and /usr/bin/runsc.
fn real_runsc() -> Option<&'static str> {
    const RUNSC: &str = "/usr/bin/runsc";
    if !Path::new(RUNSC).exists() {
        println!("skipped: {RUNSC} is absent");
        return None;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: runsc needs root here");
        return None;
    }
    Some(RUNSC)
}

/// Runs `python3 -c program args...` under `runsc do` with the trace, and
/// returns the behaviour and the program's output.
async fn run_traced(runsc: &str, dir: &Path, program: &str, args: &[&str]) -> (Behaviour, String) {
    let trace = listen(dir);
    let state = dir.join("state");
    std::fs::create_dir(&state).unwrap();
    let output = tokio::process::Command::new(runsc)
        .arg(format!("--root={}", state.display()))
        .arg("--network=none")
        .arg(format!(
            "--pod-init-config={}",
            trace.pod_init_config_path().display()
        ))
        .args(["do", "--quiet", "--", "/usr/bin/python3", "-c", program])
        .args(args)
        .current_dir(dir)
        // The program sees runsc's environment: not the test's (whose
        // LD_LIBRARY_PATH sends the loader probing under /root/**, which
        // are sensitive reads).
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), output)
        .await
        .expect("runsc ended within two minutes")
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "runsc failed: {said}");
    (trace.finish(GRACE).await, said)
}

#[tokio::test]
async fn real_runsc_streams_what_a_program_tried() {
    let Some(runsc) = real_runsc() else { return };
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let program = r#"
import os, socket, sys
try:
    socket.create_connection(("1.1.1.1", 443), timeout=5)
except OSError as error:
    print("connect:", error)
os.system("true")
os.chdir(sys.argv[1])
with open("written.txt", "w") as out:
    out.write("x")
try:
    open("/etc/shadow").read()
except OSError as error:
    print("shadow:", error)
os.rename("written.txt", "moved.txt")
os.unlink("moved.txt")
os.kill(os.getpid(), 0)
"#;
    let (behaviour, said) =
        run_traced(runsc, dir.path(), program, &[&work.to_string_lossy()]).await;
    let trace = behaviour.trace().unwrap_or_else(|| panic!("{behaviour:?}"));
    let listed = serde_json::to_string_pretty(&trace).unwrap();
    println!("{listed}");
    assert_eq!(trace.incomplete, None, "{said}");
    let kinds: Vec<ActionKind> = trace
        .events
        .iter()
        .map(|event| event.action.kind())
        .collect();
    use ActionKind::*;
    let expected = [
        NetSocket, NetConnect, ProcSpawn, ProcExec, FsOpen, FsOpen, FsRename, FsUnlink, ProcSignal,
    ];
    assert_eq!(kinds, expected, "{listed}");
    let [
        socket,
        connect,
        spawn,
        exec,
        written,
        shadow,
        renamed,
        unlinked,
        signal,
    ] = &trace.events[..]
    else {
        unreachable!()
    };
    assert_eq!(
        socket.action,
        Action::NetSocket {
            family: "inet".into(),
            socket_type: "stream".into()
        }
    );
    assert_eq!(
        connect.action,
        Action::NetConnect {
            family: "inet".into(),
            address: Some("1.1.1.1".into()),
            port: Some(443)
        }
    );
    // --network=none: no route to anywhere.
    let unreachable = ["EHOSTUNREACH", "ENETUNREACH"].map(Some);
    assert!(unreachable.contains(&connect.result.as_deref()), "{listed}");
    assert_eq!(spawn.result.as_deref(), Some("ok"));
    assert_eq!(
        exec.action,
        Action::ProcExec {
            path: "/bin/sh".into(),
            argv: vec!["sh".into(), "-c".into(), "true".into()]
        }
    );
    assert_eq!(exec.result, None, "an exec that succeeds does not return");
    let written_path = work.join("written.txt").to_string_lossy().into_owned();
    assert_eq!(
        (&written.action, written.result.as_deref()),
        (
            &Action::FsOpen {
                path: written_path,
                access: FileAccess::Write
            },
            Some("ok")
        )
    );
    assert_eq!(
        shadow.action,
        Action::FsOpen {
            path: "/etc/shadow".into(),
            access: FileAccess::Read
        }
    );
    assert!(shadow.result.is_some());
    assert_eq!(renamed.result.as_deref(), Some("ok"));
    assert_eq!(unlinked.result.as_deref(), Some("ok"));
    // The program is the sandbox's first process.
    assert_eq!(
        (&signal.action, signal.result.as_deref()),
        (
            &Action::ProcSignal {
                target: 1,
                signal: 0
            },
            Some("ok")
        )
    );
    let times: Vec<u64> = trace.events.iter().map(|event| event.at_ms).collect();
    assert!(times.is_sorted() && times[0] > 0, "{times:?}");
}

#[tokio::test]
async fn real_runsc_sees_nothing_of_a_benign_program() {
    let Some(runsc) = real_runsc() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (behaviour, said) = run_traced(runsc, dir.path(), "print(sum(range(10)))", &[]).await;
    assert_eq!(said.trim(), "45");
    let trace = behaviour.trace().unwrap_or_else(|| panic!("{behaviour:?}"));
    assert_eq!(trace.incomplete, None);
    assert!(trace.events.is_empty(), "{trace:?}");
}

#[tokio::test]
async fn real_runsc_a_program_hiding_its_paths_leaves_an_incomplete_trace() {
    let Some(runsc) = real_runsc() else { return };
    let dir = tempfile::tempdir().unwrap();
    // runsc cannot encode a point with text that is not UTF-8 and drops it
    // uncounted: here every open made from such a folder (its `cwd`).
    let program = r#"
import os, socket, sys
dark = os.path.join(os.fsencode(sys.argv[1]), b"\xff")
os.mkdir(dark)
os.chdir(dark)
with open("hidden.txt", "w") as out:
    out.write("x")
try:
    socket.create_connection(("1.1.1.1", 443), timeout=5)
except OSError:
    pass
"#;
    let (behaviour, said) =
        run_traced(runsc, dir.path(), program, &[&dir.path().to_string_lossy()]).await;
    let trace = behaviour.trace().unwrap_or_else(|| panic!("{behaviour:?}"));
    let listed = serde_json::to_string_pretty(&trace).unwrap();
    let incomplete = trace
        .incomplete
        .as_deref()
        .unwrap_or_else(|| panic!("complete: {listed} {said}"));
    assert!(incomplete.contains("did not report"), "{incomplete}");
    // Points without the folder still arrive.
    assert_eq!(trace.count(ActionKind::NetConnect), 1, "{listed}");
}

/// The other roads to a kind: a send that connects, the other signalling
/// calls, a send whose destination the trace cannot see, a symlink made by
/// the program, a read through a descriptor the point does not name.
#[tokio::test]
async fn every_call_that_does_a_thing_is_recorded_or_leaves_it_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let trace = listen(dir.path());
    let runsc = FakeRunsc::connect(&trace).await;
    let call = |after_ms: u64, sysno: u64, args: [u64; 6], errorno: i64| wire::Syscall {
        context_data: context(after_ms, "/sandbox"),
        exit: exit(errorno),
        sysno,
        arg1: args[0],
        arg2: args[1],
        arg3: args[2],
        arg4: args[3],
        arg5: args[4],
        arg6: args[5],
    };
    // sendto on a connected socket: no event; with MSG_FASTOPEN: a connection.
    let connected = call(1, 44, [3, 0x1000, 1, 0, 0, 0], 0);
    runsc.send(message_type::SYSCALL_RAW, connected).await;
    let fastopen = call(
        2,
        44,
        [3, 0x1000, 1, 0x2000_0000, 0x2000, 16],
        libc::EPIPE.into(),
    );
    runsc.send(message_type::SYSCALL_RAW, fastopen).await;
    // pidfd_send_signal and rt_sigqueueinfo are signals.
    for (after_ms, sysno, args) in [
        (3, 424, [4, 9, 0, 0, 0, 0]),
        (4, 129, [7, 10, 0x3000, 0, 0, 0]),
    ] {
        runsc
            .send(message_type::SYSCALL_RAW, call(after_ms, sysno, args, 0))
            .await;
    }
    // A read through a descriptor the point does not name: unresolved, kept.
    let via_fd = open(5, 2, "/", "/proc/self/fd/9/shadow", libc::O_RDONLY, 0);
    runsc.send(message_type::SYSCALL_OPEN, via_fd).await;
    // An alias it can resolve: /etc/shadow, spelled beside it.
    let alias = open(6, 2, "/", "/proc/self/root/etc/shadow", libc::O_RDONLY, 13);
    runsc.send(message_type::SYSCALL_OPEN, alias).await;
    // sendmsg: its destination is in memory the trace does not show; a
    // symlink the program made: its paths may reach other objects.
    for (after_ms, sysno, args) in [
        (7, 46, [3, 0x4000, 0, 0, 0, 0]),
        (8, 266, [0x5000, 0, 0x6000, 0, 0, 0]),
    ] {
        runsc
            .send(message_type::SYSCALL_RAW, call(after_ms, sysno, args, 0))
            .await;
    }
    drop(runsc);

    let trace = finished_trace(trace).await;
    let kinds: Vec<ActionKind> = trace.events.iter().map(|e| e.action.kind()).collect();
    assert_eq!(
        kinds,
        [
            ActionKind::NetConnect,
            ActionKind::ProcSignal,
            ActionKind::ProcSignal,
            ActionKind::FsOpen,
            ActionKind::FsOpen,
            ActionKind::FsOpen
        ],
        "{trace:?}"
    );
    // The symlink is a write onto a path the raw point does not show.
    assert!(trace.events[5].unresolved);
    assert_eq!(
        trace.events[5].action,
        Action::FsOpen {
            path: String::new(),
            access: FileAccess::Write
        }
    );
    assert!(trace.events[0].unresolved && trace.events[1].unresolved);
    assert_eq!(
        trace.events[2].action,
        Action::ProcSignal {
            target: 7,
            signal: 10
        }
    );
    assert!(trace.events[3].unresolved, "{:?}", trace.events[3]);
    assert_eq!(
        trace.events[3].action,
        Action::FsOpen {
            path: "/proc/self/fd/9/shadow".into(),
            access: FileAccess::Read
        }
    );
    assert!(!trace.events[4].unresolved);
    assert_eq!(
        trace.events[4].spelled.as_deref(),
        Some("/proc/self/root/etc/shadow")
    );
    assert!(!trace.traces(ActionKind::NetConnect), "{trace:?}");
    assert!(
        trace
            .paths_unresolved
            .as_deref()
            .is_some_and(|why| why.contains("symlinkat"))
    );
    assert_eq!(trace.incomplete, None);
}

/// The sandbox waits for the reader only while its points are unread: the
/// time from a point's stamp to its reading counts as the tracer's, once
/// for points that overlap, so that the program's window can give it back.
#[tokio::test]
async fn the_time_points_wait_to_be_read_is_counted_as_the_tracers() {
    let dir = tempfile::tempdir().unwrap();
    let trace = listen(dir.path());
    let hold = trace.hold();
    let runsc = FakeRunsc::connect(&trace).await;
    let now_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64
    };
    let late = Duration::from_millis(300);
    let stamped = now_ns() - late.as_nanos() as i64;
    // Two points stamped 300 ms ago (held up, as by a reader that did not
    // read): 300 ms, not 600.
    for _ in 0..2 {
        let connect = wire::Connect {
            context_data: Some(wire::ContextData {
                time_ns: stamped,
                cwd: Vec::new(),
            }),
            exit: exit(libc::ENETUNREACH.into()),
            sysno: 42,
            address: vec![2, 0, 0x01, 0xbb, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0],
        };
        runsc.send(message_type::SYSCALL_CONNECT, connect).await;
    }
    let counted = tokio::time::timeout(GRACE, async {
        while hold.bound() < late {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(counted.is_ok(), "the late points were not counted");
    drop(runsc);
    let held = hold.bound();
    let trace = finished_trace(trace).await;
    assert_eq!(trace.count(ActionKind::NetConnect), 2);
    assert!(
        held < late * 2,
        "overlapping points counted twice: {held:?}"
    );
}
