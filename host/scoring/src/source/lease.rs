//! Cross-process leases: processes sharing a store run an attempt once. A
//! flight takes the attempt's lease in the store (renewed while it runs) or
//! waits while another process holds it alive, and uses that process's
//! observation once it is stored.

use std::sync::Arc;
use std::time::Duration;

use progscore_evidence::{EvidenceStore, Observation};
use tokio::task::JoinHandle;

use super::observation::check_belongs;
use crate::attempt::Attempt;
use crate::store_call::store_call;

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

/// How a flight takes its turn at the attempt's lease.
pub(super) struct Turn {
    pub store: Arc<EvidenceStore>,
    /// This flight's lease owner.
    pub owner: String,
    pub ttl: Duration,
    pub fresh: bool,
}

/// What a flight may do after waiting for the lease.
pub(super) enum Waited {
    /// Run, holding the lease (none when the store failed: run anyway).
    Run(Option<HeldLease>),
    /// Another process stored the attempt's observation meanwhile.
    Stored(Arc<Observation>),
}

impl Turn {
    /// Takes the attempt's lease, waiting while another owner holds it
    /// alive. Unless fresh, stops waiting when the attempt's observation
    /// appears in the store. Cancelled by dropping the future (the flight's
    /// task is aborted when its last caller leaves).
    pub async fn wait(&self, attempt: &Attempt) -> Waited {
        let mut pause = POLL_FIRST;
        loop {
            match store_call(|| {
                self.store
                    .try_acquire_lease(&attempt.key, &self.owner, self.ttl)
            }) {
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
        match store_call(|| {
            self.store
                .reusable_observation(&attempt.key, &attempt.observation_id())
        }) {
            Ok(Some(observation)) if check_belongs(&observation, attempt).is_ok() => {
                Some(Arc::new(observation))
            }
            _ => None,
        }
    }
}

/// An attempt's lease, held: renewed by a task until dropped, then released.
pub(super) struct HeldLease {
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
                    match store_call(|| store.renew_lease(&key, &owner, ttl)) {
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
        let _ = store_call(|| self.store.release_lease(&self.key, &self.owner));
    }
}

/// This machine's name, for lease owners (which only need to be unique and
/// readable).
pub(super) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".into())
}
