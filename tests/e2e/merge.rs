//! `progscore store merge`: stores written on different machines become one.
//! A second machine starts from a copy of the first's store and scores a
//! batch that overlaps the first's; merged back, the first store holds both
//! and scores the second batch from stored evidence alone. The same attempt
//! run apart (the same id, other content) is refused and named, and nothing
//! is merged, unless `--keep-ours` is given. Merged evidence stands in for
//! a run only when the operator trusts the file (`--trust`); otherwise
//! `score` runs the attempt here.

use std::collections::BTreeMap;

use progscore_e2e::{Dir, result_lines, stderr, stdout, verdict};

/// A batch line: `program` under `python`, given `n`, must print `n * n`.
fn line(id: &str, program: &str, n: u32) -> String {
    serde_json::json!({
        "id": id,
        "program": program,
        "expectation": {"conditions": [{"program_behaves": {"profile": "python", "cases": [
            {"invocation": {"args": [n.to_string()]},
             "expected": {"stdout": {"equals": (n * n).to_string()}}}]}}]},
    })
    .to_string()
}

const SQUARE: &str = "import sys\nn = int(sys.argv[1])\nprint(n * n)\n";
const DOUBLE: &str = "import sys\nn = int(sys.argv[1])\nprint(n + n)\n";

/// The result lines of `progscore score BATCH`, by item id (they come as
/// the items finish).
fn score(dir: &Dir, batch: &str) -> BTreeMap<String, serde_json::Value> {
    let output = dir.run(&["score", batch]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    result_lines(&stdout(&output))
        .into_iter()
        .map(|line| (line["id"].as_str().expect("an id").to_string(), line))
        .collect()
}

fn merge(dir: &Dir, other: &Dir, extra: &[&str]) -> std::process::Output {
    let other = other.path().join("evidence.db");
    let mut args = vec!["store", "merge", other.to_str().unwrap()];
    args.extend_from_slice(extra);
    dir.run(&args)
}

fn counts(dir: &Dir) -> (i64, i64) {
    let store = rusqlite::Connection::open(dir.path().join("evidence.db")).expect("open store");
    let count = |table: &str| -> i64 {
        store
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
                row.get(0)
            })
            .expect("count")
    };
    (count("observations"), count("scores"))
}

#[test]
fn stores_from_two_machines_merge_and_a_conflicting_run_is_named() {
    let first = Dir::new();
    first.write(
        "x.jsonl",
        [line("square-3", SQUARE, 3), line("double-3", DOUBLE, 3)].join("\n"),
    );
    let results = score(&first, "x.jsonl");
    assert_eq!(verdict(&results["square-3"]), "true");
    assert_eq!(verdict(&results["double-3"]), "false");

    // The second machine starts from a copy of the first's store: the item
    // both batches share is reused there, the new one runs there.
    let second = Dir::new();
    std::fs::copy(
        first.path().join("evidence.db"),
        second.path().join("evidence.db"),
    )
    .expect("copy the store");
    second.write(
        "y.jsonl",
        [line("square-3", SQUARE, 3), line("square-4", SQUARE, 4)].join("\n"),
    );
    let results = score(&second, "y.jsonl");
    assert_eq!(results["square-3"]["evidence"], "stored");
    assert_eq!(results["square-4"]["evidence"], "ran");

    let merged = merge(&first, &second, &["--trust"]);
    assert_eq!(merged.status.code(), Some(0), "{}", stderr(&merged));
    let summary: serde_json::Value = serde_json::from_str(stdout(&merged).trim()).unwrap();
    assert_eq!(summary["observations_added"], 1, "{summary}");
    assert_eq!(summary["observations_present"], 2, "{summary}");
    assert_eq!(summary["scores_added"], 2, "{summary}");
    assert_eq!(summary["scores_present"], 2, "{summary}");
    assert_eq!(summary["trusted"], true, "{summary}");
    assert_eq!(counts(&first), (3, 4));
    // Merging again adds nothing.
    let again = merge(&first, &second, &[]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert_eq!(counts(&first), (3, 4));
    // The first machine now scores the second batch from evidence alone.
    first.write(
        "y.jsonl",
        [line("square-3", SQUARE, 3), line("square-4", SQUARE, 4)].join("\n"),
    );
    for result in score(&first, "y.jsonl").values() {
        assert_eq!(result["evidence"], "stored", "{result}");
        assert_eq!(verdict(result), "true", "{result}");
    }

    // A third machine ran `double-3` on its own: the same attempt, its own
    // run. Refused and named; nothing of that store is merged.
    let third = Dir::new();
    third.write(
        "z.jsonl",
        [line("double-3", DOUBLE, 3), line("square-5", SQUARE, 5)].join("\n"),
    );
    score(&third, "z.jsonl");
    let before = counts(&first);
    let refused = merge(&first, &third, &[]);
    assert_ne!(refused.status.code(), Some(0));
    let message = stderr(&refused);
    let double = first_observation_of(&first, DOUBLE);
    assert!(
        message.contains(&double) && message.contains("nothing was merged"),
        "the refusal must name the conflicting observation {double}: {message}"
    );
    assert_eq!(counts(&first), before);
    // Keeping this store's copy merges the rest.
    let kept = merge(&first, &third, &["--keep-ours"]);
    assert_eq!(kept.status.code(), Some(0), "{}", stderr(&kept));
    assert!(stderr(&kept).contains(&double), "{}", stderr(&kept));
    assert_eq!(counts(&first), (before.0 + 1, before.1 + 1));
}

/// The id of the observation stored for `program`.
fn first_observation_of(dir: &Dir, program: &str) -> String {
    let sha256 = progscore_sandbox::sha256_hex(program.as_bytes());
    let store = rusqlite::Connection::open(dir.path().join("evidence.db")).expect("open store");
    store
        .query_row(
            "SELECT id FROM observations WHERE program_sha256 = ?1",
            [sha256],
            |row| row.get(0),
        )
        .expect("an observation of the program")
}

#[test]
fn evidence_merged_without_trust_is_run_again_by_score() {
    let other = Dir::new();
    other.write("x.jsonl", line("square-6", SQUARE, 6));
    score(&other, "x.jsonl");
    let here = Dir::new();
    here.write("x.jsonl", line("square-7", SQUARE, 7));
    score(&here, "x.jsonl");
    let merged = merge(&here, &other, &[]);
    assert_eq!(merged.status.code(), Some(0), "{}", stderr(&merged));
    assert!(
        stderr(&merged).contains("not trusted"),
        "{}",
        stderr(&merged)
    );
    here.write("y.jsonl", line("square-6", SQUARE, 6));
    let results = score(&here, "y.jsonl");
    assert_eq!(
        results["square-6"]["evidence"], "ran",
        "{}",
        results["square-6"]
    );
    assert_eq!(verdict(&results["square-6"]), "true");
    // Its own run is reused from then on.
    let results = score(&here, "y.jsonl");
    assert_eq!(results["square-6"]["evidence"], "stored");
}
