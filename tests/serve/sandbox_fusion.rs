//! SandboxFusion's `/run_code`: the published clients, unmodified, and the
//! headers and refusals they do not look at.

use serde_json::json;

use crate::ServeIn;
use crate::{Served, clients_dir, run_clients, serving_dir};

#[test]
fn the_sandbox_fusion_sdk_and_verl_conclude_what_each_program_did() {
    let verl = clients_dir().join("verl_sandbox_fusion_utils.py");
    assert!(
        verl.exists(),
        "{} not installed: run scripts/setup.sh",
        verl.display()
    );
    let dir = serving_dir("");
    run_clients(Served::start(&dir), "sandbox_fusion_clients.py", &[&verl]);
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
    let outside = served.post_json(
        "/run_code",
        &json!({"code": "print(1)", "language": "python", "files": {"../data.txt": "aGk="}}),
    );
    assert_eq!(outside.status, 400);
    assert_eq!(outside.json()["error"]["field"], "files.../data.txt");
    let not_base64 = served.post_json(
        "/run_code",
        &json!({"code": "print(1)", "language": "python", "files": {"data.txt": "not base64!"}}),
    );
    assert_eq!(not_base64.status, 400);
    assert_eq!(not_base64.json()["error"]["field"], "files.data.txt");
    let fetch = served.post_json(
        "/run_code",
        &json!({"code": "print(1)", "language": "python", "fetch_files": ["out.txt"]}),
    );
    assert_eq!(fetch.status, 400);
    assert_eq!(fetch.json()["error"]["field"], "fetch_files");
}

#[test]
fn one_cpp_program_sent_as_eight_tests_is_built_once() {
    // A window long enough that every request of the eight joins, whatever
    // the machine's load: the point is the count of builds.
    let dir = serving_dir("gather = \"5s\"");
    let served = Served::start(&dir);
    let address = served.address;
    let nonce = std::process::id();
    let code = format!(
        "// {nonce}\n#include <iostream>\nint main(){{long n; std::cin>>n; std::cout<<n*n<<std::endl;}}\n"
    );
    let requests: Vec<_> = (0..8)
        .map(|n| {
            let code = code.clone();
            std::thread::spawn(move || {
                let body = json!({"code": code, "language": "cpp", "stdin": format!("{n}\n")});
                let reply = crate::try_post_json(address, "/run_code", &body).expect("an answer");
                (n, reply)
            })
        })
        .collect();
    let mut observations = Vec::new();
    let mut ran = 0;
    for request in requests {
        let (n, reply) = request.join().unwrap();
        let answer = reply.json();
        assert_eq!(answer["status"], "Success", "{answer}");
        assert_eq!(
            answer["run_result"]["stdout"],
            format!("{}\n", n * n),
            "{answer}"
        );
        assert_eq!(answer["compile_result"]["return_code"], 0, "{answer}");
        if reply.header("x-progscore-evidence") == Some("ran") {
            ran += 1;
        }
        observations.push(reply.header("x-progscore-observation").unwrap().to_string());
    }
    // One run built it; the seven others joined it. Each names its own
    // observation (its own case, nobody else's stdin), all with one build.
    assert_eq!(ran, 1);
    let mut distinct = observations.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 8, "{observations:?}");
    let builds: std::collections::BTreeSet<String> = observations
        .iter()
        .map(|observation| crate::build_of(&served, observation))
        .collect();
    assert_eq!(builds.len(), 1, "{builds:?}");
}

#[test]
fn the_peers_clients_never_fail_a_correct_program_while_containers_are_struck() {
    let verl = clients_dir().join("verl_sandbox_fusion_utils.py");
    assert!(
        verl.exists(),
        "{} not installed: run scripts/setup.sh",
        verl.display()
    );
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let pid = std::path::PathBuf::from(served.started.pid.to_string());
    run_clients(served, "fault_clients.py", &[&pid, &verl]);
}
