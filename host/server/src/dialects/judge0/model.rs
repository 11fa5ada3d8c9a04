//! What Judge0's dialect shares across its rooms: its version, languages,
//! statuses and fields, the query options it takes, its error shapes, and
//! the served languages.

use std::collections::BTreeMap;

use axum::Json;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::http::error::ApiError;
use crate::state::AppState;

/// The dialect's name in the submissions table.
pub(super) const DIALECT: &str = "judge0";

/// The Judge0 CE version whose language ids are served (the SDK maps its
/// language aliases by this version).
pub(super) const JUDGE0_VERSION: &str = "1.13.1";

/// Judge0 CE 1.13.1's language ids, their names there, and the progscore
/// language name each stands for. An id is listed by `/languages` when its
/// language name is a served profile (or a `[languages]` name of one).
pub(super) const LANGUAGES: &[(i64, &str, &str)] = &[
    (46, "Bash", "bash"),
    (50, "C (GCC)", "c"),
    (51, "C# (Mono)", "csharp"),
    (52, "C++ (GCC)", "cpp"),
    (53, "C++ (GCC)", "cpp"),
    (54, "C++ (GCC)", "cpp"),
    (56, "D (DMD)", "d"),
    (60, "Go", "go"),
    (62, "Java (OpenJDK)", "java"),
    (63, "JavaScript (Node.js)", "javascript"),
    (64, "Lua", "lua"),
    (68, "PHP", "php"),
    (71, "Python (3)", "python"),
    (72, "Ruby", "ruby"),
    (73, "Rust", "rust"),
    (74, "TypeScript", "typescript"),
    (80, "R", "r"),
    (81, "Scala", "scala"),
    (85, "Perl", "perl"),
];

/// Judge0's statuses.
pub(super) const STATUSES: &[(i64, &str)] = &[
    (1, "In Queue"),
    (2, "Processing"),
    (3, "Accepted"),
    (4, "Wrong Answer"),
    (5, "Time Limit Exceeded"),
    (6, "Compilation Error"),
    (7, "Runtime Error (SIGSEGV)"),
    (8, "Runtime Error (SIGXFSZ)"),
    (9, "Runtime Error (SIGFPE)"),
    (10, "Runtime Error (SIGABRT)"),
    (11, "Runtime Error (NZEC)"),
    (12, "Runtime Error (Other)"),
    (13, "Internal Error"),
    (14, "Exec Format Error"),
];
pub(super) const IN_QUEUE: i64 = 1;
pub(super) const ACCEPTED: i64 = 3;
pub(super) const WRONG_ANSWER: i64 = 4;
pub(super) const TIME_LIMIT_EXCEEDED: i64 = 5;
pub(super) const COMPILATION_ERROR: i64 = 6;
pub(super) const NZEC: i64 = 11;
pub(super) const RUNTIME_ERROR_OTHER: i64 = 12;
pub(super) const INTERNAL_ERROR: i64 = 13;

/// What `GET /submissions/{token}` returns without `fields`, as Judge0.
pub(super) const DEFAULT_FIELDS: &[&str] = &[
    "token",
    "time",
    "memory",
    "stdout",
    "stderr",
    "compile_output",
    "message",
    "status",
];

/// Every field a submission has.
pub(super) const ALL_FIELDS: &[&str] = &[
    "source_code",
    "language_id",
    "stdin",
    "expected_output",
    "command_line_arguments",
    "stdout",
    "stderr",
    "compile_output",
    "message",
    "status",
    "status_id",
    "exit_code",
    "exit_signal",
    "time",
    "wall_time",
    "memory",
    "token",
    "created_at",
    "finished_at",
    "language",
];

/// A refusal in Judge0's shape: `{"FIELD": ["what is wrong"]}` with 422,
/// as its clients read validation errors.
pub(super) fn unprocessable(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::bad_field(field, message).with_status(StatusCode::UNPROCESSABLE_ENTITY)
}

pub(super) fn judge0_error(error: ApiError) -> Response {
    let Some(field) = error.field.clone() else {
        return error.into_response();
    };
    let mut response = (error.status, Json(json!({ field: [error.message] }))).into_response();
    if let Some(after) = error.retry_after
        && let Ok(value) = HeaderValue::from_str(&after.as_secs().max(1).to_string())
    {
        response
            .headers_mut()
            .insert(axum::http::header::RETRY_AFTER, value);
    }
    response
}

/// The query options Judge0 takes (`base64_encoded`, `wait`, `fields`,
/// `tokens`), each checked by name.
pub(super) struct Options {
    pub(super) base64: bool,
    pub(super) wait: bool,
    pub(super) fields: Vec<&'static str>,
    pub(super) tokens: Vec<String>,
}

impl Options {
    pub(super) fn parse(query: &BTreeMap<String, String>) -> Result<Options, ApiError> {
        let flag = |name: &str| -> Result<bool, ApiError> {
            match query.get(name).map(String::as_str) {
                None | Some("false") | Some("") => Ok(false),
                Some("true") => Ok(true),
                Some(other) => Err(ApiError::bad_field(
                    name,
                    format!("`{other}` is not a boolean (true or false)"),
                )),
            }
        };
        let fields = match query.get("fields").map(String::as_str) {
            None | Some("") => DEFAULT_FIELDS.to_vec(),
            Some("*") => ALL_FIELDS.to_vec(),
            Some(list) => {
                let mut fields = Vec::new();
                let mut unknown = Vec::new();
                for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    match ALL_FIELDS.iter().find(|known| **known == name) {
                        Some(known) => fields.push(*known),
                        None => unknown.push(name.to_string()),
                    }
                }
                if !unknown.is_empty() {
                    return Err(ApiError::bad_field(
                        "fields",
                        format!("invalid fields: [{}]", unknown.join(", ")),
                    ));
                }
                fields
            }
        };
        let tokens = query
            .get("tokens")
            .map(|list| {
                list.split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        Ok(Options {
            base64: flag("base64_encoded")?,
            wait: flag("wait")?,
            fields,
            tokens,
        })
    }
}

/// The served Judge0 languages: id, Judge0 name, progscore profile.
pub(super) fn served_languages(state: &AppState) -> Vec<(i64, &'static str, String)> {
    LANGUAGES
        .iter()
        .filter_map(|(id, name, language)| {
            state
                .language_profile(language)
                .map(|profile| (*id, *name, profile.to_string()))
        })
        .collect()
}

pub(super) fn served_language(state: &AppState, id: i64) -> Option<String> {
    served_languages(state)
        .into_iter()
        .find(|(served, _, _)| *served == id)
        .map(|(_, _, profile)| profile)
}
