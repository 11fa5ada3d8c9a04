//! The private host folder that holds the program while it runs.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

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
