//! Work in progress that an asyncio event loop can await and cancel, without
//! progscore's threads ever touching Python.
//!
//! A thread that takes the GIL while the interpreter shuts down is ended by
//! Python in the middle of Rust code, which aborts the process: a task that
//! completed a Python future from a runtime thread could do that at exit,
//! right after the last `await` returned. So a finished task only stores its
//! outcome and wakes its loop through a socket ([`NativeWaker`]); the loop's
//! own thread then reads the outcome ([`NativeTask::outcome`]).
//!
//! Cancelling ([`NativeTask::cancel`]) asks the work to stop; its wake comes
//! once it has ended, that is after the sandbox's cleanup. The Python package
//! keeps awaiting that wake before a cancelled asyncio task ends, so it ends
//! after the containers and workspaces it made are gone.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use pyo3::prelude::*;
use tokio_util::sync::CancellationToken;

use crate::errors::{
    EvidenceStoreError, InvalidExpectationError, ProgscoreError, ReplayRefusedError,
    SandboxRefusedError,
};
use crate::wake::{WakeReader, WakeWriter, wake_pair};

/// The runtime all of the module's work runs on.
pub(crate) static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name("progscore-python")
        .enable_all()
        .build()
        .expect("cannot start progscore's runtime")
});

static NEXT_TASK_ID: AtomicU64 = AtomicU64::new(1);

/// How a task failed, kept as data until the loop's thread reads it.
#[derive(Debug, Clone)]
pub(crate) enum Failure {
    Cancelled,
    Invalid(String),
    Refused(String),
    Replay(String),
    Store(String),
    Other(String),
}

impl Failure {
    fn into_py_err(self) -> PyErr {
        match self {
            Failure::Cancelled => {
                pyo3::exceptions::asyncio::CancelledError::new_err("the run was cancelled")
            }
            Failure::Invalid(message) => InvalidExpectationError::new_err(message),
            Failure::Refused(message) => SandboxRefusedError::new_err(message),
            Failure::Replay(message) => ReplayRefusedError::new_err(message),
            Failure::Store(message) => EvidenceStoreError::new_err(message),
            Failure::Other(message) => ProgscoreError::new_err(message),
        }
    }
}

/// What a task gives back: JSON text, or why not.
type Outcome = Result<String, Failure>;

/// Wakes one event loop when its tasks end: a finished task queues its id
/// and writes a byte to a socket whose other end the loop watches
/// (`loop.add_reader(waker.fileno(), ...)`).
#[pyclass(frozen, module = "progscore._native")]
pub(crate) struct NativeWaker {
    shared: Arc<WakerShared>,
    readable: WakeReader,
}

struct WakerShared {
    finished: Mutex<Vec<u64>>,
    writable: WakeWriter,
}

impl WakerShared {
    fn wake(&self, task: u64) {
        self.finished
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(task);
        self.writable.wake();
    }
}

#[pymethods]
impl NativeWaker {
    #[new]
    fn new() -> PyResult<NativeWaker> {
        let (readable, writable) = wake_pair()?;
        Ok(NativeWaker {
            shared: Arc::new(WakerShared {
                finished: Mutex::new(Vec::new()),
                writable,
            }),
            readable,
        })
    }

    /// The descriptor that becomes readable when a task has ended.
    fn fileno(&self) -> i32 {
        self.readable.fileno()
    }

    /// Consumes the wakes and returns the ids of the tasks that ended since
    /// the last call (a task that ends meanwhile wakes the loop again).
    fn drain(&self) -> Vec<u64> {
        self.readable.drain();
        std::mem::take(
            &mut *self
                .shared
                .finished
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }
}

/// A run, a score or a read of the store, in progress.
#[pyclass(frozen, module = "progscore._native")]
pub(crate) struct NativeTask {
    id: u64,
    token: CancellationToken,
    outcome: Arc<Mutex<Option<Outcome>>>,
}

impl NativeTask {
    /// Starts `work` on the module's runtime with a token that cancels it;
    /// `waker` is woken once it has ended.
    pub(crate) fn spawn<F, Fut>(waker: &NativeWaker, work: F) -> NativeTask
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let id = NEXT_TASK_ID.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        let outcome = Arc::new(Mutex::new(None));
        let future = work(token.clone());
        let shared = waker.shared.clone();
        let slot = outcome.clone();
        // Awaited through its handle, so that a panic still ends it.
        let handle = RUNTIME.spawn(future);
        RUNTIME.spawn(async move {
            let ended = handle
                .await
                .unwrap_or_else(|e| Err(Failure::Other(format!("progscore's task failed: {e}"))));
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(ended);
            shared.wake(id);
        });
        NativeTask { id, token, outcome }
    }

    /// Starts blocking `work` (the store, replays) on the runtime's blocking
    /// threads.
    pub(crate) fn spawn_blocking<F>(waker: &NativeWaker, work: F) -> NativeTask
    where
        F: FnOnce() -> Outcome + Send + 'static,
    {
        NativeTask::spawn(waker, move |_token| async move {
            tokio::task::spawn_blocking(work)
                .await
                .unwrap_or_else(|e| Err(Failure::Other(format!("progscore's task failed: {e}"))))
        })
    }
}

#[pymethods]
impl NativeTask {
    /// The id its waker reports when it has ended.
    #[getter]
    fn id(&self) -> u64 {
        self.id
    }

    /// Asks the work to stop; the waker reports it once it has ended.
    fn cancel(&self) {
        self.token.cancel();
    }

    /// The result's JSON, or the failure as an exception; an error while
    /// the work has not ended.
    fn outcome(&self) -> PyResult<String> {
        match &*self.outcome.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(Ok(json)) => Ok(json.clone()),
            Some(Err(failure)) => Err(failure.clone().into_py_err()),
            None => Err(ProgscoreError::new_err("the task has not ended yet")),
        }
    }
}

impl Drop for NativeTask {
    fn drop(&mut self) {
        // Nobody can read its outcome any more: the work is not wanted.
        self.token.cancel();
    }
}
