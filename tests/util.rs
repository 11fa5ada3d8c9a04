//! Helpers for driving the built `progscore` binary in a scratch folder.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A scratch folder with a config copied from the one setup.sh generated.
pub struct Dir {
    dir: tempfile::TempDir,
}

impl Default for Dir {
    fn default() -> Self {
        Self::new()
    }
}

impl Dir {
    /// A new folder holding `progscore.toml` (the generated config, with the
    /// store moved into this folder).
    pub fn new() -> Dir {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = std::fs::read_to_string(generated_config())
            .expect("the generated progscore.toml: run scripts/setup.sh");
        let config = config.replace("path = \"progscore.db\"", "path = \"evidence.db\"");
        std::fs::write(dir.path().join("progscore.toml"), config).expect("write config");
        Dir { dir }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file relative to the folder.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.dir.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent");
        }
        std::fs::write(&path, contents).expect("write file");
        path
    }

    /// A `progscore` command run in this folder with its config.
    pub fn command(&self) -> Command {
        let mut command = Command::new(binary());
        command
            .current_dir(self.dir.path())
            .env("PROGSCORE_CONFIG", self.dir.path().join("progscore.toml"))
            .env_remove("RUST_BACKTRACE");
        command
    }

    /// Runs `progscore ARGS` and returns its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().expect("run progscore")
    }
}

/// The config scripts/setup.sh generated at the repository root.
pub fn generated_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../progscore.toml")
}

/// The `progscore` binary cargo built for this workspace.
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("PROGSCORE_BIN") {
        return PathBuf::from(path);
    }
    // tests run from target/<profile>/deps; the binary is one level up.
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let binary = dir.join("progscore");
    assert!(
        binary.exists(),
        "{} not built: run `cargo build -p progscore` (cargo test --workspace builds it)",
        binary.display()
    );
    binary
}

/// stdout as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
