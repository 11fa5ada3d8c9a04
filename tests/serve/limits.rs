//! A request's own limits (SandboxFusion's `run_timeout`, Judge0's
//! `cpu_time_limit`, Piston's `run_timeout`, `/v1`'s `limits`...): applied,
//! part of the attempt (same limits reuse the evidence, other limits run
//! again, and never share a gathered run), and refused naming the field
//! past `[serve]`'s maxima or when malformed, with nothing stored.

use serde_json::json;

use crate::ServeIn;
use crate::{Served, clients_dir, run_clients, serving_dir};

/// Sleeps 3 s: past the served python profile's 2 s, within 6 s.
const SLEEPS: &str = "import time\ntime.sleep(3)\nprint('woke')\n";

/// How many rows `table` of the served store holds.
fn rows(dir: &progscore_e2e::Dir, table: &str) -> i64 {
    let store = rusqlite::Connection::open(dir.path().join("evidence.db")).expect("the store");
    store
        .query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
            row.get(0)
        })
        .expect("count rows")
}

#[test]
fn the_sandbox_fusion_and_judge0_clients_limits_are_applied() {
    let verl = clients_dir().join("verl_sandbox_fusion_utils.py");
    assert!(
        verl.exists(),
        "{} not installed: run scripts/setup.sh",
        verl.display()
    );
    let dir = serving_dir("");
    run_clients(Served::start(&dir), "limits_clients.py", &[&verl]);
}

#[test]
fn piston_run_timeout_in_ms_is_applied() {
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let execute = |run_timeout: i64| {
        let reply = served.post_json(
            "/api/v2/execute",
            &json!({"language": "python", "version": "*", "files": [{"content": SLEEPS}],
                    "run_timeout": run_timeout, "compile_timeout": 10000,
                    "run_memory_limit": -1, "compile_memory_limit": -1}),
        );
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        reply.json()
    };
    let short = execute(1000);
    assert_eq!(short["run"]["status"], "TO", "{short}");
    // Past the profile's 2 s.
    let long = execute(6000);
    assert_eq!(long["run"]["status"], json!(null), "{long}");
    assert_eq!(long["run"]["code"], 0, "{long}");
    assert_eq!(long["run"]["stdout"], "woke\n", "{long}");
}

#[test]
fn identical_limits_reuse_the_evidence_and_other_limits_run_again() {
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let send = |run_timeout: f64| {
        let reply = served.post_json(
            "/run_code",
            &json!({"code": "print(6 * 7)", "language": "python", "run_timeout": run_timeout}),
        );
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.json()["status"], "Success", "{}", reply.json());
        (
            reply.header("x-progscore-evidence").unwrap().to_string(),
            reply.header("x-progscore-observation").unwrap().to_string(),
        )
    };
    let (evidence, first) = send(5.0);
    assert_eq!(evidence, "ran");
    let (evidence, again) = send(5.0);
    assert_eq!(
        (evidence.as_str(), again.as_str()),
        ("stored", first.as_str())
    );
    let (evidence, other) = send(4.0);
    assert_eq!(evidence, "ran");
    assert_ne!(other, first);
    // The profile's own limits are yet another attempt.
    let plain = served.post_json(
        "/run_code",
        &json!({"code": "print(6 * 7)", "language": "python"}),
    );
    assert_eq!(plain.header("x-progscore-evidence"), Some("ran"));

    // /v1/run takes the expectation's keys, in the config's units.
    let run = |limits: serde_json::Value| {
        let reply = served.post_json(
            "/v1/run",
            &json!({"program": SLEEPS, "profile": "python", "limits": limits}),
        );
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        reply.json()
    };
    let short = run(json!({"timeout": "1s"}));
    assert_eq!(short["run"]["events"][0]["outcome"], "timed_out", "{short}");
    let long = run(json!({"timeout": "6s"}));
    assert_eq!(long["run"]["events"][0]["outcome"], "exited", "{long}");
    assert_eq!(long["run"]["events"][0]["exit_code"], 0, "{long}");
}

#[test]
fn requests_under_other_limits_never_share_a_gathered_run() {
    // A window long enough that the four requests arrive within it.
    let dir = serving_dir("gather = \"5s\"");
    let served = Served::start(&dir);
    let address = served.address;
    let nonce = std::process::id();
    let code = format!(
        "// {nonce}\n#include <iostream>\nint main(){{long n; std::cin>>n; std::cout<<n*n<<std::endl;}}\n"
    );
    let requests: Vec<_> = [(1, 5.0), (2, 5.0), (3, 4.0), (4, 4.0)]
        .into_iter()
        .map(|(n, run_timeout)| {
            let code = code.clone();
            std::thread::spawn(move || {
                let body = json!({"code": code, "language": "cpp", "stdin": format!("{n}\n"),
                                  "run_timeout": run_timeout, "compile_timeout": 30});
                let reply = crate::try_post_json(address, "/run_code", &body).expect("an answer");
                (n, run_timeout, reply)
            })
        })
        .collect();
    let mut runs = std::collections::BTreeMap::<String, Vec<(i64, String)>>::new();
    for request in requests {
        let (n, run_timeout, reply) = request.join().unwrap();
        let answer = reply.json();
        assert_eq!(answer["status"], "Success", "{answer}");
        assert_eq!(answer["run_result"]["stdout"], format!("{}\n", n * n));
        // Grouped by the build each request's own observation used.
        let build = crate::build_of(&served, reply.header("x-progscore-observation").unwrap());
        runs.entry(build).or_default().push((
            n,
            format!(
                "{run_timeout}:{}",
                reply.header("x-progscore-evidence").unwrap()
            ),
        ));
    }
    // Two runs, one per limit, each led by one request and joined by the other.
    assert_eq!(runs.len(), 2, "{runs:?}");
    for (observation, cases) in &runs {
        let timeouts: std::collections::BTreeSet<&str> = cases
            .iter()
            .map(|(_, how)| how.split(':').next().unwrap())
            .collect();
        assert_eq!(timeouts.len(), 1, "{observation}: {cases:?}");
        let mut evidence: Vec<&str> = cases
            .iter()
            .map(|(_, how)| how.split(':').nth(1).unwrap())
            .collect();
        evidence.sort();
        assert_eq!(evidence, ["joined", "ran"], "{observation}: {cases:?}");
    }
}

#[test]
fn limits_past_the_maxima_or_malformed_are_refused_naming_the_field_and_nothing_is_stored() {
    let dir = serving_dir("max_timeout = \"5s\"");
    let served = Served::start(&dir);
    let code = "print(1)";
    // (route, body, status, the field, what the message must name)
    let cases = [
        (
            "/run_code",
            json!({"code": code, "language": "python", "run_timeout": 6}),
            400,
            "run_timeout",
            "max_timeout",
        ),
        (
            "/run_code",
            json!({"code": code, "language": "python", "run_timeout": -1}),
            400,
            "run_timeout",
            ">= 0",
        ),
        (
            "/run_code",
            json!({"code": code, "language": "python", "run_timeout": 0.01}),
            400,
            "run_timeout",
            "100ms",
        ),
        (
            "/run_code",
            json!({"code": code, "language": "python", "memory_limit_MB": 8192}),
            400,
            "memory_limit_MB",
            "max_memory",
        ),
        (
            "/run_code",
            json!({"code": code, "language": "python", "memory_limit_MB": 1}),
            400,
            "memory_limit_MB",
            "at least",
        ),
        (
            "/run_code",
            json!({"code": "int main(){}", "language": "cpp", "compile_timeout": 600}),
            400,
            "compile_timeout",
            "max_compile_timeout",
        ),
        (
            "/v1/run",
            json!({"program": code, "profile": "python", "limits": {"timeout": "1m"}}),
            400,
            "limits.timeout",
            "max_timeout",
        ),
        (
            "/v1/run",
            json!({"program": code, "profile": "python", "limits": {"pids": 100000}}),
            400,
            "limits.pids",
            "max_pids",
        ),
        (
            "/v1/run",
            json!({"program": code, "profile": "python", "limits": {"cpus": 3.0}}),
            400,
            "limits.cpus",
            "cannot be changed",
        ),
        (
            "/v1/run",
            json!({"program": code, "profile": "python", "limits": {"output": "1GiB"}}),
            400,
            "limits.output",
            "not raise it",
        ),
        (
            "/v1/run",
            json!({"program": code, "profile": "python", "compile_limits": {"timeout": "2s"}}),
            400,
            "compile_limits",
            "no compile step",
        ),
        (
            "/v1/score",
            json!({"id": "a", "program": code, "expectation": {"conditions": [{"program_behaves": {
                "profile": "python", "limits": {"memory": "8GiB"},
                "cases": [{"invocation": {"args": []}, "expected": {}}]}}]}}),
            400,
            "expectation.conditions[0].program_behaves.limits.memory",
            "max_memory",
        ),
    ];
    for (route, body, status, field, named) in cases {
        let reply = served.post_json(route, &body);
        let answer = reply.json();
        assert_eq!(reply.status, status, "{route} {body}: {answer}");
        assert_eq!(answer["error"]["field"], field, "{route} {body}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{route} {body}: {answer}");
    }
    // Piston's refusals name the field first in the message.
    for (body, field, named) in [
        (
            json!({"language": "python", "files": [{"content": code}], "run_timeout": 60000}),
            "run_timeout",
            "max_timeout",
        ),
        (
            json!({"language": "python", "files": [{"content": code}], "run_timeout": -7}),
            "run_timeout",
            ">= 0",
        ),
        (
            json!({"language": "python", "files": [{"content": code}], "run_memory_limit": 1e10}),
            "run_memory_limit",
            "max_memory",
        ),
        (
            json!({"language": "cpp", "files": [{"content": "int main(){}"}], "compile_memory_limit": 1024}),
            "compile_memory_limit",
            "at least",
        ),
    ] {
        let reply = served.post_json("/api/v2/execute", &body);
        let answer = reply.json();
        assert_eq!(reply.status, 400, "{body}: {answer}");
        let message = answer["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{field}:")) && message.contains(named),
            "{body}: {answer}"
        );
    }
    // Judge0: 422 in its own shape.
    for (body, field, named) in [
        (
            json!({"source_code": code, "language_id": 71, "memory_limit": 8_000_000}),
            "memory_limit",
            "max_memory",
        ),
        (
            json!({"source_code": code, "language_id": 71, "wall_time_limit": 30}),
            "wall_time_limit",
            "max_timeout",
        ),
        (
            json!({"source_code": code, "language_id": 71, "cpu_time_limit": 0.001}),
            "cpu_time_limit",
            "10ms",
        ),
        (
            json!({"source_code": code, "language_id": 71, "cpu_time_limit": -2}),
            "cpu_time_limit",
            ">= 0",
        ),
        (
            json!({"source_code": code, "language_id": 71, "max_processes_and_or_threads": 0}),
            "max_processes_and_or_threads",
            "at least 1",
        ),
        (
            json!({"source_code": code, "language_id": 71, "max_processes_and_or_threads": 100000}),
            "max_processes_and_or_threads",
            "max_pids",
        ),
        (
            json!({"source_code": code, "language_id": 71, "stack_limit": -1}),
            "stack_limit",
            ">= 0",
        ),
        (
            json!({"source_code": code, "language_id": 71,
                   "enable_per_process_and_thread_time_limit": true}),
            "enable_per_process_and_thread_time_limit",
            "together",
        ),
    ] {
        let reply = served.post_json("/submissions?wait=true", &body);
        let answer = reply.json();
        assert_eq!(reply.status, 422, "{body}: {answer}");
        let messages = answer[field]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"));
        assert!(
            messages[0].as_str().unwrap().contains(named),
            "{body}: {answer}"
        );
    }
    let batch = served.post_json(
        "/submissions/batch",
        &json!({"submissions": [{"source_code": code, "language_id": 71, "memory_limit": 8_000_000}]}),
    );
    assert!(
        batch.json()[0].get("memory_limit").is_some(),
        "{}",
        batch.json()
    );
    // Nothing was run, stored or submitted.
    assert_eq!(rows(&dir, "observations"), 0);
    assert_eq!(rows(&dir, "scores"), 0);
    assert_eq!(rows(&dir, "submissions"), 0);
    assert_eq!(
        served.metric("progscore_evidence_total{evidence=\"ran\"}"),
        0.0
    );
    // Judge0's configuration says the maxima.
    let config = served.request("GET", "/config_info", &[], b"").json();
    assert_eq!(config["max_wall_time_limit"], 5.0, "{config}");
    assert_eq!(config["max_memory_limit"], 4 * 1024 * 1024, "{config}");
}
