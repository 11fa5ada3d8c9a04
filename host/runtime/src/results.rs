//! Result lines: how every face writes a score (DESIGN.md's shape, plus
//! where the evidence came from), so that the CLI's `score`, the Python
//! package and the server's `/v1` answers read the same.

use progscore_scoring::Score;
use progscore_scoring::evidence::ScoreStatus;

/// `true`, `false` or `undetermined`.
pub fn verdict_word(status: ScoreStatus, value: Option<bool>) -> String {
    match (status, value) {
        (ScoreStatus::Complete, Some(true)) => "true".into(),
        (ScoreStatus::Complete, Some(false)) => "false".into(),
        _ => "undetermined".into(),
    }
}

/// The result line of `score`; for a rescore, whether the verdict changed
/// and the previous verdict's word.
pub fn result_line(score: &Score, rescore: Option<(bool, Option<String>)>) -> serde_json::Value {
    let mut line = serde_json::json!({
        "id": score.item_id,
        "status": score.status,
        "value": score.value,
        "rationale": score.rationale,
        "observation_ids": score.observation_ids,
        "cases": score.cases,
        "evidence": score.evidence,
        "score_id": score.score_id,
    });
    if let Some(reason) = &score.reason {
        line["reason"] = serde_json::Value::String(reason.clone());
    }
    if let Some(kind) = score.reason_kind {
        line["reason_kind"] = serde_json::to_value(kind).unwrap_or_default();
    }
    if let Some((changed, previous)) = rescore {
        line["changed"] = serde_json::Value::Bool(changed);
        line["previous"] = previous.map_or(serde_json::Value::Null, serde_json::Value::String);
    }
    line
}
