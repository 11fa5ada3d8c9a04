//! Removing what progscore processes that are provably gone left behind.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use bollard::Docker;
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};
use progscore_sandbox::{Owner, SandboxError};

use crate::engine;
use crate::held::{ActiveContainers, Engine};
use crate::options::{OWNER_KIND, OWNER_LABEL};

/// Removes what progscore processes that are provably gone left behind:
/// their containers on every engine given, their cgroups and workspace
/// folders. Owners are judged by their lock in this client's owner root,
/// never by a pid. A dead owner is forgotten only when `every_engine` (all
/// the client's engines were reached) and nothing of it is left.
pub(crate) async fn sweep_dead_owners(owner_root: &Path, engines: &[&Engine], every_engine: bool) {
    for dead in Owner::dead_owners(owner_root, OWNER_KIND) {
        let mut clean = every_engine;
        for engine in engines {
            clean &= remove_all_of(&engine.docker, dead.name()).await;
        }
        // Only once no engine runs its containers: engines of one host share
        // its cgroups. What is still in them then belongs to no container
        // (a runtime's init left by an engine that crashed mid-start): it
        // is ended, or its cgroups could never be removed.
        for engine in engines {
            let Some(cgroups) = &engine.cgroups else {
                continue;
            };
            if clean {
                let killed = cgroups.kill_owner_processes(dead.name());
                if killed > 0 {
                    tracing::warn!(
                        "ended {killed} process(es) left in the cgroups of progscore process {} \
                         (no engine holds its containers any more)",
                        dead.name()
                    );
                }
            }
            if let Err(e) = cgroups.remove_owner(dead.name()) {
                clean = false;
                tracing::warn!("{e}");
            }
        }
        if clean && let Err(e) = dead.forget() {
            tracing::warn!("{e}");
        }
    }
    for engine in engines {
        if let Some(cgroups) = &engine.cgroups {
            cgroups.sweep_orphans(OWNER_KIND, owner_root);
        }
    }
}

/// Removes every container of a dead owner on one engine; whether all went.
async fn remove_all_of(docker: &Docker, dead: &str) -> bool {
    let containers = match list_owned(docker, dead).await {
        Ok(containers) => containers,
        Err(err) => {
            tracing::warn!("cannot list the containers of dead owner {dead}: {err}");
            return false;
        }
    };
    let mut clean = true;
    for (id, name) in containers {
        match docker.remove_container(&id, Some(force_remove())).await {
            Ok(()) => tracing::warn!("removed container {name} left by progscore process {dead}"),
            // Gone between the listing and now (an engine that restarted
            // cleans up too).
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {}
            Err(err) => {
                clean = false;
                tracing::warn!(
                    "cannot remove container {name} left by {dead}: {}",
                    engine::describe(&err)
                );
            }
        }
    }
    // The volumes of its calls on engines elsewhere, once no container uses them.
    match remove_volumes_except(docker, dead, HashSet::new).await {
        Ok(0) => {}
        Ok(removed) => {
            tracing::warn!("removed {removed} volume(s) left by progscore process {dead}");
        }
        Err(e) => {
            clean = false;
            tracing::warn!("{e}");
        }
    }
    clean
}

/// Removes `owner`'s volumes on one engine except those `in_use` names
/// (asked after the listing: see [`remove_owned_except`]); how many it
/// removed.
async fn remove_volumes_except(
    docker: &Docker,
    owner: &str,
    in_use: impl Fn() -> HashSet<String>,
) -> Result<usize, String> {
    let filters = HashMap::from([("label".to_string(), vec![format!("{OWNER_LABEL}={owner}")])]);
    let options = bollard::query_parameters::ListVolumesOptionsBuilder::new()
        .filters(&filters)
        .build();
    let volumes = docker
        .list_volumes(Some(options))
        .await
        .map_err(|e| {
            format!(
                "cannot list the volumes of {owner}: {}",
                engine::describe(&e)
            )
        })?
        .volumes
        .unwrap_or_default();
    let active = in_use();
    let mut removed = 0;
    for volume in volumes {
        if active.contains(&volume.name) {
            continue;
        }
        let options = bollard::query_parameters::RemoveVolumeOptionsBuilder::new()
            .force(true)
            .build();
        let result = docker.remove_volume(&volume.name, Some(options)).await;
        removed += gone(result, || format!("volume {}", volume.name))?;
    }
    Ok(removed)
}

/// Removes this live owner's containers on one engine except those its
/// calls are using (`active`, by name); how many it removed.
///
/// What is in use is read after the listing, never before: a name is held
/// from before its container is created until its removal was tried, so a
/// container listed here is either still held when the set is read or
/// finished with. Read before, a container created in between (a rerun)
/// would be listed but not known to be in use, and removed under its call.
pub(crate) async fn remove_owned_except(
    docker: &Docker,
    owner: &str,
    active: &ActiveContainers,
) -> Result<usize, String> {
    let containers = list_owned(docker, owner)
        .await
        .map_err(|e| format!("cannot list this process's containers: {e}"))?;
    let in_use = active.snapshot();
    let mut removed = 0;
    for (id, name) in containers {
        if in_use.contains(&name) {
            continue;
        }
        let result = docker.remove_container(&id, Some(force_remove())).await;
        removed += gone(result, || format!("container {name}"))?;
    }
    Ok(removed + remove_volumes_except(docker, owner, || active.snapshot()).await?)
}

/// 1 when a removal removed it, 0 when it was gone already (404), else
/// why it stays.
fn gone(
    result: Result<(), bollard::errors::Error>,
    what: impl Fn() -> String,
) -> Result<usize, String> {
    match result {
        Ok(()) => Ok(1),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(0),
        Err(err) => Err(format!(
            "cannot remove {}: {}",
            what(),
            engine::describe(&err)
        )),
    }
}

fn force_remove() -> bollard::query_parameters::RemoveContainerOptions {
    RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build()
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
