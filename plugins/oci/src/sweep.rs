//! Removing what OCI clients that are provably gone left behind.

use std::path::Path;
use std::process::Stdio;

use progscore_container::Cgroups;
use progscore_container::cgroup::owner_is_gone;
use progscore_sandbox::Owner;
use tokio::process::Command;

use crate::invocation::RUNTIME_MARKER;
use crate::options::{OWNER_KIND, OciOptions};

/// For each dead owner: its containers (every bundle left in its folder
/// names the runtime that ran it; the runtime's state lives in that owner's
/// own state root, so no other container is ever touched), its cgroups, its
/// state root, then its folder.
pub(crate) async fn sweep_dead_owners(options: &OciOptions, cgroups: &Cgroups) {
    cgroups.sweep_orphans(OWNER_KIND, &options.owner_root);
    remove_empty_state_roots_of_gone_owners(&options.state_root, &options.owner_root);
    for dead in Owner::dead_owners(&options.owner_root, OWNER_KIND) {
        let state_root = options.state_root.join(dead.name());
        // A runtime that was still starting a container when its owner died
        // keeps going as an orphan, and a `delete` races it (runsc answers
        // "context deadline exceeded" while its sandbox boots). Its processes
        // name the owner's state root, which carries the dead pid and a
        // random suffix: stopping them touches nobody else's.
        stop_processes_rooted_in(&state_root).await;
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

/// State roots are shared by every owner folder (one per `TMPDIR`): a
/// process that ended after its owner folder was removed, or whose sweep
/// could not finish, leaves a state root the owner sweep does not reach.
/// One that holds no container state at all (only empty runtime folders)
/// and whose owner is provably gone (its lock in `owner_root` can be taken)
/// is removed: nothing of anyone is in it. Never by pid: a progscore in
/// another PID namespace looks dead by its pid while it runs.
fn remove_empty_state_roots_of_gone_owners(state_root: &Path, owner_root: &Path) {
    let prefix = format!("progscore-{OWNER_KIND}-");
    let Ok(entries) = std::fs::read_dir(state_root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(&prefix)
            || !owner_is_gone(owner_root, &name)
            || !holds_only_empty_folders(&entry.path())
        {
            continue;
        }
        if let Err(e) = std::fs::remove_dir_all(entry.path()) {
            tracing::warn!("cannot remove {}: {e}", entry.path().display());
        }
    }
}

fn holds_only_empty_folders(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().all(|entry| {
            entry.file_type().is_ok_and(|kind| kind.is_dir())
                && std::fs::read_dir(entry.path()).is_ok_and(|mut inner| inner.next().is_none())
        })
    })
}

/// Kills every process started with `--root` in `state_root` (runtimes and
/// gVisor's sandboxes and gofers) and waits, up to a bound, until they are
/// gone or zombies.
async fn stop_processes_rooted_in(state_root: &Path) {
    let rooted = processes_rooted_in(state_root);
    if rooted.is_empty() {
        return;
    }
    for &pid in &rooted {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    let deadline = tokio::time::Instant::now() + STOP_GRACE;
    while rooted.iter().any(|&pid| is_running(pid)) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tracing::warn!(
        "stopped {} runtime process(es) left running under {}",
        rooted.len(),
        state_root.display()
    );
}

/// How long killed runtime processes get to go away before the sweep
/// deletes their containers anyway.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

fn processes_rooted_in(state_root: &Path) -> Vec<libc::pid_t> {
    let Some(root) = state_root.to_str() else {
        return Vec::new();
    };
    let names_root = |arg: &str| {
        let path = arg.strip_prefix("--root=").unwrap_or(arg);
        path == root
            || path
                .strip_prefix(root)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                cmdline
                    .split(|&b| b == 0)
                    .any(|arg| std::str::from_utf8(arg).is_ok_and(names_root))
            })
        })
        .collect()
}

/// Alive and not a zombie (a zombie holds nothing but its pid).
fn is_running(pid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spawn_rooted(root_arg: &str) -> std::process::Child {
        // `sh -c CMD NAME`: NAME is only $0, so it shows in the command line.
        std::process::Command::new("sh")
            .args(["-c", "sleep 30", root_arg])
            .spawn()
            .expect("spawn sh")
    }

    #[test]
    fn empty_state_roots_of_dead_pids_go_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        // A pid far above pid_max: never alive.
        let dead_empty = root.path().join("progscore-oci-999999999-00ff");
        let dead_with_state = root.path().join("progscore-oci-999999998-00ff");
        let alive = root
            .path()
            .join(format!("progscore-oci-{}-00ff", std::process::id()));
        let other = root.path().join("someone-else");
        for dir in [&dead_empty, &dead_with_state, &alive, &other] {
            std::fs::create_dir_all(dir.join("runsc")).unwrap();
        }
        std::fs::create_dir_all(dead_with_state.join("runsc/container")).unwrap();
        remove_empty_state_roots_of_dead_pids(root.path());
        assert!(!dead_empty.exists());
        assert!(dead_with_state.exists() && alive.exists() && other.exists());
    }

    #[tokio::test]
    async fn only_processes_under_the_dead_owners_state_root_are_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let state_root = dir.path().join("progscore-oci-1-00ff");
        let mut under_root = spawn_rooted(&format!("--root={}/runsc", state_root.display()));
        let mut neighbour = spawn_rooted(&format!("--root={}0/runsc", state_root.display()));

        stop_processes_rooted_in(&state_root).await;

        let status = under_root.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert_eq!(
            neighbour.try_wait().unwrap(),
            None,
            "a neighbour was killed"
        );
        neighbour.kill().unwrap();
        neighbour.wait().unwrap();
    }
}
