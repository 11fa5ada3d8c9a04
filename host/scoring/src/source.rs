//! The program-execution evidence source: finds an attempt's observation in
//! the store, or runs the program, sharing one in-flight run between
//! concurrent callers of the same attempt.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use progscore_evidence::{EvidenceStore, Observation, now_rfc3339};
use progscore_sandbox::{InvocationEvent, Outcome, ProgramRun, SandboxClient, SandboxError};

/// What a flight ends with: its observation, or the sandbox's refusal.
type FlightResult = Result<Arc<Observation>, SandboxError>;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::attempt::{Attempt, SOURCE_IDENTITY};
use crate::error::ScoringError;

/// Runs programs through any [`SandboxClient`] and keeps what it saw in an
/// [`EvidenceStore`].
///
/// - An attempt already observed is not run again: its stored observation is
///   returned.
/// - Concurrent callers of one attempt share one in-flight run. The run is
///   cancelled only when every caller has gone; a caller that cancels
///   through its token and is the last one returns only after the run's
///   future was dropped, i.e. after the sandbox's cleanup.
/// - A run that proves nothing about the program (a sandbox fault, an
///   unconfirmed timeout) is given a fresh observation id, so the attempt is
///   run again next time; so is a run asked for with `fresh`.
/// - A run the sandbox refused (before anything ran, or because the engine
///   was lost) makes no observation at all: every caller gets
///   [`ScoringError::Refused`] and nothing is stored.
///
/// Runs are spawned on the current tokio runtime.
pub struct ProgramExecutionSource {
    client: Arc<dyn SandboxClient>,
    store: Arc<EvidenceStore>,
    flights: Arc<Mutex<Flights>>,
}

/// Where an observation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceUse {
    /// This caller started the run.
    Ran,
    /// This caller joined a run another caller had started.
    Joined,
    /// It was already in the store; nothing ran.
    Stored,
    /// A named observation was replayed; nothing ran.
    Replayed,
}

/// An observation, and the caller's place in the run that produced it (kept
/// until the caller has written its score, so that a caller arriving in
/// between joins the run instead of starting another).
pub struct Evidence {
    /// The observation.
    pub observation: Arc<Observation>,
    /// Where it came from.
    pub origin: EvidenceUse,
    _lease: Option<FlightLease>,
}

#[derive(Default)]
struct Flights {
    next_id: u64,
    by_key: HashMap<String, Flight>,
}

struct Flight {
    id: u64,
    waiters: usize,
    result: watch::Receiver<Option<FlightResult>>,
    task: Option<JoinHandle<()>>,
}

impl ProgramExecutionSource {
    /// A source over this client and store.
    pub fn new(client: Arc<dyn SandboxClient>, store: Arc<EvidenceStore>) -> Self {
        ProgramExecutionSource {
            client,
            store,
            flights: Arc::default(),
        }
    }

    /// The sandbox client.
    pub fn client(&self) -> &Arc<dyn SandboxClient> {
        &self.client
    }

    /// The evidence store.
    pub fn store(&self) -> &Arc<EvidenceStore> {
        &self.store
    }

    /// How many attempts are running right now.
    pub fn in_flight(&self) -> usize {
        lock(&self.flights).by_key.len()
    }

    /// The observation of `attempt`: from the store, from a run in flight, or
    /// from a new run of `program` (`fresh`: always a new run, under a new id).
    ///
    /// On cancellation through `cancel` returns [`ScoringError::Cancelled`];
    /// if this caller was the run's last, only after the run has stopped and
    /// its sandbox was cleaned up.
    pub async fn observe(
        &self,
        attempt: &Attempt,
        program: &Arc<[u8]>,
        fresh: bool,
        cancel: &CancellationToken,
    ) -> Result<Evidence, ScoringError> {
        let (mut lease, mut result, origin) = {
            let mut flights = lock(&self.flights);
            let joined = if fresh {
                None
            } else {
                flights.by_key.get_mut(&attempt.key).map(|flight| {
                    flight.waiters += 1;
                    (flight.id, flight.result.clone())
                })
            };
            match joined {
                Some((id, result)) => (self.lease(&attempt.key, id), result, EvidenceUse::Joined),
                None => {
                    if !fresh {
                        // Looked up under the flights lock: a run's callers write
                        // its observation before they leave the flight, so no
                        // flight and no row means nobody has run this attempt.
                        if let Some(observation) =
                            self.store.observation(&attempt.observation_id())?
                        {
                            check_belongs(&observation, attempt)?;
                            return Ok(Evidence {
                                observation: Arc::new(observation),
                                origin: EvidenceUse::Stored,
                                _lease: None,
                            });
                        }
                    }
                    let (key, id, result) = self.start(&mut flights, attempt, program, fresh);
                    (self.lease(&key, id), result, EvidenceUse::Ran)
                }
            }
        };
        // The watch guard lives only inside this block, never across an
        // await, so the caller's future stays `Send`.
        let ready = async {
            match result.wait_for(Option::is_some).await {
                Ok(value) => (*value).clone(),
                Err(_) => None,
            }
        };
        // A finished result wins over a cancellation that arrives with it.
        let observation = tokio::select! {
            biased;
            observation = ready => observation,
            _ = cancel.cancelled() => {
                if let Some(task) = lease.leave() {
                    task.abort();
                    // Completes once the run's future has been dropped, which
                    // (by the SandboxClient contract) is after its cleanup.
                    // Its own result (cancelled, or done just before) is moot.
                    let _ = task.await;
                }
                return Err(ScoringError::Cancelled);
            }
        };
        match observation {
            Some(Ok(observation)) => Ok(Evidence {
                observation,
                origin,
                _lease: Some(lease),
            }),
            Some(Err(refusal)) => Err(ScoringError::Refused(refusal)),
            None => Err(ScoringError::RunLost(
                "the task running it ended without a result (the backend panicked)".into(),
            )),
        }
    }

    fn start(
        &self,
        flights: &mut Flights,
        attempt: &Attempt,
        program: &Arc<[u8]>,
        fresh: bool,
    ) -> (String, u64, watch::Receiver<Option<FlightResult>>) {
        let id = flights.next_id;
        flights.next_id += 1;
        // A fresh run is never joined: it gets a key no other caller uses.
        let key = if fresh {
            format!("fresh/{id}/{}", attempt.key)
        } else {
            attempt.key.clone()
        };
        let (sender, receiver) = watch::channel(None);
        let client = self.client.clone();
        let attempt = attempt.clone();
        let program = program.clone();
        let task = tokio::spawn(async move {
            let result = client
                .execute(&program, &attempt.profile, &attempt.invocations)
                .await;
            let observation = observation_from_run(&attempt, result, fresh).map(Arc::new);
            // Fails only if every receiver is gone, and then nobody wants it.
            let _ = sender.send(Some(observation));
        });
        flights.by_key.insert(
            key.clone(),
            Flight {
                id,
                waiters: 1,
                result: receiver.clone(),
                task: Some(task),
            },
        );
        (key, id, receiver)
    }

    fn lease(&self, key: &str, id: u64) -> FlightLease {
        FlightLease {
            flights: self.flights.clone(),
            key: key.to_string(),
            id,
            left: false,
        }
    }
}

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

/// One caller's membership in a flight. Leaving as the last member stops
/// the run (if it is still going).
struct FlightLease {
    flights: Arc<Mutex<Flights>>,
    key: String,
    id: u64,
    left: bool,
}

impl FlightLease {
    /// Leaves the flight; returns the run's task when this was the last member.
    fn leave(&mut self) -> Option<JoinHandle<()>> {
        if self.left {
            return None;
        }
        self.left = true;
        let mut flights = lock(&self.flights);
        let flight = flights.by_key.get_mut(&self.key)?;
        if flight.id != self.id {
            return None;
        }
        flight.waiters -= 1;
        if flight.waiters > 0 {
            return None;
        }
        flights
            .by_key
            .remove(&self.key)
            .and_then(|flight| flight.task)
    }
}

impl Drop for FlightLease {
    fn drop(&mut self) {
        // A caller dropped without cancelling through its token: stop the run
        // if it was the last, without waiting (a drop cannot wait). The
        // runtime still drops the run's future, and with it cleans up.
        if let Some(task) = self.leave() {
            task.abort();
        }
    }
}

fn lock(flights: &Mutex<Flights>) -> MutexGuard<'_, Flights> {
    // The map stays consistent even if a holder panicked (every update is a
    // single insert, remove or counter change), so a poisoned lock is usable.
    flights
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Turns what the sandbox returned into an observation of `attempt`; a
/// refusal stays a refusal (nothing ran, nothing to keep).
fn observation_from_run(
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
        profile: attempt.profile.clone(),
        program_sha256: attempt.program_sha256.clone(),
        events,
        sandbox_warnings: Vec::new(),
        compile: None,
    }
}
