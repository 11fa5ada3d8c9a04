//! Piston v2's dialect as its clients see it: `POST /api/v2/execute`'s
//! status codes and stage fields for each kind of run, its refusals (in
//! Piston's `{"message"}` shape, the field first), and `/api/v2/runtimes`.
//! An answer that proves nothing about the program must be a non-200 that
//! Piston's clients retry, never a 200 they read as the program's failure.
//! The clock is paused: the reruns of unproven runs pass at once.

use axum::http::StatusCode;
use progscore_sandbox::fake::{FakeRequest, event, exited_event};
use progscore_sandbox::{CompileEvent, InvocationEvent, Outcome, SandboxError, TimeLimit};
use serde_json::{Value, json};

use super::Served;

/// Every case scripted with `outcome` and these streams.
fn each_case(
    outcome: Outcome,
    stdout: &'static [u8],
    stderr: &'static [u8],
) -> impl Fn(&FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> + Send + Sync + 'static {
    move |request| {
        Ok(request
            .invocations
            .iter()
            .map(|_| event(outcome.clone(), stdout, stderr))
            .collect())
    }
}

/// Prints its stdin and its arguments, then exits 0.
fn echoes(request: &FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> {
    Ok(request
        .invocations
        .iter()
        .map(|invocation| {
            let mut out = invocation
                .stdin
                .as_ref()
                .map(|s| s.0.clone())
                .unwrap_or_default();
            out.extend_from_slice(invocation.args.join(" ").as_bytes());
            exited_event(0, &out, b"")
        })
        .collect())
}

async fn execute(served: &Served, body: Value) -> (StatusCode, axum::http::HeaderMap, Value) {
    served.post("/api/v2/execute", body).await
}

fn python(code: &str) -> Value {
    json!({"language": "python", "version": "*", "files": [{"content": code}]})
}

#[tokio::test(start_paused = true)]
async fn a_program_that_exits_zero_has_its_output_and_no_status() {
    let served = Served::new("", echoes, std::time::Duration::ZERO).await;
    let mut body = python("import sys; print(sys.stdin.read())");
    body["stdin"] = json!("hello\n");
    body["args"] = json!(["a", "b"]);
    let (status, headers, answer) = execute(&served, body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["language"], "python");
    assert_eq!(answer["version"], env!("CARGO_PKG_VERSION"));
    let run = &answer["run"];
    assert_eq!(run["stdout"], "hello\na b", "{answer}");
    assert_eq!(run["stderr"], "");
    assert_eq!(run["output"], "hello\na b");
    assert_eq!(run["code"], 0);
    assert_eq!(run["status"], Value::Null, "exit 0 has no status: {answer}");
    assert_eq!(run["signal"], Value::Null);
    // Python has no build: no compile stage at all.
    assert!(answer.get("compile").is_none(), "{answer}");
    assert!(headers.contains_key("x-progscore-observation"));
}

#[tokio::test(start_paused = true)]
async fn a_failing_program_is_re_with_its_code_and_a_signal_exit_is_sg() {
    let served = Served::new(
        "",
        each_case(Outcome::Exited { exit_code: 3 }, b"partial\n", b"boom\n"),
        std::time::Duration::ZERO,
    )
    .await;
    let (status, _, answer) = execute(&served, python("raise SystemExit(3)")).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a proven failure is an answer: {answer}"
    );
    let run = &answer["run"];
    assert_eq!(run["code"], 3, "{answer}");
    assert_eq!(run["status"], "RE");
    assert_eq!(run["stderr"], "boom\n");
    assert_eq!(run["output"], "partial\nboom\n", "stdout then stderr");
    assert_eq!(served.runs(), 1, "a proven failure is not run again");

    // 128 + 11: killed by SIGSEGV, said by name, no exit code.
    let served = Served::new(
        "",
        each_case(Outcome::Exited { exit_code: 139 }, b"", b""),
        std::time::Duration::ZERO,
    )
    .await;
    let (status, _, answer) = execute(&served, python("import os; os.kill(0, 11)")).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["run"]["status"], "SG", "{answer}");
    assert_eq!(answer["run"]["signal"], "SIGSEGV");
    assert_eq!(answer["run"]["code"], Value::Null);
}

#[tokio::test(start_paused = true)]
async fn a_build_that_fails_has_a_compile_stage_and_no_run_stage() {
    let served = Served::with_client("", |client| {
        client
            .with_compile(|request| {
                let fails = String::from_utf8_lossy(&request.program).contains("oops");
                let stderr: &[u8] = if fails {
                    b"main.cpp:1:13: error: expected ';' before '}' token\n"
                } else {
                    b""
                };
                Some(CompileEvent {
                    event: exited_event(i64::from(fails), b"", stderr),
                    artifact_sha256: None,
                })
            })
            .with_responder(|request| {
                let fails = String::from_utf8_lossy(&request.program).contains("oops");
                Ok(request
                    .invocations
                    .iter()
                    .map(|_| {
                        if fails {
                            let reason = "the compiler exited 1".into();
                            event(Outcome::CompileError { reason }, b"", b"")
                        } else {
                            exited_event(0, b"built\n", b"")
                        }
                    })
                    .collect())
            })
    })
    .await;
    let cpp = |code: &str| json!({"language": "cpp", "version": "*", "files": [{"content": code}]});
    let (status, _, answer) = execute(&served, cpp("int main() { oops }")).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a failed build is the program's: {answer}"
    );
    let compile = &answer["compile"];
    assert_eq!(compile["code"], 1, "{answer}");
    assert_eq!(compile["status"], "RE");
    assert!(
        compile["stderr"]
            .as_str()
            .is_some_and(|s| s.contains("error: expected ';'")),
        "{answer}"
    );
    assert!(
        answer.get("run").is_none(),
        "Piston gives no run stage: {answer}"
    );

    // A build that succeeds: both stages.
    let (status, _, answer) = execute(&served, cpp("int main() { return 0; }")).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["compile"]["code"], 0, "{answer}");
    assert_eq!(answer["compile"]["status"], Value::Null);
    assert_eq!(answer["run"]["stdout"], "built\n", "{answer}");
}

#[tokio::test(start_paused = true)]
async fn a_proven_timeout_is_to_and_an_unproven_one_is_retried_never_the_programs() {
    let served = Served::new(
        "",
        each_case(Outcome::timed_out(), b"", b""),
        std::time::Duration::ZERO,
    )
    .await;
    let (status, _, answer) = execute(&served, python("while True: pass")).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["run"]["status"], "TO", "{answer}");
    assert_eq!(answer["run"]["signal"], "SIGKILL");
    assert_eq!(answer["run"]["message"], "Timeout");
    assert_eq!(served.runs(), 1, "a proven timeout is not run again");

    // The machine was too busy to prove it: nothing is said of the program.
    let unproven = Outcome::TimedOut {
        limit: TimeLimit::Wall,
        unconfirmed: Some("it got 3% of a CPU while the machine was busy".into()),
    };
    let served = Served::new("", each_case(unproven, b"", b""), std::time::Duration::ZERO).await;
    let (status, headers, answer) = execute(&served, python("while True: pass")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert_eq!(headers["retry-after"], "1");
    let run = &answer["run"];
    assert_eq!(run["status"], "XX", "not TO, not RE: {answer}");
    assert_eq!(run["code"], Value::Null);
    assert_eq!(run["signal"], Value::Null);
    assert!(
        run["message"]
            .as_str()
            .is_some_and(|m| m.contains("timeout is not proven")),
        "{answer}"
    );
    assert_eq!(served.runs(), 3, "run once and again twice");
}

#[tokio::test(start_paused = true)]
async fn a_sandbox_fault_is_a_retried_xx_never_the_programs_failure() {
    // The container struck from outside: an event of the sandbox's.
    let struck = Outcome::SandboxError {
        message: "the container was removed from outside".into(),
    };
    let served = Served::new("", each_case(struck, b"", b""), std::time::Duration::ZERO).await;
    let (status, headers, answer) = execute(&served, python("print('ok')")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert!(headers.contains_key("retry-after"));
    assert_eq!(answer["run"]["status"], "XX", "{answer}");
    assert_eq!(answer["run"]["code"], Value::Null);
    assert!(
        answer["run"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("sandbox error")),
        "{answer}"
    );

    // The sandbox refused the run before anything ran.
    let served = Served::new(
        "",
        |_: &FakeRequest| {
            Err(SandboxError::Setup {
                message: "no space left on /var/lib/progscore".into(),
            })
        },
        std::time::Duration::ZERO,
    )
    .await;
    let (status, headers, answer) = execute(&served, python("print('ok')")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    assert!(headers.contains_key("retry-after"));
    assert_eq!(answer["run"]["status"], "XX", "{answer}");
    let message = answer["run"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("could not be set up"), "{answer}");
    assert!(
        !message.contains("/var/lib"),
        "the host's path leaked: {answer}"
    );
    assert_eq!(served.runs(), 3, "refused, then asked again twice");
}

#[tokio::test(start_paused = true)]
async fn an_unknown_language_is_refused_naming_it_and_the_served_ones() {
    let served = Served::new("", echoes, std::time::Duration::ZERO).await;
    let mut body = python("print(1)");
    body["language"] = json!("cobol");
    let (status, _, answer) = execute(&served, body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let message = answer["message"].as_str().expect("Piston's `message`");
    assert!(message.starts_with("language: cobol"), "{answer}");
    assert!(message.contains("cpp, python"), "{answer}");
    assert_eq!(served.runs(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_malformed_body_is_refused_in_pistons_shape_naming_the_field() {
    let served = Served::new("", echoes, std::time::Duration::ZERO).await;
    for (body, field) in [
        // A field of the wrong type: its JSON path.
        (json!({"language": "python", "files": "print(1)"}), "files:"),
        (
            json!({"language": 5, "files": [{"content": ""}]}),
            "language:",
        ),
        // No `files` at all: the body.
        (json!({"language": "python"}), "body: missing field `files`"),
        (json!({"language": "python", "files": []}), "files:"),
        (
            json!({"language": "python", "files": [{"content": "!!", "encoding": "base64"}]}),
            "files[0].content:",
        ),
        (
            json!({"language": "python", "files": [{"content": "1"}], "run_timeout": -5}),
            "run_timeout:",
        ),
    ] {
        let (status, _, answer) = execute(&served, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        let message = answer["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(field),
            "{body}: Piston's clients read `message`: {answer}"
        );
    }
    assert_eq!(served.runs(), 0, "nothing malformed ran");
}

#[tokio::test(start_paused = true)]
async fn the_runtimes_are_the_served_languages() {
    let served = Served::new("", echoes, std::time::Duration::ZERO).await;
    let (status, runtimes) = served.get("/api/v2/runtimes").await;
    assert_eq!(status, StatusCode::OK, "{runtimes}");
    let mut languages: Vec<(&str, &str)> = runtimes
        .as_array()
        .expect("an array")
        .iter()
        .map(|r| {
            assert_eq!(r["version"], env!("CARGO_PKG_VERSION"), "{r}");
            assert_eq!(r["aliases"], json!([]), "{r}");
            (
                r["language"].as_str().unwrap_or_default(),
                r["runtime"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    languages.sort_unstable();
    assert_eq!(languages, [("cpp", "cpp"), ("python", "python")]);
}
