//! One job as one run of its own: a turn in the profile's queue, then the
//! runtime's scorer for the attempt's evidence (stored evidence reused, a
//! run in flight joined, else a run, stored with its score). The score is
//! "every invocation exits 0" unless the job brings its expectation; the
//! job's own limits go on it, so they are part of the attempt (identical
//! limits reuse the evidence, other limits run again).
//!
//! The run is a task of the server, not of the connection: a client that
//! goes away cancels it (dropping [`run_alone`]'s future cancels the run's
//! token), and the task still waits for the sandbox's cleanup.

use std::sync::Arc;

use progscore_sandbox::{CaseSink, Invocation, RuntimeProfile, SandboxError};
use progscore_scoring::{ProgramInput, ScoreRequest, ScoringError, ScoringExpectation};

use crate::http::error::ApiError;
use crate::jobs::job::{Executed, JobError, Part, ProgramJob, check_job};
use crate::jobs::queue::{ProfileQueue, QueueRefusal};
use crate::state::AppState;

/// The checks every job passes before it runs, alone or gathered: the
/// server is not draining, the job's profile is served here, and the job is
/// within the served maxima and the profile's delivery limits. The served
/// profile and its queue.
pub(crate) fn admit<'s>(
    state: &'s AppState,
    job: &ProgramJob,
    field: &(dyn Fn(Part) -> String + Sync),
) -> Result<(&'s RuntimeProfile, &'s ProfileQueue), JobError> {
    if state.is_draining() {
        return Err(JobError::Cancelled);
    }
    let Some((profile, queue)) = state.served(&job.profile) else {
        return Err(JobError::Invalid(ApiError::bad_field(
            field(Part::Program),
            format!(
                "profile `{}` is not served here (served: {})",
                job.profile,
                state.served_names().join(", ")
            ),
        )));
    };
    check_job(state.settings(), profile, job, field).map_err(JobError::Invalid)?;
    Ok((profile, queue))
}

/// Runs `job` as one run of its own.
pub(crate) async fn run_alone(
    state: &Arc<AppState>,
    job: ProgramJob,
    field: &(dyn Fn(Part) -> String + Sync),
) -> Result<Executed, JobError> {
    run_alone_telling(state, job, field, None).await
}

/// [`run_alone`], telling each case's event to `on_case` as the backend
/// decides it (a gathered run answers its requests from them).
pub(crate) async fn run_alone_telling(
    state: &Arc<AppState>,
    job: ProgramJob,
    field: &(dyn Fn(Part) -> String + Sync),
    on_case: Option<CaseSink>,
) -> Result<Executed, JobError> {
    let (profile, queue) = admit(state, &job, field)?;
    let asked = std::time::Instant::now();
    let wait = job
        .deadline
        .map_or(state.settings().queue_wait, |deadline| {
            deadline.may_wait(job.invocations.len())
        });
    // A drain that begins while this waits for a turn ends the wait: the
    // turn could only come after the server stopped taking work.
    let turn = tokio::select! {
        turn = queue.turn_within(wait) => turn,
        () = state.drain_begun() => return Err(JobError::Cancelled),
    };
    let busy = |refusal: QueueRefusal| {
        state.metrics().queue_refusal(&job.profile, refusal.kind());
        JobError::Busy {
            profile: job.profile.clone(),
            refusal,
        }
    };
    let turn = turn.map_err(busy)?;
    // Its memory limit, out of the budget, for as long as it runs.
    let needed = memory_needed(profile, &job);
    let memory = state.memory_budget();
    let share = tokio::select! {
        share = memory.share(needed, wait.saturating_sub(asked.elapsed())) => share,
        () = state.drain_begun() => return Err(JobError::Cancelled),
    };
    let share = share.ok_or_else(|| {
        busy(QueueRefusal::Memory {
            needed,
            budget: memory.total(),
        })
    })?;
    state.metrics().turn(&job.profile, asked.elapsed());
    let profile_name = job.profile.clone();
    let expectation = expectation_of(&job)?;
    let cancel = state.run_token();
    // Dropping this future (the client went away) cancels the run; the task
    // below still waits for its cleanup.
    let _cancel_on_drop = cancel.clone().drop_guard();
    let mut request = ScoreRequest::new(ProgramInput::Inline(job.program), expectation)
        .fresh(job.fresh || state.settings().fresh)
        .cancel(cancel);
    request.item_id = job.item_id;
    request.on_case = on_case;
    let task = state.tracker().spawn({
        let state = state.clone();
        async move {
            let _turn = turn;
            let _share = share;
            let started = std::time::Instant::now();
            let scored = state.scorer().score_observed(request).await?;
            state.metrics().scored(&scored.score, started.elapsed());
            Ok::<_, ScoringError>(Executed {
                score: scored.score,
                observation: Arc::unwrap_or_clone(scored.observation),
            })
        }
    });
    match task.await {
        Ok(Ok(executed)) => Ok(executed),
        Ok(Err(ScoringError::Cancelled)) => Err(JobError::Cancelled),
        Ok(Err(ScoringError::Refused(error))) => {
            state.metrics().sandbox_refusal(&profile_name);
            tracing::warn!(profile = %profile_name, %error, "the sandbox refused a run");
            Err(JobError::Refused {
                message: for_clients(&error),
                engine_gone: matches!(error, SandboxError::EngineUnavailable { .. }),
            })
        }
        Ok(Err(ScoringError::Store(error))) if error.is_store_fault() => {
            Err(JobError::store_failed(error))
        }
        Ok(Err(error)) => Err(JobError::internal(error.to_string())),
        Err(join) => Err(JobError::internal(format!("the run's task failed: {join}"))),
    }
}

/// What `job` is scored against: its own expectation (a native item's,
/// which carries its limits and files already), else "every invocation
/// exits 0" under the job's limits, with its files.
pub(crate) fn expectation_of(job: &ProgramJob) -> Result<ScoringExpectation, JobError> {
    match &job.expectation {
        Some(expectation) => Ok(expectation.clone()),
        None => Ok(exits_zero(&job.profile, &job.invocations)
            .map_err(|e| JobError::internal(format!("cannot build the expectation: {e}")))?
            .with_limits(job.limits.run.clone(), job.limits.compile.clone())
            .with_files(job.files.clone())),
    }
}

/// "Every invocation exits 0": the score a run-and-report request stores.
fn exits_zero(
    profile: &str,
    invocations: &[Invocation],
) -> Result<ScoringExpectation, serde_json::Error> {
    let cases: Vec<serde_json::Value> = invocations
        .iter()
        .map(|invocation| serde_json::json!({"invocation": invocation, "expected": {}}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "conditions": [{"program_behaves": {"profile": profile, "cases": cases}}]
    }))
}

/// What a client is told of a sandbox's refusal: what kind of fault it is,
/// never the host's paths, the engine's endpoint or its own words (which
/// name both); the server's log has those.
fn for_clients(error: &SandboxError) -> String {
    match error {
        SandboxError::EngineUnavailable { .. } => "the sandbox engine is not reachable".into(),
        SandboxError::EngineUnsupported { missing, .. } => {
            format!("the sandbox engine cannot enforce {missing}")
        }
        SandboxError::ArtifactMissing { profile, .. } => {
            format!("profile `{profile}`: its image is not present")
        }
        SandboxError::ArtifactRefused { profile, .. } => {
            format!("profile `{profile}`: its image was refused")
        }
        SandboxError::RuntimeMissing { .. } => "the profile's runtime is not installed".into(),
        SandboxError::Setup { .. } => "the sandbox could not be set up".into(),
        SandboxError::Remote { .. } => "the node that runs the program failed".into(),
        // About the request itself, in the client's own terms.
        SandboxError::UnknownProfile { .. }
        | SandboxError::WrongBackend { .. }
        | SandboxError::InvalidInvocation(_)
        | SandboxError::NotAVariant { .. }
        | SandboxError::InvalidFiles(_)
        | SandboxError::FilesUnsupported { .. }
        | SandboxError::InteractiveUnsupported { .. } => error.to_string(),
    }
}

/// The most memory `job`'s run may use at once: its memory limit, or its
/// compile's when that is larger (they run one after another), with the
/// job's own limits applied.
fn memory_needed(profile: &RuntimeProfile, job: &ProgramJob) -> u64 {
    let variant = profile
        .with_limits(job.limits.run.as_ref(), job.limits.compile.as_ref())
        .unwrap_or_else(|_| profile.clone());
    let compile = variant
        .compile
        .as_ref()
        .map_or(0, |compile| compile.limits.memory_bytes);
    variant.limits.memory_bytes.max(compile)
}
