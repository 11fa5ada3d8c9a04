//! Each request's own true answer: a gathered build shares nothing else,
//! and a run that proves nothing is run again, then answered in the form
//! each dialect's clients retry, never as the program's failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use progscore_sandbox::fake::{FakeRequest, event, exited_event};
use progscore_sandbox::{InvocationEvent, Outcome, SandboxError};
use serde_json::{Value, json};

use super::{Served, prints_ok};

/// Each case prints the square of the number on its stdin.
fn squares(request: &FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> {
    Ok(request
        .invocations
        .iter()
        .map(|invocation| {
            let stdin = invocation
                .stdin
                .as_ref()
                .map(|s| s.0.clone())
                .unwrap_or_default();
            let n: i64 = String::from_utf8_lossy(&stdin).trim().parse().unwrap_or(0);
            exited_event(0, format!("{}\n", n * n).as_bytes(), b"")
        })
        .collect())
}

/// A sandbox error in every case, as when a container is killed from outside.
fn struck(request: &FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> {
    Ok(request
        .invocations
        .iter()
        .map(|_| {
            event(
                Outcome::SandboxError {
                    message: "the container was removed from outside".into(),
                },
                b"",
                b"",
            )
        })
        .collect())
}

/// Struck the first `faults` times, then every case exits 0 printing `ok`.
fn struck_then_fine(
    faults: usize,
) -> impl Fn(&FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> + Send + Sync {
    let calls = Arc::new(AtomicUsize::new(0));
    move |request| {
        if calls.fetch_add(1, Ordering::SeqCst) < faults {
            struck(request)
        } else {
            Ok(request
                .invocations
                .iter()
                .map(|_| exited_event(0, b"ok\n", b""))
                .collect())
        }
    }
}

/// Every case exits 1.
fn fails(request: &FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> {
    Ok(request
        .invocations
        .iter()
        .map(|_| exited_event(1, b"", b"boom\n"))
        .collect())
}

fn run_body(stdin: &str) -> Value {
    json!({
        "program": "int main() { long n; std::cin >> n; std::cout << n * n << '\\n'; }",
        "profile": "cpp",
        "invocations": [{"args": [], "stdin": stdin}],
    })
}

#[tokio::test]
async fn gathered_requests_share_the_build_and_nothing_else() {
    let served = Served::new("", squares, Duration::ZERO).await;
    let (two, three) = tokio::join!(
        served.post("/v1/run", run_body("2")),
        served.post("/v1/run", run_body("3")),
    );
    assert_eq!(served.runs(), 1, "one run, one build, for both");
    for ((status, _, body), own) in [(&two, "4\n"), (&three, "9\n")] {
        assert_eq!(*status, StatusCode::OK, "{body}");
        // Each answer holds its own case only.
        let events = body["run"]["events"].as_array().expect("events");
        assert_eq!(events.len(), 1, "only its own case: {body}");
        assert_eq!(events[0]["stdout"]["data"], own, "{body}");
    }
    let ids = [&two.2["observation_id"], &three.2["observation_id"]];
    assert_ne!(
        ids[0], ids[1],
        "each request names an observation of its own"
    );
    // The observation a client is given holds only its own input.
    for (id, stdin) in ids.iter().zip(["2", "3"]) {
        let id = id.as_str().expect("an observation id");
        let (status, observation) = served.get(&format!("/v1/observations/{id}")).await;
        assert_eq!(status, StatusCode::OK);
        let invocations = observation["invocations"].as_array().expect("invocations");
        assert_eq!(invocations.len(), 1, "{observation}");
        assert_eq!(invocations[0]["stdin"], stdin, "{observation}");
        assert_eq!(
            observation["run"]["events"].as_array().map(Vec::len),
            Some(1)
        );
    }
}

#[tokio::test]
async fn each_gathered_request_is_answered_when_its_own_case_ends() {
    // The cases end when the test says: one permit, one case.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let served = Arc::new(
        Served::with_client("", |client| {
            client.with_responder(squares).with_case_gate(gate.clone())
        })
        .await,
    );
    let send = |stdin: &'static str| {
        let served = served.clone();
        tokio::spawn(async move { served.post("/v1/run", run_body(stdin)).await })
    };
    let (mut two, mut three, mut four) = (send("2"), send("3"), send("4"));
    // The first case ends: its request is answered while the others' cases
    // have not ended.
    gate.add_permits(1);
    // (Bounded: a server that answers only at the run's end never answers here.)
    let (first, first_stdin) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::select! {
            answer = &mut two => (answer, "2"),
            answer = &mut three => (answer, "3"),
            answer = &mut four => (answer, "4"),
        }
    })
    .await
    .expect("a request is answered once its own case has ended");
    let (status, _, body) = first.expect("the request's task");
    assert_eq!(status, StatusCode::OK, "{body}");
    let events = body["run"]["events"].as_array().expect("events");
    assert_eq!(events.len(), 1, "{body}");
    let answered = events[0]["stdout"]["data"].clone();
    assert!(
        ["4\n", "9\n", "16\n"].contains(&answered.as_str().unwrap_or_default()),
        "{body}"
    );
    let waiting = [("2", &two), ("3", &three), ("4", &four)]
        .into_iter()
        .filter(|(stdin, task)| *stdin != first_stdin && !task.is_finished())
        .count();
    assert_eq!(
        waiting, 2,
        "the other cases have not ended: nothing else is answered"
    );
    assert_eq!(served.runs(), 1, "one gathered run");
    // The rest end; every request gets its own case.
    gate.add_permits(2);
    for (stdin, task, own) in [("2", two, "4\n"), ("3", three, "9\n"), ("4", four, "16\n")] {
        if stdin == first_stdin {
            continue;
        }
        let (status, _, body) = task.await.expect("the request's task");
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["run"]["events"][0]["stdout"]["data"], own, "{body}");
    }
    // Each case's observation is stored once, as its own attempt's.
    let (status, observation) = served
        .get(&format!(
            "/v1/observations/{}",
            body["observation_id"].as_str().expect("an id")
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{observation}");
    assert_eq!(observation["run"]["events"][0]["stdout"]["data"], answered);
}

#[tokio::test]
async fn gathered_requests_run_once() {
    let served = Served::new("", squares, Duration::ZERO).await;
    let answers = futures_util::future::join_all(
        ["1", "2", "3", "4"].map(|stdin| served.post("/v1/run", run_body(stdin))),
    )
    .await;
    for ((status, _, body), square) in answers.iter().zip(["1\n", "4\n", "9\n", "16\n"]) {
        assert_eq!(*status, StatusCode::OK, "{body}");
        assert_eq!(body["run"]["events"][0]["stdout"]["data"], square, "{body}");
    }
    assert_eq!(
        served.runs(),
        1,
        "four requests of one program gathered into one run"
    );
}

#[tokio::test]
async fn a_run_that_proves_nothing_is_run_again_before_it_is_answered() {
    let served = Served::new("", struck_then_fine(1), Duration::ZERO).await;
    let (status, _, body) = served
        .post(
            "/run_code",
            json!({"code": "print('ok')", "language": "python", "run_timeout": 5}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "Success", "{body}");
    assert_eq!(body["run_result"]["stdout"], "ok\n");
    assert!(
        served
            .metrics()
            .contains("progscore_reruns_total{profile=\"python\"} 1"),
        "{}",
        served.metrics()
    );
}

#[tokio::test]
async fn what_still_proves_nothing_goes_out_as_each_client_retries() {
    let served = Served::new("", struck, Duration::ZERO).await;

    // SandboxFusion: 504 (verl retries it), the body still SandboxError.
    let (status, _, body) = served
        .post(
            "/run_code",
            json!({"code": "print('ok')", "language": "python"}),
        )
        .await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    assert_eq!(body["status"], "SandboxError", "{body}");
    assert_eq!(served.runs(), 3, "run once and again twice");

    // Piston: a non-200 (open-r1's client retries those), stage XX.
    let (status, headers, body) = served
        .post(
            "/api/v2/execute",
            json!({"language": "python", "version": "*", "files": [{"content": "print('ok')"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(headers.contains_key("retry-after"));
    assert_eq!(body["run"]["status"], "XX", "{body}");

    // progscore's own: 503 with Retry-After, the run in the body.
    let (status, headers, body) = served
        .post(
            "/v1/run",
            json!({"program": "print('ok')", "profile": "python"}),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(headers.contains_key("retry-after"));
    assert_eq!(
        body["run"]["events"][0]["outcome"], "sandbox_error",
        "{body}"
    );
}

#[tokio::test]
async fn a_proven_failure_is_answered_at_once_and_not_run_again() {
    let served = Served::new("", fails, Duration::ZERO).await;
    let (status, _, body) = served
        .post(
            "/run_code",
            json!({"code": "raise SystemExit(1)", "language": "python"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "Failed", "{body}");
    assert_eq!(served.runs(), 1, "a proven failure is not run again");
}

#[tokio::test]
async fn a_judge0_submission_that_finds_its_profile_busy_waits_in_queue() {
    // One in flight, nobody waits in line: the second submission is
    // refused a turn at first.
    let served = Served::new(
        "concurrency = 1\nqueue = 0",
        prints_ok,
        Duration::from_millis(400),
    )
    .await;
    let mut tokens = Vec::new();
    for stdin in ["first", "second"] {
        let (status, _, body) = served
            .post(
                "/submissions?base64_encoded=false&wait=false",
                json!({"source_code": "print('ok')", "language_id": 71, "stdin": stdin}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        tokens.push(body["token"].as_str().expect("a token").to_string());
    }
    for token in tokens {
        let answer = loop {
            let (status, body) = served
                .get(&format!("/submissions/{token}?base64_encoded=false"))
                .await;
            assert_eq!(status, StatusCode::OK, "{body}");
            if body["status"]["id"].as_i64().is_some_and(|id| id > 2) {
                break body;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // Accepted, never an Internal Error stored for the overload.
        assert_eq!(answer["status"]["id"], 3, "{answer}");
        assert_eq!(answer["stdout"], "ok\n", "{answer}");
    }
    assert_eq!(served.runs(), 2);
    assert!(
        served.metrics().contains("kind=\"full\"} "),
        "the second submission was refused a turn at first: {}",
        served.metrics()
    );
}

#[tokio::test]
async fn an_engine_away_is_said_without_its_endpoint_and_retried() {
    let served = Served::new(
        "",
        |_: &FakeRequest| {
            Err(SandboxError::EngineUnavailable {
                message: "error trying to connect: unix:///var/run/docker.sock: connection refused"
                    .into(),
            })
        },
        Duration::ZERO,
    )
    .await;
    let (status, _, body) = served
        .post(
            "/run_code",
            json!({"code": "print('ok')", "language": "python"}),
        )
        .await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    let message = body["message"].as_str().expect("a message");
    assert!(message.contains("not reachable"), "{body}");
    assert!(
        !message.contains("/var/run"),
        "the engine's endpoint leaked: {body}"
    );
    assert_eq!(served.runs(), 3, "refused, then asked again twice");
}

#[tokio::test]
async fn a_drain_ends_the_wait_of_requests_that_have_no_turn_yet() {
    let served =
        Arc::new(Served::new("concurrency = 1", prints_ok, Duration::from_millis(600)).await);
    let send = |program: &'static str| {
        let served = served.clone();
        tokio::spawn(async move {
            served
                .post("/v1/run", json!({"program": program, "profile": "python"}))
                .await
        })
    };
    let running = send("print('first')");
    let (_, queue) = served.state.served("python").expect("python is served");
    while queue.running() == 0 {
        tokio::task::yield_now().await;
    }
    let waiting = send("print('second')");
    while queue.waiting() == 0 {
        tokio::task::yield_now().await;
    }
    served.state.begin_drain();
    let (status, _, body) = waiting.await.expect("the waiting request");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    // The run in flight is let finish.
    let (status, _, body) = running.await.expect("the running request");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(served.runs(), 1, "the waiting request never ran");
}

#[tokio::test]
async fn runs_wait_for_memory_the_runs_in_flight_hold() {
    // Four slots, but memory for one 256 MiB program at a time: the second
    // waits for the first's share, and is refused when it cannot wait.
    let served = Arc::new(
        Served::new(
            "concurrency = 4\nmemory_budget = \"300MiB\"\nqueue_wait = \"1s\"",
            prints_ok,
            Duration::from_millis(2500),
        )
        .await,
    );
    let send = |program: &'static str| {
        let served = served.clone();
        tokio::spawn(async move {
            served
                .post(
                    "/v1/run",
                    json!({"program": program, "profile": "python", "limits": {"memory": "256MiB"}}),
                )
                .await
        })
    };
    let first = send("print('first')");
    let (_, queue) = served.state.served("python").expect("python is served");
    while served.runs() == 0 {
        tokio::task::yield_now().await;
    }
    let (status, _, body) = send("print('second')").await.expect("the second request");
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("memory_budget")),
        "{body}"
    );
    assert_eq!(queue.running(), 1, "a turn is given back with the refusal");
    let (status, _, body) = first.await.expect("the first request");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(served.runs(), 1);
    assert!(
        served.metrics().contains("kind=\"memory\"} 1"),
        "{}",
        served.metrics()
    );
}

#[tokio::test]
async fn a_gathered_request_is_answered_before_its_client_gives_up_and_its_retry_finds_its_case() {
    // The gathered run (10 s) outlasts what verl waits for an answer
    // (compile_timeout + run_timeout + 10 s, less the margin kept free).
    let served = Served::new("", squares, Duration::from_secs(10)).await;
    let request = |stdin: &str| {
        json!({
            "code": "int main() { long n; std::cin >> n; std::cout << n * n << '\\n'; }",
            "language": "cpp",
            "stdin": stdin,
            "compile_timeout": 0.1,
            "run_timeout": 0.1,
        })
    };
    let (two, three) = tokio::join!(
        served.post("/run_code", request("2")),
        served.post("/run_code", request("3")),
    );
    for (status, _, body) in [&two, &three] {
        assert_eq!(*status, StatusCode::GATEWAY_TIMEOUT, "{body}");
        assert_eq!(body["status"], "SandboxError", "{body}");
    }
    // The run goes on without them and stores each case (beside its own
    // observation); verl's retry is answered from the stored case.
    let store = served.state.session().store.clone();
    while store
        .list_observations(&Default::default())
        .expect("the store lists")
        .len()
        < 3
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, headers, body) = served.post("/run_code", request("3")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["run_result"]["stdout"], "9\n", "{body}");
    assert_eq!(headers["x-progscore-evidence"], "stored");
    assert_eq!(served.runs(), 1, "one run for the gathering and the retry");
}
