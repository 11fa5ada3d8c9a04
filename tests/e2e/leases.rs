//! Several `progscore score` processes on one store and one batch run each
//! attempt once: one takes the attempt's lease in the store and runs it, the
//! others wait and use the stored observation. Counted through the engine's
//! own event stream, never through progscore's counters. (A lease of a
//! SIGKILLed process, taken over after its expiry, is tested with the scorer
//! library in host/scoring/tests/scoring/leases.rs, where the TTL can be
//! made short.)

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::time::SystemTime;

use progscore_e2e::{Creations, Dir, LOCAL_ENGINE, result_lines, stderr, stdout, verdict};

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

#[test]
fn four_processes_on_one_store_run_each_attempt_of_a_batch_once() {
    let dir = Dir::new();
    let (batch, expected) = batch();
    dir.write("batch.jsonl", batch);
    // Created (and migrated) before, as a store in use would be; processes
    // opening a new file at once are covered by the store's own tests.
    let init = dir.run(&["scores", "list"]);
    assert_eq!(init.status.code(), Some(0), "{}", stderr(&init));
    let creations = Creations::follow(LOCAL_ENGINE, SystemTime::now());
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
