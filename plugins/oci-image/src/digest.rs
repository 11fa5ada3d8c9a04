//! sha256 digests, as OCI writes them (`sha256:<64 lower-case hex>`), and the
//! hashing of files and streams.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// A sha256 digest. Only sha256 is accepted anywhere: it is what registries
/// and Docker produce, and one algorithm keeps the cache's names unique.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub(crate) struct Digest {
    hex: String,
}

impl Digest {
    /// Parses `sha256:<64 lower-case hex digits>`.
    pub(crate) fn parse(text: &str) -> Result<Digest, &'static str> {
        let Some(hex) = text.strip_prefix("sha256:") else {
            return Err("is not a sha256 digest (`sha256:` followed by 64 hex digits)");
        };
        if hex.len() != 64 {
            return Err("does not have 64 hex digits after `sha256:`");
        }
        if !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err("has characters other than lower-case hex digits after `sha256:`");
        }
        Ok(Digest {
            hex: hex.to_owned(),
        })
    }

    pub(crate) fn of_bytes(bytes: &[u8]) -> Digest {
        Digest::from_hasher(Sha256::new_with_prefix(bytes))
    }

    pub(crate) fn from_hasher(hasher: Sha256) -> Digest {
        Digest {
            hex: hex::encode(hasher.finalize()),
        }
    }

    /// The 64 hex digits, as used in the cache's file names.
    pub(crate) fn hex(&self) -> &str {
        &self.hex
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl TryFrom<String> for Digest {
    type Error = String;
    fn try_from(text: String) -> Result<Digest, String> {
        Digest::parse(&text).map_err(|reason| format!("digest `{text}` {reason}"))
    }
}

impl From<Digest> for String {
    fn from(digest: Digest) -> String {
        digest.to_string()
    }
}

/// The digest and length of a file's content, read in large chunks.
pub(crate) fn hash_file(path: &Path) -> io::Result<(Digest, u64)> {
    let mut file = File::open(path)?;
    hash_reader(&mut file)
}

pub(crate) fn hash_reader(reader: &mut impl Read) -> io::Result<(Digest, u64)> {
    let mut hasher = Sha256::new();
    // 256 KiB: large enough that the syscalls cost nothing beside the hashing.
    let mut buffer = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buffer[..n]);
        total += n as u64;
    }
    Ok((Digest::from_hasher(hasher), total))
}

/// A reader that hashes what passes through it (a layer's uncompressed bytes,
/// checked against the config's diff_id).
pub(crate) struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> HashingReader<R> {
    pub(crate) fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    /// Reads what is left (a tar reader stops at the end-of-archive blocks
    /// and may leave padding behind) and returns the digest of everything.
    pub(crate) fn finish(mut self) -> io::Result<(Digest, u64)> {
        io::copy(&mut self, &mut io::sink())?;
        Ok((Digest::from_hasher(self.hasher), self.count))
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_sha256_with_64_lower_hex_digits() {
        let good = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(Digest::parse(&good).map(|d| d.to_string()), Ok(good));
        assert!(Digest::parse("sha512:00").is_err());
        assert!(Digest::parse("sha256:1234").is_err());
        assert!(Digest::parse(&format!("sha256:{}", "AB".repeat(32))).is_err());
        assert!(Digest::parse(&"ab".repeat(32)).is_err());
    }

    #[test]
    fn hashes_like_sha256sum() {
        assert_eq!(
            Digest::of_bytes(b"").hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
