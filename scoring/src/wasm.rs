//! [`OutputComparator`] for the WebAssembly comparator host
//! (`progscore_comparators::ComparatorHost`), behind the
//! `wasm-comparators` feature so that this crate's own tests build without
//! wasmtime.

use progscore_comparators::{ComparatorError, ComparatorHost, ComparisonOutcome, ObservedStream};
use progscore_sandbox::CapturedStream;

use crate::comparator::{ComparatorRefusal, ComparatorVerdict, OutputComparator};
use crate::expectation::TextCondition;

impl OutputComparator for ComparatorHost {
    fn validate(
        &self,
        comparator: &str,
        params: &serde_json::Value,
    ) -> Result<(), ComparatorRefusal> {
        match ComparatorHost::validate(self, comparator, &params.to_string()) {
            Ok(()) => Ok(()),
            Err(ComparatorError::UnknownComparator { name, .. }) => {
                Err(ComparatorRefusal::Unknown { name })
            }
            // Parameters that could not be checked (the guest trapped in
            // `validate`) are refused too: nothing runs on a doubtful check.
            Err(error) => Err(ComparatorRefusal::InvalidParams {
                name: comparator.to_string(),
                message: error.to_string(),
            }),
        }
    }

    fn compare(
        &self,
        comparator: &str,
        params: &serde_json::Value,
        observed: &CapturedStream,
    ) -> ComparatorVerdict {
        let stream = ObservedStream {
            bytes: observed.data.as_bytes().to_vec(),
            truncated: observed.truncated,
            total_bytes: observed.total_bytes,
        };
        match ComparatorHost::compare(self, comparator, &params.to_string(), &stream) {
            Ok(ComparisonOutcome::Match) => ComparatorVerdict::Match,
            Ok(ComparisonOutcome::Mismatch(reason)) => ComparatorVerdict::Mismatch(reason),
            Ok(ComparisonOutcome::Undetermined(reason)) => ComparatorVerdict::Undetermined(reason),
            // Validation ran before anything did, so this is a fault of the
            // comparator, not a verdict on the output.
            Err(error) => {
                ComparatorVerdict::Undetermined(format!("the comparator failed: {error}"))
            }
        }
    }
}

impl From<progscore_comparators::TextCondition> for TextCondition {
    fn from(condition: progscore_comparators::TextCondition) -> Self {
        TextCondition::new(
            condition.comparator(),
            serde_json::Value::Object(condition.params().clone()),
        )
    }
}
