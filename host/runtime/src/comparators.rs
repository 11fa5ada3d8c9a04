//! The WebAssembly comparator host as the scorer's comparators: the one place
//! where scoring (which knows no wasmtime) and the comparator host (which
//! knows no scoring) meet.

use std::sync::Arc;

use progscore_comparator_host::{
    CheckOutcome, ComparatorError, ComparatorHost, ComparisonOutcome, ObservedBehaviour,
    ObservedEvent, ObservedStream, ObservedTrace,
};
use progscore_sandbox::{Behaviour, CapturedStream};
use progscore_scoring::{CheckerVerdict, ComparatorRefusal, ComparatorVerdict, OutputComparator};

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
        self.compare_with_behaviour(comparator, params, observed, None)
    }

    fn compare_with_behaviour(
        &self,
        comparator: &str,
        params: &serde_json::Value,
        observed: &CapturedStream,
        behaviour: Option<&Behaviour>,
    ) -> ComparatorVerdict {
        let stream = ObservedStream {
            bytes: observed.data.as_bytes().to_vec(),
            truncated: observed.truncated,
            total_bytes: observed.total_bytes,
        };
        let behaviour = observed_behaviour(behaviour);
        match self
            .0
            .compare_in_context(comparator, &params.to_string(), &stream, &behaviour)
        {
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

    fn validate_checker(
        &self,
        checker: &str,
        params: &serde_json::Value,
    ) -> Result<(), ComparatorRefusal> {
        match self.0.validate_checker(checker, &params.to_string()) {
            Ok(()) => Ok(()),
            Err(ComparatorError::UnknownComparator { name, .. }) => {
                Err(ComparatorRefusal::UnknownChecker { name })
            }
            // A comparator's name, bad parameters, or a `validate` that
            // trapped: refused, and the message says which.
            Err(error) => Err(ComparatorRefusal::InvalidParams {
                name: checker.to_string(),
                message: error.to_string(),
            }),
        }
    }

    fn check(
        &self,
        checker: &str,
        params: &serde_json::Value,
        input: &[u8],
        output: &CapturedStream,
        answer: &[u8],
    ) -> CheckerVerdict {
        let stream = ObservedStream {
            bytes: output.data.as_bytes().to_vec(),
            truncated: output.truncated,
            total_bytes: output.total_bytes,
        };
        match self
            .0
            .check(checker, &params.to_string(), input, &stream, answer)
        {
            Ok(CheckOutcome::Accepted(message)) => CheckerVerdict::Accepted(message),
            Ok(CheckOutcome::WrongAnswer(message)) => CheckerVerdict::WrongAnswer(message),
            Ok(CheckOutcome::PresentationError(message)) => {
                CheckerVerdict::PresentationError(message)
            }
            Ok(CheckOutcome::Points { score, message }) => {
                CheckerVerdict::Points { score, message }
            }
            Ok(CheckOutcome::Undetermined(reason)) => CheckerVerdict::Undetermined(reason),
            // Validation ran before anything did: a fault of the checker.
            Err(error) => CheckerVerdict::Undetermined(format!("the checker failed: {error}")),
        }
    }
}

/// The sandbox's record of a behaviour as the comparator host hands it to a
/// `progscore:comparator@0.2.0` comparator.
pub fn observed_behaviour(behaviour: Option<&Behaviour>) -> ObservedBehaviour {
    match behaviour {
        None => ObservedBehaviour::Absent,
        Some(Behaviour::NotTraced { reason }) => ObservedBehaviour::NotTraced(reason.clone()),
        Some(Behaviour::Traced(trace)) => ObservedBehaviour::Traced(ObservedTrace {
            traced_kinds: trace.traced_kinds.iter().map(|k| k.to_string()).collect(),
            events: trace
                .events
                .iter()
                .map(|event| ObservedEvent {
                    kind: event.action.kind().to_string(),
                    at_ms: event.at_ms,
                    result: event.result.clone(),
                    json: serde_json::to_string(event).unwrap_or_default(),
                })
                .collect(),
            counts: trace
                .counts
                .iter()
                .map(|(kind, count)| (kind.to_string(), *count))
                .collect(),
            dropped: trace.dropped,
            incomplete: trace.incomplete.clone(),
            // The comparator's contract has one trace-wide flag: any event
            // whose arguments are unverified sets it.
            arguments_unverified: trace
                .arguments_unverified
                .clone()
                .or_else(|| {
                    trace.events.iter().any(|event| event.unverified).then(|| {
                        "some events' arguments were read from the program's memory".into()
                    })
                })
                .or_else(|| trace.paths_unresolved.clone()),
        }),
    }
}
