//! The tree digest: one sha256 over everything a container would see of a
//! root filesystem, so that a change to any cached file is noticed.
//!
//! The tree is walked depth-first with each directory's entries sorted by
//! their bytes; for each entry (the root first, as the empty path) the record
//! is its path, type, permission bits (with set-id and sticky), uid, gid,
//! size and content sha256 (regular files), symbolic link target, and device
//! number (devices). Each field is length-prefixed, so no two trees share a
//! record stream. Times, inode numbers and hard-link counts are left out:
//! they change without changing what a program reads.
//!
//! File contents are hashed in parallel (rayon), which is most of the cost.

use std::fs;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use sha2::{Digest as _, Sha256};

use crate::digest::{Digest, hash_reader};
use crate::error::ImageError;
use crate::unpack::open_no_follow;

/// Bumped if the record format ever changes (older records then no longer
/// match, and `prepare` rebuilds their trees).
const FORMAT: &[u8] = b"progscore-tree-v1\n";

/// What the walk found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TreeSummary {
    pub(crate) digest: Digest,
    /// Entries of every type, the root included.
    pub(crate) entries: u64,
    /// The sum of regular files' sizes.
    pub(crate) bytes: u64,
}

struct Record {
    path: PathBuf,
    kind: u8,
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    rdev: u64,
    link: Vec<u8>,
    content: Option<Digest>,
}

/// Computes the tree digest of `root` (never following symbolic links).
pub(crate) fn tree_digest(root: &Path) -> Result<TreeSummary, ImageError> {
    let mut records = Vec::new();
    let meta = fs::symlink_metadata(root).map_err(|e| ImageError::io("inspect", root, e))?;
    if !meta.is_dir() {
        return Err(ImageError::io(
            "walk",
            root,
            std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
        ));
    }
    records.push(record(root, PathBuf::new(), &meta)?);
    walk(root, Path::new(""), &mut records)?;

    records
        .par_iter_mut()
        .filter(|r| r.kind == b'f')
        .try_for_each(|r| -> Result<(), ImageError> {
            let path = root.join(&r.path);
            let mut file = open_no_follow(&path).map_err(|e| ImageError::io("read", &path, e))?;
            let (digest, length) =
                hash_reader(&mut file).map_err(|e| ImageError::io("read", &path, e))?;
            // What was read is what counts, should the file change meanwhile.
            r.size = length;
            r.content = Some(digest);
            Ok(())
        })?;

    let mut hasher = Sha256::new();
    hasher.update(FORMAT);
    let mut bytes = 0;
    for r in &records {
        field(&mut hasher, r.path.as_os_str().as_bytes());
        field(&mut hasher, &[r.kind]);
        field(&mut hasher, &r.mode.to_le_bytes());
        field(&mut hasher, &r.uid.to_le_bytes());
        field(&mut hasher, &r.gid.to_le_bytes());
        field(&mut hasher, &r.size.to_le_bytes());
        field(&mut hasher, &r.rdev.to_le_bytes());
        field(&mut hasher, &r.link);
        field(
            &mut hasher,
            r.content.as_ref().map_or(&[][..], |d| d.hex().as_bytes()),
        );
        if r.kind == b'f' {
            bytes += r.size;
        }
    }
    Ok(TreeSummary {
        digest: Digest::from_hasher(hasher),
        entries: records.len() as u64,
        bytes,
    })
}

fn field(hasher: &mut Sha256, bytes: &[u8]) {
    hasher.update((bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

fn walk(root: &Path, rel: &Path, records: &mut Vec<Record>) -> Result<(), ImageError> {
    let dir = root.join(rel);
    let mut names: Vec<_> = fs::read_dir(&dir)
        .map_err(|e| ImageError::io("read", &dir, e))?
        .map(|entry| entry.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(|e| ImageError::io("read", &dir, e))?;
    names.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    for name in names {
        let child_rel = rel.join(&name);
        let path = root.join(&child_rel);
        let meta = fs::symlink_metadata(&path).map_err(|e| ImageError::io("inspect", &path, e))?;
        let is_dir = meta.is_dir();
        records.push(record(&path, child_rel.clone(), &meta)?);
        if is_dir {
            walk(root, &child_rel, records)?;
        }
    }
    Ok(())
}

fn record(path: &Path, rel: PathBuf, meta: &fs::Metadata) -> Result<Record, ImageError> {
    let file_type = meta.file_type();
    let kind = match meta.mode() & libc::S_IFMT {
        libc::S_IFREG => b'f',
        libc::S_IFDIR => b'd',
        libc::S_IFLNK => b'l',
        libc::S_IFCHR => b'c',
        libc::S_IFBLK => b'b',
        libc::S_IFIFO => b'p',
        _ => b's',
    };
    let link = if file_type.is_symlink() {
        fs::read_link(path)
            .map_err(|e| ImageError::io("read the symbolic link", path, e))?
            .into_os_string()
            .into_vec()
    } else {
        Vec::new()
    };
    Ok(Record {
        path: rel,
        kind,
        mode: meta.mode() & 0o7777,
        uid: meta.uid(),
        gid: meta.gid(),
        size: if kind == b'f' { meta.len() } else { 0 },
        rdev: if matches!(kind, b'c' | b'b') {
            meta.rdev()
        } else {
            0
        },
        link,
        content: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn notices_content_mode_and_link_changes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        fs::create_dir(root.join("d")).expect("mkdir");
        fs::write(root.join("d/f"), b"hello").expect("write");
        std::os::unix::fs::symlink("f", root.join("d/l")).expect("symlink");
        let first = tree_digest(root).expect("digest");
        assert_eq!(first, tree_digest(root).expect("digest again"));
        assert_eq!(first.entries, 4);
        assert_eq!(first.bytes, 5);

        fs::write(root.join("d/f"), b"hellO").expect("write");
        let changed = tree_digest(root).expect("digest");
        assert_ne!(first.digest, changed.digest);
        fs::write(root.join("d/f"), b"hello").expect("write");
        assert_eq!(first.digest, tree_digest(root).expect("digest").digest);

        fs::set_permissions(root.join("d/f"), fs::Permissions::from_mode(0o4755)).expect("chmod");
        assert_ne!(first.digest, tree_digest(root).expect("digest").digest);
        fs::set_permissions(root.join("d/f"), fs::Permissions::from_mode(0o644)).expect("chmod");
        let restored = tree_digest(root).expect("digest").digest;

        fs::remove_file(root.join("d/l")).expect("rm");
        std::os::unix::fs::symlink("g", root.join("d/l")).expect("symlink");
        assert_ne!(restored, tree_digest(root).expect("digest").digest);
    }
}
