//! Checkers (`progscore:checker@0.1.0`): the six built-ins, their params and
//! truncation rule, hostile checkers, role mix-ups, and a user checker that
//! needs the test's input.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use progscore_comparator_host::{
    CheckOutcome, ComparatorError, ComparatorHost, ComparatorRole, ComparatorSource,
    ObservedStream, builtin_checker_names, test_guests,
};

use crate::hostile::sha256_of;
use crate::{TEST_TIMEOUT, host, test_options};

fn check(name: &str, params: &str, output: &[u8], answer: &[u8]) -> CheckOutcome {
    host()
        .check(
            name,
            params,
            b"",
            &ObservedStream::complete(output.to_vec()),
            answer,
        )
        .unwrap_or_else(|e| panic!("{name} {params}: {e}"))
}

fn check_cut(name: &str, params: &str, kept: &[u8], total: u64, answer: &[u8]) -> CheckOutcome {
    host()
        .check(
            name,
            params,
            b"",
            &ObservedStream::truncated(kept.to_vec(), total),
            answer,
        )
        .unwrap_or_else(|e| panic!("{name} {params}: {e}"))
}

/// A for accepted, W wrong answer, P presentation error, S points, U undetermined.
fn letter(outcome: &CheckOutcome) -> char {
    match outcome {
        CheckOutcome::Accepted(_) => 'A',
        CheckOutcome::WrongAnswer(_) => 'W',
        CheckOutcome::PresentationError(_) => 'P',
        CheckOutcome::Points { .. } => 'S',
        CheckOutcome::Undetermined(_) => 'U',
    }
}

#[track_caller]
fn assert_outcome(outcome: &CheckOutcome, expected: char, needle: &str) {
    assert_eq!(letter(outcome), expected, "{outcome:?}");
    assert!(
        outcome.message().contains(needle),
        "{outcome:?} should mention {needle:?}"
    );
}

#[test]
fn builtin_checkers_are_registered_as_checkers() {
    let names: Vec<&str> = builtin_checker_names().collect();
    assert_eq!(
        names,
        [
            "tokens",
            "yes_no",
            "floats",
            "sorted_tokens",
            "unordered_tokens",
            "exact_lines"
        ]
    );
    let listed = host().comparators();
    for name in &names {
        assert!(host().is_checker(name), "{name}");
        let info = listed.iter().find(|i| i.name == *name).expect("listed");
        assert_eq!(info.role, ComparatorRole::Checker);
        assert_eq!(info.source, ComparatorSource::Builtin);
    }
    assert!(!host().is_checker("equals"));
    assert!(!host().is_checker("nope"));
    let equals = listed.iter().find(|i| i.name == "equals").expect("equals");
    assert_eq!(equals.role, ComparatorRole::Comparator);
    let json = serde_json::to_value(equals).expect("json");
    assert_eq!(json["role"], "comparator");
    assert_eq!(json["kind"], "builtin");
    assert!(
        json["sha256"].is_string() && json["name"] == "equals",
        "{json}"
    );
    let tokens = listed.iter().find(|i| i.name == "tokens").expect("tokens");
    assert_eq!(
        serde_json::to_value(tokens).expect("json")["role"],
        "checker"
    );
}

#[test]
fn tokens() {
    let answer = b"1 5 9\n";
    assert_outcome(&check("tokens", "{}", b"1\n5   9", answer), 'A', "3 tokens");
    assert_outcome(
        &check("tokens", "{}", b"1 6 9\n", answer),
        'W',
        "2nd token differs: expected '5', found '6'",
    );
    assert_outcome(
        &check("tokens", "{}", b"1 5\n", answer),
        'W',
        "answer has 3 tokens, output has 2",
    );
    assert_outcome(
        &check("tokens", "{}", b"1 5 9 9\n", answer),
        'W',
        "answer has 3 tokens, output has 4",
    );
    assert_outcome(
        &check("tokens", "{}", b"", answer),
        'W',
        "answer has 3 tokens, output has 0",
    );
    assert_outcome(&check("tokens", "{}", b" \n", b""), 'A', "0 tokens");
    // Bytes, not text: invalid UTF-8 is compared as it is.
    assert_outcome(&check("tokens", "{}", b"a\xff b", b"a\xff b"), 'A', "");
    assert_outcome(&check("tokens", "{}", b"a\xfe b", b"a\xff b"), 'W', "1st");
    // Case.
    assert_outcome(&check("tokens", "{}", b"Hello", b"hello"), 'W', "1st token");
    assert_outcome(
        &check(
            "tokens",
            r#"{"case_insensitive":true}"#,
            b"HeLLo World",
            b"hello world",
        ),
        'A',
        "2 tokens",
    );
    assert_outcome(
        &check(
            "tokens",
            "{}",
            b"a b c d e f g h i j k l",
            b"a b c d e f g h i j x l",
        ),
        'W',
        "11th token differs",
    );
}

#[test]
fn yes_no() {
    assert_outcome(
        &check("yes_no", "{}", b"YES\nno 3", b"yes\nNo 3"),
        'A',
        "3 tokens",
    );
    assert_outcome(
        &check("yes_no", "{}", b"Yes", b"no"),
        'W',
        "1st token differs: expected 'no', found 'Yes'",
    );
    // Only yes and no are case-blind.
    assert_outcome(
        &check("yes_no", "{}", b"yes MAYBE", b"yes maybe"),
        'W',
        "2nd",
    );
}

#[test]
fn floats() {
    let answer = b"1.5 100 word\n";
    assert_outcome(
        &check("floats", "{}", b"1.5000001 100 word", answer),
        'A',
        "3 tokens",
    );
    // Relative error: 1e-6 of 100.
    assert_outcome(
        &check("floats", "{}", b"1.5 100.00005 word", answer),
        'A',
        "",
    );
    assert_outcome(
        &check("floats", "{}", b"1.6 100 word", answer),
        'W',
        "1st number differs: expected '1.5', found '1.6'",
    );
    assert_outcome(
        &check("floats", r#"{"abs":0.2}"#, b"1.6 100 word", answer),
        'A',
        "",
    );
    assert_outcome(
        &check("floats", r#"{"rel":0.1}"#, b"1.5 109 word", answer),
        'A',
        "",
    );
    assert_outcome(
        &check("floats", r#"{"rel":0.1}"#, b"1.5 111 word", answer),
        'W',
        "2nd",
    );
    // Non-numeric answer tokens are exact.
    assert_outcome(
        &check("floats", "{}", b"1.5 100 Word", answer),
        'W',
        "3rd token",
    );
    // A word where a number belongs.
    assert_outcome(
        &check("floats", "{}", b"abc 100 word", answer),
        'P',
        "expected a number",
    );
    assert_outcome(&check("floats", "{}", b"nan 100 word", answer), 'W', "1st");
    assert_outcome(
        &check("floats", "{}", b"1.5 100", answer),
        'W',
        "answer has 3 tokens, output has 2",
    );
}

#[test]
fn sorted_and_unordered_tokens() {
    let answer = b"10 2 b a 2\n";
    assert_outcome(
        &check("sorted_tokens", "{}", b"2 2 10 a b", answer),
        'A',
        "5 tokens",
    );
    assert_outcome(
        &check("sorted_tokens", "{}", b"2 10 2 a b", answer),
        'W',
        "output is not sorted: 2nd token '10' comes before 3rd token '2'",
    );
    assert_outcome(
        &check("sorted_tokens", "{}", b"2 2 10 a c", answer),
        'W',
        "'c'",
    );
    assert_outcome(
        &check("unordered_tokens", "{}", b"b 2 a 10 2", answer),
        'A',
        "5 tokens",
    );
    assert_outcome(
        &check("unordered_tokens", "{}", b"b 2 a 10 10", answer),
        'W',
        "output has token '10' more often than the answer (the answer has it 1 time)",
    );
    assert_outcome(
        &check("unordered_tokens", "{}", b"b 2 a 10", answer),
        'W',
        "answer has 5 tokens, output has 4",
    );
}

#[test]
fn exact_lines() {
    let answer = b"a b\n  c\n";
    assert_outcome(
        &check("exact_lines", "{}", b"a b\n  c\n", answer),
        'A',
        "2 lines",
    );
    assert_outcome(
        &check("exact_lines", "{}", b"a b\r\n  c\r\n", answer),
        'A',
        "",
    );
    assert_outcome(&check("exact_lines", "{}", b"a b\n  c", answer), 'A', "");
    assert_outcome(
        &check("exact_lines", "{}", b"a b\nc\n", answer),
        'W',
        "2nd line differs: expected '  c', found 'c'",
    );
    assert_outcome(
        &check("exact_lines", "{}", b"a b \n  c\n", answer),
        'W',
        "1st line",
    );
    assert_outcome(
        &check("exact_lines", "{}", b"a b\n  c\n\n", answer),
        'W',
        "answer has 2 lines, output has 3",
    );
}

#[test]
fn truncated_output_is_undetermined_unless_the_prefix_proves_it() {
    let answer = b"1 2 3\n";
    // The last kept token may be cut ("3" of "30").
    assert_outcome(
        &check_cut("tokens", "{}", b"1 2 3", 100, answer),
        'U',
        "truncated after 5 bytes of 100",
    );
    assert_outcome(
        &check_cut("tokens", "{}", b"1 2 3\n", 100, answer),
        'U',
        "3 complete tokens",
    );
    assert_outcome(
        &check_cut("tokens", "{}", b"1 7 3", 100, answer),
        'W',
        "2nd token differs: expected '2', found '7' (the output was truncated after 5 bytes of 100)",
    );
    assert_outcome(
        &check_cut("tokens", "{}", b"1 2 3 4", 100, answer),
        'W',
        "answer has 3 tokens, output has at least 4",
    );
    assert_outcome(
        &check_cut("floats", "{}", b"1 2.0000001 3", 100, answer),
        'U',
        "",
    );
    assert_outcome(
        &check_cut("unordered_tokens", "{}", b"3 2 1", 100, answer),
        'U',
        "",
    );
    assert_outcome(
        &check_cut("unordered_tokens", "{}", b"3 3 1", 100, answer),
        'W',
        "'3'",
    );
    assert_outcome(
        &check_cut("unordered_tokens", "{}", b"9 1", 100, answer),
        'W',
        "'9'",
    );
    assert_outcome(
        &check_cut("sorted_tokens", "{}", b"1 2 3", 100, answer),
        'U',
        "",
    );
    assert_outcome(
        &check_cut("sorted_tokens", "{}", b"2 1 3", 100, answer),
        'W',
        "not sorted",
    );
    assert_outcome(
        &check_cut("exact_lines", "{}", b"1 2 3\n", 100, answer),
        'U',
        "1 complete line",
    );
    assert_outcome(
        &check_cut("exact_lines", "{}", b"1 2 3\nmore", 100, answer),
        'W',
        "answer has 1 line, output has at least 2",
    );
    assert_outcome(
        &check_cut("exact_lines", "{}", b"1 2 4\n", 100, answer),
        'W',
        "1st line",
    );
}

#[test]
fn validate_refuses_bad_params_and_a_mode_of_the_caller() {
    for name in builtin_checker_names() {
        host().validate_checker(name, "{}").expect(name);
    }
    host()
        .validate_checker("floats", r#"{"abs":1e-9,"rel":0}"#)
        .expect("valid");
    host()
        .validate_checker("tokens", r#"{"case_insensitive":true}"#)
        .expect("valid");
    let refused = |name: &str, params: &str, needle: &str| {
        let err = host().validate_checker(name, params).expect_err(params);
        assert!(
            matches!(err, ComparatorError::InvalidParams { .. }),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains(needle) && text.contains(name), "{text}");
        // `check` refuses them the same way.
        let err = host()
            .check(name, params, b"", &ObservedStream::complete(vec![]), b"")
            .expect_err(params);
        assert!(
            matches!(err, ComparatorError::InvalidParams { .. }),
            "{err:?}"
        );
    };
    refused("floats", r#"{"abs":-1}"#, "\"abs\"");
    refused("floats", r#"{"rel":"big"}"#, "\"rel\"");
    refused("tokens", r#"{"case_insensitive":1}"#, "case_insensitive");
    refused("tokens", r#"{"colour":1}"#, "\"colour\"");
    refused("yes_no", r#"{"abs":1}"#, "\"abs\"");
    refused("tokens", r#"{"mode":"tokens"}"#, "\"mode\"");
    refused("exact_lines", r#"{"mode":"floats"}"#, "\"mode\"");
    refused("tokens", "[]", "object");
    refused("tokens", "not json", "JSON");
}

#[test]
fn roles_are_not_mixed_up() {
    let err = host()
        .compare("tokens", "{}", &ObservedStream::complete(b"1".to_vec()))
        .expect_err("a checker cannot compare");
    assert!(
        matches!(
            err,
            ComparatorError::WrongRole {
                actual: ComparatorRole::Checker,
                wanted: ComparatorRole::Comparator,
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("\"tokens\" is a checker"), "{text}");
    assert!(host().validate("tokens", "{}").is_err());

    let err = host()
        .check(
            "equals",
            r#"{"value":"1"}"#,
            b"",
            &ObservedStream::complete(b"1".to_vec()),
            b"1",
        )
        .expect_err("a comparator cannot check");
    assert!(matches!(err, ComparatorError::WrongRole { .. }), "{err:?}");
    assert!(
        err.to_string().contains("\"equals\" is a comparator"),
        "{err}"
    );
    assert!(
        host()
            .validate_checker("equals", r#"{"value":"1"}"#)
            .is_err()
    );

    let err = host()
        .check("tokenz", "{}", b"", &ObservedStream::complete(vec![]), b"")
        .expect_err("unknown");
    assert!(
        matches!(err, ComparatorError::UnknownComparator { .. }),
        "{err:?}"
    );
}

#[test]
fn names_are_shared_with_comparators() {
    let mut host = ComparatorHost::new(test_options()).expect("host");
    host.register_builtins().expect("built-ins");
    let path = test_guests::example("sorted-lines").expect("example");
    let err = host
        .register_user("tokens", path, &sha256_of(path))
        .expect_err("a comparator may not take a checker's name");
    assert!(matches!(err, ComparatorError::Duplicate(_)), "{err:?}");
    let err = host
        .register_builtin_checkers()
        .expect_err("registered already");
    assert!(matches!(err, ComparatorError::Duplicate(_)), "{err:?}");
}

fn faults_host() -> &'static ComparatorHost {
    static HOST: OnceLock<ComparatorHost> = OnceLock::new();
    HOST.get_or_init(|| {
        let mut host = ComparatorHost::new(test_options()).expect("host");
        host.register_builtins().expect("built-ins");
        let path = test_guests::hostile("checker-faults").expect("fixture");
        host.register_user("faults", path, &sha256_of(path))
            .expect("register");
        host
    })
}

fn fault(which: &str) -> CheckOutcome {
    faults_host()
        .check(
            "faults",
            &format!(r#"{{"fault":"{which}"}}"#),
            b"1 2",
            &ObservedStream::complete(b"3\n".to_vec()),
            b"3\n",
        )
        .unwrap_or_else(|e| panic!("{which}: {e}"))
}

#[test]
fn hostile_checkers_are_undetermined() {
    assert!(faults_host().is_checker("faults"));
    assert_outcome(&fault("none"), 'A', "accepted on purpose");
    assert_eq!(
        fault("points-half"),
        CheckOutcome::Points {
            score: 0.5,
            message: "0.5 on purpose".to_string()
        }
    );
    assert_outcome(
        &fault("fail"),
        'U',
        "checker \"faults\" says FAIL (the test's data is wrong): the answer does not fit the input",
    );
    assert_outcome(
        &fault("points-1.5"),
        'U',
        "checker \"faults\" returned points 1.5",
    );
    assert_outcome(
        &fault("points-nan"),
        'U',
        "checker \"faults\" returned points NaN",
    );
    assert_outcome(&fault("points-negative"), 'U', "outside [0, 1]");
    assert_outcome(&fault("panic"), 'U', "checker exploded on purpose");
    assert_outcome(&fault("panic"), 'U', "checker \"faults\" failed");
    let started = Instant::now();
    assert_outcome(&fault("loop"), 'U', "deadline");
    assert!(started.elapsed() < TEST_TIMEOUT + Duration::from_secs(2));
    assert_outcome(&fault("alloc"), 'U', "memory limit");
    let err = faults_host()
        .validate_checker("faults", r#"{"fault":"bad-params"}"#)
        .expect_err("refused");
    assert!(err.to_string().contains("refused on purpose"), "{err}");
    // A user checker gets the caller's params as they are (no `mode`).
    faults_host()
        .validate_checker("faults", r#"{"mode":"anything"}"#)
        .expect("a user checker's params are its own");
    // The host still works.
    assert_outcome(&fault("none"), 'A', "");
    assert!(
        faults_host()
            .check(
                "tokens",
                "{}",
                b"",
                &ObservedStream::complete(b"1".to_vec()),
                b"1"
            )
            .expect("tokens")
            .is_accepted()
    );
}

#[test]
fn user_checker_sees_the_input() {
    let path = test_guests::example("checker-sum").expect("example");
    let mut host = ComparatorHost::new(test_options()).expect("host");
    host.register_user("sum", path, &sha256_of(path))
        .expect("register");
    assert!(host.is_checker("sum"));
    let info = host.comparators().pop().expect("listed");
    assert_eq!(info.role, ComparatorRole::Checker);
    assert_eq!(info.source, ComparatorSource::User { path: path.into() });
    assert_eq!(info.sha256, sha256_of(path));

    host.validate_checker("sum", "{}").expect("valid");
    assert!(host.validate_checker("sum", r#"{"x":1}"#).is_err());
    let run = |input: &[u8], output: &[u8]| {
        host.check(
            "sum",
            "{}",
            input,
            &ObservedStream::complete(output.to_vec()),
            b"",
        )
        .expect("call")
    };
    assert_outcome(&run(b"3\n1 2 -1\n", b"5\n"), 'A', "the sum is 5");
    assert_outcome(&run(b"3\n1 2 -1\n", b"4\n"), 'W', "expected 5, found 4");
    assert_outcome(&run(b"3\n1 2 -1\n", b"five\n"), 'P', "five");
    assert_outcome(&run(b"1 x\n", b"1\n"), 'U', "says FAIL");
    let cut = host
        .check(
            "sum",
            "{}",
            b"2 3",
            &ObservedStream::truncated(b"5".to_vec(), 9),
            b"",
        )
        .expect("call");
    assert_outcome(&cut, 'U', "");
    let compare = host.compare("sum", "{}", &ObservedStream::complete(b"5".to_vec()));
    assert!(matches!(compare, Err(ComparatorError::WrongRole { .. })));
}

#[test]
fn a_non_component_names_every_world() {
    let path = test_guests::hostile("wrong-world").expect("fixture");
    let mut host = ComparatorHost::new(test_options()).expect("host");
    let err = host
        .register_user("wrong", path, &sha256_of(path))
        .expect_err("must refuse");
    let text = err.to_string();
    for world in [
        "progscore:comparator@0.2.0",
        "progscore:comparator@0.1.0",
        "progscore:checker@0.1.0",
    ] {
        assert!(text.contains(world), "{text}");
    }
}
