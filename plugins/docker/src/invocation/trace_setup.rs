//! A traced container's gVisor trace: set up once the engine named the
//! container, where the engine's runsc wrapper finds it, and held for the
//! window (the time the sandbox may wait for the trace's reader).

use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::sync::Arc;

use progscore_sandbox::PathPattern;
use progscore_trace::gvisor_trace::GvisorTrace;
use progscore_trace::tracer_hold::TracerHold;

/// A traced container's trace: its folder goes in the call's workspace,
/// named by the container's id, where the engine's runsc wrapper finds it
/// when the engine creates the sandbox (at start).
pub(super) struct TraceSetup<'c> {
    pub(super) workspace: &'c Path,
    pub(super) sensitive: Vec<PathPattern>,
    /// The listening trace, or why it could not be set up.
    pub(super) started: std::sync::Mutex<Option<Result<GvisorTrace, String>>>,
}

impl TraceSetup<'_> {
    pub(super) fn start(&self, container_id: &str) {
        let short: String = container_id.chars().take(12).collect();
        let dir = self.workspace.join(format!("trace-{short}"));
        let listening = std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .and_then(|()| GvisorTrace::listen(&dir, self.sensitive.clone()))
            .map_err(|e| format!("the trace could not be set up in {}: {e}", dir.display()));
        if let Ok(mut started) = self.started.lock() {
            *started = Some(listening);
        }
    }

    /// The time the sandbox may wait for the trace's reader, once started.
    pub(super) fn hold(&self) -> Option<Arc<TracerHold>> {
        match self.started.lock().ok()?.as_ref()? {
            Ok(trace) => Some(trace.hold()),
            Err(_) => None,
        }
    }
}
