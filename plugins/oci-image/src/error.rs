//! The one error type of the crate. Every message names what it is about (the
//! image reference, a blob digest, a path) and, where there is one, what to do.

use std::io;
use std::path::PathBuf;

/// Why an image could not be fetched, verified, unpacked or checked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// The reference names a tag, or nothing at all, instead of a digest.
    #[error(
        "image `{reference}` is not pinned: progscore fetches images by digest only, \
         as `registry/repository@sha256:<64 hex digits>` (the pushed digest is in \
         `docker image inspect --format '{{{{index .RepoDigests 0}}}}' IMAGE`)"
    )]
    NotPinned { reference: String },

    /// The `@...` part is not a sha256 digest of 64 lower-case hex digits.
    #[error("image `{reference}`: digest `{digest}` {reason}")]
    InvalidDigest {
        reference: String,
        digest: String,
        reason: &'static str,
    },

    /// The name before the digest is not a valid `registry/repository`.
    #[error("image `{reference}` is not a valid image reference: {reason}")]
    InvalidReference { reference: String, reason: String },

    /// A mount point is not an absolute, plain path, or the image's tree
    /// does not allow it to be created.
    #[error("mount point `{path}`: {reason}")]
    InvalidMountPoint { path: String, reason: String },

    /// The registry could not be reached, or answered with an error other
    /// than "not found".
    #[error(
        "image `{reference}`: cannot fetch {what} from the registry at {registry}: {detail}; \
         {hint}"
    )]
    Registry {
        reference: String,
        registry: String,
        what: String,
        detail: String,
        hint: &'static str,
    },

    /// The registry has no manifest or blob by that digest.
    #[error(
        "image `{reference}`: the registry at {registry} has no {what} {digest}; check the \
         digest in the profile (scripts/setup.sh pushes the project's images and writes their \
         digests into progscore.toml)"
    )]
    NotFound {
        reference: String,
        registry: String,
        what: &'static str,
        digest: String,
    },

    /// Bytes (from the registry or from the cache) do not hash to the digest
    /// that names them.
    #[error(
        "image `{reference}`: {what} does not match its digest: expected {expected}, got \
         {actual}; the registry served other bytes than the digest names"
    )]
    DigestMismatch {
        reference: String,
        what: String,
        expected: String,
        actual: String,
    },

    /// A manifest, index or config that cannot be used.
    #[error("image `{reference}`: {what} {digest}: {reason}")]
    BadImage {
        reference: String,
        what: &'static str,
        digest: String,
        reason: String,
    },

    /// An index (manifest list) without an entry for this host's platform.
    #[error(
        "image `{reference}`: the index {digest} has no image for {wanted} (it has: {available})"
    )]
    NoPlatform {
        reference: String,
        digest: String,
        wanted: String,
        available: String,
    },

    /// A layer whose media type is neither a tar nor a gzip-compressed tar.
    #[error(
        "image `{reference}`: layer {digest} has media type `{media_type}`; only tar and \
         gzip-compressed tar layers (OCI or Docker media types) are supported: rebuild or \
         push the image without zstd or foreign layers"
    )]
    UnsupportedLayer {
        reference: String,
        digest: String,
        media_type: String,
    },

    /// The image declares volumes, which the sandbox refuses (as the Docker
    /// backend does).
    #[error(
        "image `{reference}` declares VOLUME {} (a volume would be a writable place that \
         outlives the container); rebuild it without VOLUME instructions",
        volumes.join(", ")
    )]
    Volumes {
        reference: String,
        volumes: Vec<String>,
    },

    /// A layer's uncompressed content does not match the config's
    /// `rootfs.diff_ids`.
    #[error(
        "image `{reference}`: layer {layer} unpacks to {actual}, but the image config's \
         rootfs.diff_ids says {expected}; the image is inconsistent: rebuild and push it"
    )]
    DiffIdMismatch {
        reference: String,
        layer: String,
        expected: String,
        actual: String,
    },

    /// A layer could not be applied: a malformed archive, an entry that would
    /// reach outside the root filesystem, or a file that could not be written.
    #[error("image `{reference}`: layer {layer}: {cause}")]
    Layer {
        reference: String,
        layer: String,
        cause: UnpackError,
    },

    /// The cached root filesystem is not the tree that was prepared.
    #[error(
        "the cached root filesystem {} has changed since it was prepared (its tree digest is \
         {actual}, {expected} was recorded); `prepare` rebuilds it from the cached blobs",
        rootfs.display()
    )]
    Tampered {
        rootfs: PathBuf,
        expected: String,
        actual: String,
    },

    /// The image's lock stayed held longer than the cache waits.
    #[error(
        "the image cache's lock {} stayed held for {waited:?}{}; another preparation of this \
         image is stuck, or something else holds the lock: end it, or remove the lock file if \
         nothing runs",
        path.display(),
        holder.as_deref().map(|h| format!(" by {h}")).unwrap_or_else(|| " (the holder is unknown)".into())
    )]
    LockTimeout {
        path: PathBuf,
        waited: std::time::Duration,
        holder: Option<String>,
    },

    /// The cache's top folder is not a private folder of this user.
    #[error(
        "the image cache {} {problem}; it must be a folder private to the user running \
         progscore (mode 0700): remove it, or give it to this user",
        path.display()
    )]
    NotPrivate { path: PathBuf, problem: String },

    /// A file of the cache could not be read or written.
    #[error("cannot {action} {}: {cause}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        cause: io::Error,
    },

    /// A background task (hashing, unpacking) panicked or was cancelled.
    #[error("image `{reference}`: {what} did not finish: {cause}")]
    Task {
        reference: String,
        what: &'static str,
        cause: tokio::task::JoinError,
    },
}

impl ImageError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        ImageError::Io {
            action,
            path: path.into(),
            cause: source,
        }
    }
}

/// Why a layer could not be applied to a root filesystem.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UnpackError {
    /// An entry that would write outside the root filesystem, or through a
    /// symbolic link inside it. The whole image is refused.
    #[error("entry `{entry}` refused: {reason}")]
    Unsafe { entry: String, reason: String },

    /// An entry of a kind that has no place in a root filesystem.
    #[error("entry `{entry}` refused: unsupported tar entry type {kind}")]
    Unsupported { entry: String, kind: String },

    /// The archive itself is malformed (or truncated).
    #[error("the layer is not a readable tar archive: {cause}")]
    Archive { cause: io::Error },

    /// A file of the root filesystem could not be created or changed.
    #[error("cannot {action} {}: {cause}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        cause: io::Error,
    },
}
