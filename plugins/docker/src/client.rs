//! The Docker implementation of `SandboxClient`: the container backends'
//! shared face over the engines, the preflight of a profile across them,
//! and what the client holds when it is dropped. A call's program runs in
//! `program`; `doctor`'s report is built in `doctor`.

use std::sync::Arc;
use std::time::Duration;

use progscore_sandbox::{
    Backend, BoxFuture, CaseSink, ConversationSide, Invocation, Owner, Preflight, ProgramFiles,
    ProgramRun, RunRequest, RuntimeProfile, SandboxClient, SandboxError,
};
use tokio_util::sync::CancellationToken;

use crate::doctor::{self, EngineReport};
use crate::options::{DockerOptions, OWNER_KIND};
use crate::pool::{Pool, PooledEngine};
use crate::program::Runner;
use progscore_container::Guarded;

/// Runs programs in fresh hardened containers of one or more local Docker
/// engines.
pub struct DockerClient {
    client: Guarded<Inner>,
}

struct Inner {
    options: DockerOptions,
    profiles: Vec<RuntimeProfile>,
    /// The engines, and this client's owner.
    pool: Arc<Pool>,
    /// What runs a call's program on them.
    runner: Runner,
}

impl DockerClient {
    /// A client for these profiles (only `backend = "docker"` ones are
    /// accepted by `execute`). It registers its owner under
    /// [`DockerOptions::owner_root`] at once; the engines are contacted on
    /// first use (when containers and workspaces of dead progscore processes
    /// are swept first), so a client can be built while they are down.
    pub fn new(
        profiles: Vec<RuntimeProfile>,
        options: DockerOptions,
    ) -> Result<DockerClient, SandboxError> {
        let owner =
            Owner::register(&options.owner_root, OWNER_KIND).map_err(|e| SandboxError::Setup {
                message: format!("cannot register the client's workspace folder: {e}"),
            })?;
        if options.engines.is_empty() {
            return Err(SandboxError::Setup {
                message: "the Docker client was given no engine".into(),
            });
        }
        let pool = Arc::new(Pool::new(&options, owner));
        let inner = Inner {
            runner: Runner::new(options.clone(), pool.clone()),
            pool,
            options,
            profiles,
        };
        Ok(DockerClient {
            client: Guarded::new(inner, "progscore-docker")?,
        })
    }

    /// The owner label value of this client's containers.
    pub fn owner(&self) -> &str {
        self.client.backend().pool.owner.name()
    }

    /// This client's private folder (its workspaces live below it).
    pub fn owner_dir(&self) -> &std::path::Path {
        self.client.backend().pool.owner.dir()
    }

    /// How many programs the engines take at once in all, when every one is
    /// bounded (read after a preflight: an engine's CPUs are known once it
    /// was reached).
    pub fn capacity(&self) -> Option<usize> {
        self.client.backend().pool.capacity()
    }

    /// Checks every engine and every Docker profile on it, as `progscore
    /// doctor` shows: one report per engine.
    pub async fn diagnose(&self) -> Vec<EngineReport> {
        let task = self
            .client
            .spawn(|inner| async move { doctor::diagnose(&inner.pool, &inner.profiles).await });
        match task.await {
            Ok(reports) => reports,
            Err(err) => vec![doctor::report(
                &self.client.backend().pool.engines[0],
                Err(&SandboxError::Setup {
                    message: err.to_string(),
                }),
                Vec::new(),
            )],
        }
    }

    /// Names of this client's containers that still exist on any engine
    /// (should be none between calls).
    pub async fn owned_containers(&self) -> Result<Vec<String>, SandboxError> {
        let task = self.client.spawn(|inner| async move {
            inner.pool.contact().await?;
            inner.pool.owned(inner.pool.owner.name()).await
        });
        task.await.map_err(|e| SandboxError::Setup {
            message: e.to_string(),
        })?
    }
}

impl SandboxClient for DockerClient {
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
    const KIND: Backend = Backend::Docker;

    fn profiles(&self) -> &[RuntimeProfile] {
        &self.profiles
    }

    fn owner(&self) -> &Owner {
        &self.pool.owner
    }

    /// At most a kill, a wait and a removal, each bounded by the engine
    /// timeout.
    fn cleanup_bound(&self) -> Duration {
        self.options.engine_timeout * 3 + Duration::from_secs(10)
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
        self.runner
            .place(
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
        self.check_profile(profile).await
    }

    /// One last try at the containers the engines would not remove during
    /// the calls (bounded by the engine timeout per container); what still
    /// fails is left to the next start's sweep, which finds this owner dead.
    fn stopping(&self, runtime: &tokio::runtime::Runtime) {
        if !self.pool.engines.iter().any(PooledEngine::has_leftovers) {
            return;
        }
        let pool = Arc::clone(&self.pool);
        let engine_timeout = self.options.engine_timeout;
        let handle = runtime.handle().clone();
        // A thread of its own: the drop may run inside the caller's runtime.
        let removing = std::thread::spawn(move || {
            handle.block_on(async {
                for engine in &pool.engines {
                    let (warnings, _) = engine.remove_leftovers(&pool.owner, engine_timeout).await;
                    for warning in warnings {
                        tracing::warn!("{warning}");
                    }
                }
                pool.forget_leftovers_if_none();
            })
        });
        let _ = removing.join();
    }

    fn stopped(&self) {
        let pool = &self.pool;
        for engine in pool.engines.iter().filter_map(PooledEngine::connected) {
            if let Some(cgroups) = &engine.cgroups {
                cgroups.release_owner(pool.owner.name());
            }
        }
    }
}

impl Inner {
    /// Checks the profile on every engine it may use; it passes when one
    /// engine can run it, and every engine that can runs it alike.
    async fn check_profile(&self, profile: &RuntimeProfile) -> Result<Preflight, SandboxError> {
        let pool = &self.pool;
        pool.contact().await?;
        let mut passed = Vec::new();
        let mut refused = Vec::new();
        let mut down = Vec::new();
        for index in pool.candidates(profile) {
            let engine = &pool.engines[index];
            if engine.connected().is_none() {
                down.push(index);
                continue;
            }
            match pool.check(index, profile).await {
                Ok((runtime, image)) if !engine.health.is_down() => {
                    passed.push((index, runtime, image));
                }
                Ok(_) => down.push(index),
                Err(err) => {
                    if pool.is_pool() {
                        tracing::warn!(
                            "profile `{}` will not run on the Docker engine {}: {err}",
                            profile.name,
                            engine.health.described()
                        );
                    }
                    refused.push(err);
                }
            }
        }
        let Some((_, runtime, image)) = passed.first().cloned() else {
            if let Some(err) = refused.into_iter().next() {
                return Err(err);
            }
            let engines: Vec<&str> = down
                .iter()
                .map(|&i| pool.engines[i].health.described())
                .collect();
            return Err(SandboxError::EngineUnavailable {
                message: if engines.is_empty() {
                    format!(
                        "profile `{}` names no configured Docker engine",
                        profile.name
                    )
                } else {
                    format!("the Docker engine {} is not answering", engines.join(", "))
                },
            });
        };
        let first = &pool.engines[passed[0].0];
        let measured = first.connected().is_some_and(|e| e.cgroups.is_some());
        let mut detail = format!(
            "image {} (id {}), runtime {runtime}, {}",
            profile.image().map(|i| i.to_string()).unwrap_or_default(),
            image.image_id,
            if measured {
                "CPU time and memory measured"
            } else {
                "nothing measured (cgroups not visible): wall-clock timeouts undetermined"
            }
        );
        if pool.is_pool() {
            let engines: Vec<String> = passed
                .iter()
                .map(|(i, _, _)| {
                    let engine = &pool.engines[*i];
                    match engine.capacity() {
                        Some(n) => format!("{} ({n} at once)", engine.name()),
                        None => engine.name().to_string(),
                    }
                })
                .collect();
            detail.push_str(&format!("; engines {}", engines.join(", ")));
            if !down.is_empty() {
                let names: Vec<&str> = down.iter().map(|&i| pool.engines[i].name()).collect();
                detail.push_str(&format!(" (down now: {})", names.join(", ")));
            }
        }
        let mut found = Preflight::of(profile, detail);
        // What runs when the profile names no runtime is the engine's default
        // (the same on every engine of the profile): the fingerprint says which.
        found.fingerprint["runtime"] = serde_json::Value::String(runtime);
        Ok(found)
    }
}
