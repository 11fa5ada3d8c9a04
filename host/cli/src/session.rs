//! Everything a scoring command needs, built once from the config.

use std::sync::Arc;

use progscore_comparator_host::{ComparatorHost, HostOptions};
use progscore_scoring::evidence::EvidenceStore;
use progscore_scoring::{
    OutputComparator, ProgramExecutionScorer, ProgramExecutionSource, Replayer,
};
use thiserror::Error;

use crate::backends::{Backends, WasiWorkers};
use crate::comparators::WasmComparators;
use crate::config::Config;

/// Why a session could not be opened.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The evidence store could not be opened (or has a newer schema).
    #[error("evidence store {path}: {message}")]
    Store {
        /// Its path.
        path: String,
        /// Why.
        message: String,
    },
    /// The comparator host or a configured comparator failed to load.
    #[error("{config}: comparators: {message}")]
    Comparators {
        /// The config file.
        config: String,
        /// Why.
        message: String,
    },
    /// A backend could not be built.
    #[error("sandbox: {0}")]
    Sandbox(#[from] progscore_sandbox::SandboxError),
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

    fn build(config: &Config, executing: Option<WasiWorkers>) -> Result<Session, SessionError> {
        let store = EvidenceStore::open(&config.store_path).map_err(|e| SessionError::Store {
            path: config.store_path.display().to_string(),
            message: e.to_string(),
        })?;
        let store = Arc::new(store);
        let comparators = Arc::new(load_comparators(config)?);
        let as_comparator: Arc<dyn OutputComparator> =
            Arc::new(WasmComparators(comparators.clone()));
        let replayer = Replayer::new(
            store.clone(),
            as_comparator.clone(),
            config.profiles.clone(),
        );
        let scorer = if let Some(workers) = executing {
            let backends = Arc::new(Backends::build(
                config.profiles.clone(),
                config.docker.options(),
                workers,
            )?);
            let source = ProgramExecutionSource::new(backends, store.clone());
            Some(ProgramExecutionScorer::new(source, as_comparator))
        } else {
            None
        };
        Ok(Session {
            store,
            comparators,
            replayer,
            scorer,
        })
    }
}

/// The comparator host with the built-ins and the config's user comparators.
pub fn load_comparators(config: &Config) -> Result<ComparatorHost, SessionError> {
    let error = |message: String| SessionError::Comparators {
        config: config.path.display().to_string(),
        message,
    };
    let mut host = ComparatorHost::new(HostOptions::default()).map_err(|e| error(e.to_string()))?;
    host.register_builtins().map_err(|e| error(e.to_string()))?;
    for user in &config.comparators {
        host.register_user(&user.name, &user.path, &user.sha256)
            .map_err(|e| error(e.to_string()))?;
    }
    Ok(host)
}
