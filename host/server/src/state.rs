//! What every request shares: the config, the runtime's session, the
//! per-profile queues, and the runs in flight (tracked, so a drain waits
//! for their cleanup).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::settings::ServeSettings;
use progscore_runtime::config::Config;
use progscore_runtime::session::Session;
use progscore_sandbox::{Owner, RuntimeProfile};
use progscore_scoring::ProgramExecutionScorer;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::http::error::ServeError;
use crate::http::metrics::Metrics;
use crate::jobs::budget::MemoryBudget;
use crate::jobs::gatherings::Gatherings;
use crate::jobs::queue::ProfileQueue;

/// The server's shared state.
pub struct AppState {
    config: Config,
    /// The `[serve]` settings (the flag's `--listen` applied).
    settings: ServeSettings,
    session: Session,
    queues: BTreeMap<String, ProfileQueue>,
    draining: AtomicBool,
    /// Cancelled when the drain begins: requests still waiting for a turn
    /// stop waiting (they could only start after the drain).
    drain_begun: CancellationToken,
    /// Parent of every run's cancellation: cancelled when the drain is over.
    runs: CancellationToken,
    tracker: TaskTracker,
    metrics: Metrics,
    gatherings: Gatherings,
    memory: MemoryBudget,
    /// Turns for replays and rescores (comparator work, no sandbox): as
    /// many at once as programs may run, so a flood of them cannot take the
    /// machine from the runs.
    replays: std::sync::Arc<tokio::sync::Semaphore>,
    /// This server as the owner of the submissions it runs (Judge0's): its
    /// lock, free, proves to another server on the store that it is gone.
    /// `None` when the owner root could not be used (then its unfinished
    /// submissions are never judged abandoned).
    submissions_owner: Option<Owner>,
}

impl AppState {
    /// The state over an opened session; one queue per served profile.
    pub(crate) fn new(
        config: Config,
        settings: ServeSettings,
        session: Session,
    ) -> Result<AppState, ServeError> {
        let concurrency = settings
            .concurrency
            .unwrap_or_else(|| session.default_jobs());
        let queues: BTreeMap<String, ProfileQueue> = served_profiles(&config, &settings)
            .into_iter()
            .map(|name| {
                (
                    name.clone(),
                    ProfileQueue::new(concurrency, settings.queue, settings.queue_wait),
                )
            })
            .collect();
        let replay_turns = concurrency.max(1) * queues.len().max(1);
        let memory = settings
            .memory_budget
            .map_or_else(MemoryBudget::of_this_machine, MemoryBudget::new);
        let submissions_owner = match Owner::register(
            &progscore_sandbox::default_owner_root(),
            "serve",
        ) {
            Ok(owner) => Some(owner),
            Err(error) => {
                tracing::warn!(%error, "cannot register this server as the owner of its submissions");
                None
            }
        };
        Ok(AppState {
            submissions_owner,
            config,
            settings,
            session,
            queues,
            draining: AtomicBool::new(false),
            drain_begun: CancellationToken::new(),
            runs: CancellationToken::new(),
            tracker: TaskTracker::new(),
            metrics: Metrics::new(),
            gatherings: Gatherings::default(),
            memory,
            replays: std::sync::Arc::new(tokio::sync::Semaphore::new(replay_turns)),
        })
    }

    /// Every served profile's preflight, as `score` runs it before its
    /// first item; the first that fails stops the start.
    pub(crate) async fn preflight(&self) -> Result<(), ServeError> {
        let scorer = self.scorer();
        let names: Vec<&String> = self.queues.keys().collect();
        let checks = futures_util::future::join_all(
            names
                .iter()
                .map(|name| async move { (*name, scorer.preflight(name).await) }),
        )
        .await;
        for (name, check) in checks {
            if let Err(source) = check {
                let others: Vec<String> = names
                    .iter()
                    .filter(|other| *other != &name)
                    .map(|other| format!("\"{other}\""))
                    .collect();
                return Err(ServeError::Preflight {
                    profile: name.clone(),
                    others: others.join(", "),
                    cause: Box::new(source),
                });
            }
            tracing::info!(profile = %name, "preflight passed");
        }
        Ok(())
    }

    /// This server as the owner of its submissions, if registered.
    pub(crate) fn submissions_owner(&self) -> Option<&Owner> {
        self.submissions_owner.as_ref()
    }

    /// The runs being gathered now.
    pub(crate) fn gatherings(&self) -> &Gatherings {
        &self.gatherings
    }

    /// The server's metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// `/metrics`' text, its gauges read from the queues now.
    pub fn metrics_text(&self) -> String {
        let queues: Vec<(String, usize, usize)> = self
            .queues
            .iter()
            .map(|(name, queue)| (name.clone(), queue.waiting(), queue.running()))
            .collect();
        self.metrics.encode(&queues, self.runs_in_flight())
    }

    /// The `[serve]` settings.
    pub fn settings(&self) -> &ServeSettings {
        &self.settings
    }

    /// The config the server was started with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The runtime's session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The scorer (a serving session always has one).
    pub(crate) fn scorer(&self) -> &ProgramExecutionScorer {
        self.session
            .scorer
            .as_ref()
            .expect("a serving session is opened with backends")
    }

    /// The served profile named `name`, with its queue.
    pub(crate) fn served(&self, name: &str) -> Option<(&RuntimeProfile, &ProfileQueue)> {
        let queue = self.queues.get(name)?;
        Some((self.config.profile(name)?, queue))
    }

    /// Programs in flight at most, over every served profile.
    pub(crate) fn total_concurrency(&self) -> usize {
        self.queues.values().map(ProfileQueue::concurrency).sum()
    }

    /// The served profiles' names.
    pub fn served_names(&self) -> Vec<&str> {
        self.queues.keys().map(String::as_str).collect()
    }

    /// The served profile a client's language name stands for: a served
    /// profile's own name, or a `[languages]` name of one.
    pub(crate) fn language_profile(&self, language: &str) -> Option<&str> {
        let profile = self.config.language_profile(language)?;
        self.queues
            .get_key_value(&profile.name)
            .map(|(name, _)| name.as_str())
    }

    /// The language names a client may use: the served profiles' names and
    /// the `[languages]` names of served profiles, sorted.
    pub fn languages(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .config
            .language_names()
            .into_iter()
            .filter(|name| self.language_profile(name).is_some())
            .collect();
        names.sort_unstable();
        names
    }

    /// Whether a shutdown signal came.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    pub(crate) fn begin_drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.drain_begun.cancel();
    }

    /// A turn for a replay or rescore, waiting at most `[serve] queue_wait`;
    /// `None` when none came.
    pub(crate) async fn replay_turn(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        tokio::time::timeout(
            self.settings().queue_wait,
            self.replays.clone().acquire_owned(),
        )
        .await
        .ok()?
        .ok()
    }

    /// The runs' share of the machine's memory.
    pub(crate) fn memory_budget(&self) -> &MemoryBudget {
        &self.memory
    }

    /// Resolves when the drain begins.
    pub(crate) async fn drain_begun(&self) {
        self.drain_begun.cancelled().await;
    }

    /// Runs (tasks holding a sandbox call) not yet ended.
    pub fn runs_in_flight(&self) -> usize {
        self.tracker.len()
    }

    /// A cancellation token for a new run: cancelled by its caller, or when
    /// the drain is over.
    pub(crate) fn run_token(&self) -> CancellationToken {
        self.runs.child_token()
    }

    /// The tracker every run's task is spawned on.
    pub(crate) fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }

    pub(crate) fn cancel_runs(&self) {
        self.runs.cancel();
    }

    pub(crate) async fn wait_for_runs(&self) {
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// The profiles `[serve] profiles` names, else every configured one.
fn served_profiles(config: &Config, settings: &ServeSettings) -> Vec<String> {
    match &settings.profiles {
        Some(served) => served.clone(),
        None => config.profiles.iter().map(|p| p.name.clone()).collect(),
    }
}
