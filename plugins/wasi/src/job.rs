//! One invocation running on a thread of its own, stoppable from the async side.
//!
//! The async `execute` future awaits a [`Job`]; if that future is dropped, the
//! job's `Drop` cancels the invocation (the cancel hook interrupts the guest or
//! kills the worker process running it) and then blocks until the job's thread
//! reports that it has finished. Only then does the drop continue, and the
//! workspace (program and scratch folders) is removed after it. So when the
//! drop of `execute`'s future returns, no guest runs and no folder is left.
//! The wait is short: a cancelled guest stops at its next epoch tick (10 ms) and
//! a killed worker's pipe closes at once.

use std::sync::{Arc, Condvar, Mutex, PoisonError};

use tokio::sync::oneshot;

/// What stops a running invocation: interrupt the guest, kill its worker.
pub(crate) type CancelHook = Box<dyn FnOnce() + Send>;

/// State shared by a [`Job`] and its thread.
#[derive(Default)]
pub(crate) struct Control {
    state: Mutex<ControlState>,
    finished: Condvar,
}

#[derive(Default)]
struct ControlState {
    cancelled: bool,
    finished: bool,
    hook: Option<CancelHook>,
}

impl Control {
    fn lock(&self) -> std::sync::MutexGuard<'_, ControlState> {
        // The state is a few flags; a panic elsewhere leaves them consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Installs the hook that stops the invocation. Returns `false` (and drops
    /// the hook) if the job was already cancelled: the caller must not start.
    pub(crate) fn set_hook(&self, hook: CancelHook) -> bool {
        let mut state = self.lock();
        if state.cancelled {
            return false;
        }
        state.hook = Some(hook);
        true
    }

    /// Removes the hook; returns whether the job was cancelled meanwhile. After
    /// this, cancelling does nothing to the resources the hook named, so they
    /// can be reused (a worker goes back to the pool).
    pub(crate) fn clear_hook(&self) -> bool {
        let mut state = self.lock();
        state.hook = None;
        state.cancelled
    }

    fn cancel(&self) {
        let mut state = self.lock();
        if state.finished {
            return;
        }
        state.cancelled = true;
        // Run under the lock: the thread cannot clear the hook and reuse what
        // it names while the hook is stopping it.
        if let Some(hook) = state.hook.take() {
            hook();
        }
    }

    fn finish(&self) {
        self.lock().finished = true;
        self.finished.notify_all();
    }

    fn wait_finished(&self) {
        let mut state = self.lock();
        while !state.finished {
            state = self
                .finished
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// A running invocation. Await it with [`Job::wait`]; drop it to stop it.
pub(crate) struct Job<T> {
    control: Arc<Control>,
    result: oneshot::Receiver<T>,
}

impl<T: Send + 'static> Job<T> {
    /// Runs `work` on a new thread with the given stack size.
    pub(crate) fn spawn(
        name: &str,
        stack_size: usize,
        work: impl FnOnce(&Control) -> T + Send + 'static,
    ) -> std::io::Result<Self> {
        let control = Arc::new(Control::default());
        let (sender, result) = oneshot::channel();
        let shared = Arc::clone(&control);
        std::thread::Builder::new()
            .name(name.into())
            .stack_size(stack_size)
            .spawn(move || {
                // Marks the job finished even if `work` panics, so a drop
                // waiting on it never hangs.
                struct Finish(Arc<Control>);
                impl Drop for Finish {
                    fn drop(&mut self) {
                        self.0.finish();
                    }
                }
                let finish = Finish(shared);
                let output = work(&finish.0);
                // The receiver is gone when the job was dropped; nothing to do.
                let _ = sender.send(output);
            })?;
        Ok(Job { control, result })
    }

    /// The job's output; `None` if its thread panicked.
    pub(crate) async fn wait(mut self) -> Option<T> {
        (&mut self.result).await.ok()
    }
}

impl<T> Drop for Job<T> {
    fn drop(&mut self) {
        // Finished jobs ignore the cancel; running ones stop. Either way the
        // thread is done with every resource before this returns.
        self.control.cancel();
        self.control.wait_finished();
    }
}
