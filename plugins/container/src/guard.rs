//! Makes dropping a call's future wait for the call's cleanup.

use std::future::Future;
use std::sync::mpsc;
use std::time::Duration;

use tokio::task::JoinError;
use tokio_util::sync::CancellationToken;

/// How long a client's drop waits for the blocking work of tasks it
/// abandons (a preflight cut short by a signal verifying an image).
const SHUTDOWN_BOUND: Duration = Duration::from_secs(10);

/// Stops a client's own runtime as the client is dropped. Every task on it
/// is dropped before this returns (and with it what the task held, such as
/// the client's owner record, which then removes its files), and blocking
/// work gets up to ten seconds; unlike dropping the runtime, this may be
/// called from within another runtime.
pub fn shut_down(runtime: tokio::runtime::Runtime) {
    // Tokio refuses to wait for a runtime from inside an async context; a
    // thread of its own may, and this one waits for that thread.
    let stopping = std::thread::spawn(move || runtime.shutdown_timeout(SHUTDOWN_BOUND));
    let _ = stopping.join();
}

/// Starts `call` on `runtime` (a client's own, never the caller's) with a
/// token of its own, and returns the future the caller awaits. Dropping that
/// future before the call finished cancels the token and blocks until the
/// call has ended, its cleanup included (at most `cleanup_bound`): a
/// dropped call never returns while what it created may still exist.
pub fn spawn_guarded<F, C>(
    runtime: &tokio::runtime::Runtime,
    cleanup_bound: Duration,
    call: C,
) -> impl Future<Output = Result<F::Output, JoinError>> + Send + 'static
where
    C: FnOnce(CancellationToken) -> F,
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let token = CancellationToken::new();
    let (mut on_drop, finished) = cancel_pair(token.clone(), cleanup_bound);
    let call = call(token);
    let task = runtime.spawn(async move {
        let result = call.await;
        // Only now, after the call's own cleanup, may a dropped caller go on.
        drop(finished);
        result
    });
    async move {
        let result = task.await;
        on_drop.disarm();
        result
    }
}

/// Held by the caller's future. When the future is dropped before the call
/// finished, it cancels the call's task and blocks until that task (running
/// on the client's own runtime, never the caller's) has removed everything
/// it created.
struct CancelOnDrop {
    token: CancellationToken,
    finished: mpsc::Receiver<()>,
    /// How long a dropped call may block its caller while cleaning up: the
    /// cleanup's own bound (its engine requests' timeouts), so a drop never
    /// returns while a container may still be there, unless the engine is
    /// wedged past every bound.
    cleanup_bound: Duration,
    armed: bool,
}

/// Held by the call's task; dropping it (at the end of the task, after
/// cleanup, or by unwinding) releases a waiting [`CancelOnDrop`].
struct FinishedSignal {
    _sender: mpsc::Sender<()>,
}

fn cancel_pair(
    token: CancellationToken,
    cleanup_bound: Duration,
) -> (CancelOnDrop, FinishedSignal) {
    let (sender, finished) = mpsc::channel();
    (
        CancelOnDrop {
            token,
            finished,
            cleanup_bound,
            armed: true,
        },
        FinishedSignal { _sender: sender },
    )
}

impl CancelOnDrop {
    /// The call completed normally: nothing to wait for on drop.
    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.token.cancel();
        // recv returns Err(Disconnected) when the task drops its signal.
        let wait = || self.finished.recv_timeout(self.cleanup_bound);
        // Dropped on a worker of a multi-threaded runtime (a server whose
        // client went away): the worker's other tasks move to another
        // thread while this waits, so a cleanup never holds them up.
        let waited = match tokio::runtime::Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(wait)
            }
            _ => wait(),
        };
        if let Err(mpsc::RecvTimeoutError::Timeout) = waited {
            tracing::error!(
                "a cancelled sandbox call did not finish its cleanup within {:?}",
                self.cleanup_bound
            );
        }
    }
}
