//! Everything a scoring command needs, built once from the config.

use std::collections::BTreeMap;
use std::sync::Arc;

use progscore_comparator_host::{ComparatorError, ComparatorHost, HostOptions};
use progscore_sandbox::SandboxClient;
use progscore_scoring::evidence::{EvidenceStore, StoreError};
use progscore_scoring::{ProgramExecutionScorer, ProgramExecutionSource, Replayer};
use thiserror::Error;

use crate::backends::{Backends, WasiWorkers};
use crate::batch_run::ScorerItems;
use crate::comparators::WasmComparators;
use crate::config::{Config, UserComparator};

/// Why a session could not be opened.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The evidence store could not be opened (or has a newer schema); the
    /// store's error names the file.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The comparator host or a comparator the config names failed to load.
    #[error("{config}: comparators: {cause}")]
    Comparators {
        /// The config file.
        config: String,
        /// Why.
        cause: ComparatorError,
    },
    /// A backend could not be built.
    #[error("sandbox: {0}")]
    Sandbox(progscore_sandbox::SandboxError),
}

/// The store, the comparators, and (when executing) the backends and scorer.
pub struct Session {
    /// The evidence store.
    pub store: Arc<EvidenceStore>,
    /// Built-in and configured comparators.
    pub comparators: Arc<ComparatorHost>,
    /// Scores stored evidence without running anything.
    pub replayer: Replayer,
    /// Runs programs and scores them; `None` for an offline session.
    pub scorer: Option<ProgramExecutionScorer>,
    /// The backends the scorer runs programs with; `None` offline.
    pub backends: Option<Arc<Backends>>,
}

impl Session {
    /// A session that can run programs, with WASI guests run as `workers` says.
    pub fn open(config: &Config, workers: WasiWorkers) -> Result<Session, SessionError> {
        Session::build(config, Some(workers))
    }

    /// A session that never runs anything (replay, rescore, listings).
    pub fn open_offline(config: &Config) -> Result<Session, SessionError> {
        Session::build(config, None)
    }

    /// A session whose programs run on `client` instead of the configured
    /// backends: what tests of a face's callers build on (a scripted
    /// client), and what a face with its own dispatch plugs in. The store
    /// and comparators are the config's, as for [`Session::open`].
    pub fn with_sandbox(
        config: &Config,
        client: Arc<dyn SandboxClient>,
    ) -> Result<Session, SessionError> {
        let mut session = Session::build(config, None)?;
        session.scorer = Some(session.scorer_on(config, client));
        Ok(session)
    }

    fn build(config: &Config, executing: Option<WasiWorkers>) -> Result<Session, SessionError> {
        let store = EvidenceStore::open(&config.store_path)?;
        let store = Arc::new(store);
        let comparators = Arc::new(load_comparators(config)?);
        let replayer = Replayer::new(
            store.clone(),
            Arc::new(WasmComparators(comparators.clone())),
            config.profiles.clone(),
        )
        .with_languages(config.languages.clone());
        let mut session = Session {
            store,
            comparators,
            replayer,
            scorer: None,
            backends: None,
        };
        if let Some(workers) = executing {
            let backends = Arc::new(Backends::build(
                config.profiles.clone(),
                config.docker.options(),
                config.oci.clone(),
                workers,
            )?);
            session.scorer = Some(session.scorer_on(config, backends.clone()));
            session.backends = Some(backends);
        }
        Ok(session)
    }

    /// The batch items' scoring through this session's scorer (`None`
    /// offline): what [`crate::batch_run::run_batch`] drives. Default jobs
    /// follow what the configured engines take, once their preflight
    /// reached them.
    pub fn items(&self) -> Option<ScorerItems<'_>> {
        Some(ScorerItems::new(
            self.scorer.as_ref()?,
            self.backends.clone(),
        ))
    }

    /// Programs in flight when the caller does not say: the batch policy
    /// for this machine and the configured engines (known once their
    /// preflight reached them).
    pub fn default_jobs(&self) -> usize {
        crate::policy::default_jobs_for(self.backends.as_deref())
    }

    /// The scorer over this session's store and comparators, running
    /// programs on `client`.
    fn scorer_on(&self, config: &Config, client: Arc<dyn SandboxClient>) -> ProgramExecutionScorer {
        scorer_over(
            client,
            self.store.clone(),
            self.comparators.clone(),
            config.languages.clone(),
        )
    }
}

/// The scorer of programs run on `client`, their evidence in `store`,
/// checked by `comparators`, with the profiles' other names `languages`:
/// how a session builds its own, and how a face that holds its own client
/// and store (the Python package) builds one.
pub fn scorer_over(
    client: Arc<dyn SandboxClient>,
    store: Arc<EvidenceStore>,
    comparators: Arc<ComparatorHost>,
    languages: BTreeMap<String, String>,
) -> ProgramExecutionScorer {
    let source = ProgramExecutionSource::new(client, store);
    ProgramExecutionScorer::new(source, Arc::new(WasmComparators(comparators)))
        .with_languages(languages)
}

/// The comparator host with the built-ins and these user comparators.
pub fn comparator_host(users: &[UserComparator]) -> Result<ComparatorHost, ComparatorError> {
    let mut host = ComparatorHost::new(HostOptions::default())?;
    host.register_builtins()?;
    for user in users {
        host.register_user(&user.name, &user.path, &user.sha256)?;
    }
    Ok(host)
}

/// The comparator host with the built-ins and the config's user comparators.
pub fn load_comparators(config: &Config) -> Result<ComparatorHost, SessionError> {
    comparator_host(&config.comparators).map_err(|cause| SessionError::Comparators {
        config: config.path.display().to_string(),
        cause,
    })
}

// The message quotes the cause, so it is not also this error's source
// (a caller printing the chain would say it twice).
impl From<progscore_sandbox::SandboxError> for SessionError {
    fn from(error: progscore_sandbox::SandboxError) -> Self {
        SessionError::Sandbox(error)
    }
}
