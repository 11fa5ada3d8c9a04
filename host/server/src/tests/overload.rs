//! Past its capacity (`[serve] concurrency` in flight, `queue` waiting,
//! each for `queue_wait`) a profile refuses requests at once with each
//! dialect's overload answer, which its clients retry: never a verdict,
//! and nothing run. And `[serve] tokens`: a request without one of them
//! is refused with 401 saying how to send it. A scripted run held by a
//! semaphore fills the profile; the clock is paused, so a wait passes at once.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};

use super::{Served, prints_ok};

/// A server over `serve` whose runs end when `gate` gives a permit, with
/// one `/v1/run` already holding python's one turn.
async fn filled(
    serve: &str,
) -> (
    Arc<Served>,
    Arc<tokio::sync::Semaphore>,
    tokio::task::JoinHandle<(StatusCode, axum::http::HeaderMap, Value)>,
) {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let served = Arc::new(
        Served::with_client(serve, |client| {
            client
                .with_responder(prints_ok)
                .with_case_gate(gate.clone())
        })
        .await,
    );
    let holding = tokio::spawn({
        let served = served.clone();
        async move {
            served
                .post(
                    "/v1/run",
                    json!({"program": "print('first')", "profile": "python"}),
                )
                .await
        }
    });
    let (_, queue) = served.state.served("python").expect("python is served");
    while queue.running() == 0 {
        tokio::task::yield_now().await;
    }
    (served, gate, holding)
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_is_each_dialects_overload_answer_and_nothing_runs() {
    let (served, gate, holding) = filled("concurrency = 1\nqueue = 0").await;

    let (status, headers, body) = served
        .post(
            "/v1/run",
            json!({"program": "print('second')", "profile": "python"}),
        )
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(headers["retry-after"], "1");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("profile `python` is busy") && message.contains("[serve] queue"),
        "{body}"
    );

    let (status, headers, body) = served
        .post(
            "/api/v2/execute",
            json!({"language": "python", "files": [{"content": "print('second')"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(headers["retry-after"], "1");
    assert!(
        body["message"].as_str().is_some_and(|m| m.contains("busy")),
        "{body}"
    );

    // SandboxFusion: 504, which verl retries, the body a SandboxError.
    let (status, _, body) = served
        .post(
            "/run_code",
            json!({"code": "print('second')", "language": "python"}),
        )
        .await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    assert_eq!(body["status"], "SandboxError", "{body}");

    // Judge0: queued work, kept In Queue until it gets a turn.
    let (status, _, body) = served
        .post(
            "/submissions?base64_encoded=false",
            json!({"source_code": "print('second')", "language_id": 71}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let token = body["token"].as_str().expect("a token").to_string();
    let path = format!("/submissions/{token}?base64_encoded=false");
    let (_, body) = served.get(&path).await;
    assert_eq!(body["status"]["id"], 1, "{body}");

    assert_eq!(served.runs(), 1, "only the run holding the turn ran");
    assert!(
        served.metrics().contains("kind=\"full\"}"),
        "{}",
        served.metrics()
    );

    // The turn is given back: the held run and the queued submission end.
    gate.add_permits(2);
    let (status, _, body) = holding.await.expect("the holding request");
    assert_eq!(status, StatusCode::OK, "{body}");
    let body = loop {
        let (_, body) = served.get(&path).await;
        if body["status"]["id"] != 1 {
            break body;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(body["status"]["id"], 3, "never an Internal Error: {body}");
    assert_eq!(served.runs(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_request_that_waits_past_queue_wait_is_refused_and_its_place_freed() {
    let (served, gate, holding) = filled("concurrency = 1\nqueue = 1\nqueue_wait = \"2s\"").await;
    let (status, headers, body) = served
        .post(
            "/api/v2/execute",
            json!({"language": "python", "files": [{"content": "print('second')"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(headers["retry-after"], "1");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("no turn within 2.0s")),
        "{body}"
    );
    let (_, queue) = served.state.served("python").expect("python is served");
    assert_eq!(queue.waiting(), 0, "it left the line");
    assert_eq!(served.runs(), 1);
    gate.add_permits(1);
    let (status, _, body) = holding.await.expect("the holding request");
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// `GET path` with `headers`; its status and body.
async fn get_with(served: &Served, path: &str, headers: &[(&str, &str)]) -> (StatusCode, Value) {
    let mut request = Request::get(path).header("host", "127.0.0.1:8080");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let (status, _, body) = served
        .send(request.body(Body::empty()).expect("a request"))
        .await;
    (status, body)
}

#[tokio::test(start_paused = true)]
async fn without_a_configured_token_a_request_is_refused_saying_how_to_send_one() {
    let token = "s3cret-s3cret-s3cret";
    let served = Served::new(
        &format!("tokens = [\"{token}\"]"),
        prints_ok,
        std::time::Duration::ZERO,
    )
    .await;
    let bearer = format!("Bearer {token}");
    for (path, headers, admitted) in [
        ("/languages", vec![], false),
        (
            "/languages",
            vec![("authorization", "Bearer wrong-wrong-wrong")],
            false,
        ),
        (
            "/languages",
            vec![("x-auth-token", "wrong-wrong-wrong")],
            false,
        ),
        ("/api/v2/runtimes", vec![], false),
        ("/languages", vec![("authorization", bearer.as_str())], true),
        // Judge0's own header.
        ("/languages", vec![("x-auth-token", token)], true),
        (
            "/api/v2/runtimes",
            vec![("authorization", bearer.as_str())],
            true,
        ),
        // Health needs none.
        ("/healthz", vec![], true),
    ] {
        let (status, body) = get_with(&served, path, &headers).await;
        if admitted {
            assert_eq!(status, StatusCode::OK, "{path} {headers:?}: {body}");
            continue;
        }
        assert_eq!(
            status,
            StatusCode::UNAUTHORIZED,
            "{path} {headers:?}: {body}"
        );
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("Authorization: Bearer") && message.contains("X-Auth-Token"),
            "{body}"
        );
    }
    // A run without the token is refused before anything runs.
    let (status, _, _) = served
        .post(
            "/api/v2/execute",
            json!({"language": "python", "files": [{"content": "print(1)"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(served.runs(), 0);
}
