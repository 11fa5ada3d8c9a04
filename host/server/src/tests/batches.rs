//! `/v1/batches` runs on the runtime's batch driver, as `progscore score`
//! does: an engine gone or a failed store stops the batch once (the items
//! left are not burned against it) and the summary says why.

use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::http::StatusCode;
use progscore_sandbox::fake::{FakeRequest, exited_event};
use progscore_sandbox::{InvocationEvent, SandboxError};
use serde_json::{Value, json};

use super::{Served, post_ndjson};

const ITEMS: usize = 12;

fn batch() -> String {
    (0..ITEMS)
        .map(|i| {
            let line = json!({"id": format!("item-{i}"), "program": format!("print({i})"),
                "expectation": {"conditions": [{"program_behaves": {"profile": "python", "cases": [
                    {"invocation": {"args": []}, "expected": {"exit_code": 0}}]}}]}});
            format!("{line}\n")
        })
        .collect()
}

async fn post_batch(served: &Served, body: String) -> (StatusCode, Vec<Value>) {
    post_ndjson(served, "/v1/batches", body).await
}

/// Every invocation exits 0.
fn exits_zero(request: &FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> {
    Ok(request
        .invocations
        .iter()
        .map(|_| exited_event(0, b"", b""))
        .collect())
}

fn summary(lines: &[Value]) -> &Value {
    let last = lines.last().expect("a summary line");
    &last["summary"]
}

fn engine_gone(_: &FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> {
    Err(SandboxError::EngineUnavailable {
        message: "unix:///run/docker.sock: connection refused".into(),
    })
}

#[tokio::test]
async fn an_engine_gone_stops_a_batch_once_and_the_summary_says_so() {
    let served = Served::new("", engine_gone, Duration::ZERO).await;
    let (status, lines) = post_batch(&served, batch()).await;
    assert_eq!(status, StatusCode::OK);
    let summary = summary(&lines);
    assert_eq!(
        summary["stopped"], "the sandbox engine is not reachable",
        "{lines:#?}"
    );
    assert_eq!(summary["items"], ITEMS, "every item is counted: {summary}");
    assert_eq!(summary["not_scored"], ITEMS, "{summary}");
    // Each refused run is tried again twice; the batch stopped with the
    // first items, so most were never run at all.
    let runs = served.client.counters().started.load(Ordering::SeqCst);
    assert!(
        runs < ITEMS,
        "{runs} runs for {ITEMS} items: the batch did not stop"
    );
    let said = lines
        .iter()
        .filter(|line| line["status"] == "not_scored")
        .count();
    assert!(
        said < ITEMS,
        "only the items that ran are named: {lines:#?}"
    );
}

#[tokio::test]
async fn a_failed_store_stops_a_batch_once_and_the_summary_says_so() {
    let served = Served::new("", exits_zero, Duration::ZERO).await;
    // The store's file stops taking scores, as a full or failing disk
    // would: every write of a score fails from here on.
    let store = served.state.session().store.location().to_string();
    let connection = rusqlite::Connection::open(&store).expect("the store's file");
    connection
        .execute_batch(
            "CREATE TRIGGER test_store_fails BEFORE INSERT ON scores
             BEGIN SELECT RAISE(FAIL, 'disk I/O error'); END;",
        )
        .expect("the trigger");
    let (status, lines) = post_batch(&served, batch()).await;
    assert_eq!(status, StatusCode::OK);
    let summary = summary(&lines);
    assert_eq!(
        summary["stopped"], "the evidence store failed",
        "{lines:#?}"
    );
    assert_eq!(summary["items"], ITEMS, "{summary}");
    let runs = served.client.counters().started.load(Ordering::SeqCst);
    assert!(
        runs < ITEMS,
        "{runs} runs for {ITEMS} items: the batch did not stop"
    );
}

#[tokio::test]
async fn a_batch_counts_its_verdicts_and_bad_lines_in_the_summary() {
    let served = Served::new("", exits_zero, Duration::ZERO).await;
    let body = format!("{}not json\n", batch());
    let (status, lines) = post_batch(&served, body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        lines[0]["line"],
        ITEMS + 1,
        "the bad line first: {lines:#?}"
    );
    let summary = summary(&lines);
    assert_eq!(
        summary,
        &json!({"items": ITEMS, "true": ITEMS, "false": 0, "undetermined": 0,
                "not_scored": 0, "bad_lines": 1}),
    );
}
