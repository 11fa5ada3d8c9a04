//! The records the store keeps.

use progscore_sandbox::{Invocation, ProgramRun, canonical_json, sha256_hex};
use serde::{Deserialize, Serialize};

/// What one sandbox run showed: the request (program, profile, invocations)
/// and everything that came back. Immutable once stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// `obs-…`; derived from the attempt key for a clean run, fresh for a run
    /// with a sandbox fault or a forced fresh run.
    pub id: String,
    /// sha256 of the canonical attempt (source, program, profile fingerprint,
    /// invocations); observations of one attempt share it.
    pub attempt_key: String,
    /// Which evidence source made it (e.g. `program_execution/v1`).
    pub source: String,
    /// The profile's name.
    pub profile: String,
    /// The profile's full fingerprint (artifact, command, runtime, limits), as
    /// JSON, so the record says what ran even if the config changes later.
    pub profile_fingerprint: serde_json::Value,
    /// sha256 of the program's bytes.
    pub program_sha256: String,
    /// The invocations, in order.
    pub invocations: Vec<Invocation>,
    /// What the sandbox returned.
    pub run: ProgramRun,
    /// When the run finished (RFC 3339, UTC).
    pub created_at: String,
}

impl Observation {
    /// The whole record as canonical JSON: the form that is hashed and compared.
    pub fn canonical_json(&self) -> Result<String, serde_json::Error> {
        canonical_json(self)
    }

    /// sha256 of [`Self::canonical_json`]; stored beside the row so a row
    /// edited outside progscore is detected when read.
    pub fn record_sha256(&self) -> Result<String, serde_json::Error> {
        Ok(sha256_hex(self.canonical_json()?.as_bytes()))
    }

    /// sha256 of the canonical profile fingerprint (equals
    /// `RuntimeProfile::fingerprint()` for the profile that ran).
    pub fn profile_fingerprint_sha256(&self) -> Result<String, serde_json::Error> {
        Ok(sha256_hex(
            canonical_json(&self.profile_fingerprint)?.as_bytes(),
        ))
    }

    /// Checks that the run inside agrees with the request around it.
    pub(crate) fn check_consistent(&self) -> Result<(), String> {
        if self.run.profile != self.profile {
            return Err(format!(
                "run profile `{}` differs from observation profile `{}`",
                self.run.profile, self.profile
            ));
        }
        if self.run.program_sha256 != self.program_sha256 {
            return Err("run program sha256 differs from the observation's".into());
        }
        if self.run.events.len() != self.invocations.len() {
            return Err(format!(
                "{} event(s) for {} invocation(s)",
                self.run.events.len(),
                self.invocations.len()
            ));
        }
        Ok(())
    }
}

/// One observation as listed (no output bytes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObservationSummary {
    /// The id.
    pub id: String,
    /// The attempt key.
    pub attempt_key: String,
    /// The profile's name.
    pub profile: String,
    /// The program's sha256.
    pub program_sha256: String,
    /// Number of invocations.
    pub invocations: usize,
    /// Each event's outcome kind (`exited`, `timed_out`, ...), in order.
    pub outcomes: Vec<String>,
    /// Whether any event proves nothing about the program (a sandbox error,
    /// not run, an unconfirmed timeout): such a run is never reused.
    pub unproven: bool,
    /// When it was recorded.
    pub created_at: String,
    /// How many scores link to it.
    pub scores: u64,
}

/// Whether a score has a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreStatus {
    /// `value` is `true` or `false`.
    Complete,
    /// No value: the evidence does not decide (sandbox fault, comparator
    /// could not decide, no evidence).
    Undetermined,
}

impl ScoreStatus {
    /// As written in the store and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ScoreStatus::Complete => "complete",
            ScoreStatus::Undetermined => "undetermined",
        }
    }
}

/// How a score came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreOrigin {
    /// By scoring a program (running it, or reusing its attempt's evidence).
    Execute,
    /// By replaying one named observation against an expectation.
    Replay,
    /// By re-grading an item from stored evidence only.
    Rescore,
}

impl ScoreOrigin {
    /// As written in the store and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ScoreOrigin::Execute => "execute",
            ScoreOrigin::Replay => "replay",
            ScoreOrigin::Rescore => "rescore",
        }
    }
}

/// A verdict as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreRecord {
    /// The caller's item id or label (a batch line's `id`), if any.
    pub item_id: Option<String>,
    /// How it came about.
    pub origin: ScoreOrigin,
    /// The program scored.
    pub program_sha256: String,
    /// The profile named by the expectation.
    pub profile: String,
    /// The expectation scored against, as canonical JSON value.
    pub expectation: serde_json::Value,
    /// sha256 of the expectation's canonical JSON.
    pub expectation_sha256: String,
    /// Complete or undetermined.
    pub status: ScoreStatus,
    /// `Some` exactly when complete.
    pub value: Option<bool>,
    /// The stable human sentence.
    pub rationale: String,
    /// Why it is undetermined (or the failing clause), if anything.
    pub reason: Option<String>,
    /// Per-case details (JSON array).
    pub cases: serde_json::Value,
    /// The observations used, in order.
    pub observation_ids: Vec<String>,
    /// The item's score in [0, 1] under its expectation's policy, when
    /// decided (none in rows written before scores were kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Per group, under the `groups` policy (JSON array).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_groups: Option<serde_json::Value>,
}

impl ScoreRecord {
    pub(crate) fn check_consistent(&self) -> Result<(), String> {
        match (self.status, self.value) {
            (ScoreStatus::Complete, Some(_)) | (ScoreStatus::Undetermined, None) => {
                Ok::<(), String>(())
            }
            (ScoreStatus::Complete, None) => Err("a complete score needs a value".into()),
            (ScoreStatus::Undetermined, Some(_)) => {
                Err("an undetermined score must not have a value".into())
            }
        }?;
        match self.score {
            Some(score) if !(0.0..=1.0).contains(&score) => {
                Err(format!("a score is in [0, 1], not {score}"))
            }
            Some(_) if self.status == ScoreStatus::Undetermined => {
                Err("an undetermined score must not have a number".into())
            }
            _ => Ok(()),
        }
    }
}

/// A score as read back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredScore {
    /// The store's id for it (increasing).
    pub id: i64,
    /// When it was recorded (RFC 3339, UTC).
    pub created_at: String,
    /// The record.
    #[serde(flatten)]
    pub record: ScoreRecord,
}
