//! Termination signals leave nothing behind: batches stopped at random
//! moments by SIGINT, SIGTERM and SIGHUP clean up and exit with 128 + the
//! signal; after a SIGKILL, the next start removes what the killed process
//! left before it runs anything.

use std::process::{Child, Stdio};
use std::time::Duration;

use progscore_e2e::{Dir, stderr};
use progscore_test_kit::leftovers::OwnersPresent;

/// Items that each keep a container busy for a while.
fn slow_batch(items: usize, profile: &str) -> String {
    (0..items)
        .map(|i| {
            serde_json::json!({
                "id": format!("slow-{i}"),
                "program": format!("import time\n# {i}\ntime.sleep(0.6)\nprint(9)\n"),
                "expectation": {"conditions": [{"program_behaves": {"profile": profile, "cases": [
                    {"invocation": {"args": []}, "expected": {"stdout": {"equals": "9"}}}]}}]},
            })
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn start_batch(dir: &Dir) -> Child {
    dir.command()
        .args(["score", "batch.jsonl", "--jobs", "6"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start progscore")
}

/// A deterministic spread of moments between 0.3 s and 3 s.
fn moments(count: usize, mut seed: u64) -> Vec<Duration> {
    (0..count)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            Duration::from_millis(300 + seed % 2700)
        })
        .collect()
}

fn send(child: &Child, signal: i32) {
    let pid = i32::try_from(child.id()).expect("pid");
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
    unsafe {
        libc::kill(pid, signal);
    }
}

fn batches_stopped_by_signals_leave_nothing_behind(profile: &str, rounds: usize) {
    let signals = [
        (libc::SIGINT, 130),
        (libc::SIGTERM, 143),
        (libc::SIGHUP, 129),
    ];
    let mut interrupted = 0;
    for (round, after) in moments(rounds, 0x9e37_79b9_7f4a_7c15)
        .into_iter()
        .enumerate()
    {
        let (signal, code) = signals[round % signals.len()];
        let dir = Dir::new();
        dir.write("batch.jsonl", slow_batch(24, profile));
        let before = OwnersPresent::now();
        let child = start_batch(&dir);
        let started = before.then_started(child.id());
        std::thread::sleep(after);
        send(&child, signal);
        let output = child.wait_with_output().expect("progscore exits");
        let status = output.status.code();
        // A batch that finished before the signal exits 0.
        interrupted += usize::from(status == Some(code));
        assert!(
            status == Some(code) || status == Some(0),
            "{profile} round {round}: signal {signal} after {after:?}: exit {status:?}\n{}",
            stderr(&output)
        );
        // Nothing is left the moment the process has exited.
        assert_eq!(
            started.leftovers(),
            Vec::<String>::new(),
            "{profile} round {round}"
        );
        let left = dir.owner_leftovers();
        assert!(
            left.is_empty(),
            "{profile} round {round}: left behind: {left:?}\n{}",
            stderr(&output)
        );
    }
    assert!(
        interrupted * 4 >= rounds * 3,
        "{profile}: only {interrupted} of {rounds} batches were interrupted"
    );
}

fn after_sigkill_the_next_start_removes_what_was_left(profile: &str, rounds: usize) {
    let mut left_by_kills = 0;
    let mut containers_left = 0;
    for (round, after) in moments(rounds, 0x2545_f491_4f6c_dd1d)
        .into_iter()
        .enumerate()
    {
        let dir = Dir::new();
        dir.write("batch.jsonl", slow_batch(24, profile));
        let before = OwnersPresent::now();
        let mut child = start_batch(&dir);
        let started = before.then_started(child.id());
        std::thread::sleep(after);
        send(&child, libc::SIGKILL);
        child.wait().expect("reaped");
        // What a killed process leaves: its lock, its workspaces, containers.
        left_by_kills += usize::from(!dir.owner_leftovers().is_empty());
        containers_left += usize::from(!started.leftovers().is_empty());
        // The next start (any command that reaches the backends) sweeps
        // first: the next batch, an item on each backend (each backend's
        // client registers at start; it sweeps at its first run). `doctor`
        // would too, after reading every cached image's tree.
        let next = [
            slow_batch(1, "python").replace("slow-0", "next-docker"),
            slow_batch(1, "python-oci").replace("slow-0", "next-oci"),
        ];
        dir.write("next.jsonl", next.join("\n"));
        let next = dir.run(&["score", "next.jsonl"]);
        assert_eq!(next.status.code(), Some(0), "{}", stderr(&next));
        assert_eq!(
            started.leftovers_after(Duration::from_secs(5)),
            Vec::<String>::new(),
            "{profile} round {round}"
        );
        let left = dir.owner_leftovers();
        assert!(
            left.is_empty(),
            "{profile} round {round}: left behind: {left:?}"
        );
    }
    assert_eq!(left_by_kills, rounds, "every kill left something to sweep");
    assert!(
        containers_left * 2 > rounds,
        "{profile}: only {containers_left} of {rounds} kills left containers"
    );
}

#[test]
fn docker_batches_stopped_by_sigint_sigterm_and_sighup_leave_nothing_behind() {
    batches_stopped_by_signals_leave_nothing_behind("python", 20);
}

#[test]
fn oci_batches_stopped_by_sigint_sigterm_and_sighup_leave_nothing_behind() {
    batches_stopped_by_signals_leave_nothing_behind("python-oci", 9);
    batches_stopped_by_signals_leave_nothing_behind("python-oci-gvisor", 6);
}

#[test]
fn after_sigkill_the_next_start_removes_what_docker_runs_left() {
    after_sigkill_the_next_start_removes_what_was_left("python", 5);
}

#[test]
fn after_sigkill_the_next_start_removes_what_oci_runs_left() {
    after_sigkill_the_next_start_removes_what_was_left("python-oci", 4);
    after_sigkill_the_next_start_removes_what_was_left("python-oci-gvisor", 3);
}
