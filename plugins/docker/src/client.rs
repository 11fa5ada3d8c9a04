//! The Docker implementation of [`SandboxClient`]: one call is a workspace,
//! its invocations in order (each run again alone when its timeout must be
//! confirmed, or after the engine came back), and the engine's readiness.
//! One concern, kept whole: how a call survives the engine's faults.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bollard::{API_DEFAULT_VERSION, Docker};
use progscore_sandbox::{
    Backend, BoxFuture, CompileEvent, Invocation, InvocationEvent, Outcome, Owner, Preflight,
    ProgramRun, RuntimeProfile, SandboxClient, SandboxError, Stage, sha256_hex,
};
use tokio::sync::{Mutex, OnceCell, RwLock};
use tokio_util::sync::CancellationToken;

use crate::engine::{self, EngineFacts, EngineReport, ImageFacts, ProfileCheck};
use crate::health::{EngineHealth, Unavailable};
use crate::invocation::{self, InvocationContext, Leftover, Next};
use crate::options::{DockerOptions, OWNER_KIND};
use crate::sweep::{list_owned, sweep_dead_owners};
use progscore_container::Cgroups;
use progscore_container::{Load, Slot};
use progscore_container::{Workspace, compile_event};
use progscore_container::{shut_down, spawn_guarded};

/// How many times one invocation runs again after the engine dropped it.
const MAX_OUTAGE_RERUNS: usize = 2;

/// Runs programs in fresh hardened containers of a local Docker engine.
pub struct DockerClient {
    inner: Arc<Inner>,
    runtime: Option<tokio::runtime::Runtime>,
}

struct Inner {
    options: DockerOptions,
    profiles: Vec<RuntimeProfile>,
    owner: Owner,
    engine: OnceCell<Engine>,
    images: Mutex<HashMap<String, ImageFacts>>,
    health: EngineHealth,
    /// Programs of this client inside their window.
    load: Load,
    /// Shared by every invocation; taken exclusively to confirm a timeout
    /// with no other program of this client running.
    schedule: RwLock<()>,
    /// Containers the engine could not remove while it was gone.
    leftovers: std::sync::Mutex<Vec<Leftover>>,
}

struct Engine {
    docker: Docker,
    facts: EngineFacts,
    cgroups: Option<Cgroups>,
}

impl DockerClient {
    /// A client for these profiles (only `backend = "docker"` ones are
    /// accepted by `execute`). It registers its owner under
    /// [`DockerOptions::owner_root`] at once; the engine is contacted on first
    /// use (when containers and workspaces of dead progscore processes are
    /// swept first), so a client can be built while the engine is down.
    pub fn new(
        profiles: Vec<RuntimeProfile>,
        options: DockerOptions,
    ) -> Result<DockerClient, SandboxError> {
        let owner =
            Owner::register(&options.owner_root, OWNER_KIND).map_err(|e| SandboxError::Setup {
                message: format!("cannot register the client's workspace folder: {e}"),
            })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("progscore-docker")
            .enable_all()
            .build()
            .map_err(|e| SandboxError::Setup {
                message: format!("cannot start the Docker client's runtime: {e}"),
            })?;
        Ok(DockerClient {
            inner: Arc::new(Inner {
                health: EngineHealth::new(options.endpoint(), options.outage_wait),
                options,
                profiles,
                owner,
                engine: OnceCell::new(),
                images: Mutex::new(HashMap::new()),
                load: Load::default(),
                schedule: RwLock::new(()),
                leftovers: std::sync::Mutex::new(Vec::new()),
            }),
            runtime: Some(runtime),
        })
    }

    /// The owner label value of this client's containers.
    pub fn owner(&self) -> &str {
        self.inner.owner.name()
    }

    /// This client's private folder (its workspaces live below it).
    pub fn owner_dir(&self) -> &std::path::Path {
        self.inner.owner.dir()
    }

    /// Checks the engine and every Docker profile, as `progscore doctor` shows.
    pub async fn diagnose(&self) -> EngineReport {
        let inner = self.inner.clone();
        let task = self.spawn(async move {
            let engine = inner.engine().await.map(|engine| engine.facts.clone());
            let mut checks = Vec::new();
            for profile in inner
                .profiles
                .iter()
                .filter(|p| p.backend == Backend::Docker)
            {
                let check = match &engine {
                    Err(err) => Err(err.clone()),
                    Ok(_) => inner.preflight(profile).await.map(|found| found.detail),
                };
                checks.push(ProfileCheck {
                    profile: profile.name.clone(),
                    ok: check.is_ok(),
                    detail: check.unwrap_or_else(|err| err.to_string()),
                });
            }
            engine::report(engine.as_ref(), checks)
        });
        match task.await {
            Ok(report) => report,
            Err(err) => engine::report(
                Err(&SandboxError::Setup {
                    message: err.to_string(),
                }),
                Vec::new(),
            ),
        }
    }

    /// Names of this client's containers that still exist (should be none
    /// between calls).
    pub async fn owned_containers(&self) -> Result<Vec<String>, SandboxError> {
        let inner = self.inner.clone();
        let task = self.spawn(async move {
            let engine = inner.engine().await?;
            list_owned(&engine.docker, inner.owner.name())
                .await
                .map(|containers| containers.into_iter().map(|(_, name)| name).collect())
        });
        task.await.map_err(|e| SandboxError::Setup {
            message: e.to_string(),
        })?
    }

    fn spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime().spawn(future)
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        match &self.runtime {
            Some(runtime) => runtime,
            None => unreachable!("the runtime is only taken in Drop"),
        }
    }
}

impl DockerClient {
    /// One last try at the containers the engine would not remove during
    /// the calls (bounded by the engine timeout per container); what still
    /// fails is left to the next start's sweep, which finds this owner dead.
    fn remove_leftovers_before_leaving(&self, runtime: &tokio::runtime::Runtime) {
        let pending = !self
            .inner
            .leftovers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty();
        let Some(engine) = self.inner.engine.get().filter(|_| pending) else {
            return;
        };
        let inner = self.inner.clone();
        let docker = engine.docker.clone();
        let handle = runtime.handle().clone();
        // A thread of its own: the drop may run inside the caller's runtime.
        let removing = std::thread::spawn(move || {
            handle.block_on(async {
                for warning in inner.remove_leftovers(&docker).await {
                    tracing::warn!("{warning}");
                }
            })
        });
        let _ = removing.join();
    }
}

impl Drop for DockerClient {
    fn drop(&mut self) {
        // No call can be in flight here (calls borrow the client), but a
        // preflight whose caller gave up (a signal during the checks) may
        // be: it is dropped now, with the owner record it holds.
        if let Some(runtime) = self.runtime.take() {
            self.remove_leftovers_before_leaving(&runtime);
            shut_down(runtime);
        }
        if let Some(cgroups) = self.inner.engine.get().and_then(|e| e.cgroups.as_ref()) {
            cgroups.release_owner(self.inner.owner.name());
        }
    }
}

impl SandboxClient for DockerClient {
    fn profiles(&self) -> Vec<&RuntimeProfile> {
        self.inner.profiles.iter().collect()
    }

    fn execute<'a>(
        &'a self,
        program: &'a [u8],
        profile: &'a str,
        invocations: &'a [Invocation],
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        let inner = self.inner.clone();
        let program = program.to_vec();
        let profile = profile.to_string();
        let invocations = invocations.to_vec();
        // A dropped call waits for its cleanup: at most a kill, a wait and a
        // removal, each bounded by the engine timeout.
        let cleanup_bound = self.inner.options.engine_timeout * 3 + Duration::from_secs(10);
        let task = spawn_guarded(self.runtime(), cleanup_bound, |token| async move {
            inner.run(&program, &profile, &invocations, &token).await
        });
        Box::pin(async move {
            task.await.map_err(|e| SandboxError::Setup {
                message: format!("the sandbox task failed: {e}"),
            })?
        })
    }

    fn preflight<'a>(&'a self, profile: &'a str) -> BoxFuture<'a, Result<Preflight, SandboxError>> {
        let inner = self.inner.clone();
        let profile = profile.to_string();
        let task = self.spawn(async move {
            let profile = inner.docker_profile(&profile)?;
            inner.preflight(profile).await
        });
        Box::pin(async move {
            task.await.map_err(|e| SandboxError::Setup {
                message: format!("the preflight task failed: {e}"),
            })?
        })
    }
}

impl Inner {
    async fn engine(&self) -> Result<&Engine, SandboxError> {
        self.engine
            .get_or_try_init(|| async {
                let endpoint = self.options.endpoint();
                let socket = self.options.socket.display().to_string();
                let timeout = self.options.engine_timeout.as_secs().max(1);
                let unreachable = |e: bollard::errors::Error| SandboxError::EngineUnavailable {
                    message: format!(
                        "cannot reach the Docker engine at {endpoint}: {}; is dockerd running? \
                         (scripts/setup.sh starts it)",
                        engine::cause(&e)
                    ),
                };
                let docker = Docker::connect_with_unix(&socket, timeout, API_DEFAULT_VERSION)
                    .map_err(unreachable)?
                    .negotiate_version()
                    .await
                    .map_err(unreachable)?;
                let facts = EngineFacts::read(&docker).await?;
                let cgroups = Cgroups::discover(
                    facts.cgroup_driver.as_deref(),
                    facts.cgroup_version.as_deref(),
                );
                if cgroups.is_none() {
                    tracing::warn!(
                        "cannot find the engine's cgroups from this process (driver {:?}): CPU \
                         time and peak memory are not measured, and timeouts under load are \
                         confirmed by running alone",
                        facts.cgroup_driver
                    );
                }
                let engine = Engine {
                    docker,
                    facts,
                    cgroups,
                };
                sweep_dead_owners(
                    &self.options.owner_root,
                    &engine.docker,
                    engine.cgroups.as_ref(),
                )
                .await;
                Ok(engine)
            })
            .await
    }

    fn docker_profile(&self, name: &str) -> Result<&RuntimeProfile, SandboxError> {
        let profile = self
            .profiles
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| SandboxError::unknown_profile(name, &self.profiles))?;
        if profile.backend != Backend::Docker {
            return Err(SandboxError::WrongBackend {
                profile: profile.name.clone(),
                backend: profile.backend.to_string(),
            });
        }
        Ok(profile)
    }

    async fn image_facts(
        &self,
        docker: &Docker,
        profile: &RuntimeProfile,
    ) -> Result<ImageFacts, SandboxError> {
        if let Some(facts) = self.images.lock().await.get(&profile.name) {
            return Ok(facts.clone());
        }
        let facts = engine::check_image(docker, profile).await?;
        self.images
            .lock()
            .await
            .insert(profile.name.clone(), facts.clone());
        Ok(facts)
    }

    /// Everything a run of `profile` needs from the engine, checked.
    async fn ready(&self, profile: &RuntimeProfile) -> Result<(&Engine, ImageFacts), SandboxError> {
        let engine = self.engine().await?;
        engine.facts.require_limits()?;
        engine.facts.require_runtime(profile)?;
        if profile.limits.cpu_time_ms.is_some() && engine.cgroups.is_none() {
            return Err(SandboxError::EngineUnsupported {
                missing: format!("profile `{}`'s limits.cpu_time", profile.name),
                hint: "progscore reads CPU time from the engine's cgroups, which it cannot find \
                       from this process (the engine must be local, use the cgroupfs driver, \
                       and share this process's cgroup view); remove limits.cpu_time or run \
                       progscore beside the engine"
                    .into(),
            });
        }
        let image = self.image_facts(&engine.docker, profile).await?;
        Ok((engine, image))
    }

    async fn preflight(&self, profile: &RuntimeProfile) -> Result<Preflight, SandboxError> {
        let (engine, image) = self.ready(profile).await?;
        if self.health.is_down() {
            return Err(SandboxError::EngineUnavailable {
                message: format!(
                    "the Docker engine at {} is not answering",
                    self.options.endpoint()
                ),
            });
        }
        let runtime = engine.facts.runtime_for(profile);
        let mut found = Preflight::of(
            profile,
            format!(
                "image {} (id {}), runtime {runtime}, {}",
                profile.image().map(|i| i.to_string()).unwrap_or_default(),
                image.image_id,
                if engine.cgroups.is_some() {
                    "CPU time and memory measured"
                } else {
                    "nothing measured (cgroups not visible)"
                }
            ),
        );
        // What runs when the profile names no runtime is the engine's default:
        // the attempt's fingerprint says which.
        found.fingerprint["runtime"] = serde_json::Value::String(runtime);
        Ok(found)
    }

    async fn run(
        &self,
        program: &[u8],
        profile_name: &str,
        invocations: &[Invocation],
        token: &CancellationToken,
    ) -> Result<ProgramRun, SandboxError> {
        let profile = self.docker_profile(profile_name)?;
        profile.check_invocations(invocations)?;
        let engine = self.engine().await?;
        // An engine known to be down: wait for it rather than burn this program.
        self.wait_for_engine(&engine.docker, token).await?;
        let (engine, image) = self.ready(profile).await?;
        let mut warnings = self.remove_leftovers(&engine.docker).await;
        let workspace =
            Workspace::create(self.owner.dir(), program).map_err(|e| SandboxError::Setup {
                message: format!(
                    "cannot create a workspace under {}: {e}",
                    self.owner.dir().display()
                ),
            })?;
        let build_dir = workspace.build_dir_for(profile)?;
        let runtime = engine.facts.runtime_for(profile);
        let context = InvocationContext {
            docker: &engine.docker,
            engine: &engine.facts,
            health: &self.health,
            image: &image,
            profile,
            runtime: &runtime,
            options: &self.options,
            owner: self.owner.name(),
            cgroups: engine.cgroups.as_ref(),
            load: &self.load,
            program_on_host: workspace.program_path(),
            stage: Stage::Case,
            build_on_host: build_dir.as_deref(),
            token,
        };
        let lost = |lost: SandboxError, workspace: Workspace| {
            // Nothing of this run is evidence: the engine is gone.
            if let Err(warning) = workspace.remove() {
                tracing::warn!("{warning}");
            }
            Err(lost)
        };
        let mut compile = None;
        if let Some(build_dir) = &build_dir {
            let compile_context = InvocationContext {
                stage: Stage::Compile,
                ..context
            };
            let ran = self
                .run_invocation(&compile_context, 0, &Invocation::default(), &mut warnings)
                .await;
            match ran {
                Ok((event, _)) => compile = Some(compile_event(event, build_dir)),
                Err(error) => return lost(error, workspace),
            }
        }
        // A build that failed decides every case the same way.
        let failed_build = compile.as_ref().and_then(CompileEvent::case_event);
        let mut events = Vec::with_capacity(invocations.len());
        let mut stop_reason: Option<String> = None;
        for (index, invocation) in invocations.iter().enumerate() {
            if let Some(event) = &failed_build {
                events.push(event.clone());
                continue;
            }
            if stop_reason.is_none() && token.is_cancelled() {
                stop_reason = Some("the call was cancelled".into());
            }
            if let Some(reason) = &stop_reason {
                events.push(InvocationEvent::not_run(reason.clone()));
                continue;
            }
            let ran = self
                .run_invocation(&context, index, invocation, &mut warnings)
                .await;
            let (event, stop) = match ran {
                Ok(ran) => ran,
                Err(error) => return lost(error, workspace),
            };
            events.push(event);
            stop_reason = stop;
        }
        if let Err(warning) = workspace.remove() {
            warnings.push(warning);
        }
        Ok(ProgramRun {
            profile: profile.name.clone(),
            program_sha256: sha256_hex(program),
            events,
            sandbox_warnings: warnings,
            compile,
        })
    }

    /// One invocation, run again alone when its timeout must be confirmed,
    /// and again when the engine dropped it and came back. `Err` when the
    /// engine was lost and did not come back within the outage wait.
    async fn run_invocation(
        &self,
        context: &InvocationContext<'_>,
        index: usize,
        invocation: &Invocation,
        warnings: &mut Vec<String>,
    ) -> Result<(InvocationEvent, Option<String>), SandboxError> {
        let token = context.token;
        let mut alone = false;
        let mut outages = 0;
        loop {
            // Alone: no other program of this client runs meanwhile. Only
            // the wait for the slot is cut short by a cancellation; a
            // started invocation cleans up after itself.
            let slot = async {
                if alone {
                    Slot::Alone(self.schedule.write().await)
                } else {
                    Slot::Shared(self.schedule.read().await)
                }
            };
            let _slot = tokio::select! {
                biased;
                () = token.cancelled() => {
                    return Ok((InvocationEvent::not_run("the call was cancelled"),
                            Some("the call was cancelled".into())));
                }
                slot = slot => slot,
            };
            let mut result = invocation::run(context, index, invocation, alone).await;
            warnings.extend(result.warnings);
            if let Some(leftover) = result.leftover.take() {
                self.keep_leftover(leftover);
            }
            match result.next {
                Next::Continue => return Ok((result.event, None)),
                Next::Stop(reason) => return Ok((result.event, Some(reason))),
                Next::ConfirmAlone(why) if !alone => {
                    warnings.push(format!(
                        "invocation {index} ran again with no other program beside it: {why}"
                    ));
                    alone = true;
                }
                // Still unproven alone: the event says so (an unconfirmed timeout).
                Next::ConfirmAlone(_) => return Ok((result.event, None)),
                Next::EngineLost(leftover) => {
                    let lost = format!(
                        "the engine stopped answering during invocation {index}: {}",
                        sandbox_message(&result.event)
                    );
                    match self.health.wait_until_up(context.docker, token).await {
                        Ok(()) => {
                            if let Err(e) = invocation::remove_leftover(
                                context.docker,
                                self.options.engine_timeout,
                                &leftover,
                            )
                            .await
                            {
                                // Tried again by the next call, at the
                                // client's drop, or by the next start's sweep.
                                warnings.push(e);
                                self.keep_leftover(leftover);
                            }
                            outages += 1;
                            if outages > MAX_OUTAGE_RERUNS {
                                let reason = format!(
                                    "{lost}; it was run {outages} times and lost each time"
                                );
                                return Ok((result.event, Some(reason)));
                            }
                            warnings.push(format!("{lost}; run again once it answered"));
                        }
                        Err(unavailable) => {
                            self.keep_leftover(leftover);
                            return match unavailable {
                                Unavailable::GaveUp(message) => {
                                    Err(SandboxError::EngineUnavailable { message })
                                }
                                Unavailable::Cancelled => Ok((
                                    InvocationEvent::not_run("the call was cancelled"),
                                    Some("the call was cancelled".into()),
                                )),
                            };
                        }
                    }
                }
            }
        }
    }

    async fn wait_for_engine(
        &self,
        docker: &Docker,
        token: &CancellationToken,
    ) -> Result<(), SandboxError> {
        match self.health.wait_until_up(docker, token).await {
            Ok(()) => Ok(()),
            Err(Unavailable::GaveUp(message)) => Err(SandboxError::EngineUnavailable { message }),
            Err(Unavailable::Cancelled) => Err(SandboxError::Setup {
                message: "the call was cancelled while the engine was down".into(),
            }),
        }
    }

    fn keep_leftover(&self, leftover: Leftover) {
        // Until it is removed, this owner's files must outlive it, so that
        // the next progscore's sweep finds and removes it.
        self.owner.keep_for_sweep();
        self.leftovers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(leftover);
    }

    /// Removes containers left while the engine was gone; what still fails
    /// stays for the next call (or the sweep after this process ends).
    async fn remove_leftovers(&self, docker: &Docker) -> Vec<String> {
        let pending: Vec<Leftover> = std::mem::take(
            &mut *self
                .leftovers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if pending.is_empty() {
            return Vec::new();
        }
        let mut warnings = Vec::new();
        for leftover in pending {
            if let Err(e) =
                invocation::remove_leftover(docker, self.options.engine_timeout, &leftover).await
            {
                warnings.push(e);
                self.keep_leftover(leftover);
            }
        }
        let all_removed = self
            .leftovers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_empty();
        if all_removed {
            // Everything this owner left is gone: its files go with it again.
            self.owner.keep_for_sweep_no_more();
        }
        warnings
    }
}

fn sandbox_message(event: &InvocationEvent) -> String {
    match &event.outcome {
        Outcome::SandboxError { message } => message.clone(),
        other => other.kind().to_string(),
    }
}
