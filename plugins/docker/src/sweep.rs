//! Removing what progscore processes that are provably gone left behind.

use std::collections::HashMap;
use std::path::Path;

use bollard::Docker;
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};
use progscore_sandbox::{Owner, SandboxError};

use crate::engine;
use crate::options::{OWNER_KIND, OWNER_LABEL};
use progscore_container::Cgroups;

/// Removes what progscore processes that are provably gone left behind:
/// their containers, cgroups and workspace folders. Owners are judged by
/// their lock in this client's owner root, never by a pid.
pub(crate) async fn sweep_dead_owners(
    owner_root: &Path,
    docker: &Docker,
    cgroups: Option<&Cgroups>,
) {
    for dead in Owner::dead_owners(owner_root, OWNER_KIND) {
        let containers = match list_owned(docker, dead.name()).await {
            Ok(containers) => containers,
            Err(err) => {
                tracing::warn!(
                    "cannot list the containers of dead owner {}: {err}",
                    dead.name()
                );
                continue;
            }
        };
        let mut clean = true;
        for (id, name) in containers {
            let options = RemoveContainerOptionsBuilder::new()
                .force(true)
                .v(true)
                .build();
            match docker.remove_container(&id, Some(options)).await {
                Ok(()) => tracing::warn!(
                    "removed container {name} left by progscore process {}",
                    dead.name()
                ),
                Err(err) => {
                    clean = false;
                    tracing::warn!(
                        "cannot remove container {name} left by {}: {}",
                        dead.name(),
                        engine::describe(&err)
                    );
                }
            }
        }
        if let Some(cgroups) = cgroups
            && let Err(e) = cgroups.remove_owner(dead.name())
        {
            clean = false;
            tracing::warn!("{e}");
        }
        if clean && let Err(e) = dead.forget() {
            tracing::warn!("{e}");
        }
    }
    if let Some(cgroups) = cgroups {
        cgroups.sweep_orphans(OWNER_KIND);
    }
}

/// The containers (id, name) labelled with this owner.
pub(crate) async fn list_owned(
    docker: &Docker,
    owner: &str,
) -> Result<Vec<(String, String)>, SandboxError> {
    let filters = HashMap::from([("label".to_string(), vec![format!("{OWNER_LABEL}={owner}")])]);
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
        .filter_map(|c| {
            let id = c.id?;
            let name = c
                .names
                .unwrap_or_default()
                .first()
                .map(|n| n.trim_start_matches('/').to_string())
                .unwrap_or_else(|| id.clone());
            Some((id, name))
        })
        .collect())
}
