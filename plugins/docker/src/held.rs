//! What this client holds on an engine, shared by the pool, the
//! invocations, the delivery of files and the sweep: the connected engine,
//! the names of containers in use, the containers left for later removal,
//! and their removal. It depends on no other room of this crate but the
//! engine's facts and error words.

use std::collections::HashSet;
use std::time::Duration;

use bollard::Docker;
use bollard::errors::Error as BollardError;
use bollard::query_parameters::RemoveContainerOptionsBuilder;
use progscore_container::{Cgroups, InvocationCgroup};

use crate::engine::{EngineFacts, describe, is_transport_error};

/// A connected engine: its API client, what it reported, and its cgroups
/// when this process can see them.
pub(crate) struct Engine {
    pub docker: Docker,
    pub facts: EngineFacts,
    pub cgroups: Option<Cgroups>,
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

/// A container (and its cgroup) whose removal must wait for the engine.
pub(crate) struct Leftover {
    pub container: String,
    pub cgroup: Option<InvocationCgroup>,
}

/// A failed engine request.
pub(crate) struct EngineFault {
    pub message: String,
    pub transport: bool,
    /// The engine answered with a 5xx: what a stopping engine answers while
    /// it shuts down (e.g. "grpc: the client connection is closing").
    pub server_error: bool,
    /// The engine answered 409: e.g. the container's removal is already
    /// in progress (someone else's `docker rm -f`).
    pub conflict: bool,
}

impl EngineFault {
    /// A fault that is no failed request (nothing to confirm about the engine).
    pub(crate) fn plain(message: String) -> EngineFault {
        EngineFault {
            message,
            transport: false,
            server_error: false,
            conflict: false,
        }
    }

    pub(crate) fn from(what: &str, err: &BollardError) -> EngineFault {
        EngineFault {
            message: format!("{what}: {}", describe(err)),
            transport: is_transport_error(err),
            server_error: matches!(
                err,
                BollardError::DockerResponseServerError { status_code, .. } if *status_code >= 500
            ),
            conflict: matches!(
                err,
                BollardError::DockerResponseServerError {
                    status_code: 409,
                    ..
                }
            ),
        }
    }
}

/// Removes a container left while the engine was gone, and its cgroup.
pub(crate) async fn remove_leftover(
    docker: &Docker,
    engine_timeout: Duration,
    leftover: &Leftover,
) -> Result<(), String> {
    remove_container(docker, engine_timeout, &leftover.container)
        .await
        .map_err(|fault| {
            format!(
                "failed to remove container {}: {}",
                leftover.container, fault.message
            )
        })?;
    match &leftover.cgroup {
        Some(cgroup) => cgroup.remove_settled().await.map_err(|e| e.to_string()),
        None => Ok(()),
    }
}

/// Force-removes a container and its anonymous volumes. One that does not
/// exist is already removed.
pub(crate) async fn remove_container(
    docker: &Docker,
    engine_timeout: Duration,
    name: &str,
) -> Result<(), EngineFault> {
    let options = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    match tokio::time::timeout(engine_timeout, docker.remove_container(name, Some(options))).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(BollardError::DockerResponseServerError {
            status_code: 404, ..
        })) => Ok(()),
        Ok(Err(err)) => Err(EngineFault::from("removing", &err)),
        Err(_) => Err(EngineFault {
            message: format!("removing: the engine did not answer within {engine_timeout:?}"),
            transport: true,
            server_error: false,
            conflict: false,
        }),
    }
}
