//! The compiled languages end to end: every language's profile (as
//! `scripts/setup.sh --languages all` writes it) builds and runs programs
//! under the full hardening, a program that does not compile is a proven
//! `compile_error`, stored evidence is reused without compiling, the same
//! batch runs without a daemon, and a batch stopped during a compile leaves
//! nothing behind.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use progscore_e2e::{Dir, result_lines, stderr, stdout, verdict};

use progscore_test_kit::leftovers::OwnersPresent;

/// Every run with a CPU-time limit well below its wall-clock one: a busy
/// loop then ends at the CPU limit, a timeout that is always proven, on a
/// quiet machine or a busy one. (Under a wall-clock limit alone, a loop
/// starved by other work on the machine is rightly left undetermined, and a
/// program whose launcher's processes ended (R's and Scala's shell wrappers)
/// can be proven only by the CPU it used, which a loaded machine does not
/// give it.) Every test here that expects a timeout runs under these limits.
fn dir_with_short_timeouts_and_cpu_limits() -> Dir {
    let dir = Dir::new();
    dir.edit_config(|text| {
        progscore_test_kit::replace_required(
            &text,
            "timeout = \"10s\"",
            &format!("timeout = \"{CPU_BOUND_TIMEOUT}\"\ncpu_time = \"{CPU_TIME}\""),
        )
    });
    dir
}

/// The CPU-time limit of [`dir_with_short_timeouts_and_cpu_limits`] (long
/// enough for a JVM's start), and a wall-clock limit far enough above it
/// that a busy loop reaches it even on a machine that gives it a fifth of a
/// CPU.
const CPU_TIME: &str = "4s";
const CPU_BOUND_TIMEOUT: &str = "20s";

fn probe_source(language: &str, extension: &str, probe: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("languages/programs")
        .join(language)
        .join(format!("{probe}.{extension}"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `progscore run` of `source` under `language` with these invocations; the
/// run's JSON, after checking that the process left nothing behind.
fn run(
    dir: &Dir,
    language: &str,
    source: &str,
    invocations: &[serde_json::Value],
) -> serde_json::Value {
    dir.write("program", source);
    let lines: Vec<String> = invocations.iter().map(|i| i.to_string()).collect();
    dir.write("invocations.jsonl", lines.join("\n") + "\n");
    let before = OwnersPresent::now();
    let child = dir
        .command()
        .args([
            "run",
            "--profile",
            language,
            "program",
            "--invocations",
            "invocations.jsonl",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start progscore");
    let pid = child.id();
    let started = before.then_started(pid);
    let output = child.wait_with_output().expect("progscore ran");
    assert!(output.status.success(), "{language}: {}", stderr(&output));
    assert_eq!(
        started.leftovers_after(Duration::from_secs(5)),
        Vec::<String>::new(),
        "{language}"
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{language}: not JSON ({e}): {}", stdout(&output)))
}

fn no_args() -> serde_json::Value {
    serde_json::json!({"args": []})
}

fn text(event: &serde_json::Value, stream: &str) -> String {
    event[stream]["data"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Every probe of one language; each assertion names the language and probe.
fn probes(language: &str, extension: &str) {
    let dir = dir_with_short_timeouts_and_cpu_limits();
    let source_path = format!("/sandbox/{}", source_name(language, extension));
    let probe = |name: &str, invocations: &[serde_json::Value]| {
        let ran = run(
            &dir,
            language,
            &probe_source(language, extension, name),
            invocations,
        );
        if language != "javascript" {
            assert_eq!(
                ran["compile"]["outcome"], "exited",
                "{language} {name}: {ran}"
            );
            assert_eq!(ran["compile"]["exit_code"], 0, "{language} {name}: {ran}");
        } else {
            assert!(ran.get("compile").is_none(), "{ran}");
        }
        ran["events"][0].clone()
    };

    let event = probe("network", &[no_args()]);
    assert_eq!(
        text(&event, "stdout"),
        "unreachable\n",
        "{language} network: {event}"
    );

    let event = probe("write_paths", &[serde_json::json!({"args": [source_path]})]);
    assert_eq!(
        text(&event, "stdout"),
        "denied\ndenied\ndenied\n",
        "{language}: the program, the build or the root could be written: {event}"
    );

    let event = probe("fork_bomb", &[no_args()]);
    assert_eq!(event["outcome"], "exited", "{language} fork bomb: {event}");
    assert_eq!(
        text(&event, "stdout"),
        "contained\n",
        "{language} fork bomb: {event}"
    );

    let event = probe("memory_hog", &[no_args()]);
    match language {
        // Their runtimes cap their own heaps below the container's memory
        // (the profiles say so): either cap may end the program first.
        "java" | "javascript" => {
            let own = event["outcome"] == "exited"
                && event["exit_code"] != 0
                && text(&event, "stderr").to_lowercase().contains("memory");
            assert!(
                event["outcome"] == "memory_limit" || own,
                "{language} memory hog: {event}"
            );
        }
        _ => assert_eq!(
            event["outcome"], "memory_limit",
            "{language} memory hog: {event}"
        ),
    }

    let event = probe("busy_loop", &[no_args()]);
    assert_eq!(
        event["outcome"], "timed_out",
        "{language} busy loop: {event}"
    );

    let stdin = "hello\nworld\n";
    let event = probe(
        "echo",
        &[serde_json::json!({"args": ["a", "b c", "", "d$e"], "stdin": stdin})],
    );
    assert_eq!(event["outcome"], "exited", "{language} echo: {event}");
    assert_eq!(text(&event, "stdout"), stdin, "{language} echo: {event}");
    assert_eq!(
        text(&event, "stderr"),
        "a\nb c\n\nd$e\n",
        "{language} echo: {event}"
    );

    // A program that does not build: a proven failure quoting the compiler.
    let broken = match language {
        "c" | "cpp" => "int main(void) { return missing(; }\n",
        "rust" => "fn main() { let x = ; }\n",
        "go" => "package main\nfunc main() { x := }\n",
        "java" => "public class Main { public static void main(String[] a) { int x = ; } }\n",
        _ => "console.log((;\n",
    };
    let ran = run(&dir, language, broken, &[no_args(), no_args()]);
    if language == "javascript" {
        // Nothing is compiled: the syntax error is the run's own failure.
        let event = &ran["events"][0];
        assert_eq!(event["exit_code"], 1, "{ran}");
        assert!(text(event, "stderr").contains("SyntaxError"), "{ran}");
    } else {
        assert_ne!(ran["compile"]["exit_code"], 0, "{language}: {ran}");
        assert!(
            !text(&ran["compile"], "stderr").is_empty(),
            "{language}: {ran}"
        );
        for event in ran["events"].as_array().unwrap() {
            assert_eq!(event["outcome"], "compile_error", "{language}: {ran}");
            let reason = event["reason"].as_str().unwrap();
            assert!(
                reason.starts_with("the compiler exited with code"),
                "{reason}"
            );
        }
    }
}

fn source_name(language: &str, extension: &str) -> String {
    match language {
        "java" => "Main.java".into(),
        _ => format!("main.{extension}"),
    }
}

#[test]
fn c_is_hardened_and_compile_errors_are_proven() {
    probes("c", "c");
}

#[test]
fn cpp_is_hardened_and_compile_errors_are_proven() {
    probes("cpp", "cpp");
}

#[test]
fn rust_is_hardened_and_compile_errors_are_proven() {
    probes("rust", "rs");
}

#[test]
fn go_is_hardened_and_compile_errors_are_proven() {
    probes("go", "go");
}

#[test]
fn java_is_hardened_and_compile_errors_are_proven() {
    probes("java", "java");
}

#[test]
fn javascript_is_hardened_and_syntax_errors_fail() {
    probes("javascript", "js");
}

fn examples() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/languages")
}

fn documented_verdicts() -> BTreeMap<String, String> {
    progscore_e2e::documented_verdicts(&examples().join("expected-verdicts.txt"))
}

/// Runs `progscore ARGS` in `dir`: its result lines, and how many
/// containers the process created (from the engine's event log).
fn counting_containers(dir: &Dir, args: &[&str]) -> (Vec<serde_json::Value>, usize) {
    let since = unix_now();
    let child = dir
        .command()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start progscore");
    let pid = child.id();
    let output = child.wait_with_output().expect("progscore ran");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let created = containers_created_by(pid, since);
    (result_lines(&stdout(&output)), created)
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Containers created since `since` by progscore process `pid`, as the
/// engine's event log tells (the owner label names the pid). The engine
/// keeps only its last 256 events: a count of many is a lower bound.
fn containers_created_by(pid: u32, since: f64) -> usize {
    let output = std::process::Command::new("docker")
        .args([
            "events",
            "--since",
            &format!("{since:.3}"),
            "--until",
            &format!("{:.3}", unix_now()),
            "--filter",
            "type=container",
            "--filter",
            "event=create",
            "--format",
            "{{index .Actor.Attributes \"progscore.owner\"}}",
        ])
        .output()
        .expect("docker events");
    let owner = format!("progscore-docker-{pid}-");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.starts_with(&owner))
        .count()
}

fn verdicts(lines: &[serde_json::Value]) -> BTreeMap<String, String> {
    lines
        .iter()
        .map(|line| (line["id"].as_str().unwrap().to_string(), verdict(line)))
        .collect()
}

/// The documented batch: every verdict as documented; scoring it again
/// compiles nothing and runs nothing; `rescore` changes nothing. Its
/// infinite loops are documented `false`: a proven timeout, which only a
/// CPU-time limit gives on a busy machine (under a wall-clock limit alone a
/// starved loop is rightly left undetermined).
#[test]
fn the_language_batch_gets_its_documented_verdicts_and_is_never_compiled_twice() {
    let dir = dir_with_short_timeouts_and_cpu_limits();
    let batch = examples().join("batch.jsonl");
    let batch = batch.to_str().unwrap();
    let (first, _) = counting_containers(&dir, &["score", batch, "--jobs", "4"]);
    assert_eq!(verdicts(&first), documented_verdicts());
    let compile_errors = first
        .iter()
        .filter(|line| {
            line["cases"]
                .as_array()
                .unwrap()
                .iter()
                .all(|case| case["outcome"] == "compile_error")
        })
        .count();
    assert_eq!(compile_errors, 5, "one compile error per compiled language");
    // The engine's event backlog (256 events) is shared with every test
    // running beside this one, so the first run's many containers are not
    // counted: its lines say that it ran each item.
    for line in &first {
        assert_eq!(line["evidence"], "ran", "{line}");
    }

    // An item whose run had a case that proved nothing (a timeout a busy
    // machine could not prove, after another case had already decided the
    // verdict) is not reusable evidence: it runs again. Every other item is
    // answered from the store.
    let unproven: std::collections::BTreeSet<&str> = first
        .iter()
        .filter(|line| {
            line["cases"]
                .as_array()
                .unwrap()
                .iter()
                .any(|case| case["matched"].is_null())
        })
        .map(|line| line["id"].as_str().unwrap())
        .collect();
    let (again, created) = counting_containers(&dir, &["score", batch, "--jobs", "4"]);
    assert_eq!(verdicts(&again), documented_verdicts());
    if unproven.is_empty() {
        assert_eq!(created, 0, "scoring stored evidence started containers");
    }
    for line in &again {
        if !unproven.contains(line["id"].as_str().unwrap()) {
            assert_eq!(line["evidence"], "stored", "{line}");
        }
    }

    let (rescored, created) = counting_containers(&dir, &["rescore", batch]);
    assert_eq!(verdicts(&rescored), documented_verdicts());
    assert!(rescored.iter().all(|line| line["changed"] == false));
    assert_eq!(created, 0, "rescore started containers");
}

/// The C and C++ items with their profiles switched to the daemonless
/// backend: the same verdicts, with `oci` in the provenance of the compile.
#[test]
fn c_and_cpp_get_the_same_verdicts_without_a_daemon() {
    let dir = dir_with_short_timeouts_and_cpu_limits();
    dir.edit_config(|text| {
        let mut out = String::new();
        let mut in_c_profile = false;
        for line in text.lines() {
            if line.starts_with("[profiles.") {
                in_c_profile = line == "[profiles.c]" || line == "[profiles.cpp]";
            }
            if in_c_profile && line == "backend = \"docker\"" {
                out.push_str("backend = \"oci\"\n");
            } else {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    });
    let batch: String = std::fs::read_to_string(examples().join("batch.jsonl"))
        .unwrap()
        .lines()
        .filter(|line| line.contains("\"id\": \"c/") || line.contains("\"id\": \"cpp/"))
        .map(|line| format!("{line}\n"))
        .collect();
    dir.write("batch.jsonl", &batch);
    let output = dir.run(&["score", "batch.jsonl", "--jobs", "4"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let lines = result_lines(&stdout(&output));
    let documented = documented_verdicts();
    assert_eq!(lines.len(), 18);
    for line in &lines {
        let id = line["id"].as_str().unwrap();
        assert_eq!(verdict(line), documented[id], "{line}");
    }
    let observation = lines[0]["observation_ids"][0].as_str().unwrap();
    let shown = dir.run(&["observations", "show", observation]);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", stdout(&shown), stderr(&shown));
    });
    let compile = &shown["run"]["compile"];
    assert_eq!(compile["provenance"]["backend"], "oci", "{shown}");
}

/// SIGTERM while a compiler runs: the batch stops with 143 and neither the
/// compile's container nor anything else of the process is left.
#[test]
fn a_batch_stopped_during_a_compile_leaves_nothing_behind() {
    let dir = Dir::new();
    // The whole standard library at -O2: a few seconds of g++.
    let items: Vec<String> = (0..6)
        .map(|i| {
            serde_json::json!({
                "id": format!("heavy-{i}"),
                "program": format!("#include <bits/stdc++.h>\nint main() {{ std::map<int, std::string> m{{{{ {i}, \"x\" }}}}; std::cout << m.size() << std::endl; }}\n"),
                "expectation": {"conditions": [{"program_behaves": {"profile": "cpp", "cases": [
                    {"invocation": {"args": []}, "expected": {"stdout": {"equals": "1"}}}]}}]},
            })
            .to_string()
        })
        .collect();
    dir.write("batch.jsonl", items.join("\n"));
    let before = OwnersPresent::now();
    let child = dir
        .command()
        .args(["score", "batch.jsonl", "--jobs", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start progscore");
    let pid = child.id();
    let started = before.then_started(pid);
    // Wait until a compiler runs in one of this process's containers.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !compiler_running(pid) {
        assert!(std::time::Instant::now() < deadline, "no compile started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
    unsafe {
        libc::kill(i32::try_from(pid).unwrap(), libc::SIGTERM);
    }
    let output = child.wait_with_output().expect("progscore exits");
    assert_eq!(output.status.code(), Some(143), "{}", stderr(&output));
    assert_eq!(
        started.leftovers_after(Duration::from_secs(5)),
        Vec::<String>::new()
    );
    // The run's warnings say why something was left.
    assert!(
        dir.owner_leftovers().is_empty(),
        "{:?}\n{}",
        dir.owner_leftovers(),
        stderr(&output)
    );
}

/// Whether `cc1plus` (g++'s compiler proper) runs in a cgroup of progscore
/// process `pid`'s containers (their cgroups carry its owner name).
fn compiler_running(pid: u32) -> bool {
    let owner = format!("progscore-docker-{pid}-");
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries.flatten().any(|entry| {
                let compiling = std::fs::read(entry.path().join("cmdline"))
                    .is_ok_and(|cmdline| cmdline.windows(7).any(|w| w == b"cc1plus"));
                compiling
                    && std::fs::read_to_string(entry.path().join("cgroup"))
                        .is_ok_and(|cgroup| cgroup.contains(&owner))
            })
        })
        .unwrap_or(false)
}

/// The languages that `scripts/setup.sh --languages all` adds beside the six
/// above: profile, probe folder, file extension, whether it compiles.
const MORE_LANGUAGES: [(&str, &str, bool); 11] = [
    ("typescript", "ts", true),
    ("csharp", "cs", true),
    ("d", "d", true),
    ("scala", "scala", true),
    ("lua", "lua", false),
    ("php", "php", false),
    ("perl", "pl", false),
    ("r", "r", false),
    ("ruby", "rb", false),
    ("racket", "rkt", false),
    ("bash", "sh", false),
];

/// MultiPL-E's language names and the names its items give as their
/// profile: MultiPL-E's own through the generated `[languages]` table, except
/// Go and Java, whose plain names are SandboxFusion's programs with a main.
const MULTIPL_E: [(&str, &str); 16] = [
    ("cpp", "cpp"),
    ("cs", "cs"),
    ("d", "d"),
    ("go", "go_test"),
    ("java", "java-problem"),
    ("js", "js"),
    ("lua", "lua"),
    ("php", "php"),
    ("pl", "pl"),
    ("r", "r"),
    ("rb", "rb"),
    ("rkt", "rkt"),
    ("rs", "rs"),
    ("scala", "scala"),
    ("sh", "sh"),
    ("ts", "ts"),
];

/// What an item of the all-languages batch must end as.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Verdict `true`.
    Passes,
    /// Verdict `false`, the program's own exit.
    Fails,
    /// Verdict `false`, every case a compile error.
    DoesNotCompile,
    /// Verdict `false`, a proven timeout.
    TimesOut,
    /// A fork bomb held by the pids limit: it saw a spawn refused and said
    /// "contained" (verdict `true`), or its runtime retries refused forks
    /// (Ruby) until the time limit: a proven timeout.
    Contained,
    /// Verdict `false` at the memory cap (or the runtime's own heap cap,
    /// which the profile sets below it: an exit saying so).
    RunsOutOfMemory,
}

struct Item {
    id: String,
    profile: String,
    program: String,
    args: Vec<String>,
    stdin: Option<String>,
    expected_stdout: Option<serde_json::Value>,
    expect: Expect,
}

fn item(id: String, profile: &str, program: String, expect: Expect) -> Item {
    Item {
        id,
        profile: profile.to_string(),
        program,
        args: Vec::new(),
        stdin: None,
        expected_stdout: None,
        expect,
    }
}

fn repo_file(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The program's path in the sandbox: /sandbox/<the profile's source>.
fn sandbox_path(dir: &Dir, profile: &str) -> String {
    let config: toml::Value =
        toml::from_str(&std::fs::read_to_string(dir.path().join("progscore.toml")).unwrap())
            .unwrap();
    let source = config["profiles"][profile]
        .get("source")
        .and_then(|s| s.as_str())
        .unwrap_or("program");
    format!("/sandbox/{source}")
}

/// Every item of the all-languages batch: per added language its probes (no
/// network, nothing writable, a fork bomb contained, a busy loop's proven
/// timeout, a memory hog at the cap, a syntax error a proven `false`); per
/// MultiPL-E language a correct and a wrong solution of two problems
/// (examples/languages/multipl-e); the full Python standard library, numpy
/// under python-sci, and Rust's edition 2024.
fn all_language_items(dir: &Dir) -> Vec<Item> {
    let mut items = Vec::new();
    for (profile, extension, _) in MORE_LANGUAGES {
        let probe = |name: &str| probe_source(profile, extension, name);
        let mut network = item(
            format!("{profile}/network"),
            profile,
            probe("network"),
            Expect::Passes,
        );
        network.expected_stdout = Some(serde_json::json!({"equals": "unreachable"}));
        items.push(network);
        let mut write = item(
            format!("{profile}/write_paths"),
            profile,
            probe("write_paths"),
            Expect::Passes,
        );
        write.args = vec![sandbox_path(dir, profile)];
        write.expected_stdout = Some(serde_json::json!({"equals": "denied\ndenied\ndenied"}));
        items.push(write);
        let mut bomb = item(
            format!("{profile}/fork_bomb"),
            profile,
            probe("fork_bomb"),
            Expect::Contained,
        );
        bomb.expected_stdout = Some(serde_json::json!({"regex": "(?m)^contained$"}));
        items.push(bomb);
        items.push(item(
            format!("{profile}/busy_loop"),
            profile,
            probe("busy_loop"),
            Expect::TimesOut,
        ));
        items.push(item(
            format!("{profile}/memory_hog"),
            profile,
            probe("memory_hog"),
            Expect::RunsOutOfMemory,
        ));
        let compiled = MORE_LANGUAGES.iter().any(|(p, _, c)| *p == profile && *c);
        items.push(item(
            format!("{profile}/syntax_error"),
            profile,
            probe("syntax_error"),
            if compiled {
                Expect::DoesNotCompile
            } else {
                Expect::Fails
            },
        ));
    }
    for (language, profile) in MULTIPL_E {
        for problem in ["add", "sum_to_n"] {
            for (variant, expect) in [("correct", Expect::Passes), ("wrong", Expect::Fails)] {
                items.push(item(
                    format!("multipl-e/{language}/{problem}-{variant}"),
                    profile,
                    repo_file(&format!(
                        "examples/languages/multipl-e/{language}/{problem}-{variant}.{language}"
                    )),
                    expect,
                ));
            }
        }
    }
    let stdlib = probe_source("python", "py", "stdlib");
    let mut full = item(
        "python/stdlib".into(),
        "python",
        stdlib.clone(),
        Expect::Passes,
    );
    full.expected_stdout = Some(serde_json::json!({"equals": "ok"}));
    items.push(full);
    // The minimal image lacks them: the verdict is about the image there.
    items.push(item(
        "python-minimal/stdlib".into(),
        "python-minimal",
        stdlib,
        Expect::Fails,
    ));
    let mut numpy = item(
        "python-sci/numpy".into(),
        "python-sci",
        probe_source("python-sci", "py", "numpy_solution"),
        Expect::Passes,
    );
    numpy.stdin = Some("1\n2\n3\n".into());
    numpy.expected_stdout = Some(serde_json::json!({"equals": "ok"}));
    items.push(numpy);
    // Node's API as Node's own declarations type it (no `declare var
    // require`): typescript-node has them.
    let mut node_api = item(
        "typescript-node/node_api".into(),
        "typescript-node",
        probe_source("typescript", "ts", "node_api"),
        Expect::Passes,
    );
    node_api.stdin = Some("1 2 3\n".into());
    node_api.expected_stdout = Some(serde_json::json!({"equals": "6 6f6b"}));
    items.push(node_api);
    let mut rust = item(
        "rust/edition_2024".into(),
        "rust",
        probe_source("rust", "rs", "edition_2024"),
        Expect::Passes,
    );
    rust.expected_stdout = Some(serde_json::json!({"equals": "ok"}));
    items.push(rust);
    items
}

fn batch_line(item: &Item) -> String {
    let mut expected = serde_json::json!({"exit_code": 0});
    if let Some(stdout) = &item.expected_stdout {
        expected["stdout"] = stdout.clone();
    }
    serde_json::json!({
        "id": item.id,
        "program": item.program,
        "expectation": {"conditions": [{"program_behaves": {"profile": item.profile, "cases": [
            {"invocation": {"args": item.args, "stdin": item.stdin}, "expected": expected}]}}]},
    })
    .to_string()
}

/// Scores the batch in one process and checks every item's ending.
fn score_all_languages(dir: &Dir, items: &[Item]) {
    let lines: Vec<String> = items.iter().map(batch_line).collect();
    dir.write("all.jsonl", lines.join("\n") + "\n");
    let output = dir.run(&["score", "all.jsonl", "--jobs", "4"]);
    let results = result_lines(&stdout(&output));
    assert_eq!(results.len(), items.len(), "{}", stderr(&output));
    let mut wrong = Vec::new();
    for result in &results {
        let id = result["id"].as_str().unwrap();
        let item = items.iter().find(|i| i.id == id).unwrap();
        let case = &result["cases"][0];
        let ok = match item.expect {
            Expect::Passes => verdict(result) == "true",
            Expect::Fails => verdict(result) == "false" && case["outcome"] == "exited",
            Expect::DoesNotCompile => {
                verdict(result) == "false" && case["outcome"] == "compile_error"
            }
            Expect::TimesOut => verdict(result) == "false" && case["outcome"] == "timed_out",
            // Held at its pids limit: it prints `contained`, or it is still
            // there at the limit. A bomb's processes come and go, so its
            // waits cannot be measured and, using little CPU, its timeout
            // is not proven: undetermined, never a wrong verdict.
            Expect::Contained => {
                verdict(result) == "true"
                    || (verdict(result) == "false" && case["outcome"] == "timed_out")
                    || (result["status"] == "undetermined"
                        && result["reason_kind"] == "unconfirmed_timeout"
                        && case["outcome"] == "timed_out")
            }
            Expect::RunsOutOfMemory => {
                verdict(result) == "false"
                    && (case["outcome"] == "memory_limit"
                        || (case["outcome"] == "exited" && case["exit_code"] != 0))
            }
        };
        if !ok {
            wrong.push(format!("{id}: expected {:?}, got {result}", item.expect));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The run's warnings say why something was left.
    assert!(
        dir.owner_leftovers().is_empty(),
        "{:?}\n{}",
        dir.owner_leftovers(),
        stderr(&output)
    );
}

/// Every language `scripts/setup.sh --languages all` adds, in one batch (one
/// process, run together): its probes, MultiPL-E programs with their own
/// tests, full Python, numpy, and Rust 2024, each ending as it must.
#[test]
fn every_added_language_is_hardened_and_scores_multipl_e_programs() {
    let dir = dir_with_short_timeouts_and_cpu_limits();
    let items = all_language_items(&dir);
    score_all_languages(&dir, &items);
}

/// The same batch under the daemonless backend (every docker profile
/// switched to `oci`).
#[test]
fn every_added_language_gets_the_same_endings_without_a_daemon() {
    let dir = dir_with_short_timeouts_and_cpu_limits();
    // Every profile pinned by digest (an image id is the Docker engine's own).
    dir.edit_config(|text| {
        let mut out = String::new();
        let mut by_id = false;
        for line in text.lines() {
            if line.starts_with("[profiles.") {
                by_id = line.starts_with("[profiles.python-by-id");
            }
            if !by_id && line == "backend = \"docker\"" {
                out.push_str("backend = \"oci\"\n");
            } else {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    });
    let items = all_language_items(&dir);
    score_all_languages(&dir, &items);
}
