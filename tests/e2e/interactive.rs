//! Interactive problems of our own (examples/interactive), judged on the
//! real engine: the program and the interactor in two containers, talking
//! case by case. A guessing game (interactors in C++ and Python) and an
//! adaptive one scored by queries, with right, wrong, query-limit-exceeding,
//! silent, flooding, malformed and crashing submissions; an interactor that
//! crashes; an interactor killed from outside mid-conversation; and a
//! rescore that runs nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use progscore_e2e::{Dir, result_lines, stderr, stdout, verdict};

fn interactive_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/interactive")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The problem's first `count` tests as cases: each input and answer the
/// interactor's.
fn cases(problem: &Path, count: usize) -> Vec<Value> {
    (1..=count)
        .map(|n| {
            json!({"invocation": {"stdin": read(&problem.join(format!("tests/0{n}.in")))},
                   "expected": {"answer": read(&problem.join(format!("tests/0{n}.ans")))}})
        })
        .collect()
}

/// A C++ interactor of `problem` (with our interact.h beside it), or the
/// guessing game's Python one.
fn interactor(problem: &str, source: &str) -> Value {
    let dir = interactive_dir();
    let code = read(&dir.join(problem).join(source));
    if source.ends_with(".py") {
        json!({"profile": "python", "source": code, "limits": {"timeout": "5s"}})
    } else {
        json!({"profile": "cpp", "source": code, "limits": {"timeout": "5s"},
               "files": {"interact.h": read(&dir.join("interact.h"))}})
    }
}

/// One item: `submission` of `problem` against `judge` (its source file)
/// on the problem's first `tests` tests.
fn line(problem: &str, submission: &str, judge: &str, tests: usize) -> String {
    let dir = interactive_dir().join(problem);
    let program = read(&dir.join("submissions").join(submission));
    let profile = if submission.ends_with(".py") {
        "python"
    } else {
        "cpp"
    };
    json!({"id": format!("{problem}/{submission} by {judge}"), "program": program,
           "expectation": {"conditions": [{"program_behaves": {
               "profile": profile, "limits": {"timeout": "2s"},
               "interactor": interactor(problem, judge), "score": {"policy": "fraction"},
               "cases": cases(&dir, tests)}}]}})
    .to_string()
}

/// Mostly the Python interactor (no build), the C++ ones where they matter.
const ITEMS: &[(&str, &str, &str, usize)] = &[
    ("guess", "right.py", "interactor.py", 3),
    ("guess", "right.cpp", "interactor.py", 3),
    ("guess", "wrong.py", "interactor.py", 3),
    ("guess", "queries.py", "interactor.py", 3),
    ("guess", "silent.py", "interactor.py", 3),
    // A flood runs to its own limit after the interactor left: one test.
    ("guess", "flood.py", "interactor.py", 1),
    ("guess", "crash.py", "interactor.py", 3),
    ("guess", "badformat.cpp", "interactor.py", 3),
    ("guess", "right.cpp", "interactor.cpp", 3),
    ("guess", "wrong.cpp", "interactor.cpp", 3),
    ("guess", "right.py", "interactor-crash.cpp", 3),
    ("adaptive", "right.py", "interactor.cpp", 3),
    ("adaptive", "wrong.py", "interactor.cpp", 3),
    ("adaptive", "slow-queries.cpp", "interactor.cpp", 3),
];

fn batch() -> String {
    ITEMS
        .iter()
        .map(|(problem, submission, judge, tests)| line(problem, submission, judge, *tests))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn by_id(text: &str) -> std::collections::BTreeMap<String, Value> {
    result_lines(text)
        .into_iter()
        .map(|line| (line["id"].as_str().unwrap_or_default().to_string(), line))
        .collect()
}

fn rationale(line: &Value) -> String {
    line["rationale"].as_str().unwrap_or_default().to_string()
}

#[test]
fn interactive_problems_are_judged_by_their_interactors() {
    let dir = Dir::new();
    dir.write("interactive.jsonl", batch());
    let output = dir.run(&["score", "--jobs", "8", "interactive.jsonl"]);
    let lines = by_id(&stdout(&output));
    assert_eq!(lines.len(), ITEMS.len(), "{}", stderr(&output));
    for id in [
        "guess/right.py by interactor.py",
        "guess/right.cpp by interactor.py",
        "guess/right.cpp by interactor.cpp",
        "adaptive/right.py by interactor.cpp",
    ] {
        let right = &lines[id];
        assert_eq!(verdict(right), "true", "{id}: {right}");
    }
    for (id, says) in [
        (
            "guess/wrong.py by interactor.py",
            "judged wrong by the interactor",
        ),
        (
            "guess/wrong.cpp by interactor.cpp",
            "judged wrong by the interactor",
        ),
        (
            "guess/queries.py by interactor.py",
            "judged wrong by the interactor",
        ),
        (
            "guess/silent.py by interactor.py",
            "judged wrong by the interactor",
        ),
        (
            "guess/flood.py by interactor.py",
            "judged wrong by the interactor",
        ),
        (
            "guess/badformat.cpp by interactor.py",
            "judged malformed by the interactor",
        ),
        (
            "adaptive/wrong.py by interactor.cpp",
            "judged wrong by the interactor",
        ),
        ("guess/crash.py by interactor.py", ""),
    ] {
        let wrong = &lines[id];
        assert_eq!(verdict(wrong), "false", "{id}: {wrong}");
        assert!(rationale(wrong).contains(says), "{id}: {wrong}");
    }
    // The first test's secret is small enough for a linear scan.
    assert_eq!(
        lines["guess/queries.py by interactor.py"]["cases"][0]["matched"],
        true
    );
    // Points for more queries than the optimum: accepted, 0.6 and 0.45.
    let slow = &lines["adaptive/slow-queries.cpp by interactor.cpp"];
    assert_eq!(verdict(slow), "false", "{slow}");
    let score = slow["score"].as_f64().expect("a score");
    assert!((score - (1.0 + 0.6 + 0.45) / 3.0).abs() < 1e-9, "{slow}");
    // A judge that crashes decides nothing, whatever the program did.
    let broken = &lines["guess/right.py by interactor-crash.cpp"];
    assert_eq!(verdict(broken), "undetermined", "{broken}");
    assert_eq!(broken["reason_kind"], "checker_undecided", "{broken}");

    // The conversations are evidence: scored again, nothing runs.
    let again = dir.run(&["rescore", "interactive.jsonl"]);
    let rescored = by_id(&stdout(&again));
    assert_eq!(rescored.len(), ITEMS.len(), "{}", stderr(&again));
    for (id, line) in &lines {
        let rescore = &rescored[id];
        // A flood killed at a limit the machine kept it from proving
        // leaves an unproven run, which is never reused.
        if id.starts_with("guess/flood") && rescore["reason_kind"] == "no_evidence" {
            continue;
        }
        assert_eq!(verdict(rescore), verdict(line), "{id}: {rescore}");
        assert_eq!(rescore["evidence"], "stored", "{id}: {rescore}");
    }
}

/// Running containers of the progscore process `pid` labelled with
/// this profile (other tests run beside this one).
fn running(pid: u32, profile: &str) -> Vec<String> {
    let owner = format!("progscore-docker-{pid}-");
    let listed = Command::new("docker")
        .args([
            "ps",
            "--filter",
            &format!("label=progscore.profile={profile}"),
            "--filter",
            "status=running",
            "--format",
            "{{.Names}} {{.Label \"progscore.owner\"}}",
        ])
        .output()
        .expect("the docker CLI runs");
    String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter(|line| line.contains(&owner))
        .filter_map(|line| line.split(' ').next().map(str::to_string))
        .collect()
}

#[test]
fn an_interactor_killed_from_outside_mid_conversation_decides_nothing() {
    let dir = Dir::new();
    // The interactor (Python) says the range, then waits long enough to be
    // caught; the program (C++) waits for its answer.
    let interactor = json!({"profile": "python", "limits": {"timeout": "30s"},
        "source": "import sys, time\nprint('10 5', flush=True)\ntime.sleep(60)\n"});
    let program = read(&interactive_dir().join("guess/submissions/right.cpp"));
    let item = json!({"id": "killed", "program": program,
        "expectation": {"conditions": [{"program_behaves": {
            "profile": "cpp", "limits": {"timeout": "30s"}, "interactor": interactor,
            "cases": [{"invocation": {"stdin": "10 5 4\n"}, "expected": {"answer": "4\n"}}]}}]}});
    dir.write("killed.jsonl", item.to_string() + "\n");
    let child = dir
        .command()
        .args(["score", "killed.jsonl"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("progscore starts");
    // The interactor's container, once it runs (the program's is `cpp`).
    let victim = loop {
        if let Some(name) = running(child.id(), "python").into_iter().next() {
            break name;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let killed = Command::new("docker")
        .args(["kill", &victim])
        .output()
        .expect("docker kill runs");
    assert!(killed.status.success(), "{killed:?}");
    let output = child.wait_with_output().expect("progscore ends");
    let lines = by_id(&stdout(&output));
    let line = &lines["killed"];
    assert_eq!(verdict(line), "undetermined", "{line}");
}
