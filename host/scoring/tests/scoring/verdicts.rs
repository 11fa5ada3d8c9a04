//! Verdict rules.

use super::*;

#[tokio::test]
async fn every_verdict_rule() {
    let ok = || exited_event(0, b"9\n", b"");
    let py = |cases: usize| expect("python", &vec![(&["3"][..], "9"); cases]);
    struct Rule {
        events: Vec<InvocationEvent>,
        value: Option<bool>,
        rationale: &'static str,
    }
    let rules = vec![
        Rule {
            events: vec![ok(), ok()],
            value: Some(true),
            rationale: "All 2 case(s) produced the expected result under python.",
        },
        Rule {
            events: vec![ok(), exited_event(0, b"10\n", b"")],
            value: Some(false),
            rationale: "The program did not produce the expected result under python: case 1 output did not match.",
        },
        Rule {
            events: vec![exited_event(1, b"9\n", b"boom")],
            value: Some(false),
            rationale: "The program did not produce the expected result under python: case 0 exited with code 1, expected 0.",
        },
        Rule {
            events: vec![event(Outcome::timed_out(), b"9\n", b"")],
            value: Some(false),
            rationale: "The program did not produce the expected result under python: case 0 timed out.",
        },
        Rule {
            events: vec![event(Outcome::MemoryLimit, b"", b"")],
            value: Some(false),
            rationale: "The program did not produce the expected result under python: case 0 exceeded its memory limit.",
        },
        Rule {
            events: vec![
                event(
                    Outcome::SandboxError {
                        message: "container create failed".into(),
                    },
                    b"",
                    b"",
                ),
                InvocationEvent::not_run("an earlier invocation hit a sandbox error"),
            ],
            value: None,
            rationale: "The result under python is undetermined: case 0 hit a sandbox error: container create failed.",
        },
        Rule {
            events: vec![
                ok(),
                InvocationEvent::not_run("an earlier invocation hit a sandbox error"),
            ],
            value: None,
            rationale: "The result under python is undetermined: case 1 was not run: an earlier invocation hit a sandbox error.",
        },
        // A proven failure wins over an undetermined case, whatever the order.
        Rule {
            events: vec![
                event(
                    Outcome::SandboxError {
                        message: "engine hiccup".into(),
                    },
                    b"",
                    b"",
                ),
                event(Outcome::timed_out(), b"", b""),
            ],
            value: Some(false),
            rationale: "The program did not produce the expected result under python: case 1 timed out.",
        },
    ];
    for rule in rules {
        let cases = rule.events.len();
        let setup = scripted(rule.events.clone());
        let score = setup.scorer.score(inline(SQUARE, py(cases))).await.unwrap();
        assert_eq!(score.value, rule.value, "{:?}", rule.events);
        assert_eq!(score.rationale, rule.rationale);
        assert_eq!(
            score.status,
            if rule.value.is_some() {
                ScoreStatus::Complete
            } else {
                ScoreStatus::Undetermined
            }
        );
        assert_eq!(score.reason.is_some(), rule.value.is_none());
    }
}

#[tokio::test]
async fn a_comparator_that_cannot_decide_leaves_the_case_undetermined() {
    let setup = scripted(vec![exited_event(0, b"9\n", b"")]);
    let mut expectation = expect("python", &[(&["3"], "9")]);
    let Condition::ProgramBehaves(behaves) = &mut expectation.conditions[0];
    behaves.cases[0].expected.stderr = Some(TextCondition::new("undecided", serde_json::json!({})));
    let score = setup
        .scorer
        .score(inline(SQUARE, expectation))
        .await
        .unwrap();
    assert_eq!(score.status, ScoreStatus::Undetermined);
    assert_eq!(
        score.rationale,
        "The result under python is undetermined: case 0 error output could not be checked: it never decides."
    );
    assert_eq!(score.cases[0].matched, None);
}

#[tokio::test]
async fn stderr_and_exit_code_conditions_are_checked() {
    let setup = scripted(vec![exited_event(3, b"", b"usage: square N\n")]);
    let expectation = ScoringExpectation::program_behaves(
        "python",
        vec![ProgramCase {
            invocation: progscore_sandbox::Invocation::default(),
            expected: ProgramResult {
                stdout: None,
                stderr: Some(TextCondition::equals("usage: square N")),
                exit_code: 3,
                behaviour: None,
                answer: None,
            },
        }],
    );
    let score = setup
        .scorer
        .score(inline(SQUARE, expectation.clone()))
        .await
        .unwrap();
    assert_eq!(score.value, Some(true));
    let setup = scripted(vec![exited_event(3, b"", b"oops\n")]);
    let score = setup
        .scorer
        .score(inline(SQUARE, expectation))
        .await
        .unwrap();
    assert_eq!(
        score.rationale,
        "The program did not produce the expected result under python: case 0 error output did not match."
    );
}

#[tokio::test]
async fn truncated_output_is_undetermined_unless_the_prefix_already_differs() {
    let mut nine = b"9".to_vec();
    nine.extend(std::iter::repeat_n(b' ', 127));
    let setup = scripted(vec![InvocationEvent {
        stdout: truncated(&nine, 1 + 1024 * 1024),
        ..exited_event(0, b"", b"")
    }]);
    let score = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(
        score.status,
        ScoreStatus::Undetermined,
        "{}",
        score.rationale
    );
    assert_eq!(score.value, None);
    assert!(
        score
            .rationale
            .contains("case 0 output could not be checked"),
        "{}",
        score.rationale
    );

    let mut eight = b"8".to_vec();
    eight.extend(std::iter::repeat_n(b'x', 127));
    let setup = scripted(vec![InvocationEvent {
        stdout: truncated(&eight, 1 + 1024 * 1024),
        ..exited_event(0, b"", b"")
    }]);
    let score = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(score.value, Some(false));
}
