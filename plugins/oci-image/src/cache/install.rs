//! A tree put in place: the verified layer blobs unpacked into a fresh
//! directory, the mount points created, the tree recorded, and the directory
//! renamed into place as the image's newest generation.

use std::fs::{self, DirBuilder, File};
use std::io::{BufReader, Read};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;

use crate::digest::HashingReader;
use crate::error::{ImageError, UnpackError};
use crate::manifest::Compression;
use crate::reference::PinnedReference;
use crate::store::{ImageRecord, Layout, ROOTFS_DIR, write_record};
use crate::tree::tree_digest;
use crate::unpack::Rootfs;

/// Unpacks the (verified) layer blobs into a fresh directory in the
/// image's folder, creates the mount points, records the tree, and renames
/// the directory into place as the newest generation. A failure leaves
/// nothing behind.
pub(super) fn unpack_and_install(
    layout: &Layout,
    name: &str,
    pinned: &PinnedReference,
    mut record: ImageRecord,
) -> Result<(ImageRecord, PathBuf), ImageError> {
    let build = layout.image_build(name)?;
    let result = build_tree(layout, &build, pinned, &mut record);
    if let Err(e) = result {
        if let Err(cleanup) = fs::remove_dir_all(&build) {
            tracing::warn!(path = %build.display(), error = %cleanup, "cannot remove a failed image build");
        }
        // The image's folder, when nothing else is in it (a first build).
        let _ = fs::remove_dir(layout.image(name));
        return Err(e);
    }
    let generation = layout.install(name, &build)?;
    Ok((record, generation))
}

fn build_tree(
    layout: &Layout,
    build: &Path,
    pinned: &PinnedReference,
    record: &mut ImageRecord,
) -> Result<(), ImageError> {
    let rootfs_path = build.join(ROOTFS_DIR);
    for dir in [build, rootfs_path.as_path()] {
        DirBuilder::new()
            .mode(0o755)
            .create(dir)
            .map_err(|e| ImageError::io("create", dir, e))?;
    }
    let mut rootfs = Rootfs::new(&rootfs_path);
    for layer in &record.layers {
        let layer_error = |source: UnpackError| ImageError::Layer {
            reference: pinned.text.clone(),
            layer: layer.digest.to_string(),
            cause: source,
        };
        let path = layout.blob(&layer.digest);
        let file = File::open(&path).map_err(|e| ImageError::io("open", &path, e))?;
        let reader: Box<dyn Read> = match layer.compression {
            Compression::Gzip => Box::new(MultiGzDecoder::new(BufReader::with_capacity(
                256 * 1024,
                file,
            ))),
            Compression::None => Box::new(BufReader::with_capacity(256 * 1024, file)),
        };
        let mut hashing = HashingReader::new(reader);
        rootfs.apply_layer(&mut hashing).map_err(layer_error)?;
        let (diff_id, _) = hashing
            .finish()
            .map_err(|source| layer_error(UnpackError::Archive { cause: source }))?;
        if diff_id != layer.diff_id {
            return Err(ImageError::DiffIdMismatch {
                reference: pinned.text.clone(),
                layer: layer.digest.to_string(),
                expected: layer.diff_id.to_string(),
                actual: diff_id.to_string(),
            });
        }
    }
    for (path, is_file) in record.mount_points.entries() {
        rootfs.create_mount_point(path, is_file).map_err(|reason| {
            ImageError::InvalidMountPoint {
                path: path.display().to_string(),
                reason,
            }
        })?;
    }
    rootfs.finish().map_err(|source| ImageError::Layer {
        reference: pinned.text.clone(),
        layer: "(directory times)".into(),
        cause: source,
    })?;
    let tree = tree_digest(&rootfs_path)?;
    record.tree_digest = tree.digest;
    record.entries = tree.entries;
    record.unpacked_bytes = tree.bytes;
    write_record(build, record)
}
