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

mod context;
mod exit_status;
mod lifecycle;
mod provision;
mod streams;

pub(crate) use context::{ImageInUse, InvocationContext, InvocationResult, Next};
pub(crate) use provision::RUNTIME_MARKER;

use std::time::Duration;

use progscore_container::millis;
use progscore_sandbox::{
    Invocation, InvocationEvent, LiveCase, Outcome, Provenance, StreamCapture,
};
use progscore_trace::TracePlan;
use progscore_trace::gvisor_trace::GvisorTrace;
use progscore_trace::seccomp_trace::SeccompTrace;

use self::lifecycle::Lifecycle;
use self::provision::{Prepared, prepare, remove};
use self::streams::Feed;

/// How long the trace's stream may take to end once its sandbox is gone.
const TRACE_END_GRACE: Duration = Duration::from_secs(5);

/// Runs one invocation; `live`, a case of a conversation both sides began
/// (its stdin and stdout are the other side's).
pub(crate) async fn run(
    context: &InvocationContext<'_>,
    index: usize,
    invocation: &Invocation,
    live: Option<LiveCase>,
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
            let feed = match (live, &invocation.stdin) {
                (Some(live), _) => Feed::Live(live),
                (None, Some(stdin)) => Feed::Bytes(stdin.as_bytes().to_vec()),
                (None, None) => Feed::Closed,
            };
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
            let observed = lifecycle.drive(feed, &mut stdout, &mut stderr, alone).await;
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
