//! Worker processes: single-threaded processes that each run one guest at a time.
//!
//! Why processes: wasmtime maps each instance's memory copy-on-write and unmaps
//! it when the store goes; in one process, every unmap flushes the TLB of every
//! thread, so parallel guests in one process slow each other down. One worker
//! per core avoids that (see the crate docs for the measurement).
//!
//! Protocol: the parent writes one [`GuestRequest`] as a JSON line to the
//! worker's stdin; the worker runs it and writes one [`GuestReply`] line to its
//! stdout. The guest's own output never reaches the worker's stdout: it goes to
//! bounded in-memory captures. A worker exits when its stdin closes. To stop a
//! running guest, the parent kills the worker.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::guest::{GuestReply, GuestRequest, GuestRuntime};

/// Setting this environment variable (to anything) makes
/// [`run_if_requested`] turn the current process into a worker. The host binary
/// uses it with [`WorkerCommand::current_exe`], so no second binary is installed.
pub const WORKER_ENV: &str = "PROGSCORE_WASI_WORKER";

/// How to start a worker process.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerCommand {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Environment variables; the worker starts with these only.
    pub env: Vec<(OsString, OsString)>,
}

impl WorkerCommand {
    /// A dedicated worker binary, such as this crate's `progscore-wasi-worker`.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        WorkerCommand {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    /// The running executable again, with [`WORKER_ENV`] set: its `main` must
    /// call [`run_if_requested`] first thing.
    pub fn current_exe() -> io::Result<Self> {
        Ok(WorkerCommand {
            program: std::env::current_exe()?,
            args: Vec::new(),
            env: vec![(WORKER_ENV.into(), "1".into())],
        })
    }
}

/// If [`WORKER_ENV`] is set, runs the worker loop and returns its exit code;
/// otherwise returns `None` at once. Call it at the top of `main`.
pub fn run_if_requested() -> Option<ExitCode> {
    std::env::var_os(WORKER_ENV).map(|_| worker_main())
}

/// The worker loop: requests on stdin, replies on stdout, until stdin closes.
pub fn worker_main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("progscore-wasi-worker: could not start an executor: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Modules stay loaded for the worker's life: deserializing is cheap (mmap)
    // but not free, and a worker serves many invocations of few profiles.
    let mut loaded: HashMap<(PathBuf, bool), GuestRuntime> = HashMap::new();
    let never = CancellationToken::new();
    let stdin = io::stdin().lock();
    let mut stdout = io::stdout().lock();
    for line in stdin.lines() {
        let Ok(line) = line else {
            return ExitCode::FAILURE;
        };
        let started = Instant::now();
        let reply = match serde_json::from_str::<GuestRequest>(&line) {
            Err(e) => GuestReply::sandbox_error(format!("worker got a bad request: {e}"), started),
            Ok(request) => {
                let key = (request.compiled.clone(), request.fuel_engine);
                let guest = match loaded.entry(key) {
                    std::collections::hash_map::Entry::Occupied(entry) => Ok(entry.into_mut()),
                    std::collections::hash_map::Entry::Vacant(entry) => {
                        GuestRuntime::load(&request.compiled, request.fuel_engine)
                            .map(|guest| entry.insert(guest))
                    }
                };
                match guest {
                    Ok(guest) => runtime.block_on(guest.run(&request, &never)),
                    Err(e) => GuestReply::sandbox_error(
                        format!(
                            "worker could not load {}: {e:#}",
                            request.compiled.display()
                        ),
                        started,
                    ),
                }
            }
        };
        let written = serde_json::to_writer(&mut stdout, &reply)
            .map_err(io::Error::other)
            .and_then(|()| stdout.write_all(b"\n"))
            .and_then(|()| stdout.flush());
        if written.is_err() {
            // The parent is gone.
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// Idle worker processes, reused across invocations.
pub(crate) struct WorkerPool {
    command: WorkerCommand,
    idle: Mutex<Vec<Worker>>,
}

/// One worker process. The child sits behind a lock shared with the cancel
/// hook, which kills it while the job thread is blocked reading its reply.
pub(crate) struct Worker {
    child: Arc<Mutex<Child>>,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl WorkerPool {
    pub(crate) fn new(command: WorkerCommand) -> Self {
        WorkerPool {
            command,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// An idle worker, or a new one.
    pub(crate) fn take(&self) -> io::Result<Worker> {
        while let Some(worker) = self.lock_idle().pop() {
            // A worker that died while idle (killed by the OOM killer, say)
            // would fail the next program for nothing of its own doing.
            if worker.has_exited() {
                worker.discard();
                continue;
            }
            return Ok(worker);
        }
        let mut child = Command::new(&self.command.program)
            .args(&self.command.args)
            .env_clear()
            .envs(self.command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // Worker diagnostics (a panic) belong in progscore's own log.
            .stderr(Stdio::inherit())
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            // Both were requested as pipes; this cannot happen, but never leave
            // a child behind.
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other("worker started without pipes"));
        };
        Ok(Worker {
            child: Arc::new(Mutex::new(child)),
            stdin,
            stdout: BufReader::new(stdout),
        })
    }

    /// Returns a worker that answered its request, for the next one.
    pub(crate) fn give_back(&self, worker: Worker) {
        self.lock_idle().push(worker);
    }

    fn lock_idle(&self) -> std::sync::MutexGuard<'_, Vec<Worker>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        for worker in self.lock_idle().drain(..) {
            worker.discard();
        }
    }
}

impl Worker {
    /// Sends one request and reads its reply (blocking).
    pub(crate) fn exchange(&mut self, request: &GuestRequest) -> io::Result<GuestReply> {
        // A worker that died meanwhile closed its end: the write fails with
        // EPIPE (progscore does not die of SIGPIPE), a sandbox error.
        let sent = serde_json::to_writer(&mut self.stdin, request)
            .map_err(io::Error::other)
            .and_then(|()| self.stdin.write_all(b"\n"))
            .and_then(|()| self.stdin.flush());
        if let Err(e) = sent {
            return Err(io::Error::new(
                e.kind(),
                format!("writing to the worker process ({}): {e}", self.status()),
            ));
        }
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the worker process exited ({})", self.status()),
            ));
        }
        serde_json::from_str(&line).map_err(io::Error::other)
    }

    /// A hook that kills this worker (for [`crate::job::Control::set_hook`]).
    pub(crate) fn killer(&self) -> impl FnOnce() + Send + 'static {
        let child = Arc::clone(&self.child);
        move || {
            // Killing an exited child fails harmlessly; the job thread reaps it.
            let _ = child.lock().unwrap_or_else(PoisonError::into_inner).kill();
        }
    }

    /// Kills and reaps the process, so no guest and no zombie outlive it.
    pub(crate) fn discard(self) {
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        // Errors mean it already exited; `wait` still reaps it.
        let _ = child.kill();
        if let Err(e) = child.wait() {
            tracing::warn!("could not reap a WASI worker process: {e}");
        }
    }

    fn has_exited(&self) -> bool {
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        !matches!(child.try_wait(), Ok(None))
    }

    fn status(&self) -> String {
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        match child.try_wait() {
            Ok(Some(status)) => status.to_string(),
            Ok(None) => "still running".into(),
            Err(e) => format!("status unknown: {e}"),
        }
    }
}
