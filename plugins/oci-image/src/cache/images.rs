//! What the cache hands out: a prepared image (its tree, digests, facts
//! and lease) and a cached image as `list` found it.

use std::path::PathBuf;

use crate::manifest::ImageFacts;
use crate::options::MountPoints;
use crate::store::{ImageRecord, ROOTFS_DIR, TreeLease};

/// A root filesystem ready to run, and what the runtime needs to know of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedImage {
    /// The reference as the caller wrote it.
    pub reference: String,
    /// The unpacked tree (`<cache>/trees/<name>/<generation>/rootfs`):
    /// mount it read-only, never write to it (every mount point a
    /// container needs must be among the `mount_points`).
    pub rootfs: PathBuf,
    /// The digest the reference pins (the image manifest's, or an index's).
    pub pinned_digest: String,
    /// The digest of the image manifest that was unpacked (the pinned one,
    /// or the index's entry for this platform).
    pub manifest_digest: String,
    /// The digest of the image config the facts come from.
    pub config_digest: String,
    /// The layers' (compressed) digests, bottom first.
    pub layer_digests: Vec<String>,
    /// `Env`, `WorkingDir`, `User`, `Entrypoint`, `Cmd` of the config.
    pub facts: ImageFacts,
    /// The digest of the whole tree, mount points included.
    pub tree_digest: String,
    /// The sum of the tree's regular files' sizes.
    pub unpacked_bytes: u64,
    /// The mount points created in the tree.
    pub mount_points: MountPoints,
    /// Set when the cached tree (or a cached blob) was found damaged and was
    /// rebuilt (or fetched again) during this call: what was wrong.
    pub repaired: Option<String>,
    /// Keeps the tree from being deleted: hold it (or a clone) for as long
    /// as containers may run on `rootfs`. A tree judged damaged later is
    /// rebuilt beside it, and it is deleted only once no one holds it.
    pub lease: TreeLease,
}

/// One cached image, as `list` found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedImage {
    /// The image's current generation (`<cache>/trees/<name>/<generation>`).
    pub dir: PathBuf,
    /// The reference it was first prepared for, when its record is readable.
    pub reference: Option<String>,
    /// The unpacked image manifest's digest, when its record is readable.
    pub manifest_digest: Option<String>,
    /// The recorded tree digest, when its record is readable.
    pub tree_digest: Option<String>,
    /// The sum of the tree's regular files' sizes (0 when unreadable).
    pub unpacked_bytes: u64,
    /// What is wrong with it (a changed tree, a damaged blob, an unreadable
    /// record); empty when it is intact. `prepare` repairs any of these.
    pub problems: Vec<String>,
}

impl CachedImage {
    /// Whether every check passed.
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty()
    }
}

pub(super) fn prepared(record: &ImageRecord, reference: &str, lease: TreeLease) -> PreparedImage {
    PreparedImage {
        reference: reference.to_owned(),
        rootfs: lease.generation().join(ROOTFS_DIR),
        pinned_digest: record.pinned_digest.to_string(),
        manifest_digest: record.manifest_digest.to_string(),
        config_digest: record.config_digest.to_string(),
        layer_digests: record.layers.iter().map(|l| l.digest.to_string()).collect(),
        facts: record.facts.clone(),
        tree_digest: record.tree_digest.to_string(),
        unpacked_bytes: record.unpacked_bytes,
        mount_points: record.mount_points.clone(),
        repaired: None,
        lease,
    }
}
