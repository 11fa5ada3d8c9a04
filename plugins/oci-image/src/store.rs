//! The cache on disk: where blobs, images and locks live, the record of a
//! prepared image (`image.json`), and the checks of cached blobs.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::digest::{Digest, hash_file};
use crate::error::ImageError;
use crate::manifest::{Compression, ImageFacts};
use crate::options::MountPoints;

/// The version of `image.json`; another version is rebuilt, not read.
pub(crate) const RECORD_FORMAT: u32 = 1;

#[derive(Debug, Clone)]
pub(crate) struct Layout {
    root: PathBuf,
}

impl Layout {
    pub(crate) fn create(root: PathBuf) -> Result<Layout, ImageError> {
        let layout = Layout { root };
        for dir in [layout.blobs(), layout.images(), layout.locks()] {
            fs::create_dir_all(&dir).map_err(|e| ImageError::io("create", &dir, e))?;
        }
        Ok(layout)
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn blobs(&self) -> PathBuf {
        self.root.join("blobs").join("sha256")
    }

    pub(crate) fn blob(&self, digest: &Digest) -> PathBuf {
        self.blobs().join(digest.hex())
    }

    /// A fresh name beside the blob, to download into and then rename.
    pub(crate) fn blob_download(&self, digest: &Digest) -> PathBuf {
        self.blobs()
            .join(format!(".tmp-{}-{}", digest.hex(), unique_suffix()))
    }

    /// Removes downloads of `digest` that an interrupted call left behind:
    /// those untouched for ten minutes (a download in progress writes at
    /// least every read timeout).
    pub(crate) fn remove_stale_downloads(&self, digest: &Digest) {
        let prefix = format!(".tmp-{}-", digest.hex());
        let Ok(entries) = fs::read_dir(self.blobs()) else {
            return;
        };
        for entry in entries.flatten() {
            if !entry.file_name().to_string_lossy().starts_with(&prefix) {
                continue;
            }
            let stale = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > Duration::from_secs(600));
            if stale && let Err(e) = fs::remove_file(entry.path()) {
                tracing::warn!(path = %entry.path().display(), error = %e, "cannot remove a stale download");
            }
        }
    }

    pub(crate) fn images(&self) -> PathBuf {
        self.root.join("images")
    }

    pub(crate) fn image(&self, name: &str) -> PathBuf {
        self.images().join(name)
    }

    pub(crate) fn locks(&self) -> PathBuf {
        self.root.join("locks")
    }

    /// Takes the image's lock, waiting for another process (or task) that
    /// holds it; it is released when the returned file is dropped.
    pub(crate) fn lock(&self, name: &str) -> Result<File, ImageError> {
        let path = self.locks().join(format!("{name}.lock"));
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| ImageError::io("open the lock", &path, e))?;
        file.lock()
            .map_err(|e| ImageError::io("take the lock", &path, e))?;
        Ok(file)
    }

    /// Removes what an interrupted preparation of `name` left behind (the
    /// caller holds the image's lock, so none of it is in use).
    pub(crate) fn remove_leftovers(&self, name: &str) -> Result<(), ImageError> {
        let images = self.images();
        let entries = fs::read_dir(&images).map_err(|e| ImageError::io("read", &images, e))?;
        let tmp = format!(".tmp-{name}-");
        let trash = format!(".trash-{name}-");
        for entry in entries.flatten() {
            let file_name = entry.file_name();
            let file_name = file_name.to_string_lossy();
            if file_name.starts_with(&tmp) || file_name.starts_with(&trash) {
                let path = entry.path();
                fs::remove_dir_all(&path).map_err(|e| ImageError::io("remove", &path, e))?;
            }
        }
        Ok(())
    }

    /// A fresh directory beside the image's final one, to build it in.
    pub(crate) fn image_build(&self, name: &str) -> PathBuf {
        self.images()
            .join(format!(".tmp-{name}-{}", unique_suffix()))
    }

    /// Moves a finished build into place; an older tree there (damaged) is
    /// moved aside first and deleted after.
    pub(crate) fn install(&self, name: &str, build: &Path) -> Result<PathBuf, ImageError> {
        let target = self.image(name);
        let mut trash = None;
        if fs::symlink_metadata(&target).is_ok() {
            let aside = self
                .images()
                .join(format!(".trash-{name}-{}", unique_suffix()));
            fs::rename(&target, &aside).map_err(|e| ImageError::io("move aside", &target, e))?;
            trash = Some(aside);
        }
        fs::rename(build, &target).map_err(|e| ImageError::io("move into place", build, e))?;
        if let Some(aside) = trash
            && let Err(e) = fs::remove_dir_all(&aside)
        {
            // Harmless: the next preparation of this image removes it.
            tracing::warn!(path = %aside.display(), error = %e, "cannot remove a replaced image tree");
        }
        Ok(target)
    }
}

/// Unique among this machine's processes and this process's calls.
fn unique_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// What a cached blob turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BlobState {
    Missing,
    Intact,
    Damaged(String),
}

/// Hashes the cached blob and compares it with its name (and size, if
/// known).
pub(crate) fn check_blob(path: &Path, digest: &Digest, size: Option<u64>) -> BlobState {
    match hash_file(path) {
        Ok((actual, length)) if &actual == digest && size.is_none_or(|s| s == length) => {
            BlobState::Intact
        }
        Ok((actual, length)) => BlobState::Damaged(format!(
            "the cached blob {} hashes to {actual} ({length} bytes)",
            path.display()
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => BlobState::Missing,
        Err(e) => BlobState::Damaged(format!(
            "the cached blob {} cannot be read: {e}",
            path.display()
        )),
    }
}

/// Reads a small cached blob (a manifest or a config) if it is intact.
pub(crate) fn read_small_blob(
    path: &Path,
    digest: &Digest,
    limit: u64,
) -> Result<Vec<u8>, BlobState> {
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(BlobState::Missing),
        Err(e) => {
            return Err(BlobState::Damaged(format!(
                "the cached blob {} cannot be read: {e}",
                path.display()
            )));
        }
    };
    if meta.len() > limit {
        return Err(BlobState::Damaged(format!(
            "the cached blob {} is {} bytes, more than its kind can be",
            path.display(),
            meta.len()
        )));
    }
    let bytes = fs::read(path).map_err(|e| {
        BlobState::Damaged(format!(
            "the cached blob {} cannot be read: {e}",
            path.display()
        ))
    })?;
    let actual = Digest::of_bytes(&bytes);
    if &actual != digest {
        return Err(BlobState::Damaged(format!(
            "the cached blob {} hashes to {actual}",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Writes a verified small blob into the cache (atomically: beside it, then
/// renamed).
pub(crate) fn store_small_blob(
    layout: &Layout,
    digest: &Digest,
    bytes: &[u8],
) -> Result<(), ImageError> {
    let tmp = layout.blob_download(digest);
    fs::write(&tmp, bytes).map_err(|e| ImageError::io("write", &tmp, e))?;
    let target = layout.blob(digest);
    fs::rename(&tmp, &target).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        ImageError::io("move into place", &target, e)
    })
}

/// `image.json`: what was prepared, from which blobs, and the tree digest
/// that the root filesystem must keep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ImageRecord {
    pub(crate) format: u32,
    /// The reference first prepared (another repository with the same
    /// digest shares the entry).
    pub(crate) reference: String,
    /// The digest the reference pins: the manifest's, or the index's.
    pub(crate) pinned_digest: Digest,
    pub(crate) index_digest: Option<Digest>,
    pub(crate) manifest_digest: Digest,
    pub(crate) config_digest: Digest,
    pub(crate) layers: Vec<LayerRecord>,
    pub(crate) facts: ImageFacts,
    pub(crate) mount_points: MountPoints,
    pub(crate) tree_digest: Digest,
    pub(crate) entries: u64,
    pub(crate) unpacked_bytes: u64,
    pub(crate) prepared_at_unix: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LayerRecord {
    pub(crate) digest: Digest,
    pub(crate) media_type: String,
    pub(crate) compression: Compression,
    pub(crate) size: u64,
    pub(crate) diff_id: Digest,
}

pub(crate) const RECORD_FILE: &str = "image.json";
pub(crate) const ROOTFS_DIR: &str = "rootfs";

pub(crate) fn read_record(image_dir: &Path) -> Result<ImageRecord, String> {
    let path = image_dir.join(RECORD_FILE);
    let bytes = fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let record: ImageRecord = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is not a valid record: {e}", path.display()))?;
    if record.format != RECORD_FORMAT {
        return Err(format!(
            "{} has format {} (this version writes {RECORD_FORMAT})",
            path.display(),
            record.format
        ));
    }
    Ok(record)
}

pub(crate) fn write_record(image_dir: &Path, record: &ImageRecord) -> Result<(), ImageError> {
    let path = image_dir.join(RECORD_FILE);
    let bytes = serde_json::to_vec_pretty(record).map_err(|e| {
        ImageError::io(
            "write",
            &path,
            io::Error::new(io::ErrorKind::InvalidData, e),
        )
    })?;
    fs::write(&path, bytes).map_err(|e| ImageError::io("write", &path, e))
}
