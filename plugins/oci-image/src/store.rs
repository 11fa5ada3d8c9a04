//! The cache on disk: where blobs, images and locks live, the record of a
//! prepared image (`image.json`), and the checks of cached blobs.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
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
    /// How long [`Layout::lock`] waits for another holder of an image's lock.
    lock_wait: Duration,
}

/// A shared lock on one generation of an image's tree, held by every user
/// of the tree for as long as containers may run on it: a generation is
/// deleted only once no one holds it (see [`Layout::remove_unused_generations`]).
#[derive(Debug, Clone)]
pub struct TreeLease {
    generation: PathBuf,
    _lock: std::sync::Arc<File>,
}

impl TreeLease {
    /// The generation's directory (it holds `rootfs/` and `image.json`).
    pub fn generation(&self) -> &Path {
        &self.generation
    }
}

impl PartialEq for TreeLease {
    fn eq(&self, other: &Self) -> bool {
        self.generation == other.generation
    }
}

impl Eq for TreeLease {}

impl Layout {
    /// Creates the cache's folders. The top is made private to this user
    /// (0700): the trees hold set-id binaries, device nodes and 1777 folders
    /// of image layers, and the lock files must not be reachable by others
    /// (a local user holding one would stall every preparation).
    pub(crate) fn create(root: PathBuf, lock_wait: Duration) -> Result<Layout, ImageError> {
        let layout = Layout { root, lock_wait };
        if let Some(parent) = layout.root.parent() {
            fs::create_dir_all(parent).map_err(|e| ImageError::io("create", parent, e))?;
        }
        match DirBuilder::new().mode(0o700).create(&layout.root) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(ImageError::io("create", &layout.root, e)),
        }
        make_private(&layout.root)?;
        for dir in [layout.blobs(), layout.trees(), layout.locks()] {
            DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(&dir)
                .map_err(|e| ImageError::io("create", &dir, e))?;
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

    /// Where every image's tree generations live.
    pub(crate) fn trees(&self) -> PathBuf {
        self.root.join("trees")
    }

    /// The folder of image `name`: its generations `<n>/` (the highest is
    /// current), builds in progress `.tmp-*`, removals in progress `.trash-*`.
    pub(crate) fn image(&self, name: &str) -> PathBuf {
        self.trees().join(name)
    }

    pub(crate) fn locks(&self) -> PathBuf {
        self.root.join("locks")
    }

    /// Takes the image's lock, waiting (up to the cache's bound) for another
    /// process (or task) that holds it; it is released when the returned
    /// file is dropped. Past the bound, the error names the lock file and
    /// the process holding it, when the kernel says.
    pub(crate) fn lock(&self, name: &str) -> Result<File, ImageError> {
        let path = self.locks().join(format!("{name}.lock"));
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| ImageError::io("open the lock", &path, e))?;
        let started = std::time::Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(file),
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(ImageError::io("take the lock", &path, e));
                }
            }
            if started.elapsed() >= self.lock_wait {
                return Err(ImageError::LockTimeout {
                    holder: lock_holder(&file),
                    path,
                    waited: self.lock_wait,
                });
            }
            // A preparation holds the lock for seconds to minutes: polling
            // keeps the wait bounded without a thread parked in flock(2).
            std::thread::sleep(LOCK_POLL);
        }
    }

    /// Removes what an interrupted preparation of `name` left behind (the
    /// caller holds the image's lock, so none of it is in use).
    pub(crate) fn remove_leftovers(&self, name: &str) -> Result<(), ImageError> {
        let dir = self.image(name);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(ImageError::io("read", &dir, e)),
        };
        for entry in entries.flatten() {
            let file_name = entry.file_name();
            let file_name = file_name.to_string_lossy();
            if file_name.starts_with(".tmp-") || file_name.starts_with(".trash-") {
                let path = entry.path();
                fs::remove_dir_all(&path).map_err(|e| ImageError::io("remove", &path, e))?;
            }
        }
        Ok(())
    }

    /// The generations of image `name`, oldest first.
    pub(crate) fn generations(&self, name: &str) -> Vec<PathBuf> {
        let Ok(entries) = fs::read_dir(self.image(name)) else {
            return Vec::new();
        };
        let mut found: Vec<(u64, PathBuf)> = entries
            .flatten()
            .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
            .collect();
        found.sort();
        found.into_iter().map(|(_, path)| path).collect()
    }

    /// A fresh directory in the image's folder, to build it in.
    pub(crate) fn image_build(&self, name: &str) -> Result<PathBuf, ImageError> {
        let dir = self.image(name);
        DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&dir)
            .map_err(|e| ImageError::io("create", &dir, e))?;
        Ok(dir.join(format!(".tmp-{}", unique_suffix())))
    }

    /// Moves a finished build into place as the image's newest generation.
    /// Older generations stay where they are: containers of other processes
    /// may run on them (see [`Layout::remove_unused_generations`]).
    pub(crate) fn install(&self, name: &str, build: &Path) -> Result<PathBuf, ImageError> {
        let next = self
            .generations(name)
            .last()
            .and_then(|g| g.file_name()?.to_str()?.parse::<u64>().ok())
            .map_or(1, |n| n + 1);
        let target = self.image(name).join(next.to_string());
        fs::rename(build, &target).map_err(|e| ImageError::io("move into place", build, e))?;
        Ok(target)
    }

    /// A shared lock on a generation, for as long as its tree is used. The
    /// caller holds the image's lock, so no removal is under way.
    pub(crate) fn lease(&self, generation: &Path) -> Result<TreeLease, ImageError> {
        let dir = File::open(generation).map_err(|e| ImageError::io("open", generation, e))?;
        dir.lock_shared()
            .map_err(|e| ImageError::io("lock", generation, e))?;
        Ok(TreeLease {
            generation: generation.to_path_buf(),
            _lock: std::sync::Arc::new(dir),
        })
    }

    /// Deletes the generations of `name` other than `current` that no one
    /// holds a lease on (a generation in use stays, for a later call, once
    /// its users are gone). The caller holds the image's lock, so no lease
    /// is being taken meanwhile.
    pub(crate) fn remove_unused_generations(&self, name: &str, current: &Path) {
        for generation in self.generations(name) {
            if generation == current {
                continue;
            }
            let Ok(dir) = File::open(&generation) else {
                continue;
            };
            if dir.try_lock().is_err() {
                tracing::debug!(path = %generation.display(), "an older tree is still in use; kept");
                continue;
            }
            let aside = self.image(name).join(format!(".trash-{}", unique_suffix()));
            if let Err(e) = fs::rename(&generation, &aside) {
                tracing::warn!(path = %generation.display(), error = %e, "cannot move an unused tree aside");
                continue;
            }
            drop(dir);
            if let Err(e) = fs::remove_dir_all(&aside) {
                // Harmless: the next preparation of this image removes it.
                tracing::warn!(path = %aside.display(), error = %e, "cannot remove an unused tree");
            }
        }
    }
}

/// How often a held image lock is tried again.
const LOCK_POLL: Duration = Duration::from_millis(50);

/// Makes the cache's top private: created 0700, an existing one of this
/// user set to 0700; one of another user is refused.
fn make_private(root: &Path) -> Result<(), ImageError> {
    let meta = fs::symlink_metadata(root).map_err(|e| ImageError::io("inspect", root, e))?;
    if !meta.is_dir() {
        return Err(ImageError::NotPrivate {
            path: root.to_path_buf(),
            problem: "is not a folder (a symbolic link or a file)".into(),
        });
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        return Err(ImageError::NotPrivate {
            path: root.to_path_buf(),
            problem: format!(
                "belongs to uid {} (this process runs as uid {uid})",
                meta.uid()
            ),
        });
    }
    if meta.mode() & 0o077 != 0 {
        fs::set_permissions(root, fs::Permissions::from_mode(0o700))
            .map_err(|e| ImageError::io("make private", root, e))?;
    }
    Ok(())
}

/// Who holds the lock `file` is open on, from /proc/locks: `process <pid>
/// (<command>)`, or `None` when the kernel does not say.
fn lock_holder(file: &File) -> Option<String> {
    // Matched by inode number: the device the kernel prints is the
    // underlying one, which stat(2) does not give on overlay filesystems.
    let inode = format!(":{}", file.metadata().ok()?.ino());
    let locks = fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        // `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF` (a waiter's line has `->`).
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) == Some(&"->") || !fields.get(5).is_some_and(|id| id.ends_with(&inode)) {
            return None;
        }
        let pid = fields.get(4)?;
        let command = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        Some(format!("process {pid} ({})", command.trim()))
    })
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
