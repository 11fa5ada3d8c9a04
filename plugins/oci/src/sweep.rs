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
        // `sh -c CMD NAME`: NAME is only $0, so it shows in the command
        // line. A loop, so that the shell stays (a lone `sleep` would be
        // exec'd in its place, and the name gone from the command line).
        std::process::Command::new("sh")
            .args(["-c", "while :; do sleep 1; done", root_arg])
            .spawn()
            .expect("spawn sh")
    }

    /// A lock file held by another process (`flock` running `cat` until
    /// its stdin closes), as a progscore in another PID namespace holds its
    /// owner lock: the pid in the owner's name means nothing here.
    struct HeldLock(std::process::Child);

    impl HeldLock {
        fn new(path: &Path) -> HeldLock {
            use std::io::BufRead;
            let mut child = std::process::Command::new("flock")
                .arg(path)
                .args(["-c", "echo held; exec cat"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("flock(1)");
            let mut line = String::new();
            std::io::BufReader::new(child.stdout.as_mut().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert_eq!(line, "held\n");
            HeldLock(child)
        }
    }

    impl Drop for HeldLock {
        fn drop(&mut self) {
            drop(self.0.stdin.take());
            let _ = self.0.wait();
        }
    }

    /// `progscore-oci-<pid>-<hex>` with a pid far above pid_max: never alive here.
    fn unrelated_pid_owner(hex: &str) -> String {
        format!("progscore-oci-999999999-{hex}")
    }

    #[test]
    fn empty_state_roots_go_only_when_their_owners_lock_is_free() {
        let owners = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let held = unrelated_pid_owner("00aa");
        let free = unrelated_pid_owner("00bb");
        let free_with_state = unrelated_pid_owner("00cc");
        let no_record = unrelated_pid_owner("00dd");
        for name in [&held, &free, &free_with_state] {
            std::fs::write(owners.path().join(format!("{name}.lock")), b"").unwrap();
        }
        let _lock = HeldLock::new(&owners.path().join(format!("{held}.lock")));
        for name in [
            &held,
            &free,
            &free_with_state,
            &no_record,
            &"someone-else".into(),
        ] {
            std::fs::create_dir_all(root.path().join(name).join("runsc")).unwrap();
        }
        std::fs::create_dir_all(root.path().join(&free_with_state).join("runsc/container"))
            .unwrap();
        remove_empty_state_roots_of_gone_owners(root.path(), owners.path());
        assert!(!root.path().join(&free).exists());
        for kept in [&held, &free_with_state, &no_record, &"someone-else".into()] {
            assert!(root.path().join(kept).exists(), "{kept} was removed");
        }
    }

    /// An owner whose pid is dead here but whose lock is held (another PID
    /// namespace) keeps its cgroups and state root through a sweep; once
    /// its lock is free, the next sweep removes them.
    #[tokio::test]
    async fn an_owner_is_judged_by_its_lock_not_its_pid() {
        let Some(cgroups) = Cgroups::discover_host() else {
            panic!("no cgroups visible: the OCI backend cannot run here");
        };
        let owners = tempfile::tempdir().unwrap();
        let states = tempfile::tempdir().unwrap();
        let options = OciOptions {
            owner_root: owners.path().to_path_buf(),
            state_root: states.path().to_path_buf(),
            ..OciOptions::default()
        };
        let name = unrelated_pid_owner(&progscore_sandbox::owner::random_hex());
        let lock_path = owners.path().join(format!("{name}.lock"));
        std::fs::write(&lock_path, b"").unwrap();
        std::fs::create_dir(owners.path().join(&name)).unwrap();
        let state = states.path().join(&name);
        std::fs::create_dir_all(state.join("runc")).unwrap();
        // Between two invocations, and one whose limit is set before its
        // container starts: both empty, both the live owner's.
        let invocation = cgroups.invocation(&name, "progscore-0000-0");
        invocation.create_with_memory_limit(64 << 20).unwrap();
        let cgroup_dirs = || -> Vec<std::path::PathBuf> {
            let hierarchies = std::fs::read_dir("/sys/fs/cgroup").unwrap();
            hierarchies
                .flatten()
                .map(|h| h.path())
                .chain([std::path::PathBuf::from("/sys/fs/cgroup")])
                .map(|h| h.join("progscore").join(&name))
                .filter(|dir| dir.exists())
                .collect()
        };
        assert!(!cgroup_dirs().is_empty(), "no cgroup was made");

        let lock = HeldLock::new(&lock_path);
        sweep_dead_owners(&options, &cgroups).await;
        assert!(
            cgroup_dirs()
                .iter()
                .all(|dir| dir.join("progscore-0000-0").is_dir()),
            "a live owner's cgroups were removed"
        );
        assert!(state.is_dir(), "a live owner's state root was removed");
        assert!(lock_path.exists() && owners.path().join(&name).is_dir());

        drop(lock);
        sweep_dead_owners(&options, &cgroups).await;
        assert_eq!(cgroup_dirs(), Vec::<std::path::PathBuf>::new());
        assert!(!state.exists());
        assert!(!lock_path.exists());
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
