//! Checkers: a checker program judges each output against its answer in a
//! run of its own, kept as evidence (a rescore runs nothing, another answer
//! runs only the checker); a checker's fault is undetermined, never false;
//! a checker component sees the case's input.

use super::*;

/// The checker program, as the scripted sandbox recognises it.
const CHECKER: &[u8] = b"# a testlib-style checker: output == answer\n";

/// A file the run was given, as text.
fn file(request: &FakeRequest, path: &str) -> String {
    request
        .files
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, bytes)| String::from_utf8_lossy(bytes).trim().to_string())
        .unwrap_or_else(|| panic!("the checker was not given {path}"))
}

/// The square program as usual; the checker by testlib's conventions:
/// OK when the output is the answer, points when the answer is `half:N`
/// and the output N, FAIL when the answer is `broken`, a crash when it is
/// `crash`, wrong answer otherwise.
fn responder(request: &FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> {
    if request.program != CHECKER {
        return square_responder(request);
    }
    Ok(request
        .invocations
        .iter()
        .map(|invocation| {
            let [_input, output, answer] = &invocation.args[..] else {
                panic!("a testlib checker gets three files: {:?}", invocation.args);
            };
            let (output, answer) = (file(request, output), file(request, answer));
            match answer.as_str() {
                "broken" => exited_event(3, b"", b"the answer file is broken"),
                "crash" => exited_event(139, b"", b""),
                _ if answer == output => exited_event(0, b"", b"ok the square"),
                _ if answer == format!("half:{output}") => {
                    exited_event(7, b"", b"points 0.5 half of it")
                }
                _ => exited_event(
                    1,
                    b"",
                    format!("wrong answer {output} is not {answer}").as_bytes(),
                ),
            }
        })
        .collect())
}

/// Runs of the program and of the checker, counted by the responder.
#[derive(Default)]
struct Runs {
    program: std::sync::atomic::AtomicUsize,
    checker: std::sync::atomic::AtomicUsize,
}

fn setup() -> (Setup, Arc<Runs>) {
    let runs = Arc::new(Runs::default());
    let counted = runs.clone();
    let client = ScriptedClient::new(profiles()).with_responder(move |request| {
        let counter = if request.program == CHECKER {
            &counted.checker
        } else {
            &counted.program
        };
        counter.fetch_add(1, Ordering::SeqCst);
        responder(request)
    });
    (Setup::new(client), runs)
}

/// (program runs, checker runs).
fn runs(runs: &Runs) -> (usize, usize) {
    (
        runs.program.load(Ordering::SeqCst),
        runs.checker.load(Ordering::SeqCst),
    )
}

/// The square program on 1..=n.len(), judged by the checker against these
/// answers.
fn judged(answers: &[&str], policy: Option<serde_json::Value>) -> ScoringExpectation {
    let cases = answers
        .iter()
        .enumerate()
        .map(|(index, answer)| ProgramCase {
            invocation: progscore_sandbox::Invocation::with_args([(index + 1).to_string()]),
            expected: ProgramResult {
                stdout: None,
                stderr: None,
                exit_code: 0,
                behaviour: None,
                answer: Some(ByteString(answer.as_bytes().to_vec())),
            },
        })
        .collect();
    let mut expectation = ScoringExpectation::program_behaves("python", cases);
    let Condition::ProgramBehaves(behaves) = &mut expectation.conditions[0];
    behaves.checker = Some(
        serde_json::from_value(serde_json::json!({"program": {
            "profile": "other",
            "source": String::from_utf8_lossy(CHECKER),
        }}))
        .expect("a checker"),
    );
    behaves.score = policy.map(|p| serde_json::from_value(p).expect("a policy"));
    expectation
}

#[tokio::test]
async fn a_checker_program_judges_every_output_in_one_run_kept_as_evidence() {
    let (setup, counts) = setup();
    let score = setup
        .scorer
        .score(inline(SQUARE, judged(&["1", "4", "9"], None)).item_id("square"))
        .await
        .unwrap();
    assert_eq!(score.value, Some(true), "{}", score.rationale);
    assert_eq!(runs(&counts), (1, 1));
    assert_eq!(score.cases[1].checker.as_deref(), Some("ok the square"));
    // The score rests on the program's run and the checker's.
    assert_eq!(
        score.observation_ids.len(),
        2,
        "{:?}",
        score.observation_ids
    );
    let checker = setup
        .store
        .observation(&score.observation_ids[1])
        .unwrap()
        .expect("the checker's run is stored");
    assert_eq!(checker.program_sha256, sha256_hex(CHECKER));
    assert_eq!(checker.invocations.len(), 3, "one run judges every case");
    assert!(setup.store.program(&sha256_hex(CHECKER)).unwrap().is_some());

    // A wrong answer for case 2: the program is not run again, the checker is.
    let wrong = setup
        .scorer
        .score(inline(SQUARE, judged(&["1", "5", "9"], None)).item_id("square"))
        .await
        .unwrap();
    assert_eq!(wrong.value, Some(false));
    assert!(
        wrong
            .rationale
            .contains("case 1 output was judged wrong by the checker"),
        "{}",
        wrong.rationale
    );
    assert_eq!(runs(&counts), (1, 2));
    assert_eq!(
        wrong.cases[1].detail.as_deref(),
        Some("case 1 output was judged wrong by the checker: wrong answer 4 is not 5")
    );

    // Scored again: both runs are reused.
    setup
        .scorer
        .score(inline(SQUARE, judged(&["1", "5", "9"], None)))
        .await
        .unwrap();
    assert_eq!(runs(&counts), (1, 2));
}

#[tokio::test]
async fn a_rescore_runs_nothing_and_a_checker_run_never_made_is_no_evidence() {
    let (setup, counts) = setup();
    setup
        .scorer
        .score(inline(SQUARE, judged(&["1", "4"], None)).item_id("square"))
        .await
        .unwrap();
    let rescore = |answers: &[&str]| {
        setup
            .scorer
            .replayer()
            .rescore(RescoreRequest {
                item_id: Some("square".into()),
                program: ProgramInput::Inline(SQUARE.to_vec()),
                expectation: judged(answers, None),
            })
            .unwrap()
    };
    let same = rescore(&["1", "4"]);
    assert_eq!(same.score.value, Some(true), "{}", same.score.rationale);
    assert_eq!(same.score.observation_ids.len(), 2);
    let other = rescore(&["1", "7"]);
    assert_eq!(other.score.value, None);
    assert_eq!(other.score.reason_kind, Some(ReasonKind::NoEvidence));
    assert!(
        other
            .score
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("only the checker runs")),
        "{:?}",
        other.score.reason
    );
    assert_eq!(runs(&counts), (1, 1), "rescores run nothing");
}

#[tokio::test]
async fn a_checker_that_says_fail_crashes_or_cannot_run_leaves_the_case_undetermined() {
    for (answer, reason) in [("broken", "says FAIL"), ("crash", "exited with code 139")] {
        let (setup, _) = setup();
        let score = setup
            .scorer
            .score(inline(SQUARE, judged(&["1", answer], None)))
            .await
            .unwrap();
        assert_eq!(score.value, None, "{answer}: {}", score.rationale);
        assert_eq!(score.reason_kind, Some(ReasonKind::CheckerUndecided));
        assert!(
            score.reason.as_deref().is_some_and(|r| r.contains(reason)),
            "{answer}: {:?}",
            score.reason
        );
        assert_eq!(score.cases[0].matched, Some(true));
        assert_eq!(score.cases[1].matched, None);
    }
    // The checker's sandbox fails: undetermined, and the program's evidence
    // is kept (the next score runs only the checker).
    let failing = Setup::new(ScriptedClient::new(profiles()).with_responder(|request| {
        if request.program == CHECKER {
            Err(SandboxError::EngineUnavailable {
                message: "the engine went away".into(),
            })
        } else {
            square_responder(request)
        }
    }));
    let score = failing
        .scorer
        .score(inline(SQUARE, judged(&["1", "4"], None)))
        .await
        .unwrap();
    assert_eq!(score.value, None, "{}", score.rationale);
    assert_eq!(score.reason_kind, Some(ReasonKind::CheckerUndecided));
    assert!(
        failing
            .store
            .observation(&score.observation_ids[0])
            .unwrap()
            .is_some(),
        "the program's run is kept"
    );
}

#[tokio::test]
async fn points_from_the_checker_are_a_partial_case_score() {
    let (setup, _) = setup();
    let fraction = serde_json::json!({"policy": "fraction"});
    let score = setup
        .scorer
        .score(inline(
            SQUARE,
            judged(&["1", "half:4", "0"], Some(fraction)),
        ))
        .await
        .unwrap();
    assert_eq!(score.status, ScoreStatus::Complete, "{}", score.rationale);
    assert_eq!(score.score, Some(0.5), "(1 + 0.5 + 0) / 3");
    assert_eq!(score.cases[1].score, Some(0.5));
    assert_eq!(score.cases[1].matched, Some(false));
    assert_eq!(
        score.cases[1].checker.as_deref(),
        Some("points 0.5 half of it")
    );
}

#[tokio::test]
async fn answers_and_checkers_are_refused_where_they_cannot_judge() {
    let (setup, _) = setup();
    let field_of = |expectation: ScoringExpectation| match setup.scorer.validate(&expectation) {
        Err(error) => (error.field_path(), error.to_string()),
        Ok(()) => panic!("accepted"),
    };
    let mut missing = judged(&["1", "4"], None);
    let Condition::ProgramBehaves(behaves) = &mut missing.conditions[0];
    behaves.cases[1].expected.answer = None;
    let (field, message) = field_of(missing);
    assert_eq!(
        field,
        "conditions[0].program_behaves.cases[1].expected.answer"
    );
    assert!(message.contains("missing"), "{message}");

    let mut unchecked = judged(&["1"], None);
    let Condition::ProgramBehaves(behaves) = &mut unchecked.conditions[0];
    behaves.checker = None;
    let (field, message) = field_of(unchecked);
    assert_eq!(
        field,
        "conditions[0].program_behaves.cases[0].expected.answer"
    );
    assert!(message.contains("no `checker`"), "{message}");

    let mut unknown = judged(&["1"], None);
    let Condition::ProgramBehaves(behaves) = &mut unknown.conditions[0];
    behaves.checker = Some(
        serde_json::from_value(
            serde_json::json!({"program": {"profile": "pascal", "source": "x"}}),
        )
        .unwrap(),
    );
    let (field, message) = field_of(unknown);
    assert_eq!(
        field,
        "conditions[0].program_behaves.checker.program.profile"
    );
    assert!(message.contains("unknown profile `pascal`"), "{message}");

    let mut component = judged(&["1"], None);
    let Condition::ProgramBehaves(behaves) = &mut component.conditions[0];
    behaves.checker = Some(serde_json::from_value(serde_json::json!("nonesuch")).unwrap());
    let (field, message) = field_of(component);
    assert_eq!(field, "conditions[0].program_behaves.checker");
    assert!(message.contains("unknown checker `nonesuch`"), "{message}");
    assert_eq!(setup.started(), 0, "nothing ran");
}
