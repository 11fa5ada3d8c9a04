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
//! - In a pool of two engines, the second is killed (SIGKILL to its dockerd)
//!   while programs run on it: they run again on the first, every item gets
//!   the verdict it gets on one engine, nothing from the kill is stored, and
//!   once the engine is back the next progscore's sweep leaves no container
//!   on either engine.
//!
//! - Under `progscore serve`, the engine stopped with requests in flight:
//!   no answer says Failed; it serves again once the engine is back.
//!
//! Its own test binary, because it stops the engines other tests use:
//! cargo runs test binaries one after another.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use progscore_e2e::served::{ServeIn, Served, try_post_json};
use progscore_e2e::{Dir, LOCAL_ENGINE, result_lines, second_engine, stderr, verdict};

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
    owned_on(LOCAL_ENGINE, "progscore.owner").len()
}

/// Containers on the engine at `engine` whose labels match `filter`.
fn owned_on(engine: &str, filter: &str) -> Vec<String> {
    let output = Command::new("docker")
        .args([
            "-H",
            engine,
            "ps",
            "-aq",
            "--filter",
            &format!("label={filter}"),
        ])
        .output()
        .expect("docker ps");
    assert!(output.status.success(), "{}", stderr(&output));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn engines_stopped_mid_batch() {
    // One scenario after the other: each stops an engine the others use.
    engine_comes_back_and_the_batch_completes();
    engine_stays_away_and_a_rerun_completes();
    one_engine_of_two_killed_mid_batch();
    engine_stopped_under_serve();
}

/// `progscore serve` with requests in flight when the engine stops for 3 s:
/// a run that proves nothing is run again before it is answered, so every
/// answer is the program's right output, or SandboxError with 504 (which
/// verl and the SDK retry), never Failed and never a 200 that says
/// nothing; and it serves again once the engine is back.
fn engine_stopped_under_serve() {
    let dir = Dir::new();
    dir.edit_config(|mut config| {
        config.push_str("\n[serve]\nprofiles = [\"python\"]\n");
        config
    });
    let served = Served::start(&dir);
    let address = served.address;
    let clients: Vec<_> = (0..16u64)
        .map(|client| {
            std::thread::spawn(move || {
                (0..3u64)
                    .map(|n| {
                        let i = client * 10 + n;
                        let code = format!("import time\ntime.sleep(0.3)\nprint({i} * {i})\n");
                        let body = serde_json::json!({"code": code, "language": "python"});
                        let reply = try_post_json(address, "/run_code", &body).expect("an answer");
                        (i, reply.status, reply.json())
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    while served.metric("progscore_evidence_total{evidence=\"ran\"}") < 4.0 {
        std::thread::sleep(Duration::from_millis(50));
    }
    let stop = EngineStop::now();
    std::thread::sleep(Duration::from_secs(3));
    drop(stop);
    let mut sandbox_errors = 0;
    for client in clients {
        for (i, status, body) in client.join().unwrap() {
            match (status, body["status"].as_str()) {
                (200, Some("Success")) => {
                    assert_eq!(
                        body["run_result"]["stdout"],
                        format!("{}\n", i * i),
                        "{body}"
                    )
                }
                (504, Some("SandboxError")) => sandbox_errors += 1,
                _ => panic!("a wrong answer while the engine was away: {status} {body}"),
            }
        }
    }
    println!(
        "engine stopped under serve: {sandbox_errors} of 48 answers were SandboxError (504), reruns: {}",
        served.metric("progscore_reruns_total{profile=\"python\"}")
    );
    let after = served.post_json(
        "/run_code",
        &serde_json::json!({"code": "print(6 * 7)", "language": "python"}),
    );
    assert_eq!(
        after.json()["run_result"]["stdout"],
        "42\n",
        "{}",
        after.json()
    );
    let started = served.started.clone();
    let (code, log) = served.terminate();
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(started.leftovers(), Vec::<String>::new());
}

/// `scripts/second-engine.sh ARGS`.
fn second_engine_script(args: &[&str]) {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/second-engine.sh");
    let output = Command::new("bash")
        .arg(script)
        .args(args)
        .output()
        .expect("run second-engine.sh");
    assert!(
        output.status.success(),
        "second-engine.sh {args:?}: {}",
        stderr(&output)
    );
}

/// Brings the second engine back when dropped, however the test ends.
struct SecondEngineBack;

impl Drop for SecondEngineBack {
    fn drop(&mut self) {
        second_engine_script(&["start"]);
    }
}

fn one_engine_of_two_killed_mid_batch() {
    let dir = Dir::new();
    dir.edit_config(|config| {
        format!(
            "{config}\n[engines.first]\nurl = \"{LOCAL_ENGINE}\"\ncapacity = 3\n\n\
             [engines.second]\nurl = \"{}\"\ncapacity = 3\n",
            second_engine()
        )
    });
    // Every third item is wrong: a kill must turn no verdict either way.
    let items = 30;
    let lines: Vec<String> = (0..items)
        .map(|i| {
            let answer = if i % 3 == 0 { i * i + 1 } else { i * i };
            serde_json::json!({
                "id": format!("item-{i}"),
                "program": format!("import time\n# {i}\ntime.sleep(1)\nprint({i} * {i})\n"),
                "expectation": {"conditions": [{"program_behaves": {"profile": "python", "cases": [
                    {"invocation": {"args": []},
                     "expected": {"stdout": {"equals": answer.to_string()}}},
                    {"invocation": {"args": ["again"]},
                     "expected": {"stdout": {"equals": answer.to_string()}}}]}}]},
            })
            .to_string()
        })
        .collect();
    dir.write("batch.jsonl", lines.join("\n"));
    let child = dir
        .command()
        .args(["score", "batch.jsonl", "--out", "results.jsonl"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start progscore");
    // Killed while programs of this batch run on it.
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let running = Command::new("docker")
            .args([
                "-H",
                &second_engine(),
                "ps",
                "-q",
                "--filter",
                "label=progscore.owner",
            ])
            .output()
            .expect("docker ps");
        if !String::from_utf8_lossy(&running.stdout).trim().is_empty() {
            break;
        }
        assert!(
            Instant::now() < until,
            "nothing ever ran on the second engine"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let back = SecondEngineBack;
    second_engine_script(&["stop", "--kill"]);
    let output = child.wait_with_output().expect("progscore exits");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let errors = stderr(&output);
    assert!(errors.contains("stopped answering"), "{errors}");
    let results = result_lines(&std::fs::read_to_string(dir.path().join("results.jsonl")).unwrap());
    assert_eq!(results.len(), items, "every item is scored");
    for line in &results {
        let i: usize = line["id"].as_str().unwrap()["item-".len()..]
            .parse()
            .unwrap();
        let expected = if i.is_multiple_of(3) { "false" } else { "true" };
        assert_eq!(verdict(line), expected, "{line}");
    }
    nothing_from_the_outage_is_stored(&dir);
    drop(back);
    // The killed engine is back: the next progscore (here `doctor`, which
    // reaches every engine) sweeps what the ended process left on it.
    let doctor = dir.run(&["doctor"]);
    assert_eq!(doctor.status.code(), Some(0), "{}", stderr(&doctor));
    for engine in [LOCAL_ENGINE.to_string(), second_engine()] {
        let left = owned_on(&engine, "progscore.owner");
        assert!(left.is_empty(), "left on {engine}: {left:?}");
    }
    assert!(
        dir.owner_leftovers().is_empty(),
        "{:?}\nscore: {errors}\ndoctor: {}",
        dir.owner_leftovers(),
        stderr(&doctor)
    );
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
