//! Throughput of the WASI backend against plain `python3` with no sandbox.
//!
//! The same generated programs (default 120; `PROGSCORE_BENCH_PROGRAMS=N`) run
//! through: plain `python3 -I` processes, the WASI backend with worker processes,
//! and the WASI backend with in-process threads, each at one job per core. Every
//! configuration is warmed up first (module compiled and loaded, workers
//! started), so the figures are steady-state throughput. The outputs of every
//! configuration are checked against each other.
//!
//! Needs `scripts/setup-wasi.sh` and a `python3` on PATH.
//! Run: `cargo bench -p progscore-wasi --bench throughput`.

use progscore_sandbox::SandboxClientExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use progscore_sandbox::{Invocation, Outcome, ProfileSpec, RuntimeProfile};
use progscore_wasi::{Execution, WasiClient, WasiOptions, WorkerCommand};

const FRAGMENT: &str = "/var/cache/progscore/wasi-profile.toml";
const WORKER: &str = env!("CARGO_BIN_EXE_progscore-wasi-worker");

struct Program {
    source: Vec<u8>,
    args: Vec<String>,
}

/// Small programs of the kind a model writes for a test case: parse input,
/// compute, print. Several shapes, so imports and work vary.
fn programs(count: usize) -> Vec<Program> {
    let shapes = [
        "import sys\nn = int(sys.argv[1])\nprint(sum(k * k for k in range(n)) + {i})\n",
        "import sys\nwords = sys.argv[1:]\nprint(' '.join(sorted(w[::-1] for w in words)), {i})\n",
        "import sys, json\nn = int(sys.argv[1])\nprint(json.dumps({{'n': n, 'sq': [k * k for k in range(n % 20)], 'id': {i}}}, sort_keys=True))\n",
        "import sys, re\ntext = ' '.join(sys.argv[1:]) * 3\nprint(len(re.findall(r'[aeiou]', text)), {i})\n",
        "import sys\nfrom collections import Counter\nc = Counter(str(int(sys.argv[1]) ** 7))\nprint(sorted(c.items()), {i})\n",
        "import sys\ndef fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\nprint(fib(int(sys.argv[1]) % 300), {i})\n",
    ];
    (0..count)
        .map(|i| {
            let shape = shapes[i % shapes.len()];
            let args = if i % shapes.len() == 1 || i % shapes.len() == 3 {
                vec!["banana".into(), format!("apple{i}"), "cherry".into()]
            } else {
                vec![(i * 37 + 11).to_string()]
            };
            Program {
                source: shape
                    .replace("{i}", &i.to_string())
                    .replace("{{", "{")
                    .replace("}}", "}")
                    .into_bytes(),
                args,
            }
        })
        .collect()
}

fn wasi_profile() -> RuntimeProfile {
    let text = std::fs::read_to_string(FRAGMENT)
        .unwrap_or_else(|e| panic!("{FRAGMENT}: {e}; run scripts/setup-wasi.sh first"));
    let mut table: toml::Table = toml::from_str(&text).expect("TOML");
    let profiles: toml::Table = table
        .remove("profiles")
        .expect("profiles")
        .try_into()
        .expect("table");
    let spec: ProfileSpec = profiles
        .get("python-wasi")
        .cloned()
        .expect("[profiles.python-wasi]")
        .try_into()
        .expect("spec");
    RuntimeProfile::from_spec("python-wasi", &spec, Path::new("/")).expect("profile")
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The real interpreter behind `python3` on PATH: a shim (pyenv's is a shell
/// script) would add its own start-up cost to the baseline.
fn native_python() -> PathBuf {
    let output = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 on PATH");
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

/// Runs every program with plain python3, `parallel` at a time; returns outputs.
async fn run_native(
    python: &Path,
    programs: &[Program],
    dir: &Path,
    parallel: usize,
) -> Vec<Vec<u8>> {
    let semaphore = Arc::new(tokio::sync::Semaphore::new(parallel));
    let mut tasks = Vec::new();
    for (i, program) in programs.iter().enumerate() {
        let path = dir.join(format!("p{i}.py"));
        std::fs::write(&path, &program.source).expect("write program");
        let args = program.args.clone();
        let python = python.to_path_buf();
        let semaphore = Arc::clone(&semaphore);
        tasks.push(tokio::spawn(async move {
            let _permit = semaphore.acquire().await.expect("semaphore");
            let output = tokio::process::Command::new(&python)
                .arg("-I")
                .arg(&path)
                .args(&args)
                .stdin(std::process::Stdio::null())
                .output()
                .await
                .expect("python3 runs");
            assert!(output.status.success(), "python3 failed: {:?}", output);
            output.stdout
        }));
    }
    let mut outputs = Vec::new();
    for task in tasks {
        outputs.push(task.await.expect("task"));
    }
    outputs
}

async fn run_wasi(client: &Arc<WasiClient>, programs: &[Program]) -> Vec<Vec<u8>> {
    let mut tasks = Vec::new();
    for program in programs {
        let client = Arc::clone(client);
        let source = program.source.clone();
        let invocations = vec![Invocation::with_args(program.args.clone())];
        tasks.push(tokio::spawn(async move {
            let run = client
                .execute(&source, "python-wasi", &invocations)
                .await
                .expect("execute");
            let event = &run.events[0];
            assert_eq!(
                event.outcome,
                Outcome::Exited { exit_code: 0 },
                "stderr: {}",
                event.stderr.data.to_string_lossy()
            );
            event.stdout.data.as_bytes().to_vec()
        }));
    }
    let mut outputs = Vec::new();
    for task in tasks {
        outputs.push(task.await.expect("task"));
    }
    outputs
}

struct Row {
    name: String,
    parallel: usize,
    wall: Duration,
}

#[tokio::main]
async fn main() {
    let count: usize = std::env::var("PROGSCORE_BENCH_PROGRAMS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(120);
    let programs = programs(count);
    let parallel = cores();
    let scratch = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .expect("tempdir");
    let cache_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("wasi-cache");
    let mut rows = Vec::new();

    // Baseline: warm the page cache with a few runs, then measure.
    let python = native_python();
    eprintln!("baseline interpreter: {}", python.display());
    run_native(
        &python,
        &programs[..parallel.min(count)],
        scratch.path(),
        parallel,
    )
    .await;
    let started = Instant::now();
    let native = run_native(&python, &programs, scratch.path(), parallel).await;
    rows.push(Row {
        name: "python3 -I, no sandbox".into(),
        parallel,
        wall: started.elapsed(),
    });

    let configurations = [
        (
            "wasi, worker processes",
            Execution::Workers {
                command: WorkerCommand::new(WORKER),
                workers: parallel,
            },
        ),
        (
            "wasi, in-process threads",
            Execution::InProcess {
                parallelism: parallel,
            },
        ),
        (
            "wasi, in-process, 1 thread",
            Execution::InProcess { parallelism: 1 },
        ),
    ];
    for (name, execution) in configurations {
        let options = WasiOptions {
            cache_dir: cache_dir.clone(),
            owner_root: scratch.path().to_path_buf(),
            execution,
        };
        let client = Arc::new(WasiClient::new([wasi_profile()], options).expect("client"));
        let prepare = Instant::now();
        client.prepare("python-wasi").await.expect("prepare");
        eprintln!("{name}: prepared in {:?}", prepare.elapsed());
        // Warm-up: starts the workers and touches the module's pages.
        run_wasi(&client, &programs[..(2 * client.parallelism()).min(count)]).await;
        let started = Instant::now();
        let outputs = run_wasi(&client, &programs).await;
        let wall = started.elapsed();
        for (i, (wasi, native)) in outputs.iter().zip(&native).enumerate() {
            assert_eq!(
                String::from_utf8_lossy(wasi),
                String::from_utf8_lossy(native),
                "program {i}: outputs differ"
            );
        }
        rows.push(Row {
            name: name.into(),
            parallel: client.parallelism(),
            wall,
        });
    }

    let baseline = rows[0].wall.as_secs_f64();
    println!();
    println!("{count} programs, {parallel} cores");
    println!(
        "{:<30} {:>8} {:>10} {:>12} {:>10} {:>10}",
        "configuration", "parallel", "wall (s)", "programs/s", "ms/prog", "ratio"
    );
    for row in &rows {
        let wall = row.wall.as_secs_f64();
        println!(
            "{:<30} {:>8} {:>10.2} {:>12.1} {:>10.1} {:>9.2}x",
            row.name,
            row.parallel,
            wall,
            count as f64 / wall,
            1000.0 * wall / count as f64,
            wall / baseline
        );
    }
}
