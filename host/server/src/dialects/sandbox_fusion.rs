//! SandboxFusion's dialect: `POST /run_code` and `GET /v1/ping`, in the
//! request and response shapes of the `sandbox-fusion` 0.3.7 client's
//! models (`RunCodeRequest`, `RunCodeResponse`, `CommandRunResult`), so
//! that its SDK and verl's `check_correctness` work by a change of URL.
//!
//! Status mapping (the three-valued verdict kept):
//! - anything that proves nothing about the program (a sandbox error, a
//!   case not run, a timeout the machine was too busy to prove, a sandbox
//!   that refused the run) is run again first (up to twice, alone); what
//!   is still unproven is `SandboxError` with HTTP 504, never `Failed` and
//!   never a 200: verl retries 504 and the SDK any other status, and the
//!   run is never stored as reusable evidence;
//! - a proven timeout is `TimeLimitExceeded` (`Failed`); a memory kill is
//!   `Finished` with return code 137 (`Failed`), as a killed process shows;
//! - a build that failed is `Failed` with `compile_result` and no
//!   `run_result`, as SandboxFusion reports a compile error;
//! - exit 0 is `Success`, any other exit `Failed`.
//!
//! Limits: `run_timeout` (seconds) is the run's wall-clock limit,
//! `memory_limit_MB` (MiB, -1 the profile's) its memory limit, and
//! `compile_timeout` (seconds) the compile's wall-clock limit for a profile
//! that compiles (ignored otherwise: the SDK sends it for every language);
//! each within `[serve]`'s maxima, else 400 naming the field.
//!
//! Files: `files` (relative path → base64) are placed beside the program,
//! in its folder (`/sandbox` on Docker and OCI, `/program` on WASI),
//! read-only, seen by the compile and the run; they key the evidence like
//! the program does. `fetch_files` is refused (400): the working folder is
//! a tmpfs that ends with the sandbox, and only output is kept.
//!
//! `execution_time` is the program's own wall time, from its start (no
//! container start-up or queue wait in it). Every response names its
//! observation in `X-Progscore-Observation` and where the evidence came
//! from (`ran`, `joined`, `stored`) in `X-Progscore-Evidence`. A request
//! that waited past `[serve] queue_wait` gets the same 504.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use progscore_sandbox::{
    ByteString, CapturedStream, InvalidFiles, InvocationEvent, Outcome, ProgramFiles,
};
use serde::{Deserialize, Serialize};

use crate::http::body::JsonBody;
use crate::http::error::ApiError;
use crate::jobs::execute::{
    ClientDeadline, Executed, JobError, LimitKey, LimitPart, LimitStage, Part, ProgramJob,
    RequestLimits, execute, name_evidence, size_value, time_value, unproven_reason,
};
use crate::state::AppState;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/run_code", post(run_code))
        .route("/v1/ping", get(ping))
}

/// `GET /v1/ping`: `"pong"`, as SandboxFusion answers.
async fn ping() -> axum::Json<&'static str> {
    axum::Json("pong")
}

/// `RunCodeRequest` (with verl's `memory_limit_MB`). Fields the client
/// models do not have are ignored, as SandboxFusion's own models do.
#[derive(Debug, Deserialize)]
struct RunCodeRequest {
    code: String,
    language: String,
    #[serde(default)]
    stdin: Option<String>,
    /// Seconds: the compile's wall-clock limit (profiles with a compile
    /// step; the SDK sends 10 for every language, so an interpreted
    /// profile ignores it).
    #[serde(default)]
    compile_timeout: Option<f64>,
    /// Seconds: each run's wall-clock limit.
    #[serde(default)]
    run_timeout: Option<f64>,
    /// MiB: the run's memory limit; -1 (verl's "none") is the profile's.
    #[serde(default, rename = "memory_limit_MB")]
    memory_limit_mb: Option<f64>,
    #[serde(default)]
    files: BTreeMap<String, Option<String>>,
    #[serde(default)]
    fetch_files: Vec<String>,
}

/// `RunStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
enum RunStatus {
    Success,
    Failed,
    SandboxError,
}

/// `CommandRunStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
enum CommandRunStatus {
    Finished,
    Error,
    TimeLimitExceeded,
}

/// `CommandRunResult`.
#[derive(Debug, Serialize)]
struct CommandRunResult {
    status: CommandRunStatus,
    execution_time: Option<f64>,
    cpu_time: Option<f64>,
    return_code: Option<i64>,
    stdout: Option<String>,
    stderr: Option<String>,
}

/// `RunCodeResponse`.
#[derive(Debug, Serialize)]
struct RunCodeResponse {
    status: RunStatus,
    message: String,
    compile_result: Option<CommandRunResult>,
    run_result: Option<CommandRunResult>,
    executor_pod_name: Option<String>,
    files: BTreeMap<String, String>,
}

impl RunCodeResponse {
    fn sandbox_error(message: String) -> RunCodeResponse {
        RunCodeResponse {
            status: RunStatus::SandboxError,
            message,
            compile_result: None,
            run_result: None,
            executor_pod_name: None,
            files: BTreeMap::new(),
        }
    }
}

/// `POST /run_code`.
async fn run_code(
    State(state): State<Arc<AppState>>,
    JsonBody(request): JsonBody<RunCodeRequest>,
) -> Response {
    let Some(profile) = state.language_profile(&request.language) else {
        return ApiError::bad_field(
            "language",
            format!(
                "`{}` is not configured here (configured: {})",
                request.language,
                state.languages().join(", ")
            ),
        )
        .into_response();
    };
    if !request.fetch_files.is_empty() {
        return ApiError::bad_field(
            "fetch_files",
            "fetching files back is not supported: a program's working folder is a tmpfs that ends with its sandbox, and progscore keeps only what the program printed (print what you need)",
        )
        .into_response();
    }
    let files = match program_files(&request.files) {
        Ok(files) => files,
        Err(error) => return error.into_response(),
    };
    if let Some((served, _)) = state.served(profile)
        && let Err(invalid) = files.check_for(served)
    {
        return files_refusal(&invalid).into_response();
    }
    let compiles = state
        .served(profile)
        .is_some_and(|(served, _)| served.compile.is_some());
    let request_timeouts = (request.compile_timeout, request.run_timeout);
    let limits = match request_limits(&request, compiles) {
        Ok(limits) => limits,
        Err(error) => return error.into_response(),
    };
    let job = ProgramJob::run_once(
        request.code.into_bytes(),
        profile,
        Vec::new(),
        request.stdin.map(String::into_bytes),
    )
    .with_limits(limits)
    .with_files(files)
    .with_deadline(client_deadline(&request_timeouts, compiles));
    let field = |part: Part| match part {
        Part::Program => "code".to_string(),
        Part::Invocations | Part::Args(_) => "language".to_string(),
        Part::Stdin(_) => "stdin".to_string(),
        Part::Limit(limit) => limit_field(limit).to_string(),
    };
    match execute(&state, job, &field).await {
        Ok(executed) => respond(&executed),
        Err(JobError::Invalid(error)) => error.into_response(),
        Err(JobError::Busy { profile, refusal }) => {
            retried(RunCodeResponse::sandbox_error(refusal.message(&profile)))
        }
        Err(JobError::Refused { message, .. }) => retried(RunCodeResponse::sandbox_error(format!(
            "the sandbox could not run the program: {message}"
        ))),
        Err(JobError::Cancelled) => retried(RunCodeResponse::sandbox_error(
            "the server is shutting down; the program was not run to its end".into(),
        )),
        Err(JobError::Internal {
            incident: message, ..
        }) => retried(RunCodeResponse::sandbox_error(format!(
            "progscore failed: {message}"
        ))),
    }
}

/// An answer that says nothing of the program, in the form its clients
/// retry: 504 (verl's `check_correctness` retries only that; the
/// sandbox-fusion SDK retries any status but 200, and a `SandboxError`
/// body too). Never a 200, which verl would read as a failed test.
fn retried(body: RunCodeResponse) -> Response {
    (StatusCode::GATEWAY_TIMEOUT, axum::Json(body)).into_response()
}

/// `files` (relative path → base64; `null` an empty file) as the files
/// placed beside the program, in its folder.
fn program_files(files: &BTreeMap<String, Option<String>>) -> Result<ProgramFiles, ApiError> {
    let mut decoded = Vec::with_capacity(files.len());
    for (path, content) in files {
        let bytes = match content {
            None => Vec::new(),
            Some(text) => BASE64.decode(text).map_err(|e| {
                ApiError::bad_field(format!("files.{path}"), format!("not base64: {e}"))
            })?,
        };
        decoded.push((path.clone(), ByteString(bytes)));
    }
    ProgramFiles::new(decoded).map_err(|invalid| files_refusal(&invalid))
}

/// A 400 naming the file at fault (`files.PATH`), or `files`.
fn files_refusal(invalid: &InvalidFiles) -> ApiError {
    let field = invalid
        .path()
        .map_or_else(|| "files".to_string(), |path| format!("files.{path}"));
    ApiError::bad_field(field, invalid.to_string())
}

/// The request's own limits: `run_timeout` (seconds) the run's wall-clock
/// limit, `memory_limit_MB` (MiB; -1 the profile's) its memory, and
/// `compile_timeout` (seconds) the compile's, for a profile that compiles.
fn request_limits(request: &RunCodeRequest, compiles: bool) -> Result<RequestLimits, ApiError> {
    let mut limits = RequestLimits::default();
    if let Some(seconds) = request.run_timeout {
        let value = time_value(seconds, 1000.0, "seconds")
            .map_err(|why| ApiError::bad_field("run_timeout", why.to_string()))?;
        limits.set_timeout(LimitStage::Run, value);
    }
    if let Some(seconds) = request.compile_timeout
        && compiles
    {
        let value = time_value(seconds, 1000.0, "seconds")
            .map_err(|why| ApiError::bad_field("compile_timeout", why.to_string()))?;
        limits.set_timeout(LimitStage::Compile, value);
    }
    // -1: verl's "no limit of its own", the profile's.
    if let Some(mib) = request.memory_limit_mb.filter(|mib| *mib != -1.0) {
        let value = size_value(mib, MIB, "MiB (or -1 for the profile's)")
            .map_err(|why| ApiError::bad_field("memory_limit_MB", why.to_string()))?;
        limits.set_memory(LimitStage::Run, value);
    }
    Ok(limits)
}

/// How long verl's `check_correctness` waits for an answer beyond the
/// request's own timeouts (its `compile_timeout + run_timeout + 10` s).
const VERL_ANSWER_SLACK: std::time::Duration = std::time::Duration::from_secs(10);

/// When a client that sent `(compile_timeout, run_timeout)` stops waiting,
/// as verl computes it; `None` without a `run_timeout` (the SDK's own
/// callers wait as long as they were told).
fn client_deadline(
    (compile_timeout, run_timeout): &(Option<f64>, Option<f64>),
    compiles: bool,
) -> Option<ClientDeadline> {
    let seconds =
        |value: &Option<f64>| value.and_then(|s| std::time::Duration::try_from_secs_f64(s).ok());
    let run = seconds(run_timeout)?;
    let compile = seconds(compile_timeout).unwrap_or_default();
    Some(ClientDeadline {
        answer_by: std::time::Instant::now().checked_add(compile + run + VERL_ANSWER_SLACK)?,
        compile_budget: if compiles {
            compile
        } else {
            std::time::Duration::ZERO
        },
        case_budget: run,
    })
}

/// Bytes in one of `memory_limit_MB`'s units.
const MIB: f64 = (1u64 << 20) as f64;

/// The request field a limit came from.
fn limit_field(limit: LimitPart) -> &'static str {
    match (limit.stage, limit.key) {
        (LimitStage::Compile, _) => "compile_timeout",
        (LimitStage::Run, LimitKey::Memory) => "memory_limit_MB",
        (LimitStage::Run, _) => "run_timeout",
    }
}

/// The response for a run, with the observation named in headers: a run
/// that still proves nothing after its reruns goes out as [`retried`].
fn respond(executed: &Executed) -> Response {
    let body = map_run(executed);
    let mut response = if body.status == RunStatus::SandboxError {
        retried(body)
    } else {
        axum::Json(body).into_response()
    };
    name_evidence(&mut response, executed);
    response
}

/// SandboxFusion's view of a run (see the module doc for the mapping).
fn map_run(executed: &Executed) -> RunCodeResponse {
    let run = &executed.observation.run;
    let observation = &executed.observation.id;
    let compile_result = run.compile.as_ref().map(|c| command_result(&c.event));
    if let Some(compile) = &run.compile
        && compile.event.outcome.is_unproven()
    {
        return RunCodeResponse {
            compile_result,
            ..RunCodeResponse::sandbox_error(format!(
                "{} (observation {observation})",
                unproven_reason(&compile.event.outcome, "the compile")
            ))
        };
    }
    let Some(event) = executed.event() else {
        return RunCodeResponse::sandbox_error(format!(
            "the run has no event (observation {observation})"
        ));
    };
    if let Outcome::CompileError { reason } = &event.outcome {
        return RunCodeResponse {
            status: RunStatus::Failed,
            message: reason.clone(),
            compile_result,
            run_result: None,
            executor_pod_name: None,
            files: BTreeMap::new(),
        };
    }
    if event.outcome.is_unproven() {
        return RunCodeResponse {
            compile_result,
            ..RunCodeResponse::sandbox_error(format!(
                "{} (observation {observation})",
                unproven_reason(&event.outcome, "the program")
            ))
        };
    }
    let run_result = command_result(event);
    let (status, message) = match &event.outcome {
        Outcome::Exited { exit_code: 0 } => (RunStatus::Success, String::new()),
        Outcome::Exited { exit_code } => (
            RunStatus::Failed,
            format!("the program exited with code {exit_code}"),
        ),
        Outcome::TimedOut { .. } => (RunStatus::Failed, "the program timed out".into()),
        Outcome::MemoryLimit => (
            RunStatus::Failed,
            "the program exceeded its memory limit and was killed".into(),
        ),
        // Unproven and compile outcomes were answered above.
        other => (RunStatus::SandboxError, other.kind().to_string()),
    };
    let mut message = message;
    for (name, stream) in [("stdout", &event.stdout), ("stderr", &event.stderr)] {
        if stream.truncated {
            let note = format!(
                "{name} truncated: {} of {} bytes kept (the profile's output limit)",
                stream.data.0.len(),
                stream.total_bytes
            );
            message = if message.is_empty() {
                note
            } else {
                format!("{message}; {note}")
            };
        }
    }
    RunCodeResponse {
        status,
        message,
        compile_result,
        run_result: Some(run_result),
        executor_pod_name: None,
        files: BTreeMap::new(),
    }
}

/// One command's result: its status, its own time, its output.
fn command_result(event: &InvocationEvent) -> CommandRunResult {
    let (status, return_code) = match &event.outcome {
        Outcome::Exited { exit_code } => (CommandRunStatus::Finished, Some(*exit_code)),
        Outcome::TimedOut { .. } => (CommandRunStatus::TimeLimitExceeded, None),
        // What a process killed by SIGKILL shows.
        Outcome::MemoryLimit => (CommandRunStatus::Finished, Some(137)),
        _ => (CommandRunStatus::Error, None),
    };
    let text = |stream: &CapturedStream| String::from_utf8_lossy(&stream.data.0).into_owned();
    CommandRunResult {
        status,
        execution_time: Some(event.duration_ms as f64 / 1000.0),
        cpu_time: event
            .usage
            .as_ref()
            .and_then(|u| u.cpu_ms)
            .map(|ms| ms as f64 / 1000.0),
        return_code,
        stdout: Some(text(&event.stdout)),
        stderr: Some(text(&event.stderr)),
    }
}
