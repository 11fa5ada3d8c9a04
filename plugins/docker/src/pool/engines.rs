//! The pool's state: each engine, this client's state on it, and what the
//! engines of a profile must agree on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use progscore_sandbox::{Owner, RuntimeProfile};
use tokio::sync::{Notify, OnceCell};

use crate::engine::ImageFacts;
use crate::health::EngineHealth;
use crate::held::{ActiveContainers, Engine, Leftover};
use crate::options::{DEFAULT_ENGINE_NAME, DockerOptions, EngineOptions};

/// What every engine that runs a profile must agree on, so that the
/// attempt's fingerprint does not depend on which engine ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Agreement {
    pub runtime: String,
    pub image_id: String,
    /// The engine it was first seen on.
    pub engine: String,
}

/// One engine of the pool and this client's state on it.
pub(crate) struct PooledEngine {
    pub options: EngineOptions,
    pub(super) connection: OnceCell<Engine>,
    pub health: EngineHealth,
    pub(super) images: tokio::sync::Mutex<HashMap<String, ImageFacts>>,
    /// Containers it could not remove while it was gone.
    pub(super) leftovers: std::sync::Mutex<Vec<Leftover>>,
    /// Programs running on it now.
    pub(super) in_flight: AtomicUsize,
    /// Containers of calls in progress on it: the sweep after an outage
    /// never touches them.
    pub active: ActiveContainers,
    /// Whether a probe is waiting for it to answer again.
    pub(super) probing: AtomicBool,
    /// Whether this client left something on it that only a sweep by
    /// label can find (a remote call's volumes).
    pub(super) unswept: AtomicBool,
}

/// The engines, their capacity, and the wake-up of calls waiting for one.
pub(crate) struct Pool {
    pub engines: Vec<PooledEngine>,
    /// This client's owner: its label value and private folder.
    pub owner: Owner,
    pub(super) owner_root: std::path::PathBuf,
    pub(super) engine_timeout: Duration,
    pub(super) outage_wait: Duration,
    /// Rung when a program leaves an engine or an engine comes back.
    pub(super) freed: Notify,
    /// Serialises the choice of an engine and its count.
    pub(super) choosing: std::sync::Mutex<()>,
    pub(super) agreements: std::sync::Mutex<HashMap<String, Agreement>>,
    pub(super) first_contact: OnceCell<()>,
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

    /// Whether `engine` may run `profile`: the profile names it, or names
    /// none.
    pub(super) fn allows(profile: &RuntimeProfile, engine: &PooledEngine) -> bool {
        profile.engines.is_empty() || profile.engines.iter().any(|e| e == engine.name())
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
}
