//! Errors of scoring: refusals before anything runs, replay refusals, and
//! faults of the store. None of them is a verdict.

use progscore_evidence::StoreError;
use progscore_sandbox::{ProfileError, SandboxError};
use thiserror::Error;

use crate::comparator::ComparatorRefusal;

/// Why a score could not be made.
#[derive(Debug, Error)]
pub enum ScoringError {
    /// The expectation is invalid; nothing ran.
    #[error("invalid expectation: {0}")]
    Expectation(ExpectationError),
    /// A program named by its stored id is not in the store.
    #[error("program {sha256} is not stored")]
    ProgramNotStored {
        /// The id asked for.
        sha256: String,
    },
    /// A replay was refused; nothing was written.
    #[error("replay refused: {0}")]
    Replay(ReplayRefusal),
    /// A replay or rescore under an item id whose scores are of another
    /// program: re-grading grades an item's own program, and would otherwise
    /// put an unrelated verdict at the top of that item's history.
    #[error(
        "item `{item_id}` was scored with another program (sha256 {scored}); this one is {given}: re-grade it under its own item id"
    )]
    ItemOfAnotherProgram {
        item_id: String,
        /// The program of the item's latest score.
        scored: String,
        /// The program this request grades.
        given: String,
    },
    /// An item id that names nothing.
    #[error("an item id must not be empty")]
    EmptyItemId,
    /// The evidence store failed (or holds a tampered row).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The sandbox refused the run (its profile cannot run here, or the
    /// engine was lost and did not come back). Nothing was stored.
    #[error("the sandbox refused the run: {0}")]
    Refused(SandboxError),
    /// Every caller cancelled; the run was stopped and cleaned up.
    #[error("cancelled")]
    Cancelled,
    /// The run ended without a result (the backend's task panicked).
    #[error("the sandbox run ended without a result: {0}")]
    RunLost(String),
    /// A record could not be encoded as JSON.
    #[error("cannot encode a record: {0}")]
    Encode(serde_json::Error),
}

/// Why an expectation was refused before anything ran.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ExpectationError {
    /// There must be exactly one `program_behaves` condition.
    #[error("an expectation needs exactly one condition (`program_behaves`), found {found}")]
    ConditionCount {
        /// How many there were.
        found: usize,
    },
    /// A `program_behaves` condition with no cases would prove nothing.
    #[error("`program_behaves` has no cases")]
    NoCases,
    /// The profile is not configured.
    #[error("unknown profile `{name}`; configured profiles and languages: {known}")]
    UnknownProfile {
        name: String,
        /// Comma-separated configured names.
        known: String,
    },
    /// A comparator condition was refused.
    #[error("case {case} {stream}: {refusal}")]
    Comparator {
        case: usize,
        /// `stdout` or `stderr`.
        stream: &'static str,
        refusal: ComparatorRefusal,
    },
    /// An exit code no program can exit with.
    #[error(
        "case {case} expects exit code {value}, which no program can exit with: an exit status is 0 to 255 (a program killed by signal N is seen as 128 + N)"
    )]
    ExitCode {
        case: usize,
        /// The expected code as written.
        value: i64,
    },
    /// The program's own limits cannot be applied to its profile.
    #[error("{section}{}: {message}", field.map(|f| format!(".{f}")).unwrap_or_default())]
    Limits {
        /// `limits` or `compile_limits`.
        section: &'static str,
        /// The key at fault, when one is.
        field: Option<&'static str>,
        /// What is wrong.
        message: String,
    },
    /// A file the program brings cannot be placed beside it.
    #[error("files: {0}")]
    Files(progscore_sandbox::InvalidFiles),
    /// Behaviour is expected of a profile that does not trace it.
    #[error(
        "profile `{profile}` does not trace behaviour, so a behaviour condition could never be decided; use a profile with `trace = true`"
    )]
    Untraced {
        profile: String,
        /// The case whose `expected.behaviour` asks, or `None` for the
        /// program's own `behaviour`.
        case: Option<usize>,
    },
    /// The score policy does not fit the item's cases.
    #[error("score.{0}")]
    ScorePolicy(String),
    /// The item's checker, or a case's answer for it, was refused.
    #[error("{field}: {message}")]
    Checker {
        /// The field at fault, from `program_behaves` (`checker.program.profile`,
        /// `cases[2].expected.answer`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// An invocation cannot be delivered to a program as given.
    #[error("case {case} invocation `{field}` {message}")]
    Invocation {
        case: usize,
        /// The invocation's field at fault (`args[1]`, `args`, `stdin`).
        field: String,
        /// What is wrong and what the limit is.
        message: String,
    },
}

impl ExpectationError {
    /// The refusal of a program's own limits, from the profile's check.
    pub(crate) fn limits(error: ProfileError) -> ExpectationError {
        match error {
            ProfileError::BadLimit {
                section,
                field,
                value,
                reason,
                ..
            } => ExpectationError::Limits {
                section,
                field: Some(field),
                message: format!("{value:?} {reason}"),
            },
            ProfileError::CompileLimitsWithoutCompile { profile } => ExpectationError::Limits {
                section: "compile_limits",
                field: None,
                message: format!("profile `{profile}` has no compile step"),
            },
            other => ExpectationError::Limits {
                section: "limits",
                field: None,
                message: other.to_string(),
            },
        }
    }

    /// Where in the expectation the fault is, as a path from the
    /// expectation's root (`conditions[0].program_behaves.cases[0].invocation.args[1]`).
    pub fn field_path(&self) -> String {
        let behaves = "conditions[0].program_behaves";
        match self {
            ExpectationError::ConditionCount { .. } => "conditions".into(),
            ExpectationError::NoCases => format!("{behaves}.cases"),
            ExpectationError::UnknownProfile { .. } => format!("{behaves}.profile"),
            ExpectationError::Comparator { case, stream, .. } => {
                format!("{behaves}.cases[{case}].expected.{stream}")
            }
            ExpectationError::ExitCode { case, .. } => {
                format!("{behaves}.cases[{case}].expected.exit_code")
            }
            ExpectationError::Limits { section, field, .. } => match field {
                Some(field) => format!("{behaves}.{section}.{field}"),
                None => format!("{behaves}.{section}"),
            },
            ExpectationError::Invocation { case, field, .. } => {
                format!("{behaves}.cases[{case}].invocation.{field}")
            }
            ExpectationError::Untraced { case: None, .. } => format!("{behaves}.behaviour"),
            ExpectationError::Untraced {
                case: Some(case), ..
            } => format!("{behaves}.cases[{case}].expected.behaviour"),
            ExpectationError::ScorePolicy(what) => {
                // The policy's own field: what is wrong starts with it.
                let field = what.split(':').next().unwrap_or_default();
                format!("{behaves}.score.{field}")
            }
            ExpectationError::Checker { field, .. } => format!("{behaves}.{field}"),
            ExpectationError::Files(invalid) => match invalid.path() {
                Some(path) => format!("{behaves}.files.{path}"),
                None => format!("{behaves}.files"),
            },
        }
    }
}

/// Why a replay was refused. Nothing is written in any of these cases.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReplayRefusal {
    /// No observation with this id is stored.
    #[error("observation {id} is not stored")]
    NotStored { id: String },
    /// The observation given differs from the stored copy.
    #[error("observation {id} differs from the stored copy")]
    Differs { id: String },
    /// The stored copy fails its integrity checks.
    #[error("observation {id} is tampered: {detail}")]
    Tampered {
        id: String,
        /// What did not match.
        detail: String,
    },
    /// The expectation names another profile than the one that ran.
    #[error("observation {id} ran under profile `{stored}`, the expectation names `{expected}`")]
    OtherProfile {
        id: String,
        /// The profile that ran.
        stored: String,
        /// The profile the expectation names.
        expected: String,
    },
    /// The expectation asks for limits the observation did not run under.
    #[error("observation {id} ran under other limits than the expectation's: {detail}")]
    OtherLimits {
        id: String,
        /// Which limits differ.
        detail: String,
    },
    /// The expectation places other files beside the program than the run
    /// had (or files where it had none, or none where it had some).
    #[error("observation {id} ran with other files beside the program than the expectation's")]
    OtherFiles { id: String },
    /// The expectation's interactor (its source, profile, files, or a
    /// case's input or answer) is not the one the observation talked to.
    #[error(
        "observation {id} talked to another interactor (or none) than the expectation's, or with other inputs or answers"
    )]
    OtherInteractor { id: String },
    /// The expectation's invocations are not the ones that ran.
    #[error("observation {id} ran other invocations than the expectation's: {detail}")]
    OtherInvocations {
        id: String,
        /// How they differ.
        detail: String,
    },
}

// The message quotes the cause, so it is not also this error's source
// (a caller printing the chain would say it twice).
impl From<ExpectationError> for ScoringError {
    fn from(error: ExpectationError) -> Self {
        ScoringError::Expectation(error)
    }
}

// The message quotes the cause, so it is not also this error's source
// (a caller printing the chain would say it twice).
impl From<ReplayRefusal> for ScoringError {
    fn from(error: ReplayRefusal) -> Self {
        ScoringError::Replay(error)
    }
}

// The message quotes the cause, so it is not also this error's source
// (a caller printing the chain would say it twice).
impl From<serde_json::Error> for ScoringError {
    fn from(error: serde_json::Error) -> Self {
        ScoringError::Encode(error)
    }
}

// The message quotes the cause, so it is not also this error's source
// (a caller printing the chain would say it twice).
impl From<progscore_sandbox::InvalidFiles> for ExpectationError {
    fn from(error: progscore_sandbox::InvalidFiles) -> Self {
        ExpectationError::Files(error)
    }
}
