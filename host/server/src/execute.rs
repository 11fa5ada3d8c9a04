//! The one path every dialect runs programs through: "run this program for
//! these invocations under this profile". Checks the request against the
//! served maxima and the profile's delivery limits, takes a turn in the
//! profile's queue, then asks the runtime's scorer for the attempt's
//! evidence (stored evidence reused, a run in flight joined, else a run,
//! stored with its score). The score is "every invocation exits 0", which is
//! what the run-and-report dialects call success.
//!
//! The run is a task of the server, not of the connection: a client that
//! goes away cancels it (dropping [`execute`]'s future cancels the run's
//! token), and the task still waits for the sandbox's cleanup.

use std::sync::Arc;

use progscore_runtime::serve::ServeSettings;
use progscore_sandbox::{Invocation, RuntimeProfile};
use progscore_scoring::evidence::Observation;
use progscore_scoring::{ProgramInput, Score, ScoreRequest, ScoringError, ScoringExpectation};

use crate::error::ApiError;
use crate::queue::QueueRefusal;
use crate::state::AppState;

/// What to run.
#[derive(Debug, Clone)]
pub struct ProgramJob {
    /// The program's bytes, run verbatim.
    pub program: Vec<u8>,
    /// The profile (already resolved from the dialect's language name).
    pub profile: String,
    /// One sandbox per invocation, in order.
    pub invocations: Vec<Invocation>,
    /// Run again even if the attempt's evidence is stored.
    pub fresh: bool,
    /// What to score the run against (its profile and invocations must be
    /// the job's); `None`: "every invocation exits 0".
    pub expectation: Option<ScoringExpectation>,
    /// The caller's item id, recorded with the score.
    pub item_id: Option<String>,
}

/// What came of it.
#[derive(Debug, Clone)]
pub struct Executed {
    /// The score "every invocation exits 0" (its `evidence` says whether the
    /// run was `ran`, `joined` or `stored`).
    pub score: Score,
    /// The observation the score rests on.
    pub observation: Observation,
    /// Which of the run's events is this request's: 0, or its place in a
    /// run gathered from several requests (see [`crate::gather`]).
    pub case: usize,
}

impl Executed {
    /// This request's event in the run.
    pub fn event(&self) -> Option<&progscore_sandbox::InvocationEvent> {
        self.observation.run.events.get(self.case)
    }
}

/// Why a job was not run, as the dialect must tell it.
#[derive(Debug, Clone)]
pub enum JobError {
    /// The request itself is wrong (a field named): a 4xx.
    Invalid(ApiError),
    /// No turn in the profile's queue: the dialect's overload answer.
    Busy {
        /// Which profile.
        profile: String,
        /// How.
        refusal: QueueRefusal,
    },
    /// The sandbox refused the run before anything ran (engine away...):
    /// nothing is known of the program.
    Refused(String),
    /// Cancelled: the server is draining.
    Cancelled,
    /// A fault of the server's own parts (the store).
    Internal(String),
}

impl JobError {
    /// The default answer; dialects map `Busy` and `Refused` their own way.
    pub fn into_api_error(self) -> ApiError {
        match self {
            JobError::Invalid(error) => error,
            JobError::Busy { profile, refusal } => ApiError {
                status: axum::http::StatusCode::TOO_MANY_REQUESTS,
                message: refusal.message(&profile),
                field: None,
                retry_after: Some(std::time::Duration::from_secs(1)),
            },
            JobError::Refused(message) => ApiError {
                status: axum::http::StatusCode::SERVICE_UNAVAILABLE,
                message: format!("the sandbox could not run the program: {message}"),
                field: None,
                retry_after: Some(std::time::Duration::from_secs(5)),
            },
            JobError::Cancelled => ApiError::draining(),
            JobError::Internal(message) => ApiError::internal(message),
        }
    }
}

/// Checks a job against the served maxima and the profile's delivery
/// limits; `field` names a job's parts as the dialect spells them.
pub fn check_job(
    settings: &ServeSettings,
    profile: &RuntimeProfile,
    job: &ProgramJob,
    field: &(dyn Fn(Part) -> String + Sync),
) -> Result<(), ApiError> {
    let code = job.program.len() as u64;
    if code > settings.max_code {
        return Err(ApiError::too_large(
            field(Part::Program),
            code,
            settings.max_code,
        ));
    }
    if job.invocations.is_empty() {
        return Err(ApiError::bad_field(
            field(Part::Invocations),
            "give at least one invocation",
        ));
    }
    if job.invocations.len() > settings.max_invocations {
        return Err(ApiError::bad_field(
            field(Part::Invocations),
            format!(
                "{} invocations; this server accepts at most {} in one run ([serve] max_invocations)",
                job.invocations.len(),
                settings.max_invocations
            ),
        )
        .with_status(axum::http::StatusCode::PAYLOAD_TOO_LARGE));
    }
    for (index, invocation) in job.invocations.iter().enumerate() {
        let stdin = invocation.stdin.as_ref().map_or(0, |s| s.0.len()) as u64;
        if stdin > settings.max_stdin {
            return Err(ApiError::too_large(
                field(Part::Stdin(index)),
                stdin,
                settings.max_stdin,
            ));
        }
    }
    profile.check_invocations(&job.invocations).map_err(|bad| {
        let part = if bad.error.field.starts_with("stdin") {
            Part::Stdin(bad.index)
        } else {
            Part::Args(bad.index)
        };
        ApiError::bad_field(field(part), bad.error.message.clone())
    })
}

/// A part of a job, for naming it in the dialect's own field names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The program.
    Program,
    /// The invocations as a whole.
    Invocations,
    /// Invocation N's arguments.
    Args(usize),
    /// Invocation N's stdin.
    Stdin(usize),
}

/// Runs `job` (see the module doc); `field` names its parts for errors.
/// A single-case request for a compiled program may run as a case of a run
/// gathered with others of the same program ([`crate::gather`]).
pub async fn execute(
    state: &Arc<AppState>,
    job: ProgramJob,
    field: &(dyn Fn(Part) -> String + Sync),
) -> Result<Executed, JobError> {
    if crate::gather::gathers(state, &job) {
        return crate::gather::execute_gathered(state, job, field).await;
    }
    execute_alone(state, job, field).await
}

/// Runs `job` as one run of its own.
pub(crate) async fn execute_alone(
    state: &Arc<AppState>,
    job: ProgramJob,
    field: &(dyn Fn(Part) -> String + Sync),
) -> Result<Executed, JobError> {
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
    check_job(state.settings(), profile, &job, field).map_err(JobError::Invalid)?;
    let asked = std::time::Instant::now();
    let turn = queue.turn().await.map_err(|refusal| {
        state
            .metrics()
            .queue_refusal(&job.profile, matches!(refusal, QueueRefusal::Full { .. }));
        JobError::Busy {
            profile: job.profile.clone(),
            refusal,
        }
    })?;
    state.metrics().turn(&job.profile, asked.elapsed());
    let profile_name = job.profile.clone();
    let expectation = match job.expectation {
        Some(expectation) => expectation,
        None => exits_zero(&job.profile, &job.invocations)
            .map_err(|e| JobError::Internal(format!("cannot build the expectation: {e}")))?,
    };
    let cancel = state.run_token();
    // Dropping this future (the client went away) cancels the run; the task
    // below still waits for its cleanup.
    let _cancel_on_drop = cancel.clone().drop_guard();
    let mut request = ScoreRequest::new(ProgramInput::Inline(job.program), expectation)
        .fresh(job.fresh || state.settings().fresh)
        .cancel(cancel);
    request.item_id = job.item_id;
    let task = state.tracker().spawn({
        let state = state.clone();
        async move {
            let _turn = turn;
            let started = std::time::Instant::now();
            let score = state.scorer().score(request).await?;
            state.metrics().scored(&score, started.elapsed());
            let id = score.observation_ids.first().cloned().unwrap_or_default();
            let observation = state
                .session()
                .store
                .observation(&id)?
                .ok_or_else(|| ScoringError::RunLost(format!("observation {id} not stored")))?;
            Ok::<_, ScoringError>(Executed {
                score,
                observation,
                case: 0,
            })
        }
    });
    match task.await {
        Ok(Ok(executed)) => Ok(executed),
        Ok(Err(ScoringError::Cancelled)) => Err(JobError::Cancelled),
        Ok(Err(ScoringError::Refused(error))) => {
            state.metrics().sandbox_refusal(&profile_name);
            Err(JobError::Refused(error.to_string()))
        }
        Ok(Err(error)) => Err(JobError::Internal(error.to_string())),
        Err(join) => Err(JobError::Internal(format!("the run's task failed: {join}"))),
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
