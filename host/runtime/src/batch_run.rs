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

use std::collections::{BTreeMap, BTreeSet, HashSet};

use futures_util::{Stream, StreamExt};
use progscore_sandbox::{BoxFuture, SandboxError};
use progscore_scoring::evidence::StoreError;
use progscore_scoring::{
    ProgramExecutionScorer, ProgramInput, Replayer, Score, ScoreRequest, ScoringError,
};
use tokio_util::sync::CancellationToken;

use crate::batch::{Batch, BatchItem, BatchLineError, BatchReadError, BatchSource};
use crate::policy::BatchEnd;
use crate::results::{Counts, Summary};

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
struct Tally {
    /// What the batch came to so far.
    summary: Summary,
    stop: Option<Stop>,
    cancel: CancellationToken,
}

impl Tally {
    /// A tally for a batch whose `not_scored` items were refused before it
    /// ran; `cancel` is the batch's token.
    fn new(not_scored: usize, cancel: &CancellationToken) -> Tally {
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
    fn record(&mut self, id: String, result: Result<Score, ItemFailure>) -> ItemEvent {
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

/// An item refused before anything ran: the field at fault and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemRefusal {
    /// The field's path in the batch line (`expectation.conditions[0]...`).
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// How a batch's items are checked before anything runs.
pub trait ItemCheck: Send + Sync {
    /// The item as it will be scored (language names made profile names),
    /// or why it cannot be: checked before anything of the batch runs.
    fn check(&self, item: BatchItem) -> Result<BatchItem, ItemRefusal>;
}

/// Items re-graded from stored evidence: language names made profile
/// names; the rescore checks the rest itself.
pub struct ReplayItems<'a>(pub &'a Replayer);

impl ItemCheck for ReplayItems<'_> {
    fn check(&self, mut item: BatchItem) -> Result<BatchItem, ItemRefusal> {
        item.expectation = self.0.canonical(item.expectation);
        Ok(item)
    }
}

/// How a face has a batch's items scored: the session's scorer
/// ([`ScorerItems`]), or a face's own path to it (the server's queues).
pub trait ItemScoring: ItemCheck {
    /// Whether `profile` can run here; checked for every profile of the
    /// batch before anything runs.
    fn preflight<'a>(&'a self, profile: &'a str) -> BoxFuture<'a, Result<(), SandboxError>>;

    /// Scores one checked item.
    fn score(
        &self,
        item: BatchItem,
        fresh: bool,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Score, ItemFailure>>;

    /// Programs in flight when the caller does not say, asked once the
    /// preflight is done (configured engines say then what they take).
    fn default_jobs(&self) -> usize;
}

/// The session's scorer as a batch's [`ItemScoring`]: what `progscore
/// score`, the Python package and Ray's driver run.
pub struct ScorerItems<'a> {
    /// The scorer.
    pub scorer: &'a ProgramExecutionScorer,
    /// The configured backends, whose engines say how many programs they
    /// take once their preflight reached them.
    pub backends: Option<std::sync::Arc<crate::backends::Backends>>,
}

impl<'a> ScorerItems<'a> {
    /// `scorer`'s items; default jobs follow what `backends`' engines take
    /// (none: this machine's cores alone).
    pub fn new(
        scorer: &'a ProgramExecutionScorer,
        backends: Option<std::sync::Arc<crate::backends::Backends>>,
    ) -> ScorerItems<'a> {
        ScorerItems { scorer, backends }
    }
}

impl ItemCheck for ScorerItems<'_> {
    fn check(&self, mut item: BatchItem) -> Result<BatchItem, ItemRefusal> {
        item.expectation = self.scorer.replayer().canonical(item.expectation);
        match self.scorer.validate(&item.expectation) {
            Ok(()) => Ok(item),
            Err(err) => Err(ItemRefusal {
                field: Some(format!("expectation.{}", err.field_path())),
                message: err.to_string(),
            }),
        }
    }
}

impl ItemScoring for ScorerItems<'_> {
    fn preflight<'a>(&'a self, profile: &'a str) -> BoxFuture<'a, Result<(), SandboxError>> {
        Box::pin(async move { self.scorer.preflight(profile).await.map(|_| ()) })
    }

    fn score(
        &self,
        item: BatchItem,
        fresh: bool,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Score, ItemFailure>> {
        let request = ScoreRequest::new(ProgramInput::Inline(item.program), item.expectation)
            .item_id(item.id)
            .fresh(fresh)
            .cancel(cancel);
        Box::pin(async move { Ok(self.scorer.score(request).await?) })
    }

    fn default_jobs(&self) -> usize {
        crate::policy::default_jobs_for(self.backends.as_deref())
    }
}

/// What a first reading of a batch found.
#[derive(Debug, Default)]
pub struct Survey {
    /// Lines that cannot be scored, in file order, each naming its field.
    pub bad_lines: Vec<BatchLineError>,
    /// The items to score, by profile.
    pub profiles: BTreeMap<String, usize>,
    /// The bad lines' numbers, skipped when the batch is read again.
    bad: HashSet<usize>,
}

impl Survey {
    /// Items to score (bad lines left out).
    pub fn items(&self) -> usize {
        self.profiles.values().sum()
    }

    /// The batch read again, as the survey read it: each good item checked,
    /// the lines the survey refused skipped. A line that became bad since
    /// (the file changed) comes as its error.
    pub fn read_again<'a>(
        &'a self,
        source: &BatchSource,
        check: &'a dyn ItemCheck,
    ) -> impl Iterator<Item = Result<BatchItem, BatchLineError>> + Send + 'a {
        let file = source.name();
        let lines: Box<dyn Iterator<Item = _> + Send> = match source.lines() {
            Ok(lines) => lines,
            // The survey read it: gone since, said as a bad line.
            Err(error) => Box::new(std::iter::once(Err(BatchLineError {
                file: file.clone(),
                line: 0,
                id: None,
                field: None,
                message: error.to_string(),
            }))),
        };
        lines.filter_map(move |line| match line {
            Err(error) if self.bad.contains(&error.line) => None,
            Err(error) => Some(Err(error)),
            Ok(item) if self.bad.contains(&item.line) => None,
            Ok(item) => Some(checked(check, &file, item)),
        })
    }
}

/// Reads `source` once, checking every line as scoring would: its bad
/// lines (each named by file, line and field) and the profiles its items
/// use. Nothing of the items is kept.
pub fn survey(source: &BatchSource, scoring: &dyn ItemCheck) -> Result<Survey, BatchReadError> {
    let file = source.name();
    let mut survey = Survey::default();
    for line in source.lines()? {
        match line.map(|item| checked(scoring, &file, item)) {
            Ok(Ok(item)) => {
                let profile = item.profile().unwrap_or_default().to_string();
                *survey.profiles.entry(profile).or_default() += 1;
            }
            Ok(Err(error)) | Err(error) => {
                survey.bad.insert(error.line);
                survey.bad_lines.push(error);
            }
        }
    }
    Ok(survey)
}

fn checked(
    scoring: &dyn ItemCheck,
    file: &str,
    item: BatchItem,
) -> Result<BatchItem, BatchLineError> {
    let (line, id) = (item.line, item.id.clone());
    scoring.check(item).map_err(|refusal| BatchLineError {
        file: file.to_string(),
        line,
        id: Some(id),
        field: refusal.field,
        message: refusal.message,
    })
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
    use progscore_scoring::EvidenceUse;
    use progscore_scoring::evidence::ScoreStatus;
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
