//! Applying layers to a root filesystem, as a container engine would, without
//! ever writing outside it.
//!
//! Every path in a layer is taken apart into plain components: an absolute
//! path or a `..` refuses the layer. Each parent directory is looked up with
//! `lstat` and must be a real directory (a missing one is created 0755): a
//! symbolic link is never followed, so an entry `a -> /etc` followed by
//! `a/passwd` is refused instead of writing to the host's /etc. The last
//! component is replaced, never written through (files are created with
//! `O_CREAT|O_EXCL|O_NOFOLLOW`). Hard links must name an existing
//! non-directory inside the root, found the same way.
//!
//! The root is a private directory of the cache that nothing else writes
//! while a layer is applied, so checking a parent and then using it is not a
//! race.
//!
//! Whiteouts follow the OCI image spec: `.wh.<name>` removes `<name>` of the
//! layers below, `.wh..wh..opq` empties its directory of everything the
//! layers below put there; neither touches what the same layer adds.
//! Extended attributes (file capabilities among them) are not applied: the
//! sandbox runs programs with no capabilities anyway.

use std::collections::{BTreeMap, HashSet};
use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

use tar::EntryType;

use crate::error::UnpackError;

const WHITEOUT_PREFIX: &[u8] = b".wh.";
const OPAQUE_WHITEOUT: &[u8] = b".wh..wh..opq";

/// The root filesystem being assembled, layer after layer.
pub(crate) struct Rootfs {
    root: PathBuf,
    /// Directories' modification times, set once every layer and mount point
    /// is in place (adding a child changes its directory's time).
    dir_times: BTreeMap<PathBuf, u64>,
}

impl Rootfs {
    /// `root` must exist and be an empty directory owned by this process.
    pub(crate) fn new(root: impl Into<PathBuf>) -> Rootfs {
        Rootfs {
            root: root.into(),
            dir_times: BTreeMap::new(),
        }
    }

    /// Applies one uncompressed layer (a tar stream) on top of what is there.
    pub(crate) fn apply_layer(&mut self, reader: impl Read) -> Result<(), UnpackError> {
        let mut archive = tar::Archive::new(reader);
        // Paths added by this layer: whiteouts in it leave them alone.
        let mut this_layer: HashSet<PathBuf> = HashSet::new();
        let entries = archive
            .entries()
            .map_err(|source| UnpackError::Archive { cause: source })?;
        for entry in entries {
            let mut entry = entry.map_err(|source| UnpackError::Archive { cause: source })?;
            let kind = entry.header().entry_type();
            if matches!(kind, EntryType::XGlobalHeader | EntryType::XHeader) {
                continue;
            }
            let raw = entry
                .path()
                .map_err(|source| UnpackError::Archive { cause: source })?
                .into_owned();
            let name = raw.to_string_lossy().into_owned();
            let rel = plain_path(&raw).map_err(|reason| unsafe_entry(&name, reason))?;

            if let Some(file_name) = rel.file_name()
                && file_name.as_bytes().starts_with(WHITEOUT_PREFIX)
            {
                self.whiteout(&rel, file_name, &name, &this_layer)?;
                continue;
            }
            self.apply_entry(&mut entry, kind, &rel, &name, &mut this_layer)?;
        }
        Ok(())
    }

    /// Creates the mount points: missing parents 0755, files empty 0644,
    /// directories 0755, all owned by root. What exists with the right type
    /// is left alone.
    pub(crate) fn create_mount_point(&mut self, path: &Path, is_file: bool) -> Result<(), String> {
        let rel: PathBuf = crate::options::relative_components(path).collect();
        let parent = rel.parent().unwrap_or(Path::new(""));
        let parent_path = self
            .walk_parents(parent, true, &mut HashSet::new())
            .map_err(|e| e.to_string())?;
        let Some(name) = rel.file_name() else {
            return Err("is the root".into());
        };
        let target = parent_path.join(name);
        match fs::symlink_metadata(&target) {
            Ok(meta) if is_file && meta.file_type().is_file() => Ok(()),
            Ok(meta) if !is_file && meta.file_type().is_dir() => Ok(()),
            Ok(meta) if meta.file_type().is_symlink() => {
                Err("is a symbolic link in the image; a mount point must be a plain path".into())
            }
            Ok(_) => Err(format!(
                "exists in the image, but not as a {}",
                if is_file { "file" } else { "directory" }
            )),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let created = if is_file {
                    OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o644)
                        .custom_flags(libc::O_NOFOLLOW)
                        .open(&target)
                        .and_then(|f| f.set_permissions(fs::Permissions::from_mode(0o644)))
                } else {
                    DirBuilder::new()
                        .mode(0o755)
                        .create(&target)
                        .and_then(|()| {
                            fs::set_permissions(&target, fs::Permissions::from_mode(0o755))
                        })
                };
                created.map_err(|e| format!("cannot create {}: {e}", target.display()))
            }
            Err(e) => Err(format!("cannot inspect {}: {e}", target.display())),
        }
    }

    /// Sets the directories' modification times recorded from the layers
    /// (only where the path is still a directory reached without symlinks).
    pub(crate) fn finish(self) -> Result<(), UnpackError> {
        for (rel, mtime) in &self.dir_times {
            // Replaced since by something else (or now below a link): skipped.
            let Ok(Some(path)) = self.existing(rel) else {
                continue;
            };
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue;
            };
            if !meta.is_dir() {
                continue;
            }
            let dir = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
                .open(&path)
                .map_err(|source| io_error("open", &path, source))?;
            dir.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(*mtime))
                .map_err(|source| io_error("set the time of", &path, source))?;
        }
        Ok(())
    }

    fn apply_entry(
        &mut self,
        entry: &mut tar::Entry<'_, impl Read>,
        kind: EntryType,
        rel: &Path,
        name: &str,
        this_layer: &mut HashSet<PathBuf>,
    ) -> Result<(), UnpackError> {
        let header = entry.header();
        let mode = header
            .mode()
            .map_err(|source| UnpackError::Archive { cause: source })?
            & 0o7777;
        let uid = id(header.uid(), name)?;
        let gid = id(header.gid(), name)?;
        let mtime = header.mtime().unwrap_or(0);
        let major = header.device_major().ok().flatten().unwrap_or(0);
        let minor = header.device_minor().ok().flatten().unwrap_or(0);

        // The root itself (`./`): only its metadata can change.
        let Some(file_name) = rel.file_name() else {
            if kind != EntryType::Directory {
                return Err(unsafe_entry(
                    name,
                    "names the root, which must be a directory",
                ));
            }
            let root = self.root.clone();
            set_owner_mode(&root, uid, gid, mode)?;
            self.dir_times.insert(PathBuf::new(), mtime);
            return Ok(());
        };
        let parent = self
            .walk_parents(rel.parent().unwrap_or(Path::new("")), true, this_layer)
            .map_err(|e| e.for_entry(name))?;
        let path = parent.join(file_name);
        let existing = match fs::symlink_metadata(&path) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(source) => return Err(io_error("inspect", &path, source)),
        };

        if kind == EntryType::Directory {
            match existing {
                Some(meta) if meta.is_dir() => {}
                Some(_) => {
                    remove(&path)?;
                    make_dir(&path)?;
                }
                None => make_dir(&path)?,
            }
            set_owner_mode(&path, uid, gid, mode)?;
            self.dir_times.insert(rel.to_path_buf(), mtime);
            this_layer.insert(rel.to_path_buf());
            return Ok(());
        }

        // A hard link's target is checked before anything is replaced.
        let link_source = if kind == EntryType::Link {
            let target = entry
                .link_name()
                .map_err(|source| UnpackError::Archive { cause: source })?
                .ok_or_else(|| unsafe_entry(name, "is a hard link without a target"))?;
            let target_rel = plain_path(&target)
                .map_err(|reason| unsafe_entry(name, &format!("hard link target {}", reason)))?;
            let source = self
                .existing(&target_rel)
                .map_err(|e| e.for_entry(name))?
                .ok_or_else(|| {
                    unsafe_entry(
                        name,
                        &format!("hard link target `{}` does not exist", target.display()),
                    )
                })?;
            match fs::symlink_metadata(&source) {
                Ok(meta) if !meta.is_dir() => Some(source),
                _ => {
                    return Err(unsafe_entry(
                        name,
                        &format!("hard link target `{}` is not a file", target.display()),
                    ));
                }
            }
        } else {
            None
        };

        if existing.is_some() {
            if link_source.as_deref() == Some(path.as_path()) {
                // A link to itself: nothing to do.
                this_layer.insert(rel.to_path_buf());
                return Ok(());
            }
            remove(&path)?;
        }

        match kind {
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                let mut file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&path)
                    .map_err(|source| io_error("create", &path, source))?;
                copy_contents(entry, &mut file, &path)?;
                // Ownership first: chown clears the set-id bits that chmod sets.
                std::os::unix::fs::fchown(&file, Some(uid), Some(gid))
                    .map_err(|source| io_error("change the owner of", &path, source))?;
                file.set_permissions(fs::Permissions::from_mode(mode))
                    .map_err(|source| io_error("change the mode of", &path, source))?;
                file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(mtime))
                    .map_err(|source| io_error("set the time of", &path, source))?;
            }
            EntryType::Symlink => {
                let target = entry
                    .link_name()
                    .map_err(|source| UnpackError::Archive { cause: source })?
                    .ok_or_else(|| unsafe_entry(name, "is a symbolic link without a target"))?;
                // Whatever it points to is never followed while unpacking; at
                // run time the runtime resolves it inside the container.
                std::os::unix::fs::symlink(&target, &path)
                    .map_err(|source| io_error("create the symbolic link", &path, source))?;
                std::os::unix::fs::lchown(&path, Some(uid), Some(gid))
                    .map_err(|source| io_error("change the owner of", &path, source))?;
            }
            EntryType::Link => {
                if let Some(source) = link_source {
                    fs::hard_link(&source, &path)
                        .map_err(|e| io_error("create the hard link", &path, e))?;
                }
            }
            EntryType::Char | EntryType::Block | EntryType::Fifo => {
                let file_type = match kind {
                    EntryType::Char => libc::S_IFCHR,
                    EntryType::Block => libc::S_IFBLK,
                    _ => libc::S_IFIFO,
                };
                mknod(&path, file_type, libc::makedev(major, minor))?;
                set_owner_mode(&path, uid, gid, mode)?;
            }
            other => {
                return Err(UnpackError::Unsupported {
                    entry: name.to_owned(),
                    kind: format!("{other:?}"),
                });
            }
        }
        this_layer.insert(rel.to_path_buf());
        Ok(())
    }

    fn whiteout(
        &mut self,
        rel: &Path,
        file_name: &OsStr,
        name: &str,
        this_layer: &HashSet<PathBuf>,
    ) -> Result<(), UnpackError> {
        let parent_rel = rel.parent().unwrap_or(Path::new(""));
        // Nothing below to hide when the directory is not there.
        let Some(parent) = self.existing(parent_rel).map_err(|e| e.for_entry(name))? else {
            return Ok(());
        };
        if !fs::symlink_metadata(&parent).is_ok_and(|m| m.is_dir()) {
            return Ok(());
        }
        if file_name.as_bytes() == OPAQUE_WHITEOUT {
            return clear_lower(&parent, parent_rel, this_layer);
        }
        let Some(hidden) = file_name.as_bytes().strip_prefix(WHITEOUT_PREFIX) else {
            return Ok(());
        };
        // `.wh..wh.*` other than the opaque marker are aufs bookkeeping.
        if hidden.starts_with(WHITEOUT_PREFIX) || hidden.is_empty() {
            return Ok(());
        }
        let hidden = OsStr::from_bytes(hidden);
        let hidden_rel = parent_rel.join(hidden);
        if this_layer.contains(&hidden_rel) {
            return Ok(());
        }
        let path = parent.join(hidden);
        match fs::symlink_metadata(&path) {
            Ok(_) => {
                remove(&path)?;
                self.dir_times.remove(&hidden_rel);
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(io_error("inspect", &path, source)),
        }
    }

    /// The path of `rel` inside the root when each parent is a real
    /// directory: `Ok(None)` when something is missing, an error when a
    /// parent is a symbolic link or not a directory.
    fn existing(&self, rel: &Path) -> Result<Option<PathBuf>, Refusal> {
        let Some(name) = rel.file_name() else {
            return Ok(Some(self.root.clone()));
        };
        let parent = match self.walk_parents(
            rel.parent().unwrap_or(Path::new("")),
            false,
            &mut HashSet::new(),
        ) {
            Ok(parent) => parent,
            Err(Refusal::Missing) => return Ok(None),
            Err(other) => return Err(other),
        };
        let path = parent.join(name);
        Ok(fs::symlink_metadata(&path).is_ok().then_some(path))
    }

    /// Walks `dirs` (relative, plain) from the root without following any
    /// symbolic link, creating missing directories (0755, root-owned) when
    /// `create` is set, and returns the full path.
    fn walk_parents(
        &self,
        dirs: &Path,
        create: bool,
        this_layer: &mut HashSet<PathBuf>,
    ) -> Result<PathBuf, Refusal> {
        let mut path = self.root.clone();
        let mut rel = PathBuf::new();
        for part in dirs.components() {
            let Component::Normal(part) = part else {
                return Err(Refusal::Unsafe("is not a plain relative path".into()));
            };
            path.push(part);
            rel.push(part);
            match fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_dir() => {}
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(Refusal::Unsafe(format!(
                        "its parent `{}` is a symbolic link, which is never followed while \
                         unpacking",
                        rel.display()
                    )));
                }
                Ok(_) => {
                    return Err(Refusal::Unsafe(format!(
                        "its parent `{}` is not a directory",
                        rel.display()
                    )));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if !create {
                        return Err(Refusal::Missing);
                    }
                    make_dir(&path).map_err(Refusal::Io)?;
                    this_layer.insert(rel.clone());
                }
                Err(source) => return Err(Refusal::Io(io_error("inspect", &path, source))),
            }
        }
        Ok(path)
    }
}

/// Why a path could not be reached.
#[derive(Debug)]
enum Refusal {
    Missing,
    Unsafe(String),
    Io(UnpackError),
}

impl Refusal {
    fn for_entry(self, name: &str) -> UnpackError {
        match self {
            Refusal::Missing => unsafe_entry(name, "a parent directory is missing"),
            Refusal::Unsafe(reason) => unsafe_entry(name, &reason),
            Refusal::Io(e) => e,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Missing => f.write_str("a parent directory is missing"),
            Refusal::Unsafe(reason) => f.write_str(reason),
            Refusal::Io(e) => write!(f, "{e}"),
        }
    }
}

/// The entry's path as plain relative components: `./` and repeated slashes
/// are dropped; an absolute path or `..` is refused.
fn plain_path(raw: &Path) -> Result<PathBuf, &'static str> {
    let mut rel = PathBuf::new();
    for component in raw.components() {
        match component {
            Component::Normal(part) => rel.push(part),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err("is an absolute path (layers hold paths relative to the root)");
            }
            Component::ParentDir => return Err("contains `..`, which could leave the root"),
        }
    }
    Ok(rel)
}

/// Removes everything under `dir` that the layers below put there: what this
/// layer added stays, and directories it shares with the layers below are
/// cleared the same way.
fn clear_lower(
    dir: &Path,
    dir_rel: &Path,
    this_layer: &HashSet<PathBuf>,
) -> Result<(), UnpackError> {
    let children = fs::read_dir(dir).map_err(|source| io_error("read", dir, source))?;
    for child in children {
        let child = child.map_err(|source| io_error("read", dir, source))?;
        let name: OsString = child.file_name();
        let rel = dir_rel.join(&name);
        let path = dir.join(&name);
        if !this_layer.contains(&rel) {
            remove(&path)?;
        } else if fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
            clear_lower(&path, &rel, this_layer)?;
        }
    }
    Ok(())
}

/// Copies an entry's contents, telling a bad archive (read) from a full or
/// failing disk (write).
fn copy_contents(entry: &mut impl Read, file: &mut File, path: &Path) -> Result<(), UnpackError> {
    let mut buffer = vec![0u8; 128 * 1024];
    loop {
        let n = match entry.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => return Err(UnpackError::Archive { cause: source }),
        };
        file.write_all(&buffer[..n])
            .map_err(|source| io_error("write", path, source))?;
    }
}

fn remove(path: &Path) -> Result<(), UnpackError> {
    let meta = fs::symlink_metadata(path).map_err(|source| io_error("inspect", path, source))?;
    // remove_dir_all does not follow symbolic links.
    let removed = if meta.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    };
    removed.map_err(|source| io_error("remove", path, source))
}

fn make_dir(path: &Path) -> Result<(), UnpackError> {
    DirBuilder::new()
        .mode(0o755)
        .create(path)
        .and_then(|()| fs::set_permissions(path, fs::Permissions::from_mode(0o755)))
        .map_err(|source| io_error("create the directory", path, source))
}

/// Owner, then mode, of something that is not a symbolic link.
fn set_owner_mode(path: &Path, uid: u32, gid: u32, mode: u32) -> Result<(), UnpackError> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
        .map_err(|source| io_error("change the owner of", path, source))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|source| io_error("change the mode of", path, source))
}

fn mknod(path: &Path, file_type: libc::mode_t, dev: libc::dev_t) -> Result<(), UnpackError> {
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        io_error(
            "create the device",
            path,
            io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"),
        )
    })?;
    // SAFETY: c_path is a valid NUL-terminated string that outlives the call.
    let rc = unsafe { libc::mknod(c_path.as_ptr(), file_type | 0o600, dev) };
    if rc != 0 {
        return Err(io_error(
            "create the device",
            path,
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

fn id(value: io::Result<u64>, name: &str) -> Result<u32, UnpackError> {
    let value = value.map_err(|source| UnpackError::Archive { cause: source })?;
    u32::try_from(value).map_err(|_| unsafe_entry(name, "has an owner id beyond 32 bits"))
}

fn unsafe_entry(name: &str, reason: &str) -> UnpackError {
    UnpackError::Unsafe {
        entry: name.to_owned(),
        reason: reason.to_owned(),
    }
}

fn io_error(action: &'static str, path: &Path, source: io::Error) -> UnpackError {
    UnpackError::Io {
        action,
        path: path.to_owned(),
        cause: source,
    }
}

/// Opens a file of a finished tree for reading without following a final
/// symbolic link (used by the tree digest).
pub(crate) fn open_no_follow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar(entries: &[(&str, EntryType, &str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, kind, link, contents) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_path(name).expect("path");
            header.set_entry_type(*kind);
            header.set_mode(0o644);
            header.set_uid(0);
            header.set_gid(0);
            header.set_mtime(0);
            header.set_size(contents.len() as u64);
            if !link.is_empty() {
                header.set_link_name_literal(link).expect("link");
            }
            header.set_cksum();
            builder.append(&header, *contents).expect("append");
        }
        builder.into_inner().expect("tar")
    }

    #[test]
    fn a_file_over_a_symbolic_link_replaces_the_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("victim");
        fs::write(&victim, b"victim").expect("victim");
        let root = dir.path().join("root");
        fs::create_dir(&root).expect("root");
        let mut rootfs = Rootfs::new(&root);
        let target = victim.to_str().expect("utf-8");
        rootfs
            .apply_layer(&tar(&[("f", EntryType::Symlink, target, b"")])[..])
            .expect("lower");
        rootfs
            .apply_layer(&tar(&[("f", EntryType::Regular, "", b"mine")])[..])
            .expect("upper");
        assert_eq!(fs::read(&victim).expect("victim"), b"victim");
        let f = fs::symlink_metadata(root.join("f")).expect("f");
        assert!(f.is_file());
        assert_eq!(fs::read(root.join("f")).expect("f"), b"mine");
    }

    #[test]
    fn whiteouts_hide_only_the_layers_below() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        fs::create_dir(&root).expect("root");
        let mut rootfs = Rootfs::new(&root);
        rootfs
            .apply_layer(&tar(&[("a", EntryType::Regular, "", b"lower")])[..])
            .expect("lower");
        // The same layer adds `b` and whites it out: `b` stays; `a` goes.
        rootfs
            .apply_layer(
                &tar(&[
                    ("b", EntryType::Regular, "", b"upper"),
                    (".wh.b", EntryType::Regular, "", b""),
                    (".wh.a", EntryType::Regular, "", b""),
                ])[..],
            )
            .expect("upper");
        assert!(!root.join("a").exists());
        assert_eq!(fs::read(root.join("b")).expect("b"), b"upper");
        assert!(!root.join(".wh.b").exists());
    }
}
