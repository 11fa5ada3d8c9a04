//! The OCI implementation of `SandboxClient`: one call is a workspace and
//! its invocations in order (each run again alone when its timeout must be
//! confirmed, except on a side of a conversation), behind the container
//! backends' shared face (a runtime of the client's own, so that a dropped
//! call waits for its cleanup).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use progscore_container::{BuildDisk, Cases, Cgroups, Guarded, Load, Workspace, compile_event};
use progscore_sandbox::timing::{ALONE_RUNS, alone_run_warning};
use progscore_sandbox::{
    Backend, BoxFuture, CaseSink, ConversationSide, Invocation, InvocationEvent, LiveCase, Owner,
    Preflight, ProgramFiles, ProgramRun, RunRequest, RuntimeProfile, SandboxClient, SandboxError,
    Side, Stage, sha256_hex,
};
use progscore_trace::TracePlan;
use tokio::sync::{Mutex, OnceCell};
use tokio_util::sync::CancellationToken;

use crate::image::Images;
use crate::invocation::{self, ImageInUse, InvocationContext, Next};
use crate::options::{OWNER_KIND, OciOptions};
use crate::runtime::OciRuntime;
use crate::sweep::sweep_dead_owners;
use progscore_container::{Place, Schedule};

/// Runs programs in fresh hardened containers started by an OCI runtime
/// binary (runc, runsc) directly, from images fetched by digest: no daemon.
pub struct OciClient {
    client: Guarded<Inner>,
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
    /// with no other program of this client running; an interactor's
    /// place beside its program.
    schedule: Schedule,
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
        let images = Images::new(&options)?;
        let inner = Inner {
            cgroups: Cgroups::discover_host(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            options,
            profiles,
            owner,
            swept: OnceCell::new(),
            runtimes: Mutex::new(HashMap::new()),
            images,
            load: Load::default(),
            schedule: Schedule::default(),
        };
        Ok(OciClient {
            client: Guarded::new(inner, "progscore-oci")?,
        })
    }

    /// The owner name of this client (its bundles, state and cgroups are named after it).
    pub fn owner(&self) -> &str {
        self.client.backend().owner.name()
    }

    /// This client's private folder (workspaces and bundles live below it).
    pub fn owner_dir(&self) -> &std::path::Path {
        self.client.backend().owner.dir()
    }

    /// Every image in the cache, each checked against the listing recorded
    /// when it was unpacked (a changed tree names its problems; the next
    /// run that uses it rebuilds it).
    pub async fn cached_images(&self) -> Vec<progscore_oci_image::CachedImage> {
        let task = self.client.spawn(|inner| async move {
            tokio::task::spawn_blocking(move || inner.images.cached())
                .await
                .unwrap_or_default()
        });
        task.await.unwrap_or_default()
    }

    /// What `progscore doctor` shows for each OCI profile: the runtime, the
    /// image (fetched and unpacked if missing, its tree verified), the cgroups.
    pub async fn diagnose(&self) -> Vec<(String, Result<String, SandboxError>)> {
        let task = self.client.spawn(|inner| async move {
            let mut report = Vec::new();
            for profile in inner.profiles.iter().filter(|p| p.backend == Backend::Oci) {
                let checked = inner.check(profile).await.map(|found| found.detail);
                report.push((profile.name.clone(), checked));
            }
            report
        });
        task.await.unwrap_or_default()
    }
}

impl SandboxClient for OciClient {
    fn profiles(&self) -> Vec<&RuntimeProfile> {
        self.client.profiles()
    }

    fn run<'a>(
        &'a self,
        request: RunRequest<'a>,
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        self.client.run(request)
    }

    fn preflight<'a>(&'a self, profile: &'a str) -> BoxFuture<'a, Result<Preflight, SandboxError>> {
        self.client.preflight(profile)
    }
}

impl progscore_container::Backend for Inner {
    const KIND: Backend = Backend::Oci;

    fn profiles(&self) -> &[RuntimeProfile] {
        &self.profiles
    }

    fn owner(&self) -> &Owner {
        &self.owner
    }

    /// Kills until the runtime ends, its exit, a delete, each bounded by
    /// the runtime timeout.
    fn cleanup_bound(&self) -> Duration {
        self.options.runtime_timeout * 4 + Duration::from_secs(10)
    }

    async fn run(
        &self,
        program: &[u8],
        profile: &RuntimeProfile,
        files: &ProgramFiles,
        invocations: &[Invocation],
        on_case: Option<&CaseSink>,
        conversation: Option<&ConversationSide>,
        token: &CancellationToken,
    ) -> Result<ProgramRun, SandboxError> {
        self.run_program(
            program,
            profile,
            files,
            invocations,
            on_case,
            conversation,
            token,
        )
        .await
    }

    async fn preflight(&self, profile: &RuntimeProfile) -> Result<Preflight, SandboxError> {
        self.check(profile).await
    }

    fn stopped(&self) {
        // The runtimes' state folders of this client, when empty (a
        // container left in one is for the next client's sweep).
        if let Ok(runtimes) = self.runtimes.try_lock() {
            for runtime in runtimes.values() {
                let _ = std::fs::remove_dir(runtime.state_root());
            }
        }
        let _ = std::fs::remove_dir(self.options.state_root.join(self.owner.name()));
        if let Some(cgroups) = &self.cgroups {
            cgroups.release_owner(self.owner.name());
        }
    }
}

impl Inner {
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

    async fn check(&self, profile: &RuntimeProfile) -> Result<Preflight, SandboxError> {
        let (_, runtime, image) = self.ready(profile).await?;
        let mut detail = format!(
            "runtime {} ({}), image {} unpacked and verified in {}, limits enforced by \
             cgroups, AppArmor profile {}",
            runtime.name,
            runtime.version,
            image.manifest_digest,
            self.options.image_cache.display(),
            crate::apparmor::host().annotation()
        );
        // The plan a run of its cases makes, as `invocation::run` makes it.
        let plan = TracePlan::with_runc_listener(profile, Stage::Case, &runtime.name, Ok(()));
        if let Some(tracing) = plan.describe() {
            detail.push_str(", ");
            detail.push_str(&tracing);
        }
        Ok(Preflight::of(profile, detail))
    }

    /// The workspace, the compile (when the profile has one) and the cases
    /// in order.
    #[allow(
        clippy::too_many_arguments,
        reason = "the request's parts, checked, and the call's token"
    )]
    async fn run_program(
        &self,
        program: &[u8],
        profile: &RuntimeProfile,
        files: &ProgramFiles,
        invocations: &[Invocation],
        on_case: Option<&CaseSink>,
        conversation: Option<&ConversationSide>,
        token: &CancellationToken,
    ) -> Result<ProgramRun, SandboxError> {
        let (cgroups, runtime, image) = self.ready(profile).await?;
        // Every run has its place once it can run (this client waits for
        // no capacity; its schedule lets the interactor in beside): the
        // other side may start.
        if let Some(side) = conversation {
            side.placed();
        }
        let workspace =
            Workspace::create(self.owner.dir(), program, profile, files).map_err(|e| {
                SandboxError::Setup {
                    message: format!(
                        "cannot create a workspace under {}: {e}",
                        self.owner.dir().display()
                    ),
                }
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
            program_target: workspace.program_target(),
            stage: Stage::Case,
            build_on_host: build_dir.as_deref(),
            conversation,
            token,
        };
        let mut warnings = Vec::new();
        // Whether something of this call could not be removed (the notes
        // among the warnings, a run again alone, leave nothing behind).
        let mut left_behind = false;
        let compile = match &build_dir {
            Some(build_dir) => {
                let compile_context = InvocationContext {
                    stage: Stage::Compile,
                    ..context
                };
                let (event, _) = self
                    .run_invocation(
                        &compile_context,
                        0,
                        &Invocation::default(),
                        &mut warnings,
                        &mut left_behind,
                    )
                    .await;
                Some(compile_event(event, build_dir, BuildDisk::Local))
            }
            None => None,
        };
        let mut cases = Cases::new(compile.as_ref(), token, on_case);
        for (index, invocation) in invocations.iter().enumerate() {
            if cases.decided() {
                continue;
            }
            let (event, stop) = self
                .run_invocation(&context, index, invocation, &mut warnings, &mut left_behind)
                .await;
            cases.ran(event, stop);
        }
        let events = cases.into_events();
        if let Err(warning) = workspace.remove() {
            warnings.push(warning.to_string());
            left_behind = true;
        }
        if left_behind {
            // Something could not be removed: keep this owner's files so the
            // next client's sweep finds what is left.
            tracing::warn!("left for the next start's sweep: {}", warnings.join("; "));
            self.owner.keep_for_sweep();
        }
        Ok(ProgramRun {
            interaction: None,
            profile: profile.name.clone(),
            program_sha256: sha256_hex(program),
            events,
            sandbox_warnings: warnings,
            compile,
        })
    }

    /// One invocation, run again alone when its timeout must be confirmed
    /// (never on a side of a conversation).
    async fn run_invocation(
        &self,
        context: &InvocationContext<'_>,
        index: usize,
        invocation: &Invocation,
        warnings: &mut Vec<String>,
        left_behind: &mut bool,
    ) -> (InvocationEvent, Option<String>) {
        let token = context.token;
        // The side of a conversation whose case this is (its compile is not).
        let live_side = context
            .conversation
            .filter(|_| context.stage == Stage::Case);
        // The program holds its slot while it waits for its interactor to
        // reach the case: the interactor's slots (its compile's too) are
        // beside it, never behind a confirmation waiting for that program.
        let interactor = context
            .conversation
            .is_some_and(|side| side.side() == Side::Interactor);
        let mut alone_runs = 0;
        loop {
            let alone = alone_runs > 0;
            let place = match (alone, interactor) {
                (true, _) => Place::Alone,
                (false, true) => Place::Beside,
                (false, false) => Place::Shared,
            };
            // The interactor begins the case before it takes its slot, the
            // program after: the program's slot is held whenever its
            // interactor is let in beside it.
            let mut live = None;
            if let Some(side) = live_side
                && interactor
            {
                match begin(side, index, token).await {
                    Ok(begun) => live = Some(begun),
                    Err(why) => return (InvocationEvent::not_run(why.clone()), Some(why)),
                }
            }
            let Some(_slot) = self.schedule.slot(place, token).await else {
                return (
                    InvocationEvent::not_run("the call was cancelled"),
                    Some("the call was cancelled".into()),
                );
            };
            if let Some(side) = live_side
                && !interactor
            {
                match begin(side, index, token).await {
                    Ok(begun) => live = Some(begun),
                    Err(why) => return (InvocationEvent::not_run(why.clone()), Some(why)),
                }
            }
            let result = invocation::run(context, index, invocation, live, alone).await;
            // An invocation's own warnings are what it could not remove.
            *left_behind |= !result.warnings.is_empty();
            warnings.extend(result.warnings);
            match result.next {
                Next::Continue => return (result.event, None),
                Next::Stop(reason) => return (result.event, Some(reason)),
                // A case of a conversation runs once (the other side's case
                // has ended), and an interactor never runs alone (its
                // program holds a slot while it waits for it): the event
                // says what is unproven (an unconfirmed timeout).
                Next::ConfirmAlone(_) if live_side.is_some() || interactor => {
                    return (result.event, None);
                }
                Next::ConfirmAlone(why) if alone_runs < ALONE_RUNS => {
                    alone_runs += 1;
                    warnings.push(alone_run_warning(index, alone_runs, &why));
                }
                // Still unproven alone: the event says so (an unconfirmed timeout).
                Next::ConfirmAlone(_) => return (result.event, None),
            }
        }
    }
}

/// Waits for the other side of the conversation to reach case `index`
/// too; `Err` (why the case is not run) when it never will, or the call
/// was cancelled meanwhile.
async fn begin(
    side: &ConversationSide,
    index: usize,
    token: &CancellationToken,
) -> Result<LiveCase, String> {
    tokio::select! {
        biased;
        () = token.cancelled() => Err("the call was cancelled".into()),
        begun = side.begin(index) => begun,
    }
}
