//! A batch's run as every face runs it: the items checked as scoring would,
//! every profile checked before anything runs, the items in flight, each
//! result classified (a dead engine or a failed store stops the batch once),
//! and how the batch ended. The faces print and write; they decide nothing
//! of this themselves.

use std::collections::{BTreeMap, BTreeSet};

use futures_util::{Stream, StreamExt};
use progscore_sandbox::SandboxError;
use progscore_scoring::evidence::StoreError;
use progscore_scoring::{
    ProgramExecutionScorer, ProgramInput, Replayer, Score, ScoreRequest, ScoringError,
};
use tokio_util::sync::CancellationToken;

use crate::batch::{Batch, BatchItem, BatchLineError};
use crate::policy::BatchEnd;
use crate::results::Summary;

/// A batch's items checked as scoring would check them, and its refused lines.
#[derive(Debug, Default)]
pub struct PreparedBatch {
    /// Items to score, their language names made their profiles' own names.
    pub items: Vec<BatchItem>,
    /// Lines that could not be read or whose expectation is refused, in file order.
    pub bad_lines: Vec<BatchLineError>,
}

/// Checks every item of `batch` (read from `file`): a language name becomes
/// its profile's own name, so that the preflight and the summary name
/// profiles; an expectation the scorer refuses becomes a bad line naming its
/// field. Without a scorer (offline: rescore) the rescore itself validates.
pub fn prepare(
    batch: Batch,
    file: &str,
    replayer: &Replayer,
    scorer: Option<&ProgramExecutionScorer>,
) -> PreparedBatch {
    let Batch {
        items,
        errors: mut bad_lines,
    } = batch;
    let mut good = Vec::with_capacity(items.len());
    for mut item in items {
        item.expectation = replayer.canonical(item.expectation);
        match scorer.map_or(Ok(()), |scorer| scorer.validate(&item.expectation)) {
            Ok(()) => good.push(item),
            Err(err) => bad_lines.push(BatchLineError {
                file: file.to_string(),
                line: item.line,
                id: Some(item.id.clone()),
                field: Some(format!("expectation.{}", err.field_path())),
                message: err.to_string(),
            }),
        }
    }
    bad_lines.sort_by_key(|e| e.line);
    PreparedBatch {
        items: good,
        bad_lines,
    }
}

/// A profile the sandbox cannot run here, and how many items it kept from running.
#[derive(Debug)]
pub struct RefusedProfile {
    /// The profile's name.
    pub profile: String,
    /// Why its preflight failed.
    pub error: SandboxError,
    /// Its items, none of them scored (nothing of them is stored).
    pub items: usize,
}

/// The items whose profiles passed their preflight, and the refused profiles.
#[derive(Debug)]
pub struct CheckedBatch {
    /// Items to run.
    pub items: Vec<BatchItem>,
    /// Profiles that cannot run here, by name.
    pub refused: Vec<RefusedProfile>,
}

impl CheckedBatch {
    /// Items not scored because their profile cannot run here.
    pub fn refused_items(&self) -> usize {
        self.refused.iter().map(|r| r.items).sum()
    }
}

/// Checks every profile the items use, all at once, before anything runs.
/// Cancelled during the checks: nothing is refused (each item then ends as
/// cancelled, without running).
pub async fn preflight(
    scorer: &ProgramExecutionScorer,
    items: Vec<BatchItem>,
    cancel: &CancellationToken,
) -> CheckedBatch {
    let profiles: BTreeSet<String> = items
        .iter()
        .filter_map(|item| item.profile().map(str::to_string))
        .collect();
    let checks = futures_util::future::join_all(
        profiles
            .iter()
            .map(|profile| async move { (profile, scorer.preflight(profile).await) }),
    );
    let checks = tokio::select! {
        checks = checks => checks,
        () = cancel.cancelled() => Vec::new(),
    };
    let refused: BTreeMap<String, SandboxError> = checks
        .into_iter()
        .filter_map(|(profile, check)| check.err().map(|err| (profile.clone(), err)))
        .collect();
    let (items, kept_back): (Vec<BatchItem>, Vec<BatchItem>) = items
        .into_iter()
        .partition(|item| item.profile().is_none_or(|p| !refused.contains_key(p)));
    let refused = refused
        .into_iter()
        .map(|(profile, error)| RefusedProfile {
            items: kept_back
                .iter()
                .filter(|item| item.profile() == Some(profile.as_str()))
                .count(),
            profile,
            error,
        })
        .collect();
    CheckedBatch { items, refused }
}

/// Scores `items`, `jobs` at a time, in the order they finish: each item's
/// id and result. Once `cancel` fires, items not yet started end as
/// [`ScoringError::Cancelled`] without running; running ones are cancelled.
pub fn score_all(
    scorer: &ProgramExecutionScorer,
    items: Vec<BatchItem>,
    jobs: usize,
    fresh: bool,
    cancel: &CancellationToken,
) -> impl Stream<Item = (String, Result<Score, ScoringError>)> {
    let cancel = cancel.clone();
    futures_util::stream::iter(items)
        .map(move |item| {
            let request = ScoreRequest::new(ProgramInput::Inline(item.program), item.expectation)
                .item_id(item.id.clone())
                .fresh(fresh)
                .cancel(cancel.child_token());
            let cancel = cancel.clone();
            async move {
                if cancel.is_cancelled() {
                    return (item.id, Err(ScoringError::Cancelled));
                }
                (item.id, scorer.score(request).await)
            }
        })
        .buffer_unordered(jobs.max(1))
}

/// One item's result as the batch counts it.
#[derive(Debug)]
pub enum ItemEvent {
    /// A verdict: the face writes its result line.
    Scored(Box<Score>),
    /// Cancelled before its end (a signal, or the batch stopped).
    Cancelled,
    /// The sandbox refused this item; nothing of it is stored.
    NotScored {
        /// The item.
        id: String,
        /// Why.
        error: SandboxError,
    },
    /// The engine stopped answering: said once, and the batch stops (no
    /// further item is burned against a dead engine).
    EngineGone(SandboxError),
    /// The evidence store failed: said once (it is the same for every
    /// item), and the batch stops.
    StoreFailed(StoreError),
    /// Another item hit the fault the batch already stopped for.
    AlreadySaid,
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
enum Stop {
    StoreFailed,
    EngineGone,
}

/// Counts a batch's results and stops it (through its cancel token) when
/// the store or the engine fails.
#[derive(Debug)]
pub struct Tally {
    /// What the batch came to so far.
    pub summary: Summary,
    stop: Option<Stop>,
    cancel: CancellationToken,
}

impl Tally {
    /// A tally for a batch whose `not_scored` items were refused before it
    /// ran; `cancel` is the batch's token.
    pub fn new(not_scored: usize, cancel: &CancellationToken) -> Tally {
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
    pub fn record(&mut self, id: String, result: Result<Score, ScoringError>) -> ItemEvent {
        match result {
            Ok(score) => {
                self.summary.add(&score);
                ItemEvent::Scored(Box::new(score))
            }
            Err(ScoringError::Cancelled) => {
                self.summary.cancelled += 1;
                ItemEvent::Cancelled
            }
            Err(ScoringError::Store(err)) if err.is_store_fault() => {
                self.summary.errors += 1;
                self.stop_once(Stop::StoreFailed, ItemEvent::StoreFailed(err))
            }
            Err(ScoringError::Refused(error)) => {
                self.summary.not_scored += 1;
                if matches!(error, SandboxError::EngineUnavailable { .. }) {
                    self.stop_once(Stop::EngineGone, ItemEvent::EngineGone(error))
                } else {
                    ItemEvent::NotScored { id, error }
                }
            }
            Err(error) => {
                self.summary.errors += 1;
                ItemEvent::Failed { id, error }
            }
        }
    }

    /// The first fault of its kind stops the batch and is said; later
    /// ones are counted only.
    fn stop_once(&mut self, stop: Stop, event: ItemEvent) -> ItemEvent {
        if self.stop.is_some_and(|known| known == stop) {
            return ItemEvent::AlreadySaid;
        }
        if self.stop.is_none() {
            self.stop = Some(stop);
            self.cancel.cancel();
        }
        event
    }

    /// How the batch ended; `signal_exit` is the exit status of the signal
    /// that interrupted it, if one did.
    pub fn end(&self, signal_exit: Option<u8>) -> BatchEnd {
        match (signal_exit, self.stop) {
            (Some(exit_code), _) => BatchEnd::Interrupted { exit_code },
            (None, Some(Stop::StoreFailed)) => BatchEnd::StoreFailed,
            (None, Some(Stop::EngineGone)) => BatchEnd::EngineGone,
            (None, None) => BatchEnd::of(&self.summary, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> Result<Score, ScoringError> {
        Err(ScoringError::Refused(SandboxError::EngineUnavailable {
            message: "unix:///run/docker.sock: connection refused".into(),
        }))
    }

    #[test]
    fn a_dead_engine_stops_the_batch_once_and_the_batch_ends_unavailable() {
        let cancel = CancellationToken::new();
        let mut tally = Tally::new(0, &cancel);
        assert!(matches!(
            tally.record("a".into(), refused()),
            ItemEvent::EngineGone(_)
        ));
        assert!(cancel.is_cancelled(), "the batch's token is cancelled");
        assert!(matches!(
            tally.record("b".into(), refused()),
            ItemEvent::AlreadySaid
        ));
        assert!(matches!(
            tally.record("c".into(), Err(ScoringError::Cancelled)),
            ItemEvent::Cancelled
        ));
        assert_eq!(tally.summary.not_scored, 2);
        assert_eq!(tally.summary.cancelled, 1);
        assert_eq!(tally.end(None), BatchEnd::EngineGone);
        assert_eq!(
            tally.end(Some(143)),
            BatchEnd::Interrupted { exit_code: 143 },
            "a signal's status wins over the stop"
        );
    }
}
