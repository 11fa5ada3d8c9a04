//! `progscore serve` under load, as trainers drive it: 64 clients at once,
//! a full queue, SIGTERM in the middle of a run. Every answer is right or
//! a documented overload or sandbox answer, never a wrong Failed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

use crate::ServeIn;
use crate::{Served, serving_dir, try_post_json};

/// Polls `/metrics` until `ready` holds (a state, not a time); panics if
/// `gave_up` turns true first.
fn wait_for(served: &Served, what: &str, gave_up: &AtomicBool, ready: impl Fn(&Served) -> bool) {
    while !ready(served) {
        assert!(!gave_up.load(Ordering::SeqCst), "never saw {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

fn run_code(
    address: std::net::SocketAddr,
    code: &str,
    stdin: &str,
) -> std::io::Result<(u16, Value)> {
    let body = json!({"code": code, "language": "python", "stdin": stdin});
    let reply = try_post_json(address, "/run_code", &body)?;
    let value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
    Ok((reply.status, value))
}

#[test]
fn a_full_queue_answers_504_at_once_which_verl_retries() {
    let dir = serving_dir("concurrency = 1\nqueue = 2\nqueue_wait = \"120s\"");
    let served = Served::start(&dir);
    let address = served.address;
    let done = Arc::new(AtomicBool::new(false));
    // One runs (a loop, for its whole time limit), two wait.
    let holders: Vec<_> = (0..3)
        .map(|i| {
            let done = done.clone();
            thread::spawn(move || {
                let answer = run_code(address, &format!("# {i}\nwhile True:\n    pass\n"), "");
                done.store(true, Ordering::SeqCst);
                answer
            })
        })
        .collect();
    wait_for(&served, "one running and two waiting", &done, |s| {
        s.metric("progscore_queue_running{profile=\"python\"}") == 1.0
            && s.metric("progscore_queue_waiting{profile=\"python\"}") == 2.0
    });
    let (status, body) = run_code(address, "print(1)", "").unwrap();
    assert_eq!(status, 504, "{body}");
    // The SandboxFusion shape, its status saying nothing of the program.
    assert_eq!(body["status"], "SandboxError", "{body}");
    assert!(body["message"].as_str().unwrap().contains("busy"), "{body}");
    for holder in holders {
        let (status, body) = holder.join().unwrap().unwrap();
        // A loop: a proven timeout, or (the machine too busy to prove it)
        // the 504 verl retries; never a success.
        if status == 504 {
            assert!(
                body["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("timeout is not proven")),
                "{body}"
            );
        } else {
            assert_eq!(status, 200, "{body}");
        }
        assert_ne!(body["status"], "Success", "{body}");
    }
    assert_eq!(
        served.metric("progscore_queue_refusals_total{profile=\"python\",kind=\"full\"}"),
        1.0
    );
}

/// The server's peak resident memory (VmHWM), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn sixty_four_clients_at_once_get_every_verdict_right() {
    const CLIENTS: usize = 64;
    const REQUESTS: usize = 4;
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let address = served.address;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            thread::spawn(move || {
                let code = format!("n = int(input())\nprint(n * {})\n", client + 2);
                let mut answers = Vec::new();
                // The last request repeats the first: its evidence is stored
                // (or joined), not run again.
                for n in (0..REQUESTS).chain([0]) {
                    loop {
                        let (status, body) =
                            run_code(address, &code, &format!("{n}\n")).expect("an answer");
                        // 504 is the documented answer for overload and
                        // for a run that proved nothing; verl retries it.
                        if status == 504 {
                            thread::sleep(Duration::from_millis(200));
                            continue;
                        }
                        answers.push((n, client + 2, status, body));
                        break;
                    }
                }
                answers
            })
        })
        .collect();
    let mut sandbox_errors = 0;
    for client in clients {
        for (n, factor, status, body) in client.join().unwrap() {
            assert_eq!(status, 200, "{body}");
            match body["status"].as_str() {
                Some("Success") => assert_eq!(
                    body["run_result"]["stdout"],
                    format!("{}\n", n * factor),
                    "{body}"
                ),
                // Proves nothing, says so, and is never a wrong Failed.
                Some("SandboxError") => sandbox_errors += 1,
                _ => panic!("a wrong verdict for a correct program: {body}"),
            }
        }
    }
    let text = String::from_utf8(served.request("GET", "/metrics", &[], b"").body).unwrap();
    let stored = served.metric("progscore_evidence_total{evidence=\"stored\"}")
        + served.metric("progscore_evidence_total{evidence=\"joined\"}");
    assert!(
        stored >= CLIENTS as f64,
        "repeated requests ran again:\n{text}"
    );
    let peak = peak_rss_kib(served.child.id());
    println!(
        "{} requests from {CLIENTS} clients: {sandbox_errors} sandbox errors, server peak RSS {} MiB",
        CLIENTS * (REQUESTS + 1),
        peak / 1024
    );
    // Bounded: the requests are small, and nothing is kept per request.
    assert!(peak < 256 * 1024, "server peak RSS {peak} KiB");
    let started = served.started.clone();
    let (code, log) = served.terminate();
    assert_eq!(code, Some(0), "{log}");
    assert_eq!(started.leftovers(), Vec::<String>::new());
}

#[test]
fn sigterm_in_the_middle_drains_the_runs_in_flight_and_leaves_nothing() {
    let dir = serving_dir("concurrency = 2\ndrain = \"60s\"");
    let served = Served::start(&dir);
    let address = served.address;
    let done = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let done = done.clone();
            thread::spawn(move || {
                let code = format!("import time\ntime.sleep(1)\nprint({i})\n");
                let answer = run_code(address, &code, "");
                done.store(true, Ordering::SeqCst);
                (i, answer)
            })
        })
        .collect();
    wait_for(&served, "two runs in flight", &done, |s| {
        s.metric("progscore_queue_running{profile=\"python\"}") == 2.0
    });
    let started = served.started.clone();
    let (code, log) = served.terminate();
    assert_eq!(code, Some(0), "{log}");
    let mut finished = 0;
    for client in clients {
        let (i, answer) = client.join().unwrap();
        match answer {
            Ok((200, body)) if body["status"] == "Success" => {
                assert_eq!(body["run_result"]["stdout"], format!("{i}\n"), "{body}");
                finished += 1;
            }
            // Cancelled or refused while draining: said in the form verl
            // retries, never Failed.
            Ok((504, body)) => assert_eq!(body["status"], "SandboxError", "{body}"),
            Ok((status, body)) => assert_eq!(status, 503, "{body}"),
            // Connections after the listener closed.
            Err(_) => {}
        }
    }
    assert!(
        finished >= 2,
        "the runs in flight were not let finish:\n{log}"
    );
    assert_eq!(started.leftovers(), Vec::<String>::new());
}
