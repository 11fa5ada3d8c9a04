//! From result lines and the evidence store to the report's items.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::SystemTime;

use progscore_sandbox::{ByteString, CapturedStream, InvocationEvent, Outcome};
use progscore_scoring::evidence::{EvidenceStore, Observation, StoreError, StoredScore};
use progscore_scoring::{CaseReport, Condition, ProgramCase, ScoringExpectation, TextCondition};
use serde::Deserialize;

use crate::diff;
use crate::error::ReportError;
use crate::model::{Case, Compile, Item, Limits, Report, Stream, Text};

/// A batch's result lines, as `progscore score` or `rescore` wrote them.
#[derive(Debug, Clone)]
pub struct ResultLines {
    /// Where they came from (a file's path, or a batch's name).
    pub source: String,
    /// Each line's number (from 1) and its JSON.
    pub lines: Vec<(usize, serde_json::Value)>,
}

impl ResultLines {
    /// Reads a results file (JSON lines; blank lines are skipped). A line
    /// that is not a result is an error naming the file and the line.
    pub fn read(path: &Path) -> Result<ResultLines, ReportError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source_error| ReportError::Read {
            path: source.clone(),
            cause: source_error,
        })?;
        let mut lines = Vec::new();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let number = index + 1;
            let value: serde_json::Value =
                serde_json::from_str(line).map_err(|e| ReportError::Line {
                    path: source.clone(),
                    line: number,
                    message: format!("not JSON: {e}"),
                })?;
            if value.get("status").and_then(|s| s.as_str()).is_none() {
                return Err(ReportError::Line {
                    path: source.clone(),
                    line: number,
                    message: "field `status`: missing; is this the output of `progscore score`?"
                        .into(),
                });
            }
            lines.push((number, value));
        }
        if lines.is_empty() {
            return Err(ReportError::Empty { path: source });
        }
        Ok(ResultLines { source, lines })
    }

    /// Result lines already in memory (a batch that just ended).
    pub fn from_values(source: impl Into<String>, values: Vec<serde_json::Value>) -> ResultLines {
        ResultLines {
            source: source.into(),
            lines: values
                .into_iter()
                .enumerate()
                .map(|(i, v)| (i + 1, v))
                .collect(),
        }
    }
}

/// The fields of a result line the report reads.
#[derive(Deserialize)]
struct Line {
    id: Option<String>,
    status: String,
    value: Option<bool>,
    #[serde(default)]
    rationale: String,
    reason: Option<String>,
    reason_kind: Option<String>,
    #[serde(default)]
    observation_ids: Vec<String>,
    #[serde(default)]
    cases: Vec<CaseReport>,
    evidence: Option<String>,
    score_id: Option<i64>,
    previous: Option<String>,
    score: Option<f64>,
    #[serde(default)]
    groups: Vec<serde_json::Value>,
}

fn verdict(status: &str, value: Option<bool>) -> &'static str {
    match (status, value) {
        ("complete", Some(true)) => "true",
        ("complete", Some(false)) => "false",
        _ => "undetermined",
    }
}

fn verdict_word(word: &str) -> Option<&'static str> {
    ["true", "false", "undetermined"]
        .into_iter()
        .find(|known| *known == word)
}

/// Builds the report: each result line with its score, observation and
/// program from `store`. `baseline` (another grading of the same batch)
/// gives each item its verdict before; without one, a rescore's `previous`
/// does. A store fault stops the report (it is no line's fault).
pub fn gather(
    results: &ResultLines,
    baseline: Option<&ResultLines>,
    store: &EvidenceStore,
    limits: Limits,
) -> Result<Report, ReportError> {
    let store_fault = |source: StoreError| ReportError::Store {
        location: store.location().to_string(),
        cause: source,
    };
    let before: Option<HashMap<String, &'static str>> = baseline.map(|baseline| {
        baseline
            .lines
            .iter()
            .filter_map(|(_, value)| {
                let line: Line = serde_json::from_value(value.clone()).ok()?;
                Some((line.id?, verdict(&line.status, line.value)))
            })
            .collect()
    });
    let mut provenances = Provenances::default();
    let mut items = Vec::with_capacity(results.lines.len());
    let mut times: Vec<SystemTime> = Vec::new();
    let mut mismatched_lines = Vec::new();
    for (number, value) in &results.lines {
        let line: Line = serde_json::from_value(value.clone()).map_err(|e| ReportError::Line {
            path: results.source.clone(),
            line: *number,
            message: e.to_string(),
        })?;
        let id = line.id.clone().unwrap_or_else(|| format!("line {number}"));
        let mut notes = Vec::new();
        let score = match line.score_id {
            Some(score_id) => {
                let found = store.score(score_id).map_err(store_fault)?;
                if found.is_none() {
                    notes.push(format!(
                        "score {score_id} is not in the store {}: the evidence is not shown",
                        store.location()
                    ));
                }
                found
            }
            None => None,
        };
        if let Some(time) = score
            .as_ref()
            .and_then(|s| humantime::parse_rfc3339_weak(&s.created_at).ok())
        {
            times.push(time);
        }
        let observation = match line.observation_ids.first() {
            Some(observation_id) => {
                let found = store.observation(observation_id).map_err(store_fault)?;
                if found.is_none() && score.is_some() {
                    notes.push(format!("observation {observation_id} is not in the store"));
                }
                found
            }
            None => None,
        };
        // Ids are only numbers and hashes: a results file read against
        // another store (or edited) names evidence of other items. Shown,
        // it would be another program's code and outputs under this line.
        let (score, observation) = match mismatch(&line, score.as_ref(), observation.as_ref()) {
            None => (score, observation),
            Some(why) => {
                notes.push(format!(
                        "the evidence this line names in the store {} is not its own ({why}): it is not shown; are these results from another store?",
                        store.location()
                    ));
                mismatched_lines.push(*number);
                (None, None)
            }
        };
        let program_sha256 = score
            .as_ref()
            .map(|s| s.record.program_sha256.clone())
            .or_else(|| observation.as_ref().map(|o| o.program_sha256.clone()));
        let program = match &program_sha256 {
            Some(sha256) => store
                .program(sha256)
                .map_err(store_fault)?
                .map(|bytes| text(&bytes, limits.program_bytes)),
            None => None,
        };
        let cases = cases(
            &line,
            score.as_ref(),
            observation.as_ref(),
            limits,
            &mut provenances,
        );
        let compile = observation
            .as_ref()
            .and_then(|o| o.run.compile.as_ref())
            .map(|compile| {
                let event = &compile.event;
                Compile {
                    outcome: event.outcome.kind().to_string(),
                    exit_code: match event.outcome {
                        Outcome::Exited { exit_code } => Some(exit_code),
                        _ => None,
                    },
                    command: event
                        .provenance
                        .as_ref()
                        .map(|p| p.command.clone())
                        .unwrap_or_default(),
                    duration_ms: event.duration_ms,
                    artifact_sha256: compile.artifact_sha256.clone(),
                    stdout: stream(&event.stdout, limits.excerpt_bytes),
                    stderr: stream(&event.stderr, limits.excerpt_bytes),
                }
            });
        let verdict = verdict(&line.status, line.value);
        let before = match &before {
            Some(baseline) => baseline.get(&id).copied(),
            None => line.previous.as_deref().and_then(verdict_word),
        };
        items.push(Item {
            verdict,
            profile: score
                .as_ref()
                .map(|s| s.record.profile.clone())
                .or_else(|| observation.as_ref().map(|o| o.profile.clone()))
                .unwrap_or_else(|| "?".into()),
            rationale: line.rationale.clone(),
            score: line.score,
            groups: line.groups.clone(),
            reason: line.reason.clone(),
            reason_kind: line.reason_kind.clone(),
            score_id: line.score_id,
            evidence: line.evidence.clone(),
            observation_ids: line.observation_ids.clone(),
            duration_ms: cases.iter().map(|c| c.duration_ms).sum(),
            cpu_ms: cases.iter().map(|c| c.cpu_ms).sum(),
            peak_memory_bytes: cases.iter().filter_map(|c| c.peak_memory_bytes).max(),
            program,
            program_sha256,
            before,
            compile,
            cases,
            notes,
            id,
        });
    }
    let span_seconds = match (times.iter().min(), times.iter().max()) {
        (Some(first), Some(last)) => last
            .duration_since(*first)
            .ok()
            .map(|span| span.as_secs_f64()),
        _ => None,
    };
    Ok(Report {
        source: results.source.clone(),
        baseline_source: baseline.map(|b| b.source.clone()),
        store: store.location().to_string(),
        limits,
        items,
        span_seconds,
        provenances: provenances.list,
        mismatched_lines,
    })
}

/// How the stored score and observation a line names fail to be that
/// line's, if they do: the score is of another item, has another verdict or
/// other observations; the observation is not the score's, or ran another
/// program or profile, or another number of cases than the line reports.
fn mismatch(
    line: &Line,
    score: Option<&StoredScore>,
    observation: Option<&Observation>,
) -> Option<String> {
    if let Some(score) = score {
        let record = &score.record;
        if let (Some(id), Some(item)) = (&line.id, &record.item_id)
            && id != item
        {
            return Some(format!("score {} is of item `{item}`", score.id));
        }
        let stored = verdict(record.status.as_str(), record.value);
        let said = verdict(&line.status, line.value);
        if stored != said {
            return Some(format!(
                "score {} is `{stored}`, the line says `{said}`",
                score.id
            ));
        }
        if !line.observation_ids.is_empty() && line.observation_ids != record.observation_ids {
            return Some(format!(
                "score {} used other observations than the line names",
                score.id
            ));
        }
        if let Some(observation) = observation {
            if !record.observation_ids.contains(&observation.id) {
                return Some(format!(
                    "observation {} is not score {}'s",
                    observation.id, score.id
                ));
            }
            if observation.program_sha256 != record.program_sha256
                || observation.profile != record.profile
            {
                return Some(format!(
                    "observation {} ran another program or profile than score {} scored",
                    observation.id, score.id
                ));
            }
        }
    }
    if let Some(observation) = observation
        && !line.cases.is_empty()
        && line.cases.len() != observation.run.events.len()
    {
        return Some(format!(
            "observation {} ran {} case(s), the line reports {}",
            observation.id,
            observation.run.events.len(),
            line.cases.len()
        ));
    }
    None
}

/// Provenances, each kept once: 10,000 items of one profile share one.
#[derive(Default)]
struct Provenances {
    list: Vec<serde_json::Value>,
    index: HashMap<String, usize>,
}

impl Provenances {
    /// The index of `provenance` (without its container), and the container.
    fn add(&mut self, provenance: &serde_json::Value) -> (usize, Option<String>) {
        let mut shared = provenance.clone();
        let container = shared
            .as_object_mut()
            .and_then(|fields| fields.remove("container"))
            .and_then(|c| c.as_str().map(str::to_string));
        let key = shared.to_string();
        let next = self.list.len();
        let index = *self.index.entry(key).or_insert(next);
        if index == next {
            self.list.push(shared);
        }
        (index, container)
    }
}

/// Each case: what the line reported, what was expected, and what the
/// observation saw.
fn cases(
    line: &Line,
    score: Option<&StoredScore>,
    observation: Option<&Observation>,
    limits: Limits,
    provenances: &mut Provenances,
) -> Vec<Case> {
    let expected_cases: Vec<ProgramCase> = score
        .and_then(|s| {
            serde_json::from_value::<ScoringExpectation>(s.record.expectation.clone()).ok()
        })
        .and_then(|expectation| {
            expectation
                .conditions
                .into_iter()
                .next()
                .map(|condition| match condition {
                    Condition::ProgramBehaves(behaves) => behaves.cases,
                })
        })
        .unwrap_or_default();
    let reports: Vec<CaseReport> = if line.cases.is_empty() {
        score
            .and_then(|s| serde_json::from_value(s.record.cases.clone()).ok())
            .unwrap_or_default()
    } else {
        line.cases.clone()
    };
    let count = reports.len().max(expected_cases.len());
    (0..count)
        .map(|index| {
            let report = reports.get(index);
            let expected = expected_cases.get(index);
            let event: Option<&InvocationEvent> = observation.and_then(|o| o.run.events.get(index));
            let invocation = observation
                .and_then(|o| o.invocations.get(index))
                .or(expected.map(|e| &e.invocation));
            let mut conditions = BTreeMap::new();
            let mut diff = None;
            if let Some(expected) = expected {
                for (stream, condition) in [
                    ("stdout", &expected.expected.stdout),
                    ("stderr", &expected.expected.stderr),
                ] {
                    let Some(condition) = condition else { continue };
                    let mut shown = serde_json::to_value(condition).unwrap_or_default();
                    cap_strings(&mut shown, limits.excerpt_bytes);
                    conditions.insert(stream.to_string(), shown);
                    let observed = event.map(|e| match stream {
                        "stdout" => &e.stdout,
                        _ => &e.stderr,
                    });
                    if diff.is_none()
                        && report.and_then(|r| r.matched) == Some(false)
                        && let (Some(wanted), Some(observed)) = (equals_value(condition), observed)
                    {
                        let seen = String::from_utf8_lossy(observed.data.as_bytes());
                        if !diff::same_text(wanted, &seen) {
                            diff = Some(diff::lines(stream, wanted, &seen, limits.diff_lines));
                        }
                    }
                }
                conditions.insert(
                    "exit_code".to_string(),
                    serde_json::Value::from(expected.expected.exit_code),
                );
            }
            let (provenance, container) = match event
                .and_then(|e| e.provenance.as_ref())
                .and_then(|p| serde_json::to_value(p).ok())
            {
                Some(value) => {
                    let (index, container) = provenances.add(&value);
                    (Some(index), container)
                }
                None => (None, None),
            };
            Case {
                args: invocation.map(|i| i.args.clone()).unwrap_or_default(),
                stdin: invocation
                    .and_then(|i| i.stdin.as_ref())
                    .map(|stdin: &ByteString| text(stdin.as_bytes(), limits.excerpt_bytes)),
                expected: conditions,
                outcome: report
                    .map(|r| r.outcome.clone())
                    .unwrap_or_else(|| "unknown".into()),
                exit_code: report.and_then(|r| r.exit_code),
                matched: report.and_then(|r| r.matched),
                // What the checker said, beside why the case failed.
                detail: report.and_then(|r| match (&r.detail, &r.checker) {
                    (Some(detail), Some(checker)) => Some(format!("{detail} (checker: {checker})")),
                    (None, Some(checker)) => Some(format!("checker: {checker}")),
                    (detail, None) => detail.clone(),
                }),
                duration_ms: report.map_or(0, |r| r.duration_ms),
                cpu_ms: report.and_then(|r| r.cpu_ms),
                peak_memory_bytes: report.and_then(|r| r.peak_memory_bytes),
                stdout: event.map(|e| stream(&e.stdout, limits.excerpt_bytes)),
                stderr: event.map(|e| stream(&e.stderr, limits.excerpt_bytes)),
                diff,
                provenance,
                container,
                behaviour: event.and_then(|e| e.behaviour.clone()),
                conversation: observation.and_then(|o| {
                    let interaction = o.run.interaction.as_deref()?;
                    conversation(interaction, index, event?, limits.excerpt_bytes)
                }),
            }
        })
        .collect()
}

/// Writes of a conversation shown, at most.
const SHOWN_TURNS: usize = 200;

/// Case `index`'s conversation: each write's bytes taken, in order, from
/// its writer's kept stdout.
fn conversation(
    interaction: &progscore_sandbox::Interaction,
    index: usize,
    program: &InvocationEvent,
    cap: usize,
) -> Option<crate::model::Conversation> {
    use progscore_sandbox::Side;
    let transcript = interaction.transcripts.get(index)?;
    let interactor = interaction.interactor.events.get(index);
    let program_kept = program.stdout.data.as_bytes();
    let interactor_kept = interactor.map_or(&[][..], |e| e.stdout.data.as_bytes());
    let (mut program_at, mut interactor_at) = (0usize, 0usize);
    let mut shown_bytes = 0usize;
    let mut turns = Vec::new();
    let mut cut = program.stdout.truncated
        || interactor.is_some_and(|e| e.stdout.truncated)
        || transcript.turns_dropped > 0;
    for turn in &transcript.turns {
        let (kept, at, from) = match turn.from {
            Side::Program => (program_kept, &mut program_at, "program"),
            Side::Interactor => (interactor_kept, &mut interactor_at, "interactor"),
        };
        let start = (*at).min(kept.len());
        let end = (*at + turn.bytes as usize).min(kept.len());
        *at += turn.bytes as usize;
        if end - start < turn.bytes as usize {
            cut = true;
        }
        if turns.len() >= SHOWN_TURNS || shown_bytes >= cap {
            continue;
        }
        shown_bytes += end - start;
        turns.push(crate::model::ConversationTurn {
            from,
            at_ms: turn.at_us as f64 / 1000.0,
            text: String::from_utf8_lossy(&kept[start..end]).into_owned(),
            bytes: turn.bytes,
        });
    }
    Some(crate::model::Conversation {
        total_turns: transcript.turns.len() as u64 + transcript.turns_dropped,
        turns,
        cut,
        program_ended_ms: transcript.program_ended_us.map(|us| us as f64 / 1000.0),
        interactor_ended_ms: transcript.interactor_ended_us.map(|us| us as f64 / 1000.0),
        interactor_outcome: interactor
            .map_or("not recorded", |e| e.outcome.kind())
            .to_string(),
        interactor_exit_code: interactor.and_then(|e| match e.outcome {
            progscore_sandbox::Outcome::Exited { exit_code } => Some(exit_code),
            _ => None,
        }),
        interactor_stderr: interactor.map(|e| stream(&e.stderr, cap)),
    })
}

/// Cuts every string in `value` longer than `cap` bytes (an expected
/// output can be as long as the output), saying where.
fn cap_strings(value: &mut serde_json::Value, cap: usize) {
    match value {
        serde_json::Value::String(text) if text.len() > cap => {
            let mut end = cap;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let total = text.len();
            text.truncate(end);
            text.push_str(&format!(
                "\u{2026} [the page shows the first {end} of {total} bytes]"
            ));
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| cap_strings(v, cap)),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(|v| cap_strings(v, cap)),
        _ => {}
    }
}

/// The expected text of an `equals` condition.
fn equals_value(condition: &TextCondition) -> Option<&str> {
    (condition.comparator == "equals")
        .then(|| condition.params.get("value").and_then(|v| v.as_str()))
        .flatten()
}

fn stream(captured: &CapturedStream, cap: usize) -> Stream {
    let bytes = captured.data.as_bytes();
    Stream {
        shown: text(bytes, cap),
        kept_bytes: bytes.len() as u64,
        total_bytes: captured.total_bytes,
        truncated: captured.truncated,
    }
}

/// The first `cap` bytes as text, cut at a character boundary.
fn text(bytes: &[u8], cap: usize) -> Text {
    let shown = &bytes[..bytes.len().min(cap)];
    let binary = std::str::from_utf8(bytes).is_err();
    let mut text = String::from_utf8_lossy(shown).into_owned();
    if shown.len() < bytes.len() && !binary {
        // A multi-byte character cut in two shows as a replacement at the end.
        while text.ends_with('\u{FFFD}') {
            text.pop();
        }
    }
    Text {
        text,
        bytes: bytes.len() as u64,
        cut: shown.len() < bytes.len(),
        binary,
    }
}
