//! The private folder of one `execute` call.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use progscore_sandbox::{ProgramFiles, SandboxError};

use crate::artifact;

/// A private folder per `execute` call: `program/main.py` (and the
/// program's files beside it) and one scratch
/// folder per invocation. Removed by [`Workspace::close`], or by `Drop` when the
/// call is cancelled.
pub(crate) struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    pub(crate) fn create(
        root: &Path,
        program: &[u8],
        files: &ProgramFiles,
    ) -> Result<Self, SandboxError> {
        let setup = |what: &str, e: std::io::Error| SandboxError::Setup {
            message: format!("could not {what} in {}: {e}", root.display()),
        };
        // TempDir folders are 0700: other users cannot read or swap the program.
        let dir = tempfile::Builder::new()
            .prefix("progscore-wasi-")
            .tempdir_in(root)
            .map_err(|e| setup("create a workspace", e))?;
        let program_dir = dir.path().join("program");
        artifact::create_private_dir(&program_dir)
            .map_err(|e| setup("create the program folder", e))?;
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o444)
            .open(program_dir.join("main.py"))
            .map_err(|e| setup("write the program", e))?;
        file.write_all(program)
            .map_err(|e| setup("write the program", e))?;
        // The program's files beside it (the folder is preopened read-only,
        // so the guest cannot change them; the folders stay the owner's, so
        // the workspace can be removed without privileges).
        for (path, bytes) in files.iter() {
            let target = program_dir.join(path);
            if let Some(parent) = target.parent() {
                fs::create_dir_all(parent).map_err(|e| setup("create a file's folder", e))?;
            }
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o444)
                .open(&target)
                .and_then(|mut file| file.write_all(bytes))
                .map_err(|e| setup(&format!("write the file `{path}`"), e))?;
        }
        Ok(Workspace { dir })
    }

    pub(crate) fn program_dir(&self) -> PathBuf {
        self.dir.path().join("program")
    }

    pub(crate) fn scratch(&self, index: usize) -> std::io::Result<PathBuf> {
        let dir = self.dir.path().join(format!("scratch-{index}"));
        artifact::create_private_dir(&dir)?;
        Ok(dir)
    }

    /// An empty folder, made once, for a traced guest's `/` (see
    /// [`crate::guest::TraceRequest`]).
    pub(crate) fn empty_root(&self) -> std::io::Result<PathBuf> {
        let dir = self.dir.path().join("root");
        if !dir.is_dir() {
            artifact::create_private_dir(&dir)?;
        }
        Ok(dir)
    }

    pub(crate) fn close(self) -> Result<(), String> {
        let path = self.dir.path().to_path_buf();
        self.dir
            .close()
            .map_err(|e| format!("could not remove the workspace {}: {e}", path.display()))
    }
}
