//! Removing what OCI clients that are provably gone left behind.

use std::path::Path;
use std::process::Stdio;

use progscore_container::Cgroups;
use progscore_sandbox::Owner;
use tokio::process::Command;

use crate::invocation::RUNTIME_MARKER;
use crate::options::{OWNER_KIND, OciOptions};

/// For each dead owner: its containers (every bundle left in its folder
/// names the runtime that ran it; the runtime's state lives in that owner's
/// own state root, so no other container is ever touched), its cgroups, its
/// state root, then its folder.
pub(crate) async fn sweep_dead_owners(options: &OciOptions, cgroups: &Cgroups) {
    cgroups.sweep_orphans(OWNER_KIND);
    for dead in Owner::dead_owners(&options.owner_root, OWNER_KIND) {
        let state_root = options.state_root.join(dead.name());
        let mut clean = true;
        let bundles = std::fs::read_dir(options.owner_root.join(dead.name()))
            .map(|entries| entries.flatten().map(|e| e.path()).collect::<Vec<_>>())
            .unwrap_or_default();
        for bundle in bundles {
            let Ok(marker) = std::fs::read_to_string(bundle.join(RUNTIME_MARKER)) else {
                continue;
            };
            let Some(id) = bundle.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if let Err(e) = delete(&marker, &state_root, id, options).await {
                clean = false;
                tracing::warn!("cannot remove container {id} left by {}: {e}", dead.name());
            } else {
                tracing::warn!(
                    "removed container {id} left by progscore process {}",
                    dead.name()
                );
            }
        }
        if let Err(e) = cgroups.remove_owner(dead.name()) {
            clean = false;
            tracing::warn!("{e}");
        }
        if clean {
            let _ = std::fs::remove_dir_all(&state_root);
            if let Err(e) = dead.forget() {
                tracing::warn!("{e}");
            }
        }
    }
}

/// `delete --force` with the runtime named in a bundle's marker
/// (`<name>\n<binary>`); a container the runtime does not know is gone.
async fn delete(
    marker: &str,
    state_root: &Path,
    id: &str,
    options: &OciOptions,
) -> Result<(), String> {
    let mut lines = marker.lines();
    let (Some(name), Some(binary)) = (lines.next(), lines.next()) else {
        return Err(format!("unreadable runtime marker {marker:?}"));
    };
    let root = state_root.join(name);
    if !root.exists() {
        return Ok(());
    }
    let run = Command::new(binary)
        .arg("--root")
        .arg(&root)
        .args(["delete", "--force", id])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(options.runtime_timeout, run).await {
        Ok(Ok(output)) if output.status.success() => Ok(()),
        Ok(Ok(output)) => {
            let message = String::from_utf8_lossy(&output.stderr);
            if message.contains("does not exist") || message.contains("not found") {
                Ok(())
            } else {
                Err(format!("{name} delete failed: {}", message.trim()))
            }
        }
        Ok(Err(e)) => Err(format!("cannot run {binary}: {e}")),
        Err(_) => Err(format!(
            "{name} delete did not finish within {:?}",
            options.runtime_timeout
        )),
    }
}
