//! Judge0's informational routes: `/languages`, `/statuses`, `/about`,
//! `/config_info`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::model::*;
use crate::state::AppState;

/// `GET /languages`.
pub(super) async fn languages(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(Value::Array(
        served_languages(&state)
            .into_iter()
            .map(|(id, name, profile)| json!({"id": id, "name": format!("{name} (progscore profile {profile})")}))
            .collect(),
    ))
}

/// `GET /languages/{id}`.
pub(super) async fn language(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Response {
    let found = id.parse::<i64>().ok().and_then(|id| {
        served_languages(&state)
            .into_iter()
            .find(|(served, _, _)| *served == id)
    });
    match found {
        Some((id, name, profile)) => Json(json!({
            "id": id,
            "name": format!("{name} (progscore profile {profile})"),
            "is_archived": false,
            "source_file": null,
            "compile_cmd": null,
            "run_cmd": null,
        }))
        .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("no served language with id {id}")})),
        )
            .into_response(),
    }
}

/// `GET /statuses`.
pub(super) async fn statuses() -> Json<Value> {
    Json(Value::Array(
        STATUSES
            .iter()
            .map(|(id, description)| json!({"id": id, "description": description}))
            .collect(),
    ))
}

/// `GET /about`: the Judge0 version whose language ids are served.
pub(super) async fn about() -> Json<Value> {
    Json(json!({
        "version": JUDGE0_VERSION,
        "homepage": "https://github.com/progscore/progscore",
        "source_code": "https://github.com/progscore/progscore",
        "maintainer": format!("progscore {} (Judge0 CE {JUDGE0_VERSION} compatible API)", env!("CARGO_PKG_VERSION")),
    }))
}

/// `GET /config_info`: Judge0's configuration keys, as progscore applies
/// them: the `max_*` keys are `[serve]`'s per-request maxima; a submission
/// without limits runs under its profile's.
pub(super) async fn config_info(State(state): State<Arc<AppState>>) -> Json<Value> {
    let settings = state.settings();
    let maxima = settings.request_limits;
    let max_cpu_time = maxima.cpu_time.as_secs_f64();
    let max_wall_time = maxima.timeout.as_secs_f64();
    let max_memory_kb = maxima.memory / 1024;
    Json(json!({
        "maintenance_mode": false,
        "enable_wait_result": true,
        "enable_compiler_options": false,
        "allowed_languages_for_compile_options": [],
        "enable_command_line_arguments": true,
        "enable_submission_delete": false,
        "enable_callbacks": false,
        "callbacks_max_tries": 0,
        "callbacks_timeout": 0.0,
        "enable_additional_files": true,
        "max_queue_size": settings.queue,
        "cpu_time_limit": max_cpu_time.min(5.0),
        "max_cpu_time_limit": max_cpu_time,
        "cpu_extra_time": 0.0,
        "max_cpu_extra_time": 0.0,
        "wall_time_limit": max_wall_time.min(10.0),
        "max_wall_time_limit": max_wall_time,
        "memory_limit": max_memory_kb.min(262144),
        "max_memory_limit": max_memory_kb,
        "stack_limit": 65536,
        "max_stack_limit": 65536,
        "max_processes_and_or_threads": maxima.pids.min(64),
        "max_max_processes_and_or_threads": maxima.pids,
        "enable_per_process_and_thread_time_limit": false,
        "allow_enable_per_process_and_thread_time_limit": false,
        "enable_per_process_and_thread_memory_limit": false,
        "allow_enable_per_process_and_thread_memory_limit": false,
        "max_file_size": 1024,
        "max_max_file_size": 1024,
        "number_of_runs": 1,
        "max_number_of_runs": 1,
        "redirect_stderr_to_stdout": false,
        "max_extract_size": 0,
        "enable_batched_submissions": true,
        "max_submission_batch_size": settings.max_batch_items,
        "submission_cache_duration": 0.0,
        "use_docs_as_homepage": false,
        "allow_enable_network": false,
        "enable_network": false,
    }))
}
