//! One invocation: its cgroup and bundle, `runtime run`, the program's
//! window, the outcome from the exit status and the cgroup, and removal.
//!
//! Two clocks, as in the Docker backend. Runtime commands (starting the
//! container, kill, delete, and the output's end once the program exited)
//! are bounded by the runtime timeout; its expiry is a sandbox error, never
//! the program's time. The program's limits run from the moment the runtime
//! released it: `runc run` writes its pid file right after the container's
//! process was let go to exec the program (runsc once its sandbox is up).
//! The runtime is the container's parent and exits with its status
//! (128 + signal when it was killed); an OOM kill is read from the cgroup.
//!
//! That status is the program's only when the runtime shows it is: not when
//! the runtime logged its own failure, not when the invocation's cgroup was
//! removed from outside, and under runsc only when the sandbox noted the same
//! exit itself. Under runc, 137 that neither progscore's kill nor the memory
//! limit explains is a SIGKILL from outside (PID 1 cannot SIGKILL itself) or
//! the program's own `exit(137)`: `runc run` reports both alike, so such a run
//! proves nothing (a sandbox error). Telling them apart would need the
//! container's wait status itself, i.e. `runc create`/`start` with progscore
//! as the child subreaper reaping the container's init (as containerd's
//! shims do), which makes every orphan of the process progscore's to reap.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use progscore_container::{
    Cgroups, EndedTasks, InvocationCgroup, Load, Measured, MemoryKill, Program, Window, millis,
};
use progscore_sandbox::{
    Invocation, InvocationEvent, Limits, Outcome, Provenance, ResourceUsage, RuntimeProfile, Stage,
    StreamCapture,
};
use progscore_trace::TracePlan;
use progscore_trace::gvisor_trace::GvisorTrace;
use progscore_trace::seccomp_trace::SeccompTrace;
use progscore_trace::tracer_hold::TracerHold;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStderr, ChildStdout};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::bundle::{self, Placement};
use crate::options::OciOptions;
use crate::runtime::{OciRuntime, RuntimeKind};

/// How often the runtime's pid file is looked for while the container starts.
const START_POLL: Duration = Duration::from_millis(2);
/// How long a kill is given before it is sent again.
const KILL_RETRY: Duration = Duration::from_millis(200);
/// The container's own cgroup, below the invocation's.
const LEAF: &str = "ctr";
/// The folder in a bundle where runsc's processes write their logs: each
/// notes its own exit there, which is how a sandbox that ended on its own is
/// told from one killed from outside.
const SANDBOX_LOGS: &str = "sandbox-logs";
/// The file in a bundle that names the runtime that ran it, `<name>\n<binary>`
/// (for the sweep).
pub(crate) const RUNTIME_MARKER: &str = "runtime";

/// The image an invocation runs, as the cache prepared it.
pub(crate) struct ImageInUse {
    pub rootfs: PathBuf,
    pub env: Vec<String>,
    pub home: String,
    pub manifest_digest: String,
    pub config_digest: String,
}

/// Everything an invocation needs from its call.
pub(crate) struct InvocationContext<'a> {
    pub runtime: &'a OciRuntime,
    pub image: &'a ImageInUse,
    pub profile: &'a RuntimeProfile,
    pub options: &'a OciOptions,
    pub owner: &'a str,
    pub owner_dir: &'a Path,
    pub cgroups: &'a Cgroups,
    pub load: &'a Load,
    pub cpus: usize,
    pub program_on_host: &'a Path,
    /// Where `program_on_host` is mounted: the program's path, or its
    /// folder when it brings files.
    pub program_target: &'a str,
    /// The compile (writable build folder) or a case (read-only).
    pub stage: Stage,
    pub build_on_host: Option<&'a Path>,
    pub token: &'a CancellationToken,
}

impl InvocationContext<'_> {
    /// The limits of this context's stage.
    fn limits(&self) -> &Limits {
        self.profile.limits_of(self.stage)
    }
}

/// The event, any sandbox warnings, and what the caller must do next.
pub(crate) struct InvocationResult {
    pub event: InvocationEvent,
    /// What of the invocation could not be removed (for the next sweep).
    pub warnings: Vec<String>,
    pub next: Next,
}

/// How long the trace's stream may take to end once its sandbox is gone.
const TRACE_END_GRACE: Duration = Duration::from_secs(5);

/// What the call does after an invocation.
pub(crate) enum Next {
    Continue,
    /// Run this invocation again with nothing else beside it.
    ConfirmAlone(String),
    /// Run nothing more in this call (the text says why).
    Stop(String),
}

/// What the window showed.
struct Observed {
    outcome: Outcome,
    duration: Duration,
    usage: Option<ResourceUsage>,
    confirm: Option<String>,
}

pub(crate) async fn run(
    context: &InvocationContext<'_>,
    index: usize,
    invocation: &Invocation,
    alone: bool,
) -> InvocationResult {
    let name = format!(
        "progscore-{}-{index}",
        progscore_sandbox::owner::random_hex()
    );
    let profile = context.profile;
    let cgroup = context.cgroups.invocation(context.owner, &name);
    let bundle_dir = context.owner_dir.join(&name);
    let mut stdout = StreamCapture::new(context.limits().output_bytes);
    let mut stderr = StreamCapture::new(context.limits().output_bytes);
    // runsc runs here, so its trace always reaches this process; runc is
    // started here, with a seccomp listener of progscore's.
    let plan = TracePlan::with_runc_listener(profile, context.stage, &context.runtime.name, Ok(()));
    let prepared = prepare(
        context,
        &name,
        &cgroup,
        &bundle_dir,
        &invocation.args,
        &plan,
    );
    let mut trace = None;
    let mut seccomp_trace = None;
    let mut untraced = "the sandbox failed before its trace began".to_string();
    let (observed, argv) = match prepared {
        Ok(Prepared {
            argv,
            seccomp,
            seccomp_unavailable,
        }) => {
            seccomp_trace = seccomp;
            if let Some(why) = seccomp_unavailable {
                untraced = why;
            }
            if let TracePlan::Gvisor(sensitive) = &plan {
                match GvisorTrace::listen(&bundle_dir, sensitive.clone()) {
                    Ok(listening) => trace = Some(listening),
                    Err(e) => untraced = format!("the trace could not be set up: {e}"),
                }
            }
            let stdin = invocation.stdin.as_ref().map(|s| s.as_bytes().to_vec());
            let lifecycle = Lifecycle {
                context,
                name: &name,
                cgroup: &cgroup,
                bundle_dir: &bundle_dir,
                trace_config: trace.as_ref().map(GvisorTrace::pod_init_config_path),
                tracer: trace
                    .as_ref()
                    .map(GvisorTrace::hold)
                    .or_else(|| seccomp_trace.as_ref().map(SeccompTrace::hold)),
            };
            let observed = lifecycle
                .drive(stdin, &mut stdout, &mut stderr, alone)
                .await;
            (observed, argv)
        }
        Err(message) => (Err(message), Vec::new()),
    };

    let mut warnings = Vec::new();
    let mut next = match &observed {
        Ok(observed) => match &observed.confirm {
            Some(why) => Next::ConfirmAlone(why.clone()),
            None => Next::Continue,
        },
        Err(message) => Next::Stop(format!(
            "an earlier invocation hit a sandbox error: {message}"
        )),
    };
    if matches!(&observed, Ok(o) if matches!(o.outcome, Outcome::NotRun { .. })) {
        next = Next::Stop("the call was cancelled".into());
    }

    // Removal runs on every path: the container (if the runtime still holds
    // it), the cgroups, the bundle.
    if let Err(warning) = remove(context, &name, &cgroup, &bundle_dir).await {
        warnings.push(warning.clone());
        if matches!(next, Next::Continue | Next::ConfirmAlone(_)) {
            next = Next::Stop(format!("not run: {warning}"));
        }
    }

    // The sandbox is gone: its trace stream has ended (every process of
    // its seccomp filter is gone).
    let mut listener_fault = None;
    let behaviour = match (trace, seccomp_trace) {
        (Some(trace), _) => Some(trace.finish(TRACE_END_GRACE).await),
        (None, Some(seccomp)) => {
            let (behaviour, fault) = seccomp.finish(TRACE_END_GRACE).await;
            listener_fault = fault;
            Some(behaviour)
        }
        (None, None) => plan.untraced(&untraced),
    };
    // A listener that failed while the program ran (or was never reached:
    // runc did not apply the filter) answered the program's calls wrongly,
    // or not at all: the run is not the program's.
    let observed = match (observed, listener_fault) {
        (Ok(observed), Some(fault)) if !matches!(observed.outcome, Outcome::NotRun { .. }) => {
            let message = format!("the seccomp listener tracing container {name} failed: {fault}");
            if matches!(next, Next::Continue | Next::ConfirmAlone(_)) {
                next = Next::Stop(format!(
                    "an earlier invocation hit a sandbox error: {message}"
                ));
            }
            Err(message)
        }
        (observed, _) => observed,
    };
    let (outcome, duration, usage) = match observed {
        Ok(observed) => (observed.outcome, observed.duration, observed.usage),
        Err(message) => (Outcome::SandboxError { message }, Duration::ZERO, None),
    };
    let provenance = Provenance {
        backend: "oci".into(),
        runtime: context.runtime.name.clone(),
        artifact: profile.image().map(|i| i.to_string()).unwrap_or_default(),
        image_id: Some(context.image.config_digest.clone()),
        repo_digests: vec![context.image.manifest_digest.clone()],
        engine: format!("{} (no daemon)", context.runtime.version),
        engine_name: None,
        command: argv,
        user: profile.user.clone(),
        container: Some(name),
        limits: context.limits().clone(),
    };
    InvocationResult {
        event: InvocationEvent {
            outcome,
            stdout: stdout.finish(),
            stderr: stderr.finish(),
            duration_ms: millis(duration),
            usage,
            provenance: Some(provenance),
            behaviour,
        },
        warnings,
        next,
    }
}

/// What [`prepare`] made.
struct Prepared {
    argv: Vec<String>,
    /// The seccomp listener the container's profile names (runc, traced).
    seccomp: Option<SeccompTrace>,
    /// Why a traced runc invocation runs without its listener.
    seccomp_unavailable: Option<String>,
}

/// The cgroup with its memory limit, and the bundle: `config.json`, and the
/// runtime's name for a sweep after a crash; under [`TracePlan::Seccomp`],
/// the seccomp listener that `config.json` names.
fn prepare(
    context: &InvocationContext<'_>,
    name: &str,
    cgroup: &InvocationCgroup,
    bundle_dir: &Path,
    args: &[String],
    plan: &TracePlan,
) -> Result<Prepared, String> {
    std::fs::create_dir(bundle_dir)
        .map_err(|e| format!("cannot create bundle {}: {e}", bundle_dir.display()))?;
    std::fs::write(
        bundle_dir.join(RUNTIME_MARKER),
        format!(
            "{}\n{}\n",
            context.runtime.name,
            context.runtime.binary.display()
        ),
    )
    .map_err(|e| format!("cannot write bundle {}: {e}", bundle_dir.display()))?;
    cgroup
        .create_with_memory_limit(context.limits().memory_bytes)
        .map_err(|e| e.to_string())?;
    let mut seccomp = None;
    let mut seccomp_unavailable = None;
    if let TracePlan::Seccomp(sensitive) = plan {
        match SeccompTrace::listen(bundle_dir, sensitive.clone()) {
            Ok(listener) => seccomp = Some(listener),
            Err(e) => seccomp_unavailable = Some(format!("the trace could not be set up: {e}")),
        }
    }
    let placement = Placement {
        rootfs: &context.image.rootfs,
        image_env: &context.image.env,
        program_on_host: context.program_on_host,
        program_target: context.program_target,
        build_on_host: context.build_on_host,
        cgroups_path: cgroup.runtime_path(LEAF),
        runtime: context.runtime.kind,
        home: context.image.home.clone(),
        seccomp_listener: seccomp.as_ref().map(SeccompTrace::listener_path),
    };
    let bundle = bundle::spec(context.profile, context.stage, &placement, args)
        .map_err(|e| format!("cannot build the container's spec for {name}: {e}"))?;
    bundle
        .spec
        .save(bundle_dir.join("config.json"))
        .map_err(|e| format!("cannot write {}/config.json: {e}", bundle_dir.display()))?;
    Ok(Prepared {
        argv: bundle.argv,
        seccomp,
        seccomp_unavailable,
    })
}

/// Removes the container if the runtime still holds it, the invocation's
/// cgroups, and the bundle.
pub(crate) async fn remove(
    context: &InvocationContext<'_>,
    name: &str,
    cgroup: &InvocationCgroup,
    bundle_dir: &Path,
) -> Result<(), String> {
    let mut problems = Vec::new();
    if context.runtime.has_state(name)
        && let Err(e) = context
            .runtime
            .delete(name, context.options.runtime_timeout)
            .await
    {
        problems.push(format!("failed to remove container {name}: {e}"));
    }
    if let Err(e) = context.runtime.remove_stale_locks(name) {
        problems.push(format!("failed to remove container {name}: {e}"));
    }
    // What the runtime left running in the cgroup (an init whose `run` was
    // killed during its start): killed, and given a moment to exit.
    for _ in 0..100 {
        if cgroup.kill_remaining() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if let Err(e) = cgroup.remove_settled().await {
        problems.push(e.to_string());
    }
    match std::fs::remove_dir_all(bundle_dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => problems.push(format!(
            "failed to remove bundle {}: {e}",
            bundle_dir.display()
        )),
        _ => {}
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

struct Lifecycle<'c, 'a> {
    context: &'c InvocationContext<'a>,
    name: &'c str,
    cgroup: &'c InvocationCgroup,
    bundle_dir: &'c Path,
    /// runsc's pod init config naming the trace's socket, when traced.
    trace_config: Option<&'c Path>,
    /// The time the program's calls may wait for its tracer, when traced.
    tracer: Option<Arc<TracerHold>>,
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
    async fn drive(
        &self,
        stdin: Option<Vec<u8>>,
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
            .stdin(if stdin.is_some() {
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
            stdin,
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

    /// Whether the status `code` the runtime exited with is the program's:
    /// the runtime itself did not fail, and (runsc) the sandbox ended on its
    /// own. runc logs nothing on a run that works, so an error in its log is
    /// its own failure. runsc's sandbox notes its exit status in its log; one
    /// killed from outside notes nothing, and the status it noted must be the
    /// one runsc reported. A file server (gofer) killed from outside makes
    /// the sandbox SIGKILL the program, which it logs before the program's
    /// death; a program's own SIGKILL is logged before the file server's
    /// disconnection (measured, runsc 2022-12-19).
    async fn runtime_ended_on_its_own(&self, code: i32) -> Result<(), String> {
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
    fn runtime_log(&self) -> String {
        let log = std::fs::read_to_string(self.bundle_dir.join("runtime.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().rev().take(3).collect();
        if lines.is_empty() {
            "the runtime logged nothing".into()
        } else {
            lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
        }
    }
}

/// Feeds stdin (then closes it, so the program sees EOF) while draining both
/// output streams, until both end; an error reading either is returned.
async fn feed_and_drain(
    input: Option<tokio::process::ChildStdin>,
    stdin: Option<Vec<u8>>,
    out: Option<ChildStdout>,
    err: Option<ChildStderr>,
    stdout: &mut StreamCapture,
    stderr: &mut StreamCapture,
    last_output: &std::sync::Mutex<Option<Instant>>,
) -> Result<(), String> {
    let feed = async move {
        if let (Some(mut input), Some(bytes)) = (input, stdin) {
            // A program may exit without reading its input: the write then
            // fails (EPIPE; progscore does not die of SIGPIPE), which is the
            // program's business, not a sandbox fault.
            if let Err(err) = input.write_all(&bytes).await {
                tracing::debug!("stdin write ended early: {err}");
            }
            let _closed = input.shutdown().await;
        }
    };
    let ((), out, err) = tokio::join!(
        feed,
        drain(out, stdout, last_output),
        drain(err, stderr, last_output)
    );
    out.map_err(|e| format!("stdout: {e}"))?;
    err.map_err(|e| format!("stderr: {e}"))
}

/// Reads a stream to its end. A read error is returned, never taken as the
/// end: what was read so far may not be all the program wrote.
async fn drain(
    stream: Option<impl AsyncRead + Unpin>,
    capture: &mut StreamCapture,
    last_output: &std::sync::Mutex<Option<Instant>>,
) -> std::io::Result<()> {
    let Some(mut stream) = stream else {
        return Ok(());
    };
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
            Ok(read) => {
                capture.push(&buffer[..read]);
                if let Ok(mut last) = last_output.lock() {
                    *last = Some(Instant::now());
                }
            }
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

fn not_run() -> Observed {
    Observed {
        outcome: Outcome::NotRun {
            reason: "the call was cancelled".into(),
        },
        duration: Duration::ZERO,
        usage: None,
        confirm: None,
    }
}
