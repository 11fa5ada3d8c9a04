//! Judge0 CE's dialect as its clients see it: `POST /submissions` with
//! `wait=true` and the token flow, `base64_encoded`, each status id a run
//! maps onto (13 Internal Error for anything that proves nothing about the
//! program, never a verdict), refusals in Judge0's 422 `{"FIELD": [...]}`
//! shape, `/languages`, and batches. The clock is paused: reruns and
//! polling pass at once.

use std::sync::Arc;

use axum::http::StatusCode;
use progscore_sandbox::fake::{FakeRequest, event, exited_event};
use progscore_sandbox::{CompileEvent, InvocationEvent, Outcome, SandboxError, TimeLimit};
use serde_json::{Value, json};

use super::Served;

type Responder = dyn Fn(&FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> + Send + Sync;

/// Each case prints the square of the number on its stdin.
fn squares(request: &FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> {
    Ok(request
        .invocations
        .iter()
        .map(|invocation| {
            let stdin = invocation.stdin.as_ref().map(|s| s.0.clone());
            let n: i64 = String::from_utf8_lossy(&stdin.unwrap_or_default())
                .trim()
                .parse()
                .unwrap_or(0);
            exited_event(0, format!("{}\n", n * n).as_bytes(), b"")
        })
        .collect())
}

/// Every case scripted with `outcome`.
fn each_case(outcome: Outcome) -> Arc<Responder> {
    Arc::new(move |request: &FakeRequest| {
        Ok(request
            .invocations
            .iter()
            .map(|_| event(outcome.clone(), b"", b"boom\n"))
            .collect())
    })
}

async fn served_by(responder: Arc<Responder>) -> Served {
    Served::new(
        "",
        move |request: &FakeRequest| responder(request),
        std::time::Duration::ZERO,
    )
    .await
}

/// `POST /submissions?wait=true` of a Python program; the answer with all fields.
async fn submit_waiting(served: &Served, submission: Value) -> (StatusCode, Value) {
    let (status, _, body) = served
        .post(
            "/submissions?wait=true&base64_encoded=false&fields=*",
            submission,
        )
        .await;
    (status, body)
}

fn python(stdin: &str) -> Value {
    json!({"source_code": "print(int(input()) ** 2)", "language_id": 71, "stdin": stdin})
}

#[tokio::test(start_paused = true)]
async fn waiting_submissions_are_accepted_or_wrong_answer_by_expected_output() {
    let served = served_by(Arc::new(squares)).await;
    let (status, body) = served
        .post(
            "/submissions?wait=true&base64_encoded=false",
            json!({"source_code": "print(int(input()) ** 2)", "language_id": 71,
                   "stdin": "3", "expected_output": "9"}),
        )
        .await
        .into_status_body();
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        body["status"],
        json!({"id": 3, "description": "Accepted"}),
        "{body}"
    );
    assert_eq!(body["stdout"], "9\n");
    assert!(body["token"].is_string(), "{body}");
    // Judge0's default fields, no more.
    let mut fields: Vec<&String> = body.as_object().expect("an object").keys().collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "compile_output",
            "memory",
            "message",
            "status",
            "stderr",
            "stdout",
            "time",
            "token"
        ]
    );

    let mut wrong = python("3");
    wrong["expected_output"] = json!("10");
    let (status, body) = submit_waiting(&served, wrong).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["status"]["id"], 4, "{body}");
    assert_eq!(body["status"]["description"], "Wrong Answer");
    assert_eq!(body["exit_code"], 0);
}

/// `(status, body)` of a `post` answer.
trait StatusBody {
    fn into_status_body(self) -> (StatusCode, Value);
}

impl StatusBody for (StatusCode, axum::http::HeaderMap, Value) {
    fn into_status_body(self) -> (StatusCode, Value) {
        (self.0, self.2)
    }
}

#[tokio::test(start_paused = true)]
async fn a_token_is_in_queue_until_its_run_ends_then_has_its_result() {
    // The run's case ends when the test says.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let served = Served::with_client("", |client| {
        client.with_responder(squares).with_case_gate(gate.clone())
    })
    .await;
    let (status, body) = served
        .post("/submissions?base64_encoded=false", python("4"))
        .await
        .into_status_body();
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let token = body["token"].as_str().expect("a token").to_string();
    assert_eq!(body, json!({"token": token}), "only the token");
    let path = format!("/submissions/{token}?base64_encoded=false");
    let (status, body) = served.get(&path).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"]["id"], 1, "In Queue while it runs: {body}");
    assert_eq!(body["stdout"], Value::Null);

    gate.add_permits(1);
    let body = loop {
        let (status, body) = served.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        if body["status"]["id"] != 1 {
            break body;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(body["status"]["id"], 3, "{body}");
    assert_eq!(body["stdout"], "16\n");
    assert_eq!(body["token"], token.as_str());

    let (status, body) = served.get("/submissions/no-such-token").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

#[tokio::test(start_paused = true)]
async fn base64_encoded_text_goes_in_and_out_as_base64() {
    let served = served_by(Arc::new(squares)).await;
    // "print(int(input()) ** 2)", stdin "5".
    let (status, _, body) = served
        .post(
            "/submissions?wait=true&base64_encoded=true",
            json!({"source_code": "cHJpbnQoaW50KGlucHV0KCkpICoqIDIp", "language_id": 71,
                   "stdin": "NQ=="}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["status"]["id"], 3, "{body}");
    assert_eq!(body["stdout"], "MjUK", "\"25\\n\" as base64: {body}");

    let (status, _, body) = served
        .post(
            "/submissions?wait=true&base64_encoded=true",
            json!({"source_code": "not base64!", "language_id": 71}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["source_code"][0].is_string(), "{body}");
}

#[tokio::test(start_paused = true)]
async fn failures_are_runtime_errors_by_exit_and_signal() {
    for (exit_code, id, signal) in [
        (1, 11, Value::Null),
        (139, 7, json!(11)),
        (134, 10, json!(6)),
    ] {
        let served = served_by(each_case(Outcome::Exited { exit_code })).await;
        let (status, body) = submit_waiting(&served, python("1")).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(body["status"]["id"], id, "exit {exit_code}: {body}");
        assert_eq!(body["exit_code"], exit_code);
        assert_eq!(body["exit_signal"], signal);
        assert_eq!(body["stderr"], "boom\n");
        assert_eq!(served.runs(), 1, "a proven failure is not run again");
    }
    let served = served_by(each_case(Outcome::MemoryLimit)).await;
    let (_, body) = submit_waiting(&served, python("1")).await;
    assert_eq!(body["status"]["id"], 12, "{body}");
    assert_eq!(body["exit_signal"], 9);
}

#[tokio::test(start_paused = true)]
async fn time_limit_exceeded_only_for_a_proven_timeout() {
    let served = served_by(each_case(Outcome::timed_out())).await;
    let (_, body) = submit_waiting(&served, python("1")).await;
    assert_eq!(body["status"]["id"], 5, "{body}");
    assert_eq!(body["status"]["description"], "Time Limit Exceeded");

    let served = served_by(each_case(Outcome::TimedOut {
        limit: TimeLimit::Cpu,
        unconfirmed: Some("it got 2% of a CPU while the machine was busy".into()),
    }))
    .await;
    let (status, body) = submit_waiting(&served, python("1")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["status"]["id"], 13, "Internal Error, not TLE: {body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("timeout is not proven")),
        "{body}"
    );
    assert_eq!(
        body["stdout"],
        Value::Null,
        "no output given as the program's"
    );
    assert_eq!(served.runs(), 3, "run once and again twice");
}

#[tokio::test(start_paused = true)]
async fn a_sandbox_fault_is_internal_error_never_a_verdict() {
    let served = served_by(each_case(Outcome::SandboxError {
        message: "the container was removed from outside".into(),
    }))
    .await;
    let mut submission = python("1");
    submission["expected_output"] = json!("1");
    let (status, body) = submit_waiting(&served, submission).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["status"]["id"], 13, "{body}");
    assert_eq!(body["status"]["description"], "Internal Error");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("sandbox error")),
        "{body}"
    );
    assert_eq!(body["exit_code"], Value::Null);

    // Refused before anything ran.
    let served = served_by(Arc::new(|_: &FakeRequest| {
        Err(SandboxError::EngineUnavailable {
            message: "unix:///var/run/docker.sock: connection refused".into(),
        })
    }))
    .await;
    let (_, body) = submit_waiting(&served, python("1")).await;
    assert_eq!(body["status"]["id"], 13, "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains("not reachable"), "{body}");
    assert!(!message.contains("/var/run"), "the endpoint leaked: {body}");
}

#[tokio::test(start_paused = true)]
async fn a_failed_build_is_compilation_error_with_the_compilers_output() {
    let served = Served::with_client("", |client| {
        client
            .with_compile(|_| {
                Some(CompileEvent {
                    event: exited_event(1, b"", b"main.cpp:1:13: error: 'oops' was not declared\n"),
                    artifact_sha256: None,
                })
            })
            .with_responder(|request| {
                Ok(request
                    .invocations
                    .iter()
                    .map(|_| {
                        let reason = "the compiler exited 1".into();
                        event(Outcome::CompileError { reason }, b"", b"")
                    })
                    .collect())
            })
    })
    .await;
    let (status, body) = submit_waiting(
        &served,
        json!({"source_code": "int main() { oops; }", "language_id": 54}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["status"]["id"], 6, "{body}");
    assert_eq!(body["status"]["description"], "Compilation Error");
    assert!(
        body["compile_output"]
            .as_str()
            .is_some_and(|o| o.contains("'oops' was not declared")),
        "{body}"
    );
    assert_eq!(body["stdout"], Value::Null);
}

#[tokio::test(start_paused = true)]
async fn refusals_are_422_naming_the_field_in_judge0s_shape() {
    let served = served_by(Arc::new(squares)).await;
    let (status, body) = submit_waiting(
        &served,
        json!({"source_code": "print(1)", "language_id": 999}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let message = body["language_id"][0].as_str().unwrap_or_default();
    assert!(message.contains("999 is not served here"), "{body}");
    assert!(
        message.contains("71 (Python (3))"),
        "the served listed: {body}"
    );
    // A field of the wrong type: Judge0's shape too, not another dialect's.
    let (status, body) = submit_waiting(
        &served,
        json!({"source_code": "print(1)", "language_id": "python"}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["language_id"][0].is_string(), "{body}");
    assert_eq!(served.runs(), 0);
}

#[tokio::test(start_paused = true)]
async fn languages_are_the_served_profiles_judge0_ids() {
    let served = served_by(Arc::new(squares)).await;
    let (status, languages) = served.get("/languages").await;
    assert_eq!(status, StatusCode::OK, "{languages}");
    let ids: Vec<i64> = languages
        .as_array()
        .expect("an array")
        .iter()
        .filter_map(|l| l["id"].as_i64())
        .collect();
    assert_eq!(ids, [52, 53, 54, 71], "{languages}");
    let (status, python) = served.get("/languages/71").await;
    assert_eq!(status, StatusCode::OK, "{python}");
    assert!(
        python["name"]
            .as_str()
            .is_some_and(|n| n.contains("Python"))
    );
    let (status, _) = served.get("/languages/46").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "bash is not served");
}

#[tokio::test(start_paused = true)]
async fn a_batch_gives_a_token_or_the_refusal_per_item_and_is_read_back_by_tokens() {
    let served = served_by(Arc::new(squares)).await;
    let (status, _, answer) = served
        .post(
            "/submissions/batch?base64_encoded=false",
            json!({"submissions": [
                python("2"),
                {"source_code": "print(1)", "language_id": 999},
                python("3"),
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let items = answer.as_array().expect("one answer per item");
    assert_eq!(items.len(), 3, "{answer}");
    assert!(items[1]["language_id"][0].is_string(), "{answer}");
    let tokens: Vec<&str> = [&items[0], &items[2]]
        .iter()
        .map(|item| item["token"].as_str().expect("a token"))
        .collect();
    let path = format!(
        "/submissions/batch?base64_encoded=false&tokens={},unknown",
        tokens.join(",")
    );
    let submissions = loop {
        let (status, body) = served.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let submissions = body["submissions"].as_array().expect("submissions").clone();
        if submissions[..2].iter().all(|s| s["status"]["id"] != 1) {
            break submissions;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(submissions[0]["stdout"], "4\n", "in the tokens' order");
    assert_eq!(submissions[1]["stdout"], "9\n");
    assert_eq!(submissions[0]["status"]["id"], 3);
    assert_eq!(submissions[2], Value::Null, "a token not stored");
}
