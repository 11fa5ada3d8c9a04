//! The Docker implementation of [`SandboxClient`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bollard::query_parameters::ListContainersOptionsBuilder;
use bollard::{API_DEFAULT_VERSION, Docker};
use progscore_sandbox::{
    Backend, BoxFuture, Invocation, InvocationEvent, ProgramRun, RuntimeProfile, SandboxClient,
    SandboxError, sha256_hex,
};
use tokio::sync::{Mutex, OnceCell};
use tokio_util::sync::CancellationToken;

use crate::engine::{self, EngineFacts, EngineReport, ImageFacts, ProfileCheck};
use crate::guard::cancel_pair;
use crate::invocation::{self, InvocationContext};
use crate::workspace::Workspace;

/// The label every container progscore creates carries; its value names the
/// client that owns it.
pub const OWNER_LABEL: &str = "progscore.owner";

/// How the client reaches the engine and where it keeps workspaces.
#[derive(Debug, Clone)]
pub struct DockerOptions {
    /// The engine's unix socket.
    pub socket: PathBuf,
    /// Where private per-call workspaces are created (must be visible to the
    /// engine at the same path, i.e. a local engine).
    pub workspace_root: PathBuf,
    /// Value of the [`OWNER_LABEL`] label on this client's containers.
    pub owner: String,
    /// The non-root `uid:gid` programs run as.
    pub user: String,
}

impl Default for DockerOptions {
    fn default() -> Self {
        let socket = std::env::var("DOCKER_HOST")
            .ok()
            .and_then(|host| host.strip_prefix("unix://").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("/var/run/docker.sock"));
        DockerOptions {
            socket,
            workspace_root: std::env::temp_dir().join("progscore-workspaces"),
            owner: format!(
                "progscore-{}-{}",
                std::process::id(),
                invocation::random_hex()
            ),
            user: "65534:65534".into(),
        }
    }
}

/// Runs programs in fresh hardened containers of a local Docker engine.
pub struct DockerClient {
    inner: Arc<Inner>,
    runtime: Option<tokio::runtime::Runtime>,
}

struct Inner {
    options: DockerOptions,
    profiles: Vec<RuntimeProfile>,
    engine: OnceCell<(Docker, EngineFacts)>,
    images: Mutex<HashMap<String, ImageFacts>>,
}

impl DockerClient {
    /// A client for these profiles (only `backend = "docker"` ones are
    /// accepted by `execute`). The engine is contacted on first use, so a
    /// client can be built while the engine is down; calls then fail with
    /// [`SandboxError::EngineUnavailable`] until it is back.
    pub fn new(
        profiles: Vec<RuntimeProfile>,
        options: DockerOptions,
    ) -> Result<DockerClient, SandboxError> {
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
                options,
                profiles,
                engine: OnceCell::new(),
                images: Mutex::new(HashMap::new()),
            }),
            runtime: Some(runtime),
        })
    }

    /// The owner label value of this client's containers.
    pub fn owner(&self) -> &str {
        &self.inner.options.owner
    }

    /// Checks the engine and every Docker profile, as `progscore doctor` shows.
    pub async fn diagnose(&self) -> EngineReport {
        let inner = self.inner.clone();
        let task = self.spawn(async move {
            let engine = inner.engine().await.map(|(_, facts)| facts.clone());
            let mut checks = Vec::new();
            for profile in inner
                .profiles
                .iter()
                .filter(|p| p.backend == Backend::Docker)
            {
                let check = match &engine {
                    Err(err) => Err(err.clone()),
                    Ok(facts) => match facts.require_runtime(profile) {
                        Err(err) => Err(err),
                        Ok(()) => inner.image_facts(profile).await.map(|image| {
                            format!(
                                "image {} (id {}), runtime {}",
                                profile.image().map(|i| i.to_string()).unwrap_or_default(),
                                image.image_id,
                                facts.runtime_for(profile)
                            )
                        }),
                    },
                };
                checks.push(match check {
                    Ok(detail) => ProfileCheck {
                        profile: profile.name.clone(),
                        ok: true,
                        detail,
                    },
                    Err(err) => ProfileCheck {
                        profile: profile.name.clone(),
                        ok: false,
                        detail: err.to_string(),
                    },
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
            let (docker, _) = inner.engine().await?;
            let filters = HashMap::from([(
                "label".to_string(),
                vec![format!("{OWNER_LABEL}={}", inner.options.owner)],
            )]);
            let options = ListContainersOptionsBuilder::new()
                .all(true)
                .filters(&filters)
                .build();
            let containers = docker
                .list_containers(Some(options))
                .await
                .map_err(engine::unavailable)?;
            Ok(containers
                .into_iter()
                .flat_map(|c| c.names.unwrap_or_default())
                .map(|name| name.trim_start_matches('/').to_string())
                .collect())
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
        match &self.runtime {
            Some(runtime) => runtime.spawn(future),
            None => unreachable!("the runtime is only taken in Drop"),
        }
    }
}

impl Drop for DockerClient {
    fn drop(&mut self) {
        // Dropping a runtime inside an async context panics; no call can be in
        // flight here (calls borrow the client), so nothing is abandoned.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
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
        let token = CancellationToken::new();
        let (mut on_drop, finished) = cancel_pair(token.clone());
        let task = self.spawn(async move {
            let result = inner.run(&program, &profile, &invocations, &token).await;
            drop(finished);
            result
        });
        Box::pin(async move {
            let result = task.await;
            on_drop.disarm();
            result.map_err(|e| SandboxError::Setup {
                message: format!("the sandbox task failed: {e}"),
            })?
        })
    }
}

impl Inner {
    async fn engine(&self) -> Result<&(Docker, EngineFacts), SandboxError> {
        self.engine
            .get_or_try_init(|| async {
                let socket = self.options.socket.display().to_string();
                let docker = Docker::connect_with_unix(&socket, 120, API_DEFAULT_VERSION)
                    .map_err(engine::unavailable)?
                    .negotiate_version()
                    .await
                    .map_err(|e| SandboxError::EngineUnavailable {
                        message: format!(
                            "cannot reach the engine at {socket}: {}",
                            engine::describe(&e)
                        ),
                    })?;
                let facts = EngineFacts::read(&docker).await?;
                sweep_orphans(&docker).await;
                Ok((docker, facts))
            })
            .await
    }

    async fn image_facts(&self, profile: &RuntimeProfile) -> Result<ImageFacts, SandboxError> {
        if let Some(facts) = self.images.lock().await.get(&profile.name) {
            return Ok(facts.clone());
        }
        let (docker, _) = self.engine().await?;
        let facts = engine::check_image(docker, profile).await?;
        self.images
            .lock()
            .await
            .insert(profile.name.clone(), facts.clone());
        Ok(facts)
    }

    async fn run(
        &self,
        program: &[u8],
        profile_name: &str,
        invocations: &[Invocation],
        token: &CancellationToken,
    ) -> Result<ProgramRun, SandboxError> {
        let profile = self
            .profiles
            .iter()
            .find(|p| p.name == profile_name)
            .ok_or_else(|| SandboxError::unknown_profile(profile_name, &self.profiles))?;
        if profile.backend != Backend::Docker {
            return Err(SandboxError::WrongBackend {
                profile: profile.name.clone(),
                backend: profile.backend.to_string(),
            });
        }
        let (docker, facts) = self.engine().await?;
        facts.require_limits()?;
        facts.require_runtime(profile)?;
        let image = self.image_facts(profile).await?;
        let workspace = Workspace::create(&self.options.workspace_root, program).map_err(|e| {
            SandboxError::Setup {
                message: format!(
                    "cannot create a workspace under {}: {e}",
                    self.options.workspace_root.display()
                ),
            }
        })?;
        let context = InvocationContext {
            docker,
            engine: facts,
            image: &image,
            profile,
            options: &self.options,
            program_on_host: workspace.program_path(),
            token,
        };
        let mut events = Vec::with_capacity(invocations.len());
        let mut warnings = Vec::new();
        let mut stop_reason: Option<String> = None;
        for (index, invocation) in invocations.iter().enumerate() {
            if stop_reason.is_none() && token.is_cancelled() {
                stop_reason = Some("the call was cancelled".into());
            }
            if let Some(reason) = &stop_reason {
                events.push(InvocationEvent::not_run(reason.clone()));
                continue;
            }
            let result = invocation::run(&context, index, invocation).await;
            events.push(result.event);
            warnings.extend(result.warnings);
            stop_reason = result.stop_reason;
        }
        if let Err(warning) = workspace.remove() {
            warnings.push(warning);
        }
        Ok(ProgramRun {
            profile: profile.name.clone(),
            program_sha256: sha256_hex(program),
            events,
            sandbox_warnings: warnings,
        })
    }
}

/// Removes containers left by progscore processes that no longer exist (a
/// process killed with SIGKILL cannot clean up after itself). Owner labels
/// carry the creating process's pid; a container whose owner pid is alive,
/// or whose label is not ours, is left alone.
async fn sweep_orphans(docker: &Docker) {
    let filters = HashMap::from([("label".to_string(), vec![OWNER_LABEL.to_string()])]);
    let options = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    let Ok(containers) = docker.list_containers(Some(options)).await else {
        return;
    };
    for container in containers {
        let owner = container
            .labels
            .as_ref()
            .and_then(|labels| labels.get(OWNER_LABEL))
            .cloned()
            .unwrap_or_default();
        let Some(pid) = owner_pid(&owner) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let Some(id) = container.id else { continue };
        let options = bollard::query_parameters::RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        match docker.remove_container(&id, Some(options)).await {
            Ok(()) => tracing::warn!("removed container {id} left by dead progscore process {pid}"),
            Err(err) => tracing::warn!(
                "cannot remove container {id} left by dead progscore process {pid}: {}",
                engine::describe(&err)
            ),
        }
    }
}

/// The pid in an owner label `progscore-<pid>-<hex>`.
pub(crate) fn owner_pid(owner: &str) -> Option<u32> {
    let rest = owner.strip_prefix("progscore-")?;
    let (pid, tag) = rest.split_once('-')?;
    (!tag.is_empty() && tag.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| pid.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::owner_pid;

    #[test]
    fn owner_labels_name_their_process() {
        assert_eq!(owner_pid("progscore-4242-00ff"), Some(4242));
        assert_eq!(owner_pid("progscore-4242-"), None);
        assert_eq!(owner_pid("bench-cli-loop"), None);
        assert_eq!(owner_pid("progscore-x-00"), None);
    }
}
