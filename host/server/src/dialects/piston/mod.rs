//! Piston v2's dialect: `POST /api/v2/execute` and `GET /api/v2/runtimes`,
//! in the shapes Piston's clients (open-r1's, `piston-client`) send and
//! read, so that they work by a change of URL.
//!
//! Status mapping (Piston's `run.status`, the three-valued verdict kept):
//! - anything that proves nothing about the program (a sandbox error, a
//!   case not run, a timeout the machine was too busy to prove, the sandbox
//!   refusing the run) is run again first (up to twice, alone); what is
//!   still unproven is `XX` with a `message`, never a runtime error, sent
//!   with HTTP 503 and `Retry-After` (Piston's clients retry any status
//!   but 200);
//! - a proven timeout is `TO` (signal `SIGKILL`); a memory kill is `SG`
//!   (signal `SIGKILL`, message says the memory limit);
//! - an exit of 128 + a signal is `SG` with the signal's name, any other
//!   non-zero exit `RE`, exit 0 no status;
//! - a build that failed has a `compile` stage with its code and output
//!   and no `run` stage, as Piston reports it.
//!
//! Limits: `run_timeout` and `compile_timeout` (ms) are the run's and the
//! compile's wall-clock limits, `run_memory_limit` and
//! `compile_memory_limit` (bytes) their memory limits; -1 is the profile's,
//! and the compile's are ignored for a profile that does not compile. Each
//! within `[serve]`'s maxima, else 400 naming the field.
//!
//! The language is a served profile or a `[languages]` name; `version` is
//! accepted whatever it says (one runtime per profile is served, and
//! `/api/v2/runtimes` names it by progscore's version).
//!
//! `files[0]` is the program; the files after it are placed beside it, in
//! its folder, by `name` (read-only, seen by the compile and the run).
//!
//! open-r1's packages, `codeforces` and `cms_ioi` (the program run, then
//! judged against the task's answer by its checker), are `packages`.

mod packages;

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use progscore_sandbox::{ByteString, InvocationEvent, Outcome, ProgramFiles};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::http::body::JsonBody;
use crate::http::error::ApiError;
use crate::jobs::execute::{
    Executed, JobError, LimitKey, LimitPart, LimitStage, Part, ProgramJob, RequestLimits, execute,
    name_evidence, size_value, time_value, unproven_reason,
};
use crate::state::AppState;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v2/execute", post(execute_route))
        .route("/api/v2/runtimes", get(runtimes))
}

/// A Piston refusal: `{"message": ...}` with the status, the field named
/// in the message (Piston's clients read `message`).
fn refusal(error: ApiError) -> Response {
    let message = match &error.field {
        Some(field) => format!("{field}: {}", error.message),
        None => error.message.clone(),
    };
    (error.status, Json(json!({"message": message}))).into_response()
}

#[derive(Debug, Deserialize)]
struct PistonFile {
    /// The name of a file after the first (placed beside the program).
    #[serde(default)]
    name: Option<String>,
    content: String,
    /// `utf8` (the default) or `base64`.
    #[serde(default)]
    encoding: Option<String>,
}

impl PistonFile {
    /// The content as bytes, by its `encoding`; a bad one names
    /// `files[index]`.
    fn decoded(&self, index: usize) -> Result<Vec<u8>, ApiError> {
        match self.encoding.as_deref() {
            None | Some("utf8") => Ok(self.content.clone().into_bytes()),
            Some("base64") => BASE64.decode(&self.content).map_err(|error| {
                ApiError::bad_field(
                    format!("files[{index}].content"),
                    format!("is not valid base64: {error}"),
                )
            }),
            Some(other) => Err(ApiError::bad_field(
                format!("files[{index}].encoding"),
                format!("`{other}` is not supported (utf8 or base64)"),
            )),
        }
    }
}

/// `POST /api/v2/execute`'s body. Timeouts (ms) and memory limits (bytes)
/// are the program's own limits; -1 is the profile's, and the compile's
/// are ignored for a profile without a compile step (see docs/serve.md).
#[derive(Debug, Deserialize)]
struct ExecuteRequest {
    language: String,
    #[serde(default)]
    #[allow(dead_code)]
    version: Option<String>,
    files: Vec<PistonFile>,
    #[serde(default)]
    stdin: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    compile_timeout: Option<f64>,
    #[serde(default)]
    run_timeout: Option<f64>,
    #[serde(default)]
    compile_memory_limit: Option<f64>,
    #[serde(default)]
    run_memory_limit: Option<f64>,
}

/// The request's own limits (see [`ExecuteRequest`]).
fn request_limits(request: &ExecuteRequest, compiles: bool) -> Result<RequestLimits, ApiError> {
    // Piston's "no limit of its own": the profile's.
    let given = |value: Option<f64>| value.filter(|v| *v != -1.0);
    let mut limits = RequestLimits::default();
    let mut stages = vec![(
        LimitStage::Run,
        request.run_timeout,
        request.run_memory_limit,
    )];
    if compiles {
        stages.push((
            LimitStage::Compile,
            request.compile_timeout,
            request.compile_memory_limit,
        ));
    }
    for (stage, timeout, memory) in stages {
        let part = |key| LimitPart { stage, key };
        if let Some(ms) = given(timeout) {
            let value =
                time_value(ms, 1.0, "milliseconds (or -1 for the profile's)").map_err(|why| {
                    ApiError::bad_field(limit_field(part(LimitKey::Timeout)), why.to_string())
                })?;
            limits.set_timeout(stage, value);
        }
        if let Some(bytes) = given(memory) {
            let value =
                size_value(bytes, 1.0, "bytes (or -1 for the profile's)").map_err(|why| {
                    ApiError::bad_field(limit_field(part(LimitKey::Memory)), why.to_string())
                })?;
            limits.set_memory(stage, value);
        }
    }
    Ok(limits)
}

/// The request field a limit came from.
fn limit_field(limit: LimitPart) -> &'static str {
    match (limit.stage, limit.key) {
        (LimitStage::Run, LimitKey::Memory) => "run_memory_limit",
        (LimitStage::Run, _) => "run_timeout",
        (LimitStage::Compile, LimitKey::Memory) => "compile_memory_limit",
        (LimitStage::Compile, _) => "compile_timeout",
    }
}

/// One stage's result.
#[derive(Debug, Serialize)]
struct Stage {
    stdout: String,
    stderr: String,
    output: String,
    code: Option<i64>,
    signal: Option<String>,
    status: Option<&'static str>,
    message: Option<String>,
    cpu_time: Option<u64>,
    wall_time: Option<u64>,
    memory: Option<u64>,
}

impl Stage {
    fn internal(message: String) -> Stage {
        Stage {
            stdout: String::new(),
            stderr: String::new(),
            output: String::new(),
            code: None,
            signal: None,
            status: Some("XX"),
            message: Some(message),
            cpu_time: None,
            wall_time: None,
            memory: None,
        }
    }
}

#[derive(Debug, Serialize)]
struct ExecuteResponse {
    language: String,
    version: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    compile: Option<Stage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<Stage>,
}

/// `POST /api/v2/execute`.
async fn execute_route(
    State(state): State<Arc<AppState>>,
    body: Result<JsonBody<ExecuteRequest>, ApiError>,
) -> Response {
    // A malformed body is refused in Piston's shape too: its clients read
    // `message`.
    let request = match body {
        Ok(JsonBody(request)) => request,
        Err(error) => return refusal(error),
    };
    // open-r1's packages: the program run, then judged.
    if let Some(package) = packages::package_of(&request) {
        return packages::execute_package(&state, request, package).await;
    }
    let Some(profile) = state.language_profile(&request.language) else {
        return refusal(ApiError::bad_field(
            "language",
            format!(
                "{} runtime is unknown (served: {})",
                request.language,
                state.languages().join(", ")
            ),
        ));
    };
    let (program, others) = match request.files.split_first() {
        None => return refusal(ApiError::bad_field("files", "give the program as files[0]")),
        Some((main, others)) => match main.decoded(0) {
            Ok(program) => (program, others),
            Err(error) => return refusal(error),
        },
    };
    // The other files are placed beside the program, by name (Piston's
    // own name for a file without one: `file<i>.code`).
    let mut beside = Vec::with_capacity(others.len());
    for (index, file) in others.iter().enumerate() {
        let index = index + 1;
        match file.decoded(index) {
            Ok(bytes) => beside.push((
                file.name
                    .clone()
                    .unwrap_or_else(|| format!("file{index}.code")),
                ByteString(bytes),
            )),
            Err(error) => return refusal(error),
        }
    }
    let files = match ProgramFiles::new(beside) {
        Ok(files) => files,
        Err(invalid) => return refusal(ApiError::bad_field("files", invalid.to_string())),
    };
    if let Some((served, _)) = state.served(profile)
        && let Err(invalid) = files.check_for(served)
    {
        return refusal(ApiError::bad_field("files", invalid.to_string()));
    }
    let compiles = state
        .served(profile)
        .is_some_and(|(served, _)| served.compile.is_some());
    let limits = match request_limits(&request, compiles) {
        Ok(limits) => limits,
        Err(error) => return refusal(error),
    };
    let job = ProgramJob::run_once(
        program,
        profile,
        request.args,
        request.stdin.map(String::into_bytes),
    )
    .with_limits(limits)
    .with_files(files);
    let field = |part: Part| match part {
        Part::Program => "files[0].content".to_string(),
        Part::Invocations => "language".to_string(),
        Part::Args(_) => "args".to_string(),
        Part::Stdin(_) => "stdin".to_string(),
        Part::Limit(limit) => limit_field(limit).to_string(),
    };
    let version = env!("CARGO_PKG_VERSION").to_string();
    let internal = |message: String| ExecuteResponse {
        language: request.language.clone(),
        version: version.clone(),
        compile: None,
        run: Some(Stage::internal(message)),
    };
    match execute(&state, job, &field).await {
        Ok(executed) => {
            let body = map_run(&executed, &request.language, &version);
            let mut response = if executed.proves_nothing() {
                retried(body)
            } else {
                Json(body).into_response()
            };
            name_evidence(&mut response, &executed);
            response
        }
        Err(JobError::Invalid(error)) => refusal(error),
        Err(JobError::Busy {
            profile,
            refusal: why,
        }) => {
            let mut response = (
                StatusCode::TOO_MANY_REQUESTS,
                Json(json!({"message": why.message(&profile)})),
            )
                .into_response();
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                HeaderValue::from_static("1"),
            );
            response
        }
        Err(JobError::Refused { message, .. }) => retried(internal(format!(
            "the sandbox could not run the program: {message}"
        ))),
        Err(JobError::Cancelled) => retried(internal(
            "the server is shutting down; the program was not run to its end".into(),
        )),
        Err(JobError::Internal {
            incident: message, ..
        }) => retried(internal(format!("progscore failed: {message}"))),
    }
}

/// An answer that says nothing of the program (a stage `XX`), as 503 with
/// `Retry-After`: Piston's clients (open-r1's `PistonClient`) retry any
/// status but 200, and read a 200's `XX` as the program's failure.
fn retried(body: ExecuteResponse) -> Response {
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    response.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        HeaderValue::from_static("1"),
    );
    response
}

/// Piston's view of a run (see the module doc for the mapping).
fn map_run(executed: &Executed, language: &str, version: &str) -> ExecuteResponse {
    let run = &executed.observation.run;
    let observation = &executed.observation.id;
    let mut response = ExecuteResponse {
        language: language.to_string(),
        version: version.to_string(),
        compile: run.compile.as_ref().map(|c| stage(&c.event, observation)),
        run: None,
    };
    if response
        .compile
        .as_ref()
        .is_some_and(|c| c.status == Some("XX"))
    {
        return response;
    }
    match executed.event() {
        None => {
            response.run = Some(Stage::internal(format!(
                "the run has no event (observation {observation})"
            )));
        }
        // The build failed: Piston gives the compile stage only.
        Some(event) if matches!(event.outcome, Outcome::CompileError { .. }) => {}
        Some(event) => response.run = Some(stage(event, observation)),
    }
    response
}

fn stage(event: &InvocationEvent, observation: &str) -> Stage {
    let stdout = String::from_utf8_lossy(&event.stdout.data.0).into_owned();
    let stderr = String::from_utf8_lossy(&event.stderr.data.0).into_owned();
    let usage = event.usage.as_ref();
    let mut stage = Stage {
        output: format!("{stdout}{stderr}"),
        stdout,
        stderr,
        code: None,
        signal: None,
        status: None,
        message: None,
        cpu_time: usage.and_then(|u| u.cpu_ms),
        wall_time: Some(event.duration_ms),
        memory: usage.and_then(|u| u.peak_memory_bytes),
    };
    match &event.outcome {
        Outcome::Exited { exit_code } if (129..=192).contains(exit_code) => {
            stage.signal = Some(signal_name(exit_code - 128));
            stage.status = Some("SG");
        }
        Outcome::Exited { exit_code } => {
            stage.code = Some(*exit_code);
            if *exit_code != 0 {
                stage.status = Some("RE");
            }
        }
        Outcome::TimedOut {
            unconfirmed: None, ..
        } => {
            stage.signal = Some("SIGKILL".into());
            stage.status = Some("TO");
            stage.message = Some("Timeout".into());
        }
        Outcome::MemoryLimit => {
            stage.signal = Some("SIGKILL".into());
            stage.status = Some("SG");
            stage.message = Some("Memory limit exceeded".into());
        }
        other => {
            return Stage::internal(format!(
                "{} (observation {observation})",
                unproven_reason(other, "the program")
            ));
        }
    }
    if event.stdout.truncated || event.stderr.truncated {
        let note = "output cut at the profile's output limit".to_string();
        stage.message = Some(match stage.message.take() {
            Some(message) => format!("{message}; {note}"),
            None => note,
        });
    }
    stage
}

fn signal_name(number: i64) -> String {
    let name = match number {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        _ => return format!("SIG{number}"),
    };
    name.to_string()
}

/// `GET /api/v2/runtimes`: one runtime per served language name.
async fn runtimes(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    let version = env!("CARGO_PKG_VERSION");
    Json(serde_json::Value::Array(
        state
            .languages()
            .into_iter()
            .map(|language| {
                let profile = state.language_profile(language).unwrap_or(language);
                json!({
                    "language": language,
                    "version": version,
                    "aliases": [],
                    "runtime": profile,
                })
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_named_as_piston_names_them() {
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(6), "SIGABRT");
        assert_eq!(signal_name(40), "SIG40");
    }
}
