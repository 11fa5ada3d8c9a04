//! Validation.

use super::*;

#[tokio::test]
async fn invalid_expectations_are_errors_and_nothing_runs_or_is_written() {
    let setup = Setup::square();
    let valid = expect("python", &[(&["3"], "9")]);
    let mut two = valid.clone();
    two.conditions.push(valid.conditions[0].clone());
    let none = ScoringExpectation { conditions: vec![] };
    let no_cases = ScoringExpectation::program_behaves("python", vec![]);
    let unknown_profile = expect("ruby", &[(&["3"], "9")]);
    let mut unknown_comparator = valid.clone();
    let Condition::ProgramBehaves(behaves) = &mut unknown_comparator.conditions[0];
    behaves.cases[0].expected.stdout = Some(TextCondition::value("sorted-lines", "9"));
    let mut bad_params = valid.clone();
    let Condition::ProgramBehaves(behaves) = &mut bad_params.conditions[0];
    behaves.cases[0].expected.stdout = Some(TextCondition::value("equals", 9));

    type Check = fn(&ExpectationError) -> bool;
    let cases: Vec<(ScoringExpectation, Check)> = vec![
        (two, |e| {
            matches!(e, ExpectationError::ConditionCount { found: 2 })
        }),
        (none, |e| {
            matches!(e, ExpectationError::ConditionCount { found: 0 })
        }),
        (no_cases, |e| matches!(e, ExpectationError::NoCases)),
        (
            unknown_profile,
            |e| matches!(e, ExpectationError::UnknownProfile { name, known } if name == "ruby" && known == "python, other"),
        ),
        (unknown_comparator, |e| {
            matches!(
                e,
                ExpectationError::Comparator {
                    case: 0,
                    stream: "stdout",
                    ..
                }
            )
        }),
        (bad_params, |e| {
            matches!(e, ExpectationError::Comparator { case: 0, .. })
        }),
    ];
    for (expectation, check) in cases {
        assert!(setup.scorer.validate(&expectation).is_err());
        match setup.scorer.score(inline(SQUARE, expectation)).await {
            Err(ScoringError::Expectation(error)) => assert!(check(&error), "{error:?}"),
            other => panic!("expected an expectation error, got {other:?}"),
        }
    }
    assert_eq!(setup.started(), 0);
    assert_eq!(setup.store.counts().unwrap(), Default::default());
}

#[tokio::test]
async fn an_exit_code_no_program_can_exit_with_is_refused_naming_its_field() {
    let setup = Setup::square();
    for (value, valid) in [
        (300, false),
        (-1, false),
        (256, false),
        (0, true),
        (255, true),
    ] {
        let mut expectation = expect("python", &[(&["3"], "9"), (&["4"], "16")]);
        let Condition::ProgramBehaves(behaves) = &mut expectation.conditions[0];
        behaves.cases[1].expected.exit_code = value;
        let checked = setup.scorer.validate(&expectation);
        if valid {
            assert!(checked.is_ok(), "{value}: {checked:?}");
            continue;
        }
        let error = checked.unwrap_err();
        assert_eq!(
            error.field_path(),
            "conditions[0].program_behaves.cases[1].expected.exit_code"
        );
        assert!(
            error.to_string().contains(&format!("exit code {value}"))
                && error.to_string().contains("0 to 255"),
            "{error}"
        );
        match setup.scorer.score(inline(SQUARE, expectation)).await {
            Err(ScoringError::Expectation(ExpectationError::ExitCode { case: 1, .. })) => {}
            other => panic!("expected an exit code refusal, got {other:?}"),
        }
    }
    assert_eq!(setup.started(), 0);
    assert_eq!(setup.store.counts().unwrap(), Default::default());
}
