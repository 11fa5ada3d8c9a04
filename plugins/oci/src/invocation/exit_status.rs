//! Whether the status the runtime exited with is the program's: runc's own
//! log, and under runsc what the sandbox's processes noted in theirs (its
//! exit, its file server lost), read back from the bundle.

use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

use super::lifecycle::Lifecycle;
use super::provision::SANDBOX_LOGS;
use crate::runtime::RuntimeKind;

impl Lifecycle<'_, '_> {
    /// Whether the status `code` the runtime exited with is the program's:
    /// the runtime itself did not fail, and (runsc) the sandbox ended on its
    /// own. runc logs nothing on a run that works, so an error in its log is
    /// its own failure. runsc's sandbox notes its exit status in its log; one
    /// killed from outside notes nothing, and the status it noted must be the
    /// one runsc reported. A file server (gofer) killed from outside makes
    /// the sandbox SIGKILL the program, which it logs before the program's
    /// death; a program's own SIGKILL is logged before the file server's
    /// disconnection (measured, runsc 2022-12-19).
    pub(super) async fn runtime_ended_on_its_own(&self, code: i32) -> Result<(), String> {
        let runtime = self.context.runtime;
        if runtime.kind != RuntimeKind::Runsc {
            let log =
                std::fs::read_to_string(self.bundle_dir.join("runtime.log")).unwrap_or_default();
            let failed = log.lines().any(|line| {
                [
                    "level=error",
                    "level=fatal",
                    "\"level\":\"error\"",
                    "\"level\":\"fatal\"",
                ]
                .iter()
                .any(|mark| line.contains(mark))
            });
            return if failed {
                Err(format!(
                    "{} failed while it ran container {} (exit status {code}, not the \
                     program's): {}",
                    runtime.name,
                    self.name,
                    self.runtime_log()
                ))
            } else {
                Ok(())
            };
        }
        let logs = self.bundle_dir.join(SANDBOX_LOGS);
        // runsc may exit before its sandbox has noted its own exit: that
        // note is waited for while the process lives (bounded).
        let deadline = Instant::now() + self.context.options.runtime_timeout;
        let sandbox = loop {
            let noted = exit_noted(&logs, BOOT_LOG);
            if noted.is_some()
                || !runsc_process_alive(&logs, "runsc-sandbox")
                || Instant::now() >= deadline
            {
                break noted;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        match sandbox {
            Some(status) if wait_status_code(status) != code => Err(format!(
                "runsc exited {code} while the gVisor sandbox of container {} noted exit \
                 status {}: runsc failed",
                self.name,
                wait_status_code(status)
            )),
            // The sandbox kills the program with SIGKILL when its file
            // server goes away: a SIGKILL the program did not send itself.
            Some(status) if status & 0x7f == libc::SIGKILL && file_server_lost_first(&logs) => {
                Err(format!(
                    "the file server of the gVisor sandbox of container {} went away while the \
                 program ran (killed from outside), and the sandbox killed the program",
                    self.name
                ))
            }
            Some(_) => Ok(()),
            None => Err(format!(
                "the gVisor sandbox of container {} did not end on its own (runsc exited \
                 {code}, the sandbox noted no exit): killed from outside, or runsc failed",
                self.name
            )),
        }
    }

    /// The runtime's own log, last lines, for a sandbox error's message.
    pub(super) fn runtime_log(&self) -> String {
        let log = std::fs::read_to_string(self.bundle_dir.join("runtime.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().rev().take(3).collect();
        if lines.is_empty() {
            "the runtime logged nothing".into()
        } else {
            lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
        }
    }
}

/// The log of runsc's sandbox process (the Sentry), by its file name's end.
const BOOT_LOG: &str = ".boot.txt";

/// Whether runsc's sandbox lost its file server before the program died of
/// a signal: then the signal was the sandbox's response, not the program's.
fn file_server_lost_first(logs: &Path) -> bool {
    let text = log_of(logs, BOOT_LOG).unwrap_or_default();
    let position = |mark: &str| text.lines().position(|line| line.contains(mark));
    match (
        position("Gofer socket disconnected"),
        position("Uncaught signal"),
    ) {
        (Some(lost), Some(died)) => lost < died,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// The text of the runsc log whose file name ends with `suffix`.
fn log_of(logs: &Path, suffix: &str) -> Option<String> {
    let file = std::fs::read_dir(logs)
        .ok()?
        .flatten()
        .find(|entry| entry.file_name().to_string_lossy().ends_with(suffix))?;
    std::fs::read_to_string(file.path()).ok()
}

/// The wait status a runsc process noted as its exit, from the log of the
/// process whose file name ends with `suffix` (`.boot.txt`, `.gofer.txt`).
fn exit_noted(logs: &Path, suffix: &str) -> Option<i32> {
    log_of(logs, suffix)?
        .lines()
        .rev()
        .find_map(|line| line.split_once("Exiting with status: "))
        .and_then(|(_, status)| status.trim().parse().ok())
}

/// Whether a runsc process (`argv0`) writing its log into `logs` still runs:
/// its command line names that folder, which is this invocation's alone.
/// (Once it has gone, what it noted before its exit is in its log.)
fn runsc_process_alive(logs: &Path, argv0: &str) -> bool {
    let flag = format!("--debug-log={}/", logs.display());
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return false;
    };
    processes.flatten().any(|process| {
        let cmdline = std::fs::read(process.path().join("cmdline")).unwrap_or_default();
        let mut args = cmdline.split(|b| *b == 0);
        args.next() == Some(argv0.as_bytes()) && args.any(|arg| arg == flag.as_bytes())
    })
}

/// The exit code a shell (and runsc) gives a wait status: the code, or 128 +
/// the signal.
fn wait_status_code(status: i32) -> i32 {
    if status & 0x7f != 0 {
        128 + (status & 0x7f)
    } else {
        (status >> 8) & 0xff
    }
}
