//! The container's life as the runtime runs it: `runtime run` started, the
//! program released (its pid file), the shared window driving it, the
//! outcome read from the exit status and the cgroup, and the kills.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use progscore_container::{EndedTasks, InvocationCgroup, Measured, MemoryKill, Program, Window};
use progscore_sandbox::{Outcome, StreamCapture};
use progscore_trace::tracer_hold::TracerHold;
use tokio::process::Child;
use tokio::time::Instant;

use super::context::{InvocationContext, Observed, not_run};
use super::provision::{LEAF, SANDBOX_LOGS};
use super::streams::{Feed, feed_and_drain};
use crate::runtime::RuntimeKind;

/// How often the runtime's pid file is looked for while the container starts.
const START_POLL: Duration = Duration::from_millis(2);
/// How long a kill is given before it is sent again.
const KILL_RETRY: Duration = Duration::from_millis(200);

pub(super) struct Lifecycle<'c, 'a> {
    pub(super) context: &'c InvocationContext<'a>,
    pub(super) name: &'c str,
    pub(super) cgroup: &'c InvocationCgroup,
    pub(super) bundle_dir: &'c Path,
    /// runsc's pod init config naming the trace's socket, when traced.
    pub(super) trace_config: Option<&'c Path>,
    /// The time the program's calls may wait for its tracer, when traced.
    pub(super) tracer: Option<Arc<TracerHold>>,
}

/// The container once the runtime released the program, as the shared
/// window drives it: the runtime's process is its parent and exits with its
/// status.
struct Started<'l, 'c, 'a> {
    lifecycle: &'l Lifecycle<'c, 'a>,
    child: tokio::sync::Mutex<Child>,
}

impl Program for Started<'_, '_, '_> {
    type Exit = std::io::Result<ExitStatus>;
    type Fault = String;

    async fn wait(&self) -> Result<Self::Exit, String> {
        Ok(self.child.lock().await.wait().await)
    }

    async fn ended(&self) -> Result<Option<Self::Exit>, String> {
        Ok(match self.child.lock().await.try_wait() {
            Ok(Some(status)) => Some(Ok(status)),
            _ => None,
        })
    }

    async fn kill(&self) {
        self.lifecycle.kill(&mut *self.child.lock().await).await;
    }

    async fn wait_killed(&self) -> Result<Self::Exit, String> {
        let bound = self.lifecycle.context.options.runtime_timeout;
        let mut child = self.child.lock().await;
        tokio::time::timeout(bound, child.wait())
            .await
            .map_err(|_| {
                format!(
                    "container {} did not end within {bound:?} of its kill",
                    self.lifecycle.name
                )
            })
    }

    async fn kill_cancelled(&self) {
        self.lifecycle
            .kill_and_reap(&mut *self.child.lock().await)
            .await;
    }

    fn output_fault(&self, message: String) -> String {
        message
    }
}

impl Lifecycle<'_, '_> {
    /// Start, the program's window, the outcome.
    pub(super) async fn drive(
        &self,
        feed: Feed,
        stdout: &mut StreamCapture,
        stderr: &mut StreamCapture,
        alone: bool,
    ) -> Result<Observed, String> {
        let token = self.context.token;
        if token.is_cancelled() {
            return Ok(not_run());
        }
        let runtime = self.context.runtime;
        let bound = self.context.options.runtime_timeout;
        let oom = self.cgroup.watch_oom().map_err(|e| e.to_string())?;
        let pid_file = self.bundle_dir.join("pid");
        let mut command = runtime.command();
        command
            .arg("--log")
            .arg(self.bundle_dir.join("runtime.log"));
        if runtime.kind == RuntimeKind::Runsc {
            let logs = self.bundle_dir.join(SANDBOX_LOGS);
            std::fs::create_dir(&logs)
                .map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
            // Info level: a few kilobytes per process, with its exit status.
            command.arg(format!("--debug-log={}/", logs.display()));
            if let Some(config) = self.trace_config {
                command.arg(format!("--pod-init-config={}", config.display()));
            }
        }
        command
            .args(["run", "--bundle"])
            .arg(self.bundle_dir)
            .arg("--pid-file")
            .arg(&pid_file)
            .arg(self.name)
            .stdin(if feed.is_open() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", runtime.binary.display()))?;
        let last_output = std::sync::Mutex::new(None::<Instant>);
        let io = feed_and_drain(
            child.stdin.take(),
            feed,
            child.stdout.take(),
            child.stderr.take(),
            stdout,
            stderr,
            &last_output,
        );
        tokio::pin!(io);
        let mut io_end: Option<Result<(), String>> = None;

        // The container starts: the program's clock starts once the runtime
        // released it.
        let start_deadline = tokio::time::sleep(bound);
        tokio::pin!(start_deadline);
        let mut early_exit = None;
        loop {
            if pid_file.exists() {
                break;
            }
            tokio::select! {
                biased;
                () = token.cancelled() => {
                    self.kill_and_reap(&mut child).await;
                    return Ok(not_run());
                }
                status = child.wait() => {
                    early_exit = Some(status);
                    break;
                }
                read = &mut io, if io_end.is_none() => io_end = Some(read),
                () = &mut start_deadline => {
                    self.kill_and_reap(&mut child).await;
                    return Err(format!(
                        "container {} did not start within {bound:?}", self.name
                    ));
                }
                () = tokio::time::sleep(START_POLL) => {}
            }
        }
        if early_exit.is_some() && !pid_file.exists() {
            // The runtime ended before it released the program: its fault.
            let status = early_exit.and_then(Result::ok);
            return Err(format!(
                "{} could not start container {} ({}): {}",
                runtime.name,
                self.name,
                status.map_or("no status".into(), |s| s.to_string()),
                self.runtime_log()
            ));
        }
        // The program's window: the timing rule, applied once for every
        // backend.
        let window = Window {
            name: self.name,
            limits: self.context.limits(),
            load: self.context.load,
            cpus: self.context.cpus,
            alone,
            token,
            output_bound: bound,
            tracer: self.tracer.as_deref(),
        };
        let cgroup = self.cgroup;
        // The runtime removes the container's own cgroup once the program
        // ends, so one that already ended (before its pid file was seen, or
        // between that and its window's start) is measured from the parent
        // alone: made empty for this invocation, it counts nothing else
        // (only the runtime's few milliseconds before exec).
        let measure = || {
            let running_in_leaf = cgroup.holds(LEAF);
            Measured {
                cgroup: Some(cgroup),
                leaf: LEAF,
                cpu_at_start: if running_in_leaf {
                    cgroup.cpu_usage()
                } else {
                    Some(Duration::ZERO)
                },
                waits_at_start: if running_in_leaf {
                    cgroup.sample_waits(LEAF)
                } else {
                    None
                },
                // Under gVisor the cgroup's tasks are the sandbox's own.
                ended_tasks: if runtime.kind == RuntimeKind::Runsc {
                    EndedTasks::Counted
                } else {
                    EndedTasks::Unknown
                },
            }
        };
        // Output that ended (or failed) while the container started counts
        // as it did then.
        let name = self.name;
        let io = async move {
            match io_end {
                Some(ended) => ended,
                None => io.await,
            }
            .map_err(|e| format!("reading the output of container {name}: {e}"))
        };
        let program = Started {
            lifecycle: self,
            child: tokio::sync::Mutex::new(child),
        };
        let mut watched = window
            .watch(&program, measure, io, &last_output, early_exit)
            .await?;
        let Some(status) = watched.exit.take() else {
            return Ok(not_run());
        };

        let status = status.map_err(|e| format!("waiting for {}: {e}", runtime.name))?;
        let Some(code) = status.code() else {
            return Err(format!(
                "{} running container {} was ended by a signal ({status}): {}",
                runtime.name,
                self.name,
                self.runtime_log()
            ));
        };
        // The invocation's cgroup is progscore's until the removal below:
        // gone now, it was removed from outside, and with it the OOM record
        // (cgroup v1 even signals its removal as an OOM event).
        if cgroup.peak_memory().is_none() {
            return Err(format!(
                "the cgroup of container {} was removed from outside while it ran",
                self.name
            ));
        }
        // Read once: a v1 notification is consumed by its read. Only a kill
        // at the program's own limit is its `memory_limit`; another OOM
        // killer's (the host's, a cgroup's above) leaves it unknown.
        let oom_killed = match oom.verdict(false) {
            MemoryKill::None => false,
            MemoryKill::OwnLimit => true,
            MemoryKill::NotItsOwn(why) => {
                return Err(format!(
                    "container {} was hit by an OOM killer that is not its own memory \
                     limit's: {why}; the program's outcome is unknown",
                    self.name
                ));
            }
        };
        let killed_by_us = watched.killed.is_some() && code == 137;
        // An OOM kill under runsc may hit the sandbox itself: its outcome is
        // the limit's whatever the sandbox noted.
        if !killed_by_us && !oom_killed {
            self.runtime_ended_on_its_own(code).await?;
        }
        let outcome = if oom_killed {
            Outcome::MemoryLimit
        } else {
            // 137 is 128 + SIGKILL. Under runc the program is PID 1 of
            // its namespace, which cannot SIGKILL itself, so that kill
            // came from outside (no limit of the program's caused it);
            // but `runc run` reports a program's own `exit(137)` with
            // the same status, and nothing else here tells the two
            // apart: the run proves nothing. (runsc: the sandbox's own
            // exit was checked above, and a program can SIGKILL itself
            // there.)
            if code == 137 && !killed_by_us && runtime.kind != RuntimeKind::Runsc {
                return Err(format!(
                    "container {} ended with status 137 (SIGKILL) that neither progscore \
                     nor a limit of the program sent: a kill from outside the sandbox, \
                     which {} cannot tell apart from the program's own exit(137)",
                    self.name, runtime.name
                ));
            }
            // Killed by us (SIGKILL): the limit's outcome; else its own exit.
            watched.outcome(i64::from(code))
        };
        Ok(Observed {
            outcome,
            duration: watched.duration,
            usage: watched.usage,
            confirm: watched.confirm,
        })
    }

    /// Sends the container SIGKILL; when the runtime cannot (the container
    /// is half started, or the runtime wedged), deletes it by force, which
    /// kills what runs in it.
    async fn kill(&self, child: &mut Child) {
        let runtime = self.context.runtime;
        let bound = self.context.options.runtime_timeout;
        if let Err(e) = runtime.kill(self.name, bound).await {
            tracing::debug!("{e}");
            // No state yet (the runtime is still creating the container):
            // nothing to delete, and runsc's delete would wait seconds for
            // it; the caller sends the kill again.
            if !matches!(child.try_wait(), Ok(Some(_)))
                && runtime.has_state(self.name)
                && let Err(e) = runtime.delete(self.name, bound).await
            {
                tracing::debug!("{e}");
            }
        }
    }

    /// Kills the container and waits (bounded) for the runtime to exit.
    async fn kill_and_reap(&self, child: &mut Child) {
        let bound = self.context.options.runtime_timeout;
        let deadline = Instant::now() + bound;
        // A kill that lands while the runtime is still starting the
        // container can miss it (runsc accepts it, then starts the program
        // anyway): repeated until the runtime ends, within the bound.
        let ended = loop {
            self.kill(child).await;
            match tokio::time::timeout(KILL_RETRY, child.wait()).await {
                Ok(_) => break true,
                Err(_) if Instant::now() < deadline => {}
                Err(_) => break false,
            }
        };
        if !ended {
            // The runtime is wedged: end it; removal deletes the container.
            let _ = child.start_kill();
            let _ = tokio::time::timeout(bound, child.wait()).await;
        }
    }
}
