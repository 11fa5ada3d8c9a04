//! `progscore run`, `profiles`, `doctor`.

use std::path::Path;

use progscore_e2e::{Dir, stderr, stdout};

const SQUARE: &str = "import sys\nprint(int(sys.argv[1]) ** 2)\n";

fn json(output: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", stdout(output), stderr(output)))
}

#[test]
fn the_doc_example_prints_nine() {
    let dir = Dir::new();
    dir.write("square.py", SQUARE);
    let output = dir.run(&["run", "--profile", "python", "square.py", "--", "3"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let run = json(&output);
    let event = &run["events"][0];
    assert_eq!(event["outcome"], "exited");
    assert_eq!(event["exit_code"], 0);
    assert_eq!(event["stdout"]["data"], "9\n");
    assert_eq!(event["stdout"]["truncated"], false);
    assert_eq!(event["stdout"]["total_bytes"], 2);
    assert_eq!(event["provenance"]["backend"], "docker");
    assert_eq!(event["provenance"]["command"][3], "3");
    assert!(event["duration_ms"].as_u64().is_some());
}

#[test]
fn stdin_file_and_invocations_file() {
    let dir = Dir::new();
    dir.write(
        "echo.py",
        "import sys\ndata = sys.stdin.read()\nprint(sys.argv[1:], data.upper())\n",
    );
    dir.write("in.txt", "hello");
    let output = dir.run(&[
        "run",
        "--profile",
        "python",
        "--stdin",
        "in.txt",
        "echo.py",
        "--",
        "a",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        json(&output)["events"][0]["stdout"]["data"],
        "['a'] HELLO\n"
    );

    dir.write(
        "cases.jsonl",
        "{\"args\": [\"x\"], \"stdin\": \"one\"}\n\n{\"args\": [], \"stdin\": null}\n{\"args\": [\"y\", \"z\"]}\n",
    );
    let output = dir.run(&[
        "run",
        "--profile",
        "python",
        "--invocations",
        "cases.jsonl",
        "echo.py",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let run = json(&output);
    let outs: Vec<&str> = run["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["stdout"]["data"].as_str().unwrap())
        .collect();
    assert_eq!(outs, ["['x'] ONE\n", "[] \n", "['y', 'z'] \n"]);
    let containers: std::collections::HashSet<&str> = run["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["provenance"]["container"].as_str().unwrap())
        .collect();
    assert_eq!(containers.len(), 3, "one fresh container per invocation");
}

#[test]
fn a_bad_invocations_line_names_file_and_line() {
    let dir = Dir::new();
    dir.write("square.py", SQUARE);
    dir.write("cases.jsonl", "{\"args\": [\"1\"]}\n{\"argz\": []}\n");
    let output = dir.run(&[
        "run",
        "--profile",
        "python",
        "--invocations",
        "cases.jsonl",
        "square.py",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(message.contains("cases.jsonl:2"), "{message}");
}

#[test]
fn an_invocation_that_cannot_be_delivered_is_a_usage_error() {
    let dir = Dir::new();
    dir.write("square.py", SQUARE);
    dir.write(
        "cases.jsonl",
        "{\"args\": [\"1\"]}\n{\"args\": [\"a\\u0000b\"]}\n",
    );
    let output = dir.run(&[
        "run",
        "--profile",
        "python",
        "--invocations",
        "cases.jsonl",
        "square.py",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("cases.jsonl") && message.contains("invocation 1: field `args[0]`"),
        "{message}"
    );
    assert!(message.contains("NUL byte"), "{message}");
    let many = serde_json::json!({"args": vec!["y".repeat(1000); 5000]});
    dir.write("many.jsonl", many.to_string());
    let output = dir.run(&[
        "run",
        "--profile",
        "python",
        "--invocations",
        "many.jsonl",
        "square.py",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("field `args`"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn an_unknown_profile_is_a_usage_error() {
    let dir = Dir::new();
    dir.write("square.py", SQUARE);
    let output = dir.run(&["run", "--profile", "pyhton", "square.py", "--", "3"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("pyhton") && message.contains("python"),
        "{message}"
    );
}

#[test]
fn a_tagged_image_in_the_config_is_refused_naming_file_line_and_profile() {
    let dir = Dir::new();
    let config = dir.path().join("progscore.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[profiles.tagged]\nbackend = \"docker\"\nimage = \"python:3.12\"\ncommand = [\"python3\"]\n");
    std::fs::write(&config, &text).unwrap();
    let line = text.lines().position(|l| l == "[profiles.tagged]").unwrap() + 1;
    dir.write("square.py", SQUARE);
    let output = dir.run(&["run", "--profile", "python", "square.py", "--", "3"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains(&format!("progscore.toml:{line}: profile `tagged`")),
        "{message}"
    );
    assert!(message.contains("python:3.12"), "{message}");
}

#[test]
fn profiles_and_doctor_describe_the_setup() {
    let dir = Dir::new();
    let output = dir.run(&["profiles", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let profiles = json(&output);
    let names: Vec<&str> = profiles
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"python") && names.contains(&"python-gvisor"),
        "{names:?}"
    );
    let output = dir.run(&["doctor", "--json"]);
    assert!(
        output.status.success(),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    let report = json(&output);
    assert_eq!(report["ok"], true);
    assert!(
        report["docker"][0]["runtimes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "runsc")
    );
}

#[test]
fn doctor_explains_a_missing_runtime() {
    let dir = Dir::new();
    let config = dir.path().join("progscore.toml");
    let text = progscore_test_kit::replace_required(
        &std::fs::read_to_string(&config).unwrap(),
        "runtime = \"runsc\"",
        "runtime = \"kata\"",
    );
    std::fs::write(&config, text).unwrap();
    let output = dir.run(&["doctor"]);
    assert_eq!(output.status.code(), Some(1));
    let report = stdout(&output);
    assert!(
        report.contains("[FAIL] profile python-gvisor") && report.contains("daemon.json"),
        "{report}"
    );
}

/// `doctor` lists the OCI image cache and checks each tree: a file changed
/// after unpacking fails the check (exit 1, the problem named), and the
/// next use rebuilds the image rather than run the changed tree.
#[test]
fn doctor_checks_the_oci_image_cache_and_a_changed_tree_is_rebuilt() {
    let dir = Dir::new();
    dir.edit_config(|text| format!("{text}\n[oci]\nimage_cache = \"oci-cache\"\n"));
    let doctor = || {
        let output = dir.run(&["doctor", "--json"]);
        (output.status.code(), json(&output))
    };
    let (code, report) = doctor();
    assert_eq!(code, Some(0), "{report}");
    let cache = report["oci_cache"].as_array().expect("the cache is listed");
    assert_eq!(cache.len(), 1, "{report}");
    assert_eq!(cache[0]["ok"], true, "{report}");
    assert!(
        cache[0]["reference"]
            .as_str()
            .is_some_and(|r| r.contains("python-sandbox@sha256:")),
        "{report}"
    );

    let passwd = find_file(&dir.path().join("oci-cache"), Path::new("etc/passwd"))
        .expect("the unpacked tree holds etc/passwd");
    let mut text = std::fs::read_to_string(&passwd).unwrap();
    text.push_str("intruder:x:0:0::/root:/bin/sh\n");
    std::fs::write(&passwd, text).unwrap();

    let (code, report) = doctor();
    assert_eq!(code, Some(1), "{report}");
    let problems = report["oci_cache"][0]["problems"].to_string();
    assert!(
        problems.contains("changed since it was prepared"),
        "{report}"
    );
    assert_eq!(report["oci_cache"][0]["rebuilt"], true, "{report}");
    // The profiles' checks use the image, and so rebuilt it.
    assert!(
        report["oci"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["ok"] == true),
        "{report}"
    );
    // The rebuild is a new tree beside the changed one (which a running
    // program may still use); the cache now names the new one.
    let current = report["oci_cache"][0]["dir"]
        .as_str()
        .expect("the tree's folder");
    let current = dir.path().join(current).join("rootfs/etc/passwd");
    assert_ne!(current, passwd, "{report}");
    let rebuilt = std::fs::read_to_string(&current).unwrap();
    assert!(!rebuilt.contains("intruder"), "{rebuilt}");
    let (code, report) = doctor();
    assert_eq!(code, Some(0), "{report}");
}

/// The first file below `root` whose path ends with `tail`.
fn find_file(root: &Path, tail: &Path) -> Option<std::path::PathBuf> {
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).ok()?.flatten() {
            let path = entry.path();
            let kind = entry.file_type().ok()?;
            if kind.is_file() && path.ends_with(tail) {
                return Some(path);
            } else if kind.is_dir() {
                pending.push(path);
            }
        }
    }
    None
}

/// The built-in comparators need no config: with no `progscore.toml`,
/// `compare` uses them; a config named but missing is still an error.
#[test]
fn compare_runs_the_built_ins_without_a_config() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("out.txt"), "9\n").unwrap();
    let compare = |extra: &[&str]| {
        std::process::Command::new(progscore_e2e::binary())
            .current_dir(dir.path())
            .env_remove("PROGSCORE_CONFIG")
            .args(extra)
            .args([
                "compare",
                "equals",
                "--params",
                r#"{"value": "9"}"#,
                "--observed",
                "out.txt",
            ])
            .output()
            .unwrap()
    };
    let output = compare(&[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(json(&output)["verdict"], "match");
    let output = compare(&["--config", "missing.toml"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("missing.toml"),
        "{}",
        stderr(&output)
    );
}

/// Log lines written to a pipe carry no colour codes.
#[test]
fn logs_to_a_pipe_are_plain_text() {
    let dir = Dir::new();
    dir.write("square.py", SQUARE);
    let output = dir
        .command()
        .env("PROGSCORE_LOG", "debug")
        .args(["run", "--profile", "python", "square.py", "--", "3"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let log = stderr(&output);
    assert!(log.contains("DEBUG"), "no log lines to check: {log}");
    assert!(!log.contains('\u{1b}'), "colour codes in a pipe: {log:?}");
}
