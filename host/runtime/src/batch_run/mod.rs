//! A batch's run as every face runs it: the items checked as scoring would,
//! every profile checked before anything runs, the items in flight, each
//! result classified (a dead engine or a failed store stops the batch once),
//! and how the batch ended. The faces print and write; they decide nothing
//! of this themselves.
//!
//! [`survey`] reads the batch once (its refused lines, the profiles it
//! uses); [`run_batch`] reads it again as the items are needed and gives
//! [`BatchEvent`]s: memory is bounded by the items in flight, not by the
//! batch (a batch of millions streams through). How one item is scored is
//! an [`ItemScoring`]'s: the session's scorer for the CLI and the Python
//! package, the server's queues for `/v1/batches`.

mod item_scoring;
mod prepared;
mod survey;
mod tally;

pub use item_scoring::{ItemCheck, ItemRefusal, ItemScoring, ReplayItems, ScorerItems};
pub use prepared::{PreparedBatch, prepare};
pub use survey::{Survey, survey};
pub use tally::{ItemEvent, ItemFailure, Stop, StoreFault};

use std::collections::BTreeSet;

use futures_util::{Stream, StreamExt};
use progscore_sandbox::SandboxError;
use progscore_scoring::{Score, ScoringError};
use tokio_util::sync::CancellationToken;

use self::tally::Tally;
use crate::batch::{BatchLineError, BatchSource};
use crate::policy::BatchEnd;
use crate::results::{Counts, Summary};

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
/// How a batch is run.
#[derive(Debug, Clone, Default)]
pub struct BatchOptions {
    /// Programs in flight; `None`: [`ItemScoring::default_jobs`].
    pub jobs: Option<usize>,
    /// Run again under new observation ids even where evidence is stored.
    pub fresh: bool,
    /// Cancels the batch: items not started end as cancelled without
    /// running, running ones are cancelled. A failed store or a dead
    /// engine cancels it too.
    pub cancel: CancellationToken,
}

/// What happens in a batch, in order: refused profiles first, then each
/// item as it ends, then [`BatchEvent::End`], the last.
#[derive(Debug)]
pub enum BatchEvent {
    /// A profile that cannot run here; its items are not scored and
    /// nothing of them is stored.
    ProfileRefused(RefusedProfile),
    /// The number of programs kept in flight, once known (after the
    /// preflight).
    Started {
        /// Programs in flight.
        jobs: usize,
    },
    /// One item ended, and how far the batch has come with it.
    Item {
        /// What the item came to.
        event: ItemEvent,
        /// The batch so far.
        counts: Counts,
    },
    /// A line that became bad after the survey read it (the file changed
    /// under the batch): not scored.
    BadLine(BatchLineError),
    /// The batch is over: what it came to.
    End(BatchFinished),
}

/// What a batch came to.
#[derive(Debug)]
pub struct BatchFinished {
    /// The counts.
    pub summary: Summary,
    stop: Option<Stop>,
}

impl BatchFinished {
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

    /// Why the batch stopped before its end, if a fault stopped it.
    pub fn stopped_by(&self) -> Option<Stop> {
        self.stop
    }
}

/// What an item in flight came to.
enum Ended {
    Item(String, Result<Score, ItemFailure>),
    BadLine(BatchLineError),
}

/// Runs the batch `survey` read: every profile's preflight, then the items
/// read again from `source` as they are needed, `jobs` at a time, each
/// told as it ends, then the end. A line the survey refused is skipped.
pub fn run_batch<'a>(
    scoring: &'a dyn ItemScoring,
    source: &'a BatchSource,
    survey: &'a Survey,
    options: BatchOptions,
) -> impl Stream<Item = BatchEvent> + Send + 'a {
    let BatchOptions {
        jobs: wanted,
        fresh,
        cancel,
    } = options;
    let preflight =
        {
            let cancel = cancel.clone();
            async move {
                let checks =
                    futures_util::future::join_all(survey.profiles.keys().map(|profile| async {
                        (profile.clone(), scoring.preflight(profile).await)
                    }));
                let checks = tokio::select! {
                    checks = checks => checks,
                    () = cancel.cancelled() => Vec::new(),
                };
                let refused: Vec<RefusedProfile> = checks
                    .into_iter()
                    .filter_map(|(profile, check)| {
                        check.err().map(|error| RefusedProfile {
                            items: survey.profiles[&profile],
                            profile,
                            error,
                        })
                    })
                    .collect();
                let jobs = wanted.unwrap_or_else(|| scoring.default_jobs()).max(1);
                (refused, jobs)
            }
        };
    futures_util::stream::once(preflight).flat_map(move |(refused, jobs)| {
        let skipped: BTreeSet<String> = refused.iter().map(|r| r.profile.clone()).collect();
        let mut tally = Tally::new(refused.iter().map(|r| r.items).sum(), &cancel);
        let to_start = survey.items() - tally.summary.not_scored;
        let head = futures_util::stream::iter(
            refused
                .into_iter()
                .map(BatchEvent::ProfileRefused)
                .chain(std::iter::once(BatchEvent::Started { jobs })),
        );
        let batch_cancel = cancel.clone();
        let cancel = cancel.clone();
        let started = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = started.clone();
        let items = futures_util::stream::iter(survey.read_again(source, scoring))
            // Once cancelled, nothing more is read: the items left are
            // counted as cancelled at the end.
            .take_while({
                let cancel = cancel.clone();
                move |_| futures_util::future::ready(!cancel.is_cancelled())
            })
            .filter(move |line| {
                let kept = match line {
                    Ok(item) if item.profile().is_some_and(|p| skipped.contains(p)) => false,
                    Ok(_) => {
                        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        true
                    }
                    Err(_) => true,
                };
                futures_util::future::ready(kept)
            })
            .map(move |line| {
                let cancel = cancel.clone();
                async move {
                    match line {
                        Err(error) => Ended::BadLine(error),
                        Ok(item) if cancel.is_cancelled() => {
                            Ended::Item(item.id, Err(ScoringError::Cancelled.into()))
                        }
                        Ok(item) => {
                            let id = item.id.clone();
                            Ended::Item(id, scoring.score(item, fresh, cancel.child_token()).await)
                        }
                    }
                }
            })
            .buffer_unordered(jobs);
        let mut items = Box::pin(items);
        let mut over = false;
        let tail = futures_util::stream::poll_fn(move |context| {
            use std::task::Poll;
            if over {
                return Poll::Ready(None);
            }
            Poll::Ready(Some(
                match std::task::ready!(items.as_mut().poll_next(context)) {
                    Some(Ended::Item(id, result)) => {
                        let event = tally.record(id, result);
                        BatchEvent::Item {
                            event,
                            counts: tally.summary.counts(),
                        }
                    }
                    Some(Ended::BadLine(error)) => BatchEvent::BadLine(error),
                    None => {
                        over = true;
                        if batch_cancel.is_cancelled() {
                            // Never read: the batch stopped first.
                            let read = started.load(std::sync::atomic::Ordering::Relaxed);
                            tally.summary.cancelled += to_start.saturating_sub(read);
                        }
                        BatchEvent::End(BatchFinished {
                            summary: std::mem::take(&mut tally.summary),
                            stop: tally.stop,
                        })
                    }
                },
            ))
        });
        head.chain(tail)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::BatchItem;
    use progscore_sandbox::BoxFuture;
    use progscore_scoring::EvidenceUse;
    use progscore_scoring::evidence::ScoreStatus;
    use progscore_scoring::evidence::StoreError;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn line(id: &str, profile: &str) -> String {
        format!(
            r#"{{"id": "{id}", "program": "print(1)", "expectation": {{"conditions": [{{"program_behaves": {{"profile": "{profile}", "cases": [{{"invocation": {{"args": []}}, "expected": {{"exit_code": 0}}}}]}}}}]}}}}"#
        )
    }

    fn sent(lines: &[String]) -> BatchSource {
        BatchSource::Sent {
            source: "request".into(),
            bytes: lines.join("\n").into_bytes().into(),
        }
    }

    fn verdict(item: BatchItem, value: bool) -> Score {
        let profile = item.profile().unwrap_or_default().to_string();
        Score {
            score_id: 1,
            item_id: Some(item.id),
            status: ScoreStatus::Complete,
            value: Some(value),
            rationale: String::new(),
            reason: None,
            reason_kind: None,
            score: Some(if value { 1.0 } else { 0.0 }),
            groups: Vec::new(),
            observation_ids: Vec::new(),
            cases: Vec::new(),
            profile,
            program_sha256: String::new(),
            expectation: item.expectation,
            expectation_sha256: String::new(),
            evidence: EvidenceUse::Ran,
        }
    }

    type Answer = dyn Fn(&BatchItem) -> Result<bool, ScoringError> + Send + Sync;

    /// Items scored by `answer`, counting the checks (each a line read)
    /// and what was scored; a profile named `refused` fails its preflight.
    struct Scripted {
        answer: Box<Answer>,
        checks: AtomicUsize,
        scored: Mutex<Vec<String>>,
        /// Holds every score until opened.
        gate: Option<tokio::sync::Semaphore>,
        in_flight: AtomicUsize,
    }

    impl Scripted {
        fn new(
            answer: impl Fn(&BatchItem) -> Result<bool, ScoringError> + Send + Sync + 'static,
        ) -> Scripted {
            Scripted {
                answer: Box::new(answer),
                checks: AtomicUsize::new(0),
                scored: Mutex::new(Vec::new()),
                gate: None,
                in_flight: AtomicUsize::new(0),
            }
        }
    }

    impl ItemCheck for Scripted {
        fn check(&self, item: BatchItem) -> Result<BatchItem, ItemRefusal> {
            self.checks.fetch_add(1, Ordering::SeqCst);
            Ok(item)
        }
    }

    impl ItemScoring for Scripted {
        fn preflight<'a>(&'a self, profile: &'a str) -> BoxFuture<'a, Result<(), SandboxError>> {
            Box::pin(async move {
                if profile == "refused" {
                    return Err(SandboxError::EngineUnavailable {
                        message: "no engine for this profile".into(),
                    });
                }
                Ok(())
            })
        }

        fn score(
            &self,
            item: BatchItem,
            _fresh: bool,
            cancel: CancellationToken,
        ) -> BoxFuture<'_, Result<Score, ItemFailure>> {
            Box::pin(async move {
                self.in_flight.fetch_add(1, Ordering::SeqCst);
                if let Some(gate) = &self.gate {
                    tokio::select! {
                        permit = gate.acquire() => drop(permit),
                        () = cancel.cancelled() => {
                            self.in_flight.fetch_sub(1, Ordering::SeqCst);
                            return Err(ScoringError::Cancelled.into());
                        }
                    }
                }
                self.scored.lock().unwrap().push(item.id.clone());
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                let value = (self.answer)(&item)?;
                Ok(verdict(item, value))
            })
        }

        fn default_jobs(&self) -> usize {
            2
        }
    }

    async fn run(
        scoring: &Scripted,
        source: &BatchSource,
        jobs: usize,
    ) -> (Vec<BatchEvent>, BatchFinished) {
        let survey = survey(source, scoring).unwrap();
        let options = BatchOptions {
            jobs: Some(jobs),
            ..BatchOptions::default()
        };
        let mut events: Vec<BatchEvent> =
            run_batch(scoring, source, &survey, options).collect().await;
        let Some(BatchEvent::End(finished)) = events.pop() else {
            panic!("the last event is the end: {events:?}");
        };
        (events, finished)
    }

    #[tokio::test]
    async fn a_dead_engine_stops_the_batch_once_and_the_batch_ends_unavailable() {
        let lines: Vec<String> = (0..40).map(|i| line(&format!("i{i}"), "python")).collect();
        let scoring = Scripted::new(|item| {
            if item.id == "i3" {
                return Err(ScoringError::Refused(SandboxError::EngineUnavailable {
                    message: "unix:///run/docker.sock: connection refused".into(),
                }));
            }
            Ok(true)
        });
        let (events, finished) = run(&scoring, &sent(&lines), 2).await;
        let gone = events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    BatchEvent::Item {
                        event: ItemEvent::EngineGone { .. },
                        ..
                    }
                )
            })
            .count();
        assert_eq!(gone, 1, "said once: {events:?}");
        assert_eq!(finished.end(None), BatchEnd::EngineGone);
        assert_eq!(
            finished.end(Some(143)),
            BatchEnd::Interrupted { exit_code: 143 },
            "a signal's status wins over the stop"
        );
        let scored = scoring.scored.lock().unwrap().len();
        assert!(scored < 10, "the batch stopped: {scored} of 40 were scored");
        let summary = &finished.summary;
        assert_eq!(
            summary.trues + summary.not_scored + summary.cancelled,
            40,
            "every item is counted: {summary:?}"
        );
    }

    #[tokio::test]
    async fn a_failed_store_stops_the_batch_once() {
        let lines: Vec<String> = (0..30).map(|i| line(&format!("i{i}"), "python")).collect();
        let scoring = Scripted::new(|item| {
            if item.id.as_str() >= "i2" {
                return Err(ScoringError::Store(StoreError::Poisoned));
            }
            Ok(false)
        });
        let (events, finished) = run(&scoring, &sent(&lines), 3).await;
        let said = events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    BatchEvent::Item {
                        event: ItemEvent::StoreFailed { .. },
                        ..
                    }
                )
            })
            .count();
        assert_eq!(said, 1, "said once: {events:?}");
        assert_eq!(finished.end(None), BatchEnd::StoreFailed);
        assert!(scoring.scored.lock().unwrap().len() < 30);
    }

    #[tokio::test]
    async fn a_refused_profile_is_said_first_and_its_items_never_run() {
        let lines = vec![
            line("a", "python"),
            line("b", "refused"),
            line("c", "python"),
            line("d", "refused"),
        ];
        let scoring = Scripted::new(|_| Ok(true));
        let (events, finished) = run(&scoring, &sent(&lines), 4).await;
        let BatchEvent::ProfileRefused(refused) = &events[0] else {
            panic!("the refused profile first: {events:?}");
        };
        assert_eq!((refused.profile.as_str(), refused.items), ("refused", 2));
        let mut scored = scoring.scored.lock().unwrap().clone();
        scored.sort();
        assert_eq!(scored, ["a", "c"]);
        assert_eq!(finished.summary.not_scored, 2);
        assert_eq!(finished.summary.trues, 2);
        assert_eq!(finished.end(None), BatchEnd::NotScored);
    }

    #[tokio::test]
    async fn bad_lines_are_found_before_anything_runs_and_skipped() {
        let lines = vec![
            line("a", "python"),
            "not json".to_string(),
            line("a", "python"),
            line("b", "python"),
        ];
        let scoring = Scripted::new(|_| Ok(true));
        let source = sent(&lines);
        let survey = survey(&source, &scoring).unwrap();
        let bad: Vec<(usize, Option<&str>)> = survey
            .bad_lines
            .iter()
            .map(|e| (e.line, e.field.as_deref()))
            .collect();
        assert_eq!(bad, [(2, None), (3, Some("id"))]);
        assert!(scoring.scored.lock().unwrap().is_empty(), "nothing ran");
        let (events, finished) = run(&scoring, &source, 2).await;
        assert!(!events.iter().any(|e| matches!(e, BatchEvent::BadLine(_))));
        assert_eq!(finished.summary.trues, 2);
    }

    /// A batch streams: while the first items run, the driver has read
    /// only as many lines as it keeps in flight (and one more), however
    /// long the batch.
    #[tokio::test]
    async fn the_batch_is_read_as_its_items_are_needed() {
        let lines: Vec<String> = (0..5_000)
            .map(|i| line(&format!("i{i}"), "python"))
            .collect();
        let mut scoring = Scripted::new(|_| Ok(true));
        scoring.gate = Some(tokio::sync::Semaphore::new(0));
        let source = sent(&lines);
        let survey = survey(&source, &scoring).unwrap();
        let surveyed = scoring.checks.load(Ordering::SeqCst);
        assert_eq!(surveyed, 5_000);
        let options = BatchOptions {
            jobs: Some(4),
            ..BatchOptions::default()
        };
        let mut events = Box::pin(run_batch(&scoring, &source, &survey, options));
        let first = events.next().await;
        assert!(
            matches!(first, Some(BatchEvent::Started { jobs: 4 })),
            "{first:?}"
        );
        // Drive the stream until all four are waiting at the gate.
        let waiting = async {
            loop {
                tokio::select! {
                    biased;
                    event = events.next() => panic!("nothing ends while the gate is shut: {event:?}"),
                    () = tokio::task::yield_now() => {}
                }
                if scoring.in_flight.load(Ordering::SeqCst) == 4 {
                    break;
                }
            }
        };
        waiting.await;
        let read = scoring.checks.load(Ordering::SeqCst) - surveyed;
        assert!(read <= 5, "{read} lines read with 4 in flight");
        scoring.gate.as_ref().unwrap().add_permits(5_000);
        let mut ended = 0;
        while let Some(event) = events.next().await {
            if let BatchEvent::End(finished) = event {
                assert_eq!(finished.summary.trues, 5_000);
                ended += 1;
            }
        }
        assert_eq!(ended, 1);
    }

    #[tokio::test]
    async fn a_cancelled_batch_counts_the_items_it_never_read() {
        let lines: Vec<String> = (0..100).map(|i| line(&format!("i{i}"), "python")).collect();
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        let scoring = Scripted::new(move |item| {
            if item.id == "i1" {
                stop.cancel();
            }
            Ok(true)
        });
        let source = sent(&lines);
        let survey = survey(&source, &scoring).unwrap();
        let options = BatchOptions {
            jobs: Some(2),
            cancel,
            ..BatchOptions::default()
        };
        let events: Vec<BatchEvent> = run_batch(&scoring, &source, &survey, options)
            .collect()
            .await;
        let Some(BatchEvent::End(finished)) = events.last() else {
            panic!("{events:?}")
        };
        let summary = &finished.summary;
        assert!(summary.cancelled > 90, "{summary:?}");
        assert_eq!(summary.trues + summary.cancelled, 100, "{summary:?}");
        assert_eq!(
            finished.end(Some(130)),
            BatchEnd::Interrupted { exit_code: 130 }
        );
    }
}
