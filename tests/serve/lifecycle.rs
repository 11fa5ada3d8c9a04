//! Starting, admitting, logging and stopping.

use progscore_e2e::Dir;
use serde_json::json;

use crate::ServeIn;
use crate::{Served, TOKEN, run_clients, serving_dir};

#[test]
fn it_serves_on_loopback_reports_health_and_stops_cleanly_on_sigterm() {
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let health = served.request("GET", "/healthz", &[], b"");
    assert_eq!(health.status, 200);
    assert!(health.header("x-request-id").is_some());
    assert_eq!(served.request("GET", "/readyz", &[], b"").status, 200);
    let profiles = served.request("GET", "/v1/profiles", &[], b"").json();
    let names: Vec<&str> = profiles
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cpp", "python"]);
    // No CORS: a page elsewhere gets no permission to read the answers.
    let preflight = served.request(
        "OPTIONS",
        "/run_code",
        &[
            ("origin", "http://example.org"),
            ("access-control-request-method", "POST"),
        ],
        b"",
    );
    assert!(preflight.header("access-control-allow-origin").is_none());
    assert_eq!(served.request("GET", "/nothing", &[], b"").status, 404);
    let started = served.started.clone();
    let (code, log) = served.terminate();
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains("route=/healthz") && log.contains("status=200"),
        "{log}"
    );
    assert_eq!(started.leftovers(), Vec::<String>::new());
}

#[test]
fn listening_beyond_loopback_needs_a_token() {
    let dir = serving_dir("");
    let (code, log) = Served::try_start(&dir, &["--listen", "0.0.0.0:0"])
        .map(|_| ())
        .unwrap_err();
    assert_eq!(code, Some(2), "{log}");
    assert!(
        log.contains("listen = \"0.0.0.0:0\" is not a loopback address") && log.contains("tokens"),
        "{log}"
    );
}

#[test]
fn with_tokens_every_route_but_health_needs_one() {
    let dir = serving_dir(&format!("tokens = [\"{TOKEN}\"]"));
    let served = Served::start(&dir);
    assert_eq!(served.request("GET", "/healthz", &[], b"").status, 200);
    let refused = served.request("GET", "/v1/profiles", &[], b"");
    assert_eq!(refused.status, 401);
    assert!(
        refused.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Bearer")
    );
    let wrong = served.request(
        "GET",
        "/v1/profiles",
        &[("authorization", "Bearer nope")],
        b"",
    );
    assert_eq!(wrong.status, 401);
    let bearer = format!("Bearer {TOKEN}");
    let admitted = served.request("GET", "/v1/profiles", &[("authorization", &bearer)], b"");
    assert_eq!(admitted.status, 200);
    let judge0 = served.request("GET", "/v1/profiles", &[("x-auth-token", TOKEN)], b"");
    assert_eq!(judge0.status, 200);
}

#[test]
fn a_profile_that_cannot_run_stops_the_start_naming_it_and_the_fix() {
    let dir = Dir::new();
    dir.edit_config(|text| {
        // An image digest the engine does not have.
        let missing = format!("sha256:{}", "0".repeat(64));
        let mut edited = String::new();
        let mut in_cpp = false;
        for line in text.lines() {
            if line.starts_with('[') {
                in_cpp = line == "[profiles.cpp]";
            }
            if in_cpp && line.starts_with("image = ") {
                let repo = line.split('@').next().unwrap();
                edited.push_str(&format!("{repo}@{missing}\"\n"));
            } else {
                edited.push_str(line);
                edited.push('\n');
            }
        }
        format!("{edited}\n[serve]\nprofiles = [\"python\", \"cpp\"]\n")
    });
    let (code, log) = Served::try_start(&dir, &["--listen", "127.0.0.1:0"])
        .map(|_| ())
        .unwrap_err();
    assert_eq!(code, Some(2), "{log}");
    assert!(
        log.contains("profile `cpp` cannot run here")
            && log.contains("progscore doctor")
            && log.contains("profiles = [\"python\"]"),
        "{log}"
    );
}

#[test]
fn the_log_names_requests_but_never_their_bodies() {
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let marker = "a-secret-the-log-must-not-show";
    let reply = served.post_json(
        "/run_code",
        &json!({"code": format!("print('{marker}')"), "language": "python"}),
    );
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(reply.json()["run_result"]["stdout"], format!("{marker}\n"));
    let (code, log) = served.terminate();
    assert_eq!(code, Some(0));
    assert!(
        log.contains("route=/run_code") && log.contains("request_id="),
        "{log}"
    );
    assert!(!log.contains(marker), "{log}");
}

#[test]
fn every_dialects_answers_are_those_openapi_json_describes() {
    let dir = serving_dir("");
    run_clients(Served::start(&dir), "openapi_check.py", &[]);
}
