//! Piston's `/api/v2/execute` and `/api/v2/runtimes` over real HTTP, and
//! `/metrics` counting what was asked and concluded.

use serde_json::json;

use crate::ServeIn;
use crate::{Served, serving_dir};
use progscore_e2e::Dir;

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

/// A file of examples/contest.
fn contest(path: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/contest")
        .join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A request of open-r1's `codeforces` package for pair-sum's test `n`.
fn codeforces(language: &str, main: &str, checker: Option<&str>, n: usize) -> serde_json::Value {
    let mut files = vec![json!({"name": "main.cpp", "content": main})];
    if let Some(checker) = checker {
        files.push(json!({"name": "checker.py", "content": checker}));
    }
    files.extend([
        json!({"name": "input.txt", "content": contest(&format!("pair-sum/tests/{n}.in"))}),
        json!({"name": "correct_output.txt", "content": contest(&format!("pair-sum/tests/{n}.ans"))}),
        json!({"name": "grader_config", "content": "TIME_LIMIT=1\nMEMORY_LIMIT=256\nINPUT_MODE=stdio"}),
    ]);
    json!({"language": language, "version": "*", "files": files, "run_timeout": 11000})
}

#[test]
fn open_r1_packages_answer_as_theirs_and_never_zero_for_what_proves_nothing() {
    let dir = Dir::new();
    dir.edit_config(|text| {
        format!(
            "{text}\n[serve]\nprofiles = [\"python\", \"python-file\", \"cpp\", \"cpp-codeforces\", \"cpp-ioi\"]\n"
        )
    });
    let served = Served::start(&dir);
    let checker = contest("pair-sum/checker.py");
    let post = |body: &serde_json::Value| {
        let reply = served.post_json("/api/v2/execute", body);
        (reply.status, reply.json())
    };
    // A right answer the jury did not give: only the checker accepts it.
    let right = contest("pair-sum/submissions/right.cpp");
    let (status, answer) = post(&codeforces("c++17", &right, Some(&checker), 0));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["compile"]["code"], 0, "{answer}");
    assert_eq!(answer["run"]["code"], 0, "{answer}");
    assert_eq!(answer["run"]["stdout"], "1\n", "{answer}");
    let (_, answer) = post(&codeforces(
        "cf_python3",
        &contest("pair-sum/submissions/wrong.py"),
        Some(&checker),
        0,
    ));
    assert_eq!(answer["run"]["stdout"], "0\n", "{answer}");
    assert_eq!(
        answer["compile"]["code"], 0,
        "a compile stage even for Python: {answer}"
    );
    // Without checker.py: the package's diff (tokens, yes/no in any case).
    let (_, answer) = post(&codeforces("c++17", &right, None, 1));
    assert_eq!(
        answer["run"]["stdout"], "1\n",
        "0 0 is the only pair: {answer}"
    );
    let (_, answer) = post(&codeforces("c++17", &right, None, 0));
    assert_eq!(
        answer["run"]["stdout"], "0\n",
        "not the jury's pair: {answer}"
    );
    // INPUT_MODE=file: input.txt in, output.txt out.
    let mut file_io = codeforces(
        "cf_python3",
        &contest("pair-sum/submissions/right-file.py"),
        Some(&checker),
        0,
    );
    file_io["files"][4]["content"] = json!("TIME_LIMIT=1\nMEMORY_LIMIT=256\nINPUT_MODE=file");
    let (status, answer) = post(&file_io);
    assert_eq!(
        (status, &answer["run"]["stdout"]),
        (200, &json!("1\n")),
        "{answer}"
    );
    // A program that reads stdin finds nothing there.
    file_io["files"][0]["content"] = json!(contest("pair-sum/submissions/right.py"));
    let (_, answer) = post(&file_io);
    assert_eq!(answer["run"]["stdout"], "0\n", "{answer}");
    // A build that fails: its code, and no run.
    let (status, answer) = post(&codeforces("c++17", "int main() { return 0 }", None, 0));
    assert_eq!(status, 200);
    assert_ne!(answer["compile"]["code"], 0, "{answer}");
    assert!(answer.get("run").is_none(), "{answer}");
    // A checker that crashes says nothing of the program: never "0", a
    // 503 open-r1's client retries.
    let (status, answer) = post(&codeforces(
        "c++17",
        &contest("pair-sum/submissions/wrong.cpp"),
        Some("raise SystemExit(3)\n"),
        0,
    ));
    assert_eq!(status, 503, "{answer}");
    assert_eq!(answer["run"]["status"], "XX", "{answer}");
    assert!(
        answer["run"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("checker exited with code 3")),
        "{answer}"
    );
    // A request without the test's input is refused, naming the files.
    let (status, answer) = post(&json!({"language": "c++17", "files": [
        {"name": "main.cpp", "content": right},
        {"name": "grader_config", "content": "TIME_LIMIT=1"}]}));
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("input.txt"),
        "{answer}"
    );

    // cms_ioi: the grader linked in, the task's checker, the score printed.
    let ioi = |submission: &str, n: usize| {
        let mut files = vec![
            json!({"name": "graders/sum.cpp", "content": contest(&format!("ioi-sum/submissions/{submission}"))}),
            json!({"name": "input.txt", "content": contest(&format!("ioi-sum/tests/{n}.in"))}),
            json!({"name": "correct_output.txt", "content": contest(&format!("ioi-sum/tests/{n}.ans"))}),
        ];
        for name in [
            "graders/sum.h",
            "graders/grader.cpp",
            "graders/grader_config.json",
            "checker/checker.cpp",
        ] {
            files.push(json!({"name": name, "content": contest(&format!("ioi-sum/{name}"))}));
        }
        post(&json!({"language": "cms_ioi", "files": files, "run_timeout": 4000}))
    };
    let (status, answer) = ioi("right.cpp", 3);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["run"]["stdout"], "1\n", "{answer}");
    let (_, answer) = ioi("overflow.cpp", 3);
    assert_eq!(answer["run"]["stdout"], "0\n", "{answer}");
    assert!(
        answer["run"]["stderr"]
            .as_str()
            .is_some_and(|s| s.starts_with("Output isn't correct")),
        "{answer}"
    );
    // open-r1 sends a task's tests as one request each: sent together, the
    // submission and its graders are built once.
    let request = |n: usize| {
        let mut files = vec![
            json!({"name": "graders/sum.cpp", "content": format!("// shared build\n{}", contest("ioi-sum/submissions/right.cpp"))}),
            json!({"name": "input.txt", "content": contest(&format!("ioi-sum/tests/{n}.in"))}),
            json!({"name": "correct_output.txt", "content": contest(&format!("ioi-sum/tests/{n}.ans"))}),
        ];
        for name in [
            "graders/sum.h",
            "graders/grader.cpp",
            "graders/grader_config.json",
        ] {
            files.push(json!({"name": name, "content": contest(&format!("ioi-sum/{name}"))}));
        }
        json!({"language": "cms_ioi", "files": files})
    };
    let observations: Vec<String> = std::thread::scope(|scope| {
        let sent: Vec<_> = (0..4)
            .map(|n| {
                let body = request(n);
                let served = &served;
                scope.spawn(move || {
                    let reply = served.post_json("/api/v2/execute", &body);
                    assert_eq!(reply.status, 200, "{}", reply.json());
                    assert_eq!(reply.json()["run"]["stdout"], "1\n", "{}", reply.json());
                    reply.header("x-progscore-observation").unwrap().to_string()
                })
            })
            .collect();
        sent.into_iter().map(|s| s.join().unwrap()).collect()
    });
    let builds: std::collections::BTreeSet<String> = observations
        .iter()
        .map(|observation| crate::build_of(&served, observation))
        .collect();
    assert_eq!(builds.len(), 1, "{builds:?}");
}

/// `/v1` takes checkers as a batch line does: a component by name with its
/// parameters, judged against each case's answer.
#[test]
fn v1_scores_with_a_checker_component_and_names_a_bad_one() {
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let item = |program: &str, checker: serde_json::Value| {
        json!({"id": "third", "program": program, "expectation": {"conditions": [{"program_behaves": {
            "profile": "python", "checker": checker,
            "cases": [{"invocation": {"stdin": "3\n"}, "expected": {"answer": "0.333333333\n"}}]}}]}})
    };
    let floats = json!({"component": {"name": "floats", "params": {"abs": 1e-6}}});
    let close = served.post_json(
        "/v1/score",
        &item("print(round(1 / int(input()), 7))", floats.clone()),
    );
    let answer = close.json();
    assert_eq!(close.status, 200, "{answer}");
    assert_eq!(answer["value"], true, "{answer}");
    let far = served.post_json("/v1/score", &item("print(0.3)", floats));
    assert_eq!(far.json()["value"], false, "{}", far.json());
    let bad = served.post_json(
        "/v1/score",
        &item(
            "print(0.3)",
            json!({"component": {"name": "floats", "params": {"abs": -1}}}),
        ),
    );
    let answer = bad.json();
    assert_eq!(bad.status, 400, "{answer}");
    assert_eq!(
        answer["error"]["field"], "expectation.conditions[0].program_behaves.checker",
        "{answer}"
    );
}

/// `/v1` takes interactive items as a batch line does: the interactor
/// judges the conversation, and a bad one is named.
#[test]
fn v1_scores_an_interactive_item_and_names_a_bad_interactor() {
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let interactor = "import sys\nn = int(open(sys.argv[1]).read())\nprint(n, flush=True)\n\
        ok = sys.stdin.readline().strip() == str(2 * n)\n\
        print('ok' if ok else 'wrong answer', file=sys.stderr)\nsys.exit(0 if ok else 1)\n";
    let item = |program: &str, protocol: &str| {
        json!({"id": "double", "program": program, "expectation": {"conditions": [{"program_behaves": {
            "profile": "python",
            "interactor": {"profile": "python", "source": interactor, "protocol": protocol},
            "cases": [{"invocation": {"stdin": "21"}, "expected": {"exit_code": 0}}]}}]}})
    };
    let right = served.post_json(
        "/v1/score",
        &item("print(2 * int(input()), flush=True)", "testlib"),
    );
    let answer = right.json();
    assert_eq!(right.status, 200, "{answer}");
    assert_eq!(answer["value"], true, "{answer}");
    let wrong = served.post_json(
        "/v1/score",
        &item("print(int(input()), flush=True)", "testlib"),
    );
    assert_eq!(wrong.json()["value"], false, "{}", wrong.json());
    let bad = served.post_json("/v1/score", &item("print(1)", "cms"));
    let answer = bad.json();
    assert_eq!(bad.status, 400, "{answer}");
    assert_eq!(
        answer["error"]["field"], "expectation.conditions[0].program_behaves.interactor.protocol",
        "{answer}"
    );
}

/// open-r1's `cms_ioi` Communication tasks: the task's manager runs beside
/// the program (through progscore's bridge, an interactor) and its score is
/// the answer; a manager that fails proves nothing.
#[test]
fn cms_ioi_communication_tasks_are_scored_by_their_manager_beside_the_program() {
    let dir = Dir::new();
    dir.edit_config(|text| format!("{text}\n[serve]\nprofiles = [\"cpp\", \"cpp-ioi\"]\n"));
    let served = Served::start(&dir);
    let task = |submission: &str, manager: &str| {
        let mut files = vec![
            json!({"name": "graders/double.cpp", "content": contest(&format!("ioi-double/submissions/{submission}"))}),
            json!({"name": "input.txt", "content": contest("ioi-double/tests/0.in")}),
            json!({"name": "graders/manager.cpp", "content": manager}),
        ];
        for name in [
            "graders/double.h",
            "graders/stub.cpp",
            "graders/grader_config.json",
        ] {
            files.push(json!({"name": name, "content": contest(&format!("ioi-double/{name}"))}));
        }
        let reply = served.post_json(
            "/api/v2/execute",
            &json!({"language": "cms_ioi", "files": files, "run_timeout": 4000}),
        );
        (reply.status, reply.json())
    };
    let manager = contest("ioi-double/graders/manager.cpp");
    let (status, answer) = task("right.cpp", &manager);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["run"]["stdout"], "1\n", "{answer}");
    let (status, answer) = task("partial.cpp", &manager);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["run"]["stdout"], "0.5\n", "{answer}");
    let (_, answer) = task("crash.cpp", &manager);
    assert_eq!(answer["run"]["stdout"], "0\n", "{answer}");
    assert_eq!(answer["run"]["status"], "RE", "{answer}");
    // A manager that crashes decides nothing: a 503 open-r1 retries.
    let broken = manager.replace("int right = 0;", "int right = 0; std::abort();");
    let broken = format!("#include <cstdlib>\n{broken}");
    let (status, answer) = task("right.cpp", &broken);
    assert_eq!(status, 503, "{answer}");
}
