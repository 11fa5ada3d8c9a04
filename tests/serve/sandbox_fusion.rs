//! SandboxFusion's `/run_code`: the published clients, unmodified, and the
//! headers and refusals they do not look at.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use crate::{Served, serving_dir};

/// Where scripts/setup.sh installed the SandboxFusion SDK and verl's module.
fn clients_dir() -> PathBuf {
    std::env::var_os("PROGSCORE_SERVE_CLIENTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/progscore/serve-clients"))
}

#[test]
fn the_sandbox_fusion_sdk_and_verl_conclude_what_each_program_did() {
    let clients = clients_dir();
    let python = clients.join("venv/bin/python");
    let verl = clients.join("verl_sandbox_fusion_utils.py");
    assert!(
        python.exists() && verl.exists(),
        "{} not installed: run scripts/setup.sh",
        clients.display()
    );
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("serve/clients/sandbox_fusion_clients.py");
    let output = Command::new(&python)
        .arg(&script)
        .arg(served.url())
        .arg(&verl)
        .output()
        .expect("run the clients");
    let printed = String::from_utf8_lossy(&output.stdout);
    let (code, log) = served.terminate();
    assert!(
        output.status.success() && printed.contains("all clients agree"),
        "{printed}\n{}\nserver log:\n{log}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(code, Some(0), "{log}");
}

#[test]
fn an_identical_request_reuses_the_stored_evidence_and_says_so() {
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let request = json!({"code": "print(input()[::-1])", "language": "python", "stdin": "abc\n"});
    let first = served.post_json("/run_code", &request);
    assert_eq!(first.status, 200);
    assert_eq!(first.json()["status"], "Success");
    assert_eq!(first.json()["run_result"]["stdout"], "cba\n");
    assert_eq!(first.header("x-progscore-evidence"), Some("ran"));
    let observation = first.header("x-progscore-observation").unwrap().to_string();
    assert!(observation.starts_with("obs-"), "{observation}");
    let second = served.post_json("/run_code", &request);
    assert_eq!(second.header("x-progscore-evidence"), Some("stored"));
    assert_eq!(
        second.header("x-progscore-observation"),
        Some(observation.as_str())
    );
    assert_eq!(second.json(), first.json());
    // Another stdin is another attempt.
    let other = served.post_json(
        "/run_code",
        &json!({"code": "print(input()[::-1])", "language": "python", "stdin": "xy\n"}),
    );
    assert_eq!(other.header("x-progscore-evidence"), Some("ran"));
    assert_ne!(
        other.header("x-progscore-observation"),
        Some(observation.as_str())
    );
    assert_eq!(
        served.request("GET", "/v1/ping", &[], b"").json(),
        json!("pong")
    );
}

#[test]
fn bad_requests_are_refused_naming_the_field() {
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let unknown = served.post_json(
        "/run_code",
        &json!({"code": "print(1)", "language": "cobol"}),
    );
    assert_eq!(unknown.status, 400);
    let error = &unknown.json()["error"];
    assert_eq!(error["field"], "language");
    // The served profiles and their `[languages]` names, as SandboxFusion's
    // clients spell them.
    let message = error["message"].as_str().unwrap();
    let configured: Vec<&str> = message
        .split_once("configured: ")
        .map(|(_, names)| names.trim_end_matches(')').split(", ").collect())
        .unwrap_or_default();
    assert!(
        ["cpp", "python"]
            .iter()
            .all(|name| configured.contains(name)),
        "{error}"
    );
    let mistyped = served.post_json("/run_code", &json!({"code": 12, "language": "python"}));
    assert_eq!(mistyped.status, 400);
    assert_eq!(mistyped.json()["error"]["field"], "code");
    let broken = served.request(
        "POST",
        "/run_code",
        &[("content-type", "application/json")],
        b"{\"code\": \"print(1)\", \"language\": ",
    );
    assert_eq!(broken.status, 400);
    assert_eq!(broken.json()["error"]["field"], "language");
    let files = served.post_json(
        "/run_code",
        &json!({"code": "print(1)", "language": "python", "files": {"data.txt": "aGk="}}),
    );
    assert_eq!(files.status, 400);
    assert_eq!(files.json()["error"]["field"], "files.data.txt");
}
