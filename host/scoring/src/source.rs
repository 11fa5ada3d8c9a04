//! The program-execution evidence source: finds an attempt's observation in
//! the store, or runs the program, sharing one in-flight run between
//! concurrent callers of the same attempt, and, through a lease in the
//! store, between processes sharing the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use progscore_evidence::{EvidenceStore, Observation, now_rfc3339};
use progscore_sandbox::{InvocationEvent, Outcome, ProgramRun, SandboxClient, SandboxError};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::attempt::{Attempt, SOURCE_IDENTITY};
use crate::error::ScoringError;

/// How long a lease on an attempt lasts unless renewed, by default. A holder
/// renews it every third of this while it runs, so only a holder that died
/// (SIGKILL, a lost machine) or stalled that long lets it expire; the other
/// processes then wait this long at most before taking the attempt over.
/// Long enough that a busy machine's stalls do not end a live lease, short
/// enough that a batch does not wait long for a killed process.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);

/// How often a process waiting on another's lease looks at the store: first
/// after the shortest wait, then twice as long each time, up to the longest.
/// A look is two indexed reads, and takes no write lock while the lease is
/// held.
const POLL_FIRST: Duration = Duration::from_millis(50);
const POLL_LONGEST: Duration = Duration::from_millis(200);

/// Runs programs through any [`SandboxClient`] and keeps what it saw in an
/// [`EvidenceStore`].
///
/// - An attempt already observed is not run again: its stored observation is
///   returned.
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

/// What a flight ends with: what it found, or the sandbox's refusal.
type FlightResult = Result<Found, SandboxError>;

/// A flight's observation.
#[derive(Clone)]
struct Found {
    observation: Arc<Observation>,
    /// Another process stored it while this flight waited for its lease.
    stored: bool,
    /// The attempt's lease, held until every caller has recorded its score.
    lease: Option<Arc<HeldLease>>,
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
                        if let Some(observation) =
                            self.store.observation(&attempt.observation_id())?
                        {
                            check_belongs(&observation, attempt)?;
                            return Ok(Evidence {
                                observation: Arc::new(observation),
                                origin: EvidenceUse::Stored,
                                _seat: None,
                                _lease: None,
                            });
                        }
                    }
                    let (key, id, result) = self.start(&mut flights, attempt, program, fresh);
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
            let found = fly(client, turn, attempt, program).await;
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
            let _ = self.store.release_leases_of(&format!("{}/", self.owner));
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
struct FlightSeat {
    flights: Arc<Mutex<Flights>>,
    key: String,
    id: u64,
    left: bool,
}

impl FlightSeat {
    /// Leaves the flight; returns the run's task when this was the last member.
    fn leave(&mut self) -> Option<JoinHandle<()>> {
        if self.left {
            return None;
        }
        self.left = true;
        let ended = {
            let mut flights = lock(&self.flights);
            let flight = flights.by_key.get_mut(&self.key)?;
            if flight.id != self.id {
                return None;
            }
            flight.waiters -= 1;
            if flight.waiters > 0 {
                return None;
            }
            flights.by_key.remove(&self.key)
        };
        // Dropped outside the lock: its result may hold the last reference
        // to the attempt's lease, whose release writes to the store.
        ended.and_then(|flight| flight.task)
    }
}

impl Drop for FlightSeat {
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

/// How a flight takes its turn at the attempt's lease.
struct Turn {
    store: Arc<EvidenceStore>,
    /// This flight's lease owner.
    owner: String,
    ttl: Duration,
    fresh: bool,
}

/// What a flight may do after waiting for the lease.
enum Waited {
    /// Run, holding the lease (none when the store failed: run anyway).
    Run(Option<HeldLease>),
    /// Another process stored the attempt's observation meanwhile.
    Stored(Arc<Observation>),
}

/// A flight: its turn at the attempt's lease, then the run (unless another
/// process stored the observation meanwhile).
async fn fly(
    client: Arc<dyn SandboxClient>,
    turn: Turn,
    attempt: Attempt,
    program: Arc<[u8]>,
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
    let result = client
        .execute(&program, &attempt.profile, &attempt.invocations)
        .await;
    // A refusal drops the lease here: nothing will be stored, and a waiting
    // process tries for itself.
    let observation = observation_from_run(&attempt, result, turn.fresh)?;
    Ok(Found {
        observation: Arc::new(observation),
        stored: false,
        lease: lease.map(Arc::new),
    })
}

impl Turn {
    /// Takes the attempt's lease, waiting while another owner holds it
    /// alive. Unless fresh, stops waiting when the attempt's observation
    /// appears in the store. Cancelled by dropping the future (the flight's
    /// task is aborted when its last caller leaves).
    async fn wait(&self, attempt: &Attempt) -> Waited {
        let mut pause = POLL_FIRST;
        loop {
            match self
                .store
                .try_acquire_lease(&attempt.key, &self.owner, self.ttl)
            {
                Ok(true) => {
                    let lease = HeldLease::start(self, &attempt.key);
                    // The holder before may have stored it and released the
                    // lease since this flight looked.
                    if let Some(observation) = self.stored(attempt) {
                        return Waited::Stored(observation);
                    }
                    return Waited::Run(Some(lease));
                }
                Ok(false) => {}
                // Coordination failed: run as without leases; a store that
                // is really broken fails the record, which says why.
                Err(_) => return Waited::Run(None),
            }
            if let Some(observation) = self.stored(attempt) {
                return Waited::Stored(observation);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(POLL_LONGEST);
        }
    }

    /// The attempt's reusable observation, if stored (never for a fresh run).
    /// A row that cannot be read or is not the attempt's is not used here:
    /// the run goes on, and recording its observation reports the row.
    fn stored(&self, attempt: &Attempt) -> Option<Arc<Observation>> {
        if self.fresh {
            return None;
        }
        match self.store.observation(&attempt.observation_id()) {
            Ok(Some(observation)) if check_belongs(&observation, attempt).is_ok() => {
                Some(Arc::new(observation))
            }
            _ => None,
        }
    }
}

/// An attempt's lease, held: renewed by a task until dropped, then released.
struct HeldLease {
    store: Arc<EvidenceStore>,
    key: String,
    owner: String,
    renewer: JoinHandle<()>,
}

impl HeldLease {
    fn start(turn: &Turn, key: &str) -> HeldLease {
        let (store, key, owner, ttl) = (
            turn.store.clone(),
            key.to_string(),
            turn.owner.clone(),
            turn.ttl,
        );
        let renewer = {
            let (store, key, owner) = (store.clone(), key.clone(), owner.clone());
            tokio::spawn(async move {
                let every = (ttl / 3).max(Duration::from_millis(10));
                loop {
                    tokio::time::sleep(every).await;
                    match store.renew_lease(&key, &owner, ttl) {
                        Ok(true) => {}
                        // Lost (this process stalled beyond the TTL and
                        // another took over): the other runs it too, and the
                        // store keeps the first observation recorded.
                        Ok(false) => return,
                        // A busy or failing store: try again next time.
                        Err(_) => {}
                    }
                }
            })
        };
        HeldLease {
            store,
            key,
            owner,
            renewer,
        }
    }
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        self.renewer.abort();
        // One short write. If it fails, the lease expires after its TTL and
        // a waiting process takes the attempt over then.
        let _ = self.store.release_lease(&self.key, &self.owner);
    }
}

/// This machine's name, for lease owners (which only need to be unique and
/// readable).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".into())
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
