//! Backend-agnostic probes: a program, its invocations, and a check of the run.
//!
//! Nothing here knows which backend runs the program, so the cross-backend
//! conformance suite can include this file (`#[path = ".../probes/mod.rs"]`) and
//! run the same probes against Docker (runc, runsc) and WASI profiles. A probe
//! whose expectation differs per backend takes the difference as a parameter
//! ([`Isolation`]) and says so in its failure message, never skipping silently.

#![allow(dead_code)] // each test binary uses a subset

use progscore_sandbox::{Invocation, InvocationEvent, Outcome, ProgramRun, sha256_hex};

/// What must hold of a run; `Err` says what was wrong.
pub type Check = Box<dyn Fn(&ProgramRun) -> Result<(), String> + Send + Sync>;

/// A program, how to invoke it, and what must hold of the run.
pub struct Probe {
    /// Short name for messages.
    pub name: &'static str,
    /// The program's bytes, run verbatim.
    pub program: Vec<u8>,
    /// Its invocations.
    pub invocations: Vec<Invocation>,
    /// Checks the run.
    pub check: Check,
}

/// How a backend isolates the file system, for the probes that depend on it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Isolation {
    /// A container: a root file system of its own; the program is not root.
    Container,
    /// WASI: only the preopened folders exist (`/program`, `/usr/local/lib`,
    /// and `/tmp` with a scratch folder).
    WasiPreopens,
}

impl Probe {
    fn new(
        name: &'static str,
        program: impl Into<Vec<u8>>,
        invocations: Vec<Invocation>,
        check: impl Fn(&ProgramRun) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        Probe {
            name,
            program: program.into(),
            invocations,
            check: Box::new(check),
        }
    }
}

/// The first event, or why there is none.
pub fn only_event(run: &ProgramRun) -> Result<&InvocationEvent, String> {
    run.events.first().ok_or_else(|| "no event".to_string())
}

/// Exited with `code`, else a message with the event's outcome and stderr.
pub fn expect_exit(event: &InvocationEvent, code: i64) -> Result<(), String> {
    match event.outcome {
        Outcome::Exited { exit_code } if exit_code == code => Ok(()),
        _ => Err(format!(
            "expected exit {code}, got {:?}; stderr: {}",
            event.outcome,
            event.stderr.data.to_string_lossy()
        )),
    }
}

fn expect_stdout(event: &InvocationEvent, want: &[u8]) -> Result<(), String> {
    if event.stdout.data.as_bytes() == want && !event.stdout.truncated {
        Ok(())
    } else {
        Err(format!(
            "stdout {:?} (truncated: {}), expected {:?}; stderr: {}",
            event.stdout.data,
            event.stdout.truncated,
            String::from_utf8_lossy(want),
            event.stderr.data.to_string_lossy()
        ))
    }
}

/// `square.py 3` prints `9`.
pub fn square() -> Probe {
    Probe::new(
        "square",
        "import sys\nprint(int(sys.argv[1]) ** 2)\n",
        vec![Invocation::with_args(["3"])],
        |run| {
            let event = only_event(run)?;
            expect_exit(event, 0)?;
            expect_stdout(event, b"9\n")
        },
    )
}

/// Arguments arrive exactly, including spaces, quotes, empty and non-ASCII ones.
pub fn argv_exact() -> Probe {
    let args = ["a b", "", "'quoted'", "héllo", "--flag=1", "$HOME"];
    Probe::new(
        "argv exact",
        "import sys, json\nsys.stdout.write(json.dumps(sys.argv[1:]))\n",
        vec![Invocation::with_args(args)],
        move |run| {
            let event = only_event(run)?;
            expect_exit(event, 0)?;
            let want =
                format!("[{}]", args.map(|a| format!("{a:?}")).join(", ")).replace("é", "\\u00e9");
            expect_stdout(event, want.as_bytes())
        },
    )
}

/// Stdin bytes (NUL, CRLF, invalid UTF-8) come back exactly.
pub fn stdin_exact() -> Probe {
    let input: Vec<u8> = b"line one\r\nzero\0byte \xff\xfe end without newline".to_vec();
    let expected = input.clone();
    Probe::new(
        "stdin exact",
        "import sys\nsys.stdout.buffer.write(sys.stdin.buffer.read())\n",
        vec![Invocation::default().stdin(input)],
        move |run| {
            let event = only_event(run)?;
            expect_exit(event, 0)?;
            expect_stdout(event, &expected)
        },
    )
}

/// The program file holds exactly the submitted bytes: CRLF line ends,
/// trailing spaces, non-ASCII text.
pub fn program_bytes_verbatim() -> Probe {
    let program = "# -*- coding: utf-8 -*-   \r\n\
                   import hashlib, sys   \r\n\
                   # non-ASCII: héllo wörld ✓ 🐍\t \r\n\
                   data = open(sys.argv[0], 'rb').read()\r\n\
                   print(hashlib.sha256(data).hexdigest(), len(data))\r\n"
        .as_bytes()
        .to_vec();
    let want = format!("{} {}\n", sha256_hex(&program), program.len());
    Probe::new(
        "program bytes verbatim",
        program,
        vec![Invocation::default()],
        move |run| {
            let event = only_event(run)?;
            expect_exit(event, 0)?;
            expect_stdout(event, want.as_bytes())
        },
    )
}

/// Output that is not UTF-8 is kept as bytes.
pub fn non_utf8_output() -> Probe {
    Probe::new(
        "non-UTF-8 output",
        "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe\\x00raw\\x80')\nsys.stderr.buffer.write(b'\\xc3\\x28')\n",
        vec![Invocation::default()],
        |run| {
            let event = only_event(run)?;
            expect_exit(event, 0)?;
            expect_stdout(event, b"\xff\xfe\x00raw\x80")?;
            if event.stderr.data.as_bytes() != b"\xc3\x28" {
                return Err(format!("stderr {:?}", event.stderr.data));
            }
            Ok(())
        },
    )
}

/// `sys.exit(3)` is exit status 3.
pub fn exit_code() -> Probe {
    Probe::new(
        "sys.exit(3)",
        "import sys\nprint('bye')\nsys.exit(3)\n",
        vec![Invocation::default()],
        |run| {
            let event = only_event(run)?;
            expect_exit(event, 3)?;
            expect_stdout(event, b"bye\n")
        },
    )
}

/// An uncaught exception: exit 1, traceback on stderr.
pub fn uncaught_exception() -> Probe {
    Probe::new(
        "uncaught exception",
        "def f():\n    return 1 / 0\nf()\n",
        vec![Invocation::default()],
        |run| {
            let event = only_event(run)?;
            expect_exit(event, 1)?;
            let stderr = event.stderr.data.to_string_lossy();
            if stderr.contains("Traceback") && stderr.contains("ZeroDivisionError") {
                Ok(())
            } else {
                Err(format!("stderr has no traceback: {stderr}"))
            }
        },
    )
}

/// A busy loop ends as `timed_out`; output printed before it is kept.
pub fn busy_loop() -> Probe {
    Probe::new(
        "busy loop",
        "print('started', flush=True)\nwhile True:\n    pass\n",
        vec![Invocation::default()],
        |run| {
            let event = only_event(run)?;
            if event.outcome != Outcome::timed_out() {
                return Err(format!("expected timed_out, got {:?}", event.outcome));
            }
            expect_stdout(event, b"started\n")
        },
    )
}

/// A long sleep ends as `timed_out`.
pub fn long_sleep() -> Probe {
    Probe::new(
        "sleep",
        "import time\ntime.sleep(3600)\n",
        vec![Invocation::default()],
        |run| {
            let event = only_event(run)?;
            if event.outcome == Outcome::timed_out() {
                Ok(())
            } else {
                Err(format!("expected timed_out, got {:?}", event.outcome))
            }
        },
    )
}

/// Allocating without bound ends as `memory_limit`, or at least a clean
/// failure (a non-zero exit with `MemoryError`), never a host crash.
pub fn memory_hog() -> Probe {
    Probe::new(
        "memory hog",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(1 << 20))\n",
        vec![Invocation::default()],
        |run| {
            let event = only_event(run)?;
            match &event.outcome {
                Outcome::MemoryLimit => Ok(()),
                Outcome::Exited { exit_code } if *exit_code != 0 => {
                    let stderr = event.stderr.data.to_string_lossy();
                    if stderr.contains("MemoryError") {
                        Ok(())
                    } else {
                        Err(format!("exit {exit_code} without MemoryError: {stderr}"))
                    }
                }
                other => Err(format!("expected memory_limit, got {other:?}")),
            }
        },
    )
}

/// A program that catches its own `MemoryError` keeps its exit status. 1 GiB:
/// more than any test profile's cap, yet addressable by a 32-bit WASI guest.
pub fn memory_error_caught() -> Probe {
    Probe::new(
        "MemoryError caught",
        "try:\n    x = bytearray(1 << 30)\nexcept MemoryError:\n    print('caught')\n",
        vec![Invocation::default()],
        |run| {
            let event = only_event(run)?;
            expect_exit(event, 0)?;
            expect_stdout(event, b"caught\n")
        },
    )
}

/// 10 MB to stdout with a smaller cap: truncated, every byte counted, no deadlock.
pub fn output_flood(cap: u64) -> Probe {
    const TOTAL: u64 = 10 * 1024 * 1024;
    Probe::new(
        "10 MB to stdout",
        format!(
            "import sys\nblock = b'x' * 65536\nfor _ in range({}):\n    sys.stdout.buffer.write(block)\nsys.stdout.flush()\nprint('done', file=sys.stderr)\n",
            TOTAL / 65536
        ),
        vec![Invocation::default()],
        move |run| {
            let event = only_event(run)?;
            expect_exit(event, 0)?;
            let out = &event.stdout;
            if !out.truncated || out.total_bytes != TOTAL || out.data.len() as u64 != cap {
                return Err(format!(
                    "stdout kept {} of {} bytes (truncated: {}), cap {cap}",
                    out.data.len(),
                    out.total_bytes,
                    out.truncated
                ));
            }
            if out.data.as_bytes().iter().any(|&b| b != b'x') {
                return Err("kept bytes are not the program's".into());
            }
            if event.stderr.data.as_bytes() != b"done\n" {
                return Err(format!("stderr {:?}", event.stderr.data));
            }
            Ok(())
        },
    )
}

/// The program cannot modify its own file.
pub fn cannot_write_program() -> Probe {
    Probe::new(
        "cannot write the program",
        "import sys\ntry:\n    open(sys.argv[0], 'a').write('# changed')\n    print('written')\nexcept OSError as e:\n    print('refused', type(e).__name__)\n",
        vec![Invocation::default()],
        |run| {
            let event = only_event(run)?;
            expect_exit(event, 0)?;
            let out = event.stdout.data.to_string_lossy();
            if out.starts_with("refused") {
                Ok(())
            } else {
                Err(format!("the program could write its own file: {out}"))
            }
        },
    )
}

/// No host paths: `/etc/passwd` is absent; with WASI, `/` lists only the
/// preopens (or cannot be listed at all).
pub fn no_host_paths(isolation: Isolation) -> Probe {
    Probe::new(
        "no host paths",
        "import os\n\
         try:\n    print('root:', sorted(os.listdir('/')))\nexcept OSError as e:\n    print('root: unlistable', type(e).__name__)\n\
         for p in ['/etc/passwd', '/proc/self/environ', '/root', '/home', '/var/cache/progscore']:\n    print(p, os.path.exists(p))\n",
        vec![Invocation::default()],
        move |run| {
            let event = only_event(run)?;
            expect_exit(event, 0)?;
            let out = event.stdout.data.to_string_lossy();
            let mut lines = out.lines();
            let root = lines.next().unwrap_or_default();
            match isolation {
                Isolation::WasiPreopens => {
                    for line in lines {
                        if !line.ends_with(" False") {
                            return Err(format!("host path visible under WASI: {line}"));
                        }
                    }
                    let allowed = ["'program'", "'usr'", "'tmp'"];
                    if let Some(list) = root.strip_prefix("root: [") {
                        let names = list.trim_end_matches(']');
                        if names
                            .split(", ")
                            .filter(|n| !n.is_empty())
                            .any(|n| !allowed.contains(&n))
                        {
                            return Err(format!("`/` lists more than the preopens: {root}"));
                        }
                    }
                    Ok(())
                }
                Isolation::Container => {
                    // A container has its own /etc/passwd; what matters there is
                    // that the host's folders are absent.
                    if out.contains("/var/cache/progscore True") {
                        return Err(format!("host cache visible: {out}"));
                    }
                    Ok(())
                }
            }
        },
    )
}

/// No network: creating or connecting a socket fails with an ordinary exception.
pub fn no_network() -> Probe {
    Probe::new(
        "no network",
        "import socket\n\
         for what in ['create', 'connect', 'resolve']:\n\
         \x20   try:\n\
         \x20       if what == 'create':\n            socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n\
         \x20       elif what == 'connect':\n            socket.create_connection(('1.1.1.1', 80), timeout=2)\n\
         \x20       else:\n            socket.getaddrinfo('example.com', 80)\n\
         \x20       print(what, 'allowed')\n\
         \x20   except Exception as e:\n        print(what, 'refused', type(e).__name__)\n",
        vec![Invocation::default()],
        |run| {
            let event = only_event(run)?;
            expect_exit(event, 0)?;
            let out = event.stdout.data.to_string_lossy();
            for what in ["connect", "resolve"] {
                if !out.contains(&format!("{what} refused")) {
                    return Err(format!("network reachable ({what}): {out}"));
                }
            }
            Ok(())
        },
    )
}

/// Subprocesses and fork: under WASI they do not exist, so the attempt is an
/// ordinary exception the program sees (exit 0 here), never a sandbox error.
/// (For containers, the fork-bomb probe of the conformance suite applies.)
pub fn no_subprocess() -> Probe {
    Probe::new(
        "subprocess and fork unavailable",
        "import os\n\
         try:\n    import subprocess\n    subprocess.run(['/bin/echo', 'hi'])\n    print('subprocess ran')\nexcept Exception as e:\n    print('subprocess refused', type(e).__name__)\n\
         try:\n    os.fork()\n    print('fork ran')\nexcept Exception as e:\n    print('fork refused', type(e).__name__)\n",
        vec![Invocation::default()],
        |run| {
            let event = only_event(run)?;
            expect_exit(event, 0)?;
            let out = event.stdout.data.to_string_lossy();
            if out.contains("subprocess refused") && out.contains("fork refused") {
                Ok(())
            } else {
                Err(format!("a process could be started: {out}"))
            }
        },
    )
}

/// With a scratch folder: `/tmp` is writable, and each invocation gets a fresh one.
pub fn scratch_is_fresh() -> Probe {
    Probe::new(
        "fresh scratch per invocation",
        "import os, sys\n\
         path = os.path.join(os.environ.get('TMPDIR', '/tmp'), 'mark')\n\
         print('seen' if os.path.exists(path) else 'fresh')\n\
         open(path, 'w').write(sys.argv[1])\n\
         print(open(path).read())\n",
        vec![
            Invocation::with_args(["one"]),
            Invocation::with_args(["two"]),
        ],
        |run| {
            if run.events.len() != 2 {
                return Err(format!("{} events", run.events.len()));
            }
            expect_exit(&run.events[0], 0)?;
            expect_stdout(&run.events[0], b"fresh\none\n")?;
            expect_exit(&run.events[1], 0)?;
            expect_stdout(&run.events[1], b"fresh\ntwo\n")
        },
    )
}

/// Every probe whose expectation is the same on every backend and needs no
/// special limits.
pub fn common() -> Vec<Probe> {
    vec![
        square(),
        argv_exact(),
        stdin_exact(),
        program_bytes_verbatim(),
        non_utf8_output(),
        exit_code(),
        uncaught_exception(),
        cannot_write_program(),
        no_network(),
        memory_error_caught(),
    ]
}
