//! What judging by a checker costs, beside judging by a comparator, measured
//! in one run (examples/contest/pair-sum's checkers).
//!
//! 1. Per case: a batch of items (a Python program that prints its answer)
//!    is scored once with the comparator `equals`, which stores the
//!    programs' runs. Then, over that same evidence, each printed as time
//!    per case beside the baseline's:
//!    - `rescore` with `equals` (the baseline);
//!    - `rescore` with the `tokens` checker component (WebAssembly);
//!    - `score` with a checker program (Python, Codeforces' conventions),
//!      which runs only the checker: one sandboxed run per item judging
//!      every case.
//! 2. A 10-test C++ item through Piston's `/api/v2/execute`, one request
//!    per test sent together (open-r1's `test_batch_size=-1`): plain runs of
//!    the program (its build shared) beside open-r1's `codeforces` package
//!    requests judged by the built-in checker and by `checker.py`.
//!
//! `cargo bench -p progscore --bench judging` (after scripts/setup.sh).
//! PROGSCORE_BENCH_ITEMS sets the items of part 1 (default 20, 10 cases each).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use progscore_test_kit::served::{Served, try_post_json};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_progscore");
const CASES: usize = 10;

fn contest(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/contest")
        .join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn main() {
    let items: usize = std::env::var("PROGSCORE_BENCH_ITEMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("progscore.toml");
    let text = progscore_test_kit::replace_required(
        &progscore_test_kit::generated_config_text(),
        "path = \"progscore.db\"",
        "path = \"bench-judging.db\"",
    );
    std::fs::write(
        &config,
        format!(
            "{text}\n[serve]\nprofiles = [\"python\", \"cpp-codeforces\"]\nqueue = 4096\nqueue_wait = \"600s\"\n"
        ),
    )
    .expect("config");
    let nonce = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    per_case(dir.path(), &config, items, nonce);
    piston(dir.path(), &config, nonce);
}

/// pair-sum items: a program printing `1 n-1` (or `0 0`), judged against
/// the jury's `0 n` by `judge`; `equals` compares with the program's own
/// answer so that the baseline passes too.
fn batch(items: usize, nonce: u128, judge: &dyn Fn(u64) -> (Value, Value)) -> String {
    let mut lines = Vec::new();
    for item in 0..items {
        let program = format!(
            "# {nonce}-{item}\nn = int(input())\nprint(*((0, 0) if n == 0 else (1, n - 1)))\n"
        );
        let mut checker = Value::Null;
        let cases: Vec<Value> = (0..CASES as u64)
            .map(|case| {
                let n = 1 + case * 7 + item as u64;
                let (expected, item_checker) = judge(n);
                checker = item_checker;
                json!({"invocation": {"stdin": format!("{n}\n")}, "expected": expected})
            })
            .collect();
        let mut behaves = json!({"profile": "python", "cases": cases});
        if !checker.is_null() {
            behaves["checker"] = checker;
        }
        lines.push(
            json!({"id": format!("item-{item}"), "program": program,
                   "expectation": {"conditions": [{"program_behaves": behaves}]}})
            .to_string(),
        );
    }
    lines.join("\n") + "\n"
}

fn progscore(dir: &Path, config: &Path, command: &str, batch: &Path) -> (Duration, Vec<Value>) {
    let started = Instant::now();
    let output = Command::new(BIN)
        .current_dir(dir)
        .arg("--config")
        .arg(config)
        .arg(command)
        .arg(batch)
        .stderr(Stdio::null())
        .output()
        .expect("progscore");
    let wall = started.elapsed();
    let lines = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a result line"))
        .collect();
    (wall, lines)
}

fn write(dir: &Path, name: &str, text: String) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("batch");
    path
}

fn all_true(lines: &[Value], what: &str) {
    for line in lines {
        assert_eq!(line["value"], json!(true), "{what}: {line}");
    }
}

fn per_case(dir: &Path, config: &Path, items: usize, nonce: u128) {
    let cases = (items * CASES) as f64;
    let own_answer = |n: u64| {
        let answer = if n == 0 {
            "0 0".to_string()
        } else {
            format!("1 {}", n - 1)
        };
        (json!({"stdout": {"equals": answer}}), Value::Null)
    };
    let plain = write(dir, "plain.jsonl", batch(items, nonce, &own_answer));
    let (wall, lines) = progscore(dir, config, "score", &plain);
    all_true(&lines, "the first score");
    println!(
        "judging by a checker, per case ({items} items x {CASES} cases, Python; the programs \
         ran once, in {:.1} s)",
        wall.as_secs_f64()
    );
    let (baseline, lines) = progscore(dir, config, "rescore", &plain);
    all_true(&lines, "rescore with equals");
    let component = write(
        dir,
        "tokens.jsonl",
        batch(items, nonce, &|n| {
            (json!({"answer": format!("1 {}", n - 1)}), json!("tokens"))
        }),
    );
    let (wasm, lines) = progscore(dir, config, "rescore", &component);
    all_true(&lines, "rescore with the tokens checker");
    let checker = contest("pair-sum/checker.py");
    let program = write(
        dir,
        "checker-program.jsonl",
        batch(items, nonce, &|n| {
            (
                json!({"answer": format!("0 {n}")}),
                json!({"program": {"profile": "python", "protocol": "codeforces", "source": checker}}),
            )
        }),
    );
    let (sandboxed, lines) = progscore(dir, config, "score", &program);
    all_true(&lines, "score with the checker program");
    for line in &lines {
        assert_eq!(line["evidence"], "stored", "the program ran again: {line}");
    }
    let per = |wall: Duration| wall.as_secs_f64() * 1e3 / cases;
    println!("  {:<46} {:>10} {:>8}", "", "ms/case", "ratio");
    println!(
        "  {:<46} {:>10.3} {:>7.2}x",
        "rescore, comparator `equals` (baseline)",
        per(baseline),
        1.0
    );
    println!(
        "  {:<46} {:>10.3} {:>7.2}x",
        "rescore, checker component `tokens` (WASM)",
        per(wasm),
        per(wasm) / per(baseline)
    );
    println!(
        "  {:<46} {:>10.3} {:>7.2}x",
        "score, checker program (Python, sandboxed)",
        per(sandboxed),
        per(sandboxed) / per(baseline)
    );
    println!("  (each line is a whole progscore command: start, store, and the judging)");
}

/// open-r1's `codeforces` request for pair-sum's right C++ submission on `n`.
fn codeforces(program: &str, n: u64, checker: Option<&str>) -> Value {
    let mut files = vec![json!({"name": "main.cpp", "content": program})];
    if let Some(checker) = checker {
        files.push(json!({"name": "checker.py", "content": checker}));
    }
    files.extend([
        json!({"name": "input.txt", "content": format!("{n}\n")}),
        json!({"name": "correct_output.txt", "content": format!("0 {n}\n")}),
        json!({"name": "grader_config", "content": "TIME_LIMIT=2\nMEMORY_LIMIT=256\nINPUT_MODE=stdio"}),
    ]);
    json!({"language": "c++17", "version": "*", "files": files})
}

/// Sends `bodies` together, one connection each; the wall time, every
/// answer checked by `check`.
fn together(served: &Served, bodies: Vec<Value>, check: &(dyn Fn(&Value) + Sync)) -> Duration {
    let address = served
        .url()
        .trim_start_matches("http://")
        .parse()
        .expect("the server's address");
    let started = Instant::now();
    std::thread::scope(|scope| {
        for body in &bodies {
            scope.spawn(move || {
                let reply = try_post_json(address, "/api/v2/execute", body).expect("an answer");
                assert_eq!(
                    reply.status,
                    200,
                    "{}",
                    String::from_utf8_lossy(&reply.body)
                );
                check(&reply.json());
            });
        }
    });
    started.elapsed()
}

fn piston(dir: &Path, config: &Path, nonce: u128) {
    let mut command = Command::new(BIN);
    command
        .current_dir(dir)
        .arg("--config")
        .arg(config)
        .args(["serve", "--listen", "127.0.0.1:0"]);
    let served = Served::spawn(command)
        .unwrap_or_else(|(code, log)| panic!("progscore serve exited with {code:?}:\n{log}"));
    let right = contest("pair-sum/submissions/right.cpp");
    let checker = contest("pair-sum/checker.py");
    let tests: Vec<u64> = (1..=10).map(|t| t * 1000 + 7).collect();
    println!(
        "a 10-test C++ item through /api/v2/execute (10 requests together, a fresh program each round)"
    );
    println!("  {:<46} {:>10} {:>8}", "", "s", "ratio");
    let mut baseline = None;
    for (round, (label, judged)) in [
        ("plain runs, no judging (baseline)", None),
        ("codeforces package, built-in checker", Some(None)),
        (
            "codeforces package, checker.py (sandboxed)",
            Some(Some(&checker)),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let program = format!("// {nonce}-{round}\n{right}");
        let wall = match judged {
            None => together(
                &served,
                tests
                    .iter()
                    .map(|n| {
                        json!({"language": "cpp-codeforces", "version": "*",
                               "files": [{"content": program}], "stdin": format!("{n}\n")})
                    })
                    .collect(),
                &|answer| assert_eq!(answer["run"]["code"], 0, "{answer}"),
            ),
            Some(checker) => together(
                &served,
                tests
                    .iter()
                    .map(|n| codeforces(&program, *n, checker.map(String::as_str)))
                    .collect(),
                // The built-in compares with the jury's pair, which the right
                // submission does not print; checker.py accepts it.
                &|answer| {
                    let expected = if checker.is_some() { "1\n" } else { "0\n" };
                    assert_eq!(answer["run"]["stdout"], expected, "{answer}");
                },
            ),
        };
        let seconds = wall.as_secs_f64();
        let base = *baseline.get_or_insert(seconds);
        println!("  {label:<46} {seconds:>10.2} {:>7.2}x", seconds / base);
    }
}
