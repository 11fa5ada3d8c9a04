//! Connecting to an engine: bollard's client for its endpoint, the
//! negotiated API version, the engine's facts and, for an engine on this
//! host, its cgroups.

use std::time::Duration;

use bollard::{API_DEFAULT_VERSION, Docker};
use progscore_container::Cgroups;
use progscore_sandbox::SandboxError;

use super::engines::PooledEngine;
use crate::engine::{self, EngineFacts};
use crate::held::Engine;
use crate::options::Endpoint;

impl PooledEngine {
    /// Connects and reads the engine's facts (once; a failure is tried
    /// again by the next caller).
    pub(super) async fn connect(&self, timeout: Duration) -> Result<&Engine, SandboxError> {
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
