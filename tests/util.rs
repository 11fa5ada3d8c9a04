//! Helpers for driving the built `progscore` binary in a scratch folder.

pub mod served;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The engine scripts/setup.sh starts.
pub const LOCAL_ENGINE: &str = "unix:///var/run/docker.sock";

/// The second engine scripts/second-engine.sh starts beside it.
pub fn second_engine() -> String {
    std::env::var("PROGSCORE_SECOND_ENGINE")
        .unwrap_or_else(|_| "unix:///run/docker-second.sock".into())
}

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
        let config = progscore_test_kit::generated_config_text();
        let config = progscore_test_kit::replace_required(
            &config,
            "path = \"progscore.db\"",
            "path = \"evidence.db\"",
        );
        std::fs::write(dir.path().join("progscore.toml"), config).expect("write config");
        std::fs::create_dir(dir.path().join("tmp")).expect("private tmp");
        Dir { dir }
    }

    /// Rewrites the config (e.g. to tighten a limit). An edit that changes
    /// nothing (a `replace` whose target text is no longer in the generated
    /// config) fails the test: it would silently stop testing its point.
    pub fn edit_config(&self, edit: impl FnOnce(String) -> String) {
        let path = self.dir.path().join("progscore.toml");
        let text = std::fs::read_to_string(&path).expect("read config");
        let edited = edit(text.clone());
        assert_ne!(
            edited, text,
            "edit_config changed nothing: its target text is not in the generated config"
        );
        std::fs::write(&path, edited).expect("write config");
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

/// The config scripts/setup.sh generated.
pub fn generated_config() -> PathBuf {
    progscore_test_kit::generated_config_path()
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

/// (container id, owner label) pairs in the engine's order, and a signal on each.
type Seen = (Mutex<Vec<(String, String)>>, Condvar);

/// The engine's container creations from `since` on, streamed (the engine
/// keeps only a short backlog).
pub struct Creations {
    engine: String,
    child: std::process::Child,
    seen: Arc<Seen>,
}

impl Creations {
    /// Follows the engine at `engine` (`unix:///var/run/docker.sock`).
    pub fn follow(engine: &str, since: SystemTime) -> Creations {
        let since = since.duration_since(UNIX_EPOCH).unwrap() - Duration::from_secs(1);
        let mut child = Command::new("docker")
            .args([
                "-H",
                engine,
                "events",
                "--since",
                &since.as_secs().to_string(),
                "--filter",
                "type=container",
                "--filter",
                "event=create",
                "--format",
                "{{.Actor.ID}} {{index .Actor.Attributes \"progscore.owner\"}}",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("the docker CLI runs");
        let stdout = child.stdout.take().expect("piped stdout");
        let seen: Arc<Seen> = Arc::default();
        let sink = seen.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let (id, owner) = line.split_once(' ').unwrap_or((&line, ""));
                sink.0
                    .lock()
                    .unwrap()
                    .push((id.to_string(), owner.trim().to_string()));
                sink.1.notify_all();
            }
        });
        Creations {
            engine: engine.to_string(),
            child,
            seen,
        }
    }

    /// Every creation up to now: a marker container is created (and
    /// removed), and the stream, which is in the engine's order, is read up
    /// to its creation.
    pub fn until_now(&self) -> Vec<(String, String)> {
        let created = Command::new("docker")
            .args([
                "-H",
                &self.engine,
                "create",
                "--pull",
                "never",
                &python_image(),
                "true",
            ])
            .output()
            .expect("the docker CLI runs");
        assert!(
            created.status.success(),
            "docker create: {}",
            String::from_utf8_lossy(&created.stderr)
        );
        let marker = String::from_utf8_lossy(&created.stdout).trim().to_string();
        let removed = Command::new("docker")
            .args(["-H", &self.engine, "rm", "--force", &marker])
            .output()
            .expect("the docker CLI runs");
        assert!(removed.status.success());
        let (events, changed) = &*self.seen;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut events = events.lock().unwrap();
        loop {
            if let Some(at) = events.iter().position(|(id, _)| *id == marker) {
                return events[..at].to_vec();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the marker's creation never came"
            );
            events = changed
                .wait_timeout(events, Duration::from_secs(1))
                .unwrap()
                .0;
        }
    }
}

impl Drop for Creations {
    fn drop(&mut self) {
        // Only the `docker events` process this helper started.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `python` profile's image, as the generated config pins it.
pub fn python_image() -> String {
    let config: toml::Value =
        toml::from_str(&std::fs::read_to_string(generated_config()).unwrap()).unwrap();
    config["profiles"]["python"]["image"]
        .as_str()
        .expect("the python profile's image")
        .to_string()
}
