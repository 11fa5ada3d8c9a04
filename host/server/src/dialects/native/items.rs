//! What this API's requests share: a batch item checked against the served
//! profiles and made a job, its parts named by their JSON paths, the
//! `?fresh` option, and the lines answered for a bad line and a batch's end.

use progscore_runtime::batch::{BatchItem, BatchLineError};
use progscore_runtime::results::Summary;
use progscore_scoring::{Condition, ProgramBehaves};
use serde::Deserialize;

use crate::http::error::ApiError;
use crate::jobs::execute::{Part, ProgramJob, RequestLimits};
use crate::state::AppState;

/// What `/v1/batches` and `/v1/rescore` call the request body in messages.
pub(super) const SENT: &str = "request";
/// Options in the query string.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Options {
    /// Run again even where evidence is stored.
    #[serde(default)]
    pub(super) fresh: bool,
}
/// The last line: what the batch came to, and why it stopped early if it
/// did.
pub(super) fn summary_line(
    summary: &Summary,
    bad_lines: usize,
    stopped: Option<&str>,
) -> serde_json::Value {
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
/// A parsed batch item checked as `score` checks it, and its profile
/// served here: its one `program_behaves`.
pub(super) fn check_item<'a>(
    state: &AppState,
    item: &'a BatchItem,
) -> Result<&'a ProgramBehaves, ApiError> {
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
pub(super) fn item_job(
    state: &AppState,
    item: BatchItem,
    fresh: bool,
) -> Result<ProgramJob, ApiError> {
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
pub(super) fn item_field(part: Part) -> String {
    let cases = "expectation.conditions[0].program_behaves.cases";
    match part {
        Part::Program => "program".into(),
        Part::Invocations => cases.into(),
        Part::Args(i) => format!("{cases}[{i}].invocation.args"),
        Part::Stdin(i) => format!("{cases}[{i}].invocation.stdin"),
        Part::Limit(limit) => format!("expectation.conditions[0].program_behaves.{}", limit.path()),
    }
}

pub(super) fn unknown_profile(state: &AppState, field: &str, name: &str) -> ApiError {
    ApiError::bad_field(
        field,
        format!(
            "profile `{name}` is not served here (served: {})",
            state.served_names().join(", ")
        ),
    )
}

/// A bad batch line as a 400.
pub(super) fn line_error(error: BatchLineError) -> ApiError {
    ApiError::bad_field(error.field.unwrap_or_else(|| "body".into()), error.message)
}

/// A bad batch line as an NDJSON line.
pub(super) fn error_line(error: &BatchLineError) -> serde_json::Value {
    serde_json::json!({
        "line": error.line,
        "id": error.id,
        "field": error.field,
        "error": error.message,
    })
}
