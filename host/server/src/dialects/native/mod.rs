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

mod items;
mod run;
mod score;
mod stored;

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};

use self::run::run;
use self::score::{batches, score};
use self::stored::{observation, replay, rescore};
use crate::state::AppState;

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
