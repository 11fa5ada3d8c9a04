//! Makes dropping a call's future wait for the call's cleanup.

use std::sync::mpsc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Held by the caller's future. When the future is dropped before the call
/// finished, it cancels the call's task and blocks until that task (running
/// on the client's own runtime, never the caller's) has removed everything
/// it created.
pub struct CancelOnDrop {
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
pub struct FinishedSignal {
    _sender: mpsc::Sender<()>,
}

pub fn cancel_pair(
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
    pub fn disarm(&mut self) {
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
        if let Err(mpsc::RecvTimeoutError::Timeout) = self.finished.recv_timeout(self.cleanup_bound)
        {
            tracing::error!(
                "a cancelled sandbox call did not finish its cleanup within {:?}",
                self.cleanup_bound
            );
        }
    }
}
