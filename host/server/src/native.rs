//! progscore's own API, versioned under `/v1`, in the shapes the CLI and
//! the store already use: a request item is a batch line (parsed by the
//! runtime's batch parser, `program_file` refused), an answer is a result
//! line (the runtime's `result_line`), a run is the sandbox's `ProgramRun`.
//!
//! - `POST /v1/score`: one batch line -> its result line;
//! - `POST /v1/batches`: batch lines (NDJSON) -> result lines streamed as
//!   each completes, then `{"summary": ...}`; a client that disconnects
//!   cancels its remaining items, each run cleaned up;
//! - `POST /v1/run`: program, profile, invocations, and the program's own
//!   `limits` and `compile_limits` if any -> the run (stored as evidence,
//!   scored only as "every invocation exits 0"); a run that proved nothing
//!   for the sandbox's reasons is run again (twice at most), and one that
//!   still proves nothing is answered 503 with `Retry-After`, the run in
//!   the body;
//! - `GET /v1/observations/{id}`, `POST /v1/replay`, `POST /v1/rescore`:
//!   stored evidence only, nothing runs;
//! - `GET /v1/profiles`: the served profiles and their queues.
//!
//! `?fresh=true` on `score`, `batches` and `run` runs again under a new
//! observation id even where evidence is stored.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use progscore_runtime::batch::{Batch, BatchItem, BatchLineError};
use progscore_runtime::results::{result_line, verdict_word};
use progscore_sandbox::{ByteString, Invocation, PartialLimitsSpec, ProgramFiles};
use progscore_scoring::{
    Condition, ObservationRef, ProgramInput, ReplayRefusal, ReplayRequest, RescoreRequest,
    ScoringError, ScoringExpectation,
};
use serde::Deserialize;

use crate::body::{JsonBody, JsonBytes, JsonLinesBody};
use crate::error::ApiError;
use crate::execute::{JobError, Part, ProgramJob, RequestLimits, execute};
use crate::state::AppState;

/// What `/v1/batches` and `/v1/rescore` call the request body in messages.
const SENT: &str = "request";

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/profiles", get(profiles))
        .route("/v1/score", post(score))
        .route("/v1/batches", post(batches))
        .route("/v1/run", post(run))
        .route("/v1/observations/{id}", get(observation))
        .route("/v1/replay", post(replay))
        .route("/v1/rescore", post(rescore))
}

/// Options in the query string.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// Run again even where evidence is stored.
    #[serde(default)]
    fresh: bool,
}

/// `GET /v1/profiles`: the served profiles as `progscore profiles --json`
/// lists them, with their queues.
async fn profiles(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    let served: Vec<serde_json::Value> = state
        .served_names()
        .into_iter()
        .filter_map(|name| state.served(name))
        .map(|(profile, queue)| {
            serde_json::json!({
                "name": profile.name,
                "fingerprint": profile.fingerprint(),
                "profile": profile,
                "queue": {
                    "concurrency": queue.concurrency(),
                    "running": queue.running(),
                    "waiting": queue.waiting(),
                },
            })
        })
        .collect();
    Json(serde_json::Value::Array(served))
}

/// `POST /v1/score`: one batch line.
async fn score(
    State(state): State<Arc<AppState>>,
    Query(options): Query<Options>,
    JsonBytes(body): JsonBytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let Batch { items, errors } = Batch::parse_sent(SENT, &body);
    if let Some(error) = errors.into_iter().next() {
        return Err(line_error(error));
    }
    let item = match items.len() {
        1 => items.into_iter().next().expect("one item"),
        0 => return Err(ApiError::bad_field("body", "give one batch line")),
        n => {
            return Err(ApiError::bad_field(
                "body",
                format!("{n} lines: /v1/score takes one item (use /v1/batches for more)"),
            ));
        }
    };
    let job = item_job(&state, item, options.fresh)?;
    match execute(&state, job, &item_field).await {
        Ok(executed) => Ok(Json(result_line(&executed.score, None))),
        Err(error) => Err(error.into_api_error()),
    }
}

/// `POST /v1/batches`: NDJSON in, NDJSON out (bad lines first, then each
/// result as it completes, then the summary).
async fn batches(
    State(state): State<Arc<AppState>>,
    Query(options): Query<Options>,
    JsonLinesBody(body): JsonLinesBody,
) -> Result<Response, ApiError> {
    let Batch { items, errors } = Batch::parse_sent(SENT, &body);
    let max = state.settings().max_batch_items;
    if items.len() + errors.len() > max {
        return Err(ApiError::bad_field(
            "body",
            format!(
                "{} items; this server accepts at most {max} in one batch ([serve] max_batch_items)",
                items.len() + errors.len()
            ),
        )
        .with_status(StatusCode::PAYLOAD_TOO_LARGE));
    }
    let mut refused: Vec<serde_json::Value> = errors.iter().map(error_line).collect();
    let mut jobs = Vec::with_capacity(items.len());
    for item in items {
        let line = item.line;
        let id = item.id.clone();
        match item_job(&state, item, options.fresh) {
            Ok(job) => jobs.push(job),
            Err(error) => refused.push(serde_json::json!({
                "line": line,
                "id": id,
                "field": error.field,
                "error": error.message,
            })),
        }
    }
    let bad_lines = refused.len();
    // Enough in flight to keep every served profile's queue busy; more
    // would only wait in the queues.
    let in_flight = state.total_concurrency().max(1);
    let results = futures_util::stream::iter(jobs)
        .map({
            let state = state.clone();
            move |job| {
                let state = state.clone();
                async move {
                    let id = job.item_id.clone();
                    (id, execute(&state, job, &item_field).await)
                }
            }
        })
        .buffer_unordered(in_flight);
    // Dropping the stream (the client went away) drops every pending
    // run, which cancels it; each run's task still cleans up.
    let lines = futures_util::stream::iter(refused.into_iter().map(Some))
        .chain(results.map(|(id, result)| {
            Some(match result {
                Ok(executed) => result_line(&executed.score, None),
                Err(error) => {
                    let error = error.into_api_error();
                    serde_json::json!({"id": id, "status": "not_scored", "error": error.message})
                }
            })
        }))
        // The end, where the summary goes.
        .chain(futures_util::stream::once(async { None }));
    let body = Body::from_stream(with_summary(lines, bad_lines));
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

/// The batch's lines, with `None` (the end) replaced by the summary of
/// what went before.
fn with_summary(
    lines: impl futures_util::Stream<Item = Option<serde_json::Value>> + Send + 'static,
    bad_lines: usize,
) -> impl futures_util::Stream<Item = Result<String, std::io::Error>> + Send + 'static {
    lines.scan(
        BatchSummary {
            bad_lines,
            ..BatchSummary::default()
        },
        |summary, line| {
            let out = match line {
                Some(line) => {
                    summary.count(&line);
                    line
                }
                None => serde_json::json!({"summary": summary.to_json()}),
            };
            let mut text = out.to_string();
            text.push('\n');
            futures_util::future::ready(Some(Ok(text)))
        },
    )
}

/// Counts of a batch's lines.
#[derive(Debug, Default, Clone, Copy)]
struct BatchSummary {
    trues: usize,
    falses: usize,
    undetermined: usize,
    not_scored: usize,
    bad_lines: usize,
}

impl BatchSummary {
    fn count(&mut self, line: &serde_json::Value) {
        match (line["status"].as_str(), line["value"].as_bool()) {
            (Some("complete"), Some(true)) => self.trues += 1,
            (Some("complete"), Some(false)) => self.falses += 1,
            (Some("undetermined"), _) => self.undetermined += 1,
            (Some("not_scored"), _) => self.not_scored += 1,
            _ => {}
        }
    }

    fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "items": self.trues + self.falses + self.undetermined + self.not_scored,
            "true": self.trues,
            "false": self.falses,
            "undetermined": self.undetermined,
            "not_scored": self.not_scored,
            "bad_lines": self.bad_lines,
        })
    }
}

/// `POST /v1/run`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunRequest {
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
async fn run(
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

/// `GET /v1/observations/{id}`: the stored observation, as
/// `progscore observations show` prints it.
async fn observation(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let store = state.session().store.clone();
    let found = tokio::task::spawn_blocking(move || store.observation(&id).map(|o| (id, o)))
        .await
        .map_err(|e| ApiError::internal(format!("the store's task failed: {e}")))?
        .map_err(|e| ApiError::internal(e.to_string()))?;
    match found {
        (_, Some(observation)) => Ok(Json(
            serde_json::to_value(observation).map_err(|e| ApiError::internal(e.to_string()))?,
        )),
        (id, None) => Err(ApiError::not_found(format!(
            "no observation {id} is stored"
        ))),
    }
}

/// `POST /v1/replay`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayBody {
    /// The stored observation.
    observation_id: String,
    /// The expectation (its profile and invocations must be the run's).
    expectation: ScoringExpectation,
    /// An item id to record the score under.
    #[serde(default)]
    id: Option<String>,
}

/// A turn for comparator work (replays and rescores run no program, but
/// every comparison is CPU): 429 with `Retry-After` when none comes within
/// `[serve] queue_wait`, or 503 while the server drains.
async fn replay_turn(state: &AppState) -> Result<tokio::sync::OwnedSemaphorePermit, ApiError> {
    if state.is_draining() {
        return Err(ApiError::draining());
    }
    state.replay_turn().await.ok_or_else(|| ApiError {
        status: StatusCode::TOO_MANY_REQUESTS,
        message:
            "replays and rescores are busy: no turn within [serve] queue_wait; try again later"
                .into(),
        field: None,
        retry_after: Some(std::time::Duration::from_secs(1)),
    })
}

/// `POST /v1/replay`: scores a stored observation; runs nothing.
async fn replay(
    State(state): State<Arc<AppState>>,
    JsonBody(body): JsonBody<ReplayBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let request = ReplayRequest {
        item_id: body.id,
        observation: ObservationRef::Id(body.observation_id),
        expectation: body.expectation,
    };
    let _turn = replay_turn(&state).await?;
    let session = state.clone();
    let replayed = tokio::task::spawn_blocking(move || session.session().replayer.replay(request))
        .await
        .map_err(|e| ApiError::internal(format!("the replay's task failed: {e}")))?;
    match replayed {
        Ok(score) => Ok(Json(result_line(&score, None))),
        Err(error) => Err(scoring_refusal(error, "observation_id")),
    }
}

/// `POST /v1/rescore`: batch lines (NDJSON) re-graded from stored evidence
/// only; each answer says whether the verdict changed.
async fn rescore(
    State(state): State<Arc<AppState>>,
    JsonLinesBody(body): JsonLinesBody,
) -> Result<Response, ApiError> {
    let Batch { items, errors } = Batch::parse_sent(SENT, &body);
    let max = state.settings().max_batch_items;
    if items.len() + errors.len() > max {
        return Err(ApiError::bad_field(
            "body",
            format!(
                "{} items; this server accepts at most {max}",
                items.len() + errors.len()
            ),
        )
        .with_status(StatusCode::PAYLOAD_TOO_LARGE));
    }
    let requests: Vec<RescoreRequest> = items
        .iter()
        .map(|item| RescoreRequest {
            item_id: Some(item.id.clone()),
            program: ProgramInput::Inline(item.program.clone()),
            expectation: item.expectation.clone(),
        })
        .collect();
    let _turn = replay_turn(&state).await?;
    let session = state.clone();
    let results =
        tokio::task::spawn_blocking(move || session.session().replayer.rescore_batch(requests))
            .await
            .map_err(|e| ApiError::internal(format!("the rescore's task failed: {e}")))?
            .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut lines: Vec<serde_json::Value> = errors.iter().map(error_line).collect();
    let mut summary = BatchSummary {
        bad_lines: errors.len(),
        ..BatchSummary::default()
    };
    for (item, result) in items.iter().zip(results) {
        match result {
            Ok(rescore) => {
                let previous = rescore
                    .previous
                    .as_ref()
                    .map(|p| verdict_word(p.record.status, p.record.value));
                let line = result_line(&rescore.score, Some((rescore.changed, previous)));
                summary.count(&line);
                lines.push(line);
            }
            Err(error) => {
                summary.bad_lines += 1;
                let refusal = scoring_refusal(error, "expectation");
                lines.push(serde_json::json!({
                    "line": item.line,
                    "id": item.id,
                    "field": refusal.field,
                    "error": refusal.message,
                }));
            }
        }
    }
    lines.push(serde_json::json!({"summary": summary.to_json()}));
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], text).into_response())
}

/// The job of a parsed batch item, its expectation checked as `score`
/// checks it.
fn item_job(state: &AppState, item: BatchItem, fresh: bool) -> Result<ProgramJob, ApiError> {
    state.scorer().validate(&item.expectation).map_err(|e| {
        ApiError::bad_field(format!("expectation.{}", e.field_path()), e.to_string())
    })?;
    let Some(Condition::ProgramBehaves(behaves)) = item.expectation.conditions.first() else {
        return Err(ApiError::bad_field(
            "expectation.conditions",
            "give one `program_behaves` condition",
        ));
    };
    if state.served(&behaves.profile).is_none() {
        return Err(unknown_profile(
            state,
            "expectation.conditions[0].program_behaves.profile",
            &behaves.profile,
        ));
    }
    // The limits stay on the expectation too, where the scorer reads them.
    let limits = RequestLimits {
        run: behaves.limits.clone(),
        compile: behaves.compile_limits.clone(),
    };
    Ok(ProgramJob {
        profile: behaves.profile.clone(),
        invocations: behaves.cases.iter().map(|c| c.invocation.clone()).collect(),
        program: item.program,
        fresh,
        item_id: Some(item.id),
        limits,
        files: behaves.files.clone(),
        expectation: Some(item.expectation),
        deadline: None,
    })
}

/// A batch item's parts, named by their JSON paths in the batch line.
fn item_field(part: Part) -> String {
    let cases = "expectation.conditions[0].program_behaves.cases";
    match part {
        Part::Program => "program".into(),
        Part::Invocations => cases.into(),
        Part::Args(i) => format!("{cases}[{i}].invocation.args"),
        Part::Stdin(i) => format!("{cases}[{i}].invocation.stdin"),
        Part::Limit(limit) => format!("expectation.conditions[0].program_behaves.{}", limit.path()),
    }
}

fn unknown_profile(state: &AppState, field: &str, name: &str) -> ApiError {
    ApiError::bad_field(
        field,
        format!(
            "profile `{name}` is not served here (served: {})",
            state.served_names().join(", ")
        ),
    )
}

/// A bad batch line as a 400.
fn line_error(error: BatchLineError) -> ApiError {
    ApiError::bad_field(error.field.unwrap_or_else(|| "body".into()), error.message)
}

/// A bad batch line as an NDJSON line.
fn error_line(error: &BatchLineError) -> serde_json::Value {
    serde_json::json!({
        "line": error.line,
        "id": error.id,
        "field": error.field,
        "error": error.message,
    })
}

/// A replay's or rescore's refusal: what is not stored is 404, what does
/// not fit is 400 naming `field`.
fn scoring_refusal(error: ScoringError, field: &str) -> ApiError {
    match error {
        ScoringError::Replay(ReplayRefusal::NotStored { id }) => {
            ApiError::not_found(format!("no observation {id} is stored"))
        }
        ScoringError::Expectation(e) => {
            ApiError::bad_field(format!("expectation.{}", e.field_path()), e.to_string())
        }
        ScoringError::Store(e) if e.is_store_fault() => ApiError::internal(e.to_string()),
        error @ ScoringError::ItemOfAnotherProgram { .. } => {
            ApiError::bad_field("id", error.to_string()).with_status(StatusCode::CONFLICT)
        }
        error @ ScoringError::EmptyItemId => ApiError::bad_field("id", error.to_string()),
        other => ApiError::bad_field(field, other.to_string()),
    }
}
