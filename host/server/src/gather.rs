//! Compile once per program, whatever the client does: verl (and Judge0's
//! test-case helpers) send one request per test case, each with the same
//! program. A request for a compiled profile waits `[serve] gather` for
//! others of the same program under the same limits; those that arrive meanwhile become cases of
//! one run, which builds the program once. Each request is answered with
//! its own case's event, and every answer names the one observation (the
//! build it used is that observation's compile event).
//!
//! A gathered run belongs to the server, not to any one connection: a
//! client that goes away does not cancel the others' cases (a drain still
//! does). Each request is checked alone before it joins, so a bad one is
//! refused by itself. A gathering holds at most `[serve] max_invocations`
//! cases; past it a request runs alone.

use std::sync::Arc;

use progscore_sandbox::sha256_hex;
use progscore_scoring::EvidenceUse;
use tokio::sync::watch;

use crate::gatherings::{GatherKey, Gathering};
use crate::job::{Executed, JobError, Part, ProgramJob};
use crate::run::{admit, run_alone};
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
        let mut open = state.gatherings().open.lock().expect("gatherings lock");
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
        .map_err(|_| JobError::Internal("a gathered run ended without a result".into()))?
        .clone()
        .expect("waited for a result");
    finished.map(|mut executed| {
        executed.case = case;
        if joined {
            executed.score.evidence = EvidenceUse::Joined;
        }
        executed
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
        .expect("gatherings lock")
        .remove(&key);
    if let Some(gathered) = gathered {
        job.invocations = gathered.invocations;
    }
    // Each case was checked alone; the run's own parts have no request field.
    let field = |part: Part| format!("{part:?}");
    let ran = run_alone(&state, job, &field).await;
    let _ = result.send(Some(ran));
}
