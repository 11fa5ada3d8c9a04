//! Store races.

use super::*;

#[tokio::test]
async fn a_conflicting_observation_stored_meanwhile_stands_and_is_used() {
    // While this process runs the attempt, "another process" stores its own,
    // different run of the same attempt. Ours is refused; theirs is used.
    let store = Arc::new(EvidenceStore::open_in_memory().unwrap());
    let attempt = Attempt::new(
        &profile("python", "64KiB"),
        &sha256_hex(SQUARE),
        vec![progscore_sandbox::Invocation::with_args(["3"])],
    )
    .unwrap();
    let theirs = Observation {
        id: attempt.observation_id(),
        attempt_key: attempt.key.clone(),
        source: progscore_scoring::SOURCE_IDENTITY.into(),
        profile: "python".into(),
        profile_fingerprint: attempt.profile_fingerprint.clone(),
        program_sha256: attempt.program_sha256.clone(),
        invocations: attempt.invocations.clone(),
        run: progscore_sandbox::ProgramRun {
            interaction: None,
            profile: "python".into(),
            program_sha256: attempt.program_sha256.clone(),
            events: vec![exited_event(0, b"8\n", b"")],
            sandbox_warnings: Vec::new(),
            compile: None,
        },
        created_at: "2026-01-01T00:00:00.000Z".into(),
    };
    let other_process = store.clone();
    let planted = theirs.clone();
    let client = ScriptedClient::new(profiles()).with_responder(move |request| {
        let record = progscore_evidence::ScoreRecord {
            item_id: None,
            origin: progscore_evidence::ScoreOrigin::Execute,
            program_sha256: planted.program_sha256.clone(),
            profile: "python".into(),
            expectation: serde_json::json!({}),
            expectation_sha256: "0".repeat(64),
            status: ScoreStatus::Complete,
            value: Some(false),
            rationale: "theirs".into(),
            reason: None,
            cases: serde_json::json!([]),
            observation_ids: vec![planted.id.clone()],
            score: None,
            score_groups: None,
        };
        other_process
            .record_observation_with_score(None, &planted, &record)
            .unwrap();
        square_responder(request)
    });
    let setup = Setup::with_store(client, store);
    let score = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(score.evidence, EvidenceUse::Stored);
    assert_eq!(score.observation_ids, vec![theirs.id.clone()]);
    assert_eq!(
        score.value,
        Some(false),
        "scored against the stored run, which printed 8"
    );
    assert_eq!(
        setup.store.observation(&theirs.id).unwrap().unwrap(),
        theirs
    );
    let counts = setup.store.counts().unwrap();
    assert_eq!(
        (counts.observations, counts.scores, counts.links),
        (1, 2, 2)
    );
}

const CHILD_DB: &str = "PROGSCORE_TEST_CHILD_DB";

/// Not a test of its own: the body of each child process of
/// `two_processes_scoring_one_attempt_share_one_observation_row`.
#[tokio::test]
#[ignore = "the body of a child process, run by its parent test"]
async fn child_process_scores_into_a_shared_file() {
    let path = std::env::var(CHILD_DB).expect("run by its parent test, which names the store");
    let store = Arc::new(EvidenceStore::open(&path).unwrap());
    let pid = std::process::id();
    // Each process's run differs (its pid on stderr), so the second writer
    // meets a conflicting observation and must use the stored one.
    let client = ScriptedClient::new(profiles())
        .with_responder(move |_| Ok(vec![exited_event(0, b"9\n", format!("{pid}").as_bytes())]))
        .with_delay(Duration::from_millis(300));
    let setup = Setup::with_store(client, store);
    let score = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])).item_id(format!("child-{pid}")))
        .await
        .unwrap();
    assert_eq!(score.value, Some(true));
}

#[test]
fn two_processes_scoring_one_attempt_share_one_observation_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    // Created (and migrated) once, so the children race only on the scores.
    drop(EvidenceStore::open(&path).unwrap());
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| {
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "store_races::child_process_scores_into_a_shared_file",
                    "--ignored",
                    "--test-threads=1",
                ])
                .env(CHILD_DB, &path)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a child process failed");
    }
    let store = EvidenceStore::open(&path).unwrap();
    let counts = store.counts().unwrap();
    assert_eq!(
        (counts.observations, counts.scores, counts.links),
        (1, 2, 2)
    );
    let scores = store.list_scores(&ScoreFilter::default()).unwrap();
    assert_eq!(
        scores[0].record.observation_ids,
        scores[1].record.observation_ids
    );
    assert!(scores.iter().all(|s| s.record.value == Some(true)));
}
