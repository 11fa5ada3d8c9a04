//! The container's own steps, each bounded by the engine timeout: create,
//! attach, start, the program's window as the shared `Window` drives it,
//! the state read once it ended, kill and removal.

use std::time::Duration;

use bollard::errors::Error as BollardError;
use bollard::models::ContainerInspectResponse;
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, InspectContainerOptions,
    KillContainerOptionsBuilder, StartContainerOptions,
};
use progscore_container::{EndedTasks, InvocationCgroup, Measured, OomWatch, Program, Window};
use progscore_sandbox::{Outcome, StreamCapture};
use tokio::time::Instant;

use super::context::{InvocationContext, Observed, not_run};
use super::trace_setup::TraceSetup;
use crate::events::ContainerEvents;
use crate::held::{EngineFault, remove_container};
use crate::streams::{Feed, feed_and_drain, wait_for_exit};

/// How long a program's start waits for the proof that the engine's events
/// about its container are watched.
const EVENTS_LIVE_WAIT: Duration = Duration::from_secs(10);
pub(super) struct Lifecycle<'c, 'a> {
    pub(super) context: &'c InvocationContext<'a>,
    pub(super) name: &'c str,
    pub(super) cgroup: Option<&'c InvocationCgroup>,
    pub(super) events: &'c ContainerEvents,
    /// The kills progscore asked the engine for: any `kill` event beyond
    /// them came from someone else.
    pub(super) kills_sent: std::sync::atomic::AtomicUsize,
    /// Whether stdin is attached (the engine then holds the output open
    /// until the container stopped).
    pub(super) with_stdin: bool,
    /// The behaviour trace to start once the container's id is known.
    pub(super) trace: Option<TraceSetup<'c>>,
    /// The OOM kills of the container's cgroups, watched from before its
    /// creation (`None`: not watched here).
    pub(super) oom: Option<OomWatch>,
    /// The host's count of OOM kills before the container was created.
    pub(super) host_oom_kills: Option<u64>,
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
    pub(super) async fn drive(
        &self,
        body: bollard::models::ContainerCreateBody,
        feed: Feed,
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
            .stdin(feed.is_open())
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
        let io = feed_and_drain(attached, feed, stdout, stderr, &last_output, self.name);
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

    pub(super) async fn remove(&self) -> Result<(), EngineFault> {
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
