//! Who runs beside whom: every invocation holds a shared slot of its client's
//! schedule; confirming a timeout takes it whole, so that no other program
//! of the client runs meanwhile, and shared slots asked for after it wait
//! behind it (a confirmation is never starved). The load counts programs
//! inside their window, for when nothing else is measured.
//!
//! The side of a conversation adds a third kind, a slot beside: the
//! program holds its shared slot while it waits for its interactor to
//! reach the same case, so an interactor queued behind a waiting
//! confirmation would wait for that program, which waits for it. A slot
//! beside waits only while a confirmation runs, never for one that waits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
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

/// The kind of slot an invocation asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Beside other programs; waits behind a confirmation waiting.
    Shared,
    /// Beside other programs, skipping the confirmations waiting: for the
    /// interactor of a program that holds a shared slot meanwhile.
    Beside,
    /// The whole schedule: no other invocation of the client runs.
    Alone,
}

#[derive(Debug, Default)]
struct State {
    /// Shared and beside slots held.
    shared: usize,
    /// Whether a slot alone is held.
    alone: bool,
    /// Slots alone waited for.
    alone_waiting: usize,
}

/// The client's schedule.
#[derive(Debug, Default)]
pub struct Schedule {
    state: Mutex<State>,
    changed: Notify,
}

impl Schedule {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot of this kind; only the wait for it is cut short by a
    /// cancellation (`None`).
    pub async fn slot(&self, place: Place, token: &CancellationToken) -> Option<Slot<'_>> {
        // Counted while it waits, so that shared slots asked for later
        // wait behind it; uncounted however the wait ends.
        let _waiting = (place == Place::Alone).then(|| {
            self.lock().alone_waiting += 1;
            WaitingAlone(self)
        });
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the state is read: a release between the
            // two still wakes this wait.
            changed.as_mut().enable();
            if self.try_take(place) {
                return Some(Slot {
                    schedule: self,
                    place,
                });
            }
            tokio::select! {
                biased;
                () = token.cancelled() => return None,
                () = changed => {}
            }
        }
    }

    fn try_take(&self, place: Place) -> bool {
        let mut state = self.lock();
        let free = match place {
            Place::Shared => !state.alone && state.alone_waiting == 0,
            Place::Beside => !state.alone,
            Place::Alone => !state.alone && state.shared == 0,
        };
        if free {
            match place {
                Place::Shared | Place::Beside => state.shared += 1,
                // Its wait is uncounted as `slot` returns.
                Place::Alone => state.alone = true,
            }
        }
        free
    }
}

/// A wait for a slot alone, counted until it ends.
struct WaitingAlone<'a>(&'a Schedule);

impl Drop for WaitingAlone<'_> {
    fn drop(&mut self) {
        let schedule = self.0;
        schedule.lock().alone_waiting -= 1;
        // A cancelled wait: shared slots stop waiting for it.
        schedule.changed.notify_waiters();
    }
}

/// An invocation's place in the client's schedule, released on drop.
#[derive(Debug)]
pub struct Slot<'a> {
    schedule: &'a Schedule,
    place: Place,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut state = self.schedule.lock();
        match self.place {
            Place::Shared | Place::Beside => state.shared -= 1,
            Place::Alone => state.alone = false,
        }
        drop(state);
        self.schedule.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;

    use super::*;

    /// What `asked` gives when polled now: a free slot is taken at once.
    async fn now<F: Future>(asked: Pin<&mut F>) -> Option<F::Output> {
        tokio::select! {
            biased;
            given = asked => Some(given),
            () = std::future::ready(()) => None,
        }
    }

    async fn given_now(schedule: &Schedule, place: Place) -> bool {
        let token = CancellationToken::new();
        let asked = schedule.slot(place, &token);
        tokio::pin!(asked);
        now(asked).await.is_some()
    }

    #[tokio::test]
    async fn a_slot_beside_skips_a_waiting_confirmation_that_shared_slots_wait_behind() {
        let schedule = Schedule::default();
        let token = CancellationToken::new();
        let program = schedule.slot(Place::Shared, &token).await.expect("free");
        let alone = schedule.slot(Place::Alone, &token);
        tokio::pin!(alone);
        // The confirmation waits for the program's slot...
        assert!(now(alone.as_mut()).await.is_none());
        // ...and while it waits, a new program waits behind it, but the
        // interactor of the program holding its slot is let in beside it.
        assert!(!given_now(&schedule, Place::Shared).await);
        let interactor = schedule.slot(Place::Beside, &token).await.expect("beside");
        drop(program);
        assert!(now(alone.as_mut()).await.is_none());
        drop(interactor);
        let alone = now(alone.as_mut())
            .await
            .expect("the confirmation runs once both slots are released")
            .expect("not cancelled");
        // While it runs alone, nothing runs beside it.
        assert!(!given_now(&schedule, Place::Beside).await);
        assert!(!given_now(&schedule, Place::Shared).await);
        drop(alone);
        assert!(given_now(&schedule, Place::Shared).await);
    }

    #[tokio::test]
    async fn a_cancelled_wait_alone_holds_no_shared_slot_back() {
        let schedule = Schedule::default();
        let token = CancellationToken::new();
        let program = schedule.slot(Place::Shared, &token).await.expect("free");
        let cancelled = CancellationToken::new();
        let alone = schedule.slot(Place::Alone, &cancelled);
        tokio::pin!(alone);
        assert!(now(alone.as_mut()).await.is_none());
        assert!(!given_now(&schedule, Place::Shared).await);
        cancelled.cancel();
        assert!(alone.await.is_none());
        assert!(given_now(&schedule, Place::Shared).await);
        drop(program);
    }
}
