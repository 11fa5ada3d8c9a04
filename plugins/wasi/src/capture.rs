//! The guest's stdout and stderr: bounded, counted, never blocking.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use progscore_sandbox::{CapturedStream, StreamCapture};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// The largest write permit handed to the guest at once. wasmtime-wasi sizes some
/// host allocations by the permit, so it stays modest; the guest just writes in
/// several chunks.
const WRITE_PERMIT: usize = 1 << 20;

/// An output stream that keeps at most `cap` bytes and counts the rest.
///
/// It is always ready and never fails, so a guest flooding its output is never
/// blocked or told about the cap: it behaves as if writing to a pipe that a
/// reader drains, like the Docker backend's capture.
#[derive(Clone)]
pub(crate) struct CapturePipe {
    capture: Arc<Mutex<Captured>>,
}

/// The bounded capture, and the stream's last bytes whatever the cap (how
/// the guest ended may show there when the kept bytes are only its start).
struct Captured {
    stream: StreamCapture,
    tail: Vec<u8>,
}

/// How many of a stream's last bytes are kept apart from the capture.
const TAIL_BYTES: usize = 512;

impl CapturePipe {
    pub(crate) fn new(cap: u64) -> Self {
        CapturePipe {
            capture: Arc::new(Mutex::new(Captured {
                stream: StreamCapture::new(cap),
                tail: Vec::new(),
            })),
        }
    }

    /// The last line the guest wrote that is not blank (at most
    /// [`TAIL_BYTES`] of it), without its line end.
    pub(crate) fn last_line(&self) -> Vec<u8> {
        let capture = self.capture.lock().unwrap_or_else(PoisonError::into_inner);
        capture
            .tail
            .split(|b| *b == b'\n')
            .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
            .rfind(|line| !line.iter().all(u8::is_ascii_whitespace))
            .unwrap_or_default()
            .to_vec()
    }

    /// The captured stream so far. The store still holds clones of the pipe, so
    /// the bytes are taken out rather than the capture unwrapped.
    pub(crate) fn finish(&self) -> CapturedStream {
        let mut capture = self.capture.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut capture.stream, StreamCapture::new(0)).finish()
    }

    fn push(&self, bytes: &[u8]) {
        // A poisoned lock only means another writer panicked mid-push; the
        // capture is still a valid prefix and count.
        let mut capture = self.capture.lock().unwrap_or_else(PoisonError::into_inner);
        capture.stream.push(bytes);
        let recent = &bytes[bytes.len().saturating_sub(TAIL_BYTES)..];
        let keep = TAIL_BYTES - recent.len();
        let drop = capture.tail.len().saturating_sub(keep);
        capture.tail.drain(..drop);
        capture.tail.extend_from_slice(recent);
    }
}

impl IsTerminal for CapturePipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturePipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for CapturePipe {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(WRITE_PERMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CapturePipe {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CapturePipe {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.push(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
