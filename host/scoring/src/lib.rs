//! Scoring what programs do.
//!
//! A [`ProgramExecutionScorer`] takes a program (inline, or stored by
//! sha256) and a [`ScoringExpectation`] with one [`ProgramBehaves`]
//! condition. It validates everything first (one condition, a configured
//! profile, known comparators with valid params), then gets the attempt's
//! evidence from its [`ProgramExecutionSource`] (the store, a run already in
//! flight, or a new sandbox run), applies the verdict rules, and records the
//! score in the evidence store. A [`Replayer`] scores stored evidence
//! without any sandbox (replay, rescore).
//!
//! The verdict is `true` only when every case matched, `false` when any case
//! is proven to fail, and undetermined (no value) when the evidence cannot
//! decide: an infrastructure fault or a truncated stream never yields a
//! wrong `true` or `false`.
//!
//! # Decisions
//! - Text conditions are stored and fingerprinted in their full form
//!   (`{"comparator": "equals", "params": {"value": "9"}}`), so the shorthand
//!   and the full spelling of one check share one expectation fingerprint.
//!   Unknown fields anywhere in an expectation are refused: a misspelt
//!   `stdout` must not silently check nothing.
//! - Within a case, the outcome is checked first (sandbox error, not run,
//!   timeout, memory kill), then the exit code, then stdout, then stderr; the
//!   rationale names the first failing case and its first failing check.
//! - A request the sandbox refuses before running anything (engine
//!   unreachable, ...) is recorded as an observation whose first event is a
//!   `sandbox_error` carrying the refusal and whose others are `not_run`,
//!   under a fresh id: the score is undetermined and the attempt is retried
//!   next time. The same holds for a run the backend returns inconsistent.
//! - Behaviour conditions (`behaviour`: `never`, `attempts`) are checked
//!   after the exit code and before the streams; they need a profile that
//!   traces (`trace`), refused otherwise before anything runs. A recorded
//!   event decides; only a complete trace proves an absence.
//! - `fresh` runs always get a new id; later non-fresh scores keep using the
//!   attempt's derived id. Rescore uses the derived id, else the newest
//!   observation of the attempt without a sandbox fault.
//! - Cancelling through [`ScoreRequest::cancel`] is the way to wait for the
//!   sandbox's cleanup; dropping a score future also stops the run when it
//!   was the last caller, but cannot wait (a drop cannot await).
//! - Comparators run on tokio's blocking pool during [`ProgramExecutionScorer::score`];
//!   [`Replayer`] is synchronous (call it from a blocking context).

mod attempt;
pub mod behaviour;
mod checker;
mod checker_runs;
mod comparator;
mod error;
mod expectation;
mod interactive;
mod replayer;
mod request;
mod score_policy;
mod scorer;
mod source;
mod store_call;
mod verdict;

pub use attempt::{
    Attempt, SOURCE_IDENTITY, attempt_key, belongs_to_attempt, fresh_observation_id, observation_id,
};
pub use behaviour::{ActionPattern, BehaviourCondition, BehaviourSummary};
pub use checker::{Checker, CheckerProgram, CheckerProtocol, CheckerVerdict, CheckerVerdicts};
pub use comparator::{ComparatorRefusal, ComparatorVerdict, OutputComparator};
pub use error::{ExpectationError, ReplayRefusal, ScoringError};
pub use expectation::{
    Condition, EXIT_CODES, ProgramBehaves, ProgramCase, ProgramResult, ScoringExpectation,
    TextCondition,
};
pub use interactive::InteractorAttempt;
pub use replayer::Replayer;
pub use request::{
    ObservationRef, ProgramInput, ReplayRequest, Rescore, RescoreRequest, Score, ScoreRequest,
    Scored,
};
pub use score_policy::{Aggregate, GroupScore, PolicyScore, ScoreGroup, ScorePolicy};
pub use scorer::ProgramExecutionScorer;
pub use source::{DEFAULT_LEASE_TTL, Evidence, EvidenceUse, ProgramExecutionSource};
pub use store_call::store_call;
pub use verdict::{
    CaseDecision, CaseReport, ReasonKind, Verdict, evaluate, evaluate_checked, evaluate_judged,
};

/// The evidence store this crate records into.
pub use progscore_evidence as evidence;
