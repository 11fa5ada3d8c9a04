//! Score policies: an item's score from its cases', stored with the
//! verdict, and another policy given by a rescore that runs nothing.

use super::*;
use progscore_scoring::ScorePolicy;

/// The square program on 1..=4, expecting 1, 4, 0 (wrong) and 16.
fn four_cases(policy: Option<serde_json::Value>) -> ScoringExpectation {
    let mut expectation = expect(
        "python",
        &[(&["1"], "1"), (&["2"], "4"), (&["3"], "0"), (&["4"], "16")],
    );
    let Condition::ProgramBehaves(behaves) = &mut expectation.conditions[0];
    behaves.score = policy.map(|policy| serde_json::from_value(policy).expect("a policy"));
    expectation
}

#[tokio::test]
async fn a_fraction_scores_the_cases_passed_and_is_stored_with_the_verdict() {
    let setup = Setup::square();
    let fraction = serde_json::json!({"policy": "fraction"});
    let score = setup
        .scorer
        .score(inline(SQUARE, four_cases(Some(fraction))).item_id("square"))
        .await
        .unwrap();
    assert_eq!(score.status, ScoreStatus::Complete);
    assert_eq!(score.score, Some(0.75));
    assert_eq!(score.value, Some(false), "not full marks");
    assert!(
        score.rationale.contains("scored 0.7500") && score.rationale.contains("3 of 4"),
        "{}",
        score.rationale
    );
    let stored = setup
        .store
        .latest_score_for_item("square")
        .unwrap()
        .expect("stored");
    assert_eq!(stored.record.score, Some(0.75));
    // Without a policy, the boolean verdict as a number.
    let plain = setup
        .scorer
        .score(inline(SQUARE, four_cases(None)))
        .await
        .unwrap();
    assert_eq!((plain.value, plain.score), (Some(false), Some(0.0)));
}

#[tokio::test]
async fn another_policy_rescores_the_same_evidence_without_running() {
    let setup = Setup::square();
    setup
        .scorer
        .score(inline(SQUARE, four_cases(None)).item_id("square"))
        .await
        .unwrap();
    assert_eq!(setup.started(), 1);
    let subtasks = serde_json::json!({"policy": "groups", "groups": [
        {"name": "small", "cases": [0, 1], "points": 30},
        {"name": "large", "cases": [2, 3], "points": 70},
    ]});
    let rescored = setup
        .scorer
        .replayer()
        .rescore(RescoreRequest {
            item_id: Some("square".into()),
            program: ProgramInput::Inline(SQUARE.to_vec()),
            expectation: four_cases(Some(subtasks)),
        })
        .unwrap();
    assert_eq!(setup.started(), 1, "a rescore runs nothing");
    assert!(rescored.changed, "0 before, 0.3 now");
    assert_eq!(rescored.score.score, Some(0.3));
    let earned: Vec<(String, Option<f64>)> = rescored
        .score
        .groups
        .iter()
        .map(|group| (group.name.clone(), group.earned))
        .collect();
    assert_eq!(
        earned,
        vec![("small".into(), Some(30.0)), ("large".into(), Some(0.0))]
    );
    let stored = setup
        .store
        .latest_score_for_item("square")
        .unwrap()
        .expect("stored");
    assert_eq!(stored.record.score, Some(0.3));
    assert_eq!(
        stored.record.score_groups.as_ref().unwrap()[1]["earned"],
        serde_json::json!(0.0)
    );
}

#[tokio::test]
async fn an_undetermined_case_leaves_a_fraction_undetermined_but_not_a_failed_subtask() {
    // Case 1 hits a sandbox fault; case 2 is proven wrong.
    let events = vec![
        exited_event(0, b"1\n", b""),
        event(
            Outcome::SandboxError {
                message: "the engine went away".into(),
            },
            b"",
            b"",
        ),
        exited_event(0, b"9\n", b""),
        exited_event(0, b"16\n", b""),
    ];
    let fraction = scripted(events.clone());
    let score = fraction
        .scorer
        .score(inline(
            SQUARE,
            four_cases(Some(serde_json::json!({"policy": "fraction"}))),
        ))
        .await
        .unwrap();
    assert_eq!(score.status, ScoreStatus::Undetermined);
    assert_eq!((score.value, score.score), (None, None));
    assert_eq!(score.reason_kind, Some(ReasonKind::SandboxError));
    // Cases 1 and 2 in one subtask scored by its minimum: case 2's proven
    // 0 decides it whatever case 1 would have given.
    let groups = scripted(events);
    let score = groups
        .scorer
        .score(inline(
            SQUARE,
            four_cases(Some(serde_json::json!({"policy": "groups", "groups": [
                {"cases": [0], "points": 1},
                {"cases": [1, 2], "points": 2},
                {"cases": [3], "points": 1},
            ]}))),
        ))
        .await
        .unwrap();
    assert_eq!(score.status, ScoreStatus::Complete);
    assert_eq!(score.score, Some(0.5));
    assert_eq!(score.value, Some(false));
}

#[tokio::test]
async fn a_policy_that_does_not_fit_the_cases_is_refused_before_anything_runs() {
    let setup = Setup::square();
    let error = setup
        .scorer
        .score(inline(
            SQUARE,
            four_cases(Some(
                serde_json::json!({"policy": "weighted", "weights": [1, 2, 3]}),
            )),
        ))
        .await
        .unwrap_err();
    let ScoringError::Expectation(error) = error else {
        panic!("{error}")
    };
    assert_eq!(
        error.field_path(),
        "conditions[0].program_behaves.score.weights"
    );
    assert!(
        error.to_string().contains("3 weight(s) for 4 case(s)"),
        "{error}"
    );
    assert_eq!(setup.started(), 0);
    // The default policy is written nowhere: old expectations keep their
    // fingerprints.
    let all_pass: ScorePolicy =
        serde_json::from_value(serde_json::json!({"policy": "all_pass"})).unwrap();
    assert!(all_pass.is_all_pass());
    let text = serde_json::to_string(&four_cases(None)).unwrap();
    assert!(!text.contains("score"), "{text}");
}
