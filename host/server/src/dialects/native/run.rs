//! `POST /v1/run`: a program run under a served profile, stored as
//! evidence and answered as the sandbox's run; one that still proves
//! nothing after its reruns is answered 503 with `Retry-After`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use progscore_sandbox::{ByteString, Invocation, PartialLimitsSpec, ProgramFiles};
use serde::Deserialize;

use super::items::{Options, unknown_profile};
use crate::http::body::JsonBody;
use crate::http::error::ApiError;
use crate::jobs::execute::{JobError, Part, ProgramJob, RequestLimits, execute};
use crate::state::AppState;

/// `POST /v1/run`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RunRequest {
    /// The code, run verbatim.
    program: String,
    /// A served profile.
    profile: String,
    /// One sandbox each; default: one with no arguments and no stdin.
    #[serde(default)]
    invocations: Option<Vec<Invocation>>,
    /// The program's own limits over the profile's `limits` (as in an
    /// expectation's `program_behaves`).
    #[serde(default)]
    limits: Option<PartialLimitsSpec>,
    /// The program's own limits over the profile's `compile_limits`.
    #[serde(default)]
    compile_limits: Option<PartialLimitsSpec>,
    /// Files placed beside the program (as in `program_behaves`).
    #[serde(default)]
    files: ProgramFiles,
}

/// `POST /v1/run`.
pub(super) async fn run(
    State(state): State<Arc<AppState>>,
    Query(options): Query<Options>,
    JsonBody(request): JsonBody<RunRequest>,
) -> Result<Response, ApiError> {
    if state.served(&request.profile).is_none() {
        return Err(unknown_profile(&state, "profile", &request.profile));
    }
    let job = ProgramJob {
        program: request.program.into_bytes(),
        profile: request.profile,
        invocations: request.invocations.unwrap_or_else(|| {
            vec![Invocation {
                args: Vec::new(),
                stdin: None::<ByteString>,
            }]
        }),
        fresh: options.fresh,
        expectation: None,
        item_id: None,
        limits: RequestLimits {
            run: request.limits,
            compile: request.compile_limits,
        },
        files: request.files,
        deadline: None,
    };
    let field = |part: Part| match part {
        Part::Program => "program".to_string(),
        Part::Invocations => "invocations".to_string(),
        Part::Args(i) => format!("invocations[{i}].args"),
        Part::Stdin(i) => format!("invocations[{i}].stdin"),
        Part::Limit(limit) => limit.path(),
    };
    let executed = execute(&state, job, &field)
        .await
        .map_err(JobError::into_api_error)?;
    let body = Json(serde_json::json!({
        "observation_id": executed.observation.id,
        "evidence": executed.score.evidence,
        "run": executed.observation.run,
    }));
    if executed.proves_nothing() {
        // Run again twice already: still nothing known of the program.
        // The run goes with the answer; the status says "try again".
        let mut response = (StatusCode::SERVICE_UNAVAILABLE, body).into_response();
        response.headers_mut().insert(
            header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("5"),
        );
        return Ok(response);
    }
    Ok(body.into_response())
}
