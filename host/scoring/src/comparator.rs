//! The comparator interface the scorer uses.
//!
//! The scorer does not know how comparators run (WebAssembly components in
//! the `progscore-comparator-host` host, in production); it only needs to check
//! parameters up front and ask for a verdict on one stream.

use progscore_sandbox::CapturedStream;
use thiserror::Error;

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
    /// The comparator rejects the parameters.
    #[error("comparator `{name}` rejects its params: {message}")]
    InvalidParams {
        /// The comparator.
        name: String,
        /// What it said.
        message: String,
    },
}
