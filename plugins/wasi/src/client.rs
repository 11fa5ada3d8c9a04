//! [`WasiClient`]: the [`SandboxClient`] for `backend = "wasi"` profiles.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use progscore_sandbox::timing::{ALONE_RUNS, alone_run_warning};
use progscore_sandbox::{
    Backend, Behaviour, BoxFuture, CaseSink, Invocation, InvocationEvent, Outcome, Owner,
    Preflight, ProgramFiles, ProgramRun, Provenance, RunRequest, RuntimeProfile, SandboxClient,
    SandboxError, sha256_hex,
};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::artifact::{self, PreparedRuntime, WASMTIME_VERSION};
use crate::guest::{
    GUEST_PROGRAM_PATH, GUEST_SCRATCH_DIR, GuestReply, GuestRequest, GuestRuntime, TraceRequest,
};
use crate::job::Job;
use crate::options::{Execution, WasiOptions};
use crate::worker::WorkerPool;
use crate::workspace::Workspace;

/// Extra time the parent gives a worker beyond the profile's timeout before it
/// declares the worker stuck (the worker enforces the deadline itself; this is
/// only a backstop against a wedged process).
const WORKER_GRACE: Duration = Duration::from_secs(10);
/// Stack for threads that run guests in-process. Guests run on wasmtime's fiber
/// stacks, but the thread also runs the executor and host calls' setup.
const GUEST_THREAD_STACK: usize = 16 << 20;
/// Stack for threads that only talk to a worker process.
const RELAY_THREAD_STACK: usize = 256 << 10;

/// Runs `backend = "wasi"` profiles: CPython compiled to WASI, in wasmtime.
///
/// Cheap to construct: nothing is read until a profile is first used (or
/// [`WasiClient::prepare`] is called), when its pinned files are checked and
/// its module compiled into the cache if needed.
pub struct WasiClient {
    profiles: BTreeMap<String, RuntimeProfile>,
    options: WasiOptions,
    owner: Owner,
    permits: Arc<Semaphore>,
    pool: Option<Arc<WorkerPool>>,
    prepared: tokio::sync::Mutex<HashMap<String, Prepared>>,
}

/// A profile whose files were checked, with its loaded module when guests run
/// in this process.
#[derive(Clone)]
struct Prepared {
    runtime: PreparedRuntime,
    local: Option<Arc<GuestRuntime>>,
}

impl WasiClient {
    /// A client for `profiles`. Profiles of other backends are kept only to
    /// answer [`SandboxError::WrongBackend`] when asked for. Registers the
    /// client's owner folder (after removing those of dead processes), so
    /// it fails only when the owner root cannot be used.
    pub fn new(
        profiles: impl IntoIterator<Item = RuntimeProfile>,
        options: WasiOptions,
    ) -> Result<Self, SandboxError> {
        let setup = |e: progscore_sandbox::OwnerError| SandboxError::Setup {
            message: format!("cannot register the client's workspace folder: {e}"),
        };
        progscore_sandbox::ensure_private_root(&options.owner_root).map_err(setup)?;
        for dead in Owner::dead_owners(&options.owner_root, OWNER_KIND) {
            if let Err(e) = dead.forget() {
                tracing::warn!("{e}");
            }
        }
        let owner = Owner::register(&options.owner_root, OWNER_KIND).map_err(setup)?;
        let pool = match &options.execution {
            Execution::Workers { command, .. } => Some(Arc::new(WorkerPool::new(command.clone()))),
            Execution::InProcess { .. } => None,
        };
        Ok(WasiClient {
            profiles: profiles.into_iter().map(|p| (p.name.clone(), p)).collect(),
            permits: Arc::new(Semaphore::new(options.execution.parallelism())),
            options,
            owner,
            pool,
            prepared: tokio::sync::Mutex::new(HashMap::new()),
        })
    }

    /// This client's private folder (its workspaces live below it).
    pub fn owner_dir(&self) -> &Path {
        self.owner.dir()
    }

    /// How many invocations this client runs at once; callers gain nothing by
    /// running more programs than this in parallel.
    pub fn parallelism(&self) -> usize {
        self.options.execution.parallelism()
    }

    /// Checks a profile's pinned files and compiles its module into the cache
    /// if needed (about a minute the first time on a machine). `execute` does
    /// this on first use; call it to pay the cost up front (`doctor`, benchmarks).
    pub async fn prepare(&self, profile: &str) -> Result<(), SandboxError> {
        let profile = self.wasi_profile(profile)?;
        self.prepared(profile).await.map(|_| ())
    }

    fn wasi_profile(&self, name: &str) -> Result<&RuntimeProfile, SandboxError> {
        let profile = self
            .profiles
            .get(name)
            .ok_or_else(|| SandboxError::unknown_profile(name, self.profiles()))?;
        if profile.backend != Backend::Wasi {
            return Err(SandboxError::WrongBackend {
                profile: name.to_string(),
                backend: profile.backend.to_string(),
            });
        }
        Ok(profile)
    }

    async fn prepared(&self, profile: &RuntimeProfile) -> Result<Prepared, SandboxError> {
        // Held across preparation so concurrent first uses compile once. If the
        // caller goes away meanwhile, the blocking task still finishes; it only
        // writes cache files, atomically.
        let mut prepared = self.prepared.lock().await;
        if let Some(done) = prepared.get(&profile.name) {
            return Ok(done.clone());
        }
        let in_process = matches!(self.options.execution, Execution::InProcess { .. });
        let task_profile = profile.clone();
        let cache_dir = self.options.cache_dir.clone();
        let done = tokio::task::spawn_blocking(move || {
            let runtime = artifact::prepare(&task_profile, &cache_dir)?;
            let local =
                if in_process {
                    let guest = GuestRuntime::load(&runtime.compiled, runtime.fuel_engine)
                        .map_err(|e| SandboxError::Setup {
                            message: format!(
                                "could not load {}: {e:#}",
                                runtime.compiled.display()
                            ),
                        })?;
                    Some(Arc::new(guest))
                } else {
                    None
                };
            Ok::<_, SandboxError>(Prepared { runtime, local })
        })
        .await
        .map_err(|e| SandboxError::Setup {
            message: format!("preparing the WASI runtime failed: {e}"),
        })??;
        prepared.insert(profile.name.clone(), done.clone());
        Ok(done)
    }

    async fn run_program(
        &self,
        program: &[u8],
        profile: &RuntimeProfile,
        files: &ProgramFiles,
        invocations: &[Invocation],
        on_case: Option<&CaseSink>,
    ) -> Result<ProgramRun, SandboxError> {
        profile.check_invocations(invocations)?;
        // The guest's program is `main.py` in its folder, whatever the
        // profile's `source`.
        files.check_source("main.py", GUEST_PROGRAM_PATH)?;
        let prepared = self.prepared(profile).await?;
        // Declared before any job: dropped after them, so if this future is
        // dropped, the running job is stopped first and the folders go after.
        let workspace = Workspace::create(self.owner.dir(), program, files)?;
        let mut events = Vec::with_capacity(invocations.len());
        let mut warnings = Vec::new();
        let mut fault: Option<String> = None;
        for (index, invocation) in invocations.iter().enumerate() {
            if let Some(reason) = &fault {
                record(
                    &mut events,
                    on_case,
                    InvocationEvent::not_run(reason.clone()),
                );
                continue;
            }
            let trace = match &profile.trace {
                Some(settings) => match workspace.empty_root() {
                    Ok(root) => Some(TraceRequest {
                        sensitive: settings.sensitive.clone(),
                        root,
                    }),
                    Err(e) => {
                        let message = format!("could not create the traced guest's root: {e}");
                        fault = Some(format!("invocation {index} hit a sandbox error: {message}"));
                        record(&mut events, on_case, sandbox_error_event(message));
                        continue;
                    }
                },
                None => None,
            };
            let argv: Vec<String> = profile
                .command
                .iter()
                .cloned()
                .chain([GUEST_PROGRAM_PATH.to_string()])
                .chain(invocation.args.iter().cloned())
                .collect();
            let scratch = if profile.scratch {
                match workspace.scratch(index) {
                    Ok(dir) => Some(dir),
                    Err(e) => {
                        let message = format!("could not create the scratch folder: {e}");
                        fault = Some(format!("invocation {index} hit a sandbox error: {message}"));
                        record(&mut events, on_case, sandbox_error_event(message));
                        continue;
                    }
                }
            } else {
                None
            };
            // Only TMPDIR, and only when there is a /tmp to point at: CPython
            // needs no environment, and the guest gets nothing of the host's.
            let env = scratch
                .as_ref()
                .map(|_| ("TMPDIR".to_string(), GUEST_SCRATCH_DIR.to_string()))
                .into_iter()
                .collect();
            let request = GuestRequest {
                compiled: prepared.runtime.compiled.clone(),
                fuel_engine: prepared.runtime.fuel_engine,
                argv: argv.clone(),
                env,
                stdin: invocation.stdin.clone().unwrap_or_default(),
                stdlib_dir: prepared.runtime.stdlib_dir.clone(),
                program_dir: workspace.program_dir(),
                scratch_dir: scratch.clone(),
                limits: profile.limits.clone(),
                alone: false,
                trace,
            };
            let mut reply = self.run_guest(&request, &prepared, false).await?;
            let mut alone_runs = 0;
            // Not proven while other guests ran: again, alone; still not
            // proven alone (load from outside), again while it may pass.
            while let Outcome::TimedOut {
                unconfirmed: Some(why),
                ..
            } = &reply.outcome
                && alone_runs < ALONE_RUNS
                && (alone_runs == 0 || reply.usage.as_ref().is_some_and(|u| u.cpu_ms.is_some()))
            {
                alone_runs += 1;
                warnings.push(alone_run_warning(index, alone_runs, why));
                if let Some(dir) = &scratch {
                    // A fresh scratch folder, as for any run.
                    let _ = fs::remove_dir_all(dir);
                    let _ = artifact::create_private_dir(dir);
                }
                reply = self.run_guest(&request, &prepared, true).await?;
            }
            if let Some(dir) = scratch
                && let Err(e) = fs::remove_dir_all(&dir)
            {
                warnings.push(format!(
                    "invocation {index}: could not remove the scratch folder {}: {e}",
                    dir.display()
                ));
            }
            if let Some(note) = reply.note {
                warnings.push(format!("invocation {index}: {note}"));
            }
            if let Outcome::SandboxError { message } = &reply.outcome {
                fault = Some(format!("invocation {index} hit a sandbox error: {message}"));
            }
            record(
                &mut events,
                on_case,
                InvocationEvent {
                    outcome: reply.outcome,
                    stdout: reply.stdout,
                    stderr: reply.stderr,
                    duration_ms: reply.duration_ms,
                    usage: reply.usage,
                    provenance: Some(self.provenance(profile, &prepared.runtime, argv)),
                    // A guest that never ran (a sandbox error) has no trace.
                    behaviour: profile.trace.as_ref().map(|_| {
                        reply.behaviour.unwrap_or_else(|| {
                            Behaviour::not_traced("the guest failed before its trace began")
                        })
                    }),
                },
            );
        }
        if let Err(e) = workspace.close() {
            warnings.push(e);
        }
        Ok(ProgramRun {
            interaction: None,
            profile: profile.name.clone(),
            program_sha256: sha256_hex(program),
            events,
            sandbox_warnings: warnings,
            compile: None,
        })
    }

    /// Runs one request once a guest slot is free; `alone` takes every slot,
    /// so no other guest of this client runs beside it.
    async fn run_guest(
        &self,
        request: &GuestRequest,
        prepared: &Prepared,
        alone: bool,
    ) -> Result<GuestReply, SandboxError> {
        let slots = if alone {
            u32::try_from(self.parallelism()).unwrap_or(u32::MAX)
        } else {
            1
        };
        let _permit = self
            .permits
            .acquire_many(slots)
            .await
            .map_err(|_| SandboxError::Setup {
                message: "the client is shutting down".into(),
            })?;
        let mut request = request.clone();
        request.alone = alone;
        Ok(self.dispatch(request, prepared).await)
    }

    /// Runs one request where guests run, as a [`Job`] that stops if dropped.
    async fn dispatch(&self, request: GuestRequest, prepared: &Prepared) -> GuestReply {
        let started = Instant::now();
        // A starved guest's window may stretch (see progscore_sandbox::timing).
        let backstop =
            request.limits.timeout() * progscore_sandbox::timing::MAX_STRETCH + WORKER_GRACE;
        let job = match (&self.pool, &prepared.local) {
            (Some(pool), _) => {
                let pool = Arc::clone(pool);
                Job::spawn("progscore-wasi-relay", RELAY_THREAD_STACK, move |control| {
                    relay(&pool, control, &request, started)
                })
            }
            (None, Some(local)) => {
                let local = Arc::clone(local);
                Job::spawn("progscore-wasi-guest", GUEST_THREAD_STACK, move |control| {
                    run_local(&local, control, &request, started)
                })
            }
            (None, None) => {
                return GuestReply::sandbox_error(
                    "no loaded runtime for in-process execution",
                    started,
                );
            }
        };
        let job = match job {
            Ok(job) => job,
            Err(e) => {
                return GuestReply::sandbox_error(
                    format!("could not start a thread: {e}"),
                    started,
                );
            }
        };
        match tokio::time::timeout(backstop, job.wait()).await {
            Ok(Some(reply)) => reply,
            Ok(None) => GuestReply::sandbox_error("the guest thread panicked", started),
            // The job was dropped with the timeout's future: the guest was
            // stopped (its worker killed) before this line.
            Err(_) => GuestReply::sandbox_error(
                format!("the guest did not finish within {backstop:?} and was stopped"),
                started,
            ),
        }
    }

    fn provenance(
        &self,
        profile: &RuntimeProfile,
        runtime: &PreparedRuntime,
        argv: Vec<String>,
    ) -> Provenance {
        let placement = match self.options.execution {
            Execution::InProcess { .. } => "in-process",
            Execution::Workers { .. } => "worker processes",
        };
        Provenance {
            backend: Backend::Wasi.to_string(),
            runtime: format!("wasmtime {WASMTIME_VERSION}"),
            artifact: format!("sha256:{}", runtime.module_sha256),
            image_id: None,
            repo_digests: Vec::new(),
            engine: format!("wasmtime {WASMTIME_VERSION} ({placement})"),
            engine_name: None,
            command: argv,
            user: None,
            container: None,
            limits: profile.limits.clone(),
        }
    }
}

impl SandboxClient for WasiClient {
    fn profiles(&self) -> Vec<&RuntimeProfile> {
        self.profiles
            .values()
            .filter(|p| p.backend == Backend::Wasi)
            .collect()
    }

    fn run<'a>(
        &'a self,
        request: RunRequest<'a>,
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        Box::pin(async move {
            let profile = request.profile_against(self.wasi_profile(request.profile_name())?)?;
            // One wasmtime instance per invocation, its stdin given whole:
            // no live conversation.
            if request.interactor.is_some() || request.conversation.is_some() {
                return Err(SandboxError::InteractiveUnsupported {
                    profile: profile.name.clone(),
                });
            }
            self.run_program(
                request.program,
                profile,
                request.files,
                request.invocations,
                request.on_case.as_ref(),
            )
            .await
        })
    }

    fn preflight<'a>(&'a self, profile: &'a str) -> BoxFuture<'a, Result<Preflight, SandboxError>> {
        Box::pin(async move {
            let found = self.wasi_profile(profile)?;
            let prepared = self.prepared(found).await?;
            Ok(Preflight::of(
                found,
                format!(
                    "module sha256:{} verified and compiled (wasmtime {WASMTIME_VERSION})",
                    prepared.runtime.module_sha256
                ),
            ))
        })
    }
}

/// Records a case's event, telling it to the request's sink.
fn record(events: &mut Vec<InvocationEvent>, on_case: Option<&CaseSink>, event: InvocationEvent) {
    if let Some(sink) = on_case {
        sink.report(events.len(), &event, None);
    }
    events.push(event);
}

/// The owner kind of WASI clients: their owners are named `progscore-wasi-…`.
const OWNER_KIND: &str = "wasi";

/// One invocation in a worker process, from the relay thread.
fn relay(
    pool: &WorkerPool,
    control: &crate::job::Control,
    request: &GuestRequest,
    started: Instant,
) -> GuestReply {
    let mut worker = match pool.take() {
        Ok(worker) => worker,
        Err(e) => {
            return GuestReply::sandbox_error(format!("could not start a worker: {e}"), started);
        }
    };
    if !control.set_hook(Box::new(worker.killer())) {
        pool.give_back(worker);
        return GuestReply::sandbox_error("cancelled", started);
    }
    let reply = worker.exchange(request);
    let cancelled = control.clear_hook();
    match reply {
        Ok(reply) if !cancelled => {
            pool.give_back(worker);
            reply
        }
        Ok(_) => {
            worker.discard();
            GuestReply::sandbox_error("cancelled", started)
        }
        Err(e) => {
            worker.discard();
            let message = if cancelled {
                "cancelled".to_string()
            } else {
                format!("the WASI worker failed: {e}")
            };
            GuestReply::sandbox_error(message, started)
        }
    }
}

/// One invocation on this thread of the progscore process.
fn run_local(
    local: &GuestRuntime,
    control: &crate::job::Control,
    request: &GuestRequest,
    started: Instant,
) -> GuestReply {
    let cancel = CancellationToken::new();
    let hook = cancel.clone();
    if !control.set_hook(Box::new(move || hook.cancel())) {
        return GuestReply::sandbox_error("cancelled", started);
    }
    let reply = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(executor) => executor.block_on(local.run(request, &cancel)),
        Err(e) => GuestReply::sandbox_error(format!("could not start an executor: {e}"), started),
    };
    control.clear_hook();
    reply
}

fn sandbox_error_event(message: String) -> InvocationEvent {
    InvocationEvent {
        outcome: Outcome::SandboxError { message },
        stdout: Default::default(),
        stderr: Default::default(),
        duration_ms: 0,
        usage: None,
        provenance: None,
        behaviour: None,
    }
}
