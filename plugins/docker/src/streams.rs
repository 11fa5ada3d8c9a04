//! What flows between progscore and a running container: stdin in, both
//! output streams out (bounded), and the engine's word that it ended.

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as BollardError;
use bollard::query_parameters::WaitContainerOptions;
use futures_util::StreamExt;
use progscore_sandbox::StreamCapture;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use crate::engine::describe;

/// Feeds stdin (then closes it, so the program sees EOF) while draining both
/// output streams, until the output ends.
pub(crate) async fn feed_and_drain(
    attached: bollard::container::AttachContainerResults,
    stdin: Option<Vec<u8>>,
    stdout: &mut StreamCapture,
    stderr: &mut StreamCapture,
    last_output: &std::sync::Mutex<Option<Instant>>,
    name: &str,
) -> Result<(), String> {
    let mut input = attached.input;
    let feed = async move {
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
            let (capture, message) = match chunk {
                Ok(LogOutput::StdOut { message }) => (&mut *stdout, message),
                Ok(LogOutput::StdErr { message }) => (&mut *stderr, message),
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
            capture.push(&message);
            if let Ok(mut last) = last_output.lock() {
                *last = Some(Instant::now());
            }
        }
        Ok(())
    };
    let ((), drained) = tokio::join!(feed, drain);
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
