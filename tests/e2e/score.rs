//! `progscore score`, `rescore`, `replay`, `observations`, `scores`.

use std::collections::BTreeMap;
use std::path::Path;

use progscore_e2e::{Dir, result_lines, stderr, stdout, verdict};
use progscore_test_kit::leftovers::OwnersPresent;

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

const SQUARE_ITEM: &str = r#"{"id": "ID", "program": "import sys\nprint(int(sys.argv[1]) ** 2)\n", "expectation": {"conditions": [{"program_behaves": {"profile": "python", "cases": [{"invocation": {"args": ["3"], "stdin": null}, "expected": {"stdout": {"equals": "EXPECTED"}, "exit_code": 0}}]}}]}}"#;

fn square_item(id: &str, expected: &str) -> String {
    SQUARE_ITEM.replace("ID", id).replace("EXPECTED", expected)
}

fn documented_verdicts() -> BTreeMap<String, String> {
    progscore_e2e::documented_verdicts(&examples().join("expected-verdicts.txt"))
}

/// A test folder whose profiles also have a CPU-time limit (below their
/// wall-clock one): the example batch's infinite loop is documented `false`,
/// a proven timeout, which only a CPU-time limit gives on a busy machine
/// (under the wall-clock limit alone a starved loop is rightly left
/// undetermined). Its sleeper is proven by the wall-clock limit, as before.
fn dir_with_cpu_limits() -> Dir {
    let dir = Dir::new();
    dir.edit_config(|text| {
        progscore_test_kit::replace_required(
            &text,
            "timeout = \"10s\"",
            "timeout = \"10s\"\ncpu_time = \"3s\"",
        )
    });
    dir
}

/// The same batch with its Docker profiles swapped for the daemonless OCI
/// ones (same image, same limits): the same verdicts, with the OCI
/// backend named in every case's provenance.
#[test]
fn the_example_batch_gets_the_same_verdicts_without_a_daemon() {
    let dir = dir_with_cpu_limits();
    let batch = std::fs::read_to_string(examples().join("batch.jsonl"))
        .unwrap()
        .replace(
            "\"profile\": \"python-gvisor\"",
            "\"profile\": \"python-oci-gvisor\"",
        )
        .replace("\"profile\": \"python\"", "\"profile\": \"python-oci\"");
    dir.write("batch.jsonl", batch);
    // Its program files, beside it as beside the original.
    std::fs::create_dir(dir.path().join("programs")).unwrap();
    for file in std::fs::read_dir(examples().join("programs")).unwrap() {
        let file = file.unwrap();
        std::fs::copy(
            file.path(),
            dir.path().join("programs").join(file.file_name()),
        )
        .unwrap();
    }
    let output = dir.run(&["score", "batch.jsonl", "--out", "results.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let results = result_lines(&std::fs::read_to_string(dir.path().join("results.jsonl")).unwrap());
    let got: BTreeMap<String, String> = results
        .iter()
        .map(|line| (line["id"].as_str().unwrap().to_string(), verdict(line)))
        .collect();
    assert_eq!(got, documented_verdicts());
    let store = rusqlite::Connection::open(dir.path().join("evidence.db")).unwrap();
    let runs: Vec<String> = store
        .prepare("SELECT run FROM observations")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(!runs.is_empty());
    for run in runs {
        let run: serde_json::Value = serde_json::from_str(&run).unwrap();
        for event in run["events"].as_array().unwrap() {
            if let Some(backend) = event["provenance"]["backend"].as_str() {
                assert_eq!(backend, "oci", "{event}");
            }
        }
    }
}

#[test]
fn the_example_batch_gets_its_documented_verdicts() {
    let dir = dir_with_cpu_limits();
    let batch = examples().join("batch.jsonl");
    let output = dir.run(&["score", batch.to_str().unwrap(), "--out", "results.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let results = result_lines(&std::fs::read_to_string(dir.path().join("results.jsonl")).unwrap());
    let got: BTreeMap<String, String> = results
        .iter()
        .map(|line| (line["id"].as_str().unwrap().to_string(), verdict(line)))
        .collect();
    assert_eq!(got, documented_verdicts());
    // The result line schema.
    for line in &results {
        for key in [
            "id",
            "status",
            "value",
            "rationale",
            "observation_ids",
            "cases",
        ] {
            assert!(line.get(key).is_some(), "{key} missing in {line}");
        }
        for case in line["cases"].as_array().unwrap() {
            let outcome = case["outcome"].as_str().unwrap();
            assert!(
                [
                    "exited",
                    "timed_out",
                    "memory_limit",
                    "sandbox_error",
                    "not_run"
                ]
                .contains(&outcome)
            );
            assert!(case["duration_ms"].as_u64().is_some());
        }
    }
    let square = results.iter().find(|l| l["id"] == "square-3").unwrap();
    assert_eq!(
        square["rationale"],
        "All 1 case(s) produced the expected result under python."
    );
    let undetermined = results
        .iter()
        .find(|l| l["id"] == "output-flood-undecidable")
        .unwrap();
    assert!(
        undetermined["reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty())
    );
    // Off a terminal, the summary is plain text on stderr.
    let summary = stderr(&output);
    assert!(
        summary.contains("undetermined") && summary.contains("programs/s"),
        "{summary}"
    );

    // Scoring the same batch again reuses the evidence: nothing runs.
    let again = dir.run(&["score", batch.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    for line in result_lines(&stdout(&again)) {
        assert_eq!(line["evidence"], "stored", "{line}");
    }
}

#[test]
fn bad_lines_are_named_and_good_lines_still_scored() {
    let dir = Dir::new();
    let text = [
        square_item("good-1", "9"),
        "{not json".to_string(),
        square_item("bad-field", "9").replace("\"stdout\"", "\"stdot\""),
        square_item("bad-profile", "9").replace("\"python\"", "\"pyhton\""),
        square_item("bad-comparator", "9").replace("\"equals\"", "\"equalz\""),
        square_item("missing-file", "9").replace(
            "\"program\": \"import sys\\nprint(int(sys.argv[1]) ** 2)\\n\"",
            "\"program_file\": \"nope.py\"",
        ),
        square_item("good-2", "8"),
        square_item("nul-arg", "9").replace("[\"3\"]", "[\"3\\u0000\"]"),
        square_item("huge-args", "9").replace(
            "[\"3\"]",
            &serde_json::to_string(&vec!["y".repeat(1000); 5000]).unwrap(),
        ),
    ]
    .join("\n");
    dir.write("batch.jsonl", text);
    let output = dir.run(&["score", "batch.jsonl"]);
    assert_eq!(output.status.code(), Some(2));
    let errors = stderr(&output);
    assert!(errors.contains("batch.jsonl:2:"), "{errors}");
    assert!(
        errors.contains(
            "batch.jsonl:3: field `expectation.conditions[0].program_behaves.cases[0].expected"
        ),
        "{errors}"
    );
    assert!(
        errors.contains("batch.jsonl:4: field `expectation.conditions[0].program_behaves.profile`")
            && errors.contains("pyhton"),
        "{errors}"
    );
    assert!(
        errors.contains(
            "batch.jsonl:5: field `expectation.conditions[0].program_behaves.cases[0].expected.stdout`"
        ) && errors.contains("equalz"),
        "{errors}"
    );
    // Invocations a program cannot be given never run: the line is at fault.
    assert!(
        errors.contains(
            "batch.jsonl:8: field `expectation.conditions[0].program_behaves.cases[0].invocation.args[0]`"
        ) && errors.contains("NUL byte"),
        "{errors}"
    );
    assert!(
        errors.contains(
            "batch.jsonl:9: field `expectation.conditions[0].program_behaves.cases[0].invocation.args`"
        ) && errors.contains("5000 argument(s)"),
        "{errors}"
    );
    assert!(
        errors.contains("batch.jsonl:6: field `program_file`") && errors.contains("nope.py"),
        "{errors}"
    );
    let results = result_lines(&stdout(&output));
    let ids: Vec<&str> = results.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.contains(&"good-1") && ids.contains(&"good-2"));

    let strict = dir.run(&["score", "--strict", "batch.jsonl"]);
    assert_eq!(strict.status.code(), Some(2));
    assert!(stdout(&strict).is_empty());
}

/// A batch line may bring the program's own limits (`program_behaves.limits`,
/// as datasets give a time limit per problem): the program runs under them,
/// the same program under the profile's limits is another attempt, and a bad
/// limit is a bad line naming its field.
#[test]
fn a_line_with_its_own_limits_runs_under_them() {
    let dir = Dir::new();
    let sleeper = r#"{"id": "ID", "program": "import time\ntime.sleep(2)\nprint('woke')\n", "expectation": {"conditions": [{"program_behaves": {"profile": "python", LIMITS"cases": [{"invocation": {"args": []}, "expected": {"stdout": {"equals": "woke"}}}]}}]}}"#;
    let line = |id: &str, limits: &str| sleeper.replace("ID", id).replace("LIMITS", limits);
    dir.write(
        "batch.jsonl",
        [
            line("profile-limits", ""),
            line(
                "own-limits",
                r#""limits": {"timeout": "800ms", "memory": "64MiB"}, "#,
            ),
            line("bad-limits", r#""limits": {"timeout": "forever"}, "#),
            line("bad-key", r#""limits": {"timout": "1s"}, "#),
        ]
        .join("\n"),
    );
    let output = dir.run(&["score", "batch.jsonl", "--jobs", "1"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let errors = stderr(&output);
    assert!(
        errors.contains(
            "batch.jsonl:3: field `expectation.conditions[0].program_behaves.limits.timeout`"
        ) && errors.contains("forever"),
        "{errors}"
    );
    assert!(
        errors.contains("batch.jsonl:4:") && errors.contains("timout"),
        "{errors}"
    );
    let lines = result_lines(&stdout(&output));
    let by_id = |id: &str| {
        lines
            .iter()
            .find(|line| line["id"] == id)
            .unwrap_or_else(|| panic!("no result for {id}: {lines:?}"))
            .clone()
    };
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(by_id("profile-limits")["value"], true);
    let own = by_id("own-limits");
    assert_eq!(own["value"], false, "{own}");
    assert_eq!(own["cases"][0]["outcome"], "timed_out", "{own}");
    assert_ne!(
        own["observation_ids"],
        by_id("profile-limits")["observation_ids"]
    );
}

/// A batch line's `files` are beside its program (read by a relative path,
/// included by a C++ compile); other content is another attempt; a path
/// that leaves the program's folder is a bad line naming it.
#[test]
fn a_lines_files_are_beside_its_program() {
    let dir = Dir::new();
    let reader = r#"{"id": "ID", "program": "print(int(open('data/n.txt').read()) ** 2)\n", "expectation": {"conditions": [{"program_behaves": {"profile": "python", "files": {"data/n.txt": "N\n"}, "cases": [{"invocation": {"args": []}, "expected": {"stdout": {"equals": "49"}}}]}}]}}"#;
    let line = |id: &str, n: &str| reader.replace("ID", id).replace("N", n);
    let header = r##"{"id": "header", "program": "#include <cstdio>\n#include \"square.h\"\nint main() { std::printf(\"%d\\n\", square(7)); }\n", "expectation": {"conditions": [{"program_behaves": {"profile": "cpp", "files": {"square.h": "int square(int x) { return x * x; }\n"}, "cases": [{"invocation": {"args": []}, "expected": {"stdout": {"equals": "49"}}}]}}]}}"##;
    let outside = r#"{"id": "outside", "program": "print(1)", "expectation": {"conditions": [{"program_behaves": {"profile": "python", "files": {"/etc/passwd": "x"}, "cases": [{"invocation": {"args": []}, "expected": {}}]}}]}}"#;
    dir.write(
        "batch.jsonl",
        [
            line("seven", "7"),
            line("eight", "8"),
            header.to_string(),
            outside.to_string(),
        ]
        .join("\n"),
    );
    let output = dir.run(&["score", "batch.jsonl", "--jobs", "2"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let errors = stderr(&output);
    assert!(
        errors.contains("batch.jsonl:4:") && errors.contains("file `/etc/passwd`"),
        "{errors}"
    );
    let lines = result_lines(&stdout(&output));
    let by_id = |id: &str| {
        lines
            .iter()
            .find(|line| line["id"] == id)
            .unwrap_or_else(|| panic!("no result for {id}: {lines:?}"))
            .clone()
    };
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(by_id("seven")["value"], true, "{}", by_id("seven"));
    assert_eq!(by_id("eight")["value"], false, "{}", by_id("eight"));
    assert_eq!(by_id("header")["value"], true, "{}", by_id("header"));
    assert_ne!(
        by_id("seven")["observation_ids"],
        by_id("eight")["observation_ids"]
    );
}

/// A batch line may name a language as harnesses spell it (`[languages]`):
/// scored under its profile, sharing the profile's evidence, and an unknown
/// name is a bad line that lists the names there are.
#[test]
fn a_language_name_scores_under_its_profile_and_shares_its_evidence() {
    let dir = Dir::new();
    // Into the generated `[languages]` table when setup wrote one.
    dir.edit_config(|text| {
        let entry = "test-py = \"python\"\n";
        match text.split_once("\n[languages]\n") {
            Some((before, after)) => format!("{before}\n[languages]\n{entry}{after}"),
            None => format!("{text}\n[languages]\n{entry}"),
        }
    });
    let by_language = square_item("by-language", "9").replace("\"python\"", "\"test-py\"");
    let unknown = square_item("unknown", "9").replace("\"python\"", "\"snake\"");
    dir.write(
        "batch.jsonl",
        format!(
            "{by_language}\n{}\n{unknown}\n",
            square_item("by-profile", "9")
        ),
    );
    let output = dir.run(&["score", "batch.jsonl", "--jobs", "1"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let lines = result_lines(&stdout(&output));
    let by_id = |id: &str| {
        lines
            .iter()
            .find(|line| line["id"] == id)
            .unwrap_or_else(|| panic!("no result for {id}: {lines:?}"))
            .clone()
    };
    assert_eq!(by_id("by-language")["value"], true);
    assert_eq!(by_id("by-profile")["value"], true);
    assert_eq!(by_id("by-profile")["evidence"], "stored");
    assert_eq!(
        by_id("by-profile")["observation_ids"],
        by_id("by-language")["observation_ids"]
    );
    let refusal = stderr(&output);
    let names: Vec<&str> = refusal
        .lines()
        .find_map(|line| {
            line.split_once("unknown profile `snake`; configured profiles and languages: ")
        })
        .map(|(_, names)| names.split(", ").collect())
        .unwrap_or_default();
    assert!(
        names.contains(&"test-py") && names.contains(&"python"),
        "{refusal}"
    );
}

#[test]
fn fail_on_sets_the_exit_status() {
    let dir = Dir::new();
    dir.write(
        "batch.jsonl",
        format!(
            "{}\n{}\n",
            square_item("right", "9"),
            square_item("wrong", "8")
        ),
    );
    assert_eq!(dir.run(&["score", "batch.jsonl"]).status.code(), Some(0));
    assert_eq!(
        dir.run(&["score", "batch.jsonl", "--fail-on", "false"])
            .status
            .code(),
        Some(1)
    );
    assert_eq!(
        dir.run(&["score", "batch.jsonl", "--fail-on", "undetermined"])
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn rescore_and_replay_use_stored_evidence_only() {
    let dir = Dir::new();
    dir.write(
        "batch.jsonl",
        format!("{}\n{}\n", square_item("a", "9"), square_item("b", "9")),
    );
    let output = dir.run(&["score", "batch.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let first = result_lines(&stdout(&output));
    let observation = first[0]["observation_ids"][0].as_str().unwrap().to_string();

    // Change one expectation: exactly that item's verdict changes.
    dir.write(
        "changed.jsonl",
        format!(
            "{}\n{}\n{}\n",
            square_item("a", "9"),
            square_item("b", "8"),
            square_item("c", "9").replace("[\"3\"]", "[\"5\"]")
        ),
    );
    let output = dir.run(&["rescore", "changed.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let lines = result_lines(&stdout(&output));
    let by_id: BTreeMap<&str, &serde_json::Value> = lines
        .iter()
        .map(|l| (l["id"].as_str().unwrap(), l))
        .collect();
    assert_eq!(by_id["a"]["changed"], false);
    assert_eq!(by_id["b"]["changed"], true);
    assert_eq!(verdict(by_id["b"]), "false");
    assert_eq!(verdict(by_id["c"]), "undetermined");
    assert!(
        by_id["c"]["reason"]
            .as_str()
            .unwrap()
            .contains("no stored evidence"),
        "{}",
        by_id["c"]
    );
    let report = stderr(&output);
    assert!(
        report.contains("1 verdict(s) changed") && report.contains("b: true -> false"),
        "{report}"
    );

    dir.write("expect8.json", r#"{"conditions": [{"program_behaves": {"profile": "python", "cases": [{"invocation": {"args": ["3"], "stdin": null}, "expected": {"stdout": {"equals": "8"}}}]}}]}"#);
    let output = dir.run(&["replay", &observation, "--expect", "expect8.json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let replayed: serde_json::Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(replayed["value"], false);
    assert_eq!(replayed["observation_ids"][0], observation.as_str());

    dir.write("other-args.json", r#"{"conditions": [{"program_behaves": {"profile": "python", "cases": [{"invocation": {"args": ["4"], "stdin": null}, "expected": {"stdout": {"equals": "16"}}}]}}]}"#);
    let output = dir.run(&["replay", &observation, "--expect", "other-args.json"]);
    assert_eq!(output.status.code(), Some(2));

    let listed = dir.run(&["observations", "list"]);
    assert_eq!(
        result_lines(&stdout(&listed)).len(),
        1,
        "one attempt, one observation"
    );
    let shown = dir.run(&["observations", "show", &observation]);
    assert!(stdout(&shown).contains("\"9\\n\""), "{}", stdout(&shown));
    let scores = dir.run(&["scores", "list", "--item", "b"]);
    assert_eq!(result_lines(&stdout(&scores)).len(), 2);
}

#[test]
fn comparators_are_listed_and_run_by_hand() {
    let dir = Dir::new();
    let output = dir.run(&["comparators"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let names: Vec<String> = result_lines(&stdout(&output))
        .iter()
        .map(|l| l["name"].as_str().unwrap().to_string())
        .collect();
    for builtin in ["equals", "contains", "regex", "json", "number", "lines"] {
        assert!(names.iter().any(|n| n == builtin), "{names:?}");
    }
    dir.write("observed.txt", "9\n");
    let output = dir.run(&[
        "compare",
        "equals",
        "--params",
        r#"{"value": "9"}"#,
        "--observed",
        "observed.txt",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // A truncated "9\n" could still trim to "9" or become "9\nx": undecidable.
    let output = dir.run(&[
        "compare",
        "equals",
        "--params",
        r#"{"value": "9"}"#,
        "--observed",
        "observed.txt",
        "--truncated",
    ]);
    assert_eq!(output.status.code(), Some(3), "{}", stdout(&output));
    let output = dir.run(&[
        "compare",
        "equals",
        "--params",
        r#"{"valeu": "9"}"#,
        "--observed",
        "observed.txt",
    ]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn an_interrupted_batch_cleans_up_and_resumes_without_running_anything_twice() {
    let dir = Dir::new();
    let items: Vec<String> = (0..8)
        .map(|i| {
            let program = format!("import time\\ntime.sleep(1.5)\\nprint({i})\\n");
            format!(
                r#"{{"id": "slow-{i}", "program": "{program}", "expectation": {{"conditions": [{{"program_behaves": {{"profile": "python", "cases": [{{"invocation": {{"args": []}}, "expected": {{"stdout": {{"equals": "{i}"}}}}}}]}}}}]}}}}"#
            )
        })
        .collect();
    dir.write("slow.jsonl", items.join("\n"));
    let before = OwnersPresent::now();
    let child = dir
        .command()
        .args(["score", "slow.jsonl", "--jobs", "2", "--out", "first.jsonl"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start progscore");
    let pid = child.id();
    let started = before.then_started(pid);
    // Interrupt once the first result is written (a fresh machine first
    // compiles the comparators, so a fixed delay would not do).
    let first_path = dir.path().join("first.jsonl");
    let waited = std::time::Instant::now();
    while std::fs::read_to_string(&first_path).map_or(true, |t| t.lines().count() == 0) {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(120),
            "no result after 120 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: sends SIGINT to our own child process.
    unsafe {
        libc_kill(pid as i32, 2);
    }
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    // Nothing of that process is left: containers, cgroups, processes.
    assert_eq!(started.leftovers(), Vec::<String>::new());
    let first = result_lines(&std::fs::read_to_string(dir.path().join("first.jsonl")).unwrap());
    assert!(
        !first.is_empty() && first.len() < 8,
        "{} scored before the interrupt",
        first.len()
    );

    let output = dir.run(&["score", "slow.jsonl", "--jobs", "4"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let second = result_lines(&stdout(&output));
    assert_eq!(second.len(), 8);
    let stored = second.iter().filter(|l| l["evidence"] == "stored").count();
    assert_eq!(
        stored,
        first.len(),
        "items finished before the interrupt were not run again"
    );
    let observations = result_lines(&stdout(&dir.run(&["observations", "list"])));
    assert_eq!(observations.len(), 8, "each item ran exactly once");
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, signal: i32) -> i32;
}

/// A profile whose image is not present is refused before anything runs:
/// its items are reported with the reason and the fix, nothing is stored for
/// them, the other items are scored, and the exit status says so.
#[test]
fn items_of_a_profile_that_cannot_run_are_refused_before_anything_runs() {
    let dir = Dir::new();
    dir.edit_config(|mut config| {
        config.push_str(
            "\n[profiles.absent]\nbackend = \"docker\"\nimage = \"127.0.0.1:5000/python-sandbox@sha256:0000000000000000000000000000000000000000000000000000000000000000\"\ncommand = [\"python3\", \"-I\"]\n",
        );
        config
    });
    let absent = |id: &str| square_item(id, "9").replace("\"python\"", "\"absent\"");
    let text = [
        square_item("good", "9"),
        absent("absent-1"),
        absent("absent-2"),
        absent("absent-3"),
    ]
    .join("\n");
    dir.write("batch.jsonl", text);
    let output = dir.run(&["score", "batch.jsonl"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let errors = stderr(&output);
    assert!(
        errors.contains("profile `absent` cannot run here")
            && errors.contains("never pulls images")
            && errors.contains("3 item(s) of it not scored"),
        "{errors}"
    );
    let results = result_lines(&stdout(&output));
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["id"], "good");
    let scores = dir.run(&["scores", "list"]);
    let listed = stdout(&scores);
    assert!(
        listed.contains("good") && !listed.contains("absent-"),
        "{listed}"
    );
}

/// Undetermined verdicts are summed up by kind, never one line per container.
#[test]
fn the_summary_groups_undetermined_reasons_by_kind() {
    let dir = Dir::new();
    dir.edit_config(|config| {
        progscore_test_kit::replace_required(&config, "output = \"64KiB\"", "output = \"8B\"")
    });
    let flood = |i: usize| {
        serde_json::json!({
            "id": format!("flood-{i}"),
            "program": format!("# {i}\nprint('x' * 100)\n"),
            "expectation": {"conditions": [{"program_behaves": {"profile": "python", "cases": [
                {"invocation": {"args": []}, "expected": {"stdout": {"contains": "y"}}}]}}]},
        })
        .to_string()
    };
    dir.write(
        "batch.jsonl",
        (0..4).map(flood).collect::<Vec<_>>().join("\n"),
    );
    let output = dir.run(&["score", "batch.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let errors = stderr(&output);
    assert!(errors.contains("undetermined, by reason:"), "{errors}");
    let kinds: Vec<&str> = errors
        .lines()
        .skip_while(|l| !l.contains("undetermined, by reason:"))
        .skip(1)
        .collect();
    assert_eq!(kinds.len(), 1, "{errors}");
    assert!(
        kinds[0]
            .trim_start()
            .starts_with("4  comparator could not decide"),
        "{errors}"
    );
    for line in result_lines(&stdout(&output)) {
        assert_eq!(line["reason_kind"], "comparator_undecided", "{line}");
    }
}

/// Replay refusals reach the user: an observation that is not stored, and
/// one changed in the database behind progscore's back, are refused with
/// what is wrong, and nothing is written.
#[test]
fn replay_refuses_an_unknown_or_tampered_observation() {
    let dir = Dir::new();
    dir.write("batch.jsonl", square_item("a", "9"));
    let output = dir.run(&["score", "batch.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let observation = result_lines(&stdout(&output))[0]["observation_ids"][0]
        .as_str()
        .unwrap()
        .to_string();
    dir.write("expect.json", r#"{"conditions": [{"program_behaves": {"profile": "python", "cases": [{"invocation": {"args": ["3"], "stdin": null}, "expected": {"stdout": {"equals": "9"}}}]}}]}"#);
    let scores = |dir: &Dir| result_lines(&stdout(&dir.run(&["scores", "list"]))).len();
    let before = scores(&dir);

    let unknown = dir.run(&["replay", "obs-0123456789abcdef", "--expect", "expect.json"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        stderr(&unknown).contains("observation obs-0123456789abcdef is not stored"),
        "{}",
        stderr(&unknown)
    );

    let store = rusqlite::Connection::open(dir.path().join("evidence.db")).unwrap();
    store
        .execute_batch(
            "DROP TRIGGER observations_no_update;
             UPDATE observations SET run = replace(run, '\"9\\n\"', '\"8\\n\"');",
        )
        .unwrap();
    drop(store);
    let tampered = dir.run(&["replay", &observation, "--expect", "expect.json"]);
    assert_eq!(tampered.status.code(), Some(2));
    assert!(
        stderr(&tampered).contains(&format!("observation {observation} is tampered")),
        "{}",
        stderr(&tampered)
    );
    assert_eq!(scores(&dir), before, "a refused replay wrote a score");
}

/// A machine with no Docker at all: a config of WASI profiles scores,
/// replays and rescores without ever reaching for an engine.
#[test]
fn the_wasi_profile_scores_replays_and_rescores_without_docker() {
    let dir = Dir::new();
    dir.edit_config(|config| {
        let wasi = config
            .find("[profiles.python-wasi]")
            .expect("the generated config has a WASI profile");
        format!("[store]\npath = \"evidence.db\"\n\n{}", &config[wasi..])
    });
    let item = square_item("w", "9").replace("\"python\"", "\"python-wasi\"");
    dir.write("batch.jsonl", &item);
    let no_docker = |args: &[&str]| {
        dir.command()
            .args(args)
            .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
            .output()
            .expect("run progscore")
    };
    let scored = no_docker(&["score", "batch.jsonl"]);
    assert_eq!(scored.status.code(), Some(0), "{}", stderr(&scored));
    let line = &result_lines(&stdout(&scored))[0];
    assert_eq!(verdict(line), "true", "{line}");
    let observation = line["observation_ids"][0].as_str().unwrap().to_string();

    dir.write("expect8.json", r#"{"conditions": [{"program_behaves": {"profile": "python-wasi", "cases": [{"invocation": {"args": ["3"], "stdin": null}, "expected": {"stdout": {"equals": "8"}}}]}}]}"#);
    let replayed = no_docker(&["replay", &observation, "--expect", "expect8.json"]);
    assert_eq!(replayed.status.code(), Some(0), "{}", stderr(&replayed));
    let replayed: serde_json::Value = serde_json::from_str(stdout(&replayed).trim()).unwrap();
    assert_eq!(replayed["value"], false);

    dir.write("changed.jsonl", item.replace("\"9\"", "\"8\""));
    let rescored = no_docker(&["rescore", "changed.jsonl"]);
    assert_eq!(rescored.status.code(), Some(0), "{}", stderr(&rescored));
    let line = &result_lines(&stdout(&rescored))[0];
    assert_eq!(verdict(line), "false", "{line}");
    assert_eq!(line["changed"], true);
}

/// A damaged store is the store's fault, not each line's: said once, with
/// the file and how to check it, and the rescore stops (exit 2).
#[test]
fn a_damaged_store_is_reported_once_naming_the_file() {
    let dir = Dir::new();
    let batch: String = (0..12)
        .map(|i| square_item(&format!("sq-{i}"), "9") + "\n")
        .collect();
    dir.write("batch.jsonl", &batch);
    let output = dir.run(&["score", "batch.jsonl", "--out", "first.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // Overwrite the observations table's root page, leaving the schema intact.
    let path = dir.path().join("evidence.db");
    let (root, page_size): (i64, i64) = {
        let store = rusqlite::Connection::open(&path).unwrap();
        store
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        let root = store
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'observations'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        let page_size = store
            .query_row("PRAGMA page_size", [], |row| row.get(0))
            .unwrap();
        (root, page_size)
    };
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.seek(SeekFrom::Start(((root - 1) * page_size) as u64))
            .unwrap();
        file.write_all(&[0x0d; 1]).unwrap();
        file.write_all(&[0xff; 64]).unwrap();
    }
    let output = dir.run(&["rescore", "batch.jsonl", "--out", "again.jsonl"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert_eq!(message.matches("evidence store").count(), 1, "{message}");
    assert!(message.contains("evidence.db"), "{message}");
    assert!(message.contains("PRAGMA integrity_check"), "{message}");
    assert!(message.contains("stopped at batch.jsonl:1"), "{message}");
}

/// The square program on four cases, one of them expecting a wrong answer,
/// under a score policy (`null`: none).
fn square_four_cases(id: &str, policy: serde_json::Value) -> String {
    let cases: Vec<serde_json::Value> = [("1", "1"), ("2", "4"), ("3", "0"), ("4", "16")]
        .iter()
        .map(|(arg, expected)| {
            serde_json::json!({"invocation": {"args": [arg], "stdin": null},
                "expected": {"stdout": {"equals": expected}}})
        })
        .collect();
    let mut behaves = serde_json::json!({"profile": "python", "cases": cases});
    if !policy.is_null() {
        behaves["score"] = policy;
    }
    serde_json::json!({"id": id, "program": "import sys\nprint(int(sys.argv[1]) ** 2)\n",
        "expectation": {"conditions": [{"program_behaves": behaves}]}})
    .to_string()
}

#[test]
fn score_policies_give_partial_scores_and_a_rescore_with_subtasks_runs_nothing() {
    let dir = Dir::new();
    dir.write(
        "batch.jsonl",
        square_four_cases("square", serde_json::json!({"policy": "fraction"})) + "\n",
    );
    let output = dir.run(&["score", "batch.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let line = &result_lines(&stdout(&output))[0];
    assert_eq!(line["score"], 0.75, "{line}");
    assert_eq!(verdict(line), "false", "not full marks: {line}");
    let summary = stderr(&output);
    assert!(summary.contains("mean score      0.7500"), "{summary}");

    // IOI's subtasks over the same evidence: nothing runs (no engine is
    // asked: the rescore works with none), and the points are per group.
    dir.write(
        "subtasks.jsonl",
        square_four_cases(
            "square",
            serde_json::json!({"policy": "groups", "groups": [
                {"name": "small", "cases": [0, 1], "points": 30},
                {"name": "large", "cases": [2, 3], "points": 70}]}),
        ) + "\n",
    );
    let output = dir.run(&["rescore", "subtasks.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let line = &result_lines(&stdout(&output))[0];
    assert_eq!(line["score"], 0.3, "{line}");
    assert_eq!(line["evidence"], "stored", "{line}");
    assert_eq!(
        line["groups"],
        serde_json::json!([
            {"name": "small", "points": 30.0, "earned": 30.0},
            {"name": "large", "points": 70.0, "earned": 0.0}]),
        "{line}"
    );
    let report = stderr(&output);
    assert!(
        report.contains("square: false (score 0.7500) -> false (score 0.3000)"),
        "{report}"
    );
    // A policy that does not fit is a bad line naming the field.
    dir.write(
        "bad.jsonl",
        square_four_cases(
            "square",
            serde_json::json!({"policy": "weighted", "weights": [1]}),
        ) + "\n",
    );
    let output = dir.run(&["rescore", "bad.jsonl"]);
    let report = stderr(&output);
    assert!(
        report.contains(
            "bad.jsonl:1: field `expectation.conditions[0].program_behaves.score.weights`"
        ),
        "{report}"
    );
}
