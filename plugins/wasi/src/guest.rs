//! One invocation of the CPython reactor: a fresh store and instance, the
//! program's argv, stdin and preopens, and the limits.
//!
//! This is the part that runs wherever guests run: on a thread of the progscore
//! process, or in a worker process (see [`crate::worker`]). It never touches
//! the workspace's lifetime: the caller made the folders and removes them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use progscore_sandbox::{
    Behaviour, ByteString, CapturedStream, CpuWindow, Limits, Outcome, ResourceUsage,
};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use wasmtime::{
    Config, Engine, InstancePre, Linker, Module, ResourceLimiter, Store, UpdateDeadline,
};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::capture::CapturePipe;
use crate::clock::{ProgramClock, Stop, lock, millis};
use crate::outcome::classify;
use crate::trace::{TracedStore, WasiTrace};

/// Where the stdlib folder appears in the guest. CPython's WASI build looks for
/// `/usr/local/lib/python315.zip` (its compiled-in prefix).
pub const GUEST_STDLIB_DIR: &str = "/usr/local/lib";
/// The stdlib archive's name inside [`GUEST_STDLIB_DIR`].
pub const GUEST_STDLIB_NAME: &str = "python315.zip";
/// The read-only folder holding the program in the guest.
pub const GUEST_PROGRAM_DIR: &str = "/program";
/// The program's path in the guest: what follows the profile's `command` in argv.
pub const GUEST_PROGRAM_PATH: &str = "/program/main.py";
/// The writable scratch folder in the guest, when the profile asks for one.
pub const GUEST_SCRATCH_DIR: &str = "/tmp";

/// How often the epoch ticks: the granularity of deadlines and cancellation.
const EPOCH_TICK: Duration = Duration::from_millis(10);
/// The deepest guest stack. CPython's WASI build recurses on the wasm stack for
/// Python calls; wasmtime's 512 KiB default is too small for its recursion limit.
const MAX_WASM_STACK: usize = 8 << 20;
/// The fiber stack async calls run on; it must be larger than the wasm stack
/// plus the host calls made from it.
const ASYNC_STACK: usize = 16 << 20;
/// Table elements a guest may grow to. CPython's tables are fixed; this only
/// stops a hostile module-level grow from eating host memory.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;
/// Everything one invocation needs, as sent to a worker process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct GuestRequest {
    /// The precompiled module (see [`crate::artifact`]).
    pub compiled: PathBuf,
    /// Whether the module was compiled with fuel metering.
    pub fuel_engine: bool,
    /// The guest's argv, exactly.
    pub argv: Vec<String>,
    /// The guest's environment, exactly.
    pub env: Vec<(String, String)>,
    /// Standard input.
    pub stdin: ByteString,
    /// Host folder holding the stdlib archive, preopened read-only.
    pub stdlib_dir: Option<PathBuf>,
    /// Host folder holding the program, preopened read-only.
    pub program_dir: PathBuf,
    /// Host scratch folder, preopened writable at `/tmp`.
    pub scratch_dir: Option<PathBuf>,
    /// The profile's limits.
    pub limits: Limits,
    /// Whether no other guest of the client runs meanwhile (a timeout's
    /// confirmation run).
    #[serde(default)]
    pub alone: bool,
    /// When the profile traces behaviour (see [`crate::trace`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceRequest>,
}

/// What a traced invocation needs besides the rest of its request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TraceRequest {
    /// The sensitive read paths, as the profile writes them.
    pub sensitive: Vec<String>,
    /// An empty host folder preopened read-only at `/`, so that an open of
    /// any absolute path reaches the host (wasi-libc fails a path under no
    /// preopen itself, unseen) and is answered "no such file".
    pub root: PathBuf,
}

/// How one invocation ended, as sent back by a worker process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct GuestReply {
    pub outcome: Outcome,
    pub stdout: CapturedStream,
    pub stderr: CapturedStream,
    pub duration_ms: u64,
    /// CPU time and peak memory of the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ResourceUsage>,
    /// Something the record should show beside the outcome (a trap's message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What the program tried, when the request asked for a trace and the
    /// guest ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behaviour: Option<Behaviour>,
}

impl GuestReply {
    pub(crate) fn sandbox_error(message: impl Into<String>, started: Instant) -> Self {
        GuestReply {
            outcome: Outcome::SandboxError {
                message: message.into(),
            },
            stdout: CapturedStream::default(),
            stderr: CapturedStream::default(),
            duration_ms: elapsed_ms(started),
            usage: None,
            note: None,
            behaviour: None,
        }
    }
}

/// The engine settings every compiled artifact and every runtime use. The cache
/// key includes [`Engine::precompile_compatibility_hash`] of this config, so a
/// change here never loads a stale artifact.
pub(crate) fn engine_config(fuel: bool) -> Config {
    let mut config = Config::new();
    config
        .wasm_exceptions(true)
        .epoch_interruption(true)
        .consume_fuel(fuel)
        .max_wasm_stack(MAX_WASM_STACK)
        .async_stack_size(ASYNC_STACK);
    config
}

/// A loaded module ready to instantiate, with the epoch ticker that drives its
/// deadlines. Instantiating from an [`InstancePre`] skips import resolution, so
/// each invocation only pays for the store and the copy-on-write memory image.
pub(crate) struct GuestRuntime {
    pre: InstancePre<GuestState>,
    fuel_engine: bool,
}

impl GuestRuntime {
    /// Loads a precompiled module written by [`crate::artifact`].
    pub(crate) fn load(compiled: &Path, fuel_engine: bool) -> wasmtime::Result<Self> {
        let engine = Engine::new(&engine_config(fuel_engine))?;
        // SAFETY: `deserialize_file` runs native code from the file. The file is
        // one this crate compiled from a module whose sha256 it checked, kept in
        // a cache folder private to this user (0700); wasmtime also checks the
        // header against this engine's version and settings.
        let module = unsafe { Module::deserialize_file(&engine, compiled)? };
        Self::from_module(&engine, &module, fuel_engine)
    }

    pub(crate) fn from_module(
        engine: &Engine,
        module: &Module,
        fuel_engine: bool,
    ) -> wasmtime::Result<Self> {
        let mut linker: Linker<GuestState> = Linker::new(engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut linker, |state| &mut state.wasi)?;
        // The imports that touch paths, traced when the invocation asks.
        crate::trace::add_to_linker(&mut linker)?;
        // The build's one non-WASI import: its door to a host tool protocol we do
        // not offer. -1 is its "no host" answer.
        linker.func_wrap("host", "call", |_: i32, _: i32, _: i32, _: i32| -> i32 {
            -1
        })?;
        let pre = linker.instantiate_pre(module)?;
        start_epoch_ticker(engine);
        Ok(GuestRuntime { pre, fuel_engine })
    }

    /// Runs one invocation to its end: exit, trap, a limit, or `cancel`.
    ///
    /// The program's clock starts once the instance exists: instantiating is
    /// the engine's work, not the program's.
    pub(crate) async fn run(
        &self,
        request: &GuestRequest,
        cancel: &CancellationToken,
    ) -> GuestReply {
        let started = Instant::now();
        if request.fuel_engine != self.fuel_engine {
            return GuestReply::sandbox_error("worker engine does not match the request", started);
        }
        let stdout = CapturePipe::new(request.limits.output_bytes);
        let stderr = CapturePipe::new(request.limits.output_bytes);
        let mut store = match self.store(request, &stdout, &stderr, cancel) {
            Ok(store) => store,
            Err(e) => {
                return GuestReply::sandbox_error(
                    format!("could not set up the guest: {e:#}"),
                    started,
                );
            }
        };
        let instance = tokio::select! {
            instance = self.pre.instantiate_async(&mut store) => match instance {
                Ok(instance) => instance,
                Err(e) => {
                    let memory_hit = store.data().limiter.hit;
                    let (outcome, note) = classify(Some(Err(e)), None, memory_hit, &stderr.last_line(), None);
                    return GuestReply {
                        outcome,
                        stdout: stdout.finish(),
                        stderr: stderr.finish(),
                        duration_ms: 0,
                        usage: None,
                        note,
                        behaviour: None,
                    };
                }
            },
            () = cancel.cancelled() => return GuestReply::sandbox_error("cancelled", started),
        };
        // The program's clock starts here.
        let clock = Arc::new(Mutex::new(ProgramClock::start(&request.limits)));
        store.data_mut().clock = Some(clock.clone());
        if let Some(trace) = &mut store.data_mut().trace {
            trace.start_clock();
        }
        // The epoch callback yields to this executor every tick, so the guest
        // stops at a limit even while it sleeps in a host call (the timer
        // below), and at once when the caller cancels.
        let result = {
            let guest = run_program(instance, &mut store);
            tokio::pin!(guest);
            loop {
                let deadline = lock(&clock).deadline;
                tokio::select! {
                    result = &mut guest => break Some(result),
                    () = tokio::time::sleep_until(deadline.into()) => {
                        if !lock(&clock).extend() {
                            break None;
                        }
                    }
                    () = cancel.cancelled() => {
                        return GuestReply::sandbox_error("cancelled", started);
                    }
                }
            }
        };
        let behaviour = store.data_mut().trace.take().map(WasiTrace::finish);
        let state = store.data();
        let clock = lock(&clock);
        let window = clock.started.elapsed();
        let cpu = clock.cpu_used();
        let cpu_wait = clock.wait_since_start();
        let stop = match (&result, state.stop) {
            // The host-side timer fired while the guest waited in a host call.
            (None, None) => Some(Stop::Deadline),
            (_, stop) => stop,
        };
        let proof = (stop == Some(Stop::Deadline)).then(|| {
            CpuWindow {
                limit: request.limits.timeout(),
                elapsed: window,
                cpu,
                cpu_wait,
                // A guest's file reads run on the host's blocking threads,
                // whose disk stalls are not counted here: a sleeper-looking
                // timeout beside other guests is confirmed alone.
                io_measured: false,
                // Output goes to memory here: it never holds a guest up.
                output_active: false,
                // At most one guest per core runs; other load shows as waiting.
                oversubscribed: false,
                // A guest runs in this process: nothing freezes it alone.
                ..CpuWindow::default()
            }
            .judge(1.0, request.alone)
        });
        let judged = proof.is_some();
        let (outcome, note) = classify(result, stop, state.limiter.hit, &stderr.last_line(), proof);
        GuestReply {
            outcome,
            stdout: stdout.finish(),
            stderr: stderr.finish(),
            duration_ms: u64::try_from(window.as_millis()).unwrap_or(u64::MAX),
            usage: Some(ResourceUsage {
                cpu_ms: cpu.map(millis),
                peak_memory_bytes: Some(state.limiter.peak as u64),
                cpu_wait_ms: cpu_wait.filter(|_| judged).map(millis),
            }),
            note,
            behaviour,
        }
    }

    fn store(
        &self,
        request: &GuestRequest,
        stdout: &CapturePipe,
        stderr: &CapturePipe,
        cancel: &CancellationToken,
    ) -> wasmtime::Result<Store<GuestState>> {
        let mut wasi = WasiCtxBuilder::new();
        wasi.args(&request.argv)
            .envs(&request.env)
            .stdin(MemoryInputPipe::new(request.stdin.0.clone()))
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            // Reading the stdlib zip is many small reads; doing them on this
            // thread rather than a blocking pool keeps imports fast.
            .allow_blocking_current_thread(true)
            // No sockets at all: not even name lookup.
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        // The guest paths of the preopens, in order: their descriptors.
        let mut preopens = Vec::new();
        if let Some(stdlib) = &request.stdlib_dir {
            wasi.preopened_dir(stdlib, GUEST_STDLIB_DIR, FsPerms::ReadOnly)?;
            preopens.push(GUEST_STDLIB_DIR);
        }
        wasi.preopened_dir(&request.program_dir, GUEST_PROGRAM_DIR, FsPerms::ReadOnly)?;
        preopens.push(GUEST_PROGRAM_DIR);
        if let Some(scratch) = &request.scratch_dir {
            wasi.preopened_dir(scratch, GUEST_SCRATCH_DIR, FsPerms::ReadWrite)?;
            preopens.push(GUEST_SCRATCH_DIR);
        }
        let trace = match &request.trace {
            Some(trace) => {
                // Last: the other preopens keep their descriptors, and
                // wasi-libc picks the longest preopen a path is under.
                wasi.preopened_dir(&trace.root, "/", FsPerms::ReadOnly)?;
                preopens.push("/");
                Some(WasiTrace::new(&trace.sensitive, &preopens))
            }
            None => None,
        };
        let state = GuestState {
            wasi: wasi.build_p1(),
            limiter: MemoryCap {
                cap: usize::try_from(request.limits.memory_bytes).unwrap_or(usize::MAX),
                hit: false,
                peak: 0,
            },
            stop: None,
            clock: None,
            trace,
        };
        let mut store = Store::new(self.pre.module().engine(), state);
        store.limiter(|state| &mut state.limiter);
        if let Some(fuel) = request.limits.fuel {
            store.set_fuel(fuel)?;
        }
        let cancel = cancel.clone();
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |mut ctx| {
            let stop = if cancel.is_cancelled() {
                Some(Stop::Cancelled)
            } else {
                ctx.data()
                    .clock
                    .as_ref()
                    .and_then(|clock| lock(clock).limit_reached())
            };
            match stop {
                Some(stop) => {
                    ctx.data_mut().stop = Some(stop);
                    Ok(UpdateDeadline::Interrupt)
                }
                None => Ok(UpdateDeadline::Yield(1)),
            }
        });
        Ok(store)
    }
}

/// The store's data: WASI state, the memory cap, the program's clock, and
/// why the host stopped the guest.
pub(crate) struct GuestState {
    pub(crate) wasi: WasiP1Ctx,
    limiter: MemoryCap,
    stop: Option<Stop>,
    /// Set once the instance exists: the program's time starts then.
    /// Shared with the host-side timer, which stops a guest waiting in a
    /// host call (a sleep).
    clock: Option<Arc<Mutex<ProgramClock>>>,
    /// What the program tries, when traced.
    pub(crate) trace: Option<WasiTrace>,
}

impl TracedStore for GuestState {
    fn wasi(&mut self) -> &mut WasiP1Ctx {
        &mut self.wasi
    }

    fn trace(&mut self) -> Option<&mut WasiTrace> {
        self.trace.as_mut()
    }
}

/// Refuses linear-memory growth beyond the profile's cap and remembers that it did.
///
/// Growth is refused, not trapped: the guest's `malloc` fails and CPython raises
/// `MemoryError`, which the program may catch (its own business). When the
/// program does not recover (see [`classify`]) the outcome is `memory_limit`.
struct MemoryCap {
    cap: usize,
    hit: bool,
    /// The largest linear memory allowed so far, in bytes.
    peak: usize,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.cap {
            self.hit = true;
            return Ok(false);
        }
        self.peak = self.peak.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// Runs the reactor's `_initialize` if exported, then `run()`.
async fn run_program(
    instance: wasmtime::Instance,
    store: &mut Store<GuestState>,
) -> wasmtime::Result<i32> {
    if let Ok(init) = instance.get_typed_func::<(), ()>(&mut *store, "_initialize") {
        init.call_async(&mut *store, ()).await?;
    }
    let run = instance.get_typed_func::<(), i32>(&mut *store, "run")?;
    run.call_async(&mut *store, ()).await
}

/// Ticks the engine's epoch until the engine is dropped. A plain thread holding
/// only a weak reference, so it never keeps the engine alive.
fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    let spawned = std::thread::Builder::new()
        .name("progscore-wasi-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        });
    if let Err(e) = spawned {
        // Without a ticker the guest never reaches an epoch deadline; the
        // host-side timer in `run` still stops it at the deadline.
        tracing::warn!("could not start the epoch ticker: {e}");
    }
}

pub(crate) fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}
