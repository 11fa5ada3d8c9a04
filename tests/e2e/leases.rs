//! Several `progscore score` processes on one store and one batch run each
//! attempt once: one takes the attempt's lease in the store and runs it, the
//! others wait and use the stored observation. Counted through the engine's
//! own event stream, never through progscore's counters. (A lease of a
//! SIGKILLed process, taken over after its expiry, is tested with the scorer
//! library in host/scoring/tests/scoring/leases.rs, where the TTL can be
//! made short.)

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use progscore_e2e::{Dir, result_lines, stderr, stdout, verdict};

const ITEMS: usize = 12;
const PROCESSES: usize = 4;

/// Distinct small programs that each keep a container busy a moment; every
/// third one expects a wrong answer, so both verdicts are checked.
fn batch() -> (String, BTreeMap<String, String>) {
    let mut expected = BTreeMap::new();
    let lines: Vec<String> = (0..ITEMS)
        .map(|i| {
            let id = format!("lease-{i}");
            let wrong = i % 3 == 0;
            let answer = if wrong { i + 1000 } else { i };
            expected.insert(id.clone(), (!wrong).to_string());
            serde_json::json!({
                "id": id,
                "program": format!("import time\ntime.sleep(0.3)\nprint({i})\n"),
                "expectation": {"conditions": [{"program_behaves": {"profile": "python", "cases": [
                    {"invocation": {"args": []},
                     "expected": {"stdout": {"equals": answer.to_string()}}}]}}]},
            })
            .to_string()
        })
        .collect();
    (lines.join("\n"), expected)
}

/// (container id, owner label) pairs in the engine's order, and a signal on each.
type Seen = (Mutex<Vec<(String, String)>>, Condvar);

/// The engine's container creations from `since` on, streamed (the engine
/// keeps only a short backlog).
struct Creations {
    child: std::process::Child,
    seen: Arc<Seen>,
}

impl Creations {
    fn follow(since: SystemTime) -> Creations {
        let since = since.duration_since(UNIX_EPOCH).unwrap() - Duration::from_secs(1);
        let mut child = Command::new("docker")
            .args([
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
        Creations { child, seen }
    }

    /// Every creation up to now: a marker container is created (and
    /// removed), and the stream, which is in the engine's order, is read up
    /// to its creation.
    fn until_now(&self) -> Vec<(String, String)> {
        let created = Command::new("docker")
            .args(["create", "--pull", "never", &python_image(), "true"])
            .output()
            .expect("the docker CLI runs");
        assert!(
            created.status.success(),
            "docker create: {}",
            String::from_utf8_lossy(&created.stderr)
        );
        let marker = String::from_utf8_lossy(&created.stdout).trim().to_string();
        let removed = Command::new("docker")
            .args(["rm", "--force", &marker])
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
fn python_image() -> String {
    let config: toml::Value =
        toml::from_str(&std::fs::read_to_string(progscore_e2e::generated_config()).unwrap())
            .unwrap();
    config["profiles"]["python"]["image"]
        .as_str()
        .expect("the python profile's image")
        .to_string()
}

#[test]
fn four_processes_on_one_store_run_each_attempt_of_a_batch_once() {
    let dir = Dir::new();
    let (batch, expected) = batch();
    dir.write("batch.jsonl", batch);
    // Created (and migrated) before, as a store in use would be; processes
    // opening a new file at once are covered by the store's own tests.
    let init = dir.run(&["scores", "list"]);
    assert_eq!(init.status.code(), Some(0), "{}", stderr(&init));
    let creations = Creations::follow(SystemTime::now());
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            dir.command()
                .args(["score", "batch.jsonl"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start progscore")
        })
        .collect();
    let pids: Vec<u32> = children.iter().map(std::process::Child::id).collect();
    let mut ran: BTreeMap<String, usize> = BTreeMap::new();
    let mut reused = 0;
    for child in children {
        let output = child.wait_with_output().expect("progscore exits");
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let lines = result_lines(&stdout(&output));
        let got: BTreeMap<String, String> = lines
            .iter()
            .map(|line| (line["id"].as_str().unwrap().to_string(), verdict(line)))
            .collect();
        assert_eq!(got, expected, "{}", stderr(&output));
        for line in &lines {
            match line["evidence"].as_str() {
                Some("ran") => {
                    *ran.entry(line["id"].as_str().unwrap().to_string())
                        .or_default() += 1
                }
                Some("stored") => reused += 1,
                other => panic!("evidence {other:?} in {line}"),
            }
        }
    }
    assert_eq!(
        ran,
        expected.keys().map(|id| (id.clone(), 1)).collect(),
        "each attempt must run exactly once across the processes"
    );
    assert_eq!(reused, ITEMS * (PROCESSES - 1));
    let owners: Vec<String> = pids
        .iter()
        .map(|pid| format!("progscore-docker-{pid}-"))
        .collect();
    let ours: Vec<(String, String)> = creations
        .until_now()
        .into_iter()
        .filter(|(_, owner)| owners.iter().any(|prefix| owner.starts_with(prefix)))
        .collect();
    assert_eq!(
        ours.len(),
        ITEMS,
        "containers created by the four processes: {ours:?}"
    );
    let distinct: BTreeSet<&String> = ours.iter().map(|(id, _)| id).collect();
    assert_eq!(distinct.len(), ITEMS);
    // Nothing is left leased once the batches are done.
    let store = rusqlite::Connection::open(dir.path().join("evidence.db")).unwrap();
    let leases: i64 = store
        .query_row("SELECT count(*) FROM leases", [], |row| row.get(0))
        .unwrap();
    assert_eq!(leases, 0);
    let observations: i64 = store
        .query_row("SELECT count(*) FROM observations", [], |row| row.get(0))
        .unwrap();
    assert_eq!(observations, ITEMS as i64);
}
