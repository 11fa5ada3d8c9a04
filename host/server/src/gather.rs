//! Compile once per program, whatever the client does: verl (and Judge0's
//! test-case helpers) send one request per test case, each with the same
//! program. A request for a compiled profile waits `[serve] gather` for
//! others of the same program under the same limits; those that arrive meanwhile become cases of
//! one run, which builds the program once.
//!
//! The build is shared; nothing else is. Each request is answered with its
//! own case only: its event under the shared build, stored as an
//! observation of its own attempt (the program, the profile and its one
//! invocation: what it would have been had it run alone) and scored by
//! replaying that. The gathered run's observation, which holds every
//! request's input, is never named to any client.
//!
//! A gathered run belongs to the server, not to any one connection: a
//! client that goes away does not cancel the others' cases (a drain still
//! does). Each request is checked alone before it joins, so a bad one is
//! refused by itself. A gathering holds at most `[serve] max_invocations`
//! cases; past it a request runs alone.

use std::sync::Arc;

use std::sync::PoisonError;

use progscore_sandbox::sha256_hex;
use progscore_scoring::evidence::{Observation, StoreError};
use progscore_scoring::{
    Attempt, EvidenceUse, ObservationRef, ReplayRequest, fresh_observation_id, observation_id,
};
use tokio::sync::watch;

use crate::gatherings::{GatherKey, Gathering};
use crate::job::{Executed, JobError, Part, ProgramJob};
use crate::run::{admit, expectation_of, run_alone};
use crate::state::AppState;

/// Where a request goes.
enum Place {
    /// A case (its index) of a run another request leads.
    Joined(watch::Receiver<Option<Result<Executed, JobError>>>, usize),
    /// The first case of a run it leads.
    Leads(watch::Receiver<Option<Result<Executed, JobError>>>),
    /// Alone (the gathering was full).
    Alone,
}

/// Whether `job` may be gathered: one case, nothing but "run it" asked, no
/// files beside the program, for a served profile that builds programs,
/// with gathering on.
pub(crate) fn gathers(state: &AppState, job: &ProgramJob) -> bool {
    let settings = state.settings();
    !settings.gather.is_zero()
        && !settings.fresh
        && !job.fresh
        && job.expectation.is_none()
        && job.files.is_empty()
        && job.invocations.len() == 1
        && state
            .served(&job.profile)
            .is_some_and(|(profile, _)| profile.compile.is_some())
}

/// Runs `job` as a case of a gathered run (see the module doc).
pub(crate) async fn execute_gathered(
    state: &Arc<AppState>,
    job: ProgramJob,
    field: &(dyn Fn(Part) -> String + Sync),
) -> Result<Executed, JobError> {
    admit(state, &job, field)?;
    // Jobs under other limits never share a run.
    let key = (
        job.profile.clone(),
        sha256_hex(&job.program),
        job.limits.gather_key(),
    );
    let invocation = job.invocations[0].clone();
    // Decided under the lock, acted on after it (a guard is not held
    // across an await).
    let place = {
        // A panic elsewhere while holding the lock leaves the map whole
        // (every change is one insert or remove): carry on with it.
        let mut open = state
            .gatherings()
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match open.get_mut(&key) {
            Some(gathering) => match gathering.invocations.iter().position(|i| *i == invocation) {
                Some(case) => Place::Joined(gathering.result.clone(), case),
                None if gathering.invocations.len() < state.settings().max_invocations => {
                    gathering.invocations.push(invocation);
                    let case = gathering.invocations.len() - 1;
                    Place::Joined(gathering.result.clone(), case)
                }
                None => Place::Alone,
            },
            None => {
                let (sender, receiver) = watch::channel(None);
                open.insert(
                    key.clone(),
                    Gathering {
                        invocations: vec![invocation],
                        result: receiver.clone(),
                    },
                );
                state
                    .tracker()
                    .spawn(lead(state.clone(), key, job.clone(), sender));
                Place::Leads(receiver)
            }
        }
    };
    let (mut result, case, joined) = match place {
        Place::Joined(result, case) => (result, case, true),
        Place::Leads(result) => (result, 0, false),
        // The gathering is full: this one runs alone.
        Place::Alone => return run_alone(state, job, field).await,
    };
    let finished = result
        .wait_for(Option::is_some)
        .await
        .map_err(|_| JobError::internal("a gathered run ended without a result"))?
        .clone()
        .ok_or_else(|| JobError::internal("a gathered run ended without a result"))?;
    let gathered = finished?;
    let evidence = if joined {
        EvidenceUse::Joined
    } else {
        gathered.score.evidence
    };
    let state = state.clone();
    // Store writes and a comparator call: not on the server's async threads.
    tokio::task::spawn_blocking(move || own_part(&state, &job, &gathered, case, evidence))
        .await
        .map_err(|join| JobError::internal(format!("a gathered request's view failed: {join}")))?
}

/// This request's own part of the gathered run: its case's event under the
/// shared build, stored as an observation of its own one-invocation attempt
/// and scored by replaying it against the job's expectation.
fn own_part(
    state: &AppState,
    job: &ProgramJob,
    gathered: &Executed,
    case: usize,
    evidence: EvidenceUse,
) -> Result<Executed, JobError> {
    let whole = &gathered.observation;
    let event = whole.run.events.get(case).cloned().ok_or_else(|| {
        JobError::internal(format!(
            "the gathered run has no case {case} (observation {})",
            whole.id
        ))
    })?;
    let attempt = Attempt::from_parts(
        &whole.profile,
        whole.profile_fingerprint.clone(),
        &whole.program_sha256,
        job.invocations.clone(),
    )
    .map_err(|e| JobError::internal(format!("cannot key a gathered case: {e}")))?;
    let proven = !event.outcome.is_unproven()
        && whole
            .run
            .compile
            .as_ref()
            .is_none_or(|compile| !compile.event.outcome.is_unproven());
    let mut run = whole.run.clone();
    run.events = vec![event];
    let mut view = Observation {
        // A proven case is the evidence of its own attempt (reused as if it
        // had run alone); an unproven one never is.
        id: if proven {
            observation_id(&attempt.key)
        } else {
            fresh_observation_id(&attempt.key)
        },
        attempt_key: attempt.key.clone(),
        source: whole.source.clone(),
        profile: whole.profile.clone(),
        profile_fingerprint: whole.profile_fingerprint.clone(),
        program_sha256: whole.program_sha256.clone(),
        invocations: attempt.invocations.clone(),
        run,
        created_at: whole.created_at.clone(),
    };
    let store = &state.session().store;
    match store.record_observation(&view) {
        Ok(_) => {}
        // Its attempt's id already holds another run of it (it ran alone
        // before): this one is kept beside it under a fresh id.
        Err(StoreError::ObservationConflict { .. }) => {
            view.id = fresh_observation_id(&attempt.key);
            store
                .record_observation(&view)
                .map_err(|e| JobError::internal(e.to_string()))?;
        }
        Err(error) => return Err(JobError::internal(error.to_string())),
    }
    let mut score = state
        .session()
        .replayer
        .replay(ReplayRequest {
            item_id: job.item_id.clone(),
            observation: ObservationRef::Id(view.id.clone()),
            expectation: expectation_of(job)?,
        })
        .map_err(|e| JobError::internal(format!("cannot score a gathered case: {e}")))?;
    score.evidence = evidence;
    Ok(Executed {
        score,
        observation: view,
    })
}

/// The gathered run: waits for the others, closes the gathering, runs every
/// case, and hands the result to all.
async fn lead(
    state: Arc<AppState>,
    key: GatherKey,
    mut job: ProgramJob,
    result: watch::Sender<Option<Result<Executed, JobError>>>,
) {
    tokio::time::sleep(state.settings().gather).await;
    let gathered = state
        .gatherings()
        .open
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&key);
    if let Some(gathered) = gathered {
        job.invocations = gathered.invocations;
    }
    // The gathered run is nobody's item: each request's score is its own.
    job.item_id = None;
    // Each case was checked alone; the run's own parts have no request field.
    let field = |part: Part| format!("{part:?}");
    let ran = run_alone(&state, job, &field).await;
    let _ = result.send(Some(ran));
}
