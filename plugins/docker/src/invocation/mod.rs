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
//! The order of these steps and what each failure means is the backend's
//! core: [`run`] below reads it top-down, the container's own steps (create,
//! attach, start, the window, kill, removal) are in `lifecycle`, and what the
//! engine's events say of the outcome is in `judge`.

mod context;
mod judge;
mod lifecycle;
mod trace_setup;

pub(crate) use context::{InvocationContext, InvocationResult, Next};

use std::collections::HashMap;
use std::time::Duration;

use progscore_container::{InvocationCgroup, host_oom_kills};
use progscore_sandbox::{Invocation, InvocationEvent, Outcome, Provenance, StreamCapture};
use progscore_trace::TracePlan;

use self::lifecycle::Lifecycle;
use self::trace_setup::TraceSetup;
use crate::container::{Placement, container_spec};
use crate::delivery::Files;
use crate::events::ContainerEvents;
use crate::held::Leftover;
use crate::options::OWNER_LABEL;
use crate::streams::Feed;

/// How long the trace's stream may take to end once its container is gone.
const TRACE_END_GRACE: Duration = Duration::from_secs(5);
pub(crate) async fn run(
    context: &InvocationContext<'_>,
    index: usize,
    invocation: &Invocation,
    alone: bool,
) -> InvocationResult {
    // A case of a conversation starts once the other side reached it too.
    let live = match context.conversation {
        Some(side) if context.stage == progscore_sandbox::Stage::Case => {
            match side.begin(index).await {
                Ok(live) => Some(live),
                Err(why) => {
                    return InvocationResult {
                        event: InvocationEvent::not_run(why.clone()),
                        warnings: Vec::new(),
                        next: Next::Stop(why),
                        leftover: None,
                    };
                }
            }
        }
        _ => None,
    };
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
    let feed = match (live, &invocation.stdin) {
        (Some(live), _) => Feed::Live(live),
        (None, Some(stdin)) => Feed::Bytes(stdin.as_bytes().to_vec()),
        (None, None) => Feed::Closed,
    };
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
        feed.is_open(),
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
        with_stdin: feed.is_open(),
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
        .drive(spec.body, feed, &mut stdout, &mut stderr, alone)
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
