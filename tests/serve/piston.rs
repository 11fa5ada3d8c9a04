//! Piston's `/api/v2/execute` and `/api/v2/runtimes` over real HTTP, and
//! `/metrics` counting what was asked and concluded.

use serde_json::json;

use crate::ServeIn;
use crate::{Served, serving_dir};

fn execute(served: &Served, language: &str, code: &str, stdin: &str) -> serde_json::Value {
    let reply = served.post_json(
        "/api/v2/execute",
        &json!({"language": language, "version": "*", "files": [{"content": code}],
                "stdin": stdin, "args": []}),
    );
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert!(reply.header("x-progscore-observation").is_some());
    reply.json()
}

#[test]
fn piston_clients_get_each_programs_stage_and_status() {
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let runtimes = served.request("GET", "/api/v2/runtimes", &[], b"").json();
    let languages: Vec<&str> = runtimes
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["language"].as_str().unwrap())
        .collect();
    assert!(
        languages.contains(&"python") && languages.contains(&"cpp"),
        "{runtimes}"
    );

    let correct = execute(&served, "python", "print(int(input()) ** 2)", "7\n");
    assert_eq!(correct["run"]["stdout"], "49\n", "{correct}");
    assert_eq!(correct["run"]["code"], 0);
    assert_eq!(correct["run"]["status"], json!(null));
    assert!(correct.get("compile").is_none(), "{correct}");

    let failing = execute(&served, "python", "import sys\nsys.exit(3)", "");
    assert_eq!(failing["run"]["code"], 3);
    assert_eq!(failing["run"]["status"], "RE");

    let segv = execute(
        &served,
        "cpp",
        "int main(){ volatile int *p = nullptr; return *p; }\n",
        "",
    );
    assert_eq!(segv["run"]["status"], "SG", "{segv}");
    assert_eq!(segv["run"]["signal"], "SIGSEGV");
    assert_eq!(segv["compile"]["code"], 0, "{segv}");

    // A timeout the machine was too busy to prove is a 503 (open-r1's
    // client retries it), never a verdict; otherwise a proven timeout.
    let looping = served.post_json(
        "/api/v2/execute",
        &json!({"language": "python", "version": "*",
                "files": [{"content": "while True:\n    pass\n"}], "stdin": "", "args": []}),
    );
    let answer = looping.json();
    match looping.status {
        503 => assert!(
            answer["run"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("timeout is not proven")),
            "{answer}"
        ),
        _ => {
            assert_eq!(looping.status, 200, "{answer}");
            assert_eq!(answer["run"]["status"], "TO", "{answer}");
        }
    }

    let broken = execute(&served, "cpp", "int main() { return 0 }\n", "");
    assert!(broken.get("run").is_none(), "{broken}");
    assert_ne!(broken["compile"]["code"], 0);
    assert!(
        broken["compile"]["stderr"]
            .as_str()
            .unwrap()
            .contains("error"),
        "{broken}"
    );

    let unknown = served.post_json(
        "/api/v2/execute",
        &json!({"language": "cobol", "version": "*", "files": [{"content": "x"}]}),
    );
    assert_eq!(unknown.status, 400);
    assert!(
        unknown.json()["message"]
            .as_str()
            .unwrap()
            .starts_with("language:")
    );
    // Files after the first are placed beside the program, by name.
    let two_files = served.post_json(
        "/api/v2/execute",
        &json!({"language": "python", "version": "*", "files": [
            {"content": "print(open('helper.txt').read().strip())"},
            {"name": "helper.txt", "content": "aGVscGVk", "encoding": "base64"}]}),
    );
    assert_eq!(two_files.status, 200, "{}", two_files.json());
    assert_eq!(two_files.json()["run"]["stdout"], "helped\n");
    let bad_name = served.post_json(
        "/api/v2/execute",
        &json!({"language": "python", "files": [{"content": "x"}, {"name": "/etc/x", "content": "y"}]}),
    );
    assert_eq!(bad_name.status, 400);
    assert!(
        bad_name.json()["message"]
            .as_str()
            .unwrap()
            .starts_with("files"),
        "{}",
        bad_name.json()
    );
    let nul_arg = served.post_json(
        "/api/v2/execute",
        &json!({"language": "python", "files": [{"content": "print(1)"}], "args": ["a\u{0}b"]}),
    );
    assert_eq!(nul_arg.status, 400);
    assert!(
        nul_arg.json()["message"]
            .as_str()
            .unwrap()
            .starts_with("args")
    );
}

#[test]
fn metrics_count_requests_verdicts_and_evidence() {
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let body = json!({"code": "print(input())", "language": "python", "stdin": "x\n"});
    assert_eq!(served.post_json("/run_code", &body).status, 200);
    assert_eq!(served.post_json("/run_code", &body).status, 200);
    let bad = served.post_json("/run_code", &json!({"code": "x", "language": "cobol"}));
    assert_eq!(bad.status, 400);
    let metrics = served.request("GET", "/metrics", &[], b"");
    assert_eq!(metrics.status, 200);
    let text = String::from_utf8(metrics.body).unwrap();
    for line in [
        "progscore_http_requests_total{route=\"/run_code\",status=\"200\"} 2",
        "progscore_http_requests_total{route=\"/run_code\",status=\"400\"} 1",
        "progscore_verdicts_total{profile=\"python\",verdict=\"true\"} 2",
        "progscore_evidence_total{evidence=\"ran\"} 1",
        "progscore_evidence_total{evidence=\"stored\"} 1",
        "progscore_queue_wait_seconds_count{profile=\"python\"} 2",
        "progscore_queue_waiting{profile=\"python\"} 0",
        "progscore_runs_in_flight 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("progscore_run_seconds_count{profile=\"python\"} 1")),
        "{text}"
    );
}
