//! Who runs beside whom: every invocation holds a shared slot of its client's
//! schedule; confirming a timeout takes it whole, so that no other program
//! of the client runs meanwhile. The load counts programs inside their
//! window, for when nothing else is measured.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::RwLock;
use tokio_util::sync::CancellationToken;

/// How many programs of this client are inside their window right now.
#[derive(Debug, Default)]
pub struct Load {
    running: AtomicUsize,
}

pub struct Running<'a>(&'a Load);

impl Load {
    pub fn enter(&self) -> Running<'_> {
        self.running.fetch_add(1, Ordering::SeqCst);
        Running(self)
    }

    pub fn now(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The client's schedule: shared by every invocation, taken whole to
/// confirm a timeout with no other program of the client running.
#[derive(Debug, Default)]
pub struct Schedule(RwLock<()>);

impl Schedule {
    /// An invocation's slot: the whole schedule when `alone`, else a shared
    /// one. Only the wait for it is cut short by a cancellation (`None`).
    pub async fn slot(&self, alone: bool, token: &CancellationToken) -> Option<Slot<'_>> {
        let slot = async {
            if alone {
                Slot::Alone(self.0.write().await)
            } else {
                Slot::Shared(self.0.read().await)
            }
        };
        tokio::select! {
            biased;
            () = token.cancelled() => None,
            slot = slot => Some(slot),
        }
    }
}

/// An invocation's place in the client's schedule.
pub enum Slot<'a> {
    Shared(#[allow(dead_code)] tokio::sync::RwLockReadGuard<'a, ()>),
    Alone(#[allow(dead_code)] tokio::sync::RwLockWriteGuard<'a, ()>),
}
