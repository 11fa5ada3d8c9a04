//! Rescore.

use super::*;

#[tokio::test]
async fn rescore_reports_changed_verdicts_and_never_runs() {
    let setup = Setup::square();
    let score = |expected: &'static str| {
        inline(SQUARE, expect("python", &[(&["3"], expected)])).item_id("square-3")
    };
    setup.scorer.score(score("9")).await.unwrap();
    let rescore = |item: &str, program: &[u8], expected: &str| RescoreRequest {
        item_id: Some(item.into()),
        program: ProgramInput::Inline(program.to_vec()),
        expectation: expect("python", &[(&["3"], expected)]),
    };
    let same = setup
        .scorer
        .replayer()
        .rescore(rescore("square-3", SQUARE, "9"))
        .unwrap();
    assert!(!same.changed);
    assert_eq!(same.previous.as_ref().unwrap().record.value, Some(true));
    let changed = setup
        .scorer
        .replayer()
        .rescore(rescore("square-3", SQUARE, "8"))
        .unwrap();
    assert!(changed.changed);
    assert_eq!(changed.score.value, Some(false));
    let unseen = setup
        .scorer
        .replayer()
        .rescore(rescore("cube-3", b"print(27)", "27"))
        .unwrap();
    assert_eq!(unseen.score.status, ScoreStatus::Undetermined);
    assert_eq!(unseen.score.reason.as_deref(), Some("no stored evidence"));
    assert_eq!(
        unseen.score.rationale,
        "The result under python is undetermined: no stored evidence."
    );
    assert!(unseen.score.observation_ids.is_empty());
    assert!(unseen.previous.is_none() && !unseen.changed);
    let batch = setup
        .scorer
        .replayer()
        .rescore_batch(vec![
            rescore("square-3", SQUARE, "9"),
            RescoreRequest {
                item_id: Some("bad".into()),
                program: ProgramInput::Inline(SQUARE.to_vec()),
                expectation: expect("ruby", &[(&["3"], "9")]),
            },
        ])
        .unwrap();
    let first = batch[0].as_ref().unwrap();
    assert!(first.changed, "8 (false) before, 9 (true) now");
    assert_eq!(first.score.value, Some(true));
    assert!(matches!(batch[1], Err(ScoringError::Expectation(_))));
    assert_eq!(setup.started(), 1);
}
