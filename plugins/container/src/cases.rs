//! A program's cases in order, as every container backend runs them: a
//! failed build decides every case the same way; after an invocation that
//! stops the call (a sandbox error, a removal that failed) or a
//! cancellation, the rest are not run, with the reason. Each case's event
//! is told to the request's [`CaseSink`] as soon as it is decided.

use progscore_sandbox::{CaseSink, CompileEvent, InvocationEvent};
use tokio_util::sync::CancellationToken;

/// Where a program's run of its cases stands.
pub struct Cases<'a> {
    compile: Option<&'a CompileEvent>,
    failed_build: Option<InvocationEvent>,
    stop_reason: Option<String>,
    token: &'a CancellationToken,
    on_case: Option<&'a CaseSink>,
    events: Vec<InvocationEvent>,
}

impl<'a> Cases<'a> {
    pub fn new(
        compile: Option<&'a CompileEvent>,
        token: &'a CancellationToken,
        on_case: Option<&'a CaseSink>,
    ) -> Cases<'a> {
        Cases {
            compile,
            failed_build: compile.and_then(CompileEvent::case_event),
            stop_reason: None,
            token,
            on_case,
            events: Vec::new(),
        }
    }

    /// Records the next case's event when it is decided without running it
    /// (the build failed, the call stopped or was cancelled): `true`, go on
    /// to the next; `false`: run it.
    pub fn decided(&mut self) -> bool {
        if self.stop_reason.is_none() && self.failed_build.is_none() && self.token.is_cancelled() {
            self.stop_reason = Some("the call was cancelled".into());
        }
        let event = match (&self.failed_build, &self.stop_reason) {
            (Some(event), _) => event.clone(),
            (None, Some(reason)) => InvocationEvent::not_run(reason.clone()),
            (None, None) => return false,
        };
        self.record(event);
        true
    }

    /// After a case ran: its event, and why nothing more may run, if so.
    pub fn ran(&mut self, event: InvocationEvent, stop: Option<String>) {
        self.record(event);
        self.stop_reason = stop;
    }

    /// The events, one per case, in order.
    pub fn into_events(self) -> Vec<InvocationEvent> {
        self.events
    }

    fn record(&mut self, event: InvocationEvent) {
        if let Some(sink) = self.on_case {
            sink.report(self.events.len(), &event, self.compile);
        }
        self.events.push(event);
    }
}
