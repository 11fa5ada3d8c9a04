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
        std::fs::create_dir(dir.path().join("tmp")).expect("private tmp");
        Dir { dir }
    }

    /// Rewrites the config (e.g. to tighten a limit).
    pub fn edit_config(&self, edit: impl FnOnce(String) -> String) {
        let path = self.dir.path().join("progscore.toml");
        let text = std::fs::read_to_string(&path).expect("read config");
        std::fs::write(&path, edit(text)).expect("write config");
    }

    /// The folder progscore processes of this `Dir` keep their owner locks
    /// and workspaces in: their temporary folder is private to the `Dir`, so
    /// what they leave behind can be seen.
    pub fn owner_root(&self) -> PathBuf {
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        self.dir.path().join("tmp").join(format!("progscore-{uid}"))
    }

    /// Entries left in [`Self::owner_root`] (lock files, owner folders).
    pub fn owner_leftovers(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.owner_root())
            .map(|dir| dir.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
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
            .env("TMPDIR", self.dir.path().join("tmp"))
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

/// Result lines (JSON) of a `score` output.
pub fn result_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// `true`, `false` or `undetermined`, from a result line.
pub fn verdict(line: &serde_json::Value) -> String {
    match (&line["status"], &line["value"]) {
        (s, serde_json::Value::Bool(b)) if s == "complete" => b.to_string(),
        (s, serde_json::Value::Null) if s == "undetermined" => "undetermined".into(),
        other => panic!("bad status/value {other:?} in {line}"),
    }
}

/// stdout as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// An `expected-verdicts.txt` (`ID VERDICT` per line, `#` comments) as a map.
pub fn documented_verdicts(path: &Path) -> std::collections::BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (id, v) = l.split_once(' ').expect("`ID VERDICT`");
            (id.to_string(), v.to_string())
        })
        .collect()
}
