//! A program's own limits: the run goes to the backend as a variant of its
//! profile, the limits are part of the attempt, bad limits are refused with
//! the field named, and a replay under other limits is refused.

use progscore_sandbox::PartialLimitsSpec;

use super::*;

/// A client that records the limits of every run it was given.
fn recording() -> (Setup, Arc<std::sync::Mutex<Vec<progscore_sandbox::Limits>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let client = ScriptedClient::new(profiles()).with_responder({
        let seen = seen.clone();
        move |request| {
            seen.lock().unwrap().push(request.limits.clone());
            square_responder(request)
        }
    });
    (Setup::new(client), seen)
}

fn own_limits(timeout: &str, memory: Option<&str>) -> PartialLimitsSpec {
    PartialLimitsSpec {
        timeout: Some(timeout.into()),
        memory: memory.map(str::to_string),
        ..PartialLimitsSpec::default()
    }
}

fn square_with(limits: Option<PartialLimitsSpec>) -> ScoreRequest {
    inline(
        SQUARE,
        expect("python", &[(&["3"], "9")]).with_limits(limits, None),
    )
}

#[tokio::test]
async fn a_program_runs_under_its_own_limits_and_they_are_part_of_its_attempt() {
    let (setup, seen) = recording();
    let profile_limits = profiles()[0].limits.clone();
    let plain = setup.scorer.score(square_with(None)).await.unwrap();
    let short = setup
        .scorer
        .score(square_with(Some(own_limits("1500ms", Some("64MiB")))))
        .await
        .unwrap();
    let short_again = setup
        .scorer
        .score(square_with(Some(own_limits("1.5s", Some("64MiB")))))
        .await
        .unwrap();
    let longer = setup
        .scorer
        .score(square_with(Some(own_limits("3s", None))))
        .await
        .unwrap();

    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.len(),
        3,
        "one run per distinct set of limits: {seen:?}"
    );
    assert_eq!(seen[0], profile_limits);
    assert_eq!(seen[1].timeout_ms, 1500);
    assert_eq!(seen[1].memory_bytes, 64 << 20);
    assert_eq!(
        seen[1].pids, profile_limits.pids,
        "unwritten keys stay the profile's"
    );
    assert_eq!(seen[2].timeout_ms, 3000);
    assert_eq!(seen[2].memory_bytes, profile_limits.memory_bytes);

    assert_eq!(short_again.evidence, EvidenceUse::Stored);
    assert_eq!(short_again.observation_ids, short.observation_ids);
    assert_ne!(short.observation_ids, plain.observation_ids);
    assert_ne!(longer.observation_ids, short.observation_ids);
    for score in [&plain, &short, &longer] {
        assert_eq!(score.value, Some(true));
    }
    let stored = setup
        .store
        .observation(&short.observation_ids[0])
        .unwrap()
        .unwrap();
    assert_eq!(stored.profile, "python");
    assert_eq!(stored.profile_fingerprint["limits"]["timeout_ms"], 1500);
}

#[tokio::test]
async fn limits_equal_to_the_profile_share_the_profile_evidence() {
    let (setup, seen) = recording();
    let plain = setup.scorer.score(square_with(None)).await.unwrap();
    let same = setup
        .scorer
        .score(square_with(Some(own_limits("10s", Some("256MiB")))))
        .await
        .unwrap();
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(same.evidence, EvidenceUse::Stored);
    assert_eq!(same.observation_ids, plain.observation_ids);
}

#[tokio::test]
async fn bad_own_limits_are_refused_with_the_field_named_and_nothing_runs() {
    let (setup, seen) = recording();
    let cases: Vec<(ScoringExpectation, &str, &str)> = vec![
        (
            expect("python", &[(&["3"], "9")]).with_limits(Some(own_limits("5ms", None)), None),
            "conditions[0].program_behaves.limits.timeout",
            "between 100ms and 1h",
        ),
        (
            expect("python", &[(&["3"], "9")]).with_limits(Some(own_limits("soon", None)), None),
            "conditions[0].program_behaves.limits.timeout",
            "not a duration",
        ),
        (
            expect("python", &[(&["3"], "9")])
                .with_limits(Some(own_limits("1s", Some("lots"))), None),
            "conditions[0].program_behaves.limits.memory",
            "not a size",
        ),
        (
            expect("python", &[(&["3"], "9")]).with_limits(
                Some(PartialLimitsSpec {
                    cpus: Some(4.0),
                    ..PartialLimitsSpec::default()
                }),
                None,
            ),
            "conditions[0].program_behaves.limits.cpus",
            "cannot be changed",
        ),
        (
            expect("python", &[(&["3"], "9")]).with_limits(None, Some(own_limits("30s", None))),
            "conditions[0].program_behaves.compile_limits",
            "no compile step",
        ),
    ];
    for (expectation, path, words) in cases {
        let err = setup
            .scorer
            .score(inline(SQUARE, expectation))
            .await
            .unwrap_err();
        let ScoringError::Expectation(err) = err else {
            panic!("not an expectation error: {err}");
        };
        assert_eq!(err.field_path(), path, "{err}");
        assert!(err.to_string().contains(words), "{err}");
    }
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(setup.store.counts().unwrap().observations, 0);
}

#[tokio::test]
async fn own_limits_round_trip_in_the_expectation_json_and_old_expectations_are_unchanged() {
    let plain = expect("python", &[(&["3"], "9")]);
    let json = serde_json::to_value(&plain).unwrap();
    assert!(
        json["conditions"][0]["program_behaves"]
            .get("limits")
            .is_none(),
        "an expectation without limits keeps the shape (and fingerprint) it had"
    );
    let limited: ScoringExpectation = serde_json::from_value(serde_json::json!({
        "conditions": [{"program_behaves": {
            "profile": "python",
            "limits": {"timeout": "2s"},
            "cases": [{"invocation": {"args": ["3"]}, "expected": {"stdout": {"equals": "9"}}}]
        }}]
    }))
    .unwrap();
    let Condition::ProgramBehaves(behaves) = &limited.conditions[0];
    assert_eq!(
        behaves.limits.as_ref().unwrap().timeout.as_deref(),
        Some("2s")
    );
    assert_ne!(limited.fingerprint().unwrap(), plain.fingerprint().unwrap());
    let misspelt = serde_json::from_value::<ScoringExpectation>(serde_json::json!({
        "conditions": [{"program_behaves": {
            "profile": "python",
            "limits": {"timout": "2s"},
            "cases": []
        }}]
    }))
    .unwrap_err();
    assert!(misspelt.to_string().contains("timout"), "{misspelt}");
}

#[tokio::test]
async fn a_replay_asking_other_limits_than_the_observation_ran_under_is_refused() {
    let (setup, _) = recording();
    let short = setup
        .scorer
        .score(square_with(Some(own_limits("1500ms", None))))
        .await
        .unwrap();
    let id = short.observation_ids[0].clone();
    let replay = |limits: Option<PartialLimitsSpec>| ReplayRequest {
        item_id: None,
        observation: ObservationRef::Id(id.clone()),
        expectation: expect("python", &[(&["3"], "9")]).with_limits(limits, None),
    };
    let same = setup
        .scorer
        .replayer()
        .replay(replay(Some(own_limits("1.5s", None))))
        .unwrap();
    assert_eq!(same.value, Some(true));
    // Limits the expectation leaves to the profile are not compared.
    assert!(setup.scorer.replayer().replay(replay(None)).is_ok());
    let err = setup
        .scorer
        .replayer()
        .replay(replay(Some(own_limits("10s", None))))
        .unwrap_err();
    assert!(
        matches!(
            &err,
            ScoringError::Replay(ReplayRefusal::OtherLimits { detail, .. })
                if detail.contains("limits asked")
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_rescore_with_own_limits_finds_the_evidence_of_those_limits_only() {
    let (setup, _) = recording();
    setup
        .scorer
        .score(square_with(Some(own_limits("1500ms", None))))
        .await
        .unwrap();
    let rescore = |limits: Option<PartialLimitsSpec>| RescoreRequest {
        item_id: None,
        program: ProgramInput::Inline(SQUARE.to_vec()),
        expectation: expect("python", &[(&["3"], "9")]).with_limits(limits, None),
    };
    let found = setup
        .scorer
        .replayer()
        .rescore(rescore(Some(own_limits("1500ms", None))))
        .unwrap();
    assert_eq!(found.score.value, Some(true));
    let other = setup
        .scorer
        .replayer()
        .rescore(rescore(Some(own_limits("2s", None))))
        .unwrap();
    assert_eq!(other.score.value, None, "no evidence under those limits");
}
