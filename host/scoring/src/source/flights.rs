//! In-process single flight: concurrent callers of one attempt share one
//! run, which stops only when its last caller has gone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use progscore_evidence::Observation;
use progscore_sandbox::SandboxError;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::lease::HeldLease;

/// What a flight ends with: what it found, or the sandbox's refusal.
pub(super) type FlightResult = Result<Found, SandboxError>;

/// A flight's observation.
#[derive(Clone)]
pub(super) struct Found {
    pub observation: Arc<Observation>,
    /// Another process stored it while this flight waited for its lease.
    pub stored: bool,
    /// The attempt's lease, held until every caller has recorded its score.
    pub lease: Option<Arc<HeldLease>>,
}

#[derive(Default)]
pub(super) struct Flights {
    pub next_id: u64,
    pub by_key: HashMap<String, Flight>,
}

pub(super) struct Flight {
    pub id: u64,
    pub waiters: usize,
    pub result: watch::Receiver<Option<FlightResult>>,
    pub task: Option<JoinHandle<()>>,
}

/// One caller's membership in a flight. Leaving as the last member stops
/// the run (if it is still going).
pub(super) struct FlightSeat {
    pub flights: Arc<Mutex<Flights>>,
    pub key: String,
    pub id: u64,
    pub left: bool,
}

impl FlightSeat {
    /// Leaves the flight; returns the run's task when this was the last member.
    pub fn leave(&mut self) -> Option<JoinHandle<()>> {
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

pub(super) fn lock(flights: &Mutex<Flights>) -> MutexGuard<'_, Flights> {
    // The map stays consistent even if a holder panicked (every update is a
    // single insert, remove or counter change), so a poisoned lock is usable.
    flights
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
