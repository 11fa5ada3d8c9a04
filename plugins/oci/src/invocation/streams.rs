//! The container's standard streams: stdin fed and closed, stdout and
//! stderr drained into their bounded captures, the time of the last output
//! noted for the window.

use progscore_sandbox::StreamCapture;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStderr, ChildStdout};
use tokio::time::Instant;

/// Feeds stdin (then closes it, so the program sees EOF) while draining both
/// output streams, until both end; an error reading either is returned.
pub(super) async fn feed_and_drain(
    input: Option<tokio::process::ChildStdin>,
    stdin: Option<Vec<u8>>,
    out: Option<ChildStdout>,
    err: Option<ChildStderr>,
    stdout: &mut StreamCapture,
    stderr: &mut StreamCapture,
    last_output: &std::sync::Mutex<Option<Instant>>,
) -> Result<(), String> {
    let feed = async move {
        if let (Some(mut input), Some(bytes)) = (input, stdin) {
            // A program may exit without reading its input: the write then
            // fails (EPIPE; progscore does not die of SIGPIPE), which is the
            // program's business, not a sandbox fault.
            if let Err(err) = input.write_all(&bytes).await {
                tracing::debug!("stdin write ended early: {err}");
            }
            let _closed = input.shutdown().await;
        }
    };
    let ((), out, err) = tokio::join!(
        feed,
        drain(out, stdout, last_output),
        drain(err, stderr, last_output)
    );
    out.map_err(|e| format!("stdout: {e}"))?;
    err.map_err(|e| format!("stderr: {e}"))
}

/// Reads a stream to its end. A read error is returned, never taken as the
/// end: what was read so far may not be all the program wrote.
async fn drain(
    stream: Option<impl AsyncRead + Unpin>,
    capture: &mut StreamCapture,
    last_output: &std::sync::Mutex<Option<Instant>>,
) -> std::io::Result<()> {
    let Some(mut stream) = stream else {
        return Ok(());
    };
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
            Ok(read) => {
                capture.push(&buffer[..read]);
                if let Ok(mut last) = last_output.lock() {
                    *last = Some(Instant::now());
                }
            }
        }
    }
}
