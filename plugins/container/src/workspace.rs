//! The private host folder that holds the program while it runs, and the
//! build folder of profiles that compile it.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use progscore_sandbox::{CompileEvent, InvocationEvent, Outcome, RuntimeProfile, SandboxError};
use sha2::{Digest, Sha256};

/// A 0700 folder holding the program file (0444). The container sees only
/// the file, bind-mounted read-only, so the folder can stay private to root.
pub struct Workspace {
    dir: Option<tempfile::TempDir>,
    program: PathBuf,
}

impl Workspace {
    /// A workspace in `root`, the client's private owner folder.
    pub fn create(root: &Path, program: &[u8]) -> std::io::Result<Workspace> {
        let dir = tempfile::Builder::new()
            .prefix("progscore-ws-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(root)?;
        let program_path = dir.path().join("program");
        // No fsync: the container reads the file through the page cache at
        // once, and a workspace is worthless after a crash anyway.
        let mut file = std::fs::File::create(&program_path)?;
        file.write_all(program)?;
        drop(file);
        // World-readable so the container's non-root user can read it through
        // the bind mount; nobody can write it.
        std::fs::set_permissions(&program_path, std::fs::Permissions::from_mode(0o444))?;
        Ok(Workspace {
            dir: Some(dir),
            program: program_path,
        })
    }

    pub fn program_path(&self) -> &Path {
        &self.program
    }

    /// A fresh, empty build folder owned by `uid:gid` (the user the compile
    /// runs as), private to it: the compile's container gets it writable,
    /// the cases' containers read-only.
    pub fn create_build_dir(&self, uid: u32, gid: u32) -> std::io::Result<PathBuf> {
        let Some(dir) = &self.dir else {
            return Err(std::io::Error::other("the workspace was removed"));
        };
        let build = dir.path().join("build");
        std::fs::create_dir(&build)?;
        std::os::unix::fs::chown(&build, Some(uid), Some(gid))?;
        std::fs::set_permissions(&build, std::fs::Permissions::from_mode(0o700))?;
        Ok(build)
    }

    /// Removes the folder, reporting failure instead of swallowing it.
    pub fn remove(mut self) -> Result<(), String> {
        match self.dir.take() {
            Some(dir) => {
                let path = dir.path().display().to_string();
                dir.close()
                    .map_err(|e| format!("failed to remove workspace {path}: {e}"))
            }
            None => Ok(()),
        }
    }
}

impl Workspace {
    /// The build folder for `profile`'s compile, owned by the user it runs
    /// as; `None` when the profile compiles nothing.
    pub fn build_dir_for(&self, profile: &RuntimeProfile) -> Result<Option<PathBuf>, SandboxError> {
        if profile.compile.is_none() {
            return Ok(None);
        }
        let (uid, gid) = profile.user_ids();
        self.create_build_dir(uid, gid)
            .map(Some)
            .map_err(|e| SandboxError::Setup {
                message: format!("cannot create the build folder: {e}"),
            })
    }
}

/// The compile's record from its container's event: with the build folder's
/// hash when the compiler exited 0 (a folder that cannot be read makes the
/// compile a sandbox error: nothing is known about the program then).
pub fn compile_event(mut event: InvocationEvent, build_dir: &Path) -> CompileEvent {
    let mut artifact_sha256 = None;
    if matches!(event.outcome, Outcome::Exited { exit_code: 0 }) {
        match tree_sha256(build_dir) {
            Ok(sha256) => artifact_sha256 = Some(sha256),
            Err(e) => {
                event.outcome = Outcome::SandboxError {
                    message: format!("cannot read the build folder {}: {e}", build_dir.display()),
                }
            }
        }
    }
    CompileEvent {
        event,
        artifact_sha256,
    }
}

/// sha256 of a folder's contents: every entry, in path order, by relative
/// path, kind, permission bits and bytes (a symlink by its target). Two
/// builds hash equal exactly when they would run the same.
pub fn tree_sha256(root: &Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(root.join(&relative))?
            .map(|entry| entry.map(|e| relative.join(e.file_name())))
            .collect::<Result<_, _>>()?;
        entries.sort();
        // Visited in order: children pushed in reverse so the first pops first.
        let mut folders = Vec::new();
        for path in entries {
            let full = root.join(&path);
            let meta = std::fs::symlink_metadata(&full)?;
            let name = path.as_os_str().as_encoded_bytes();
            let mode = meta.mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&full)?;
                hasher.update(format!("l {mode:o} {}\0", name.len()));
                hasher.update(name);
                hasher.update(target.as_os_str().as_encoded_bytes());
            } else if meta.is_dir() {
                hasher.update(format!("d {mode:o} {}\0", name.len()));
                hasher.update(name);
                folders.push(path);
            } else if meta.is_file() {
                hasher.update(format!("f {mode:o} {} {}\0", name.len(), meta.len()));
                hasher.update(name);
                let mut file = std::fs::File::open(&full)?;
                std::io::copy(&mut file, &mut hasher)?;
            } else {
                // Sockets, fifos, devices: named, never read.
                hasher.update(format!("o {mode:o} {}\0", name.len()));
                hasher.update(name);
            }
        }
        pending.extend(folders.into_iter().rev());
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_hash_sees_bytes_names_modes_and_nesting() {
        let a = tempfile::tempdir().unwrap();
        std::fs::create_dir(a.path().join("lib")).unwrap();
        std::fs::write(a.path().join("main"), b"\x7fELF...").unwrap();
        std::fs::write(a.path().join("lib/x.o"), b"object").unwrap();
        let first = tree_sha256(a.path()).unwrap();
        assert_eq!(first, tree_sha256(a.path()).unwrap());
        std::fs::write(a.path().join("lib/x.o"), b"objecT").unwrap();
        let changed_bytes = tree_sha256(a.path()).unwrap();
        assert_ne!(first, changed_bytes);
        std::fs::set_permissions(
            a.path().join("main"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert_ne!(changed_bytes, tree_sha256(a.path()).unwrap());
        let empty = tempfile::tempdir().unwrap();
        assert_ne!(tree_sha256(empty.path()).unwrap(), first);
    }
}
