//! How progscore's threads wake a Python event loop without calling Python:
//! a non-blocking socket pair; progscore writes a byte to one end, the loop
//! watches the other (its `fileno`) and drains it on its own thread.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;

/// The loop's end, watched for reading.
pub(crate) struct WakeReader(UnixStream);

/// progscore's end.
pub(crate) struct WakeWriter(UnixStream);

/// A new pair of ends.
pub(crate) fn wake_pair() -> std::io::Result<(WakeReader, WakeWriter)> {
    let (readable, writable) = UnixStream::pair()?;
    readable.set_nonblocking(true)?;
    writable.set_nonblocking(true)?;
    Ok((WakeReader(readable), WakeWriter(writable)))
}

impl WakeReader {
    /// The descriptor the loop watches.
    pub(crate) fn fileno(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.0.as_raw_fd()
    }

    /// Consumes every wake written so far (what woke the loop is read by
    /// the caller afterwards, so a wake written meanwhile is not lost).
    pub(crate) fn drain(&self) {
        let mut bytes = [0u8; 512];
        loop {
            match (&self.0).read(&mut bytes) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    }
}

impl WakeWriter {
    /// Wakes the loop. A full socket already holds an unread wake; a closed
    /// one has no loop left to wake.
    pub(crate) fn wake(&self) {
        let _ = (&self.0).write(&[1]);
    }
}
