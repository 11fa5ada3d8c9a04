//! Bounded capture of an output stream.

use crate::run::CapturedStream;

/// Keeps at most `cap` bytes of a stream and counts every byte seen.
///
/// Bytes beyond the cap are counted and dropped, so a program that floods its
/// output cannot exhaust the host's memory, and the reader keeps draining so
/// the program never blocks on a full pipe.
#[derive(Debug)]
pub struct StreamCapture {
    cap: usize,
    kept: Vec<u8>,
    total: u64,
}

impl StreamCapture {
    /// A capture that keeps at most `cap` bytes.
    pub fn new(cap: u64) -> Self {
        let cap = usize::try_from(cap).unwrap_or(usize::MAX);
        StreamCapture {
            cap,
            kept: Vec::with_capacity(cap.min(8 * 1024)),
            total: 0,
        }
    }

    /// Records a chunk of the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let room = self.cap.saturating_sub(self.kept.len());
        let take = room.min(chunk.len());
        self.kept.extend_from_slice(&chunk[..take]);
    }

    /// Total bytes seen so far.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// The captured stream: kept bytes, total seen, and whether bytes were dropped.
    pub fn finish(self) -> CapturedStream {
        let truncated = self.total > self.kept.len() as u64;
        CapturedStream {
            data: self.kept.into(),
            truncated,
            total_bytes: self.total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_prefix_and_counts_the_rest() {
        let mut capture = StreamCapture::new(5);
        capture.push(b"abc");
        capture.push(b"defgh");
        capture.push(b"ij");
        let stream = capture.finish();
        assert_eq!(stream.data.as_bytes(), b"abcde");
        assert!(stream.truncated);
        assert_eq!(stream.total_bytes, 10);
    }

    #[test]
    fn exact_fit_is_not_truncated() {
        let mut capture = StreamCapture::new(3);
        capture.push(b"abc");
        let stream = capture.finish();
        assert!(!stream.truncated);
        assert_eq!(stream.total_bytes, 3);
    }
}
