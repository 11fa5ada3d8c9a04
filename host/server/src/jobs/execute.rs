//! The one path every dialect runs programs through: "run this program for
//! these invocations under this profile". A job runs alone ([`crate::jobs::run`])
//! or, when it is one case of a compiled program, as a case of a run
//! gathered with others of the same program ([`crate::jobs::gather`]). And what
//! every dialect's answer says of the evidence: the headers naming the
//! observation, and why an unproven outcome proves nothing.

use std::sync::Arc;
use std::time::Duration;

// What a dialect hands over and gets back, beside the call that runs it.
pub use crate::jobs::job::{ClientDeadline, Executed, JobError, Part, ProgramJob, check_job};
pub use crate::jobs::limits::{
    LimitKey, LimitPart, LimitStage, RequestLimits, size_value, time_value,
};
use crate::state::AppState;

/// The pauses before each run again of a request whose run proved nothing
/// for a reason of the sandbox's (a sandbox error, a case not run, an
/// unproven timeout, the sandbox refusing the run): an engine restarting
/// or a container struck from outside is usually over by then. Bounded, so
/// a server whose engine is gone answers in seconds, in the form each
/// dialect's clients retry.
const RERUN_PAUSES: [Duration; 2] = [Duration::from_millis(500), Duration::from_secs(2)];

/// Runs `job` (see the module doc); `field` names its parts for errors.
/// A single-case request for a compiled program may run as a case of a run
/// gathered with others of the same program ([`crate::jobs::gather`]). A run that
/// proved nothing for the sandbox's reasons is run again, alone, up to
/// twice ([`RERUN_PAUSES`]); what is still unproven after that is the
/// answer, which each dialect gives in the form its clients retry.
pub async fn execute(
    state: &Arc<AppState>,
    job: ProgramJob,
    field: &(dyn Fn(Part) -> String + Sync),
) -> Result<Executed, JobError> {
    let mut outcome = if crate::jobs::gather::gathers(state, &job) {
        crate::jobs::gather::execute_gathered(state, job.clone(), field).await
    } else {
        crate::jobs::run::run_alone(state, job.clone(), field).await
    };
    for pause in RERUN_PAUSES {
        if !proves_nothing(&outcome) || state.is_draining() {
            break;
        }
        // A rerun its client would not wait for helps nobody.
        if job
            .deadline
            .is_some_and(|deadline| deadline.may_wait(job.invocations.len()) <= pause)
        {
            break;
        }
        state.metrics().rerun(&job.profile);
        tokio::time::sleep(pause).await;
        outcome = crate::jobs::run::run_alone(state, job.clone(), field).await;
    }
    outcome
}

/// Whether `outcome` says nothing of the program for a reason of the
/// sandbox's: worth running again. A busy queue is not (its client is told
/// to come back), nor a bad request, nor a drain.
fn proves_nothing(outcome: &Result<Executed, JobError>) -> bool {
    match outcome {
        Ok(executed) => executed.proves_nothing(),
        Err(JobError::Refused { .. }) => true,
        Err(_) => false,
    }
}

/// The header naming the observation a response rests on.
pub const OBSERVATION_HEADER: &str = "x-progscore-observation";
/// The header saying whether the program ran, joined a run, or was stored.
pub const EVIDENCE_HEADER: &str = "x-progscore-evidence";

/// Names the run's observation and where its evidence came from in the
/// response's headers (what every compatible dialect's answer carries).
pub fn name_evidence(response: &mut axum::response::Response, executed: &Executed) {
    use axum::http::HeaderValue;
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&executed.observation.id) {
        headers.insert(OBSERVATION_HEADER, value);
    }
    let evidence = serde_json::to_value(executed.score.evidence)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    if let Ok(value) = HeaderValue::from_str(&evidence) {
        headers.insert(EVIDENCE_HEADER, value);
    }
}

/// Why an unproven outcome of `what` ("the program", "the compile")
/// proves nothing, for a dialect's message.
pub fn unproven_reason(outcome: &progscore_sandbox::Outcome, what: &str) -> String {
    use progscore_sandbox::Outcome;
    match outcome {
        Outcome::SandboxError { message } => format!("{what} hit a sandbox error: {message}"),
        Outcome::NotRun { reason } => format!("{what} was not run: {reason}"),
        Outcome::TimedOut {
            unconfirmed: Some(why),
            ..
        } => format!("{what} timed out, but the timeout is not proven: {why}"),
        other => format!("{what}: {}", other.kind()),
    }
}
