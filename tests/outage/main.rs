//! The real Docker engine stopped in the middle of a batch.
//!
//! - It comes back: the batch waits for it and completes every item, none of
//!   them `false` because of the outage, and nothing from the outage is kept
//!   as reusable evidence.
//! - It stays away past the outage wait: the batch stops with one clear
//!   message and exit status 3, nothing from the outage is stored, and the
//!   same command run again once the engine is back completes the batch
//!   without running any finished item twice.
//!
//! Its own test binary, because it stops the engine every other test uses:
//! cargo runs test binaries one after another.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use progscore_e2e::{Dir, result_lines, stderr, verdict};

const DOCKERD_LOG: &str = "/var/log/progscore-dockerd.log";

fn engine_answers() -> bool {
    Command::new("docker")
        .args(["info", "--format", "{{.ID}}"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Stops dockerd (as `systemctl stop docker` would: SIGTERM) and waits until
/// it no longer answers. Starts it again when dropped, however the test ends.
struct EngineStop;

impl EngineStop {
    fn now() -> EngineStop {
        let pid = std::fs::read_to_string("/var/run/docker.pid").expect("dockerd's pid file");
        let pid: i32 = pid.trim().parse().expect("a pid");
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let until = Instant::now() + Duration::from_secs(60);
        while engine_answers() {
            assert!(Instant::now() < until, "dockerd did not stop");
            std::thread::sleep(Duration::from_millis(100));
        }
        EngineStop
    }
}

impl Drop for EngineStop {
    fn drop(&mut self) {
        start_engine();
    }
}

/// Starts dockerd as scripts/setup.sh does, and waits until it answers.
fn start_engine() {
    if engine_answers() {
        return;
    }
    Command::new("sh")
        .args([
            "-c",
            &format!("setsid nohup /usr/sbin/dockerd >>{DOCKERD_LOG} 2>&1 </dev/null &"),
        ])
        .status()
        .expect("start dockerd");
    let until = Instant::now() + Duration::from_secs(60);
    while !engine_answers() {
        assert!(
            Instant::now() < until,
            "dockerd did not come back; see {DOCKERD_LOG}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn batch(items: usize) -> String {
    (0..items)
        .map(|i| {
            serde_json::json!({
                "id": format!("item-{i}"),
                "program": format!("import time\n# {i}\ntime.sleep(0.3)\nprint({i} * {i})\n"),
                "expectation": {"conditions": [{"program_behaves": {"profile": "python", "cases": [
                    {"invocation": {"args": []},
                     "expected": {"stdout": {"equals": (i * i).to_string()}}}]}}]},
            })
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn start_batch(dir: &Dir, out: &str) -> Child {
    dir.command()
        .args(["score", "batch.jsonl", "--jobs", "4", "--out", out])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start progscore")
}

/// Waits until `out` holds at least `lines` result lines.
fn wait_for_results(dir: &Dir, out: &str, lines: usize) {
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let done = std::fs::read_to_string(dir.path().join(out))
            .map(|text| text.lines().count())
            .unwrap_or(0);
        if done >= lines {
            return;
        }
        assert!(
            Instant::now() < until,
            "only {done} results after two minutes"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// No observation kept as an attempt's reusable evidence is unproven, and
/// none of the outage's faults was stored at all.
fn nothing_from_the_outage_is_stored(dir: &Dir) {
    let store = rusqlite::Connection::open(dir.path().join("evidence.db")).expect("open store");
    let runs: Vec<(String, String)> = store
        .prepare("SELECT id, run FROM observations")
        .expect("query")
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("rows")
        .map(|row| row.expect("row"))
        .collect();
    for (id, run) in runs {
        assert!(
            !run.contains("\"sandbox_error\"") && !run.contains("\"not_run\""),
            "{id} stored a fault: {run}"
        );
    }
}

fn owned_containers_left() -> usize {
    let output = Command::new("docker")
        .args(["ps", "-aq", "--filter", "label=progscore.owner"])
        .output()
        .expect("docker ps");
    String::from_utf8_lossy(&output.stdout).lines().count()
}

#[test]
fn the_engine_stopped_mid_batch() {
    // One scenario after the other: both stop the one engine.
    engine_comes_back_and_the_batch_completes();
    engine_stays_away_and_a_rerun_completes();
}

fn engine_comes_back_and_the_batch_completes() {
    let dir = Dir::new();
    dir.write("batch.jsonl", batch(40));
    let child = start_batch(&dir, "results.jsonl");
    wait_for_results(&dir, "results.jsonl", 6);
    let stop = EngineStop::now();
    std::thread::sleep(Duration::from_secs(3));
    drop(stop);
    let output = child.wait_with_output().expect("progscore exits");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let results = result_lines(&std::fs::read_to_string(dir.path().join("results.jsonl")).unwrap());
    assert_eq!(results.len(), 40, "every item is scored");
    for line in &results {
        assert_eq!(verdict(line), "true", "{line}");
    }
    nothing_from_the_outage_is_stored(&dir);
    assert_eq!(owned_containers_left(), 0);
    assert!(
        dir.owner_leftovers().is_empty(),
        "{:?}",
        dir.owner_leftovers()
    );
}

fn engine_stays_away_and_a_rerun_completes() {
    let dir = Dir::new();
    dir.edit_config(|mut config| {
        config.push_str("\n[docker]\noutage_wait = \"3s\"\n");
        config
    });
    dir.write("batch.jsonl", batch(40));
    let child = start_batch(&dir, "first.jsonl");
    wait_for_results(&dir, "first.jsonl", 6);
    let stop = EngineStop::now();
    let output = child.wait_with_output().expect("progscore exits");
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let errors = stderr(&output);
    assert!(
        errors.contains("cannot reach the Docker engine at unix:///var/run/docker.sock")
            && errors.contains("Run the same command again"),
        "{errors}"
    );
    let first = result_lines(&std::fs::read_to_string(dir.path().join("first.jsonl")).unwrap());
    assert!(first.len() < 40, "the batch stopped early");
    for line in &first {
        assert_eq!(verdict(line), "true", "{line}");
    }
    nothing_from_the_outage_is_stored(&dir);
    drop(stop);

    let rerun = dir.run(&[
        "score",
        "batch.jsonl",
        "--jobs",
        "4",
        "--out",
        "second.jsonl",
    ]);
    assert_eq!(rerun.status.code(), Some(0), "{}", stderr(&rerun));
    let second = result_lines(&std::fs::read_to_string(dir.path().join("second.jsonl")).unwrap());
    assert_eq!(second.len(), 40);
    for line in &second {
        assert_eq!(verdict(line), "true", "{line}");
        let finished_before = first.iter().any(|f| f["id"] == line["id"]);
        if finished_before {
            assert_eq!(line["evidence"], "stored", "ran twice: {line}");
        }
    }
    nothing_from_the_outage_is_stored(&dir);
    // What the stopped engine could not remove is gone once it is back and
    // a new progscore has swept (the first process exited, its lock free).
    assert_eq!(owned_containers_left(), 0);
    assert!(
        dir.owner_leftovers().is_empty(),
        "{:?}",
        dir.owner_leftovers()
    );
}
