//! How a [`crate::DockerClient`] reaches its engine and bounds the engine's work.

use std::path::PathBuf;
use std::time::Duration;

/// The label every container progscore creates carries; its value names the
/// client that owns it (a `progscore_sandbox::Owner`).
pub const OWNER_LABEL: &str = "progscore.owner";

/// The owner kind of Docker clients: their owners are named `progscore-docker-…`.
pub(crate) const OWNER_KIND: &str = "docker";

/// Default bound on each engine request. Generous: on a busy machine the
/// engine can take seconds per request, and its expiry costs a run.
pub const DEFAULT_ENGINE_TIMEOUT: Duration = Duration::from_secs(120);

/// Default time calls wait for an engine that stopped answering.
pub const DEFAULT_OUTAGE_WAIT: Duration = Duration::from_secs(120);

/// How the client reaches the engine, where it keeps workspaces, and how
/// long it gives the engine.
#[derive(Debug, Clone)]
pub struct DockerOptions {
    /// The engine's unix socket.
    pub socket: PathBuf,
    /// The private folder (0700, created or checked) under which each
    /// client registers its owner folder and keeps its workspaces. It must be
    /// visible to the engine at the same path (a local engine).
    pub owner_root: PathBuf,
    /// Bound on each request to the engine (create, attach, start, kill,
    /// inspect, remove) and on the output's end after the program exited.
    /// Its expiry is a sandbox error; it is never the program's time.
    pub engine_timeout: Duration,
    /// How long calls wait for an engine that stopped answering before they
    /// give up (counted from the first failure).
    pub outage_wait: Duration,
}

impl Default for DockerOptions {
    fn default() -> Self {
        let socket = std::env::var("DOCKER_HOST")
            .ok()
            .and_then(|host| host.strip_prefix("unix://").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("/var/run/docker.sock"));
        DockerOptions {
            socket,
            owner_root: progscore_sandbox::default_owner_root(),
            engine_timeout: DEFAULT_ENGINE_TIMEOUT,
            outage_wait: DEFAULT_OUTAGE_WAIT,
        }
    }
}

impl DockerOptions {
    /// The engine's address as users write it.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }
}
