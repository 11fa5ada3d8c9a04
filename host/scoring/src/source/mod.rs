//! The program-execution evidence source: finds an attempt's observation in
//! the store, or runs the program, sharing one in-flight run between
//! concurrent callers of the same attempt, and, through a lease in the
//! store, between processes sharing the store (`lease`). The single
//! flight in this process is `flights`; what a run becomes, `observation`.

mod flights;
mod lease;
mod observation;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use progscore_evidence::{EvidenceStore, Observation};
use progscore_sandbox::{CaseSink, RunRequest, SandboxClient};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::attempt::Attempt;
use crate::error::ScoringError;
use crate::store_call::store_call;
use flights::{Flight, FlightResult, FlightSeat, Flights, Found, lock};
use lease::{HeldLease, Turn, Waited, hostname};
use observation::observation_from_run;

pub use lease::DEFAULT_LEASE_TTL;
pub(crate) use observation::check_belongs;

/// Runs programs through any [`SandboxClient`] and keeps what it saw in an
/// [`EvidenceStore`].
///
/// - An attempt already observed is not run again: its stored observation is
///   returned, if this store ran it or trusts the store it was merged from
///   ([`EvidenceStore::reusable_observation`]); merged evidence it does not
///   trust never stands in for a run.
/// - Concurrent callers of one attempt share one in-flight run. The run is
///   cancelled only when every caller has gone; a caller that cancels
///   through its token and is the last one returns only after the run's
///   future was dropped, i.e. after the sandbox's cleanup.
/// - Processes sharing a store run an attempt once: a run first takes the
///   attempt's lease in the store (renewed while the run lasts, released
///   once every caller of the run has recorded its score, which is when the
///   observation is in the store). A process that finds the lease held by
///   another waits (cancellably) until the attempt's observation is stored,
///   and uses it ([`EvidenceUse::Stored`]), or until the lease is released
///   or expired without one (the holder died, was refused, or its run proved
///   nothing), and then runs the attempt itself. A store that fails while
///   leases are taken or looked at does not stop a run: it runs as it would
///   without leases, and the fault shows when its evidence is recorded.
/// - A run that proves nothing about the program (a sandbox fault, an
///   unconfirmed timeout) is given a fresh observation id, so the attempt is
///   run again next time; so is a run asked for with `fresh`.
/// - A run the sandbox refused (before anything ran, or because the engine
///   was lost) makes no observation at all: every caller gets
///   [`ScoringError::Refused`] and nothing is stored.
/// - A `fresh` run does not look for stored evidence (it is asked to run),
///   but still takes the attempt's lease: it waits while another process or
///   flight runs the same attempt, then runs.
///
/// Runs are spawned on the current tokio runtime.
pub struct ProgramExecutionSource {
    client: Arc<dyn SandboxClient>,
    store: Arc<EvidenceStore>,
    flights: Arc<Mutex<Flights>>,
    /// Unique to this source: `<hostname>-<pid>-<random>`; each flight's
    /// lease owner is this and the flight's number.
    owner: String,
    lease_ttl: Duration,
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
    // Dropped in this order: the seat (which may end the flight), then the
    // lease (released by whoever drops it last, outside the flights' lock).
    _seat: Option<FlightSeat>,
    _lease: Option<Arc<HeldLease>>,
}

impl ProgramExecutionSource {
    /// A source over this client and store.
    pub fn new(client: Arc<dyn SandboxClient>, store: Arc<EvidenceStore>) -> Self {
        ProgramExecutionSource {
            client,
            store,
            flights: Arc::default(),
            owner: format!(
                "{}-{}-{}",
                hostname(),
                std::process::id(),
                progscore_sandbox::owner::random_hex()
            ),
            lease_ttl: DEFAULT_LEASE_TTL,
        }
    }

    /// With leases on attempts that last `ttl` unless renewed (default
    /// [`DEFAULT_LEASE_TTL`]; renewed every third of it): how long other
    /// processes wait for an attempt whose runner died. Use the same value
    /// in every process sharing a store.
    pub fn with_lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// The name this source's leases are owned under (followed by `/` and a
    /// flight's number).
    pub fn lease_owner(&self) -> &str {
        &self.owner
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
        on_case: Option<&CaseSink>,
    ) -> Result<Evidence, ScoringError> {
        let (mut seat, mut result, origin) = {
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
                Some((id, result)) => (self.seat(&attempt.key, id), result, EvidenceUse::Joined),
                None => {
                    if !fresh {
                        // Looked up under the flights lock: a run's callers write
                        // its observation before they leave the flight, so no
                        // flight and no row means nobody in this process has
                        // run this attempt (other processes: see the lease,
                        // which the new flight takes first).
                        // Only evidence this store ran or trusts: a merged
                        // file cannot answer for an attempt run here.
                        if let Some(observation) = store_call(|| {
                            self.store
                                .reusable_observation(&attempt.key, &attempt.observation_id())
                        })? {
                            check_belongs(&observation, attempt)?;
                            return Ok(Evidence {
                                observation: Arc::new(observation),
                                origin: EvidenceUse::Stored,
                                _seat: None,
                                _lease: None,
                            });
                        }
                    }
                    let (key, id, result) =
                        self.start(&mut flights, attempt, program, fresh, on_case.cloned());
                    (self.seat(&key, id), result, EvidenceUse::Ran)
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
                if let Some(task) = seat.leave() {
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
            Some(Ok(found)) => Ok(Evidence {
                observation: found.observation,
                origin: if found.stored {
                    EvidenceUse::Stored
                } else {
                    origin
                },
                _seat: Some(seat),
                _lease: found.lease,
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
        on_case: Option<CaseSink>,
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
        let turn = Turn {
            store: self.store.clone(),
            owner: format!("{}/{id}", self.owner),
            ttl: self.lease_ttl,
            fresh,
        };
        let task = tokio::spawn(async move {
            let found = fly(client, turn, attempt, program, on_case).await;
            // Fails only if every receiver is gone, and then nobody wants it.
            let _ = sender.send(Some(found));
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

    fn seat(&self, key: &str, id: u64) -> FlightSeat {
        FlightSeat {
            flights: self.flights.clone(),
            key: key.to_string(),
            id,
            left: false,
        }
    }
}

impl Drop for ProgramExecutionSource {
    fn drop(&mut self) {
        // With no flight left, a lease under this source's name is one a
        // flight could not release (the store was busy then): remove it
        // now rather than make other processes wait for it to expire.
        if lock(&self.flights).by_key.is_empty() {
            let _ = store_call(|| self.store.release_leases_of(&format!("{}/", self.owner)));
        }
    }
}

/// A flight: its turn at the attempt's lease, then the run (unless another
/// process stored the observation meanwhile).
async fn fly(
    client: Arc<dyn SandboxClient>,
    turn: Turn,
    attempt: Attempt,
    program: Arc<[u8]>,
    on_case: Option<CaseSink>,
) -> FlightResult {
    let lease = match turn.wait(&attempt).await {
        Waited::Stored(observation) => {
            return Ok(Found {
                observation,
                stored: true,
                lease: None,
            });
        }
        Waited::Run(lease) => lease,
    };
    let mut request = match &attempt.variant {
        Some(variant) => {
            RunRequest::variant(&program, variant, &attempt.invocations).with_files(&attempt.files)
        }
        None => RunRequest::new(&program, &attempt.profile, &attempt.invocations),
    };
    request.on_case = on_case;
    if let Some(interactor) = &attempt.interactor {
        request = request.with_interactor(crate::interactive::request(interactor));
    }
    let result = client.run(request).await;
    // A refusal drops the lease here: nothing will be stored, and a waiting
    // process tries for itself.
    let observation = observation_from_run(&attempt, result, turn.fresh)?;
    Ok(Found {
        observation: Arc::new(observation),
        stored: false,
        lease: lease.map(Arc::new),
    })
}
