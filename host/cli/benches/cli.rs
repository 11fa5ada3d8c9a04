//! The batch CLI, measured in one run against baselines:
//!
//! 1. `progscore score` on >= 100 generated programs vs the hardened
//!    `docker run` loop (scripts/docker-run-loop.sh) with the same limits,
//!    each at its best parallelism; the ratio (target >= 1.5x).
//! 2. Peak RSS and items/s of `progscore score` and `progscore rescore`
//!    on batches whose evidence is already stored (nothing runs), by size
//!    (`PROGSCORE_BENCH_SIZES`, default 10,000 and 100,000), beside the RSS
//!    of `progscore profiles`: memory must not grow with the batch (target:
//!    the largest within 1.5x of the smallest, items/s not lower).
//!
//! `cargo bench -p progscore --bench cli` (after scripts/setup.sh); add
//! `-- throughput` or `-- memory` for one part. `PROGSCORE_BENCH_STORE=DIR`
//! keeps the memory part's seeded store there for the next run (before and
//! after a change, without seeding again).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use progscore_runtime::backends::Backends;
use progscore_runtime::comparators::WasmComparators;
use progscore_runtime::config::Config;
use progscore_runtime::session::load_comparators;
use progscore_sandbox::SandboxClient;
use progscore_sandbox::fake::{ScriptedClient, exited_event};
use progscore_scoring::evidence::EvidenceStore;
use progscore_scoring::{
    OutputComparator, ProgramExecutionScorer, ProgramExecutionSource, ProgramInput, ScoreRequest,
};

const PROGRAMS: usize = 120;
/// Batch sizes for the memory part (`PROGSCORE_BENCH_SIZES`, comma
/// separated): peak RSS must not grow with the batch (items stream).
const DEFAULT_SIZES: &str = "10000,100000";

fn main() {
    let repo = progscore_test_kit::workspace_root();
    let generated = progscore_test_kit::generated_config_text();
    let dir = tempfile::tempdir().expect("temp dir");
    let config_path = dir.path().join("progscore.toml");
    std::fs::write(
        &config_path,
        progscore_test_kit::replace_required(
            &generated,
            "path = \"progscore.db\"",
            "path = \"bench.db\"",
        ),
    )
    .expect("config");

    // `cargo bench --bench cli -- memory` (or `throughput`) runs one part.
    let only = std::env::args().skip(1).find(|arg| !arg.starts_with("--"));
    let runs = |part: &str| only.as_deref().is_none_or(|only| only == part);
    if runs("throughput") {
        println!("progscore score vs hardened `docker run` loop, {PROGRAMS} programs");
        throughput(&repo, dir.path(), &config_path);
        println!();
    }
    if runs("memory") {
        let sizes: Vec<usize> = std::env::var("PROGSCORE_BENCH_SIZES")
            .unwrap_or_else(|_| DEFAULT_SIZES.into())
            .split(',')
            .map(|size| size.trim().parse().expect("PROGSCORE_BENCH_SIZES: numbers"))
            .collect();
        println!("peak RSS and rate by batch size, evidence stored (nothing runs): {sizes:?}");
        memory(dir.path(), &config_path, &sizes);
    }
}

fn item_line(i: usize, expected: &str) -> String {
    let program = format!(
        "import sys\\nn = int(sys.argv[1])\\nprint(sum(k * k for k in range(n)) % 1000 + {i})\\n"
    );
    format!(
        r#"{{"id": "item-{i}", "program": "{program}", "expectation": {{"conditions": [{{"program_behaves": {{"profile": "python", "cases": [{{"invocation": {{"args": ["{}"], "stdin": null}}, "expected": {{"stdout": {{"equals": "{expected}"}}}}}}]}}}}]}}}}"#,
        1000 + i
    )
}

fn expected_output(i: usize) -> String {
    // sum of k^2 for k < n, in closed form (a million items would take
    // minutes summed term by term).
    let n = 1000 + i as u128;
    let squares = (n - 1) * n * (2 * n - 1) / 6;
    (squares % 1000 + i as u128).to_string()
}

fn throughput(repo: &Path, dir: &Path, config: &Path) {
    let batch: Vec<String> = (0..PROGRAMS)
        .map(|i| item_line(i, &expected_output(i)))
        .collect();
    let mut best_cli = (0, Duration::MAX);
    for jobs in [4, 6, 8] {
        let wall = score_batch(dir, config, &batch[..40], jobs, &format!("probe-{jobs}"));
        println!(
            "  probe progscore score  --jobs {jobs}: {:.2}/s",
            40.0 / wall.as_secs_f64()
        );
        if wall < best_cli.1 {
            best_cli = (jobs, wall);
        }
    }
    let image = Config::load(config)
        .expect("config")
        .profile("python")
        .expect("python profile")
        .image()
        .expect("image")
        .to_string();
    let mut best_loop = (0, Duration::MAX);
    for jobs in [4, 6, 8] {
        let wall = docker_loop(repo, dir, &image, 40, jobs);
        println!(
            "  probe docker run loop  -P {jobs}:     {:.2}/s",
            40.0 / wall.as_secs_f64()
        );
        if wall < best_loop.1 {
            best_loop = (jobs, wall);
        }
    }
    let score_wall = score_batch(dir, config, &batch, best_cli.0, "full");
    let loop_wall = docker_loop(repo, dir, &image, PROGRAMS, best_loop.0);
    let score_rate = PROGRAMS as f64 / score_wall.as_secs_f64();
    let loop_rate = PROGRAMS as f64 / loop_wall.as_secs_f64();
    println!(
        "  {:<30} {:>5} {:>10} {:>12}",
        "", "jobs", "wall (s)", "programs/s"
    );
    println!(
        "  {:<30} {:>5} {:>10.2} {:>12.2}",
        "progscore score (scored, stored)",
        best_cli.0,
        score_wall.as_secs_f64(),
        score_rate
    );
    println!(
        "  {:<30} {:>5} {:>10.2} {:>12.2}",
        "docker run loop (run only)",
        best_loop.0,
        loop_wall.as_secs_f64(),
        loop_rate
    );
    println!("  ratio: {:.2}x (target >= 1.5x)", score_rate / loop_rate);
}

/// Scores a batch into a fresh store (so everything runs); checks every verdict is true.
fn score_batch(dir: &Path, config: &Path, lines: &[String], jobs: usize, tag: &str) -> Duration {
    let batch = dir.join(format!("batch-{tag}.jsonl"));
    std::fs::write(&batch, lines.join("\n")).expect("batch");
    let _ = std::fs::remove_file(dir.join("bench.db"));
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_progscore"))
        .arg("--config")
        .arg(config)
        .args(["score", "--jobs", &jobs.to_string(), "--fresh"])
        .arg(&batch)
        .stderr(Stdio::null())
        .output()
        .expect("progscore score");
    let wall = started.elapsed();
    assert!(output.status.success(), "score failed");
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(text.lines().count(), lines.len());
    assert!(
        text.lines().all(|l| l.contains("\"value\":true")),
        "a verdict was not true"
    );
    wall
}

fn docker_loop(repo: &Path, dir: &Path, image: &str, count: usize, jobs: usize) -> Duration {
    let out = dir.join(format!("loop-{count}-{jobs}"));
    std::fs::create_dir_all(&out).expect("out dir");
    let mut list = String::new();
    for i in 0..count {
        let path = out.join(format!("p{i}.py"));
        std::fs::write(&path, format!("import sys\nn = int(sys.argv[1])\nprint(sum(k * k for k in range(n)) % 1000 + {i})\n")).expect("program");
        list.push_str(&format!("{} {} {i}\n", path.display(), 1000 + i));
    }
    let list_path = out.join("list");
    std::fs::write(&list_path, list).expect("list");
    let started = Instant::now();
    let status = Command::new("bash")
        .arg(repo.join("scripts/docker-run-loop.sh"))
        .arg(image)
        .arg(jobs.to_string())
        .arg(&list_path)
        .arg(&out)
        .status()
        .expect("docker run loop");
    let wall = started.elapsed();
    assert!(status.success());
    for i in 0..count {
        let printed = std::fs::read_to_string(out.join(format!("out-{i}"))).unwrap_or_default();
        assert_eq!(printed.trim(), expected_output(i));
    }
    wall
}

fn memory(dir: &Path, config_path: &Path, sizes: &[usize]) {
    let largest = sizes.iter().copied().max().expect("a size");
    // Stored evidence for every item, made through the real scorer with a
    // scripted backend (it answers what the program would print).
    let config = Config::load(config_path).expect("config");
    let store_path = dir.join("big.db");
    let _ = std::fs::remove_file(&store_path);
    // PROGSCORE_BENCH_STORE=DIR keeps the seeded store and batch there and
    // reuses them on the next run (seeding 200,000 items takes minutes):
    // each run measures a fresh copy of the seeded store, so runs before
    // and after a change start from the same evidence.
    let kept = std::env::var_os("PROGSCORE_BENCH_STORE").map(std::path::PathBuf::from);
    let all = dir.join("all.jsonl");
    if let Some(kept) = &kept
        && seeded_count(kept) >= largest
    {
        std::fs::copy(kept.join("seed.db"), &store_path).expect("copy the kept store");
        std::fs::copy(kept.join("all.jsonl"), &all).expect("copy the kept batch");
        println!(
            "  (reused the {} observations seeded in {})",
            seeded_count(kept),
            kept.display()
        );
    } else {
        seed(&config, &store_path, &all, largest);
        if let Some(kept) = &kept {
            std::fs::create_dir_all(kept).expect("PROGSCORE_BENCH_STORE");
            std::fs::copy(&store_path, kept.join("seed.db")).expect("keep the store");
            std::fs::copy(&all, kept.join("all.jsonl")).expect("keep the batch");
            std::fs::write(kept.join("seeded"), largest.to_string()).expect("keep the count");
        }
    }
    memory_rows(dir, config_path, sizes, &all);
}

/// How many items the store kept in `kept` was seeded with (0: none).
fn seeded_count(kept: &Path) -> usize {
    std::fs::read_to_string(kept.join("seeded"))
        .ok()
        .and_then(|count| count.trim().parse().ok())
        .filter(|_| kept.join("seed.db").is_file() && kept.join("all.jsonl").is_file())
        .unwrap_or(0)
}

/// Stores evidence for items 0..`largest` in `store_path` and writes their
/// lines to `all`.
fn seed(config: &Config, store_path: &Path, all: &Path, largest: usize) {
    let store = Arc::new(EvidenceStore::open(store_path).expect("store"));
    let comparators: Arc<dyn OutputComparator> = Arc::new(WasmComparators(Arc::new(
        load_comparators(config).expect("comparators"),
    )));
    let python = config.profile("python").expect("python").clone();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    // The evidence is keyed by what the real backend resolves the profile to
    // (its image digest, the engine's runtime): the scripted client answers
    // the real preflight, so that `score` finds what was seeded.
    let resolved = runtime
        .block_on(
            Backends::new(vec![python.clone()])
                .expect("backends")
                .preflight("python"),
        )
        .expect("the python profile's preflight");
    let client = ScriptedClient::new(vec![python])
        .with_preflight(move |_| Ok(resolved.clone()))
        .with_responder(|request| {
            let index: usize = request.invocations[0].args[0]
                .parse::<usize>()
                .unwrap_or(1000)
                - 1000;
            Ok(vec![exited_event(
                0,
                format!("{}\n", expected_output(index)).as_bytes(),
                b"",
            )])
        });
    let client: Arc<dyn SandboxClient> = Arc::new(client);
    let scorer = ProgramExecutionScorer::new(
        ProgramExecutionSource::new(client, store.clone()),
        comparators,
    );
    // The largest batch's lines, written as they are seeded; a smaller
    // batch is its first lines.
    let mut lines = std::io::BufWriter::new(std::fs::File::create(all).expect("batch"));
    let seeding = Instant::now();
    runtime.block_on(async {
        for i in 0..largest {
            let line = item_line(i, &expected_output(i));
            let item: serde_json::Value = serde_json::from_str(&line).expect("item");
            let expectation =
                serde_json::from_value(item["expectation"].clone()).expect("expectation");
            let program = item["program"]
                .as_str()
                .expect("program")
                .as_bytes()
                .to_vec();
            scorer
                .score(
                    ScoreRequest::new(ProgramInput::Inline(program), expectation)
                        .item_id(format!("item-{i}")),
                )
                .await
                .expect("seed score");
            use std::io::Write as _;
            writeln!(lines, "{line}").expect("batch line");
        }
    });
    drop(lines);
    println!(
        "  (seeded {largest} observations in {:.1} s)",
        seeding.elapsed().as_secs_f64()
    );
}

/// `score` and `rescore` of the first `size` lines of `all` for each size,
/// against the seeded store (`big.db` in `dir`).
fn memory_rows(dir: &Path, config_path: &Path, sizes: &[usize], all: &Path) {
    let big_config = dir.join("big.toml");
    std::fs::write(
        &big_config,
        std::fs::read_to_string(config_path)
            .unwrap()
            .replace("path = \"bench.db\"", "path = \"big.db\""),
    )
    .expect("config");
    let (baseline, _) = peak_rss(&big_config, &["profiles"]);
    println!(
        "  {:<10} {:>16} {:>10} {:>10} {:>16} {:>10} {:>10}",
        "items", "score peak RSS", "wall (s)", "items/s", "rescore RSS", "wall (s)", "items/s"
    );
    println!(
        "  {:<10} {:>13.1} MB   (progscore profiles: the startup baseline)",
        "-",
        mb(baseline)
    );
    let mut rows = Vec::new();
    for &size in sizes {
        let batch = dir.join(format!("batch-{size}.jsonl"));
        {
            use std::io::{BufRead as _, Write as _};
            let mut out = std::io::BufWriter::new(std::fs::File::create(&batch).expect("batch"));
            let read = std::io::BufReader::new(std::fs::File::open(all).expect("all"));
            for line in read.lines().take(size) {
                writeln!(out, "{}", line.expect("line")).expect("batch line");
            }
        }
        let row = measure(&big_config, dir, &batch, size);
        println!(
            "  {:<10} {:>13.1} MB {:>10.2} {:>10.0} {:>13.1} MB {:>10.2} {:>10.0}",
            size,
            mb(row.0),
            row.1.as_secs_f64(),
            size as f64 / row.1.as_secs_f64(),
            mb(row.2),
            row.3.as_secs_f64(),
            size as f64 / row.3.as_secs_f64(),
        );
        rows.push((size, row));
        let _ = std::fs::remove_file(&batch);
    }
    if let (Some((small, a)), Some((large, b))) = (rows.first(), rows.last())
        && small != large
    {
        println!(
            "  {large} vs {small} items: peak RSS score {:.2}x, rescore {:.2}x; items/s score {:.2}x, rescore {:.2}x",
            b.0 as f64 / a.0 as f64,
            b.2 as f64 / a.2 as f64,
            (*large as f64 / b.1.as_secs_f64()) / (*small as f64 / a.1.as_secs_f64()),
            (*large as f64 / b.3.as_secs_f64()) / (*small as f64 / a.3.as_secs_f64()),
        );
    }
    println!(
        "  target: peak RSS at the largest within 1.5x of the smallest, items/s not lower; <= 150 MB"
    );
}

/// `score` then `rescore` of `batch` (`size` items, all stored): each one's
/// peak RSS and wall time.
fn measure(config: &Path, dir: &Path, batch: &Path, size: usize) -> (u64, Duration, u64, Duration) {
    let scored = dir.join("scored.jsonl");
    let (score_rss, score_wall) = peak_rss(
        config,
        &[
            "score",
            batch.to_str().unwrap(),
            "--out",
            scored.to_str().unwrap(),
        ],
    );
    let lines = std::fs::read_to_string(&scored).expect("score results");
    assert_eq!(lines.lines().count(), size);
    assert!(
        lines.lines().all(|l| l.contains("\"evidence\":\"stored\"")),
        "score ran something instead of reusing the stored evidence"
    );
    let rescored = dir.join("rescored.jsonl");
    let (rescore_rss, rescore_wall) = peak_rss(
        config,
        &[
            "rescore",
            batch.to_str().unwrap(),
            "--out",
            rescored.to_str().unwrap(),
        ],
    );
    // The figure counts only if the evidence was found and re-graded.
    let lines = std::fs::read_to_string(&rescored).expect("rescore results");
    assert_eq!(lines.lines().count(), size);
    assert!(
        lines.lines().all(|l| l.contains("\"value\":true")),
        "rescore did not find every item's evidence"
    );
    (score_rss, score_wall, rescore_rss, rescore_wall)
}

fn mb(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Runs progscore and returns its peak resident set (KiB, from wait4's
/// rusage: exact, however short the process) and its wall time.
fn peak_rss(config: &Path, args: &[&str]) -> (u64, Duration) {
    let started = Instant::now();
    // Reaped by wait4 below, which also yields the peak RSS.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(env!("CARGO_BIN_EXE_progscore"))
        .arg("--config")
        .arg(config)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("progscore");
    let mut status = 0;
    // SAFETY: plain structs filled by the kernel for our own child, which std
    // has not reaped (we never call wait on `child`).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(reaped, child.id() as i32, "wait4 failed");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "progscore {args:?} failed"
    );
    (usage.ru_maxrss as u64, started.elapsed())
}
