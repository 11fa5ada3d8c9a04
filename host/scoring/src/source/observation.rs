//! Observation building: what the sandbox returned becomes an observation
//! of the attempt (or stays a refusal), under the attempt's id when it proves
//! something and a fresh one otherwise.

use progscore_evidence::{Observation, now_rfc3339};
use progscore_sandbox::{InvocationEvent, Outcome, ProgramRun, SandboxError};

use crate::attempt::{Attempt, SOURCE_IDENTITY};
use crate::error::ScoringError;

/// Checks that a stored observation is one of this attempt's.
pub(crate) fn check_belongs(
    observation: &Observation,
    attempt: &Attempt,
) -> Result<(), ScoringError> {
    if observation.attempt_key != attempt.key {
        return Err(ScoringError::Store(
            progscore_evidence::StoreError::Tampered {
                what: "observation",
                id: observation.id.clone(),
                detail: "it is stored under the id of another attempt".into(),
            },
        ));
    }
    Ok(())
}

/// Turns what the sandbox returned into an observation of `attempt`; a
/// refusal stays a refusal (nothing ran, nothing to keep).
pub(super) fn observation_from_run(
    attempt: &Attempt,
    result: Result<ProgramRun, SandboxError>,
    fresh: bool,
) -> Result<Observation, SandboxError> {
    let run = result?;
    let run = match inconsistency(&run, attempt) {
        None => run,
        Some(problem) => fault_run(
            attempt,
            format!("the sandbox returned an inconsistent run: {problem}"),
        ),
    };
    let id = if fresh || run.rests_on_unproven_conditions() {
        attempt.fresh_observation_id()
    } else {
        attempt.observation_id()
    };
    Ok(Observation {
        id,
        attempt_key: attempt.key.clone(),
        source: SOURCE_IDENTITY.to_string(),
        profile: attempt.profile.clone(),
        profile_fingerprint: attempt.profile_fingerprint.clone(),
        program_sha256: attempt.program_sha256.clone(),
        invocations: attempt.invocations.clone(),
        run,
        created_at: now_rfc3339(),
    })
}

/// How the run fails to be a run of `attempt`, if it does.
fn inconsistency(run: &ProgramRun, attempt: &Attempt) -> Option<String> {
    if run.events.len() != attempt.invocations.len() {
        return Some(format!(
            "{} event(s) for {} invocation(s)",
            run.events.len(),
            attempt.invocations.len()
        ));
    }
    if run.profile != attempt.profile {
        return Some(format!("it ran profile `{}`", run.profile));
    }
    if run.program_sha256 != attempt.program_sha256 {
        return Some("it ran a program with another sha256".into());
    }
    None
}

/// A run in which nothing is known: the first invocation carries the sandbox
/// error, the rest were not run, as the contract describes.
fn fault_run(attempt: &Attempt, message: String) -> ProgramRun {
    let events = (0..attempt.invocations.len())
        .map(|index| {
            if index == 0 {
                let mut event = InvocationEvent::not_run("");
                event.outcome = Outcome::SandboxError {
                    message: message.clone(),
                };
                event
            } else {
                InvocationEvent::not_run("an earlier invocation hit a sandbox error")
            }
        })
        .collect();
    ProgramRun {
        interaction: None,
        profile: attempt.profile.clone(),
        program_sha256: attempt.program_sha256.clone(),
        events,
        sandbox_warnings: Vec::new(),
        compile: None,
    }
}
