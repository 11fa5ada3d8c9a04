//! Containers killed, removed or paused from outside while `progscore
//! score` runs a batch of correct programs (runc and gVisor, more jobs than
//! CPUs): no program is scored `false`, nothing faulted is stored as an
//! attempt's evidence, the batch scored again completes every item `true`,
//! and nothing progscore created is left.

use std::collections::{BTreeMap, HashSet};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use progscore_e2e::{Dir, result_lines, stderr, verdict};

use progscore_test_kit::leftovers::{OwnersPresent, Started};

fn batch(items: usize) -> String {
    (0..items)
        .map(|i| {
            let profile = if i % 2 == 0 {
                "python"
            } else {
                "python-gvisor"
            };
            serde_json::json!({
                "id": format!("square-{i}"),
                // Long enough to be caught running.
                "program": "import sys, time\ntime.sleep(1.5)\nprint(int(sys.argv[1]) ** 2)\n",
                "expectation": {"conditions": [{"program_behaves": {"profile": profile, "cases": [
                    {"invocation": {"args": [i.to_string()]},
                     "expected": {"stdout": {"equals": (i * i).to_string()}, "exit_code": 0}}]}}]},
            })
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn docker(args: &[&str]) -> Output {
    Command::new("docker")
        .args(args)
        .output()
        .expect("the docker CLI runs")
}

/// The containers of the progscore process `pid` the engine reports
/// running (and not paused).
fn running_of(pid: u32) -> Vec<String> {
    let owner = format!("progscore-docker-{pid}-");
    let listed = docker(&[
        "ps",
        "--filter",
        "label=progscore.owner",
        "--filter",
        "status=running",
        "--format",
        "{{.Names}} {{.Label \"progscore.owner\"}}",
    ]);
    String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter(|line| line.contains(&owner))
        .filter_map(|line| line.split(' ').next().map(str::to_string))
        .collect()
}

fn paused(name: &str) -> Option<bool> {
    let state = docker(&["inspect", "--format", "{{.State.Paused}}", name]);
    match String::from_utf8_lossy(&state.stdout).trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// Scores `batch.jsonl` into `out`; meanwhile, when `faults`, kills,
/// removes and pauses (then unpauses) in turn each container seen running.
/// The number of containers faulted and the process.
fn score(dir: &Dir, out: &str, faults: bool) -> (usize, Started) {
    let before = OwnersPresent::now();
    let mut child = dir
        .command()
        .args(["score", "batch.jsonl", "--jobs", "6", "--out", out])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start progscore");
    let pid = child.id();
    let started = before.then_started(pid);
    let mut faulted = HashSet::new();
    while faults && child.try_wait().expect("progscore's status").is_none() {
        for name in running_of(pid) {
            if !faulted.insert(name.clone()) {
                continue;
            }
            match faulted.len() % 3 {
                1 => {
                    docker(&["kill", &name]);
                }
                2 => {
                    docker(&["rm", "--force", &name]);
                }
                _ => {
                    if docker(&["pause", &name]).status.success() {
                        // Unpaused once the engine reports it paused.
                        while paused(&name) == Some(false) {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        docker(&["unpause", &name]);
                    }
                }
            }
        }
        // The next look at the engine's state.
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().expect("progscore ends");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    (faulted.len(), started)
}

fn results(dir: &Dir, out: &str) -> BTreeMap<String, serde_json::Value> {
    result_lines(&std::fs::read_to_string(dir.path().join(out)).expect("results"))
        .into_iter()
        .map(|line| (line["id"].as_str().expect("id").to_string(), line))
        .collect()
}

#[test]
fn containers_killed_removed_or_paused_from_outside_never_make_a_correct_program_wrong() {
    let dir = Dir::new();
    let items = 12;
    dir.write("batch.jsonl", batch(items));

    let (faulted, started) = score(&dir, "first.jsonl", true);
    assert!(
        faulted >= 3,
        "only {faulted} containers were caught running"
    );
    let first = results(&dir, "first.jsonl");
    assert_eq!(first.len(), items);
    let undetermined: Vec<&String> = first
        .iter()
        .filter(|(_, line)| verdict(line) == "undetermined")
        .map(|(id, _)| id)
        .collect();
    for (id, line) in &first {
        assert!(
            matches!(verdict(line).as_str(), "true" | "undetermined"),
            "{id}: a correct program was scored {line}"
        );
    }
    assert!(
        !undetermined.is_empty(),
        "no fault reached a program: {first:#?}"
    );
    let left = started.leftovers_after(Duration::from_secs(10));
    assert!(left.is_empty(), "left behind: {left:?}");

    // Nothing was scored false, and no observation holds a kill's 137.
    let store = rusqlite::Connection::open(dir.path().join("evidence.db")).expect("store");
    let false_scores: i64 = store
        .query_row("SELECT count(*) FROM scores WHERE value = 0", [], |row| {
            row.get(0)
        })
        .expect("count");
    assert_eq!(false_scores, 0);
    let runs: Vec<String> = store
        .prepare("SELECT run FROM observations")
        .expect("select")
        .query_map([], |row| row.get(0))
        .expect("query")
        .map(Result::unwrap)
        .collect();
    for run in &runs {
        assert!(!run.contains("\"exit_code\":137"), "{run}");
    }

    // Scored again, the faulted items run again (their runs were not the
    // attempts' evidence) and every item is true.
    let (_, started) = score(&dir, "second.jsonl", false);
    let second = results(&dir, "second.jsonl");
    for (id, line) in &second {
        assert_eq!(verdict(line), "true", "{id}: {line}");
    }
    for id in undetermined {
        assert_ne!(
            first[id]["observation_ids"], second[id]["observation_ids"],
            "{id}: the faulted run was reused"
        );
    }
    let left = started.leftovers_after(Duration::from_secs(10));
    assert!(left.is_empty(), "left behind: {left:?}");
}
