//! Contest problems of our own (examples/contest), judged on the real
//! engine: a problem with several right answers judged by a checker program
//! (testlib's conventions in C++, Codeforces' in Python), an IOI-style task
//! with a grader, subtasks and a CMS checker, each with right, wrong, slow
//! and crashing submissions; a checker that crashes; and a rescore with
//! another checker that runs nothing.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use progscore_e2e::{Dir, result_lines, stderr, stdout, verdict};

fn contest_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/contest")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The problem's tests as cases: stdin from `N.in`, answer from `N.ans`.
fn cases(problem: &Path, count: usize) -> Vec<Value> {
    (0..count)
        .map(|n| {
            json!({"invocation": {"stdin": read(&problem.join(format!("tests/{n}.in")))},
                   "expected": {"answer": read(&problem.join(format!("tests/{n}.ans")))}})
        })
        .collect()
}

fn line(id: &str, program: &str, behaves: Value) -> String {
    json!({"id": id, "program": program,
           "expectation": {"conditions": [{"program_behaves": behaves}]}})
    .to_string()
}

/// pair-sum's checker: the C++ one (testlib's conventions, judge.h beside
/// it) for C++ submissions, the Python one (Codeforces') for Python ones.
fn pair_sum_checker(language: &str) -> Value {
    let problem = contest_dir().join("pair-sum");
    match language {
        "cpp" => json!({"program": {"profile": "cpp",
            "source": read(&problem.join("checker.cpp")),
            "files": {"judge.h": read(&problem.join("judge.h"))}}}),
        _ => json!({"program": {"profile": "python", "protocol": "codeforces",
            "source": read(&problem.join("checker.py"))}}),
    }
}

fn pair_sum_batch(checker: impl Fn(&str) -> Value) -> String {
    let problem = contest_dir().join("pair-sum");
    let mut lines = Vec::new();
    for language in ["cpp", "py"] {
        let profile = if language == "cpp" { "cpp" } else { "python" };
        for submission in ["right", "wrong", "slow", "crash"] {
            let program = read(&problem.join(format!("submissions/{submission}.{language}")));
            let behaves = json!({"profile": profile, "limits": {"timeout": "2s"},
                "checker": checker(language), "score": {"policy": "fraction"},
                "cases": cases(&problem, 3)});
            lines.push(line(
                &format!("pair-sum/{submission}.{language}"),
                &program,
                behaves,
            ));
        }
    }
    lines.join("\n") + "\n"
}

fn ioi_batch() -> String {
    let task = contest_dir().join("ioi-sum");
    let subtasks = json!({"policy": "groups", "groups": [
        {"name": "small", "cases": [0, 1], "points": 30},
        {"name": "large", "cases": [2, 3], "points": 70}]});
    let checker = json!({"program": {"profile": "cpp", "protocol": "cms",
        "source": read(&task.join("checker/checker.cpp"))}});
    let graders = json!({
        "graders/sum.h": read(&task.join("graders/sum.h")),
        "graders/grader.cpp": read(&task.join("graders/grader.cpp"))});
    let mut lines = Vec::new();
    for submission in ["right", "overflow", "slow", "crash"] {
        let cpp = read(&task.join(format!("submissions/{submission}.cpp")));
        lines.push(line(
            &format!("ioi-sum/{submission}.cpp"),
            &cpp,
            json!({"profile": "cpp-ioi", "limits": {"timeout": "1s"}, "files": graders,
                   "checker": checker, "score": subtasks, "cases": cases(&task, 4)}),
        ));
        let python = read(&task.join(format!("submissions/{submission}.py")));
        lines.push(line(
            &format!("ioi-sum/{submission}.py"),
            &python,
            json!({"profile": "python", "limits": {"timeout": "1s"},
                   "checker": checker, "score": subtasks, "cases": cases(&task, 4)}),
        ));
    }
    lines.join("\n") + "\n"
}

/// Lines by id.
fn by_id(text: &str) -> std::collections::BTreeMap<String, Value> {
    result_lines(text)
        .into_iter()
        .map(|line| (line["id"].as_str().unwrap_or_default().to_string(), line))
        .collect()
}

/// A slow submission is a proven timeout (false), or on a machine too busy
/// to prove it, undetermined for that reason only.
fn assert_slow(line: &Value, score_if_proven: f64) {
    match verdict(line).as_str() {
        "undetermined" => assert_eq!(line["reason_kind"], "unconfirmed_timeout", "{line}"),
        _ => assert_eq!(line["score"], score_if_proven, "{line}"),
    }
}

#[test]
fn contest_problems_are_judged_by_their_checkers_and_subtasks() {
    let dir = Dir::new();
    dir.write("pair-sum.jsonl", pair_sum_batch(pair_sum_checker));
    let output = dir.run(&["score", "pair-sum.jsonl"]);
    let lines = by_id(&stdout(&output));
    assert_eq!(lines.len(), 8, "{}", stderr(&output));
    for language in ["cpp", "py"] {
        let right = &lines[&format!("pair-sum/right.{language}")];
        // Its pairs are not the jury's: only a checker can accept them.
        assert_eq!(verdict(right), "true", "{right}");
        assert_eq!(right["score"], 1.0);
        let wrong = &lines[&format!("pair-sum/wrong.{language}")];
        assert_eq!(verdict(wrong), "false", "{wrong}");
        assert!(
            wrong["rationale"]
                .as_str()
                .is_some_and(|r| r.contains("judged wrong by the checker")),
            "{wrong}"
        );
        assert_slow(&lines[&format!("pair-sum/slow.{language}")], 0.0);
        let crash = &lines[&format!("pair-sum/crash.{language}")];
        assert_eq!(verdict(crash), "false", "{crash}");
    }
    // The C++ checker's message is the case's.
    let right = &lines["pair-sum/right.cpp"];
    assert_eq!(right["cases"][0]["checker"], "ok 1 + 4 = 5", "{right}");
    // The score rests on the program's run and the checker's.
    assert_eq!(right["observation_ids"].as_array().map(Vec::len), Some(2));

    // Another checker over the same evidence: the jury's answers compared
    // token by token (the built-in `tokens`) refuse the other pairs. Nothing
    // runs: the rescore asks no engine.
    dir.write(
        "tokens.jsonl",
        pair_sum_batch(|_| json!({"component": {"name": "tokens"}})),
    );
    let output = dir.run(&["rescore", "tokens.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let rescored = by_id(&stdout(&output));
    let right = &rescored["pair-sum/right.cpp"];
    assert_eq!(right["evidence"], "stored", "{right}");
    assert_eq!(
        right["score"],
        1.0 / 3.0,
        "only n = 0 has one answer: {right}"
    );

    // A checker that crashes proves nothing: undetermined, never false.
    dir.write(
        "crashing-checker.jsonl",
        pair_sum_batch(|_| {
            json!({"program": {"profile": "python",
                "source": "import sys\nsys.exit(-11)\n"}})
        })
        .lines()
        .next()
        .expect("a line")
        .to_string()
            + "\n",
    );
    let output = dir.run(&["score", "crashing-checker.jsonl"]);
    let line = &result_lines(&stdout(&output))[0];
    assert_eq!(verdict(line), "undetermined", "{line}");
    assert_eq!(line["reason_kind"], "checker_undecided", "{line}");

    // The IOI-style task: the grader linked in, subtasks by points.
    dir.write("ioi.jsonl", ioi_batch());
    let output = dir.run(&["score", "ioi.jsonl"]);
    let lines = by_id(&stdout(&output));
    assert_eq!(lines.len(), 8, "{}", stderr(&output));
    for language in ["cpp", "py"] {
        let right = &lines[&format!("ioi-sum/right.{language}")];
        assert_eq!(verdict(right), "true", "{right}");
        let overflow = &lines[&format!("ioi-sum/overflow.{language}")];
        assert_eq!(overflow["score"], 0.3, "subtask 1 only: {overflow}");
        assert_eq!(
            overflow["groups"],
            json!([{"name": "small", "points": 30.0, "earned": 30.0},
                   {"name": "large", "points": 70.0, "earned": 0.0}]),
            "{overflow}"
        );
        assert_slow(&lines[&format!("ioi-sum/slow.{language}")], 0.3);
        let crash = &lines[&format!("ioi-sum/crash.{language}")];
        assert_eq!(crash["score"], 0.0, "{crash}");
    }
}

#[test]
fn a_profiles_time_factor_scales_a_problems_time_limit_and_is_recorded() {
    let dir = Dir::new();
    dir.edit_config(|text| {
        progscore_test_kit::replace_required(
            &text,
            "[profiles.python]\n",
            "[profiles.python]\ntime_factor = { multiply = 3.0, add = \"500ms\" }\n",
        )
    });
    // A problem's 1 s, calibrated for C++: this Python program needs 1.5 s
    // of wall time, within 1 s x 3 + 0.5 s.
    let behaves = json!({"profile": "python", "limits": {"timeout": "1s"},
        "cases": [{"invocation": {"stdin": ""}, "expected": {"stdout": {"equals": "done"}}}]});
    dir.write(
        "slow.jsonl",
        line(
            "sleeps",
            "import time\ntime.sleep(1.5)\nprint('done')\n",
            behaves,
        ) + "\n",
    );
    let output = dir.run(&["score", "slow.jsonl"]);
    let result = &result_lines(&stdout(&output))[0];
    assert_eq!(verdict(result), "true", "{result}");
    // The observation says what ran: the factor and the scaled limit.
    let id = result["observation_ids"][0]
        .as_str()
        .expect("an observation");
    let shown = dir.run(&["observations", "show", id]);
    let observation: Value = serde_json::from_str(&stdout(&shown)).expect("JSON");
    let fingerprint = &observation["profile_fingerprint"];
    assert_eq!(
        fingerprint["time_factor"],
        json!({"multiply": 3.0, "add_ms": 500}),
        "{fingerprint}"
    );
    assert_eq!(fingerprint["limits"]["timeout_ms"], 3500, "{fingerprint}");
    // A rescore of the same item finds the same evidence.
    let output = dir.run(&["rescore", "slow.jsonl"]);
    let result = &result_lines(&stdout(&output))[0];
    assert_eq!(result["evidence"], "stored", "{result}");
    assert_eq!(verdict(result), "true", "{result}");
}
