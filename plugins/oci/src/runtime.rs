//! The OCI runtime binary (runc, runsc, or another with runc's command line):
//! found once, its version read, and its commands bounded in time.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// Which runtime reads the bundle: gVisor needs a few things its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuntimeKind {
    Runc,
    Runsc,
    /// Another runtime with runc's command line (crun, youki).
    Other,
}

impl RuntimeKind {
    /// The kind of the runtime a profile names.
    pub(crate) fn of(name: &str) -> RuntimeKind {
        match name.rsplit('/').next().unwrap_or(name) {
            "runc" => RuntimeKind::Runc,
            "runsc" => RuntimeKind::Runsc,
            _ => RuntimeKind::Other,
        }
    }
}

/// A runtime binary and the global arguments progscore gives it.
#[derive(Debug, Clone)]
pub(crate) struct OciRuntime {
    /// The name the profile gives (`runc`, `runsc`, ...).
    pub name: String,
    pub binary: PathBuf,
    pub kind: RuntimeKind,
    /// The first line of `--version`.
    pub version: String,
    /// `--root`: this client's own state folder for this runtime.
    state_root: PathBuf,
}

impl OciRuntime {
    /// Finds `name` on the PATH (or in /usr/sbin, /usr/bin, /sbin, /bin) and
    /// reads its version. Errors say what is missing and how to get it.
    pub(crate) async fn resolve(name: &str, state_root: &Path) -> Result<OciRuntime, String> {
        let binary = find_binary(name).ok_or_else(|| {
            format!(
                "the OCI runtime `{name}` is not installed (not on the PATH, nor in /usr/sbin, \
                 /usr/bin, /sbin, /bin); scripts/setup.sh installs runc and runsc"
            )
        })?;
        let kind = RuntimeKind::of(name);
        let output = Command::new(&binary)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
        if !output.status.success() {
            return Err(format!(
                "{} --version failed ({}): {}",
                binary.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        let version = String::from_utf8_lossy(&output.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        Ok(OciRuntime {
            name: name.to_string(),
            binary,
            kind,
            version,
            state_root: state_root.join(name),
        })
    }

    /// The binary with its global arguments.
    pub(crate) fn command(&self) -> Command {
        let mut command = Command::new(&self.binary);
        command.args(self.global_args());
        command.stdin(Stdio::null());
        command
    }

    /// What progscore gives the runtime before any command: its state root,
    /// and for runsc no network (the container has only loopback; without
    /// it runsc also refuses to start on hosts like this project's).
    pub(crate) fn global_args(&self) -> Vec<String> {
        let mut args = vec!["--root".to_string(), self.state_root.display().to_string()];
        if self.kind == RuntimeKind::Runsc {
            args.push("--network=none".into());
        }
        args
    }

    pub(crate) fn state_root(&self) -> &Path {
        &self.state_root
    }

    /// Sends SIGKILL to the container's processes.
    pub(crate) async fn kill(&self, id: &str, bound: Duration) -> Result<(), String> {
        let mut command = self.command();
        command.arg("kill");
        if self.kind == RuntimeKind::Runsc {
            // Every process of the container, not only its first.
            command.arg("--all");
        }
        command.args([id, "KILL"]);
        self.quiet(command, "kill", id, bound).await
    }

    /// Deletes the container whatever its state.
    pub(crate) async fn delete(&self, id: &str, bound: Duration) -> Result<(), String> {
        let mut command = self.command();
        command.args(["delete", "--force", id]);
        self.quiet(command, "delete", id, bound).await
    }

    /// Whether the runtime still holds state for the container `id` (a lock
    /// file alone is no state: see [`OciRuntime::remove_stale_locks`]).
    pub(crate) fn has_state(&self, id: &str) -> bool {
        self.state_entries(id)
            .iter()
            .any(|name| !name.ends_with(".lock"))
    }

    /// Removes the lock files of the container `id` once it has no other
    /// state: runsc leaves `<id>_sandbox:<id>.lock` behind when its sandbox
    /// was killed from outside, and nothing else would remove it.
    pub(crate) fn remove_stale_locks(&self, id: &str) -> Result<(), String> {
        if self.has_state(id) {
            return Ok(());
        }
        for name in self.state_entries(id) {
            let path = self.state_root.join(&name);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(format!("cannot remove {}: {e}", path.display()));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The names in the state root that name the container `id`.
    fn state_entries(&self, id: &str) -> Vec<String> {
        std::fs::read_dir(&self.state_root)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|name| name.contains(id))
                    .collect()
            })
            .unwrap_or_default()
    }

    async fn quiet(
        &self,
        mut command: Command,
        what: &str,
        id: &str,
        bound: Duration,
    ) -> Result<(), String> {
        command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let run = command.output();
        match tokio::time::timeout(bound, run).await {
            Ok(Ok(output)) if output.status.success() => Ok(()),
            Ok(Ok(output)) => Err(format!(
                "{} {what} {id} failed ({}): {}",
                self.name,
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )),
            Ok(Err(e)) => Err(format!("cannot run {} {what} {id}: {e}", self.name)),
            Err(_) => Err(format!(
                "{} {what} {id} did not finish within {bound:?}",
                self.name
            )),
        }
    }
}

fn find_binary(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/sbin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}
