//! One invocation: create, attach, start, the program's window, then the
//! outcome from the container's state, the measurements, and removal.
//!
//! Two clocks. Every engine request (create, attach, start, kill, inspect,
//! remove, and the output's end once the program exited) is bounded by the
//! engine timeout; its expiry is a sandbox error, never the program's time.
//! The program's limits run from the moment `start` returned (under gVisor,
//! after the sandbox booted): when one fires, the container's state decides
//! whether the program had exited or is killed and timed out. A stream that
//! ends is not an exit: only the engine's wait or the state says the program
//! ended.
//!
//! One concern, kept in one file: the order of these steps and what each
//! failure means is the backend's core, and reads best in one place.

use std::collections::HashMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use bollard::errors::Error as BollardError;
use bollard::models::ContainerInspectResponse;
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, InspectContainerOptions,
    KillContainerOptionsBuilder, StartContainerOptions,
};
use progscore_container::{
    Cgroups, EndedTasks, InvocationCgroup, Load, Measured, MemoryKill, OomReading, OomWatch,
    Program, Window, host_oom_kills,
};
use progscore_sandbox::{
    Invocation, InvocationEvent, Limits, Outcome, PathPattern, Provenance, ResourceUsage,
    RuntimeProfile, Stage, StreamCapture,
};
use progscore_trace::TracePlan;
use progscore_trace::gvisor_trace::GvisorTrace;
use progscore_trace::tracer_hold::TracerHold;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::container::{Placement, container_spec};
use crate::delivery::Files;
use crate::engine::{EngineFacts, ImageFacts};
use crate::events::{ContainerEvents, Seen};
use crate::health::EngineHealth;
use crate::held::{ActiveContainers, EngineFault, Leftover, remove_container};
use crate::options::{DockerOptions, OWNER_LABEL};
use crate::streams::{feed_and_drain, wait_for_exit};

/// How long a program's start waits for the proof that the engine's events
/// about its container are watched.
const EVENTS_LIVE_WAIT: Duration = Duration::from_secs(10);

/// Everything an invocation needs from its call.
pub(crate) struct InvocationContext<'a> {
    pub docker: &'a Docker,
    pub engine: &'a EngineFacts,
    /// The engine's name in a pool (`None` with one engine).
    pub engine_name: Option<&'a str>,
    /// The containers in use on this engine: the sweep after an outage
    /// leaves them alone.
    pub active: &'a ActiveContainers,
    pub health: &'a EngineHealth,
    pub image: &'a ImageFacts,
    pub profile: &'a RuntimeProfile,
    /// The OCI runtime, resolved.
    pub runtime: &'a str,
    pub options: &'a DockerOptions,
    pub owner: &'a str,
    pub cgroups: Option<&'a Cgroups>,
    pub load: &'a Load,
    /// Where the program and the build folder come from.
    pub files: &'a Files<'a>,
    /// The compile (writable build folder) or a case (read-only).
    pub stage: Stage,
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
    pub warnings: Vec<String>,
    pub next: Next,
    /// A container the engine would not remove: the client keeps it and
    /// tries again (and the next start's sweep, if this process ends first).
    pub leftover: Option<Leftover>,
}

/// What the call does after an invocation.
pub(crate) enum Next {
    /// Go on with the next invocation.
    Continue,
    /// Run this invocation again with nothing else beside it: its timeout is
    /// not proven yet (the text says why).
    ConfirmAlone(String),
    /// The engine stopped answering: wait for it, remove what is left, and
    /// run the invocation again.
    EngineLost(Leftover),
    /// Run nothing more in this call (the text says why).
    Stop(String),
}

/// What the window and the state showed.
struct Observed {
    outcome: Outcome,
    duration: Duration,
    usage: Option<ResourceUsage>,
    confirm: Option<String>,
    /// Exit code 137 that progscore did not cause: a SIGKILL from outside,
    /// the program's own (gVisor), or `exit(137)`; the engine's events
    /// decide which.
    unexplained_sigkill: bool,
    /// A proven wall-clock timeout that rests on fair time alone (not on
    /// the CPU the program used): a pause the window did not see undoes it.
    by_fair_time: bool,
    /// The engine's state says the container was OOM-killed (whose OOM
    /// killer, the cgroups tell).
    engine_oom: bool,
    /// progscore killed it at a limit.
    killed_at_limit: bool,
    /// What the OOM watch saw, read once the program ended and before its
    /// cgroup goes (`None`: not watched, or the container's cgroup is not
    /// where the watch looks).
    oom: Option<OomReading>,
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
    // In use from before its creation until its removal was tried.
    let _in_use = context.active.hold(&name);
    // Watched from before its creation, so that nothing the engine did to
    // it is missed.
    let events = ContainerEvents::watch(context.docker, &name);
    let cgroup = context
        .cgroups
        .map(|cgroups| cgroups.invocation(context.owner, &name));
    let profile = context.profile;
    let stdin = invocation.stdin.as_ref().map(|s| s.as_bytes().to_vec());
    let artifact = profile.image().map(|i| i.to_string()).unwrap_or_default();
    let spec = container_spec(
        profile,
        context.stage,
        Placement {
            image: &artifact,
            runtime: context.runtime,
            files: context.files,
            labels: HashMap::from([
                (OWNER_LABEL.to_string(), context.owner.to_string()),
                ("progscore.profile".to_string(), profile.name.clone()),
            ]),
            cgroup_parent: cgroup.as_ref().map(InvocationCgroup::parent),
        },
        &invocation.args,
        stdin.is_some(),
    );
    let mut stdout = StreamCapture::new(context.limits().output_bytes);
    let mut stderr = StreamCapture::new(context.limits().output_bytes);
    // The trace's folder is beside the workspace's mounts, where the
    // engine's runsc wrapper looks for it.
    let workspace = match context.files {
        Files::Host { program, .. } => program.parent(),
        Files::Volumes { .. } => None,
    };
    let plan = TracePlan::of(
        profile,
        context.stage,
        context.runtime,
        context
            .engine
            .can_trace(context.runtime, workspace.is_some()),
    );
    let oom = cgroup.as_ref().and_then(|cgroup| {
        cgroup
            .watch_oom_below()
            .inspect_err(|e| tracing::debug!("the OOM kills of {name} are not watched: {e}"))
            .ok()
    });
    let lifecycle = Lifecycle {
        oom,
        host_oom_kills: host_oom_kills(),
        context,
        name: &name,
        cgroup: cgroup.as_ref(),
        events: &events,
        kills_sent: std::sync::atomic::AtomicUsize::new(0),
        with_stdin: stdin.is_some(),
        trace: match (&plan, workspace) {
            (TracePlan::Gvisor(sensitive), Some(workspace)) => Some(TraceSetup {
                workspace,
                sensitive: sensitive.clone(),
                started: std::sync::Mutex::new(None),
            }),
            _ => None,
        },
    };
    let observed = lifecycle
        .drive(spec.body, stdin, &mut stdout, &mut stderr, alone)
        .await;

    let mut warnings = Vec::new();
    let (outcome, mut next) = match observed {
        Ok(observed) => {
            let next = match &observed.confirm {
                Some(why) => Next::ConfirmAlone(why.clone()),
                None => Next::Continue,
            };
            (Ok(observed), next)
        }
        Err(fault) => {
            let health = context.health;
            let lost = if fault.transport {
                health.confirm_outage(context.docker, &fault.message).await
            } else if fault.server_error {
                health
                    .confirm_outage_after_server_error(context.docker, &fault.message)
                    .await
            } else {
                false
            };
            let next = if lost {
                Next::EngineLost(Leftover {
                    container: name.clone(),
                    cgroup: cgroup.clone(),
                })
            } else {
                Next::Stop(format!(
                    "an earlier invocation hit a sandbox error: {}",
                    fault.message
                ))
            };
            (Err(fault.message), next)
        }
    };
    let cancelled = matches!(&outcome, Ok(o) if matches!(o.outcome, Outcome::NotRun { .. }));
    if cancelled {
        next = Next::Stop("the call was cancelled".into());
    }

    // Removal runs on every path, even when create reported an error: the
    // engine may have created the container before the connection failed.
    // Once the engine is gone, removal waits for its return (the caller).
    let mut leftover = None;
    let mut removed = false;
    if !matches!(next, Next::EngineLost(_)) {
        match lifecycle.remove().await {
            Ok(()) => {
                removed = true;
                if let Some(cgroup) = &cgroup
                    && let Err(e) = cgroup.remove_settled().await
                {
                    warnings.push(e.to_string());
                }
            }
            Err(fault) => {
                let warning = format!("failed to remove container {name}: {}", fault.message);
                warnings.push(warning.clone());
                leftover = Some(Leftover {
                    container: name.clone(),
                    cgroup: cgroup.clone(),
                });
                if matches!(next, Next::Continue | Next::ConfirmAlone(_)) {
                    next = Next::Stop(format!("not run: {warning}"));
                }
            }
        }
    }

    // What the engine saw decides whether the outcome is the program's.
    let outcome = match outcome {
        Ok(observed) if !cancelled => {
            let seen = if removed {
                events.settled(context.options.engine_timeout).await
            } else {
                events.seen()
            };
            match lifecycle.judge(observed, &seen) {
                Ok(observed) => {
                    if let (Some(why), Next::Continue) = (&observed.confirm, &next) {
                        next = Next::ConfirmAlone(why.clone());
                    }
                    Ok(observed)
                }
                Err(message) => {
                    if matches!(next, Next::Continue | Next::ConfirmAlone(_)) {
                        next = Next::Stop(format!(
                            "an earlier invocation hit a sandbox error: {message}"
                        ));
                    }
                    Err(message)
                }
            }
        }
        other => other,
    };

    // The container is removed (or lost): its trace stream has ended.
    let started = lifecycle
        .trace
        .as_ref()
        .and_then(|setup| setup.started.lock().ok()?.take());
    let behaviour = match started {
        Some(Ok(trace)) => Some(trace.finish(TRACE_END_GRACE).await),
        Some(Err(why)) => plan.untraced(&why),
        None => plan.untraced("the sandbox failed before its trace began"),
    };
    let (outcome, duration, usage) = match outcome {
        Ok(observed) => (observed.outcome, observed.duration, observed.usage),
        Err(message) => (Outcome::SandboxError { message }, Duration::ZERO, None),
    };
    let provenance = Provenance {
        backend: "docker".into(),
        runtime: context.runtime.to_string(),
        artifact,
        image_id: Some(context.image.image_id.clone()),
        repo_digests: context.image.repo_digests.clone(),
        engine: context.engine.description.clone(),
        engine_name: context.engine_name.map(str::to_string),
        command: spec.argv,
        user: profile.user.clone(),
        container: Some(name),
        limits: context.limits().clone(),
    };
    InvocationResult {
        event: InvocationEvent {
            outcome,
            stdout: stdout.finish(),
            stderr: stderr.finish(),
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            usage,
            provenance: Some(provenance),
            behaviour,
        },
        warnings,
        next,
        leftover,
    }
}

/// How long the trace's stream may take to end once its container is gone.
const TRACE_END_GRACE: Duration = Duration::from_secs(5);

/// A traced container's trace: its folder goes in the call's workspace,
/// named by the container's id, where the engine's runsc wrapper finds it
/// when the engine creates the sandbox (at start).
struct TraceSetup<'c> {
    workspace: &'c Path,
    sensitive: Vec<PathPattern>,
    /// The listening trace, or why it could not be set up.
    started: std::sync::Mutex<Option<Result<GvisorTrace, String>>>,
}

impl TraceSetup<'_> {
    fn start(&self, container_id: &str) {
        let short: String = container_id.chars().take(12).collect();
        let dir = self.workspace.join(format!("trace-{short}"));
        let listening = std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .and_then(|()| GvisorTrace::listen(&dir, self.sensitive.clone()))
            .map_err(|e| format!("the trace could not be set up in {}: {e}", dir.display()));
        if let Ok(mut started) = self.started.lock() {
            *started = Some(listening);
        }
    }

    /// The time the sandbox may wait for the trace's reader, once started.
    fn hold(&self) -> Option<Arc<TracerHold>> {
        match self.started.lock().ok()?.as_ref()? {
            Ok(trace) => Some(trace.hold()),
            Err(_) => None,
        }
    }
}

struct Lifecycle<'c, 'a> {
    context: &'c InvocationContext<'a>,
    name: &'c str,
    cgroup: Option<&'c InvocationCgroup>,
    events: &'c ContainerEvents,
    /// The kills progscore asked the engine for: any `kill` event beyond
    /// them came from someone else.
    kills_sent: std::sync::atomic::AtomicUsize,
    /// Whether stdin is attached (the engine then holds the output open
    /// until the container stopped).
    with_stdin: bool,
    /// The behaviour trace to start once the container's id is known.
    trace: Option<TraceSetup<'c>>,
    /// The OOM kills of the container's cgroups, watched from before its
    /// creation (`None`: not watched here).
    oom: Option<OomWatch>,
    /// The host's count of OOM kills before the container was created.
    host_oom_kills: Option<u64>,
}

/// The started container, as the shared window drives it.
impl Program for Lifecycle<'_, '_> {
    type Exit = ();
    type Fault = EngineFault;

    async fn wait(&self) -> Result<(), EngineFault> {
        wait_for_exit(self.context.docker, self.name)
            .await
            .map_err(|err| EngineFault::from(&format!("waiting for container {}", self.name), &err))
    }

    async fn ended(&self) -> Result<Option<()>, EngineFault> {
        let running = self.inspect().await?.state.and_then(|s| s.running);
        Ok((running == Some(false)).then_some(()))
    }

    async fn kill(&self) {
        self.send_kill().await;
    }

    async fn wait_killed(&self) -> Result<(), EngineFault> {
        self.step(
            "waiting for the killed",
            wait_for_exit(self.context.docker, self.name),
        )
        .await
    }

    async fn kill_cancelled(&self) {
        self.send_kill().await;
    }

    async fn output_ended(&self, ended: Result<(), String>) -> Result<(), String> {
        match ended {
            Ok(()) if self.with_stdin => self.stream_end_is_the_engines().await,
            other => other,
        }
    }

    fn output_fault(&self, message: String) -> EngineFault {
        EngineFault::plain(message)
    }

    fn paused(&self) -> bool {
        self.events.paused()
    }
}

impl Lifecycle<'_, '_> {
    /// Bounds one engine request by the engine timeout.
    async fn step<T>(
        &self,
        what: &str,
        request: impl std::future::Future<Output = Result<T, BollardError>>,
    ) -> Result<T, EngineFault> {
        let limit = self.context.options.engine_timeout;
        match tokio::time::timeout(limit, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => Err(EngineFault::from(
                &format!("{what} container {}", self.name),
                &err,
            )),
            Err(_) => Err(EngineFault {
                message: format!(
                    "{what} container {}: the engine did not answer within {limit:?}",
                    self.name
                ),
                transport: true,
                server_error: false,
                conflict: false,
            }),
        }
    }

    /// Create, attach, start; the program's window; the outcome.
    async fn drive(
        &self,
        body: bollard::models::ContainerCreateBody,
        stdin: Option<Vec<u8>>,
        stdout: &mut StreamCapture,
        stderr: &mut StreamCapture,
        alone: bool,
    ) -> Result<Observed, EngineFault> {
        let docker = self.context.docker;
        let token = self.context.token;
        let created = self
            .step(
                "creating",
                docker.create_container(
                    Some(CreateContainerOptionsBuilder::new().name(self.name).build()),
                    body,
                ),
            )
            .await?;
        if let Some(setup) = &self.trace {
            setup.start(&created.id);
        }
        // Attached before start, so no output is missed.
        let attach_options = AttachContainerOptionsBuilder::new()
            .stream(true)
            .stdin(stdin.is_some())
            .stdout(true)
            .stderr(true)
            .logs(false)
            .build();
        let attached = self
            .step(
                "attaching to",
                docker.attach_container(self.name, Some(attach_options)),
            )
            .await?;
        if token.is_cancelled() {
            return Ok(not_run());
        }
        // Nothing may happen to the container unseen: its `create` event
        // proves the subscription live. The engine published it before it
        // answered `create`, so it is due now; a stream that is slower only
        // leaves a SIGKILL unexplained (undetermined), so the program is
        // not held back for the whole engine timeout.
        let live_wait = self.context.options.engine_timeout.min(EVENTS_LIVE_WAIT);
        if !self.events.live(live_wait).await {
            tracing::debug!("the events of container {} are not watched", self.name);
        }
        self.step(
            "starting",
            docker.start_container(self.name, None::<StartContainerOptions>),
        )
        .await?;

        // The program's window: the timing rule, applied once for every
        // backend.
        let tracer = self.trace.as_ref().and_then(TraceSetup::hold);
        let limits = self.context.limits();
        let window = Window {
            name: self.name,
            limits,
            load: self.context.load,
            cpus: self.context.engine.cpus,
            alone,
            token,
            output_bound: self.context.options.engine_timeout,
            tracer: tracer.as_deref(),
        };
        let last_output = std::sync::Mutex::new(None::<Instant>);
        let io = feed_and_drain(attached, stdin, stdout, stderr, &last_output, self.name);
        let cgroup = self.cgroup.filter(|cgroup| cgroup.holds(&created.id));
        let measure = || Measured {
            cgroup,
            leaf: &created.id,
            cpu_at_start: cgroup.and_then(InvocationCgroup::cpu_usage),
            waits_at_start: cgroup.and_then(|cgroup| cgroup.sample_waits(&created.id)),
            // Under gVisor the cgroup's tasks are the sandbox's own.
            ended_tasks: if self.context.runtime == "runsc" {
                EndedTasks::Counted
            } else {
                EndedTasks::Unknown
            },
        };
        let mut watched = window.watch(self, measure, io, &last_output, None).await?;
        if watched.exit.is_none() {
            return Ok(not_run());
        }
        let measured = cgroup;

        let state = self.inspect().await?.state.unwrap_or_default();
        let killed_by_us = watched.killed.is_some();
        // Whose OOM killer it was (if any) is the cgroups' to tell, once
        // the engine's events are all in (`judge`).
        let engine_oom = state.oom_killed == Some(true);
        let outcome = if state.running == Some(true) {
            return Err(EngineFault::plain(format!(
                "container {} still running after the engine reported its end",
                self.name
            )));
        } else {
            match state.exit_code {
                Some(exit_code) => watched.outcome(exit_code),
                None => {
                    return Err(EngineFault::plain(format!(
                        "container {} has no exit code in its state",
                        self.name
                    )));
                }
            }
        };
        let unexplained_sigkill =
            !killed_by_us && matches!(outcome, Outcome::Exited { exit_code: 137 });
        let by_fair_time = watched.killed.as_ref().is_some_and(|k| k.by_fair_time);
        Ok(Observed {
            outcome,
            duration: watched.duration,
            usage: watched.usage,
            confirm: watched.confirm,
            unexplained_sigkill,
            by_fair_time,
            engine_oom,
            killed_at_limit: killed_by_us,
            oom: self
                .oom
                .as_ref()
                .filter(|_| measured.is_some())
                .map(OomWatch::read),
        })
    }

    /// The outcome as the engine's events explain it, once the container is
    /// gone (`seen` holds everything the engine reported about it): a kill
    /// progscore did not ask for is a sandbox fault, whatever the exit code
    /// says; an OOM kill is the memory cap's only when the cgroups show it
    /// was the container's own limit's (another OOM killer's is a sandbox
    /// fault); an exit code 137 progscore did not cause is the program's
    /// own when the events were watched throughout and show no kill and the
    /// host's OOM killer did not act meanwhile, and unknown otherwise.
    fn judge(&self, mut observed: Observed, seen: &Seen) -> Result<Observed, String> {
        let ours = self.kills_sent.load(std::sync::atomic::Ordering::SeqCst);
        if seen.kills.len() > ours {
            let signals: Vec<String> = seen.kills.iter().map(|s| format!("signal {s}")).collect();
            return Err(format!(
                "container {} was killed from outside progscore ({}; progscore sent {ours}): \
                 the program's outcome is unknown",
                self.name,
                signals.join(", ")
            ));
        }
        // A paused sandbox may not die of progscore's kill (a paused gVisor
        // sandbox refuses it) and run on once unpaused: an exit after the
        // kill at its limit is then not one before the limit.
        if seen.pauses > 0
            && observed.killed_at_limit
            && matches!(observed.outcome, Outcome::Exited { exit_code } if exit_code != 137)
        {
            return Err(format!(
                "container {} was paused from outside as progscore killed it at its limit, and \
                 it exited afterwards: whether it ended within its limit is unknown",
                self.name
            ));
        }
        // A pause the window could not place (the engine reports it after
        // the fact, and under gVisor no cgroup shows it) may have eaten the
        // time a fair-time proof counted as the program's.
        if seen.pauses > 0
            && observed.by_fair_time
            && let Outcome::TimedOut {
                unconfirmed: unconfirmed @ None,
                ..
            } = &mut observed.outcome
        {
            let why = format!(
                "container {} was paused from outside (docker pause) {} time(s) in its life, \
                 and its timeout rests on time the program may have spent frozen",
                self.name, seen.pauses
            );
            *unconfirmed = Some(why.clone());
            observed.confirm = Some(why);
        }
        // Only a kill at the program's own limit is its `memory_limit`:
        // the engine reports any OOM kill it hears of (containerd under
        // cgroup v2 counts every OOM killer's kills; under v1 an OOM of a
        // cgroup above the container's is notified to it too).
        let engine_oom = observed.engine_oom || seen.oom;
        let memory = match &observed.oom {
            Some(reading) => reading.verdict(engine_oom),
            None if engine_oom => MemoryKill::NotItsOwn(
                "the engine reports an OOM kill, and the container's cgroups cannot be read \
                 here to tell its own memory limit from the host's OOM killer"
                    .into(),
            ),
            None => MemoryKill::None,
        };
        match memory {
            MemoryKill::OwnLimit => {
                observed.outcome = Outcome::MemoryLimit;
                observed.confirm = None;
                return Ok(observed);
            }
            MemoryKill::NotItsOwn(why) => {
                return Err(format!(
                    "container {} was hit by an OOM killer that is not its own memory limit's: \
                     {why}; the program's outcome is unknown",
                    self.name
                ));
            }
            MemoryKill::None if engine_oom => {
                return Err(format!(
                    "the engine reports an OOM kill of container {} that its cgroups do not \
                     show: the program's outcome is unknown",
                    self.name
                ));
            }
            MemoryKill::None => {}
        }
        if observed.unexplained_sigkill {
            // A SIGKILL straight to a process bypasses the engine: the
            // host's OOM killer, acting while it ran, may have sent it.
            // Under cgroup v1 nothing left to read counts its kills of the
            // container's processes, so any OOM kill on the host meanwhile
            // (the host's count includes every cgroup's) leaves it unknown.
            let host_kills = host_oom_kills()
                .zip(self.host_oom_kills)
                .map(|(now, then)| now.saturating_sub(then));
            let v1_watch = observed
                .oom
                .as_ref()
                .is_some_and(|reading| !reading.counts_every_kill());
            if v1_watch && host_kills != Some(0) {
                return Err(format!(
                    "container {} ended with code 137 (a SIGKILL?) that progscore did not send, \
                     while the host's OOM killer {}: the program's outcome is unknown",
                    self.name,
                    match host_kills {
                        Some(kills) => format!("killed {kills} process(es)"),
                        None => "could not be watched".into(),
                    }
                ));
            }
            if !seen.complete() {
                let why = seen.broken.clone().unwrap_or_else(|| {
                    "its events were not seen from its creation to its removal".into()
                });
                return Err(format!(
                    "container {} ended with code 137 (a SIGKILL?) that progscore did not send, \
                     and the engine's events cannot say who sent it: {why}",
                    self.name
                ));
            }
        }
        Ok(observed)
    }

    /// Whether an attach stream that ended before the engine reported the
    /// exit was ended by the engine. With stdin attached (`StdinOnce`) the
    /// engine holds the stream open until the container stopped, so an end
    /// while it still runs was not the engine's: the connection was cut
    /// and what the program wrote after it is lost.
    async fn stream_end_is_the_engines(&self) -> Result<(), String> {
        let state = self
            .inspect()
            .await
            .map_err(|fault| fault.message)?
            .state
            .unwrap_or_default();
        if state.running == Some(true) {
            return Err(format!(
                "the output stream of container {} ended while the container still ran: \
                 the connection to the engine was cut and its output may be incomplete",
                self.name
            ));
        }
        Ok(())
    }

    async fn inspect(&self) -> Result<ContainerInspectResponse, EngineFault> {
        self.step(
            "inspecting",
            self.context
                .docker
                .inspect_container(self.name, None::<InspectContainerOptions>),
        )
        .await
    }

    async fn send_kill(&self) {
        self.kills_sent
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let options = KillContainerOptionsBuilder::new().signal("SIGKILL").build();
        if let Err(fault) = self
            .step(
                "killing",
                self.context.docker.kill_container(self.name, Some(options)),
            )
            .await
        {
            // Already exited or never started: removal still applies.
            tracing::debug!("{}", fault.message);
        }
    }

    async fn remove(&self) -> Result<(), EngineFault> {
        let limit = self.context.options.engine_timeout;
        match remove_container(self.context.docker, limit, self.name).await {
            // Someone else is removing it (`docker rm -f`): it is removed
            // once the engine destroyed it.
            Err(fault) if fault.conflict => {
                if self.events.settled(limit).await.destroyed {
                    Ok(())
                } else {
                    Err(fault)
                }
            }
            other => other,
        }
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
        unexplained_sigkill: false,
        by_fair_time: false,
        engine_oom: false,
        killed_at_limit: false,
        oom: None,
    }
}
