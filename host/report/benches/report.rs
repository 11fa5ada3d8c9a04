//! A 10,000-item report: the page's size and how long it takes to make,
//! beside the time to read the same evidence from the store alone (the
//! floor: a report cannot be made faster than its evidence is read).
//!
//! `cargo bench -p progscore-report --bench report`. PROGSCORE_BENCH_ITEMS
//! sets the number of items (default 10,000), PROGSCORE_BENCH_PAIRS the
//! rounds (default 3). Each item has 3 cases with small outputs; one in ten
//! fails an `equals` check (and so carries a diff), one in fifty prints
//! 64 KiB (cut to the page's excerpt). PROGSCORE_BENCH_PAGE=FILE keeps the
//! last page, to open it in a browser.

use std::time::{Duration, Instant};

use progscore_report::{Limits, ResultLines};
use progscore_sandbox::sha256_hex;
use progscore_scoring::evidence::{
    EvidenceStore, Observation, ScoreOrigin, ScoreRecord, ScoreStatus,
};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let count = env_or("PROGSCORE_BENCH_ITEMS", 10_000);
    let pairs = env_or("PROGSCORE_BENCH_PAIRS", 3);
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = EvidenceStore::open(dir.path().join("evidence.db")).expect("a store");
    let started = Instant::now();
    let lines = fill(&store, count);
    println!(
        "{count} items stored in {:.1} s (setup, not measured)",
        started.elapsed().as_secs_f64()
    );
    let results = ResultLines::from_values("bench.jsonl", lines);

    let mut rows = Vec::new();
    for round in 1..=pairs {
        let (read, _) = timed(|| {
            progscore_report::gather(&results, None, &store, Limits::default()).expect("gather")
        });
        let (made, page) = timed(|| {
            let report = progscore_report::gather(&results, None, &store, Limits::default())
                .expect("gather");
            progscore_report::render(&report).expect("render")
        });
        let ratio = made.as_secs_f64() / read.as_secs_f64();
        println!(
            "  round {round}: report {:.2} s ({:.1} MiB)  reading the evidence alone {:.2} s  ratio {ratio:.2}x",
            made.as_secs_f64(),
            page.len() as f64 / (1024.0 * 1024.0),
            read.as_secs_f64()
        );
        rows.push((made, read, page.len()));
        if let Some(path) = std::env::var_os("PROGSCORE_BENCH_PAGE") {
            std::fs::write(path, &page).expect("write the page");
        }
    }
    rows.sort_by_key(|row| row.0);
    let (made, read, bytes) = rows[rows.len() / 2];
    println!(
        "median: a {count}-item report in {:.2} s, {:.1} MiB ({:.0} bytes per item); reading its evidence alone {:.2} s ({:.2}x)",
        made.as_secs_f64(),
        bytes as f64 / (1024.0 * 1024.0),
        bytes as f64 / count as f64,
        read.as_secs_f64(),
        made.as_secs_f64() / read.as_secs_f64()
    );
}

fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let started = Instant::now();
    let value = f();
    (started.elapsed(), value)
}

/// Stores `count` items (program, observation, score) and returns their
/// result lines.
fn fill(store: &EvidenceStore, count: usize) -> Vec<serde_json::Value> {
    (0..count)
        .map(|i| {
            let program = format!("import sys\nn = int(sys.argv[1])\nprint(n * n + {i})\n");
            let program_sha256 = sha256_hex(program.as_bytes());
            let wrong = i % 10 == 0;
            let flood = i % 50 == 0;
            let cases: Vec<(String, String)> = (0..3)
                .map(|k| {
                    let out = if flood {
                        "x".repeat(64 * 1024)
                    } else {
                        format!("{}\n", k * k + i)
                    };
                    (k.to_string(), out)
                })
                .collect();
            let events: Vec<serde_json::Value> = cases
                .iter()
                .map(|(_, out)| {
                    serde_json::json!({
                        "outcome": "exited", "exit_code": 0,
                        "stdout": {"data": out, "truncated": false, "total_bytes": out.len()},
                        "stderr": {"data": "", "truncated": false, "total_bytes": 0},
                        "duration_ms": 40 + i % 30,
                        "usage": {"cpu_ms": 30, "peak_memory_bytes": 8_000_000},
                        "provenance": {"backend": "docker", "runtime": "runc",
                            "artifact": "127.0.0.1:5000/python-sandbox@sha256:0000", "image_id": "sha256:1111",
                            "repo_digests": [], "engine": "bench", "command": ["python3", "-I", "/sandbox/program"],
                            "user": "65534:65534", "container": format!("progscore-bench-{i}"),
                            "limits": {"memory_bytes": 268435456u64, "cpus": 1.0, "pids": 64, "timeout_ms": 10000,
                                "output_bytes": 65536, "tmp_bytes": 16777216}},
                    })
                })
                .collect();
            let observation_id = format!("obs-{:032x}", i);
            let observation: Observation = serde_json::from_value(serde_json::json!({
                "id": observation_id,
                "attempt_key": format!("{:064x}", i),
                "source": "program_execution/v2",
                "profile": "python",
                "profile_fingerprint": {"backend": "docker"},
                "program_sha256": program_sha256,
                "invocations": cases.iter().map(|(arg, _)| serde_json::json!({"args": [arg]})).collect::<Vec<_>>(),
                "run": {"profile": "python", "program_sha256": program_sha256, "events": events, "sandbox_warnings": []},
                "created_at": "2026-11-30T12:00:00.000Z",
            }))
            .expect("an observation");
            let expected: Vec<serde_json::Value> = cases
                .iter()
                .enumerate()
                .map(|(k, (arg, out))| {
                    let value = if wrong && k == 1 { "0".to_string() } else { out.trim_end().to_string() };
                    serde_json::json!({"invocation": {"args": [arg]}, "expected": {"stdout": {"equals": value}}})
                })
                .collect();
            let case_reports: Vec<serde_json::Value> = (0..3)
                .map(|k| {
                    let matched = !(wrong && k == 1);
                    serde_json::json!({"outcome": "exited", "exit_code": 0, "matched": matched,
                        "duration_ms": 40 + i % 30, "cpu_ms": 30, "peak_memory_bytes": 8_000_000})
                })
                .collect();
            let (status, value) = (ScoreStatus::Complete, Some(!wrong));
            let score = ScoreRecord {
                item_id: Some(format!("item-{i}")),
                origin: ScoreOrigin::Execute,
                program_sha256: program_sha256.clone(),
                profile: "python".into(),
                expectation: serde_json::json!({"conditions": [{"program_behaves": {"profile": "python", "cases": expected}}]}),
                expectation_sha256: format!("{:064x}", i),
                status,
                value,
                rationale: "bench".into(),
                reason: None,
                cases: serde_json::Value::Array(case_reports.clone()),
                observation_ids: vec![observation_id.clone()],
                score: None,
                score_groups: None,
            };
            let (score_id, _) = store
                .record_observation_with_score(Some(program.as_bytes()), &observation, &score)
                .expect("stored");
            serde_json::json!({
                "id": format!("item-{i}"), "status": "complete", "value": !wrong,
                "rationale": "bench", "observation_ids": [observation_id], "cases": case_reports,
                "evidence": "ran", "score_id": score_id,
            })
        })
        .collect()
}
