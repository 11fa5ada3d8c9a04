//! Compile once per program, whatever the client does: verl (and Judge0's
//! test-case helpers) send one request per test case, each with the same
//! program. A request for a compiled profile waits `[serve] gather` for
//! others of the same program under the same limits; those that arrive
//! meanwhile become cases of one run, which builds the program once.
//!
//! The build is shared; nothing else is. When the run ends, each case is
//! stored as an observation of its own attempt (the program, the profile
//! and that one invocation: what it would have been had it run alone), and
//! each request is answered with its own case only, scored by replaying it.
//! The gathered run's observation, which holds every request's input, is
//! never named to any client.
//!
//! The cases run one after another, so a gathering may end after one of
//! its clients stops waiting (verl's request timeout). Such a request is
//! answered just before its deadline in the form its client retries, and
//! the run goes on: its case is stored when the run ends, so the retry is
//! answered from it.
//!
//! A gathered run belongs to the server, not to any one connection: a
//! client that goes away does not cancel the others' cases (a drain still
//! does). Each request is checked alone before it joins, so a bad one is
//! refused by itself. A gathering holds at most `[serve] max_invocations`
//! cases; past it a request runs alone.

use std::sync::{Arc, PoisonError};

use progscore_sandbox::sha256_hex;
use progscore_scoring::evidence::{Observation, StoreError};
use progscore_scoring::{
    Attempt, EvidenceUse, ObservationRef, ReplayRequest, fresh_observation_id, observation_id,
    store_call,
};
use tokio::sync::watch;

use crate::gatherings::{GatherKey, Gathered, Gathering};
use crate::job::{Executed, JobError, Part, ProgramJob};
use crate::queue::QueueRefusal;
use crate::run::{admit, expectation_of, run_alone};
use crate::state::AppState;

/// Where a request goes.
enum Place {
    /// A case (its index) of a run another request leads.
    Joined(watch::Receiver<Option<Gathered>>, usize),
    /// The first case of a run it leads.
    Leads(watch::Receiver<Option<Gathered>>),
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
    // Until just before the client stops waiting, if it says when.
    let wait = job
        .deadline
        .map_or(std::time::Duration::MAX, |deadline| deadline.may_wait(0));
    let finished = match tokio::time::timeout(wait, result.wait_for(Option::is_some)).await {
        Ok(Ok(finished)) => finished.clone(),
        Ok(Err(_)) => None,
        Err(_) => {
            return Err(JobError::Busy {
                profile: job.profile.clone(),
                refusal: QueueRefusal::Waited { waited: wait },
            });
        }
    };
    let gathered =
        finished.ok_or_else(|| JobError::internal("a gathered run ended without a result"))?;
    let (evidence, views) = gathered.as_ref().as_ref().map_err(Clone::clone)?;
    let view = views
        .get(case)
        .cloned()
        .ok_or_else(|| JobError::internal(format!("a gathered run has no case {case}")))?;
    let evidence = if joined {
        EvidenceUse::Joined
    } else {
        *evidence
    };
    let state = state.clone();
    // A comparator call and a store write: not on the server's async threads.
    tokio::task::spawn_blocking(move || score_own_case(&state, &job, view, evidence))
        .await
        .map_err(|join| JobError::internal(format!("scoring a gathered case failed: {join}")))?
}

/// The gathered run: waits for the others, closes the gathering, runs every
/// case, stores each case as an observation of its own, and hands them out.
async fn lead(
    state: Arc<AppState>,
    key: GatherKey,
    mut job: ProgramJob,
    result: watch::Sender<Option<Gathered>>,
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
    let ran = match run_alone(&state, job, &field).await {
        Ok(executed) => {
            let evidence = executed.score.evidence;
            let state = state.clone();
            match tokio::task::spawn_blocking(move || store_cases(&state, &executed.observation))
                .await
            {
                Ok(Ok(views)) => Ok((evidence, views)),
                Ok(Err(error)) => Err(error),
                Err(join) => Err(JobError::internal(format!(
                    "storing a gathered run's cases failed: {join}"
                ))),
            }
        }
        Err(error) => Err(error),
    };
    let _ = result.send(Some(Arc::new(ran)));
}

/// Each case of the gathered run `whole` as an observation of its own
/// one-invocation attempt: its event under the shared build. A proven case
/// is stored under its attempt's id (the evidence of that attempt, as if it
/// had run alone, so a retry of its request is answered from it); an
/// unproven one under a fresh id, never reused.
fn store_cases(state: &AppState, whole: &Observation) -> Result<Vec<Observation>, JobError> {
    let store = &state.session().store;
    let compile_proven = whole
        .run
        .compile
        .as_ref()
        .is_none_or(|compile| !compile.event.outcome.is_unproven());
    let mut views = Vec::with_capacity(whole.invocations.len());
    for (invocation, event) in whole.invocations.iter().zip(&whole.run.events) {
        let attempt = Attempt::from_parts(
            &whole.profile,
            whole.profile_fingerprint.clone(),
            &whole.program_sha256,
            vec![invocation.clone()],
        )
        .map_err(|e| JobError::internal(format!("cannot key a gathered case: {e}")))?;
        let proven = compile_proven && !event.outcome.is_unproven();
        let mut run = whole.run.clone();
        run.events = vec![event.clone()];
        let mut view = Observation {
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
            invocations: attempt.invocations,
            run,
            created_at: whole.created_at.clone(),
        };
        match store_call(|| store.record_observation(&view)) {
            Ok(_) => {}
            // Its attempt's id already holds another run of it (it ran
            // alone before): this one is kept beside it under a fresh id.
            Err(StoreError::ObservationConflict { .. }) => {
                view.id = fresh_observation_id(&attempt.key);
                store_call(|| store.record_observation(&view)).map_err(JobError::internal)?;
            }
            Err(error) => return Err(JobError::internal(error)),
        }
        views.push(view);
    }
    Ok(views)
}

/// This request's own case, scored by replaying it against the job's
/// expectation.
fn score_own_case(
    state: &AppState,
    job: &ProgramJob,
    view: Observation,
    evidence: EvidenceUse,
) -> Result<Executed, JobError> {
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
