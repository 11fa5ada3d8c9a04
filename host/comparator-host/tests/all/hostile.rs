//! Hostile guests: each must end undetermined (or harmless), within its
//! limits, and leave the shared host working.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use progscore_comparator_host::{ComparatorHost, ComparisonOutcome, ObservedStream, test_guests};

use crate::{TEST_TIMEOUT, letter, run, test_options};

/// A host with every hostile fixture registered (pinned by their own hash).
fn hostile_host() -> &'static ComparatorHost {
    static HOST: OnceLock<ComparatorHost> = OnceLock::new();
    HOST.get_or_init(|| {
        let mut host = ComparatorHost::new(test_options()).expect("create host");
        host.register_builtins().expect("register built-ins");
        for (name, path) in test_guests::HOSTILE {
            if *name == "wrong-world" {
                continue;
            }
            let sha = sha256_of(path);
            host.register_user(name, path, &sha)
                .unwrap_or_else(|e| panic!("register {name}: {e}"));
        }
        host
    })
}

pub fn sha256_of(path: &str) -> String {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    hex::encode(Sha256::digest(bytes))
}

fn call(name: &str, params: &str) -> ComparisonOutcome {
    hostile_host()
        .compare(name, params, &ObservedStream::complete(b"42\n".to_vec()))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// After each hostile call, the built-ins still answer correctly.
fn host_still_works() {
    let outcome = hostile_host()
        .compare(
            "equals",
            r#"{"value":"42"}"#,
            &ObservedStream::complete(b"42\n".to_vec()),
        )
        .expect("equals after a hostile guest");
    assert_eq!(outcome, ComparisonOutcome::Match);
}

fn assert_undetermined(outcome: &ComparisonOutcome, needle: &str) {
    match outcome {
        ComparisonOutcome::Undetermined(reason) => {
            assert!(
                reason.contains(needle),
                "reason {reason:?} should mention {needle:?}"
            )
        }
        other => panic!("expected undetermined ({needle}), got {other:?}"),
    }
}

#[test]
fn infinite_loop_is_stopped_at_its_deadline() {
    // Registered (and compiled) first: the clock measures the call alone.
    hostile_host();
    let start = Instant::now();
    let outcome = call("infinite-loop", "{}");
    let took = start.elapsed();
    assert_undetermined(&outcome, "deadline");
    // Stopped by the deadline, not before it.
    assert!(
        took >= TEST_TIMEOUT - Duration::from_millis(20),
        "stopped after {took:?}, deadline {TEST_TIMEOUT:?}"
    );
    host_still_works();
}

#[test]
fn four_gib_allocation_is_refused() {
    let outcome = call("alloc-4gib", "{}");
    assert_undetermined(&outcome, "memory limit of 64 MiB");
    host_still_works();
}

#[test]
fn panic_is_undetermined_with_its_message() {
    let outcome = call("panics", "{}");
    assert_undetermined(&outcome, "comparator exploded on purpose after 3 bytes");
    host_still_works();
}

#[test]
fn environment_and_arguments_are_empty() {
    let report = probe("env");
    assert_eq!(report["vars"], serde_json::json!([]), "{report}");
    assert_eq!(report["args"], serde_json::json!([]), "{report}");
    // A real working directory of the host must not leak either.
    let cwd = report["cwd"].as_str().unwrap_or("");
    assert!(!cwd.contains("work") && !cwd.contains("root"), "{report}");
}

#[test]
fn files_are_out_of_reach() {
    let report = probe("file");
    for key in ["passwd", "root", "dot", "write"] {
        let text = report[key].as_str().unwrap_or_default();
        assert!(text.starts_with("Err"), "{key}: {text} ({report})");
    }
    assert!(!std::path::Path::new("/tmp/progscore-probe").exists());
}

#[test]
fn clocks_are_frozen() {
    let report = probe("clock");
    assert_eq!(report["wall_unix_nanos"], 0, "{report}");
    assert_eq!(report["monotonic_elapsed_nanos"], 0, "{report}");
}

#[test]
fn randomness_is_fixed() {
    // Same seed every call, so comparators are reproducible.
    assert_eq!(probe("random"), probe("random"));
}

#[test]
fn sleeping_is_refused_without_blocking_the_host() {
    // Had the guest been allowed to sleep, its call would have ended at the
    // deadline instead: the reason says which.
    let outcome = call("ambient-probe", "sleep");
    assert_undetermined(&outcome, "may not sleep");
    host_still_works();
}

#[test]
fn stdout_flood_is_discarded_and_stderr_bounded() {
    let before = rss_kib();
    let outcome = call("stdout-flood", "{}");
    // 512 MiB written; nothing kept beyond the small stderr buffer. The write
    // loop either finishes (match) or hits the deadline (undetermined).
    if let ComparisonOutcome::Undetermined(reason) = &outcome {
        assert!(reason.contains("deadline"), "{reason}");
        assert!(reason.len() < 5000, "reason of {} bytes", reason.len());
    } else {
        assert_eq!(outcome, ComparisonOutcome::Match);
    }
    let grown = rss_kib().saturating_sub(before);
    assert!(grown < 256 * 1024, "host RSS grew by {grown} KiB");
    host_still_works();
}

#[test]
fn garbage_answers_are_contained() {
    // A 16 MiB reason is cut to a readable size.
    let outcome = call("garbage", "huge-reason");
    assert_eq!(letter(&outcome), 'X');
    let reason = outcome.reason().unwrap_or_default();
    assert!(
        reason.len() <= 4200 && reason.contains("cut"),
        "{} bytes",
        reason.len()
    );
    // A string that is not UTF-8 cannot cross the boundary.
    assert_undetermined(&call("garbage", "bad-utf8"), "failed");
    // Exiting is not an answer. (WASI 0.2 exit only says success or failure,
    // so exit(3) arrives as status 1.)
    assert_undetermined(&call("garbage", "exit"), "exited with status 1");
    // compare refusing what validate accepted is a parameter error.
    hostile_host()
        .validate("garbage", "compare-refuses")
        .expect("validate accepts");
    let err = hostile_host()
        .compare("garbage", "compare-refuses", &ObservedStream::default())
        .expect_err("compare refuses");
    assert!(err.to_string().contains("fine a moment ago"), "{err}");
    host_still_works();
}

#[test]
fn wrong_world_is_refused_at_registration() {
    let path = test_guests::hostile("wrong-world").expect("fixture");
    let mut host = ComparatorHost::new(test_options()).expect("host");
    let err = host
        .register_user("wrong", path, &sha256_of(path))
        .expect_err("must refuse");
    let text = err.to_string();
    assert!(
        text.contains("\"wrong\"") && text.contains("progscore:comparator"),
        "{text}"
    );
    assert!(host.names().is_empty());
}

#[test]
fn many_hostile_calls_in_parallel_leave_the_host_working() {
    let threads: Vec<_> = ["panics", "alloc-4gib", "garbage", "panics"]
        .into_iter()
        .map(|name| std::thread::spawn(move || letter(&call(name, "exit"))))
        .collect();
    for t in threads {
        assert_eq!(t.join().expect("thread"), 'U');
    }
    assert_eq!(letter(&run("equals", r#"{"value":"1"}"#, b"1")), 'M');
    host_still_works();
}

fn probe(kind: &str) -> serde_json::Value {
    match call("ambient-probe", kind) {
        ComparisonOutcome::Mismatch(report) => {
            serde_json::from_str(&report).unwrap_or_else(|e| panic!("{e}: {report}"))
        }
        other => panic!("probe {kind}: {other:?}"),
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}
