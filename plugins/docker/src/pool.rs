//! The engines a client runs programs on: their connections, what each can
//! run, how many programs each has in flight, and their return after an
//! outage. One concern: which engine a program goes to, and when an engine
//! may be used again.
//!
//! A program (its compile and every case) runs on one engine. An engine
//! that stops answering is marked down; a background probe pings it with
//! backoff, and when it answers again it first removes what this client
//! left on it (every container labelled with this owner that no call is
//! using), then takes programs again.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bollard::{API_DEFAULT_VERSION, Docker};
use progscore_container::Cgroups;
use progscore_sandbox::{Owner, RuntimeProfile, SandboxError};
use tokio::sync::{Notify, OnceCell};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::engine::{self, EngineFacts, ImageFacts};
use crate::health::{EngineHealth, Unavailable, ping};
use crate::invocation::{self, Leftover};
use crate::options::{DEFAULT_ENGINE_NAME, DockerOptions, Endpoint, EngineOptions};
use crate::sweep::{list_owned, remove_owned_except, sweep_dead_owners};

/// First pause between probes of an engine that is down; doubled up to [`MAX_PROBE_PAUSE`].
const FIRST_PROBE_PAUSE: Duration = Duration::from_millis(250);
const MAX_PROBE_PAUSE: Duration = Duration::from_secs(5);

/// A connected engine: its API client, what it reported, and its cgroups
/// when this process can see them.
pub(crate) struct Engine {
    pub docker: Docker,
    pub facts: EngineFacts,
    pub cgroups: Option<Cgroups>,
}

/// One engine of the pool and this client's state on it.
pub(crate) struct PooledEngine {
    pub options: EngineOptions,
    connection: OnceCell<Engine>,
    pub health: EngineHealth,
    images: tokio::sync::Mutex<HashMap<String, ImageFacts>>,
    /// Containers it could not remove while it was gone.
    leftovers: std::sync::Mutex<Vec<Leftover>>,
    /// Programs running on it now.
    in_flight: AtomicUsize,
    /// Containers of calls in progress on it: the sweep after an outage
    /// never touches them.
    pub active: ActiveContainers,
    /// Whether a probe is waiting for it to answer again.
    probing: AtomicBool,
    /// Whether this client left something on it that only a sweep by
    /// label can find (a remote call's volumes).
    unswept: AtomicBool,
}

/// The names of containers a call is using on one engine.
#[derive(Default)]
pub(crate) struct ActiveContainers(std::sync::Mutex<HashSet<String>>);

/// A container name registered as in use until dropped.
pub(crate) struct InUse<'a> {
    set: &'a ActiveContainers,
    name: String,
}

impl ActiveContainers {
    /// Registers `name` before its container is created.
    pub(crate) fn hold(&self, name: &str) -> InUse<'_> {
        self.lock().insert(name.to_string());
        InUse {
            set: self,
            name: name.to_string(),
        }
    }

    pub(crate) fn snapshot(&self) -> HashSet<String> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        self.set.lock().remove(&self.name);
    }
}

/// What every engine that runs a profile must agree on, so that the
/// attempt's fingerprint does not depend on which engine ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Agreement {
    runtime: String,
    image_id: String,
    /// The engine it was first seen on.
    engine: String,
}

/// The engines, their capacity, and the wake-up of calls waiting for one.
pub(crate) struct Pool {
    pub engines: Vec<PooledEngine>,
    /// This client's owner: its label value and private folder.
    pub owner: Owner,
    owner_root: std::path::PathBuf,
    engine_timeout: Duration,
    outage_wait: Duration,
    /// Rung when a program leaves an engine or an engine comes back.
    freed: Notify,
    /// Serialises the choice of an engine and its count.
    choosing: std::sync::Mutex<()>,
    agreements: std::sync::Mutex<HashMap<String, Agreement>>,
    first_contact: OnceCell<()>,
}

/// A program's place on one engine; dropping it frees the place.
pub(crate) struct Lease<'a> {
    pool: &'a Pool,
    pub index: usize,
}

impl Lease<'_> {
    pub(crate) fn engine(&self) -> &PooledEngine {
        &self.pool.engines[self.index]
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        self.engine().in_flight.fetch_sub(1, Ordering::SeqCst);
        self.pool.freed.notify_waiters();
    }
}

impl PooledEngine {
    fn new(options: EngineOptions, outage_wait: Duration) -> PooledEngine {
        let described = if options.name == DEFAULT_ENGINE_NAME {
            format!("at {}", options.endpoint.url())
        } else {
            format!("`{}` at {}", options.name, options.endpoint.url())
        };
        PooledEngine {
            health: EngineHealth::new(described, outage_wait),
            options,
            connection: OnceCell::new(),
            images: tokio::sync::Mutex::new(HashMap::new()),
            leftovers: std::sync::Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            active: ActiveContainers::default(),
            probing: AtomicBool::new(false),
            unswept: AtomicBool::new(false),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.options.name
    }

    /// The connection, when it was made.
    pub(crate) fn connected(&self) -> Option<&Engine> {
        self.connection.get()
    }

    /// How many programs it takes at once (`None`: unbounded; unknown
    /// until connected).
    pub(crate) fn capacity(&self) -> Option<usize> {
        let cpus = self.connected().map_or(1, |e| e.facts.cpus);
        self.options.capacity_for(cpus)
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Everything a run of `profile` needs from this engine, checked: the
    /// limits, the runtime, CPU time measurable when limited, the image by
    /// its pin (never pulled).
    pub(crate) async fn ready(
        &self,
        profile: &RuntimeProfile,
    ) -> Result<(&Engine, ImageFacts), SandboxError> {
        let Some(engine) = self.connected() else {
            return Err(SandboxError::EngineUnavailable {
                message: format!(
                    "the Docker engine {} was not reached",
                    self.health.described()
                ),
            });
        };
        engine.facts.require_limits()?;
        engine.facts.require_runtime(profile)?;
        engine.facts.require_build_owner(profile)?;
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
        if let Some(facts) = self.images.lock().await.get(&profile.name) {
            return Ok((engine, facts.clone()));
        }
        let facts = engine::check_image(&engine.docker, profile).await?;
        self.images
            .lock()
            .await
            .insert(profile.name.clone(), facts.clone());
        Ok((engine, facts))
    }

    /// Keeps a container it could not remove, for the next call or its
    /// return; meanwhile the owner's files stay for the next start's sweep.
    pub(crate) fn keep_leftover(&self, owner: &Owner, leftover: Leftover) {
        owner.keep_for_sweep();
        self.lock_leftovers().push(leftover);
    }

    /// Removes the containers it could not remove before; what still fails
    /// stays. Returns the warnings, and whether none is left.
    pub(crate) async fn remove_leftovers(
        &self,
        owner: &Owner,
        engine_timeout: Duration,
    ) -> (Vec<String>, bool) {
        let pending: Vec<Leftover> = std::mem::take(&mut *self.lock_leftovers());
        let Some(engine) = self.connected() else {
            self.lock_leftovers().extend(pending);
            return (Vec::new(), false);
        };
        let mut warnings = Vec::new();
        for leftover in pending {
            if let Err(e) =
                invocation::remove_leftover(&engine.docker, engine_timeout, &leftover).await
            {
                warnings.push(e);
                self.keep_leftover(owner, leftover);
            }
        }
        if self.unswept.swap(false, Ordering::SeqCst)
            && let Err(e) = remove_owned_except(&engine.docker, owner.name(), &self.active).await
        {
            warnings.push(e);
            self.unswept.store(true, Ordering::SeqCst);
        }
        let none_left = !self.has_leftovers();
        (warnings, none_left)
    }

    pub(crate) fn has_leftovers(&self) -> bool {
        !self.lock_leftovers().is_empty() || self.unswept.load(Ordering::SeqCst)
    }

    /// Notes that this client left something on the engine that its sweep
    /// by label must remove (at the next call, its return, or the next
    /// start's sweep of this owner).
    pub(crate) fn must_be_swept(&self, owner: &Owner) {
        owner.keep_for_sweep();
        self.unswept.store(true, Ordering::SeqCst);
    }

    fn lock_leftovers(&self) -> std::sync::MutexGuard<'_, Vec<Leftover>> {
        self.leftovers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Connects and reads the engine's facts (once; a failure is tried
    /// again by the next caller).
    async fn connect(&self, timeout: Duration) -> Result<&Engine, SandboxError> {
        self.connection
            .get_or_try_init(|| async {
                let docker =
                    open(&self.options.endpoint, timeout).map_err(|e| self.unreachable(&e))?;
                let docker = docker
                    .negotiate_version()
                    .await
                    .map_err(|e| self.unreachable(&e))?;
                let facts = EngineFacts::read(&docker).await?;
                // Only an engine on this host shares this process's cgroups.
                let cgroups = match self.options.endpoint {
                    Endpoint::Unix(_) => Cgroups::discover(
                        facts.cgroup_driver.as_deref(),
                        facts.cgroup_version.as_deref(),
                    ),
                    _ => None,
                };
                if cgroups.is_none() {
                    tracing::warn!(
                        "cannot find the cgroups of the Docker engine {} from this process \
                         (driver {:?}): CPU time, CPU waits and peak memory are not measured, so \
                         a wall-clock timeout there is never proven (undetermined, not false)",
                        self.health.described(),
                        facts.cgroup_driver
                    );
                }
                Ok(Engine {
                    docker,
                    facts,
                    cgroups,
                })
            })
            .await
    }

    fn unreachable(&self, e: &bollard::errors::Error) -> SandboxError {
        SandboxError::EngineUnavailable {
            message: format!(
                "cannot reach the Docker engine {}: {}; is dockerd running? \
                 (scripts/setup.sh starts the local one)",
                self.health.described(),
                engine::cause(e)
            ),
        }
    }
}

/// Opens a client for the endpoint with bollard's own transports.
fn open(endpoint: &Endpoint, timeout: Duration) -> Result<Docker, bollard::errors::Error> {
    let seconds = timeout.as_secs().max(1);
    match endpoint {
        Endpoint::Unix(path) => {
            Docker::connect_with_unix(&path.display().to_string(), seconds, API_DEFAULT_VERSION)
        }
        Endpoint::Tcp { address, tls: None } => {
            Docker::connect_with_http(&format!("http://{address}"), seconds, API_DEFAULT_VERSION)
        }
        Endpoint::Tcp {
            address,
            tls: Some(tls),
        } => {
            // rustls picks no provider by itself when several are compiled
            // in; one installed before (by anyone) is kept.
            let _ = rustls::crypto::ring::default_provider().install_default();
            Docker::connect_with_ssl(
                address,
                &tls.key,
                &tls.cert,
                &tls.ca,
                seconds,
                API_DEFAULT_VERSION,
            )
        }
        Endpoint::Ssh { address, key } => Docker::connect_with_ssh(
            &format!("ssh://{address}"),
            seconds,
            API_DEFAULT_VERSION,
            key.as_ref().map(|k| k.display().to_string()),
        ),
    }
}

/// Why no engine took a program.
pub(crate) enum NoEngine {
    /// Every engine that could run it refused it, or is gone past the
    /// outage wait.
    Error(SandboxError),
    /// The call was cancelled while it waited.
    Cancelled,
}

impl Pool {
    pub(crate) fn new(options: &DockerOptions, owner: Owner) -> Pool {
        Pool {
            owner,
            engines: options
                .engines
                .iter()
                .map(|e| PooledEngine::new(e.clone(), options.outage_wait))
                .collect(),
            owner_root: options.owner_root.clone(),
            engine_timeout: options.engine_timeout,
            outage_wait: options.outage_wait,
            freed: Notify::new(),
            choosing: std::sync::Mutex::new(()),
            agreements: std::sync::Mutex::new(HashMap::new()),
            first_contact: OnceCell::new(),
        }
    }

    /// Whether the client has more than one engine: then an engine that is
    /// down is probed in the background and its programs go elsewhere.
    pub(crate) fn is_pool(&self) -> bool {
        self.engines.len() > 1
    }

    /// The first contact with every engine, at once: each is connected and
    /// what dead progscore processes left is swept from all of them. With
    /// one engine, its failure is the caller's (and tried again next call);
    /// in a pool, an engine that does not answer is marked down and probed.
    pub(crate) async fn contact(self: &Arc<Self>) -> Result<(), SandboxError> {
        if !self.is_pool() {
            let engine = &self.engines[0];
            let newly = engine.connected().is_none();
            engine.connect(self.engine_timeout).await?;
            if newly {
                self.sweep_dead_owners().await;
            }
            return Ok(());
        }
        self.first_contact
            .get_or_init(|| async {
                let connecting = self
                    .engines
                    .iter()
                    .map(|engine| engine.connect(self.engine_timeout));
                let results = futures_util::future::join_all(connecting).await;
                for (index, result) in results.into_iter().enumerate() {
                    if let Err(err) = result {
                        self.engines[index].health.mark_down(&err.to_string());
                        self.probe(index);
                    }
                }
                self.sweep_dead_owners().await;
            })
            .await;
        Ok(())
    }

    /// Removes what dead progscore processes left on every connected
    /// engine; a dead owner is forgotten only once every engine was reached.
    async fn sweep_dead_owners(&self) {
        let connected: Vec<&Engine> = self
            .engines
            .iter()
            .filter_map(PooledEngine::connected)
            .collect();
        let every_engine = connected.len() == self.engines.len();
        sweep_dead_owners(&self.owner_root, &connected, every_engine).await;
    }

    /// Whether `engine` may run `profile`: the profile names it, or names
    /// none.
    fn allows(profile: &RuntimeProfile, engine: &PooledEngine) -> bool {
        profile.engines.is_empty() || profile.engines.iter().any(|e| e == engine.name())
    }

    /// Checks `profile` on one engine, and that it resolves what the other
    /// engines of the profile resolve.
    pub(crate) async fn check(
        &self,
        index: usize,
        profile: &RuntimeProfile,
    ) -> Result<(String, ImageFacts), SandboxError> {
        let pooled = &self.engines[index];
        let (engine, image) = pooled.ready(profile).await?;
        let runtime = engine.facts.runtime_for(profile);
        let mut agreements = self
            .agreements
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let agreed = agreements
            .entry(profile.name.clone())
            .or_insert_with(|| Agreement {
                runtime: runtime.clone(),
                image_id: image.image_id.clone(),
                engine: pooled.name().to_string(),
            });
        if agreed.runtime != runtime {
            return Err(SandboxError::EngineUnsupported {
                missing: format!(
                    "profile `{}` on engine `{}`: it would run under `{runtime}`, engine `{}` \
                     under `{}`",
                    profile.name,
                    pooled.name(),
                    agreed.engine,
                    agreed.runtime
                ),
                hint: "name the runtime in the profile (`runtime = \"runc\"`), so every engine \
                       runs it the same way and its evidence means the same"
                    .into(),
            });
        }
        if agreed.image_id != image.image_id {
            return Err(SandboxError::ArtifactRefused {
                profile: profile.name.clone(),
                artifact: format!("image on engine `{}`", pooled.name()),
                reason: format!(
                    "its id is {}, on engine `{}` {}: pin the image by its digest \
                     (repo@sha256:...) and load that same image into every engine",
                    image.image_id, agreed.engine, agreed.image_id
                ),
            });
        }
        Ok((runtime, image))
    }

    /// The engines `profile` may use (by index), in order.
    pub(crate) fn candidates(&self, profile: &RuntimeProfile) -> Vec<usize> {
        (0..self.engines.len())
            .filter(|&i| Pool::allows(profile, &self.engines[i]))
            .collect()
    }

    /// Whether another engine than `index` could take `profile` now.
    pub(crate) fn another_is_up(&self, profile: &RuntimeProfile, index: usize) -> bool {
        self.candidates(profile).into_iter().any(|i| {
            i != index && !self.engines[i].health.is_down() && self.engines[i].connected().is_some()
        })
    }

    /// A place for one program of `profile` on the freest engine that can
    /// run it; waits while every such engine is full, or down (up to the
    /// outage wait).
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        profile: &RuntimeProfile,
        token: &CancellationToken,
    ) -> Result<Lease<'_>, NoEngine> {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();

            let mut ready = Vec::new();
            let mut refused = Vec::new();
            let mut down = Vec::new();
            for index in self.candidates(profile) {
                let engine = &self.engines[index];
                if engine.health.is_down() || engine.connected().is_none() {
                    down.push(index);
                    continue;
                }
                match self.check(index, profile).await {
                    Ok(_) => ready.push(index),
                    Err(err) => refused.push(err),
                }
            }
            if let Some(lease) = self.take_freest(&ready) {
                return Ok(lease);
            }
            if ready.is_empty() && down.is_empty() {
                // Refused everywhere: the first engine's reason.
                return Err(NoEngine::Error(refused.into_iter().next().unwrap_or_else(
                    || SandboxError::EngineUnsupported {
                        missing: format!("an engine for profile `{}`", profile.name),
                        hint: "the profile's `engines` names none that is configured".into(),
                    },
                )));
            }
            if ready.is_empty() {
                // Only engines that are down could run it.
                if !self.is_pool() {
                    let engine = &self.engines[down[0]];
                    let Some(connected) = engine.connected() else {
                        return Err(NoEngine::Error(SandboxError::EngineUnavailable {
                            message: format!(
                                "the Docker engine {} was not reached",
                                engine.health.described()
                            ),
                        }));
                    };
                    match engine.health.wait_until_up(&connected.docker, token).await {
                        Ok(()) => continue,
                        Err(Unavailable::GaveUp(message)) => {
                            return Err(NoEngine::Error(SandboxError::EngineUnavailable {
                                message,
                            }));
                        }
                        Err(Unavailable::Cancelled) => return Err(NoEngine::Cancelled),
                    }
                }
                for &index in &down {
                    self.probe(index);
                }
                let since = down
                    .iter()
                    .filter_map(|&i| self.engines[i].health.outage().map(|(since, _)| since))
                    .min()
                    .unwrap_or_else(Instant::now);
                let give_up = since + self.outage_wait;
                if Instant::now() >= give_up {
                    let causes: Vec<String> = down
                        .iter()
                        .map(|&i| {
                            let engine = &self.engines[i];
                            let cause = engine
                                .health
                                .outage()
                                .map(|(_, cause)| cause)
                                .unwrap_or_else(|| "not reached".into());
                            format!("{}: {cause}", engine.health.described())
                        })
                        .collect();
                    return Err(NoEngine::Error(SandboxError::EngineUnavailable {
                        message: format!(
                            "no Docker engine for profile `{}` answers (waited {:?}): {}",
                            profile.name,
                            self.outage_wait,
                            causes.join("; ")
                        ),
                    }));
                }
                tokio::select! {
                    () = token.cancelled() => return Err(NoEngine::Cancelled),
                    () = &mut freed => {}
                    () = tokio::time::sleep_until(give_up) => {}
                }
                continue;
            }
            // Every engine that can run it is full.
            tokio::select! {
                () = token.cancelled() => return Err(NoEngine::Cancelled),
                () = &mut freed => {}
            }
        }
    }

    /// Takes a place on the engine among `ready` with the most room left
    /// (in proportion to its capacity; the first configured when equal).
    fn take_freest(&self, ready: &[usize]) -> Option<Lease<'_>> {
        let _choosing = self
            .choosing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let load = |index: usize| -> Option<f64> {
            let engine = &self.engines[index];
            let used = engine.in_flight();
            match engine.capacity() {
                None => Some(used as f64 / 1e9),
                Some(capacity) if used < capacity => Some(used as f64 / capacity as f64),
                Some(_) => None,
            }
        };
        let mut best: Option<(usize, f64)> = None;
        for &index in ready {
            if let Some(load) = load(index)
                && best.is_none_or(|(_, least)| load < least)
            {
                best = Some((index, load));
            }
        }
        let (index, _) = best?;
        self.engines[index].in_flight.fetch_add(1, Ordering::SeqCst);
        Some(Lease { pool: self, index })
    }

    /// Starts probing an engine that is down, unless a probe already runs.
    /// Once it answers, what this client left on it is removed, then it
    /// takes programs again.
    pub(crate) fn probe(self: &Arc<Self>, index: usize) {
        if !self.is_pool() || self.engines[index].probing.swap(true, Ordering::SeqCst) {
            return;
        }
        let pool = Arc::clone(self);
        tokio::spawn(async move {
            pool.bring_back(index).await;
            pool.engines[index].probing.store(false, Ordering::SeqCst);
            pool.freed.notify_waiters();
        });
    }

    async fn bring_back(&self, index: usize) {
        let engine = &self.engines[index];
        let mut pause = FIRST_PROBE_PAUSE;
        loop {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PROBE_PAUSE);
            let newly = engine.connected().is_none();
            let connected = match engine.connect(self.engine_timeout).await {
                Ok(connected) => connected,
                Err(_) => continue,
            };
            if ping(&connected.docker).await.is_err() {
                continue;
            }
            if newly {
                self.sweep_dead_owners().await;
            }
            match self.sweep_own(index).await {
                Ok(()) => break,
                Err(warning) => tracing::warn!("{warning}"),
            }
        }
        engine.health.mark_up();
    }

    /// Removes this client's containers on one engine that no call is
    /// using: those it could not remove while the engine was gone, and any
    /// the engine created for a request whose answer was lost.
    async fn sweep_own(&self, index: usize) -> Result<(), String> {
        let engine = &self.engines[index];
        let (warnings, _) = engine
            .remove_leftovers(&self.owner, self.engine_timeout)
            .await;
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        let Some(connected) = engine.connected() else {
            return Err(format!(
                "the Docker engine {} is not connected",
                engine.health.described()
            ));
        };
        let removed =
            remove_owned_except(&connected.docker, self.owner.name(), &engine.active).await?;
        if removed > 0 {
            tracing::warn!(
                "removed {removed} container(s) this process left on the Docker engine {} \
                 while it was gone",
                engine.health.described()
            );
        }
        self.forget_leftovers_if_none();
        Ok(())
    }

    /// Once no engine holds a container this client could not remove, its
    /// files go with it again.
    pub(crate) fn forget_leftovers_if_none(&self) {
        if !self.engines.iter().any(PooledEngine::has_leftovers) {
            self.owner.keep_for_sweep_no_more();
        }
    }

    /// This owner's containers on every connected engine, by engine name.
    pub(crate) async fn owned(&self, owner: &str) -> Result<Vec<String>, SandboxError> {
        let mut names = Vec::new();
        for engine in &self.engines {
            if let Some(connected) = engine.connected() {
                for (_, name) in list_owned(&connected.docker, owner).await? {
                    names.push(name);
                }
            }
        }
        Ok(names)
    }

    /// The bound on programs in flight across the engines, when every
    /// engine is bounded.
    pub(crate) fn capacity(&self) -> Option<usize> {
        self.engines
            .iter()
            .map(PooledEngine::capacity)
            .sum::<Option<usize>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Capacity;
    use std::os::unix::fs::PermissionsExt;

    fn pool_of(capacities: &[usize]) -> (Pool, tempfile::TempDir) {
        let root = tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .expect("owner root");
        let options = DockerOptions {
            engines: capacities
                .iter()
                .enumerate()
                .map(|(i, &n)| EngineOptions {
                    capacity: Capacity::Fixed(n),
                    ..EngineOptions::unix(format!("e{i}"), "/nonexistent.sock")
                })
                .collect(),
            owner_root: root.path().to_path_buf(),
            ..DockerOptions::default()
        };
        let owner = Owner::register(root.path(), "docker").expect("owner");
        (Pool::new(&options, owner), root)
    }

    #[test]
    fn programs_go_to_the_freest_engine_in_proportion_and_none_past_capacity() {
        let (pool, _root) = pool_of(&[2, 4]);
        let both = [0, 1];
        let mut taken = Vec::new();
        // Free room in proportion to capacity; the first configured when equal.
        for expected in [0, 1, 1, 0, 1, 1] {
            let lease = pool.take_freest(&both).expect("room left");
            assert_eq!(lease.index, expected);
            taken.push(lease);
        }
        assert!(pool.take_freest(&both).is_none(), "both engines are full");
        assert_eq!(pool.engines[0].in_flight(), 2);
        assert_eq!(pool.engines[1].in_flight(), 4);
        // A program leaving frees its place on its engine.
        let on_first = taken.iter().position(|l| l.index == 0).unwrap();
        taken.remove(on_first);
        assert_eq!(pool.take_freest(&both).map(|l| l.index), Some(0));
        // Only the engines given are considered.
        drop(taken);
        assert_eq!(pool.take_freest(&[1]).map(|l| l.index), Some(1));
    }

    #[test]
    fn an_unbounded_engine_always_has_room() {
        let (mut pool, _root) = pool_of(&[1]);
        pool.engines[0].options.capacity = Capacity::Unbounded;
        let leases: Vec<_> = (0..100)
            .map(|_| pool.take_freest(&[0]).expect("room"))
            .collect();
        assert_eq!(pool.engines[0].in_flight(), 100);
        assert_eq!(pool.capacity(), None);
        drop(leases);
        assert_eq!(pool.engines[0].in_flight(), 0);
    }

    #[test]
    fn a_profile_naming_engines_may_use_those_only() {
        let (pool, _root) = pool_of(&[1, 1, 1]);
        let mut profile = RuntimeProfile::from_spec("p", &docker_spec(), std::path::Path::new("."))
            .expect("profile");
        assert_eq!(pool.candidates(&profile), [0, 1, 2]);
        profile.engines = vec!["e2".into(), "e0".into()];
        assert_eq!(pool.candidates(&profile), [0, 2]);
        assert_eq!(pool.capacity(), Some(3));
    }

    fn docker_spec() -> progscore_sandbox::ProfileSpec {
        serde_json::from_value(serde_json::json!({
            "backend": "docker",
            "image": format!("sha256:{}", "a".repeat(64)),
            "command": ["python3"],
        }))
        .expect("spec")
    }
}
