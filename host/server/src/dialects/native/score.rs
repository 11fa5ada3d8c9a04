//! `POST /v1/score` and `POST /v1/batches`: batch lines scored through the
//! served profiles' queues, the batch driven by the runtime's batch run as
//! `progscore score` drives it, each item's answer a result line.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use progscore_runtime::batch::{Batch, BatchItem, BatchSource};
use progscore_runtime::batch_run::{
    self, BatchEvent, BatchOptions, ItemCheck, ItemEvent, ItemFailure, ItemRefusal, ItemScoring,
    Stop,
};
use progscore_runtime::results::result_line;
use progscore_sandbox::BoxFuture;
use progscore_scoring::{Score, ScoringError};
use tokio_util::sync::CancellationToken;

use super::items::{
    Options, SENT, check_item, error_line, item_field, item_job, line_error, summary_line,
};
use crate::http::body::{JsonBytes, JsonLinesBody};
use crate::http::error::ApiError;
use crate::jobs::execute::{JobError, execute};
use crate::state::AppState;

/// `POST /v1/score`: one batch line.
pub(super) async fn score(
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
pub(super) async fn batches(
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
