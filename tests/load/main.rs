//! Verdicts do not depend on load: a corpus of 100 small correct programs
//! of varied CPU cost, and 10 programs that spin or sleep forever, scored
//! through the binary with a one-second limit at 16× the CPU count with a
//! CPU hog and a disk hog (synced writes, the page cache dropped over and
//! over) beside the batch, under runc, gVisor and WASI (Docker and OCI).
//! Every correct program must be `true`, every spinner and sleeper `false`
//! (`timed_out`) (an unproven timeout may leave one undetermined, never
//! wrong: the hogs, or any other work on the machine, may starve a program
//! past proof), and no observation stored as an attempt's reusable evidence
//! may rest on an unconfirmed timeout or a sandbox error. A second run of
//! each batch reuses every decided verdict.
//!
//! Its own test binary: cargo runs test binaries one after another, so no
//! other test adds load while these measure; the backends take turns too.

use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::Instant;

use progscore_e2e::{Dir, result_lines, stderr, verdict};

/// One backend at a time: each pass is load enough.
static TURN: Mutex<()> = Mutex::new(());

/// A program, its argument and what it must print.
struct Item {
    id: String,
    program: String,
    arg: String,
    expected: String,
    /// Spins or sleeps forever: must time out.
    endless: bool,
}

fn corpus() -> Vec<Item> {
    let mut items = Vec::new();
    for i in 0..25u64 {
        let n = 2_000 + i * 12_000;
        let sum = (0..n as u128).map(|k| k * k).sum::<u128>() % 1_000_003;
        items.push(correct(
            format!("squares-{i}"),
            format!("import sys\n# squares {i}\nn = int(sys.argv[1])\nprint(sum(k * k for k in range(n)) % 1000003)\n"),
            n,
            sum,
        ));
        let n = 10_000 + i * 40_000;
        items.push(correct(
            format!("primes-{i}"),
            format!(
                "import sys\n# primes {i}\nn = int(sys.argv[1])\ns = bytearray([1]) * n\ns[0:2] = b'\\x00\\x00'\nfor p in range(2, int(n ** 0.5) + 1):\n    if s[p]:\n        s[p * p::p] = bytearray(len(range(p * p, n, p)))\nprint(sum(s))\n"
            ),
            n,
            primes_below(n),
        ));
        let n = 1_000 + i * 20_000;
        items.push(correct(
            format!("fibonacci-{i}"),
            format!("import sys\n# fibonacci {i}\na, b = 0, 1\nfor _ in range(int(sys.argv[1])):\n    a, b = b, (a + b) % 1000000007\nprint(a)\n"),
            n,
            fibonacci_mod(n),
        ));
        let n = 1_000 + i * 8_000;
        items.push(correct(
            format!("sevens-{i}"),
            format!("import sys\n# sevens {i}\nprint(sum(str(k).count('7') for k in range(int(sys.argv[1]))))\n"),
            n,
            (0..n).map(|k| k.to_string().matches('7').count() as u128).sum(),
        ));
    }
    for k in 0..5 {
        items.push(endless(
            format!("spinner-{k}"),
            format!("# spinner {k}\nwhile True:\n    pass\n"),
        ));
        items.push(endless(
            format!("sleeper-{k}"),
            format!("import time\n# sleeper {k}\ntime.sleep(3600)\n"),
        ));
    }
    items
}

fn correct(id: String, program: String, n: u64, expected: u128) -> Item {
    Item {
        id,
        program,
        arg: n.to_string(),
        expected: expected.to_string(),
        endless: false,
    }
}

fn endless(id: String, program: String) -> Item {
    Item {
        id,
        program,
        arg: "0".into(),
        expected: "never".into(),
        endless: true,
    }
}

fn primes_below(n: u64) -> u128 {
    let n = n as usize;
    let mut sieve = vec![true; n];
    sieve[0] = false;
    sieve[1] = false;
    let mut p = 2;
    while p * p < n {
        if sieve[p] {
            (p * p..n).step_by(p).for_each(|m| sieve[m] = false);
        }
        p += 1;
    }
    sieve.iter().filter(|&&prime| prime).count() as u128
}

fn fibonacci_mod(n: u64) -> u128 {
    let (mut a, mut b) = (0u128, 1u128);
    for _ in 0..n {
        (a, b) = (b, (a + b) % 1_000_000_007);
    }
    a
}

fn batch(items: &[&Item], profile: &str) -> String {
    items
        .iter()
        .map(|item| {
            serde_json::json!({
                "id": item.id,
                "program": item.program,
                "expectation": {"conditions": [{"program_behaves": {"profile": profile, "cases": [
                    {"invocation": {"args": [item.arg], "stdin": null},
                     "expected": {"stdout": {"equals": item.expected}, "exit_code": 0}}]}}]},
            })
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A busy process beside the batch, outside progscore.
struct CpuHog(Child);

impl CpuHog {
    fn start() -> CpuHog {
        CpuHog(
            Command::new("python3")
                .args(["-c", "while True: pass"])
                .spawn()
                .expect("start a CPU hog"),
        )
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A busy disk beside the batch: writes synced to disk, and the page cache
/// dropped again and again, so that every program's interpreter and
/// libraries are read from that disk (its stalls are the machine's time,
/// never the program's).
struct DiskHog(Child);

impl DiskHog {
    fn start(scratch: &std::path::Path) -> DiskHog {
        use std::os::unix::process::CommandExt as _;
        let file = scratch.join("disk-hog");
        DiskHog(
            Command::new("sh")
                .args([
                    "-c",
                    "while :; do dd if=/dev/zero of=\"$1\" bs=1M count=32 conv=fsync status=none; \
                     echo 1 > /proc/sys/vm/drop_caches; done",
                    "disk-hog",
                ])
                .arg(&file)
                // Its own process group: its `dd` ends with it.
                .process_group(0)
                .spawn()
                .expect("start a disk hog"),
        )
    }
}

impl Drop for DiskHog {
    fn drop(&mut self) {
        let group = libc::pid_t::try_from(self.0.id()).expect("a pid");
        // SAFETY: kill(2) with a process group id this test created.
        unsafe { libc::kill(-group, libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Scores the corpus under `profile` at each load and checks every verdict.
fn verdicts_do_not_depend_on_load(profile: &str) {
    let _turn = TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let corpus = corpus();
    assert!(corpus.iter().filter(|i| !i.endless).count() >= 100);
    // The whole corpus at 16 jobs per CPU beside a CPU hog and a disk hog:
    // the load a user's batch meets. (A pass at 16 per CPU without the
    // hogs, and a baseline at one job per CPU, asserted nothing this one
    // does not, under lighter loads: together they took half of the
    // suite's time.)
    let everything: Vec<&Item> = corpus.iter().collect();
    let jobs = 16 * cpus();
    let items = &everything;
    let text = batch(items, profile);
    let dir = Dir::new();
    dir.edit_config(|config| {
        progscore_test_kit::replace_required(&config, "timeout = \"10s\"", "timeout = \"1s\"")
    });
    dir.write("batch.jsonl", &text);
    let _hogs = (CpuHog::start(), DiskHog::start(dir.path()));
    let jobs_arg = jobs.to_string();
    let started = Instant::now();
    let output = dir.run(&[
        "score",
        "batch.jsonl",
        "--out",
        "results.jsonl",
        "--jobs",
        &jobs_arg,
    ]);
    let wall = started.elapsed();
    let pass = format!("{profile}, --jobs {jobs}, CPU and disk hogs");
    assert_eq!(output.status.code(), Some(0), "{pass}: {}", stderr(&output));
    let results = result_lines(&std::fs::read_to_string(dir.path().join("results.jsonl")).unwrap());
    assert_eq!(results.len(), items.len(), "{pass}");
    let mut undetermined = 0;
    for line in &results {
        let id = line["id"].as_str().unwrap();
        let item = items.iter().find(|i| i.id == id).unwrap();
        let got = verdict(line);
        if got == "undetermined" {
            // Beside a disk that stalls every task of the machine, or
            // other work on it, a timeout may stay unproven (gVisor's
            // many threads all wait for the disk): undetermined, never
            // wrong.
            assert_eq!(
                line["reason_kind"], "unconfirmed_timeout",
                "{pass}: {id}: {line}"
            );
            undetermined += 1;
            continue;
        }
        if item.endless {
            assert_eq!(got, "false", "{pass}: {id}: {line}");
            assert_eq!(
                line["cases"][0]["outcome"], "timed_out",
                "{pass}: {id}: {line}"
            );
        } else {
            assert_eq!(got, "true", "{pass}: {id}: {line}");
        }
    }
    let confirmations = reusable_evidence_is_proven(&dir, &pass);
    println!(
        "load: {pass}: {} items in {:.1} s, {confirmations} invocation(s) confirmed alone, \
             {undetermined} undetermined",
        items.len(),
        wall.as_secs_f64()
    );
    // The same batch again: every verdict comes from the stored evidence.
    let again = dir.run(&["score", "batch.jsonl", "--jobs", &jobs_arg]);
    assert_eq!(again.status.code(), Some(0), "{pass}: {}", stderr(&again));
    let again = result_lines(&progscore_e2e::stdout(&again));
    for line in &again {
        let first = results.iter().find(|r| r["id"] == line["id"]).unwrap();
        if verdict(first) == "undetermined" {
            // Never reused: it runs again, and may now be decided, never wrongly.
            let item = items.iter().find(|i| line["id"] == i.id.as_str()).unwrap();
            let right = if item.endless { "false" } else { "true" };
            assert!(
                [right, "undetermined"].contains(&verdict(line).as_str()),
                "{pass}: {line}"
            );
            continue;
        }
        assert_eq!(line["evidence"], "stored", "{pass}: {line}");
        assert_eq!(verdict(line), verdict(first), "{pass}: {line}");
    }
}

/// Checks the store: an observation kept under an attempt's own id (the one
/// reused by later runs) never rests on an unconfirmed timeout or a sandbox
/// error. Returns how many invocations were confirmed by a run alone.
fn reusable_evidence_is_proven(dir: &Dir, pass: &str) -> usize {
    let store = rusqlite::Connection::open(dir.path().join("evidence.db")).expect("open store");
    let mut statement = store
        .prepare("SELECT id, run FROM observations")
        .expect("query");
    let rows: Vec<(String, String)> = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("rows")
        .map(|row| row.expect("row"))
        .collect();
    let mut confirmations = 0;
    for (id, run) in rows {
        let run: serde_json::Value = serde_json::from_str(&run).expect("run JSON");
        let derived = id.len() == "obs-".len() + 32;
        for event in run["events"].as_array().expect("events") {
            let unproven = event.get("unconfirmed").is_some()
                || matches!(event["outcome"].as_str(), Some("sandbox_error" | "not_run"));
            assert!(
                !(derived && unproven),
                "{pass}: {id} is reusable but unproven: {event}"
            );
        }
        confirmations += run["sandbox_warnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .filter(|w| {
                w.as_str()
                    .is_some_and(|w| w.contains("ran again with no other program"))
            })
            .count();
    }
    confirmations
}

#[test]
fn verdicts_do_not_depend_on_load_under_runc() {
    verdicts_do_not_depend_on_load("python");
}

#[test]
fn verdicts_do_not_depend_on_load_under_gvisor() {
    verdicts_do_not_depend_on_load("python-gvisor");
}

#[test]
fn verdicts_do_not_depend_on_load_under_wasi() {
    verdicts_do_not_depend_on_load("python-wasi");
}

#[test]
fn verdicts_do_not_depend_on_load_under_oci_runc() {
    verdicts_do_not_depend_on_load("python-oci");
}

#[test]
fn verdicts_do_not_depend_on_load_under_oci_gvisor() {
    verdicts_do_not_depend_on_load("python-oci-gvisor");
}
