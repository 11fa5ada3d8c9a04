//! A batch over a pool of two real engines: the one scripts/setup.sh starts
//! and the second one scripts/second-engine.sh starts beside it. Counted
//! through each engine's own event stream.

use std::collections::BTreeMap;
use std::time::SystemTime;

use progscore_e2e::{
    Creations, Dir, LOCAL_ENGINE, result_lines, second_engine, stderr, stdout, verdict,
};

const ITEMS: usize = 24;
const CASES: usize = 2;

/// The config's two engines, each taking 3 programs at once.
pub fn two_engines(config: String) -> String {
    format!(
        "{config}\n[engines.first]\nurl = \"{LOCAL_ENGINE}\"\ncapacity = 3\n\n\
         [engines.second]\nurl = \"{}\"\ncapacity = 3\n",
        second_engine()
    )
}

/// Programs that keep a container busy a moment; every third one is wrong.
pub fn batch(items: usize, sleep: f64) -> (String, BTreeMap<String, String>) {
    let mut expected = BTreeMap::new();
    let lines: Vec<String> = (0..items)
        .map(|i| {
            let id = format!("pool-{i}");
            let wrong = i % 3 == 0;
            expected.insert(id.clone(), (!wrong).to_string());
            let offset = if wrong { 1 } else { 0 };
            let cases: Vec<serde_json::Value> = (0..CASES)
                .map(|c| {
                    serde_json::json!({"invocation": {"args": [c.to_string()]},
                     "expected": {"stdout": {"equals": (i * 10 + c).to_string()}}})
                })
                .collect();
            serde_json::json!({
                "id": id,
                "program": format!(
                    "import sys, time\ntime.sleep({sleep})\nprint({i} * 10 + int(sys.argv[1]) + {offset})\n"
                ),
                "expectation": {"conditions": [{"program_behaves": {"profile": "python", "cases": cases}}]},
            })
            .to_string()
        })
        .collect();
    (lines.join("\n"), expected)
}

#[test]
fn a_batch_over_two_engines_runs_on_both_and_gets_the_verdicts_of_one() {
    let (batch, expected) = batch(ITEMS, 0.3);
    // On one engine first: the verdicts to match.
    let one = Dir::new();
    one.write("batch.jsonl", &batch);
    let output = one.run(&["score", "batch.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let on_one: BTreeMap<String, String> = result_lines(&stdout(&output))
        .iter()
        .map(|line| (line["id"].as_str().unwrap().to_string(), verdict(line)))
        .collect();
    assert_eq!(on_one, expected);

    let pool = Dir::new();
    pool.edit_config(two_engines);
    pool.write("batch.jsonl", &batch);
    let doctor = pool.run(&["doctor"]);
    let report = stdout(&doctor);
    assert!(
        report.contains("docker engine `first`") && report.contains("docker engine `second`"),
        "{report}\n{}",
        stderr(&doctor)
    );
    let since = SystemTime::now();
    let first = Creations::follow(LOCAL_ENGINE, since);
    let second = Creations::follow(&second_engine(), since);
    let child = pool
        .command()
        .args(["score", "batch.jsonl"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start progscore");
    let owner = format!("progscore-docker-{}-", child.id());
    let output = child.wait_with_output().expect("progscore exits");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let lines = result_lines(&stdout(&output));
    let on_two: BTreeMap<String, String> = lines
        .iter()
        .map(|line| (line["id"].as_str().unwrap().to_string(), verdict(line)))
        .collect();
    assert_eq!(on_two, on_one, "the pool's verdicts are one engine's");
    let ours = |creations: &Creations| {
        creations
            .until_now()
            .into_iter()
            .filter(|(_, label)| label.starts_with(&owner))
            .count()
    };
    let (on_first, on_second) = (ours(&first), ours(&second));
    assert!(
        on_first > 0 && on_second > 0,
        "both engines ran containers: first {on_first}, second {on_second}"
    );
    assert_eq!(
        on_first + on_second,
        ITEMS * CASES,
        "one container per case"
    );
    // The same evidence whichever engine ran it: the one-engine store's
    // attempts are the pool's (the fingerprint names no engine).
    let store = rusqlite::Connection::open(pool.path().join("evidence.db")).unwrap();
    let engines: Vec<String> = store
        .prepare("SELECT DISTINCT json_extract(value, '$.provenance.engine_name') FROM observations, json_each(json_extract(observations.run, '$.events'))")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(engines.len(), 2, "{engines:?}");
    let keys = |dir: &Dir| -> std::collections::BTreeSet<String> {
        rusqlite::Connection::open(dir.path().join("evidence.db"))
            .unwrap()
            .prepare("SELECT id FROM observations")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(
        keys(&pool),
        keys(&one),
        "the same attempts, whichever engine"
    );
}

/// Containers (and volumes) of progscore process `pid` on the engine at `engine`.
fn left_on(engine: &str, pid: u32) -> Vec<String> {
    let owner = format!("progscore-docker-{pid}-");
    let mut left = Vec::new();
    for what in [
        &["ps", "-a", "--format", "{{.Label \"progscore.owner\"}}"][..],
        &["volume", "ls", "--format", "{{.Label \"progscore.owner\"}}"][..],
    ] {
        let output = std::process::Command::new("docker")
            .args(["-H", engine])
            .args(what)
            .output()
            .expect("the docker CLI runs");
        assert!(output.status.success(), "{}", stderr(&output));
        left.extend(
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .filter(|label| label.starts_with(&owner))
                .map(|label| format!("{} {label}", what[0])),
        );
    }
    left
}

/// Stopped by SIGTERM while programs run on both engines, a batch leaves
/// nothing on either; killed by SIGKILL, what it left on both is swept by
/// the next progscore start.
#[test]
fn a_batch_over_two_engines_stopped_by_a_signal_leaves_nothing_on_either() {
    let engines = [LOCAL_ENGINE.to_string(), second_engine()];
    for (signal, status) in [(libc::SIGTERM, Some(143)), (libc::SIGKILL, None)] {
        let dir = Dir::new();
        dir.edit_config(two_engines);
        dir.write("batch.jsonl", batch(24, 2.0).0);
        let mut child = dir
            .command()
            .args(["score", "batch.jsonl"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start progscore");
        let pid = child.id();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while engines.iter().any(|engine| left_on(engine, pid).is_empty()) {
            assert!(
                std::time::Instant::now() < until,
                "no program ever ran on both engines"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
        unsafe {
            libc::kill(i32::try_from(pid).unwrap(), signal);
        }
        let exited = child.wait().expect("reaped");
        assert_eq!(exited.code(), status, "signal {signal}");
        if signal == libc::SIGKILL {
            let doctor = dir.run(&["doctor"]);
            assert_eq!(
                doctor.status.code(),
                Some(0),
                "{}\n{}",
                String::from_utf8_lossy(&doctor.stdout),
                stderr(&doctor)
            );
        }
        for engine in &engines {
            let left = left_on(engine, pid);
            assert!(
                left.is_empty(),
                "signal {signal}: left on {engine}: {left:?}"
            );
        }
        assert!(
            dir.owner_leftovers().is_empty(),
            "signal {signal}: {:?}",
            dir.owner_leftovers()
        );
    }
}
