//! The OCI implementation of [`SandboxClient`]: one call is a workspace and
//! its invocations in order (each run again alone when its timeout must be
//! confirmed), on a runtime of the client's own so that a dropped call waits
//! for its cleanup.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use progscore_container::{
    BuildDisk, Cgroups, Load, Slot, Workspace, compile_event, shut_down, spawn_guarded,
};
use progscore_sandbox::{
    Backend, BoxFuture, CompileEvent, Invocation, InvocationEvent, Owner, Preflight, ProgramRun,
    RuntimeProfile, SandboxClient, SandboxError, Stage, sha256_hex,
};
use tokio::sync::{Mutex, OnceCell, RwLock};
use tokio_util::sync::CancellationToken;

use crate::image::Images;
use crate::invocation::{self, ImageInUse, InvocationContext, Next};
use crate::options::{OWNER_KIND, OciOptions};
use crate::runtime::OciRuntime;
use crate::sweep::sweep_dead_owners;

/// Runs programs in fresh hardened containers started by an OCI runtime
/// binary (runc, runsc) directly, from images fetched by digest: no daemon.
pub struct OciClient {
    inner: Arc<Inner>,
    runtime: Option<tokio::runtime::Runtime>,
}

struct Inner {
    options: OciOptions,
    profiles: Vec<RuntimeProfile>,
    owner: Owner,
    /// The host's cgroups; `None` refuses every run (limits cannot be enforced).
    cgroups: Option<Cgroups>,
    cpus: usize,
    /// Swept once, before this client's first run.
    swept: OnceCell<()>,
    runtimes: Mutex<HashMap<String, Arc<OciRuntime>>>,
    images: Images,
    load: Load,
    /// Shared by every invocation; taken exclusively to confirm a timeout
    /// with no other program of this client running.
    schedule: RwLock<()>,
}

impl OciClient {
    /// A client for these profiles (only `backend = "oci"` ones are run).
    /// It registers its owner at once; runtimes and images are checked on
    /// first use (the sweep of what dead progscore processes left runs then).
    pub fn new(
        profiles: Vec<RuntimeProfile>,
        options: OciOptions,
    ) -> Result<OciClient, SandboxError> {
        let owner =
            Owner::register(&options.owner_root, OWNER_KIND).map_err(|e| SandboxError::Setup {
                message: format!("cannot register the client's workspace folder: {e}"),
            })?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("progscore-oci")
            .enable_all()
            .build()
            .map_err(|e| SandboxError::Setup {
                message: format!("cannot start the OCI client's runtime: {e}"),
            })?;
        let images = Images::new(&options)?;
        Ok(OciClient {
            inner: Arc::new(Inner {
                cgroups: Cgroups::discover_host(),
                cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
                options,
                profiles,
                owner,
                swept: OnceCell::new(),
                runtimes: Mutex::new(HashMap::new()),
                images,
                load: Load::default(),
                schedule: RwLock::new(()),
            }),
            runtime: Some(runtime),
        })
    }

    /// The owner name of this client (its bundles, state and cgroups are named after it).
    pub fn owner(&self) -> &str {
        self.inner.owner.name()
    }

    /// This client's private folder (workspaces and bundles live below it).
    pub fn owner_dir(&self) -> &std::path::Path {
        self.inner.owner.dir()
    }

    /// Every image in the cache, each checked against the listing recorded
    /// when it was unpacked (a changed tree names its problems; the next
    /// run that uses it rebuilds it).
    pub async fn cached_images(&self) -> Vec<progscore_oci_image::CachedImage> {
        let inner = self.inner.clone();
        let task = self.spawn(async move {
            tokio::task::spawn_blocking(move || inner.images.cached())
                .await
                .unwrap_or_default()
        });
        task.await.unwrap_or_default()
    }

    /// What `progscore doctor` shows for each OCI profile: the runtime, the
    /// image (fetched and unpacked if missing, its tree verified), the cgroups.
    pub async fn diagnose(&self) -> Vec<(String, Result<String, SandboxError>)> {
        let inner = self.inner.clone();
        let task = self.spawn(async move {
            let mut report = Vec::new();
            for profile in inner.profiles.iter().filter(|p| p.backend == Backend::Oci) {
                let checked = inner.preflight(profile).await.map(|found| found.detail);
                report.push((profile.name.clone(), checked));
            }
            report
        });
        task.await.unwrap_or_default()
    }

    fn spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime().spawn(future)
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime
            .as_ref()
            .expect("the runtime lives as long as the client")
    }
}

impl Drop for OciClient {
    fn drop(&mut self) {
        // No call can be in flight here (calls borrow the client), but a
        // preflight whose caller gave up (a signal during the checks) may
        // be: it is dropped now, with the owner record it holds.
        if let Some(runtime) = self.runtime.take() {
            shut_down(runtime);
        }
        // The runtimes' state folders of this client, when empty (a
        // container left in one is for the next client's sweep).
        if let Ok(runtimes) = self.inner.runtimes.try_lock() {
            for runtime in runtimes.values() {
                let _ = std::fs::remove_dir(runtime.state_root());
            }
        }
        let _ = std::fs::remove_dir(self.inner.options.state_root.join(self.inner.owner.name()));
        if let Some(cgroups) = &self.inner.cgroups {
            cgroups.release_owner(self.inner.owner.name());
        }
    }
}

impl SandboxClient for OciClient {
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
        // A dropped call waits for its cleanup: kills until the runtime
        // ends, its exit, a delete, each bounded by the runtime timeout.
        let cleanup_bound = self.inner.options.runtime_timeout * 4 + Duration::from_secs(10);
        let task = spawn_guarded(self.runtime(), cleanup_bound, |token| async move {
            // Not done if the task is dropped mid-cleanup (its bound overran
            // and the client stopped): the owner's record then stays, so the
            // next start's sweep finds what the call left.
            let cleanup = inner.owner.cleanup_pending();
            let run = inner.run(&program, &profile, &invocations, &token).await;
            cleanup.done();
            run
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
            let profile = inner.oci_profile(&profile)?;
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
    fn oci_profile(&self, name: &str) -> Result<&RuntimeProfile, SandboxError> {
        let profile = self
            .profiles
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| SandboxError::unknown_profile(name, &self.profiles))?;
        if profile.backend != Backend::Oci {
            return Err(SandboxError::WrongBackend {
                profile: profile.name.clone(),
                backend: profile.backend.to_string(),
            });
        }
        Ok(profile)
    }

    fn cgroups(&self) -> Result<&Cgroups, SandboxError> {
        let cgroups = self
            .cgroups
            .as_ref()
            .ok_or_else(|| SandboxError::EngineUnsupported {
                missing: "cgroups".into(),
                hint: "the oci backend enforces memory, CPU and process limits with the host's \
                   cgroups (v1 cpu, cpuacct, memory, pids, or v2), which this process cannot \
                   find in /proc/self/mountinfo"
                    .into(),
            })?;
        let missing = cgroups.missing_controllers();
        if !missing.is_empty() {
            return Err(SandboxError::EngineUnsupported {
                missing: missing.join(", "),
                hint: "the oci backend needs these cgroup controllers to enforce a profile's \
                       limits (for swap accounting, boot the kernel with swapaccount=1)"
                    .into(),
            });
        }
        Ok(cgroups)
    }

    async fn runtime_for(&self, profile: &RuntimeProfile) -> Result<Arc<OciRuntime>, SandboxError> {
        let name = profile.runtime.as_deref().unwrap_or("runc");
        if let Some(found) = self.runtimes.lock().await.get(name) {
            return Ok(found.clone());
        }
        let state_root = self.options.state_root.join(self.owner.name());
        let resolved = OciRuntime::resolve(name, &state_root)
            .await
            .map_err(|hint| SandboxError::RuntimeMissing {
                profile: profile.name.clone(),
                runtime: name.to_string(),
                available: "runc, runsc, or any runtime with runc's command line".into(),
                hint,
            })?;
        let resolved = Arc::new(resolved);
        self.runtimes
            .lock()
            .await
            .insert(name.to_string(), resolved.clone());
        Ok(resolved)
    }

    /// Everything a run of `profile` needs, checked: cgroups, the runtime,
    /// the image; the sweep of dead owners first.
    async fn ready(
        &self,
        profile: &RuntimeProfile,
    ) -> Result<(&Cgroups, Arc<OciRuntime>, Arc<ImageInUse>), SandboxError> {
        let cgroups = self.cgroups()?;
        // Docker's hardening includes its AppArmor profile where the host
        // has AppArmor: a container is never run less confined.
        let apparmor = tokio::task::spawn_blocking(crate::apparmor::host)
            .await
            .map_err(|e| SandboxError::Setup {
                message: format!("the AppArmor check failed: {e}"),
            })?;
        if let crate::apparmor::Host::Unavailable(why) = apparmor {
            return Err(SandboxError::EngineUnsupported {
                missing: "the AppArmor profile of the oci backend".into(),
                hint: why.clone(),
            });
        }
        self.swept
            .get_or_init(|| async {
                sweep_dead_owners(&self.options, cgroups).await;
            })
            .await;
        let runtime = self.runtime_for(profile).await?;
        let image = self.images.prepare(profile).await?;
        Ok((cgroups, runtime, image))
    }

    async fn preflight(&self, profile: &RuntimeProfile) -> Result<Preflight, SandboxError> {
        let (_, runtime, image) = self.ready(profile).await?;
        Ok(Preflight::of(
            profile,
            format!(
                "runtime {} ({}), image {} unpacked and verified in {}, limits enforced by \
                 cgroups, AppArmor profile {}",
                runtime.name,
                runtime.version,
                image.manifest_digest,
                self.options.image_cache.display(),
                crate::apparmor::host().annotation()
            ),
        ))
    }

    async fn run(
        &self,
        program: &[u8],
        profile_name: &str,
        invocations: &[Invocation],
        token: &CancellationToken,
    ) -> Result<ProgramRun, SandboxError> {
        let profile = self.oci_profile(profile_name)?;
        profile.check_invocations(invocations)?;
        let (cgroups, runtime, image) = self.ready(profile).await?;
        let workspace =
            Workspace::create(self.owner.dir(), program).map_err(|e| SandboxError::Setup {
                message: format!(
                    "cannot create a workspace under {}: {e}",
                    self.owner.dir().display()
                ),
            })?;
        let build_dir = workspace.build_dir_for(profile)?;
        let context = InvocationContext {
            runtime: &runtime,
            image: &image,
            profile,
            options: &self.options,
            owner: self.owner.name(),
            owner_dir: self.owner.dir(),
            cgroups,
            load: &self.load,
            cpus: self.cpus,
            program_on_host: workspace.program_path(),
            stage: Stage::Case,
            build_on_host: build_dir.as_deref(),
            token,
        };
        let mut warnings = Vec::new();
        let compile = match &build_dir {
            Some(build_dir) => {
                let compile_context = InvocationContext {
                    stage: Stage::Compile,
                    ..context
                };
                let (event, _) = self
                    .run_invocation(&compile_context, 0, &Invocation::default(), &mut warnings)
                    .await;
                Some(compile_event(event, build_dir, BuildDisk::Local))
            }
            None => None,
        };
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
            let (event, stop) = self
                .run_invocation(&context, index, invocation, &mut warnings)
                .await;
            events.push(event);
            stop_reason = stop;
        }
        if let Err(warning) = workspace.remove() {
            warnings.push(warning);
        }
        if !warnings.is_empty() {
            // Something could not be removed: keep this owner's files so the
            // next client's sweep finds what is left.
            tracing::warn!("left for the next start's sweep: {}", warnings.join("; "));
            self.owner.keep_for_sweep();
        }
        Ok(ProgramRun {
            profile: profile.name.clone(),
            program_sha256: sha256_hex(program),
            events,
            sandbox_warnings: warnings,
            compile,
        })
    }

    /// One invocation, run again alone when its timeout must be confirmed.
    async fn run_invocation(
        &self,
        context: &InvocationContext<'_>,
        index: usize,
        invocation: &Invocation,
        warnings: &mut Vec<String>,
    ) -> (InvocationEvent, Option<String>) {
        let token = context.token;
        let mut alone = false;
        loop {
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
                    return (InvocationEvent::not_run("the call was cancelled"),
                            Some("the call was cancelled".into()));
                }
                slot = slot => slot,
            };
            let result = invocation::run(context, index, invocation, alone).await;
            warnings.extend(result.warnings);
            match result.next {
                Next::Continue => return (result.event, None),
                Next::Stop(reason) => return (result.event, Some(reason)),
                Next::ConfirmAlone(why) if !alone => {
                    warnings.push(format!(
                        "invocation {index} ran again with no other program beside it: {why}"
                    ));
                    alone = true;
                }
                Next::ConfirmAlone(_) => return (result.event, None),
            }
        }
    }
}
