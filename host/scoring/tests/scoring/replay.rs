//! Replay.

use super::*;

async fn scored_square() -> (Setup, String) {
    let setup = Setup::square();
    let score = setup
        .scorer
        .score(inline(
            SQUARE,
            expect("python", &[(&["3"], "9"), (&["4"], "16")]),
        ))
        .await
        .unwrap();
    (setup, score.observation_ids[0].clone())
}

fn replay(observation: ObservationRef, expectation: ScoringExpectation) -> ReplayRequest {
    ReplayRequest {
        item_id: None,
        observation,
        expectation,
    }
}

#[tokio::test]
async fn replay_refusals_write_nothing() {
    let (setup, id) = scored_square().await;
    let before = setup.store.counts().unwrap();
    let stored = setup.store.observation(&id).unwrap().unwrap();
    let refusal = |request: ReplayRequest| match setup.scorer.replayer().replay(request) {
        Err(ScoringError::Replay(refusal)) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    };

    let r = refusal(replay(
        ObservationRef::Id("obs-nope".into()),
        expect("python", &[(&["3"], "9"), (&["4"], "16")]),
    ));
    assert!(matches!(r, ReplayRefusal::NotStored { .. }));

    let r = refusal(replay(
        ObservationRef::Id(id.clone()),
        expect("other", &[(&["3"], "9"), (&["4"], "16")]),
    ));
    assert!(
        matches!(&r, ReplayRefusal::OtherProfile { stored, expected, .. } if stored == "python" && expected == "other")
    );

    let r = refusal(replay(
        ObservationRef::Id(id.clone()),
        expect("python", &[(&["3"], "9"), (&["5"], "25")]),
    ));
    assert!(matches!(r, ReplayRefusal::OtherInvocations { .. }), "{r:?}");
    let r = refusal(replay(
        ObservationRef::Id(id.clone()),
        expect("python", &[(&["3"], "9")]),
    ));
    assert!(matches!(r, ReplayRefusal::OtherInvocations { .. }), "{r:?}");
    let mut with_stdin = expect("python", &[(&["3"], "9"), (&["4"], "16")]);
    let Condition::ProgramBehaves(behaves) = &mut with_stdin.conditions[0];
    behaves.cases[1].invocation = behaves.cases[1].invocation.clone().stdin("x");
    let r = refusal(replay(ObservationRef::Id(id.clone()), with_stdin));
    assert!(matches!(r, ReplayRefusal::OtherInvocations { .. }), "{r:?}");

    // A copy edited to claim another result.
    let mut tampered = stored.clone();
    tampered.run.events[0].stdout = CapturedStream::complete(b"8\n".to_vec());
    let r = refusal(replay(
        ObservationRef::Given(Box::new(tampered)),
        expect("python", &[(&["3"], "9"), (&["4"], "16")]),
    ));
    assert!(matches!(r, ReplayRefusal::Differs { .. }), "{r:?}");

    assert_eq!(setup.store.counts().unwrap(), before);
    // The identical copy is accepted.
    let score = setup
        .scorer
        .replayer()
        .replay(replay(
            ObservationRef::Given(Box::new(stored)),
            expect("python", &[(&["3"], "9"), (&["4"], "16")]),
        ))
        .unwrap();
    assert_eq!(score.value, Some(true));
    assert_eq!(setup.started(), 1);
}

#[tokio::test]
async fn a_row_tampered_in_the_database_is_refused_on_replay_and_on_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    let store = Arc::new(EvidenceStore::open(&path).unwrap());
    let setup = Setup::with_store(
        ScriptedClient::new(profiles()).with_responder(square_responder),
        store,
    );
    let expectation = expect("python", &[(&["3"], "9")]);
    let score = setup
        .scorer
        .score(inline(SQUARE, expectation.clone()))
        .await
        .unwrap();
    let conn = rusqlite_connection(&path);
    conn.execute_batch(
        "DROP TRIGGER observations_no_update;
         UPDATE observations SET run = replace(run, '\"exit_code\":0', '\"exit_code\":1');",
    )
    .unwrap();
    let before = setup.store.counts().unwrap();
    let refused = setup
        .scorer
        .replayer()
        .replay(replay(
            ObservationRef::Id(score.observation_ids[0].clone()),
            expectation.clone(),
        ))
        .unwrap_err();
    assert!(
        matches!(
            refused,
            ScoringError::Replay(ReplayRefusal::Tampered { .. })
        ),
        "{refused:?}"
    );
    let reused = setup
        .scorer
        .score(inline(SQUARE, expectation))
        .await
        .unwrap_err();
    assert!(
        matches!(reused, ScoringError::Store(StoreError::Tampered { .. })),
        "{reused:?}"
    );
    assert_eq!(setup.store.counts().unwrap(), before);
    assert_eq!(setup.started(), 1);
}

fn rusqlite_connection(path: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

#[tokio::test]
async fn replay_batch_writes_all_scores_and_reports_refusals_in_place() {
    let (setup, id) = scored_square().await;
    let requests = vec![
        replay(
            ObservationRef::Id(id.clone()),
            expect("python", &[(&["3"], "9"), (&["4"], "16")]),
        ),
        replay(
            ObservationRef::Id("obs-nope".into()),
            expect("python", &[(&["3"], "9")]),
        ),
        replay(
            ObservationRef::Id(id.clone()),
            expect("python", &[(&["3"], "9"), (&["4"], "15")]),
        ),
    ];
    let results = setup.scorer.replayer().replay_batch(requests).unwrap();
    assert_eq!(results[0].as_ref().unwrap().value, Some(true));
    assert!(matches!(
        results[1],
        Err(ScoringError::Replay(ReplayRefusal::NotStored { .. }))
    ));
    assert_eq!(results[2].as_ref().unwrap().value, Some(false));
    assert_eq!(setup.store.counts().unwrap().scores, 3);
}
