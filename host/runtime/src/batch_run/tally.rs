//! What an item came to, as the batch counts it: why it has no score, the
//! event a face shows, and the tally that stops the batch once when the
//! store or the engine fails.

use progscore_sandbox::SandboxError;
use progscore_scoring::evidence::StoreError;
use progscore_scoring::{Score, ScoringError};
use tokio_util::sync::CancellationToken;

use crate::results::Summary;

/// Why an item has no score.
#[derive(Debug)]
pub enum ItemFailure {
    /// The scorer's error.
    Scoring(ScoringError),
    /// The service scoring it declined to run it now (its queue full, the
    /// sandbox refused it for a reason it does not tell): nothing is known
    /// of the program, nothing was stored, and the batch goes on.
    NotRun(String),
    /// The evidence store of the service scoring it failed, as the service
    /// tells it: the batch stops.
    StoreFailed(String),
}

impl From<ScoringError> for ItemFailure {
    fn from(error: ScoringError) -> ItemFailure {
        ItemFailure::Scoring(error)
    }
}

/// A failed evidence store, as the batch's scoring knows it.
#[derive(Debug, thiserror::Error)]
pub enum StoreFault {
    /// This process's store.
    #[error(transparent)]
    Store(StoreError),
    /// A service's store, as it tells it.
    #[error("{0}")]
    Told(String),
}

/// One item's result as the batch counts it.
#[derive(Debug)]
pub enum ItemEvent {
    /// A verdict: the face writes its result line.
    Scored(Box<Score>),
    /// Cancelled before its end (a signal, or the batch stopped).
    Cancelled {
        /// The item.
        id: String,
    },
    /// The sandbox refused this item; nothing of it is stored.
    NotScored {
        /// The item.
        id: String,
        /// Why.
        error: SandboxError,
    },
    /// The service scoring it declined to run it (a busy queue): nothing of
    /// it is stored.
    NotRun {
        /// The item.
        id: String,
        /// Why.
        reason: String,
    },
    /// The engine stopped answering: said once, and the batch stops (no
    /// further item is burned against a dead engine).
    EngineGone {
        /// The item.
        id: String,
        /// Why.
        error: SandboxError,
    },
    /// The evidence store failed: said once (it is the same for every
    /// item), and the batch stops.
    StoreFailed {
        /// The item.
        id: String,
        /// Why.
        fault: StoreFault,
    },
    /// Another item hit the fault the batch already stopped for.
    AlreadySaid {
        /// The item.
        id: String,
    },
    /// The item failed without a verdict.
    Failed {
        /// The item.
        id: String,
        /// Why.
        error: ScoringError,
    },
}

/// Why a batch stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    StoreFailed,
    EngineGone,
}

/// Counts a batch's results and stops it (through its cancel token) when
/// the store or the engine fails.
#[derive(Debug)]
pub(super) struct Tally {
    /// What the batch came to so far.
    pub(super) summary: Summary,
    pub(super) stop: Option<Stop>,
    cancel: CancellationToken,
}

impl Tally {
    /// A tally for a batch whose `not_scored` items were refused before it
    /// ran; `cancel` is the batch's token.
    pub(super) fn new(not_scored: usize, cancel: &CancellationToken) -> Tally {
        Tally {
            summary: Summary {
                not_scored,
                ..Summary::default()
            },
            stop: None,
            cancel: cancel.clone(),
        }
    }

    /// Counts one item's result and says what the face should show.
    pub(super) fn record(&mut self, id: String, result: Result<Score, ItemFailure>) -> ItemEvent {
        match result {
            Ok(score) => {
                self.summary.add(&score);
                ItemEvent::Scored(Box::new(score))
            }
            Err(ItemFailure::Scoring(ScoringError::Cancelled)) => {
                self.summary.cancelled += 1;
                ItemEvent::Cancelled { id }
            }
            Err(ItemFailure::Scoring(ScoringError::Store(err))) if err.is_store_fault() => {
                self.summary.errors += 1;
                let fault = StoreFault::Store(err);
                self.stop_once(Stop::StoreFailed, ItemEvent::StoreFailed { id, fault })
            }
            Err(ItemFailure::NotRun(reason)) => {
                self.summary.not_scored += 1;
                ItemEvent::NotRun { id, reason }
            }
            Err(ItemFailure::StoreFailed(told)) => {
                self.summary.errors += 1;
                let fault = StoreFault::Told(told);
                self.stop_once(Stop::StoreFailed, ItemEvent::StoreFailed { id, fault })
            }
            Err(ItemFailure::Scoring(ScoringError::Refused(error))) => {
                self.summary.not_scored += 1;
                if matches!(error, SandboxError::EngineUnavailable { .. }) {
                    self.stop_once(Stop::EngineGone, ItemEvent::EngineGone { id, error })
                } else {
                    ItemEvent::NotScored { id, error }
                }
            }
            Err(ItemFailure::Scoring(error)) => {
                self.summary.errors += 1;
                ItemEvent::Failed { id, error }
            }
        }
    }

    /// The first fault of its kind stops the batch and is said; later
    /// ones are counted only.
    fn stop_once(&mut self, stop: Stop, event: ItemEvent) -> ItemEvent {
        if self.stop.is_some_and(|known| known == stop) {
            let id = match event {
                ItemEvent::EngineGone { id, .. } | ItemEvent::StoreFailed { id, .. } => id,
                _ => String::new(),
            };
            return ItemEvent::AlreadySaid { id };
        }
        if self.stop.is_none() {
            self.stop = Some(stop);
            self.cancel.cancel();
        }
        event
    }
}
