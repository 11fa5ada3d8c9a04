//! The `/submissions` routes: a submission stored under its token in the
//! evidence store's `submissions` table, run (at once with `wait`, else in
//! the background), and read back; batches of them.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use progscore_scoring::store_call;
use serde::Deserialize;
use serde_json::{Value, json};

use super::accept::*;
use super::judge::*;
use super::model::*;
use super::render::*;
use crate::http::body::JsonBody;
use crate::http::body_limits::BodyShare;
use crate::http::error::ApiError;
use crate::jobs::execute::ProgramJob;
use crate::state::AppState;

/// This server's owner name and lock file, recorded with each submission
/// it runs.
pub(super) fn this_owner(state: &AppState) -> (String, Option<String>) {
    match state.submissions_owner() {
        Some(owner) => (
            owner.name().to_string(),
            Some(owner.lock_path().display().to_string()),
        ),
        // No lock to record: a row another server can never judge gone.
        None => (format!("progscore-serve-{}", std::process::id()), None),
    }
}

/// Whether the server that runs an unfinished submission is provably gone:
/// its lock file exists and nobody holds the lock (the kernel released it
/// when that process ended, however it ended; pids prove nothing across
/// PID namespaces). A row from before locks were recorded was written by a
/// progscore that can no longer open this store (its schema is newer), so
/// its owner has stopped.
pub(super) fn owner_gone(
    state: &AppState,
    stored: &progscore_scoring::evidence::StoredSubmission,
) -> bool {
    if stored.owner == this_owner(state).0 {
        return false;
    }
    match &stored.owner_lock {
        Some(lock) => progscore_sandbox::lock_proves_owner_gone(std::path::Path::new(lock)),
        None => true,
    }
}

/// Fails what this server accepted and did not finish (a cancelled run
/// stores its own result; this is for rows whose task never got there), so
/// that nothing of a server that stopped stays "In Queue". Called once the
/// server's runs have ended.
pub(crate) fn fail_unfinished(state: &AppState) {
    let Some(owner) = state.submissions_owner() else {
        return;
    };
    let result = StoredResult::internal_error(
        "the server stopped before this submission ran; submit it again",
    );
    let Ok(text) = serde_json::to_string(&result) else {
        return;
    };
    match state
        .session()
        .store
        .finish_unfinished_submissions_of(owner.name(), &text)
    {
        Ok(0) => {}
        Ok(failed) => tracing::warn!(failed, "failed the submissions this server did not finish"),
        Err(error) => {
            tracing::error!(%error, "could not fail the submissions this server did not finish")
        }
    }
}

/// A stored submission as Judge0 renders it; an unfinished one whose owner
/// died is finished as Internal Error first.
pub(super) fn load(
    state: &AppState,
    token: &str,
    options: &Options,
) -> Result<Option<(Value, Option<String>)>, ApiError> {
    let store = &state.session().store;
    let Some(mut stored) = store
        .submission(token)
        .map_err(|e| ApiError::internal(e.to_string()))?
    else {
        return Ok(None);
    };
    if stored.dialect != DIALECT {
        return Ok(None);
    }
    if stored.result.is_none() && owner_gone(state, &stored) {
        let abandoned = StoredResult::internal_error(
            "the server that accepted this submission stopped before it ran; submit it again",
        );
        let text =
            serde_json::to_string(&abandoned).map_err(|e| ApiError::internal(e.to_string()))?;
        let _ = store.finish_submission(token, &text);
        stored = store
            .submission(token)
            .map_err(|e| ApiError::internal(e.to_string()))?
            .unwrap_or(stored);
    }
    let request: StoredRequest = serde_json::from_str(&stored.request)
        .map_err(|e| ApiError::internal(format!("submission {token}: {e}")))?;
    let result: Option<StoredResult> = match &stored.result {
        Some(text) => Some(
            serde_json::from_str(text)
                .map_err(|e| ApiError::internal(format!("submission {token}: {e}")))?,
        ),
        None => None,
    };
    let observation = result.as_ref().and_then(|r| r.observation_id.clone());
    let rendered = render(
        token,
        &request,
        result.as_ref(),
        &stored.created_at,
        stored.finished_at.as_deref(),
        options,
    )?;
    Ok(Some((rendered, observation)))
}

/// Stores a new submission and runs it as `job`: in the background, or
/// (when `wait`) before answering. Its token. It holds `held` (its request
/// body's and its files' shares of the memory budget) until it has run.
pub(super) async fn submit(
    state: &Arc<AppState>,
    request: StoredRequest,
    job: ProgramJob,
    wait: bool,
    held: Vec<BodyShare>,
) -> Result<String, ApiError> {
    if state.is_draining() {
        return Err(ApiError::draining());
    }
    let token = uuid::Uuid::new_v4().to_string();
    let text = serde_json::to_string(&request).map_err(|e| ApiError::internal(e.to_string()))?;
    let (owner, owner_lock) = this_owner(state);
    store_call(|| {
        state.session().store.insert_submission(
            &token,
            DIALECT,
            &owner,
            owner_lock.as_deref(),
            &text,
        )
    })
    .map_err(|e| ApiError::internal(e.to_string()))?;
    let work = {
        let state = state.clone();
        let token = token.clone();
        async move {
            let _held = held;
            let result = match run(&state, &request, job).await {
                Ok(result) => result,
                // Checked before the submission was stored; a profile
                // limit the request breaks (an argument too long...).
                Err(error) => StoredResult::internal_error(format!(
                    "the program could not be given its input: {}: {}",
                    error.field.unwrap_or_default(),
                    error.message
                )),
            };
            match serde_json::to_string(&result) {
                Ok(text) => {
                    if let Err(error) =
                        store_call(|| state.session().store.finish_submission(&token, &text))
                    {
                        tracing::error!(%token, %error, "could not store a submission's result");
                    }
                }
                Err(error) => tracing::error!(%token, %error, "could not encode a result"),
            }
        }
    };
    // The run is the server's, not the connection's: a `wait=true` client
    // that goes away leaves it running to its stored result (fetchable by
    // token), never a row "In Queue" until a restart.
    let running = state.tracker().spawn(work);
    if wait {
        let _ = running.await;
    }
    Ok(token)
}

/// `POST /submissions`.
pub(super) async fn create(
    State(state): State<Arc<AppState>>,
    Query(query): Query<BTreeMap<String, String>>,
    body: Option<Extension<BodyShare>>,
    body_json: Result<JsonBody<SubmissionRequest>, ApiError>,
) -> Response {
    let request = match body_json {
        Ok(JsonBody(request)) => request,
        Err(error) => return malformed(error),
    };
    let options = match Options::parse(&query) {
        Ok(options) => options,
        Err(error) => return error.into_response(),
    };
    let mut request = match accept(&state, request, options.base64) {
        Ok(request) => request,
        Err(error) => return judge0_error(error),
    };
    let body = body.map(|Extension(share)| share);
    let (files, files_share) = match accept_files(&state, &mut request, body.as_ref()).await {
        Ok(accepted) => accepted,
        Err(error) => return judge0_error(error),
    };
    let job = job_of(&request, files);
    if let Some(refusal) = check_input(&state, &request, &job) {
        return judge0_error(refusal);
    }
    let held = body.into_iter().chain(files_share).collect();
    let token = match submit(&state, request, job, options.wait, held).await {
        Ok(token) => token,
        Err(error) => return error.into_response(),
    };
    if !options.wait {
        return (StatusCode::CREATED, Json(json!({"token": token}))).into_response();
    }
    match store_call(|| load(&state, &token, &options)) {
        Ok(Some((value, observation))) => with_observation(
            (StatusCode::CREATED, Json(value)).into_response(),
            observation,
        ),
        Ok(None) => {
            ApiError::internal(format!("submission {token} was not stored")).into_response()
        }
        Err(error) => error.into_response(),
    }
}

/// A body that is not a submission, refused in Judge0's shape (422
/// `{"FIELD": [...]}`, as its other refusals), not `/v1`'s; a body too
/// large, too slow or not JSON keeps its own status.
fn malformed(error: ApiError) -> Response {
    if error.status == StatusCode::BAD_REQUEST {
        judge0_error(error.with_status(StatusCode::UNPROCESSABLE_ENTITY))
    } else {
        judge0_error(error)
    }
}

/// `GET /submissions/{token}`.
pub(super) async fn get_one(
    State(state): State<Arc<AppState>>,
    Path(token): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let options = match Options::parse(&query) {
        Ok(options) => options,
        Err(error) => return error.into_response(),
    };
    match store_call(|| load(&state, &token, &options)) {
        Ok(Some((value, observation))) => {
            with_observation(Json(value).into_response(), observation)
        }
        Ok(None) => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("no submission with token {token}")})),
        )
            .into_response(),
        Err(error) => error.into_response(),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct BatchRequest {
    pub(super) submissions: Vec<SubmissionRequest>,
}

/// `POST /submissions/batch`: a token (or the item's refusal) per item, in
/// order; with `wait=true`, the finished submissions.
pub(super) async fn create_batch(
    State(state): State<Arc<AppState>>,
    Query(query): Query<BTreeMap<String, String>>,
    body: Option<Extension<BodyShare>>,
    body_json: Result<JsonBody<BatchRequest>, ApiError>,
) -> Response {
    let batch = match body_json {
        Ok(JsonBody(batch)) => batch,
        Err(error) => return malformed(error),
    };
    let options = match Options::parse(&query) {
        Ok(options) => options,
        Err(error) => return error.into_response(),
    };
    let max = state.settings().max_batch_items;
    if batch.submissions.is_empty() {
        return ApiError::bad_field("submissions", "give at least one submission").into_response();
    }
    if batch.submissions.len() > max {
        return ApiError::bad_field(
            "submissions",
            format!(
                "{} submissions; this server accepts at most {max} in one batch ([serve] max_batch_items)",
                batch.submissions.len()
            ),
        )
        .with_status(StatusCode::PAYLOAD_TOO_LARGE)
        .into_response();
    }
    let body = body.map(|Extension(share)| share);
    let items = batch.submissions.into_iter().map(|request| {
        let state = state.clone();
        let body = body.clone();
        async move {
            let mut request = accept(&state, request, options.base64)?;
            let (files, files_share) = accept_files(&state, &mut request, body.as_ref()).await?;
            let job = job_of(&request, files);
            if let Some(refusal) = check_input(&state, &request, &job) {
                return Err(refusal);
            }
            let held = body.into_iter().chain(files_share).collect();
            submit(&state, request, job, options.wait, held).await
        }
    });
    let tokens = futures_util::future::join_all(items).await;
    let mut answers = Vec::with_capacity(tokens.len());
    for token in tokens {
        let answer = match token {
            Ok(token) if options.wait => match store_call(|| load(&state, &token, &options)) {
                Ok(Some((value, _))) => value,
                Ok(None) => json!({"token": token}),
                Err(error) => return error.into_response(),
            },
            Ok(token) => json!({"token": token}),
            Err(error) => match error.field {
                Some(field) => json!({ field: [error.message] }),
                None => json!({"error": error.message}),
            },
        };
        answers.push(answer);
    }
    (StatusCode::CREATED, Json(Value::Array(answers))).into_response()
}

/// `GET /submissions/batch?tokens=...`: `{"submissions": [...]}`, `null`
/// for a token not stored.
pub(super) async fn get_batch(
    State(state): State<Arc<AppState>>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let options = match Options::parse(&query) {
        Ok(options) => options,
        Err(error) => return error.into_response(),
    };
    if options.tokens.is_empty() {
        return ApiError::bad_field("tokens", "give the tokens, separated by commas")
            .into_response();
    }
    if options.tokens.len() > state.settings().max_batch_items {
        return ApiError::bad_field(
            "tokens",
            format!(
                "{} tokens; at most {} at once ([serve] max_batch_items)",
                options.tokens.len(),
                state.settings().max_batch_items
            ),
        )
        .into_response();
    }
    let mut submissions = Vec::with_capacity(options.tokens.len());
    for token in &options.tokens {
        match store_call(|| load(&state, token, &options)) {
            Ok(found) => submissions.push(found.map_or(Value::Null, |(value, _)| value)),
            Err(error) => return error.into_response(),
        }
    }
    Json(json!({"submissions": submissions})).into_response()
}
