//! The checks of what is already cached, without the network: a record
//! against the blobs it names and its tree (for `prepare`, and for every
//! image `list` reports), and the sizes past which a manifest or config blob
//! is refused, whether fetched or cached.

use std::path::PathBuf;

use super::images::CachedImage;
use crate::digest::Digest;
use crate::manifest::{Document, parse_config, parse_document};
use crate::options::MountPoints;
use crate::reference::PinnedReference;
use crate::store::{
    BlobState, ImageRecord, Layout, ROOTFS_DIR, check_blob, read_record, read_small_blob,
};
use crate::tree::tree_digest;

/// A manifest or index larger than this is refused (Docker's limit).
pub(super) const MANIFEST_LIMIT: u64 = 4 << 20;
/// An image config larger than this is refused (real ones are a few KiB).
pub(super) const CONFIG_LIMIT: u64 = 16 << 20;
/// What was found under the image's name.
pub(super) enum Cached {
    Missing,
    /// The tree (in this generation) and its record are intact; the layer
    /// blobs are not checked yet.
    Intact(Box<ImageRecord>, PathBuf),
    Damaged(String),
}
/// The newest generation of cached image `name`, checked without the
/// network: its record, the manifest and config blobs it names, and its tree.
pub(super) fn check_cached(
    layout: &Layout,
    name: &str,
    pinned: &PinnedReference,
    mount_points: &MountPoints,
) -> Cached {
    let Some(dir) = layout.generations(name).pop() else {
        return Cached::Missing;
    };
    let record = match read_record(&dir) {
        Ok(record) => record,
        Err(why) => return Cached::Damaged(why),
    };
    if record.pinned_digest != pinned.digest || &record.mount_points != mount_points {
        return Cached::Damaged(format!(
            "{} records another image or other mount points",
            dir.display()
        ));
    }
    if let Err(why) = check_chain(layout, pinned, &record, false) {
        return Cached::Damaged(why);
    }
    let rootfs = dir.join(ROOTFS_DIR);
    match tree_digest(&rootfs) {
        Ok(tree) if tree.digest == record.tree_digest => Cached::Intact(Box::new(record), dir),
        Ok(tree) => Cached::Damaged(format!(
            "the cached root filesystem {} changed since it was prepared (tree digest {}, {} \
             was recorded)",
            rootfs.display(),
            tree.digest,
            record.tree_digest
        )),
        Err(e) => Cached::Damaged(e.to_string()),
    }
}

/// Checks that the record agrees with the cached blobs it names: manifest
/// (and index), config (the facts are those of the config), and, if asked,
/// the layers.
fn check_chain(
    layout: &Layout,
    pinned: &PinnedReference,
    record: &ImageRecord,
    layers: bool,
) -> Result<(), String> {
    let read = |digest: &Digest, limit: u64| {
        read_small_blob(&layout.blob(digest), digest, limit).map_err(|s| blob_problem(digest, s))
    };
    let top = read(&record.pinned_digest, MANIFEST_LIMIT)?;
    let manifest =
        match parse_document(pinned, &record.pinned_digest, &top).map_err(|e| e.to_string())? {
            Document::Manifest(manifest) => {
                if record.index_digest.is_some() || record.manifest_digest != record.pinned_digest {
                    return Err("image.json does not match the cached manifest".into());
                }
                manifest
            }
            Document::Index(entries) => {
                let listed = entries.iter().any(|e| e.digest == record.manifest_digest);
                if record.index_digest.as_ref() != Some(&record.pinned_digest) || !listed {
                    return Err("image.json does not match the cached index".into());
                }
                let bytes = read(&record.manifest_digest, MANIFEST_LIMIT)?;
                match parse_document(pinned, &record.manifest_digest, &bytes)
                    .map_err(|e| e.to_string())?
                {
                    Document::Manifest(manifest) => manifest,
                    Document::Index(_) => return Err("the cached manifest is an index".into()),
                }
            }
        };
    let layer_digests: Vec<&Digest> = manifest.layers.iter().map(|l| &l.digest).collect();
    let recorded: Vec<&Digest> = record.layers.iter().map(|l| &l.digest).collect();
    if manifest.config.digest != record.config_digest || layer_digests != recorded {
        return Err("image.json does not match the cached manifest's config and layers".into());
    }
    let config_bytes = read(&record.config_digest, CONFIG_LIMIT)?;
    let config =
        parse_config(pinned, &record.config_digest, &config_bytes).map_err(|e| e.to_string())?;
    let diff_ids: Vec<&Digest> = record.layers.iter().map(|l| &l.diff_id).collect();
    if config.facts != record.facts || config.diff_ids.iter().collect::<Vec<_>>() != diff_ids {
        return Err("image.json does not match the cached image config".into());
    }
    if layers {
        for layer in &record.layers {
            let state = check_blob(&layout.blob(&layer.digest), &layer.digest, Some(layer.size));
            if state != BlobState::Intact {
                return Err(blob_problem(&layer.digest, state));
            }
        }
    }
    Ok(())
}

fn blob_problem(digest: &Digest, state: BlobState) -> String {
    match state {
        BlobState::Missing => format!("the cached blob {digest} is missing"),
        BlobState::Damaged(why) => why,
        BlobState::Intact => format!("the cached blob {digest} is intact"),
    }
}

pub(super) fn check_listed(layout: &Layout, dir: PathBuf) -> CachedImage {
    let mut listed = CachedImage {
        dir: dir.clone(),
        reference: None,
        manifest_digest: None,
        tree_digest: None,
        unpacked_bytes: 0,
        problems: Vec::new(),
    };
    let record = match read_record(&dir) {
        Ok(record) => record,
        Err(why) => {
            listed.problems.push(why);
            return listed;
        }
    };
    listed.reference = Some(record.reference.clone());
    listed.manifest_digest = Some(record.manifest_digest.to_string());
    listed.tree_digest = Some(record.tree_digest.to_string());
    listed.unpacked_bytes = record.unpacked_bytes;
    match PinnedReference::parse(&record.reference) {
        Ok(pinned) => {
            if let Err(why) = check_chain(layout, &pinned, &record, true) {
                listed.problems.push(why);
            }
        }
        Err(e) => listed.problems.push(e.to_string()),
    }
    let rootfs = dir.join(ROOTFS_DIR);
    match tree_digest(&rootfs) {
        Ok(tree) if tree.digest == record.tree_digest => {}
        Ok(tree) => listed.problems.push(format!(
            "the root filesystem {} changed since it was prepared (tree digest {}, {} was \
             recorded)",
            rootfs.display(),
            tree.digest,
            record.tree_digest
        )),
        Err(e) => listed.problems.push(e.to_string()),
    }
    listed
}
