//! Stored evidence only, nothing runs: `GET /v1/observations/{id}`,
//! `POST /v1/replay` and `POST /v1/rescore`, each comparison waiting for a
//! turn of the server's comparator work.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use progscore_runtime::batch::{Batch, BatchItem};
use progscore_runtime::results::{Summary, result_line, verdict_word};
use progscore_scoring::{
    ObservationRef, ReplayRefusal, ReplayRequest, RescoreRequest, ScoringError, ScoringExpectation,
};
use serde::Deserialize;

use super::items::{SENT, error_line, summary_line};
use crate::http::body::{JsonBody, JsonLinesBody};
use crate::http::error::ApiError;
use crate::state::AppState;

/// `GET /v1/observations/{id}`: the stored observation, as
/// `progscore observations show` prints it.
pub(super) async fn observation(
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
pub(super) struct ReplayBody {
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
pub(super) async fn replay(
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
pub(super) async fn rescore(
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
