//! Shapes.

use super::*;

#[test]
fn the_batch_line_expectation_shape_parses_and_exit_code_defaults_to_zero() {
    let json = r#"{"conditions": [{"program_behaves": {"profile": "python",
        "cases": [{"invocation": {"args": ["3"], "stdin": null},
                   "expected": {"stdout": {"equals": "9"}, "exit_code": 0}}]}}]}"#;
    let parsed: ScoringExpectation = serde_json::from_str(json).unwrap();
    assert_eq!(parsed, expect("python", &[(&["3"], "9")]));
    let without_code = json.replace(r#", "exit_code": 0"#, "");
    let parsed_default: ScoringExpectation = serde_json::from_str(&without_code).unwrap();
    assert_eq!(parsed_default, parsed);
    // The shorthand and the full form are one expectation, one fingerprint.
    let full = json.replace(
        r#"{"equals": "9"}"#,
        r#"{"comparator": "equals", "params": {"value": "9"}}"#,
    );
    let parsed_full: ScoringExpectation = serde_json::from_str(&full).unwrap();
    assert_eq!(
        parsed_full.fingerprint().unwrap(),
        parsed.fingerprint().unwrap()
    );
    // A misspelt field never silently checks nothing.
    for typo in [
        json.replace("\"stdout\"", "\"stdot\""),
        json.replace("\"program_behaves\"", "\"program_behave\""),
        json.replace("\"args\"", "\"argz\""),
        json.replace(r#"{"equals": "9"}"#, r#"{"equals": "9", "trim": false}"#),
    ] {
        assert!(
            serde_json::from_str::<ScoringExpectation>(&typo).is_err(),
            "{typo}"
        );
    }
    let Condition::ProgramBehaves(behaves) = &parsed.conditions[0];
    assert_eq!(behaves.cases[0].expected.exit_code, 0);
}

#[test]
fn the_attempt_key_ignores_expected_results_but_not_inputs_or_profile() {
    let python = profile("python", "64KiB");
    let inputs = |args: &[&str]| vec![progscore_sandbox::Invocation::with_args(args.to_vec())];
    let sha = sha256_hex(SQUARE);
    let a = Attempt::new(&python, &sha, inputs(&["3"])).unwrap();
    assert_eq!(a, Attempt::new(&python, &sha, inputs(&["3"])).unwrap());
    assert_ne!(
        a.key,
        Attempt::new(&python, &sha, inputs(&["4"])).unwrap().key
    );
    assert_ne!(
        a.key,
        Attempt::new(&profile("python", "128B"), &sha, inputs(&["3"]))
            .unwrap()
            .key
    );
    assert_ne!(
        a.key,
        Attempt::new(&profile("other", "64KiB"), &sha, inputs(&["3"]))
            .unwrap()
            .key
    );
    assert_ne!(
        a.key,
        Attempt::new(&python, &sha256_hex(b"x"), inputs(&["3"]))
            .unwrap()
            .key
    );
    assert!(a.observation_id().starts_with("obs-"));
    assert_ne!(a.fresh_observation_id(), a.fresh_observation_id());
}

#[test]
fn a_score_future_can_be_spawned_on_a_multi_threaded_runtime() {
    let setup = std::sync::Arc::new(Setup::square());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Spawned (so Send and 'static), it runs on the runtime's workers and
    // comes back with its verdict.
    let task = runtime.spawn({
        let setup = setup.clone();
        async move {
            setup
                .scorer
                .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
                .await
        }
    });
    let score = runtime.block_on(task).unwrap().unwrap();
    assert_eq!(score.value, Some(true), "{score:?}");
}

#[test]
fn a_text_condition_is_read_in_either_form_and_written_in_the_full_one() {
    use serde_json::json;
    let short: TextCondition = serde_json::from_value(json!({"equals": "9"})).unwrap();
    assert_eq!(short, TextCondition::new("equals", json!({"value": "9"})));
    let long: TextCondition = serde_json::from_value(json!({
        "comparator": "regex", "params": {"value": "^ok", "full_match": true}
    }))
    .unwrap();
    assert_eq!(long.comparator, "regex");
    assert_eq!(long.params["full_match"], json!(true));
    // Both spellings of one check are stored, and fingerprinted, alike.
    assert_eq!(
        serde_json::to_value(&short).unwrap(),
        json!({"comparator": "equals", "params": {"value": "9"}})
    );
    let bare: TextCondition =
        serde_json::from_value(json!({"comparator": "sorted-lines"})).unwrap();
    assert_eq!(bare.params, json!({}));
}

#[test]
fn a_malformed_text_condition_is_refused_with_a_hint() {
    use serde_json::json;
    for (value, needle) in [
        (json!("equals"), "a text condition is"),
        (json!({}), "exactly one key"),
        (json!({"equals": "9", "trim": false}), "exactly one key"),
        (json!({"comparator": 3}), "non-empty string"),
        (
            json!({"comparator": "regex", "params": "^ok"}),
            "must be an object",
        ),
        (
            json!({"comparator": "regex", "value": "^ok"}),
            "unexpected key `value`",
        ),
    ] {
        let err = serde_json::from_value::<TextCondition>(value.clone())
            .expect_err(&format!("{value} must be refused"));
        assert!(err.to_string().contains(needle), "{value}: {err}");
    }
}
