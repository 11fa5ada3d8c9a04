//! What callers ask the scorer and the replayer for, and what they get back.

use progscore_evidence::{Observation, ScoreStatus, StoredScore};
use progscore_sandbox::CaseSink;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::expectation::ScoringExpectation;
use crate::score_policy::GroupScore;
use crate::source::EvidenceUse;
use crate::verdict::{CaseReport, ReasonKind};

/// A program to score.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgramInput {
    /// The program's bytes, run verbatim (and stored with its evidence).
    Inline(Vec<u8>),
    /// A program already in the store, by its sha256.
    Stored {
        /// Its sha256 (the programs table's id).
        sha256: String,
    },
}

/// A request to score one program.
#[derive(Debug, Clone)]
pub struct ScoreRequest {
    /// The caller's id or label for the item (a batch line's `id`).
    pub item_id: Option<String>,
    /// The program.
    pub program: ProgramInput,
    /// What it must do.
    pub expectation: ScoringExpectation,
    /// Run again under a new observation id even if evidence is stored.
    pub fresh: bool,
    /// Cancels this caller's wait (and the run, if no other caller waits for it).
    pub cancel: CancellationToken,
    /// Told each case's event as the backend decides it, when this request
    /// starts a new run (a stored or joined run tells nothing).
    pub on_case: Option<CaseSink>,
}

impl ScoreRequest {
    /// A request with no item id, not fresh, never cancelled.
    pub fn new(program: ProgramInput, expectation: ScoringExpectation) -> Self {
        ScoreRequest {
            item_id: None,
            program,
            expectation,
            fresh: false,
            cancel: CancellationToken::new(),
            on_case: None,
        }
    }

    /// Tells each case's event to `sink` as the run decides it.
    pub fn on_case(mut self, sink: CaseSink) -> Self {
        self.on_case = Some(sink);
        self
    }

    /// Sets the item id.
    pub fn item_id(mut self, item_id: impl Into<String>) -> Self {
        self.item_id = Some(item_id.into());
        self
    }

    /// Sets `fresh`.
    pub fn fresh(mut self, fresh: bool) -> Self {
        self.fresh = fresh;
        self
    }

    /// Sets the cancellation token.
    pub fn cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }
}

/// Which observation to replay.
#[derive(Debug, Clone, PartialEq)]
pub enum ObservationRef {
    /// The stored observation with this id.
    Id(String),
    /// This observation, which must be identical to the stored copy of its id.
    Given(Box<Observation>),
}

/// A request to score a stored observation against an expectation.
#[derive(Debug, Clone)]
pub struct ReplayRequest {
    /// The caller's id or label for the item.
    pub item_id: Option<String>,
    /// The observation.
    pub observation: ObservationRef,
    /// The expectation; its profile and invocations must be the observation's.
    pub expectation: ScoringExpectation,
}

/// A request to re-grade an item from stored evidence only.
#[derive(Debug, Clone)]
pub struct RescoreRequest {
    /// The item's id (its last score is returned for comparison).
    pub item_id: Option<String>,
    /// The program (only its sha256 is used; nothing runs).
    pub program: ProgramInput,
    /// The (possibly changed) expectation.
    pub expectation: ScoringExpectation,
}

/// One score, as returned and as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    /// The store's id for the score.
    pub score_id: i64,
    /// The caller's item id.
    pub item_id: Option<String>,
    /// Complete or undetermined.
    pub status: ScoreStatus,
    /// `Some(true|false)` exactly when complete.
    pub value: Option<bool>,
    /// The stable human sentence.
    pub rationale: String,
    /// Why it is undetermined.
    pub reason: Option<String>,
    /// The kind of that reason, for grouping (none when complete).
    pub reason_kind: Option<ReasonKind>,
    /// The item's score in [0, 1] under the expectation's policy, when
    /// decided (`all_pass`: 1 or 0 with the value).
    pub score: Option<f64>,
    /// Per group, under the `groups` policy.
    pub groups: Vec<GroupScore>,
    /// The observations used.
    pub observation_ids: Vec<String>,
    /// One report per case.
    pub cases: Vec<CaseReport>,
    /// The profile the expectation named.
    pub profile: String,
    /// The program scored.
    pub program_sha256: String,
    /// The expectation scored against.
    pub expectation: ScoringExpectation,
    /// sha256 of its canonical JSON.
    pub expectation_sha256: String,
    /// Where the evidence came from.
    pub evidence: EvidenceUse,
}

/// A score and the observation it rests on, as stored.
#[derive(Debug, Clone)]
pub struct Scored {
    /// The score.
    pub score: Score,
    /// Its evidence (the run, stored or joined).
    pub observation: std::sync::Arc<Observation>,
}

/// A rescore and the item's previous score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rescore {
    /// The new score.
    pub score: Score,
    /// The item's last score before this one, if the item had an id and a score.
    pub previous: Option<StoredScore>,
    /// Whether status or value differ from the previous score's.
    pub changed: bool,
}
