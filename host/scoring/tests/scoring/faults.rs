//! Faults.

use super::*;

#[tokio::test]
async fn an_unreachable_engine_is_refused_nothing_is_stored_and_it_is_retried() {
    let setup = Setup::new(ScriptedClient::new(profiles()).with_responder(|_| {
        Err(SandboxError::EngineUnavailable {
            message: "cannot reach the Docker engine at unix:///x.sock: connection refused".into(),
        })
    }));
    let request = || inline(SQUARE, expect("python", &[(&["3"], "9")]));
    for attempt in 1..=2 {
        let refused = setup.scorer.score(request()).await.unwrap_err();
        assert!(
            matches!(
                refused,
                ScoringError::Refused(SandboxError::EngineUnavailable { .. })
            ),
            "{refused:?}"
        );
        assert!(
            refused.to_string().contains("connection refused"),
            "{refused}"
        );
        assert_eq!(setup.started(), attempt, "a refusal is retried");
    }
    // Nothing of a run that never happened is evidence.
    let counts = setup.store.counts().unwrap();
    assert_eq!((counts.observations, counts.scores), (0, 0), "{counts:?}");
}

#[tokio::test]
async fn a_profile_refused_at_preflight_runs_nothing() {
    let setup = Setup::new(
        ScriptedClient::new(profiles())
            .with_responder(square_responder)
            .with_preflight(|profile| {
                Err(SandboxError::ArtifactMissing {
                    profile: profile.name.clone(),
                    artifact: "image x".into(),
                    hint: "push it".into(),
                })
            }),
    );
    let refused = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap_err();
    assert!(matches!(
        refused,
        ScoringError::Refused(SandboxError::ArtifactMissing { .. })
    ));
    assert_eq!(setup.started(), 0);
    assert_eq!(setup.store.counts().unwrap().scores, 0);
}

#[tokio::test]
async fn an_unconfirmed_timeout_is_undetermined_and_never_reused() {
    let setup = scripted(vec![event(
        Outcome::TimedOut {
            limit: TimeLimit::Wall,
            unconfirmed: Some("the machine was busy".into()),
        },
        b"",
        b"",
    )]);
    let request = || inline(SQUARE, expect("python", &[(&["3"], "9")]));
    let first = setup.scorer.score(request()).await.unwrap();
    assert_eq!(first.status, ScoreStatus::Undetermined);
    assert_eq!(first.value, None);
    assert_eq!(first.reason_kind, Some(ReasonKind::UnconfirmedTimeout));
    assert!(
        first
            .rationale
            .contains("case 0 timed out, but the timeout is not proven: the machine was busy"),
        "{}",
        first.rationale
    );
    let second = setup.scorer.score(request()).await.unwrap();
    assert_eq!(setup.started(), 2, "an unproven run is run again");
    assert_ne!(first.observation_ids, second.observation_ids);
    let listed = setup
        .store
        .list_observations(&ObservationFilter::default())
        .unwrap();
    assert!(listed.iter().all(|o| o.unproven));
}

#[tokio::test]
async fn a_cpu_time_limit_is_a_proven_failure() {
    let setup = scripted(vec![event(
        Outcome::TimedOut {
            limit: TimeLimit::Cpu,
            unconfirmed: None,
        },
        b"",
        b"",
    )]);
    let score = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(score.value, Some(false));
    assert_eq!(
        score.rationale,
        "The program did not produce the expected result under python: case 0 exceeded its CPU time limit."
    );
}

#[tokio::test]
async fn the_attempt_is_keyed_by_what_the_backend_resolved_and_rescore_finds_it() {
    let resolved = |profile: &progscore_sandbox::RuntimeProfile| {
        let mut found = progscore_sandbox::Preflight::of(profile, String::new());
        found.fingerprint["runtime"] = serde_json::json!("runc");
        Ok(found)
    };
    let setup = Setup::new(
        ScriptedClient::new(profiles())
            .with_responder(square_responder)
            .with_preflight(resolved),
    );
    let expectation = expect("python", &[(&["3"], "9")]);
    let score = setup
        .scorer
        .score(inline(SQUARE, expectation.clone()))
        .await
        .unwrap();
    assert_eq!(score.value, Some(true));
    let stored = setup
        .store
        .observation(&score.observation_ids[0])
        .unwrap()
        .unwrap();
    assert_eq!(stored.profile_fingerprint["runtime"], "runc");
    // The config leaves the runtime to the engine: rescore, which asks no
    // engine, still finds the evidence of the runtime the engine chose.
    let rescored = setup
        .scorer
        .replayer()
        .rescore(RescoreRequest {
            item_id: None,
            program: ProgramInput::Inline(SQUARE.to_vec()),
            expectation: expect("python", &[(&["3"], "8")]),
        })
        .unwrap();
    assert_eq!(rescored.score.observation_ids, score.observation_ids);
    assert_eq!(rescored.score.value, Some(false));
    assert_eq!(setup.started(), 1);
}

#[tokio::test]
async fn an_undeliverable_invocation_is_an_invalid_expectation() {
    let setup = Setup::new(ScriptedClient::new(profiles()).with_responder(square_responder));
    let err = setup
        .scorer
        .score(inline(
            SQUARE,
            expect("python", &[(&["3"], "9"), (&["a\u{0}b"], "9")]),
        ))
        .await
        .unwrap_err();
    let ScoringError::Expectation(err) = err else {
        panic!("{err:?}");
    };
    assert_eq!(
        err.field_path(),
        "conditions[0].program_behaves.cases[1].invocation.args[0]"
    );
    assert!(err.to_string().contains("NUL byte"), "{err}");
    assert_eq!(setup.started(), 0);
}

#[tokio::test]
async fn a_sandbox_error_event_gets_a_fresh_id_and_a_clean_rerun_gets_the_derived_one() {
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    let setup = Setup::new(ScriptedClient::new(profiles()).with_responder(move |_| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            Ok(vec![event(
                Outcome::SandboxError {
                    message: "create failed".into(),
                },
                b"",
                b"",
            )])
        } else {
            Ok(vec![exited_event(0, b"9\n", b"")])
        }
    }));
    let request = || inline(SQUARE, expect("python", &[(&["3"], "9")]));
    let first = setup.scorer.score(request()).await.unwrap();
    assert_eq!(first.status, ScoreStatus::Undetermined);
    let second = setup.scorer.score(request()).await.unwrap();
    assert_eq!(second.value, Some(true));
    let third = setup.scorer.score(request()).await.unwrap();
    assert_eq!(third.evidence, EvidenceUse::Stored);
    assert_eq!(third.observation_ids, second.observation_ids);
    assert!(first.observation_ids[0].starts_with(&second.observation_ids[0]));
    assert_eq!(setup.started(), 2);
}

#[tokio::test]
async fn a_fenced_markdown_program_is_run_verbatim_and_fails() {
    let fenced = b"```python\nimport sys\nprint(int(sys.argv[1]) ** 2)\n```\n".to_vec();
    let programs = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = programs.clone();
    let setup = Setup::new(
        ScriptedClient::new(profiles()).with_responder(move |request| {
            seen.lock().unwrap().push(request.program.clone());
            square_responder(request)
        }),
    );
    let score = setup
        .scorer
        .score(inline(&fenced, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(score.value, Some(false));
    assert_eq!(
        *programs.lock().unwrap(),
        vec![fenced.clone()],
        "the program was altered"
    );
    assert_eq!(score.program_sha256, sha256_hex(&fenced));
}
