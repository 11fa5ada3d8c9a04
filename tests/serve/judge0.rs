//! Judge0's `/submissions`: the published `judge0` SDK, unmodified, and what
//! it does not look at: tokens across a restart, a submission whose server
//! was killed, refusals naming the field.

use serde_json::json;

use crate::ServeIn;
use crate::{Served, run_clients, serving_dir};

#[test]
fn the_judge0_sdk_concludes_what_each_program_did() {
    let dir = serving_dir("");
    run_clients(Served::start(&dir), "judge0_clients.py", &[]);
}

#[test]
fn a_token_is_answered_after_a_restart_and_a_killed_servers_submission_is_an_internal_error() {
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let done = served.post_json(
        "/submissions?wait=true&base64_encoded=true",
        &json!({"source_code": "cHJpbnQoaW5wdXQoKSoyKQ==", "language_id": 71,
                "stdin": "YWIK", "expected_output": "YWJhYgo="}),
    );
    assert_eq!(done.status, 201, "{}", String::from_utf8_lossy(&done.body));
    let finished = done.json();
    assert_eq!(finished["status"]["id"], 3, "{finished}");
    // base64 as asked: "abab\n".
    assert_eq!(finished["stdout"], "YWJhYgo=");
    let token = finished["token"].as_str().unwrap().to_string();
    // A loop runs for its whole time limit: the server is killed before
    // it can have a result.
    let nonce = std::process::id();
    let pending = served.post_json(
        "/submissions",
        &json!({"source_code": format!("# {nonce}\nwhile True:\n    pass\n"), "language_id": 71}),
    );
    assert_eq!(pending.status, 201);
    let pending = pending.json()["token"].as_str().unwrap().to_string();
    let mut served = served;
    served.child.kill().expect("SIGKILL the server");
    served.child.wait().expect("wait for it");
    drop(served);

    let again = Served::start(&dir);
    let reply = again.request(
        "GET",
        &format!("/submissions/{token}?fields=status,stdout,token"),
        &[],
        b"",
    );
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.json(),
        json!({"status": {"id": 3, "description": "Accepted"}, "stdout": "abab\n", "token": token})
    );
    assert!(reply.header("x-progscore-observation").is_some());
    let orphan = again.request("GET", &format!("/submissions/{pending}"), &[], b"");
    let orphan = orphan.json();
    assert_eq!(orphan["status"]["id"], 13, "{orphan}");
    assert!(
        orphan["message"]
            .as_str()
            .unwrap()
            .contains("stopped before it ran"),
        "{orphan}"
    );
    let batch = again.request(
        "GET",
        &format!("/submissions/batch?tokens={token},{pending},no-such-token&fields=status_id"),
        &[],
        b"",
    );
    assert_eq!(
        batch.json(),
        json!({"submissions": [{"status_id": 3}, {"status_id": 13}, null]})
    );
    let (code, log) = again.terminate();
    assert_eq!(code, Some(0), "{log}");
}

#[test]
fn judge0_requests_it_cannot_honour_are_refused_naming_the_field() {
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let cases = [
        (
            json!({"source_code": "print(1)", "language_id": 9999}),
            "language_id",
        ),
        (json!({"language_id": 71}), "source_code"),
        (
            json!({"source_code": "print(1)", "language_id": 71, "callback_url": "http://x"}),
            "callback_url",
        ),
        (
            json!({"source_code": "print(1)", "language_id": 71, "compiler_options": "-O0"}),
            "compiler_options",
        ),
        (
            json!({"source_code": "print(1)", "language_id": 71, "enable_network": true}),
            "enable_network",
        ),
        // An argument cannot hold a NUL (stdin may: it is bytes).
        (
            json!({"source_code": "print(1)", "language_id": 71, "command_line_arguments": "a\u{0}b"}),
            "command_line_arguments",
        ),
    ];
    for (body, field) in cases {
        let reply = served.post_json("/submissions", &body);
        assert_eq!(
            reply.status,
            422,
            "{body}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert!(
            reply.json().get(field).is_some(),
            "{body}: {}",
            reply.json()
        );
    }
    let not_base64 = served.post_json(
        "/submissions?base64_encoded=true",
        &json!({"source_code": "print(1)!", "language_id": 71}),
    );
    assert_eq!(not_base64.status, 422);
    assert!(not_base64.json().get("source_code").is_some());
    let bad_fields = served.request("GET", "/submissions/x?fields=stdout,bogus", &[], b"");
    assert_eq!(bad_fields.status, 400);
    assert_eq!(bad_fields.json()["error"]["field"], "fields");
    let mistyped = served.post_json(
        "/submissions",
        &json!({"source_code": 5, "language_id": 71}),
    );
    // A body that does not parse is refused in Judge0's own shape too.
    assert_eq!(mistyped.status, 422);
    assert!(
        mistyped.json()["source_code"].is_array(),
        "{}",
        mistyped.json()
    );
    // Nothing refused was stored as a submission.
    let missing = served.request("GET", "/submissions/batch?tokens=a", &[], b"");
    assert_eq!(missing.json(), json!({"submissions": [null]}));
}

#[test]
fn a_wait_true_client_that_goes_away_leaves_its_submission_running_to_a_result() {
    use std::io::Write;
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let nonce = std::process::id();
    let body =
        json!({"source_code": format!("# {nonce}\nimport time\ntime.sleep(1)\nprint('late')\n"),
                      "language_id": 71})
        .to_string();
    let mut connection = std::net::TcpStream::connect(served.address).expect("connect");
    write!(
        connection,
        "POST /submissions?wait=true HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        served.address,
        body.len()
    )
    .unwrap();
    // Gone before the answer.
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(connection);
    let store = rusqlite::Connection::open(dir.path().join("evidence.db")).expect("the store");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let result: String = loop {
        let row: Option<Option<String>> = store
            // The only submission of this store.
            .query_row("SELECT result FROM submissions", [], |row| row.get(0))
            .ok();
        if let Some(Some(result)) = row {
            break result;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the submission is still unfinished: {row:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let result: serde_json::Value = serde_json::from_str(&result).unwrap();
    assert_eq!(result["status_id"], 3, "it ran to its end: {result}");
    let (code, log) = served.terminate();
    assert_eq!(code, Some(0), "{log}");
}
