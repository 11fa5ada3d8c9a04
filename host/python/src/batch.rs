//! A batch run by the runtime's batch driver, its events handed to Python
//! one at a time: what `python -m progscore.ray score` runs, the same
//! driver as `progscore score` (the same preflight, counts, stop-once on a
//! failed store or a dead engine, and exit status).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::StreamExt;
use progscore_runtime::backends::Backends;
use progscore_runtime::batch::BatchSource;
use progscore_runtime::batch_run::{
    self, BatchEvent, BatchFinished, BatchOptions, ItemEvent, ScorerItems, Survey,
};
use progscore_runtime::policy::exit_status;
use progscore_runtime::results::result_line;
use progscore_scoring::ProgramExecutionScorer;
use pyo3::prelude::*;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::counts::{counts_of, parse_fail_on};
use crate::errors::{InvalidExpectationError, ProgscoreError};
use crate::task::{NativeTask, NativeWaker, RUNTIME};

/// Events waiting for Python: the driver waits while this many are unread.
const WAITING_EVENTS: usize = 64;

/// A batch file surveyed (its bad lines known), then run.
#[pyclass(frozen, module = "progscore._native")]
pub(crate) struct NativeBatch {
    scorer: Arc<ProgramExecutionScorer>,
    backends: Option<Arc<Backends>>,
    source: BatchSource,
    survey: Mutex<Option<Survey>>,
    bad_lines: Vec<String>,
    cancel: CancellationToken,
    events: Arc<tokio::sync::Mutex<Option<mpsc::Receiver<String>>>>,
    finished: Arc<Mutex<Option<BatchFinished>>>,
}

impl NativeBatch {
    /// Reads `path` once as the runtime's survey does (each line checked as
    /// scoring would).
    pub(crate) fn survey(
        scorer: Arc<ProgramExecutionScorer>,
        backends: Option<Arc<Backends>>,
        path: PathBuf,
    ) -> PyResult<NativeBatch> {
        let source = BatchSource::File(path);
        let survey = {
            let items = ScorerItems::new(&scorer, backends.clone());
            batch_run::survey(&source, &items)
                .map_err(|e| InvalidExpectationError::new_err(e.to_string()))?
        };
        Ok(NativeBatch {
            bad_lines: survey.bad_lines.iter().map(ToString::to_string).collect(),
            scorer,
            backends,
            source,
            survey: Mutex::new(Some(survey)),
            cancel: CancellationToken::new(),
            events: Arc::new(tokio::sync::Mutex::new(None)),
            finished: Arc::new(Mutex::new(None)),
        })
    }

    fn finished(&self) -> PyResult<std::sync::MutexGuard<'_, Option<BatchFinished>>> {
        let finished = self.finished.lock().unwrap_or_else(PoisonError::into_inner);
        if finished.is_none() {
            return Err(ProgscoreError::new_err("the batch has not ended yet"));
        }
        Ok(finished)
    }
}

/// An event as JSON for Python: `{"kind": ..., ...}`.
fn event_json(event: BatchEvent, finished: &Mutex<Option<BatchFinished>>) -> String {
    let value = match event {
        BatchEvent::ProfileRefused(refused) => json!({
            "kind": "profile_refused", "profile": refused.profile,
            "error": refused.error.to_string(), "items": refused.items,
        }),
        BatchEvent::Started { jobs } => json!({"kind": "started", "jobs": jobs}),
        BatchEvent::BadLine(error) => json!({"kind": "bad_line", "error": error.to_string()}),
        BatchEvent::Item { event, .. } => match event {
            ItemEvent::Scored(score) => {
                json!({"kind": "scored", "line": result_line(&score, None)})
            }
            ItemEvent::NotScored { id, error } => {
                json!({"kind": "not_scored", "id": id, "error": error.to_string()})
            }
            ItemEvent::NotRun { id, reason } => {
                json!({"kind": "not_scored", "id": id, "error": reason})
            }
            ItemEvent::EngineGone { id, error } => {
                json!({"kind": "engine_gone", "id": id, "error": error.to_string()})
            }
            ItemEvent::StoreFailed { id, fault } => {
                json!({"kind": "store_failed", "id": id, "error": fault.to_string()})
            }
            ItemEvent::Failed { id, error } => {
                json!({"kind": "failed", "id": id, "error": error.to_string()})
            }
            ItemEvent::Cancelled { id } => json!({"kind": "cancelled", "id": id}),
            ItemEvent::AlreadySaid { id } => json!({"kind": "already_said", "id": id}),
        },
        BatchEvent::End(end) => {
            *finished.lock().unwrap_or_else(PoisonError::into_inner) = Some(end);
            json!({"kind": "end"})
        }
    };
    value.to_string()
}

#[pymethods]
impl NativeBatch {
    /// The lines that cannot be scored, each as `file:line: field ...: message`.
    #[getter]
    fn bad_lines(&self) -> Vec<String> {
        self.bad_lines.clone()
    }

    /// Items to score (bad lines left out).
    #[getter]
    fn items(&self) -> usize {
        self.survey
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or(0, Survey::items)
    }

    /// Starts the batch: every profile's preflight, then `jobs` items at a
    /// time (`None`: the runtime's default). Its events come from `next`.
    #[pyo3(signature = (jobs=None, fresh=false))]
    fn start(&self, jobs: Option<usize>, fresh: bool) -> PyResult<()> {
        let survey = self
            .survey
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or_else(|| ProgscoreError::new_err("the batch was started already"))?;
        let (sender, receiver) = mpsc::channel(WAITING_EVENTS);
        *self.events.blocking_lock() = Some(receiver);
        let scorer = self.scorer.clone();
        let backends = self.backends.clone();
        let source = self.source.clone();
        let finished = self.finished.clone();
        let options = BatchOptions {
            jobs,
            fresh,
            cancel: self.cancel.clone(),
        };
        RUNTIME.spawn(async move {
            let items = ScorerItems::new(&scorer, backends.clone());
            let mut events =
                std::pin::pin!(batch_run::run_batch(&items, &source, &survey, options));
            while let Some(event) = events.next().await {
                if sender.send(event_json(event, &finished)).await.is_err() {
                    // Nobody reads: dropping the driver cancels its runs.
                    return;
                }
            }
        });
        Ok(())
    }

    /// The next event (JSON), or `null` once the batch has ended. A wait
    /// that is cancelled loses no event.
    fn next(&self, waker: &NativeWaker) -> NativeTask {
        let events = self.events.clone();
        NativeTask::spawn(waker, move |token| async move {
            let mut events = events.lock().await;
            let Some(receiver) = events.as_mut() else {
                return Ok("null".into());
            };
            // `recv` is cancel-safe: an event not yet taken stays queued.
            tokio::select! {
                next = receiver.recv() => Ok(next.unwrap_or_else(|| "null".into())),
                () = token.cancelled() => Err(crate::task::Failure::Cancelled),
            }
        })
    }

    /// Stops the batch: items not started end as cancelled without
    /// running; running ones are cancelled (their events still come).
    fn cancel(&self) {
        self.cancel.cancel();
    }

    /// `{true, false, undetermined, errors, not_scored, cancelled}`, once ended.
    fn counts(&self) -> PyResult<BTreeMap<&'static str, usize>> {
        let finished = self.finished()?;
        Ok(counts_of(&finished.as_ref().expect("checked").summary))
    }

    /// How the batch ended (`interrupted`, `store_failed`, `engine_gone`,
    /// `not_scored`, `finished`), once ended.
    #[pyo3(signature = (signal_exit=None))]
    fn end(&self, signal_exit: Option<u8>) -> PyResult<&'static str> {
        use progscore_runtime::policy::BatchEnd;
        let finished = self.finished()?;
        Ok(match finished.as_ref().expect("checked").end(signal_exit) {
            BatchEnd::Interrupted { .. } => "interrupted",
            BatchEnd::StoreFailed => "store_failed",
            BatchEnd::EngineGone => "engine_gone",
            BatchEnd::NotScored => "not_scored",
            BatchEnd::Finished => "finished",
        })
    }

    /// The exit status of `progscore score` for this batch, with
    /// `bad_lines` refused lines; `signal_exit` when a signal stopped it;
    /// `fail_on` holds `"false"` and/or `"undetermined"`.
    #[pyo3(signature = (bad_lines, fail_on, signal_exit=None))]
    fn exit_status(
        &self,
        bad_lines: usize,
        fail_on: Vec<String>,
        signal_exit: Option<u8>,
    ) -> PyResult<u8> {
        let fail = parse_fail_on(&fail_on)?;
        let finished = self.finished()?;
        let finished = finished.as_ref().expect("checked");
        Ok(exit_status(
            finished.end(signal_exit),
            &finished.summary,
            fail,
            bad_lines,
        ))
    }

    /// The summary's text, for a batch that took `wall_seconds`.
    fn render(&self, wall_seconds: f64, bad_lines: usize) -> PyResult<String> {
        let finished = self.finished()?;
        Ok(finished.as_ref().expect("checked").summary.render(
            std::time::Duration::from_secs_f64(wall_seconds.max(0.0)),
            bad_lines,
        ))
    }
}
