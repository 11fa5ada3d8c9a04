//! A stored submission rendered as Judge0 answers it: the fields asked
//! for, base64 or text.

use axum::http::HeaderValue;
use axum::response::Response;
use serde_json::{Value, json};

use super::accept::*;
use super::judge::*;
use super::model::*;
use crate::http::error::ApiError;
use crate::jobs::execute::OBSERVATION_HEADER;

/// The Judge0 JSON of a stored submission, with the asked fields only.
pub(super) fn render(
    token: &str,
    request: &StoredRequest,
    result: Option<&StoredResult>,
    created_at: &str,
    finished_at: Option<&str>,
    options: &Options,
) -> Result<Value, ApiError> {
    let status_id = result.map_or(IN_QUEUE, |r| r.status_id);
    let description = STATUSES
        .iter()
        .find(|(id, _)| *id == status_id)
        .map_or("Internal Error", |(_, d)| d);
    let language_name = LANGUAGES
        .iter()
        .find(|(id, _, _)| *id == request.language_id)
        .map_or("", |(_, name, _)| name);
    let mut out = serde_json::Map::new();
    for field in &options.fields {
        let stored_text = |text: Option<&String>| text.cloned();
        let value = match *field {
            "source_code" => text_value(Some(&request.source_code), options.base64, field)?,
            "stdin" => text_value(request.stdin.as_ref(), options.base64, field)?,
            "expected_output" => {
                text_value(request.expected_output.as_ref(), options.base64, field)?
            }
            "command_line_arguments" => json!(request.command_line_arguments),
            "language_id" => json!(request.language_id),
            "language" => json!({"id": request.language_id, "name": language_name}),
            "stdout" => text_value(
                result.and_then(|r| stored_text(r.stdout.as_ref())).as_ref(),
                options.base64,
                field,
            )?,
            "stderr" => text_value(
                result.and_then(|r| stored_text(r.stderr.as_ref())).as_ref(),
                options.base64,
                field,
            )?,
            "compile_output" => text_value(
                result
                    .and_then(|r| stored_text(r.compile_output.as_ref()))
                    .as_ref(),
                options.base64,
                field,
            )?,
            "message" => text_value(
                result
                    .and_then(|r| stored_text(r.message.as_ref()))
                    .as_ref(),
                options.base64,
                field,
            )?,
            "status" => json!({"id": status_id, "description": description}),
            "status_id" => json!(status_id),
            "exit_code" => json!(result.and_then(|r| r.exit_code)),
            "exit_signal" => json!(result.and_then(|r| r.exit_signal)),
            // Judge0 writes times as decimal strings.
            "time" => json!(result.and_then(|r| r.time).map(|t| format!("{t:.3}"))),
            "wall_time" => json!(result.and_then(|r| r.wall_time).map(|t| format!("{t:.3}"))),
            "memory" => json!(result.and_then(|r| r.memory)),
            "token" => json!(token),
            "created_at" => json!(created_at),
            "finished_at" => json!(finished_at),
            _ => Value::Null,
        };
        out.insert((*field).to_string(), value);
    }
    Ok(Value::Object(out))
}

/// A text field: base64 as stored when asked, else UTF-8 (as Judge0, text
/// that is not UTF-8 needs `base64_encoded=true`).
pub(super) fn text_value(
    stored: Option<&String>,
    base64: bool,
    field: &str,
) -> Result<Value, ApiError> {
    let Some(stored) = stored else {
        return Ok(Value::Null);
    };
    if base64 {
        return Ok(json!(stored));
    }
    let bytes = decode(stored).unwrap_or_default();
    String::from_utf8(bytes).map(Value::String).map_err(|_| {
        ApiError::bad_field(
            field,
            "this field cannot be converted to UTF-8: ask with base64_encoded=true",
        )
    })
}

pub(super) fn with_observation(mut response: Response, observation: Option<String>) -> Response {
    if let Some(id) = observation
        && let Ok(value) = HeaderValue::from_str(&id)
    {
        response.headers_mut().insert(OBSERVATION_HEADER, value);
    }
    response
}
