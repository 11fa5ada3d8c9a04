//! What flows between progscore and a running container: stdin in, both
//! output streams out (bounded), and the engine's word that it ended.

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as BollardError;
use bollard::query_parameters::WaitContainerOptions;
use futures_util::StreamExt;
use progscore_sandbox::{LiveCase, StreamCapture};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use crate::engine::describe;

/// What a container's stdin is given.
pub(crate) enum Feed {
    /// Nothing: closed at once.
    Closed,
    /// These bytes, then closed.
    Bytes(Vec<u8>),
    /// One side of a conversation: stdin fed from the other side as it
    /// writes, and stdout copied to it.
    Live(LiveCase),
}

impl Feed {
    /// Whether the container's stdin is attached.
    pub(crate) fn is_open(&self) -> bool {
        !matches!(self, Feed::Closed)
    }
}

/// Feeds stdin (then closes it, so the program sees EOF) while draining both
/// output streams, until the output ends.
pub(crate) async fn feed_and_drain(
    attached: bollard::container::AttachContainerResults,
    feed: Feed,
    stdout: &mut StreamCapture,
    stderr: &mut StreamCapture,
    last_output: &std::sync::Mutex<Option<Instant>>,
    name: &str,
) -> Result<(), String> {
    let mut input = attached.input;
    let (stdin, live, mut tap) = match feed {
        Feed::Closed => (None, None, None),
        Feed::Bytes(bytes) => (Some(bytes), None, None),
        Feed::Live(case) => (None, Some(case.stdin), Some(case.stdout)),
    };
    let feed = async {
        if let Some(live) = &live {
            // The other side writes into it as it speaks; its end is this
            // side's end of file.
            live.attach(Box::new(input)).await;
            return;
        }
        if let Some(bytes) = stdin {
            // A program may exit without reading its input: a failed write is
            // its business, not a sandbox fault.
            if let Err(err) = input.write_all(&bytes).await {
                tracing::debug!("stdin write ended early: {err}");
            }
        }
        let _closed = input.shutdown().await;
    };
    let mut output = attached.output;
    let drain = async {
        while let Some(chunk) = output.next().await {
            let (is_stdout, message) = match chunk {
                Ok(LogOutput::StdOut { message }) => (true, message),
                Ok(LogOutput::StdErr { message }) => (false, message),
                Ok(LogOutput::StdIn { .. }) => continue,
                // Containers have no TTY: every byte comes in a framed
                // chunk. Unframed bytes are what the decoder makes of a
                // stream cut inside a frame (it flushes the rest at the end):
                // the output is incomplete, never the program's.
                Ok(LogOutput::Console { message }) => {
                    return Err(format!(
                        "the output of container {name} ended inside a frame \
                         ({} unframed bytes): the stream was cut",
                        message.len()
                    ));
                }
                Err(err) => {
                    return Err(format!(
                        "reading the output of container {name}: {}",
                        describe(&err)
                    ));
                }
            };
            let capture = if is_stdout {
                &mut *stdout
            } else {
                &mut *stderr
            };
            capture.push(&message);
            if let Ok(mut last) = last_output.lock() {
                *last = Some(Instant::now());
            }
            // Waits while the other side's stdin is full, as a pipe would.
            if is_stdout && let Some(open) = &mut tap {
                let _delivered_or_counted = open.send(&message).await;
            }
        }
        // The output ended: the other side sees its end of file.
        if let Some(open) = tap.take() {
            open.close().await;
        }
        Ok(())
    };
    // Once the output ended the container has stopped: stdin it did not
    // take is dropped (a write into an exited container's attach stream
    // may neither fail nor finish, and a conversation's other side must
    // see this side stop reading).
    let drained = {
        tokio::pin!(feed);
        tokio::pin!(drain);
        tokio::select! {
            drained = &mut drain => drained,
            () = &mut feed => drain.await,
        }
    };
    // This side reads no more: the other side's writes are undelivered.
    drop(live);
    drained
}

/// Resolves when the engine reports that the container is no longer running.
pub(crate) async fn wait_for_exit(docker: &Docker, name: &str) -> Result<(), BollardError> {
    let mut wait = docker.wait_container(name, None::<WaitContainerOptions>);
    match wait.next().await {
        Some(Ok(_)) => Ok(()),
        // bollard reports a non-zero exit as an error; the state says which.
        Some(Err(BollardError::DockerContainerWaitError { .. })) => Ok(()),
        Some(Err(err)) => Err(err),
        // The connection closed without an answer: the engine may be gone.
        None => Err(BollardError::IOError {
            err: std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the engine's wait ended without the container's exit",
            ),
        }),
    }
}
