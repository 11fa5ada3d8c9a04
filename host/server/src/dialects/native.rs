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
use progscore_runtime::batch::{Batch, BatchItem, BatchLineError, BatchSource};
use progscore_runtime::batch_run::{
    self, BatchEvent, BatchOptions, ItemCheck, ItemEvent, ItemFailure, ItemRefusal, ItemScoring,
    Stop,
};
use progscore_runtime::results::{Summary, result_line, verdict_word};
use progscore_sandbox::BoxFuture;
use progscore_sandbox::{ByteString, Invocation, PartialLimitsSpec, ProgramFiles};
use progscore_scoring::{
    Condition, ObservationRef, ProgramBehaves, ReplayRefusal, ReplayRequest, RescoreRequest, Score,
    ScoringError, ScoringExpectation,
};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::http::body::{JsonBody, JsonBytes, JsonLinesBody};
use crate::http::error::ApiError;
use crate::jobs::execute::{JobError, Part, ProgramJob, RequestLimits, execute};
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
/// result as it completes, then the summary). The runtime's batch driver
/// runs it, as it runs `progscore score`: the same counts, and a failed
/// store or an engine gone stops the batch once (the summary says why).
async fn batches(
    State(state): State<Arc<AppState>>,
    Query(options): Query<Options>,
    JsonLinesBody(body): JsonLinesBody,
) -> Result<Response, ApiError> {
    let source = BatchSource::Sent {
        source: SENT.into(),
        bytes: body.to_vec().into(),
    };
    let items = ServedItems {
        state: state.clone(),
    };
    let survey = batch_run::survey(&source, &items)
        .map_err(|error| ApiError::bad_field("body", error.to_string()))?;
    let lines = survey.items() + survey.bad_lines.len();
    let max = state.settings().max_batch_items;
    if lines > max {
        return Err(ApiError::bad_field(
            "body",
            format!(
                "{lines} items; this server accepts at most {max} in one batch ([serve] max_batch_items)"
            ),
        )
        .with_status(StatusCode::PAYLOAD_TOO_LARGE));
    }
    let (sender, receiver) = tokio::sync::mpsc::channel::<serde_json::Value>(16);
    let bad_lines = survey.bad_lines.len();
    // The batch is driven on a task of its own; its lines go out as they
    // come. A client that goes away closes the channel: the driver is
    // dropped, which cancels every run in flight (each run's task still
    // cleans up).
    state.tracker().spawn(async move {
        for error in &survey.bad_lines {
            if sender.send(error_line(error)).await.is_err() {
                return;
            }
        }
        let options = BatchOptions {
            // Enough in flight to keep every served profile's queue busy;
            // more would only wait in the queues.
            jobs: Some(items.state.total_concurrency().max(1)),
            fresh: options.fresh,
            cancel: items.state.run_token(),
        };
        let mut events = std::pin::pin!(batch_run::run_batch(&items, &source, &survey, options));
        while let Some(event) = events.next().await {
            let line = match event {
                BatchEvent::Item { event, .. } => item_line(event),
                BatchEvent::BadLine(error) => Some(error_line(&error)),
                BatchEvent::End(finished) => {
                    let stopped = match finished.stopped_by() {
                        Some(Stop::StoreFailed) => Some("the evidence store failed"),
                        Some(Stop::EngineGone) => Some("the sandbox engine is not reachable"),
                        None => None,
                    };
                    Some(summary_line(&finished.summary, bad_lines, stopped))
                }
                BatchEvent::ProfileRefused(_) | BatchEvent::Started { .. } => None,
            };
            if let Some(line) = line
                && sender.send(line).await.is_err()
            {
                return;
            }
        }
    });
    let lines = futures_util::stream::unfold(receiver, |mut receiver| async move {
        let line = receiver.recv().await?;
        let mut text = line.to_string();
        text.push('\n');
        Some((Ok::<_, std::io::Error>(text), receiver))
    });
    let body = Body::from_stream(lines);
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

/// A batch's items as the server scores them: checked against the served
/// profiles, run through the profiles' queues (with their reruns and
/// gathering) by [`execute`].
struct ServedItems {
    state: Arc<AppState>,
}

impl ItemCheck for ServedItems {
    fn check(&self, item: BatchItem) -> Result<BatchItem, ItemRefusal> {
        check_item(&self.state, &item).map_err(|error| ItemRefusal {
            field: error.field,
            message: error.message,
        })?;
        Ok(item)
    }
}

impl ItemScoring for ServedItems {
    fn preflight<'a>(
        &'a self,
        _profile: &'a str,
    ) -> BoxFuture<'a, Result<(), progscore_sandbox::SandboxError>> {
        // Served profiles passed theirs when the server started; an item
        // of another profile is a bad line.
        Box::pin(async { Ok(()) })
    }

    fn score(
        &self,
        item: BatchItem,
        fresh: bool,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Score, ItemFailure>> {
        Box::pin(async move {
            let job = item_job(&self.state, item, fresh)
                .map_err(|error| ItemFailure::NotRun(error.message))?;
            // Dropping the run (the batch stopped) cancels it.
            let outcome = tokio::select! {
                outcome = execute(&self.state, job, &item_field) => outcome,
                () = cancel.cancelled() => return Err(ScoringError::Cancelled.into()),
            };
            match outcome {
                Ok(executed) => Ok(executed.score),
                Err(JobError::Refused {
                    message,
                    engine_gone: true,
                }) => Err(ItemFailure::Scoring(ScoringError::Refused(
                    progscore_sandbox::SandboxError::EngineUnavailable { message },
                ))),
                Err(JobError::Internal {
                    incident,
                    store_fault: true,
                }) => Err(ItemFailure::StoreFailed(incident)),
                Err(error) => Err(ItemFailure::NotRun(error.into_api_error().message)),
            }
        })
    }

    fn default_jobs(&self) -> usize {
        self.state.total_concurrency().max(1)
    }
}

/// An item's line: its result, or `not_scored` with why.
fn item_line(event: ItemEvent) -> Option<serde_json::Value> {
    let not_scored = |id: String, error: String| serde_json::json!({"id": id, "status": "not_scored", "error": error});
    Some(match event {
        ItemEvent::Scored(score) => result_line(&score, None),
        ItemEvent::NotRun { id, reason } => not_scored(id, reason),
        ItemEvent::NotScored { id, error } => not_scored(id, error.to_string()),
        ItemEvent::EngineGone { id, error } => not_scored(
            id,
            format!("the sandbox could not run the program: {error}"),
        ),
        ItemEvent::StoreFailed { id, fault } => {
            not_scored(id, format!("progscore failed: {fault}"))
        }
        ItemEvent::AlreadySaid { id } | ItemEvent::Cancelled { id } => {
            not_scored(id, "not run: the batch stopped".into())
        }
        ItemEvent::Failed { id, error } => {
            not_scored(id, crate::http::error::logged_incident(&error))
        }
    })
}

/// The last line: what the batch came to, and why it stopped early if it
/// did.
fn summary_line(summary: &Summary, bad_lines: usize, stopped: Option<&str>) -> serde_json::Value {
    let not_scored = summary.not_scored + summary.cancelled + summary.errors;
    let mut line = serde_json::json!({"summary": {
        "items": summary.scored() + not_scored,
        "true": summary.trues,
        "false": summary.falses,
        "undetermined": summary.undetermined,
        "not_scored": not_scored,
        "bad_lines": bad_lines,
    }});
    if let Some(stopped) = stopped {
        line["summary"]["stopped"] = serde_json::Value::String(stopped.into());
    }
    line
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
    let requests: Vec<RescoreRequest> = items.iter().map(BatchItem::rescore_request).collect();
    let _turn = replay_turn(&state).await?;
    let session = state.clone();
    let results =
        tokio::task::spawn_blocking(move || session.session().replayer.rescore_batch(requests))
            .await
            .map_err(|e| ApiError::internal(format!("the rescore's task failed: {e}")))?
            .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut lines: Vec<serde_json::Value> = errors.iter().map(error_line).collect();
    let mut summary = Summary::default();
    let mut bad_lines = errors.len();
    for (item, result) in items.iter().zip(results) {
        match result {
            Ok(rescore) => {
                let previous = rescore
                    .previous
                    .as_ref()
                    .map(|p| verdict_word(p.record.status, p.record.value));
                summary.add(&rescore.score);
                lines.push(result_line(
                    &rescore.score,
                    Some((rescore.changed, previous)),
                ));
            }
            Err(error) => {
                bad_lines += 1;
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
    lines.push(summary_line(&summary, bad_lines, None));
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], text).into_response())
}

/// A parsed batch item checked as `score` checks it, and its profile
/// served here: its one `program_behaves`.
fn check_item<'a>(state: &AppState, item: &'a BatchItem) -> Result<&'a ProgramBehaves, ApiError> {
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
    Ok(behaves)
}

/// The job of a parsed batch item, its expectation checked as `score`
/// checks it.
fn item_job(state: &AppState, item: BatchItem, fresh: bool) -> Result<ProgramJob, ApiError> {
    let behaves = check_item(state, &item)?;
    // The limits stay on the expectation too, where the scorer reads them.
    let limits = RequestLimits {
        run: behaves.limits.clone(),
        compile: behaves.compile_limits.clone(),
    };
    let profile = behaves.profile.clone();
    let invocations = behaves.cases.iter().map(|c| c.invocation.clone()).collect();
    let files = behaves.files.clone();
    Ok(ProgramJob {
        profile,
        invocations,
        program: item.program,
        fresh,
        item_id: Some(item.id),
        limits,
        files,
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
