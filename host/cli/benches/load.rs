//! What proving timeouts costs, measured in one run against baselines.
//!
//! 1. `progscore score` at its default `--jobs` on small correct programs,
//!    beside a raw Docker API loop (bollard: create, attach, start, wait,
//!    remove one hardened container per program, nothing else) at the same
//!    parallelism, in alternating pairs, with the ratio of each pair.
//! 2. A batch of which 10% spin forever (one-second limit), beside the same
//!    batch with those programs replaced by correct ones: the extra wall time
//!    per spinner, and how many timeouts were confirmed by a run alone.
//!
//! `cargo bench -p progscore --bench load` (after scripts/setup.sh).
//! PROGSCORE_BENCH_PROGRAMS sets how many programs (default 120).

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig, Mount, MountType};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder,
    StartContainerOptions, WaitContainerOptions,
};
use futures_util::StreamExt;
use progscore_runtime::config::Config;

/// The `score` command's default: 3 programs per core.
fn default_jobs() -> usize {
    3 * std::thread::available_parallelism().map_or(2, |n| n.get())
}

fn main() {
    let count: usize = std::env::var("PROGSCORE_BENCH_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let generated = progscore_test_kit::generated_config_text();
    let dir = tempfile::tempdir().expect("temp dir");
    let config_path = dir.path().join("progscore.toml");
    std::fs::write(
        &config_path,
        progscore_test_kit::replace_required(
            &progscore_test_kit::replace_required(
                &generated,
                "path = \"progscore.db\"",
                "path = \"bench.db\"",
            ),
            "timeout = \"10s\"",
            "timeout = \"1s\"",
        ),
    )
    .expect("config");
    let config = Config::load(&config_path).expect("config");
    let image = config
        .profile("python")
        .and_then(|p| p.image())
        .expect("the python profile's image")
        .to_string();
    let jobs = default_jobs();

    println!("progscore score (default --jobs {jobs}) vs a raw Docker API loop, {count} programs");
    let lines: Vec<String> = (0..count).map(|i| item(i, false)).collect();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let docker = Docker::connect_with_unix_defaults().expect("engine");
    let mut ratios = Vec::new();
    println!(
        "  {:<6} {:>16} {:>16} {:>8}",
        "pair", "score (prog/s)", "API loop (prog/s)", "ratio"
    );
    for pair in 1..=3 {
        let score = score_batch(dir.path(), &config_path, &lines, jobs, "throughput").0;
        let raw = runtime.block_on(raw_loop(&docker, dir.path(), &image, count, jobs));
        let (score_rate, raw_rate) = (rate(count, score), rate(count, raw));
        ratios.push(score_rate / raw_rate);
        println!(
            "  {pair:<6} {score_rate:>16.2} {raw_rate:>16.2} {:>7.2}x",
            score_rate / raw_rate
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "  median ratio score / raw API loop: {:.2}x (scoring, storing and measuring included)",
        ratios[1]
    );

    println!();
    let spinners = count / 10;
    println!(
        "confirmations: {count} programs, {spinners} of them spinning forever (1 s limit), --jobs {jobs}"
    );
    let with: Vec<String> = (0..count).map(|i| item(i, i % 10 == 9)).collect();
    let mut rows = Vec::new();
    for pair in 1..=2 {
        let (clean, _) = score_batch(dir.path(), &config_path, &lines, jobs, "clean");
        let (spinning, confirmed) = score_batch(dir.path(), &config_path, &with, jobs, "spinning");
        rows.push((clean, spinning, confirmed));
        println!(
            "  pair {pair}: all correct {:.2} s, with spinners {:.2} s ({confirmed} timeout(s) confirmed alone)",
            clean.as_secs_f64(),
            spinning.as_secs_f64()
        );
    }
    let extra: Vec<f64> = rows
        .iter()
        .map(|(clean, spinning, _)| {
            (spinning.as_secs_f64() - clean.as_secs_f64()) / spinners as f64
        })
        .collect();
    println!(
        "  extra wall time per spinner: {:.2} s and {:.2} s (its 1 s limit, and any confirmation alone)",
        extra[0], extra[1]
    );
}

fn rate(count: usize, wall: Duration) -> f64 {
    count as f64 / wall.as_secs_f64()
}

/// A small correct program, or one that spins forever.
fn item(i: usize, spins: bool) -> String {
    let (program, expected) = if spins {
        (
            format!("# {i}\nwhile True:\n    pass\n"),
            "never".to_string(),
        )
    } else {
        let n = 1000 + i as u64;
        (
            format!(
                "import sys\n# {i}\nprint(sum(k * k for k in range(int(sys.argv[1]))) % 1000)\n"
            ),
            ((0..n).map(|k| k * k).sum::<u64>() % 1000).to_string(),
        )
    };
    serde_json::json!({
        "id": format!("item-{i}"),
        "program": program,
        "expectation": {"conditions": [{"program_behaves": {"profile": "python", "cases": [
            {"invocation": {"args": [(1000 + i).to_string()]},
             "expected": {"stdout": {"equals": expected}}}]}}]},
    })
    .to_string()
}

/// Scores a batch into a fresh store (everything runs); checks each verdict
/// (spinners false, the rest true). Returns the wall time and how many
/// timeouts were confirmed by a run alone.
fn score_batch(
    dir: &Path,
    config: &Path,
    lines: &[String],
    jobs: usize,
    tag: &str,
) -> (Duration, usize) {
    let batch = dir.join(format!("batch-{tag}.jsonl"));
    std::fs::write(&batch, lines.join("\n")).expect("batch");
    let _ = std::fs::remove_file(dir.join("bench.db"));
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_progscore"))
        .arg("--config")
        .arg(config)
        .args(["score", "--jobs", &jobs.to_string()])
        .arg(&batch)
        .stderr(Stdio::null())
        .output()
        .expect("progscore score");
    let wall = started.elapsed();
    assert!(output.status.success(), "score failed");
    let spinning: HashMap<String, bool> = lines
        .iter()
        .map(|line| {
            let item: serde_json::Value = serde_json::from_str(line).expect("item");
            let spins = item["program"]
                .as_str()
                .is_some_and(|p| p.contains("while True"));
            (item["id"].as_str().unwrap_or_default().to_string(), spins)
        })
        .collect();
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(text.lines().count(), lines.len());
    for line in text.lines() {
        let result: serde_json::Value = serde_json::from_str(line).expect("result line");
        let spins = spinning[result["id"].as_str().expect("id")];
        // Every spinner a proven false, every other program true.
        assert_eq!(result["value"], serde_json::json!(!spins), "{line}");
    }
    let store = rusqlite::Connection::open(dir.join("bench.db")).expect("store");
    let confirmed: i64 = store
        .query_row(
            "SELECT count(*) FROM observations WHERE run LIKE '%ran again with no other program%'",
            [],
            |row| row.get(0),
        )
        .expect("count confirmations");
    (wall, confirmed as usize)
}

/// One hardened container per program through the engine's API, `jobs` at a
/// time: the least any Docker-based scorer must do.
async fn raw_loop(docker: &Docker, dir: &Path, image: &str, count: usize, jobs: usize) -> Duration {
    let programs = dir.join("raw");
    std::fs::create_dir_all(&programs).expect("programs dir");
    for i in 0..count {
        std::fs::write(
            programs.join(format!("p{i}.py")),
            format!(
                "import sys\n# {i}\nprint(sum(k * k for k in range(int(sys.argv[1]))) % 1000)\n"
            ),
        )
        .expect("program");
    }
    let started = Instant::now();
    let outputs: Vec<(usize, Vec<u8>)> = futures_util::stream::iter(0..count)
        .map(|i| {
            let path = programs.join(format!("p{i}.py"));
            async move {
                (
                    i,
                    raw_run(docker, image, &path, &(1000 + i).to_string()).await,
                )
            }
        })
        .buffer_unordered(jobs)
        .collect()
        .await;
    let wall = started.elapsed();
    for (i, output) in outputs {
        let n = 1000 + i as u64;
        let expected = (0..n).map(|k| k * k).sum::<u64>() % 1000;
        assert_eq!(
            String::from_utf8_lossy(&output).trim(),
            expected.to_string()
        );
    }
    wall
}

async fn raw_run(docker: &Docker, image: &str, program: &Path, arg: &str) -> Vec<u8> {
    let name = format!("bench-raw-{}", progscore_sandbox::owner::random_hex());
    let memory = 256 * 1024 * 1024;
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        entrypoint: Some(vec!["python3".into()]),
        cmd: Some(vec!["-I".into(), "/sandbox/program".into(), arg.into()]),
        user: Some("65534:65534".into()),
        network_disabled: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        labels: Some(HashMap::from([(
            "progscore.owner".into(),
            "bench-raw-loop".into(),
        )])),
        host_config: Some(HostConfig {
            network_mode: Some("none".into()),
            log_config: Some(HostConfigLogConfig {
                typ: Some("none".into()),
                config: None,
            }),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges".into()]),
            readonly_rootfs: Some(true),
            mounts: Some(vec![Mount {
                target: Some("/sandbox/program".into()),
                source: Some(program.display().to_string()),
                typ: Some(MountType::BIND),
                read_only: Some(true),
                ..Default::default()
            }]),
            memory: Some(memory),
            memory_swap: Some(memory),
            cpu_period: Some(100_000),
            cpu_quota: Some(100_000),
            pids_limit: Some(64),
            ..Default::default()
        }),
        ..Default::default()
    };
    docker
        .create_container(
            Some(CreateContainerOptionsBuilder::new().name(&name).build()),
            body,
        )
        .await
        .expect("create");
    let attached = docker
        .attach_container(
            &name,
            Some(
                AttachContainerOptionsBuilder::new()
                    .stream(true)
                    .stdout(true)
                    .stderr(true)
                    .build(),
            ),
        )
        .await
        .expect("attach");
    docker
        .start_container(&name, None::<StartContainerOptions>)
        .await
        .expect("start");
    let mut output = Vec::new();
    let mut stream = attached.output;
    while let Some(Ok(chunk)) = stream.next().await {
        if let bollard::container::LogOutput::StdOut { message } = chunk {
            output.extend_from_slice(&message);
        }
    }
    let _ = docker
        .wait_container(&name, None::<WaitContainerOptions>)
        .next()
        .await;
    docker
        .remove_container(
            &name,
            Some(RemoveContainerOptionsBuilder::new().force(true).build()),
        )
        .await
        .expect("remove");
    output
}
