//! The WebAssembly comparator host as the scorer's comparators: the one place
//! where scoring (which knows no wasmtime) and the comparator host (which
//! knows no scoring) meet.

use std::sync::Arc;

use progscore_comparator_host::{
    ComparatorError, ComparatorHost, ComparisonOutcome, ObservedStream,
};
use progscore_sandbox::CapturedStream;
use progscore_scoring::{ComparatorRefusal, ComparatorVerdict, OutputComparator};

/// [`OutputComparator`] over a [`ComparatorHost`]: refusals and verdicts
/// mapped faithfully, and any fault of a comparator undetermined.
#[derive(Clone)]
pub struct WasmComparators(pub Arc<ComparatorHost>);

impl OutputComparator for WasmComparators {
    fn validate(
        &self,
        comparator: &str,
        params: &serde_json::Value,
    ) -> Result<(), ComparatorRefusal> {
        match self.0.validate(comparator, &params.to_string()) {
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
        match self.0.compare(comparator, &params.to_string(), &stream) {
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
