//! Result lines: how every face writes a score (DESIGN.md's shape, plus
//! where the evidence came from), so that the CLI's `score`, the Python
//! package and the server's `/v1` answers read the same.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use progscore_scoring::evidence::ScoreStatus;
use progscore_scoring::{Condition, ReasonKind, Score};

/// `true`, `false` or `undetermined`.
pub fn verdict_word(status: ScoreStatus, value: Option<bool>) -> String {
    match (status, value) {
        (ScoreStatus::Complete, Some(true)) => "true".into(),
        (ScoreStatus::Complete, Some(false)) => "false".into(),
        _ => "undetermined".into(),
    }
}

/// The verdict's word, with its score when the score says more than the
/// word (a partial score): `false (score 0.7500)`.
pub fn verdict_and_score(status: ScoreStatus, value: Option<bool>, score: Option<f64>) -> String {
    let word = verdict_word(status, value);
    match (score, value) {
        (Some(score), Some(value)) if score != if value { 1.0 } else { 0.0 } => {
            format!("{word} (score {score:.4})")
        }
        _ => word,
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
    if let Some(number) = score.score {
        line["score"] = serde_json::json!(number);
    }
    if !score.groups.is_empty() {
        line["groups"] = serde_json::to_value(&score.groups).unwrap_or_default();
    }
    if let Some((changed, previous)) = rescore {
        line["changed"] = serde_json::Value::Bool(changed);
        line["previous"] = previous.map_or(serde_json::Value::Null, serde_json::Value::String);
    }
    line
}

/// What a batch came to: verdicts by kind, and what was not scored.
#[derive(Debug, Default)]
pub struct Summary {
    /// Verdicts true.
    pub trues: usize,
    /// Verdicts false.
    pub falses: usize,
    /// Verdicts undetermined.
    pub undetermined: usize,
    /// Items that failed (not a verdict).
    pub errors: usize,
    /// Items cancelled before their end.
    pub cancelled: usize,
    /// Refused by the sandbox (a profile that cannot run, an engine gone).
    pub not_scored: usize,
    /// Undetermined verdicts by kind: how many, and the first reason seen.
    pub reasons: BTreeMap<ReasonKind, (usize, String)>,
    /// The decided items' scores summed (their mean is the batch's score).
    pub score_sum: f64,
    /// Items scored under a policy other than `all_pass`: the summary then
    /// shows the mean score.
    pub policy_scored: usize,
}

/// How far a batch has come: what a progress display shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Items finished one way or another.
    pub done: usize,
    /// Verdicts true.
    pub trues: usize,
    /// Verdicts false.
    pub falses: usize,
    /// Verdicts undetermined.
    pub undetermined: usize,
}

impl Summary {
    /// How far the batch has come.
    pub fn counts(&self) -> Counts {
        Counts {
            done: self.done(),
            trues: self.trues,
            falses: self.falses,
            undetermined: self.undetermined,
        }
    }

    /// Counts a score's verdict.
    pub fn add(&mut self, score: &Score) {
        if let Some(number) = score.score {
            self.score_sum += number;
        }
        let by_policy = score.expectation.conditions.iter().any(|condition| {
            let Condition::ProgramBehaves(behaves) = condition;
            behaves.score.as_ref().is_some_and(|p| !p.is_all_pass())
        });
        if by_policy {
            self.policy_scored += 1;
        }
        match score.value {
            Some(true) => self.trues += 1,
            Some(false) => self.falses += 1,
            None => {
                self.undetermined += 1;
                // Grouped by kind: reasons name containers and figures.
                let kind = score.reason_kind.unwrap_or(ReasonKind::SandboxError);
                let example = score
                    .reason
                    .clone()
                    .unwrap_or_else(|| score.rationale.clone());
                self.reasons.entry(kind).or_insert((0, example)).0 += 1;
            }
        }
    }

    /// Items with a verdict.
    pub fn scored(&self) -> usize {
        self.trues + self.falses + self.undetermined
    }

    /// Items finished one way or another.
    pub fn done(&self) -> usize {
        self.scored() + self.errors + self.not_scored
    }

    /// The summary as the CLI prints it on stderr.
    pub fn render(&self, wall: Duration, bad_lines: usize) -> String {
        let mut out = String::new();
        let secs = wall.as_secs_f64().max(1e-9);
        out.push('\n');
        let _ = writeln!(out, "  {:<14} {:>7}", "true", self.trues);
        let _ = writeln!(out, "  {:<14} {:>7}", "false", self.falses);
        let _ = writeln!(out, "  {:<14} {:>7}", "undetermined", self.undetermined);
        let decided = self.trues + self.falses;
        if self.policy_scored > 0 && decided > 0 {
            // Partial scores: their mean over the decided items says more
            // than the count of full marks.
            let _ = writeln!(
                out,
                "  {:<14} {:>7.4}",
                "mean score",
                self.score_sum / decided as f64
            );
        }
        if self.errors > 0 {
            let _ = writeln!(out, "  {:<14} {:>7}", "errors", self.errors);
        }
        if bad_lines > 0 {
            let _ = writeln!(out, "  {:<14} {:>7}", "bad lines", bad_lines);
        }
        if self.cancelled + self.not_scored > 0 {
            let _ = writeln!(
                out,
                "  {:<14} {:>7}",
                "not scored",
                self.cancelled + self.not_scored
            );
        }
        let _ = writeln!(out, "  {:<14} {:>7.2} s", "wall time", secs);
        let _ = writeln!(
            out,
            "  {:<14} {:>7.2}",
            "programs/s",
            self.scored() as f64 / secs
        );
        if !self.reasons.is_empty() {
            let mut reasons: Vec<_> = self.reasons.iter().collect();
            reasons.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
            let _ = writeln!(out, "  undetermined, by reason:");
            for (kind, (count, example)) in reasons {
                let _ = writeln!(
                    out,
                    "    {count:>5}  {} (e.g. {})",
                    kind.describe(),
                    shorten(example, 160)
                );
            }
        }
        out
    }

    /// The summary on stderr.
    pub fn print(&self, wall: Duration, bad_lines: usize) {
        eprint!("{}", self.render(wall, bad_lines));
    }
}

/// The first `max` characters of `text`, marked when cut.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}
