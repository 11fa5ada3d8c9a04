//! Doc flow.

use super::*;

#[tokio::test]
async fn doc_flow_square_is_true_then_replay_with_8_is_false_without_running() {
    let setup = Setup::square();
    let score = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])).item_id("square-3"))
        .await
        .unwrap();
    assert_eq!(score.status, ScoreStatus::Complete);
    assert_eq!(score.value, Some(true));
    assert_eq!(
        score.rationale,
        "All 1 case(s) produced the expected result under python."
    );
    assert_eq!(score.evidence, EvidenceUse::Ran);
    assert_eq!(score.observation_ids.len(), 1);
    assert_eq!(score.cases[0].matched, Some(true));
    assert_eq!(score.cases[0].outcome, "exited");
    assert_eq!(setup.started(), 1);

    let replayed = setup
        .scorer
        .replayer()
        .replay(ReplayRequest {
            item_id: Some("square-3".into()),
            observation: ObservationRef::Id(score.observation_ids[0].clone()),
            expectation: expect("python", &[(&["3"], "8")]),
        })
        .unwrap();
    assert_eq!(replayed.value, Some(false));
    assert_eq!(
        replayed.rationale,
        "The program did not produce the expected result under python: case 0 output did not match."
    );
    assert_eq!(replayed.observation_ids, score.observation_ids);
    assert_eq!(replayed.evidence, EvidenceUse::Replayed);
    assert_eq!(setup.started(), 1, "replay ran something");

    // Both scores are recorded with their expectation and its fingerprint.
    let stored = setup.store.score(replayed.score_id).unwrap().unwrap();
    assert_eq!(
        stored.record.expectation_sha256,
        expect("python", &[(&["3"], "8")]).fingerprint().unwrap()
    );
    assert_eq!(
        stored.record.expectation,
        serde_json::to_value(expect("python", &[(&["3"], "8")])).unwrap()
    );
    let counts = setup.store.counts().unwrap();
    assert_eq!(
        (counts.observations, counts.scores, counts.links),
        (1, 2, 2)
    );
}
