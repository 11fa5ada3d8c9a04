//! A bounded queue per profile: so many programs in flight, so many
//! requests waiting behind them, each for so long. Past either bound the
//! request is refused with the dialect's overload answer, so a flood never
//! grows the server's memory or its clients' waits without end.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// One profile's queue.
pub(crate) struct ProfileQueue {
    slots: Arc<Semaphore>,
    concurrency: usize,
    waiting: AtomicUsize,
    max_waiting: usize,
    max_wait: Duration,
}

/// Why a request got no turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueRefusal {
    /// As many requests as the queue holds were already waiting.
    Full { waiting: usize },
    /// It waited the configured time without a turn.
    Waited { waited: Duration },
    /// It had a turn, but the runs in flight held the memory budget for as
    /// long as it could wait.
    Memory { needed: u64, budget: u64 },
}

impl QueueRefusal {
    /// The kind, as the metrics name it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            QueueRefusal::Full { .. } => "full",
            QueueRefusal::Waited { .. } => "waited",
            QueueRefusal::Memory { .. } => "memory",
        }
    }

    /// For a person: what happened and what to do.
    pub(crate) fn message(&self, profile: &str) -> String {
        match self {
            QueueRefusal::Full { waiting } => format!(
                "profile `{profile}` is busy: {waiting} request(s) already wait (the [serve] queue bound); try again later"
            ),
            QueueRefusal::Memory { needed, budget } => format!(
                "profile `{profile}` is busy: the runs in flight hold the server's memory budget ({}), and the {} this program may use did not free up in time ([serve] memory_budget); try again later",
                bytesize::ByteSize::b(*budget),
                bytesize::ByteSize::b(*needed),
            ),
            QueueRefusal::Waited { waited } => format!(
                "profile `{profile}` is busy: no turn within {:.1}s ([serve] queue_wait); try again later",
                waited.as_secs_f64()
            ),
        }
    }
}

/// A turn to run: held for as long as the run lasts.
pub(crate) struct Turn {
    _slot: OwnedSemaphorePermit,
}

impl ProfileQueue {
    pub(crate) fn new(concurrency: usize, max_waiting: usize, max_wait: Duration) -> ProfileQueue {
        let concurrency = concurrency.max(1);
        ProfileQueue {
            slots: Arc::new(Semaphore::new(concurrency)),
            concurrency,
            waiting: AtomicUsize::new(0),
            max_waiting,
            max_wait,
        }
    }

    /// A turn, at once if a slot is free, else after waiting in line at
    /// most `wait` (and never more than the queue's own wait): a client
    /// that stops waiting sooner is told at once rather than after it has
    /// gone.
    pub(crate) async fn turn_within(&self, wait: Duration) -> Result<Turn, QueueRefusal> {
        if let Ok(slot) = self.slots.clone().try_acquire_owned() {
            return Ok(Turn { _slot: slot });
        }
        let wait = wait.min(self.max_wait);
        let waiting = self.waiting.fetch_add(1, Ordering::SeqCst);
        let _leave = Leave(&self.waiting);
        if waiting >= self.max_waiting {
            return Err(QueueRefusal::Full { waiting });
        }
        match tokio::time::timeout(wait, self.slots.clone().acquire_owned()).await {
            Ok(Ok(slot)) => Ok(Turn { _slot: slot }),
            // The semaphore is never closed; treat it as a wait that ended.
            Ok(Err(_)) | Err(_) => Err(QueueRefusal::Waited { waited: wait }),
        }
    }

    /// Requests waiting now.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Runs holding a turn now.
    pub(crate) fn running(&self) -> usize {
        self.concurrency - self.slots.available_permits()
    }

    /// Programs in flight at most.
    pub(crate) fn concurrency(&self) -> usize {
        self.concurrency
    }
}

/// Leaves the line however the wait ends (a client that went away too).
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn past_its_bounds_the_queue_refuses() {
        let queue = Arc::new(ProfileQueue::new(1, 1, Duration::from_millis(50)));
        let held = queue.turn_within(Duration::MAX).await.unwrap();
        assert_eq!(queue.running(), 1);
        // One may wait; it is refused when its wait is over.
        let waiter = tokio::spawn({
            let queue = queue.clone();
            async move { queue.turn_within(Duration::MAX).await.map(|_| ()) }
        });
        while queue.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        // A second waiter finds the line full.
        assert!(matches!(
            queue.turn_within(Duration::MAX).await,
            Err(QueueRefusal::Full { waiting: 1 })
        ));
        assert!(matches!(
            waiter.await.unwrap(),
            Err(QueueRefusal::Waited { .. })
        ));
        assert_eq!(queue.waiting(), 0);
        drop(held);
        assert!(queue.turn_within(Duration::MAX).await.is_ok());
    }
}
