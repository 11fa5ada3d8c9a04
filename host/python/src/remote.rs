//! The Python side of runs on other machines (`progscore.ray`): the driver's
//! desk, where the scorer's requests wait for the Python dispatcher, and the
//! node's answer to one request from its own backends.
//!
//! As everywhere in this module, progscore's threads never call Python: a
//! posted request writes a byte to a socket the driver's event loop watches,
//! and the loop takes the requests on its own thread.

use std::sync::Arc;

use progscore_runtime::remote::{Desk, Posted, RemoteRequest};
use pyo3::prelude::*;

use crate::task::{Failure, NativeTask, NativeWaker};
use crate::wake::{WakeReader, wake_pair};
use progscore_sandbox::SandboxClient;

use crate::errors::InvalidExpectationError;

/// Where the scorer's requests for nodes wait for the dispatcher.
#[pyclass(frozen, module = "progscore._native")]
pub(crate) struct NativeDesk {
    pub(crate) desk: Arc<Desk>,
    readable: WakeReader,
}

impl NativeDesk {
    pub(crate) fn new() -> PyResult<NativeDesk> {
        let (readable, writable) = wake_pair()?;
        let desk = Desk::new(move || writable.wake());
        Ok(NativeDesk { desk, readable })
    }
}

#[pymethods]
impl NativeDesk {
    /// The descriptor that becomes readable when something was posted.
    fn fileno(&self) -> i32 {
        self.readable.fileno()
    }

    /// What was posted since the last call, in order: `(id, request JSON)`
    /// for a request, `(id, None)` when its caller stopped waiting.
    fn take(&self) -> Vec<(u64, Option<String>)> {
        self.readable.drain();
        self.desk
            .take_posted()
            .into_iter()
            .map(|posted| match posted {
                Posted::Request { id, request } => (id, Some(request)),
                Posted::Cancelled { id } => (id, None),
            })
            .collect()
    }

    /// Answers request `id` with a node's reply (JSON); an unreadable reply
    /// refuses the request. Whether its caller was still waiting.
    fn answer(&self, id: u64, reply: &str) -> bool {
        self.desk.answer(id, reply)
    }

    /// Refuses request `id`: no node could run it.
    fn refuse(&self, id: u64, message: String, transient: bool) -> bool {
        self.desk.refuse(id, message, transient)
    }
}

/// The node side: answers one request (JSON) from `sandbox` (the node's
/// own backends); the task's result is the reply's JSON. Cancelling it stops
/// the run (after its cleanup).
pub(crate) fn start_serve(
    sandbox: Arc<dyn SandboxClient>,
    waker: &NativeWaker,
    request_json: &str,
) -> PyResult<NativeTask> {
    let request: RemoteRequest = serde_json::from_str(request_json)
        .map_err(|e| InvalidExpectationError::new_err(format!("a node request: {e}")))?;
    Ok(NativeTask::spawn(waker, move |token| async move {
        let reply = tokio::select! {
            biased;
            () = token.cancelled() => return Err(Failure::Cancelled),
            reply = progscore_runtime::remote::serve(sandbox.as_ref(), request) => reply,
        };
        serde_json::to_string(&reply).map_err(|e| Failure::Other(e.to_string()))
    }))
}
