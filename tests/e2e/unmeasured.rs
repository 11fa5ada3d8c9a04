//! Timeouts on an engine whose cgroups progscore cannot see: the second
//! engine reached over TCP with TLS on the loopback (`tcp://` engines are
//! never measured). Two `progscore score` processes share the engine and the
//! store, each with more jobs than the machine has CPUs, beside a CPU hog,
//! with a one-second limit; every program is correct and needs about a third
//! of it. Neither process can see the other's programs or the hog, so a
//! wall-clock timeout there proves nothing: no correct program may be
//! `false`, and nothing unproven may be stored as an attempt's evidence.

use std::process::{Child, Command, Stdio};

use progscore_e2e::{Dir, result_lines, stderr, stdout, verdict};

/// The second engine's TLS files (scripts/second-engine.sh writes them).
const TLS: &str = "/var/lib/docker-second/tls";
const ITEMS: usize = 16;

/// The config with the second engine over TCP as its only engine, and a
/// one-second limit.
fn over_tcp(config: String) -> String {
    format!(
        "{}\n[engines.loopback]\nurl = \"tcp://127.0.0.1:2376\"\n\
         tls = {{ ca = \"{TLS}/ca.pem\", cert = \"{TLS}/cert.pem\", key = \"{TLS}/key.pem\" }}\n",
        progscore_test_kit::replace_required(&config, "timeout = \"10s\"", "timeout = \"1s\"")
    )
}

/// Correct programs that spin about a third of their limit on the CPU.
fn batch(process: usize) -> String {
    (0..ITEMS)
        .map(|i| {
            serde_json::json!({
                "id": format!("third-{process}-{i}"),
                "program": format!(
                    "import sys, time\n# process {process}, item {i}\nstart = time.process_time()\n\
                     while time.process_time() - start < 0.33:\n    pass\nprint(int(sys.argv[1]) * 2)\n"
                ),
                "expectation": {"conditions": [{"program_behaves": {"profile": "python", "cases": [
                    {"invocation": {"args": [i.to_string()]},
                     "expected": {"stdout": {"equals": (i * 2).to_string()}}}]}}]},
            })
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A busy process beside the batch, outside progscore.
struct CpuHog(Child);

impl Drop for CpuHog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn two_processes_on_an_unmeasured_engine_never_prove_a_correct_program_false() {
    let dir = Dir::new();
    dir.edit_config(over_tcp);
    let doctor = dir.run(&["doctor"]);
    let report = stdout(&doctor);
    assert!(
        report.contains(
            "timing: CPU time and CPU waits NOT measured (the engine is not on this host)"
        ) && report.contains("never `false`"),
        "doctor must say the engine cannot measure, and what it costs:\n{report}\n{}",
        stderr(&doctor)
    );

    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let jobs = (3 * cpus).to_string();
    let _hog = CpuHog(
        Command::new("python3")
            .args(["-c", "while True: pass"])
            .spawn()
            .expect("start a CPU hog"),
    );
    let scorers: Vec<(usize, Child)> = (0..2)
        .map(|process| {
            let name = format!("batch-{process}.jsonl");
            dir.write(&name, batch(process));
            let child = dir
                .command()
                .args(["score", &name, "--jobs", &jobs])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start progscore score");
            (process, child)
        })
        .collect();
    let mut undetermined = 0;
    for (process, child) in scorers {
        let output = child.wait_with_output().expect("progscore score");
        assert_eq!(
            output.status.code(),
            Some(0),
            "process {process}: {}",
            stderr(&output)
        );
        let lines = result_lines(&stdout(&output));
        assert_eq!(lines.len(), ITEMS, "process {process}: {}", stderr(&output));
        for line in &lines {
            match verdict(line).as_str() {
                "true" => {}
                "undetermined" => {
                    undetermined += 1;
                    assert_eq!(line["reason_kind"], "unconfirmed_timeout", "{line}");
                }
                _ => panic!("a correct program was scored false on an unmeasured engine: {line}"),
            }
        }
    }
    println!(
        "unmeasured engine: {undetermined} of {} correct programs undetermined (timeout not proven)",
        2 * ITEMS
    );

    // Nothing unproven is stored as an attempt's reusable evidence.
    let store = rusqlite::Connection::open(dir.path().join("evidence.db")).expect("open store");
    let mut statement = store
        .prepare("SELECT id, run FROM observations")
        .expect("query");
    let rows: Vec<(String, String)> = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("rows")
        .map(|row| row.expect("row"))
        .collect();
    assert!(!rows.is_empty());
    for (id, run) in rows {
        let run: serde_json::Value = serde_json::from_str(&run).expect("run JSON");
        let reusable = id.len() == "obs-".len() + 32;
        for event in run["events"].as_array().expect("events") {
            let unproven = event.get("unconfirmed").is_some()
                || matches!(event["outcome"].as_str(), Some("sandbox_error" | "not_run"));
            assert!(
                !(reusable && unproven),
                "{id} is reusable but unproven: {event}"
            );
            assert_ne!(
                (reusable, event["outcome"].as_str()),
                (true, Some("timed_out")),
                "a proven timeout of a correct program is stored: {id}: {event}"
            );
        }
    }
}
