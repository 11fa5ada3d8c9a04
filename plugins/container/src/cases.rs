//! A program's cases in order, as every container backend runs them: a
//! failed build decides every case the same way; after an invocation that
//! stops the call (a sandbox error, a removal that failed) or a
//! cancellation, the rest are not run, with the reason.

use progscore_sandbox::{CompileEvent, InvocationEvent};
use tokio_util::sync::CancellationToken;

/// Where a program's run of its cases stands.
pub struct Cases<'a> {
    failed_build: Option<InvocationEvent>,
    stop_reason: Option<String>,
    token: &'a CancellationToken,
}

impl<'a> Cases<'a> {
    pub fn new(compile: Option<&CompileEvent>, token: &'a CancellationToken) -> Cases<'a> {
        Cases {
            failed_build: compile.and_then(CompileEvent::case_event),
            stop_reason: None,
            token,
        }
    }

    /// The next case's event when it is decided without running it (the
    /// build failed, the call stopped or was cancelled); `None`: run it.
    pub fn decided(&mut self) -> Option<InvocationEvent> {
        if let Some(event) = &self.failed_build {
            return Some(event.clone());
        }
        if self.stop_reason.is_none() && self.token.is_cancelled() {
            self.stop_reason = Some("the call was cancelled".into());
        }
        self.stop_reason
            .as_ref()
            .map(|reason| InvocationEvent::not_run(reason.clone()))
    }

    /// After a case ran: why nothing more may run, if so.
    pub fn ran(&mut self, stop: Option<String>) {
        self.stop_reason = stop;
    }
}
