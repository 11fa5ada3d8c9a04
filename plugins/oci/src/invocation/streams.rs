//! The container's standard streams: stdin fed and closed, stdout and
//! stderr drained into their bounded captures, the time of the last output
//! noted for the window. On a side of a conversation, stdin is fed from the
//! other side as it writes and stdout is copied to it as it is read.

use progscore_sandbox::{LiveCase, StreamCapture};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStderr, ChildStdout};
use tokio::time::Instant;

/// What a container's stdin is given.
pub(super) enum Feed {
    /// Nothing: its stdin is `/dev/null`.
    Closed,
    /// These bytes, then its end.
    Bytes(Vec<u8>),
    /// One side of a conversation's case: the other side's writes as they
    /// come, and this side's stdout copied to it.
    Live(LiveCase),
}

impl Feed {
    /// Whether the container's stdin is a pipe of progscore's.
    pub(super) fn is_open(&self) -> bool {
        !matches!(self, Feed::Closed)
    }
}

/// Feeds stdin (then closes it, so the program sees EOF) while draining both
/// output streams, until both end; an error reading either is returned.
pub(super) async fn feed_and_drain(
    input: Option<tokio::process::ChildStdin>,
    feed: Feed,
    out: Option<ChildStdout>,
    err: Option<ChildStderr>,
    stdout: &mut StreamCapture,
    stderr: &mut StreamCapture,
    last_output: &std::sync::Mutex<Option<Instant>>,
) -> Result<(), String> {
    let (bytes, live, tap) = match feed {
        Feed::Closed => (None, None, None),
        Feed::Bytes(bytes) => (Some(bytes), None, None),
        Feed::Live(case) => (None, Some(case.stdin), Some(case.stdout)),
    };
    let is_live = live.is_some();
    let feed = async {
        let Some(mut input) = input else {
            return;
        };
        if let Some(live) = &live {
            // The other side writes into it as it speaks; its end is this
            // side's end of file.
            live.attach(Box::new(input)).await;
            return;
        }
        if let Some(bytes) = bytes {
            // A program may exit without reading its input: the write then
            // fails (EPIPE; progscore does not die of SIGPIPE), which is the
            // program's business, not a sandbox fault.
            if let Err(err) = input.write_all(&bytes).await {
                tracing::debug!("stdin write ended early: {err}");
            }
        }
        let _closed = input.shutdown().await;
    };
    let drained = async {
        tokio::join!(
            drain(out, stdout, last_output, tap),
            drain(err, stderr, last_output, None)
        )
    };
    let (out, err) = {
        tokio::pin!(feed, drained);
        if is_live {
            // The other side may write long after this side's output ended (it
            // exited): nothing reads that any more, and waiting for the other
            // side's end would hold this one's output past its bound.
            let ended_first = tokio::select! {
                biased;
                drained = &mut drained => Some(drained),
                () = &mut feed => None,
            };
            match ended_first {
                Some(drained) => drained,
                None => drained.await,
            }
        } else {
            let ((), drained) = tokio::join!(feed, drained);
            drained
        }
    };
    // This side reads no more: the other side's writes are undelivered.
    drop(live);
    out.map_err(|e| format!("stdout: {e}"))?;
    err.map_err(|e| format!("stderr: {e}"))
}

/// Reads a stream to its end, each chunk also sent to `tap` when given (the
/// other side of a conversation). A read error is returned, never taken as
/// the end: what was read so far may not be all the program wrote.
async fn drain(
    stream: Option<impl AsyncRead + Unpin>,
    capture: &mut StreamCapture,
    last_output: &std::sync::Mutex<Option<Instant>>,
    mut tap: Option<progscore_sandbox::Outlet>,
) -> std::io::Result<()> {
    let Some(mut stream) = stream else {
        return Ok(());
    };
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buffer).await {
            // The other side sees its end of file.
            Ok(0) => {
                if let Some(open) = tap.take() {
                    open.close().await;
                }
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
            Ok(read) => {
                capture.push(&buffer[..read]);
                if let Ok(mut last) = last_output.lock() {
                    *last = Some(Instant::now());
                }
                // Waits while the other side's pipe is full, as a pipe
                // would. A side that stopped reading is sent nothing more;
                // the output is still drained.
                if let Some(open) = &mut tap {
                    let _delivered_or_counted = open.send(&buffer[..read]).await;
                }
            }
        }
    }
}
