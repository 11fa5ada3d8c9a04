//! Compile once per program, whatever the client does: verl (and Judge0's
//! test-case helpers) send one request per test case, each with the same
//! program. A request for a compiled profile waits `[serve] gather` for
//! others of the same program under the same limits; those that arrive
//! meanwhile become cases of one run, which builds the program once.
//!
//! The build is shared; nothing else is. Each case is stored as an
//! observation of its own attempt (the program, the profile and that one
//! invocation: what it would have been had it run alone), and each request
//! is answered with its own case only, scored by replaying it. The cases
//! run one after another: a case whose event is proven is stored and
//! answered as soon as the backend tells it, not when the whole gathering
//! ends; a case that proves nothing waits for the run's end (and is run
//! again alone, as any request's). The gathered run's observation, which
//! holds every request's input, is never named to any client.
//!
//! A gathering may still end after one of its clients stops waiting
//! (verl's request timeout). Such a request is answered just before its
//! deadline in the form its client retries, and the run goes on: its case
//! is stored when it ends, so the retry is answered from it.
//!
//! A gathered run belongs to the server, not to any one connection: a
//! client that goes away does not cancel the others' cases (a drain still
//! does). Each request is checked alone before it joins, so a bad one is
//! refused by itself. A gathering holds at most `[serve] max_invocations`
//! cases; past it a request runs alone.

use std::sync::{Arc, PoisonError};

use progscore_sandbox::{CaseDone, CaseSink, Invocation, ProgramRun, sha256_hex};
use progscore_scoring::evidence::{Observation, StoreError, now_rfc3339};
use progscore_scoring::{
    Attempt, EvidenceUse, ObservationRef, ProgramInput, ReplayRequest, SOURCE_IDENTITY,
    ScoreRequest, fresh_observation_id, observation_id, store_call,
};
use tokio::sync::watch;

use crate::jobs::gatherings::{GatherKey, GatheredSoFar, Gathering};
use crate::jobs::job::{Executed, JobError, Part, ProgramJob};
use crate::jobs::queue::QueueRefusal;
use crate::jobs::run::{admit, expectation_of, run_alone, run_alone_telling};
use crate::state::AppState;

/// Where a request goes.
enum Place {
    /// A case (its index) of a run another request leads.
    Joined(watch::Receiver<GatheredSoFar>, usize),
    /// The first case of a run it leads.
    Leads(watch::Receiver<GatheredSoFar>),
    /// Alone (the gathering was full).
    Alone,
}

/// Whether `job` may be gathered: one case, nothing but "run it" asked,
/// for a served profile that builds programs,
/// with gathering on.
pub(crate) fn gathers(state: &AppState, job: &ProgramJob) -> bool {
    let settings = state.settings();
    !settings.gather.is_zero()
        && !settings.fresh
        && !job.fresh
        && job.expectation.is_none()
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
    // Jobs under other limits, or with other files beside the program (an
    // IOI task's graders), never share a run.
    let files = if job.files.is_empty() {
        String::new()
    } else {
        format!(
            "/{}",
            sha256_hex(
                job.files
                    .keyed(serde_json::json!({}))
                    .to_string()
                    .as_bytes()
            )
        )
    };
    let key = (
        job.profile.clone(),
        format!("{}{files}", sha256_hex(&job.program)),
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
                let (sender, receiver) = watch::channel(GatheredSoFar::default());
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
    let so_far =
        match tokio::time::timeout(wait, result.wait_for(|so_far| so_far.answers(case))).await {
            Ok(Ok(so_far)) => so_far.clone(),
            Ok(Err(_)) => return Err(JobError::internal("a gathered run ended without a result")),
            Err(_) => {
                return Err(JobError::Busy {
                    profile: job.profile.clone(),
                    refusal: QueueRefusal::Waited { waited: wait },
                });
            }
        };
    let (view, evidence) = match so_far.early.get(case).cloned().flatten() {
        // Told and stored before the run ended.
        Some(view) => (view, EvidenceUse::Ran),
        None => {
            let gathered = so_far
                .end
                .ok_or_else(|| JobError::internal("a gathered run ended without a result"))?;
            let (evidence, views) = gathered.as_ref().as_ref().map_err(Clone::clone)?;
            let view = views
                .get(case)
                .cloned()
                .ok_or_else(|| JobError::internal(format!("a gathered run has no case {case}")))?;
            (view, *evidence)
        }
    };
    let evidence = if joined {
        EvidenceUse::Joined
    } else {
        evidence
    };
    let state = state.clone();
    // A comparator call and a store write: not on the server's async threads.
    tokio::task::spawn_blocking(move || score_own_case(&state, &job, view, evidence))
        .await
        .map_err(|join| JobError::internal(format!("scoring a gathered case failed: {join}")))?
}

/// The gathered run: waits for the others, closes the gathering, runs every
/// case, stores each proven case as an observation of its own as the
/// backend tells it (and answers its requests then), the rest when the run
/// ends.
async fn lead(
    state: Arc<AppState>,
    key: GatherKey,
    mut job: ProgramJob,
    result: watch::Sender<GatheredSoFar>,
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
    result.send_modify(|so_far| so_far.early = vec![None; job.invocations.len()]);
    // The cases' own attempts are keyed by the profile as the backend
    // resolves it (the gathered run's own key): known before it runs.
    let fingerprint = match expectation_of(&job) {
        Ok(expectation) => state
            .scorer()
            .attempt_of(&ScoreRequest::new(
                ProgramInput::Inline(job.program.clone()),
                expectation,
            ))
            .await
            .ok()
            .map(|attempt| attempt.profile_fingerprint),
        Err(_) => None,
    };
    let (told, mut cases) = tokio::sync::mpsc::unbounded_channel::<CaseDone>();
    let on_case = match fingerprint {
        Some(_) => Some(CaseSink::new(move |done| {
            let _ = told.send(done);
        })),
        None => {
            drop(told);
            None
        }
    };
    let case_of = CaseOf {
        profile: job.profile.clone(),
        fingerprint: fingerprint.unwrap_or(serde_json::Value::Null),
        program_sha256: sha256_hex(&job.program),
        invocations: job.invocations.clone(),
    };
    // Each case told is stored and answered at once; the channel ends when
    // the run (and with it every copy of the sink) is done.
    let early = async {
        while let Some(done) = cases.recv().await {
            store_told(&state, &case_of, done, &result).await;
        }
    };
    // Each case was checked alone; the run's own parts have no request field.
    let field = |part: Part| format!("{part:?}");
    let (ran, ()) = tokio::join!(run_alone_telling(&state, job, &field, on_case), early);
    let ran = match ran {
        Ok(executed) => {
            let evidence = executed.score.evidence;
            let state = state.clone();
            let early = result.borrow().early.clone();
            match tokio::task::spawn_blocking(move || {
                store_cases(&state, &executed.observation, &early)
            })
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
    result.send_modify(|so_far| so_far.end = Some(Arc::new(ran)));
}

/// What every case of a gathered run shares: the profile (as resolved),
/// the program, and the cases' invocations.
struct CaseOf {
    profile: String,
    fingerprint: serde_json::Value,
    program_sha256: String,
    invocations: Vec<Invocation>,
}

/// Stores a case the backend told before the run ended, when its event (and
/// the build it ran against) is proven and it was not told before, and
/// answers its requests with it.
async fn store_told(
    state: &Arc<AppState>,
    case_of: &CaseOf,
    done: CaseDone,
    result: &watch::Sender<GatheredSoFar>,
) {
    let index = done.index;
    let Some(invocation) = case_of.invocations.get(index) else {
        return;
    };
    let told_before = result
        .borrow()
        .early
        .get(index)
        .is_some_and(Option::is_some);
    let compile_proven = done
        .compile
        .as_ref()
        .is_none_or(|compile| !compile.event.outcome.is_unproven());
    if told_before || !compile_proven || done.event.outcome.is_unproven() {
        return;
    }
    let run = ProgramRun {
        interaction: None,
        profile: case_of.profile.clone(),
        program_sha256: case_of.program_sha256.clone(),
        events: vec![done.event],
        sandbox_warnings: Vec::new(),
        compile: done.compile,
    };
    let view = match case_view(
        &case_of.profile,
        &case_of.fingerprint,
        &case_of.program_sha256,
        SOURCE_IDENTITY,
        invocation,
        run,
        true,
        now_rfc3339(),
    ) {
        Ok(view) => view,
        Err(error) => {
            tracing::warn!("a gathered case told early is left to the run's end: {error:?}");
            return;
        }
    };
    let stored = {
        let state = state.clone();
        tokio::task::spawn_blocking(move || store_view(&state, view)).await
    };
    match stored {
        Ok(Ok(view)) => result.send_modify(|so_far| {
            if let Some(slot) = so_far.early.get_mut(index) {
                *slot = Some(view);
            }
        }),
        // Left to the run's end, which stores it (or says what failed).
        Ok(Err(error)) => {
            tracing::warn!("a gathered case told early could not be stored: {error:?}")
        }
        Err(join) => tracing::warn!("storing a gathered case told early failed: {join}"),
    }
}

/// A case of a gathered run as an observation of its own one-invocation
/// attempt: under the attempt's id when `proven`, else a fresh one.
#[allow(
    clippy::too_many_arguments,
    reason = "an observation's parts, from a told case or the run's end"
)]
fn case_view(
    profile: &str,
    fingerprint: &serde_json::Value,
    program_sha256: &str,
    source: &str,
    invocation: &Invocation,
    run: ProgramRun,
    proven: bool,
    created_at: String,
) -> Result<Observation, JobError> {
    let attempt = Attempt::from_parts(
        profile,
        fingerprint.clone(),
        program_sha256,
        vec![invocation.clone()],
    )
    .map_err(|e| JobError::internal(format!("cannot key a gathered case: {e}")))?;
    Ok(Observation {
        id: if proven {
            observation_id(&attempt.key)
        } else {
            fresh_observation_id(&attempt.key)
        },
        attempt_key: attempt.key.clone(),
        source: source.to_string(),
        profile: profile.to_string(),
        profile_fingerprint: fingerprint.clone(),
        program_sha256: program_sha256.to_string(),
        invocations: attempt.invocations,
        run,
        created_at,
    })
}

/// Stores a case's observation; when its attempt's id already holds
/// another run of it (it ran alone before), beside it under a fresh id.
fn store_view(state: &AppState, mut view: Observation) -> Result<Observation, JobError> {
    let store = &state.session().store;
    match store_call(|| store.record_observation(&view)) {
        Ok(_) => Ok(view),
        Err(StoreError::ObservationConflict { .. }) => {
            view.id = fresh_observation_id(&view.attempt_key);
            store_call(|| store.record_observation(&view)).map_err(JobError::internal)?;
            Ok(view)
        }
        Err(error) => Err(JobError::internal(error)),
    }
}

/// Each case of the gathered run `whole` as an observation of its own
/// one-invocation attempt: its event under the shared build. A proven case
/// is stored under its attempt's id (the evidence of that attempt, as if it
/// had run alone, so a retry of its request is answered from it); an
/// unproven one under a fresh id, never reused. A case already stored as it
/// was told (`early`) is that observation.
fn store_cases(
    state: &AppState,
    whole: &Observation,
    early: &[Option<Observation>],
) -> Result<Vec<Observation>, JobError> {
    let compile_proven = whole
        .run
        .compile
        .as_ref()
        .is_none_or(|compile| !compile.event.outcome.is_unproven());
    let mut views = Vec::with_capacity(whole.invocations.len());
    for (index, (invocation, event)) in whole.invocations.iter().zip(&whole.run.events).enumerate()
    {
        if let Some(Some(view)) = early.get(index) {
            views.push(view.clone());
            continue;
        }
        let proven = compile_proven && !event.outcome.is_unproven();
        let mut run = whole.run.clone();
        run.events = vec![event.clone()];
        let view = case_view(
            &whole.profile,
            &whole.profile_fingerprint,
            &whole.program_sha256,
            &whole.source,
            invocation,
            run,
            proven,
            whole.created_at.clone(),
        )?;
        views.push(store_view(state, view)?);
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
