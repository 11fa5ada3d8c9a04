//! Reuse.

use super::*;

#[tokio::test]
async fn evidence_is_reused_per_attempt_across_many_other_attempts() {
    let setup = Setup::square();
    let request = |n: u32| {
        inline(
            SQUARE,
            expect("python", &[(&[&n.to_string()], &(n * n).to_string())]),
        )
    };
    let first = setup.scorer.score(request(3)).await.unwrap();
    let second = setup.scorer.score(request(3)).await.unwrap();
    for n in 1000..1256 {
        assert_eq!(
            setup.scorer.score(request(n)).await.unwrap().value,
            Some(true)
        );
    }
    let again = setup.scorer.score(request(3)).await.unwrap();
    assert_eq!(setup.started(), 1 + 256);
    assert_eq!(second.evidence, EvidenceUse::Stored);
    assert_eq!(again.evidence, EvidenceUse::Stored);
    assert_eq!(first.observation_ids, again.observation_ids);
    assert_eq!(again.value, Some(true));
}

#[tokio::test]
async fn a_changed_expectation_reuses_the_evidence_and_fresh_runs_again() {
    let setup = Setup::square();
    let first = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    let changed = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "8")])))
        .await
        .unwrap();
    assert_eq!(setup.started(), 1);
    assert_eq!(changed.value, Some(false));
    assert_eq!(changed.observation_ids, first.observation_ids);
    let fresh = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])).fresh(true))
        .await
        .unwrap();
    assert_eq!(setup.started(), 2);
    assert_eq!(fresh.evidence, EvidenceUse::Ran);
    assert_ne!(fresh.observation_ids, first.observation_ids);
    assert!(fresh.observation_ids[0].starts_with(&first.observation_ids[0]));
    assert_eq!(setup.store.counts().unwrap().observations, 2);
}

#[tokio::test]
async fn a_content_entry_is_scored_then_scored_again_from_its_stored_id() {
    let setup = Setup::square();
    let sha256 = setup.store.put_program(SQUARE).unwrap();
    let stored = || {
        ScoreRequest::new(
            ProgramInput::Stored {
                sha256: sha256.clone(),
            },
            expect("python", &[(&["3"], "9")]),
        )
    };
    let first = setup.scorer.score(stored()).await.unwrap();
    assert_eq!(first.value, Some(true));
    assert_eq!(first.program_sha256, sha256);
    let second = setup.scorer.score(stored()).await.unwrap();
    assert_eq!(second.evidence, EvidenceUse::Stored);
    // The same content given inline is the same attempt.
    let third = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(third.observation_ids, first.observation_ids);
    assert_eq!(setup.started(), 1);
    let missing = setup
        .scorer
        .score(ScoreRequest::new(
            ProgramInput::Stored {
                sha256: "0".repeat(64),
            },
            expect("python", &[(&["3"], "9")]),
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(missing, ScoringError::ProgramNotStored { .. }),
        "{missing:?}"
    );
}

#[tokio::test]
async fn an_inline_program_is_stored_with_its_evidence() {
    let setup = Setup::square();
    let score = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(
        setup
            .store
            .program(&score.program_sha256)
            .unwrap()
            .as_deref(),
        Some(SQUARE)
    );
}

#[tokio::test]
async fn a_language_name_is_its_profile_one_attempt_and_one_expectation_whichever_name_is_used() {
    let setup = Setup::square().with_languages(&[("py", "python")]);
    let by_language = setup
        .scorer
        .score(inline(SQUARE, expect("py", &[(&["3"], "9")])))
        .await
        .unwrap();
    let by_profile = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(by_language.value, Some(true));
    assert_eq!(by_language.profile, "python");
    assert_eq!(by_profile.evidence, EvidenceUse::Stored);
    assert_eq!(by_profile.observation_ids, by_language.observation_ids);
    assert_eq!(
        by_profile.expectation_sha256,
        by_language.expectation_sha256
    );
    assert_eq!(setup.started(), 1);
    // An unknown name lists both kinds of names.
    match setup
        .scorer
        .score(inline(SQUARE, expect("ruby", &[(&["3"], "9")])))
        .await
    {
        Err(ScoringError::Expectation(ExpectationError::UnknownProfile { known, .. })) => {
            assert_eq!(known, "python, other, py")
        }
        other => panic!("expected an unknown profile, got {other:?}"),
    }
}
