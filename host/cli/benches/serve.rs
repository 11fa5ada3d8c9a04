//! `progscore serve` beside `progscore score`, measured in one run.
//!
//! 1. Throughput and latency: a generated corpus of small correct Python
//!    programs posted to `/run_code` by 4, 16 and 64 clients at once (as
//!    verl keeps requests in flight), beside `progscore score` of the same
//!    number of items at its default `--jobs`, each pair run back to back;
//!    the ratio serve/score of programs per second, and the requests' p50
//!    and p99 latency. Every answer's stdout is checked. Programs carry a
//!    nonce per run, so nothing is answered from stored evidence.
//! 2. Builds per request on a compiled language: one C++ program posted
//!    with 8 tests as 8 requests (verl's pattern); how many of them built
//!    the program (their response has a `compile_result` and the evidence
//!    `ran`).
//!
//! 3. Before and after: with `PROGSCORE_BENCH_BASELINE` naming another
//!    `progscore` binary (an earlier build), the same `/run_code` rounds
//!    through a server of each, back to back, with the ratio of programs
//!    per second (this build / the baseline) at 4, 16 and 64 in flight.
//!
//! `cargo bench -p progscore --bench serve` (after scripts/setup.sh).
//! PROGSCORE_BENCH_PROGRAMS sets the programs per run (default 64).

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use progscore_test_kit::served::{Served, try_post_json};

const BIN: &str = env!("CARGO_BIN_EXE_progscore");

fn main() {
    let count: usize = std::env::var("PROGSCORE_BENCH_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("progscore.toml");
    let text = progscore_test_kit::replace_required(
        &progscore_test_kit::generated_config_text(),
        "path = \"progscore.db\"",
        "path = \"bench-serve.db\"",
    );
    std::fs::write(
        &config,
        format!(
            "{text}\n[serve]\nprofiles = [\"python\", \"cpp\"]\nqueue = 4096\nqueue_wait = \"600s\"\n"
        ),
    )
    .expect("config");
    let mut command = Command::new(BIN);
    command
        .current_dir(dir.path())
        .arg("--config")
        .arg(&config)
        .args(["serve", "--listen", "127.0.0.1:0"]);
    let served = Served::spawn(command)
        .unwrap_or_else(|(code, log)| panic!("progscore serve exited with {code:?}:\n{log}"));
    let nonce = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());

    println!("progscore serve (/run_code) vs progscore score (default --jobs), {count} programs");
    println!(
        "  {:<10} {:>13} {:>13} {:>7} {:>9} {:>9}",
        "in flight", "serve prog/s", "score prog/s", "ratio", "p50 ms", "p99 ms"
    );
    for (round, in_flight) in [4usize, 16, 64].into_iter().enumerate() {
        let tag = format!("{nonce}-{round}");
        let (serve_wall, mut latencies) = serve_round(&served, count, in_flight, &tag);
        let score_wall = score_round(dir.path(), &config, count, &tag);
        latencies.sort();
        let percentile = |p: f64| {
            latencies[((latencies.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1000.0
        };
        let (serve_rate, score_rate) = (rate(count, serve_wall), rate(count, score_wall));
        println!(
            "  {in_flight:<10} {serve_rate:>13.2} {score_rate:>13.2} {:>6.2}x {:>9.0} {:>9.0}",
            serve_rate / score_rate,
            percentile(0.5),
            percentile(0.99)
        );
    }

    if let Some(baseline) = std::env::var_os("PROGSCORE_BENCH_BASELINE") {
        before_and_after(
            &served,
            std::path::Path::new(&baseline),
            &text,
            count,
            nonce,
        );
    }

    let (requests, builds) = builds_per_request(&served, &nonce.to_string());
    println!(
        "C++: one program, {requests} tests as {requests} requests: {builds} build(s), {:.2} requests per build",
        requests as f64 / builds.max(1) as f64
    );
    let (code, log) = served.terminate();
    assert_eq!(code, Some(0), "{log}");
}

/// The same `/run_code` rounds through this build's server and through
/// one of `baseline` (its own folder and store), back to back per round.
fn before_and_after(
    served: &Served,
    baseline: &std::path::Path,
    config_text: &str,
    count: usize,
    nonce: u128,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("progscore.toml");
    std::fs::write(
        &config,
        format!(
            "{}\n[serve]\nprofiles = [\"python\", \"cpp\"]\nqueue = 4096\nqueue_wait = \"600s\"\n",
            progscore_test_kit::replace_required(
                config_text,
                "path = \"bench-serve.db\"",
                "path = \"bench-serve-baseline.db\""
            )
        ),
    )
    .expect("config");
    let mut command = Command::new(baseline);
    command
        .current_dir(dir.path())
        .arg("--config")
        .arg(&config)
        .args(["serve", "--listen", "127.0.0.1:0"]);
    let before = Served::spawn(command)
        .unwrap_or_else(|(code, log)| panic!("the baseline serve exited with {code:?}:\n{log}"));
    println!(
        "/run_code, this build vs {} ({count} programs)",
        baseline.display()
    );
    println!(
        "  {:<10} {:>13} {:>13} {:>7}",
        "in flight", "after prog/s", "before prog/s", "ratio"
    );
    for (round, in_flight) in [4usize, 16, 64].into_iter().enumerate() {
        let (before_wall, _) = serve_round(&before, count, in_flight, &format!("{nonce}-b{round}"));
        let (after_wall, _) = serve_round(served, count, in_flight, &format!("{nonce}-a{round}"));
        let (after, before) = (rate(count, after_wall), rate(count, before_wall));
        println!(
            "  {in_flight:<10} {after:>13.2} {before:>13.2} {:>6.3}x",
            after / before
        );
    }
    let (code, log) = before.terminate();
    assert_eq!(code, Some(0), "{log}");
}

fn rate(count: usize, wall: Duration) -> f64 {
    count as f64 / wall.as_secs_f64()
}

fn program(i: usize, tag: &str) -> String {
    format!("# {tag}\nn = int(input())\nprint(n * {i})\n")
}

/// Posts `count` programs with `in_flight` clients; the wall time and each
/// request's latency.
fn serve_round(
    served: &Served,
    count: usize,
    in_flight: usize,
    tag: &str,
) -> (Duration, Vec<Duration>) {
    let next = Arc::new(AtomicUsize::new(0));
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(count)));
    let address = served.address;
    let started = Instant::now();
    let clients: Vec<_> = (0..in_flight)
        .map(|_| {
            let (next, latencies, tag) = (next.clone(), latencies.clone(), tag.to_string());
            std::thread::spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= count {
                        break;
                    }
                    let body = serde_json::json!({
                        "code": program(i, &tag), "language": "python", "stdin": "7\n"
                    });
                    let asked = Instant::now();
                    let reply = try_post_json(address, "/run_code", &body).expect("an answer");
                    latencies.lock().unwrap().push(asked.elapsed());
                    let answer = reply.json();
                    assert_eq!(
                        answer["run_result"]["stdout"],
                        format!("{}\n", 7 * i),
                        "{answer}"
                    );
                }
            })
        })
        .collect();
    for client in clients {
        client.join().expect("a client");
    }
    let wall = started.elapsed();
    let latencies = std::mem::take(&mut *latencies.lock().unwrap());
    (wall, latencies)
}

/// `progscore score` of `count` items of the same shape; its wall time.
fn score_round(
    dir: &std::path::Path,
    config: &std::path::Path,
    count: usize,
    tag: &str,
) -> Duration {
    let tag = format!("{tag}-score");
    let lines: Vec<String> = (0..count)
        .map(|i| {
            serde_json::json!({
                "id": format!("item-{i}"),
                "program": program(i, &tag),
                "expectation": {"conditions": [{"program_behaves": {"profile": "python", "cases": [
                    {"invocation": {"args": [], "stdin": "7\n"},
                     "expected": {"stdout": {"equals": (7 * i).to_string()}}}]}}]},
            })
            .to_string()
        })
        .collect();
    let batch = dir.join(format!("batch-{tag}.jsonl"));
    std::fs::write(&batch, lines.join("\n")).expect("batch");
    let started = Instant::now();
    let output = Command::new(BIN)
        .current_dir(dir)
        .arg("--config")
        .arg(config)
        .arg("score")
        .arg(&batch)
        .stderr(Stdio::null())
        .output()
        .expect("progscore score");
    let wall = started.elapsed();
    assert!(output.status.success(), "score failed");
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(text.lines().count(), count);
    for line in text.lines() {
        let result: serde_json::Value = serde_json::from_str(line).expect("result line");
        assert_eq!(result["value"], serde_json::json!(true), "{line}");
    }
    wall
}

/// One C++ program, 8 tests as 8 concurrent requests; (requests, builds).
fn builds_per_request(served: &Served, tag: &str) -> (usize, usize) {
    const TESTS: usize = 8;
    let code = format!(
        "// {tag}\n#include <iostream>\nint main(){{long n; std::cin>>n; std::cout<<n*n<<std::endl;}}\n"
    );
    let address = served.address;
    let requests: Vec<_> = (0..TESTS)
        .map(|n| {
            let code = code.clone();
            std::thread::spawn(move || {
                let body =
                    serde_json::json!({"code": code, "language": "cpp", "stdin": format!("{n}\n")});
                let reply = try_post_json(address, "/run_code", &body).expect("an answer");
                let evidence = reply
                    .header("x-progscore-evidence")
                    .unwrap_or("")
                    .to_string();
                let answer = reply.json();
                assert_eq!(
                    answer["run_result"]["stdout"],
                    format!("{}\n", n * n),
                    "{answer}"
                );
                evidence == "ran" && !answer["compile_result"].is_null()
            })
        })
        .collect();
    let builds = requests
        .into_iter()
        .map(|request| request.join().expect("a request"))
        .filter(|built| *built)
        .count();
    (TESTS, builds)
}
