//! runc traced with seccomp user notification: what a program tried is
//! recorded, the policy is unchanged (refused calls still fail as before),
//! ordinary and threaded programs give clean traces and never hang.

use progscore_sandbox::SandboxClientExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use progscore_oci::{OciClient, OciOptions};
use progscore_sandbox::behaviour::{Action, ActionKind, FileAccess};
use progscore_sandbox::{
    Behaviour, BehaviourTrace, Invocation, Outcome, RuntimeProfile, TraceSpec,
};

use super::{leftovers, run, spec, stdout};

const TRACED: &str = "python-oci-traced";

fn traced_client() -> OciClient {
    let mut traced = spec("python-oci");
    traced.trace = Some(TraceSpec::On(true));
    let traced = RuntimeProfile::from_spec(TRACED, &traced, Path::new(".")).expect("profile");
    let plain =
        RuntimeProfile::from_spec("python-oci", &spec("python-oci"), Path::new(".")).unwrap();
    OciClient::new(vec![traced, plain], OciOptions::default()).expect("client")
}

fn trace_of(run: &progscore_sandbox::ProgramRun) -> BehaviourTrace {
    match &run.events[0].behaviour {
        Some(Behaviour::Traced(trace)) => trace.clone(),
        other => panic!("not traced: {other:?} ({run:?})"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runc_records_what_a_program_tried_and_answers_as_its_profile() {
    let client = traced_client();
    let program = r#"import ctypes, os, socket
s = socket.socket()
try:
    s.connect(("1.1.1.1", 443))
except OSError as e:
    print("connect", e.errno)
os.system("true")
with open("/tmp/x", "w") as f:
    f.write("x")
try:
    open("/etc/shadow").read()
except OSError as e:
    print("shadow", e.errno)
os.kill(os.getpid(), 0)
libc = ctypes.CDLL(None, use_errno=True)
print("ptrace", libc.ptrace(0, 0, 0, 0), ctypes.get_errno())
try:
    socket.socket(17, socket.SOCK_RAW)
except OSError as e:
    print("packet", e.errno)
"#;
    let traced = run(&client, TRACED, program).await;
    let plain = run(&client, "python-oci", program).await;
    for run in [&traced, &plain] {
        assert_eq!(
            run.events[0].outcome,
            Outcome::Exited { exit_code: 0 },
            "{run:?}"
        );
    }
    // The policy is unchanged: the same results traced and untraced.
    assert_eq!(
        stdout(&traced),
        "connect 101\nshadow 13\nptrace -1 1\npacket 1\n"
    );
    assert_eq!(stdout(&traced), stdout(&plain));
    assert_eq!(plain.events[0].behaviour, None, "an untraced profile");

    let trace = trace_of(&traced);
    eprintln!("{}", serde_json::to_string_pretty(&trace).unwrap());
    assert_eq!(trace.incomplete, None);
    // Opens are the listener's own (verified, with their results); the
    // rest read their arguments from the program's memory.
    assert_eq!(trace.arguments_unverified, None);
    let find = |wanted: &dyn Fn(&Action) -> bool| {
        trace
            .events
            .iter()
            .find(|event| wanted(&event.action))
            .unwrap_or_else(|| panic!("no such event in {:#?}", trace.events))
            .clone()
    };
    let connect = find(&|a| {
        *a == Action::NetConnect {
            family: "inet".into(),
            address: Some("1.1.1.1".into()),
            port: Some(443),
        }
    });
    // Allowed calls run after the answer: their result is not seen.
    assert_eq!(connect.result, None);
    assert!(connect.unverified);
    find(&|a| {
        *a == Action::NetSocket {
            family: "inet".into(),
            socket_type: "stream".into(),
        }
    });
    find(&|a| *a == Action::ProcSpawn {});
    // The exec reached the object `/bin/sh` names (in this image a symlink
    // to dash, through the /bin symlink): the event names the object, the
    // names on the way beside it.
    let exec = trace
        .events
        .iter()
        .find(|event| {
            matches!(&event.action, Action::ProcExec { .. })
                && event.via.iter().any(|name| name == "/bin/sh")
        })
        .unwrap_or_else(|| panic!("no exec through /bin/sh in {:#?}", trace.events));
    assert!(!exec.unresolved);
    let Action::ProcExec { argv, .. } = &exec.action else {
        unreachable!()
    };
    assert_eq!(argv, &["sh", "-c", "true"]);
    let write = find(&|a| {
        *a == Action::FsOpen {
            path: "/tmp/x".into(),
            access: FileAccess::Write,
        }
    });
    assert_eq!(
        (write.result.as_deref(), write.unverified),
        (Some("ok"), false)
    );
    // The listener opened it as the program: refused as the program is.
    let shadow = find(&|a| {
        *a == Action::FsOpen {
            path: "/etc/shadow".into(),
            access: FileAccess::Read,
        }
    });
    assert_eq!(
        (shadow.result.as_deref(), shadow.unverified),
        (Some("EACCES"), false)
    );
    assert!(trace.traces(ActionKind::FsOpen), "{trace:?}");
    find(&|a| matches!(a, Action::ProcSignal { target, signal: 0 } if *target > 0));
    let ptrace = find(&|a| {
        *a == Action::ProcPtrace {
            request: 0,
            target: 0,
        }
    });
    assert_eq!(ptrace.result.as_deref(), Some("EPERM"));
    let packet = find(&|a| {
        *a == Action::NetSocket {
            family: "family 17".into(),
            socket_type: "raw".into(),
        }
    });
    assert_eq!(packet.result.as_deref(), Some("EPERM"));
    // The program's own start (runc's exec of python) is not an event.
    assert!(
        !trace
            .events
            .iter()
            .any(|e| matches!(&e.action, Action::ProcExec { path, .. } if path.contains("python")))
    );
    assert_eq!(leftovers(&client), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn benign_and_threaded_programs_give_clean_traces_and_never_hang() {
    let client = traced_client();
    for program in [
        "print(sum(range(10)))\n",
        "import threading\nthreads = [threading.Thread(target=lambda: sum(range(10000))) for _ in range(8)]\n\
         [t.start() for t in threads]\n[t.join() for t in threads]\nprint('done')\n",
    ] {
        let run = run(&client, TRACED, program).await;
        assert_eq!(
            run.events[0].outcome,
            Outcome::Exited { exit_code: 0 },
            "{run:?}"
        );
        let trace = trace_of(&run);
        assert_eq!(trace.incomplete, None, "{trace:?}");
        assert!(trace.events.is_empty(), "{program}: {trace:#?}");
        assert!(trace.counts.is_empty());
        // Every open was the listener's: path filters on opens decide.
        assert!(trace.traces(ActionKind::FsOpen), "{program}: {trace:?}");
    }

    // 20 threads opening files at once: every call answered, every write
    // counted, nothing hangs.
    let busy = r#"import threading
def work(n):
    for i in range(20):
        open("/etc/passwd").read()
        with open(f"/tmp/t{n}", "w") as f:
            f.write("x")
threads = [threading.Thread(target=work, args=(n,)) for n in range(20)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("done")
"#;
    let run = run(&client, TRACED, busy).await;
    assert_eq!(
        run.events[0].outcome,
        Outcome::Exited { exit_code: 0 },
        "{run:?}"
    );
    assert_eq!(stdout(&run), "done\n");
    let trace = trace_of(&run);
    assert_eq!(trace.incomplete, None);
    assert_eq!(
        trace.count(progscore_sandbox::behaviour::ActionKind::FsOpen),
        400,
        "{trace:?}"
    );
    assert_eq!(leftovers(&client), Vec::<String>::new());
}

/// Not a pass/fail figure: the time 20 benign runs take traced and not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traced_runs_cost_little() {
    let client = traced_client();
    let mut took = Vec::new();
    for profile in ["python-oci", TRACED, "python-oci", TRACED] {
        let start = Instant::now();
        for _ in 0..20 {
            let run = client
                .execute(
                    b"print(sum(range(10)))\n",
                    profile,
                    &[Invocation::default()],
                )
                .await
                .unwrap();
            assert_eq!(run.events[0].outcome, Outcome::Exited { exit_code: 0 });
        }
        took.push((profile, start.elapsed()));
    }
    eprintln!("20 benign runs: {took:?}");
    let total = |name: &str| -> Duration {
        took.iter()
            .filter(|(profile, _)| *profile == name)
            .map(|(_, d)| *d)
            .sum()
    };
    // Loose: a hang or a per-call stall would show as far more.
    assert!(total(TRACED) < total("python-oci") * 2, "{took:?}");
}

/// A call the listener cannot decode (an x32 `openat`, or a 32-bit `open`
/// through `int 0x80`, which the profile's x32 and x86 rules notify) is
/// refused with ENOSYS, as a kernel without that ABI would: the program
/// runs on, its trace complete, its later calls recorded. (It used to stop
/// the listener and make the run a sandbox error, at the program's will.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_listener_cannot_decode_is_refused_with_enosys_and_the_run_goes_on() {
    let client = traced_client();
    let program = r#"import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.syscall(0x40000101, -100, b'/tmp/y', 0), ctypes.get_errno())
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
# Below 4 GiB (MAP_32BIT), so that a 32-bit call can name it.
page = libc.mmap(None, 4096, 7, 0x62, -1, 0)
path = page + 64
ctypes.memmove(path, b'/etc/hostname\0', 14)
# push rbx; mov eax, 5 (open); mov ebx, path; xor ecx, ecx; int 0x80; pop rbx; ret
code = b'\x53\xb8\x05\x00\x00\x00\xbb' + path.to_bytes(4, 'little') + b'\x31\xc9\xcd\x80\x5b\xc3'
ctypes.memmove(page, code, len(code))
print(ctypes.CFUNCTYPE(ctypes.c_int)(page)())
open('/tmp/z', 'w')
print('after')
"#;
    let run = run(&client, TRACED, program).await;
    let event = &run.events[0];
    assert_eq!(event.outcome, Outcome::Exited { exit_code: 0 }, "{run:?}");
    assert_eq!(stdout(&run), "-1 38\n-38\nafter\n", "{run:?}");
    let trace = trace_of(&run);
    assert_eq!(trace.incomplete, None, "{trace:?}");
    assert!(
        trace.events.iter().any(|event| event.action
            == Action::FsOpen {
                path: "/tmp/z".into(),
                access: FileAccess::Write
            }),
        "{trace:?}"
    );
    assert_eq!(leftovers(&client), Vec::<String>::new());
}

/// A traced program killed at its time limit while its calls wait on the
/// listener: the limit's outcome, a complete trace of what it did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_program_killed_at_its_limit_keeps_the_limits_outcome() {
    let client = traced_client();
    let run = run(
        &client,
        TRACED,
        "import threading\ndef spin():\n    while True:\n        open('/tmp/a', 'w').close()\n\
         for _ in range(4):\n    threading.Thread(target=spin).start()\n",
    )
    .await;
    let event = &run.events[0];
    assert!(
        matches!(event.outcome, Outcome::TimedOut { .. }),
        "{:?}",
        event.outcome
    );
    let trace = trace_of(&run);
    assert!(
        trace.count(progscore_sandbox::behaviour::ActionKind::FsOpen) > 100,
        "{trace:?}"
    );
    assert!(trace.dropped > 0);
    assert_eq!(trace.incomplete, None);
    assert_eq!(leftovers(&client), Vec::<String>::new());
}
