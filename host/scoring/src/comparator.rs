//! The comparator interface the scorer uses.
//!
//! The scorer does not know how comparators run (WebAssembly components in
//! the `progscore-comparator-host` host, in production); it only needs to check
//! parameters up front and ask for a verdict on one stream.

use progscore_sandbox::{Behaviour, CapturedStream};
use thiserror::Error;

use crate::checker::CheckerVerdict;

/// Checks output streams by named comparators.
pub trait OutputComparator: Send + Sync {
    /// Checks that `comparator` exists and accepts `params`, before anything runs.
    fn validate(
        &self,
        comparator: &str,
        params: &serde_json::Value,
    ) -> Result<(), ComparatorRefusal>;

    /// Compares one observed stream. Anything that keeps the comparator from
    /// answering (a trap, exhausted fuel, bad parameters despite validation)
    /// must come back as [`ComparatorVerdict::Undetermined`], never as a
    /// match or mismatch.
    fn compare(
        &self,
        comparator: &str,
        params: &serde_json::Value,
        observed: &CapturedStream,
    ) -> ComparatorVerdict;

    /// Compares one observed stream, with the behaviour the sandbox traced
    /// during the invocation that wrote it (`None`: the profile does not
    /// trace). Comparators that can judge behaviour (WIT
    /// `progscore:comparator@0.2.0`) are given it; by default it is not used.
    fn compare_with_behaviour(
        &self,
        comparator: &str,
        params: &serde_json::Value,
        observed: &CapturedStream,
        behaviour: Option<&Behaviour>,
    ) -> ComparatorVerdict {
        let _ = behaviour;
        self.compare(comparator, params, observed)
    }

    /// Checks that checker component `checker` exists and accepts `params`,
    /// before anything runs. By default no checker is known.
    fn validate_checker(
        &self,
        checker: &str,
        params: &serde_json::Value,
    ) -> Result<(), ComparatorRefusal> {
        let _ = params;
        Err(ComparatorRefusal::UnknownChecker {
            name: checker.to_string(),
        })
    }

    /// Judges one case's output with checker component `checker`, given the
    /// case's input and the expected answer. Anything that keeps the checker
    /// from answering (a trap, its deadline, FAIL) must come back as
    /// [`CheckerVerdict::Undetermined`].
    fn check(
        &self,
        checker: &str,
        params: &serde_json::Value,
        input: &[u8],
        output: &CapturedStream,
        answer: &[u8],
    ) -> CheckerVerdict {
        let _ = (params, input, output, answer);
        CheckerVerdict::Undetermined(format!("no checker `{checker}` can be run here"))
    }
}

/// A comparator's answer on one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComparatorVerdict {
    /// The stream meets the condition.
    Match,
    /// The stream is proven not to meet it; why, for a human.
    Mismatch(String),
    /// It cannot be decided (truncated before the deciding point, trap, ...).
    Undetermined(String),
}

/// Why a comparator condition was refused at validation.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ComparatorRefusal {
    /// No comparator of that name is registered.
    #[error("unknown comparator `{name}`")]
    Unknown {
        /// The name asked for.
        name: String,
    },
    /// No checker of that name is registered.
    #[error("unknown checker `{name}`")]
    UnknownChecker {
        /// The name asked for.
        name: String,
    },
    /// The comparator rejects the parameters.
    #[error("comparator `{name}` rejects its params: {message}")]
    InvalidParams {
        /// The comparator.
        name: String,
        /// What it said.
        message: String,
    },
}
