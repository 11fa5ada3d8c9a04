//! `TextCondition`: the shorthand and general forms users write.

use progscore_comparators::{ComparisonOutcome, ObservedStream, TextCondition};
use serde_json::json;

use crate::host;

#[test]
fn shorthand_means_value() {
    let c: TextCondition = serde_json::from_value(json!({"equals": "9"})).expect("parse");
    assert_eq!(c.comparator(), "equals");
    assert_eq!(c.params_json(), r#"{"value":"9"}"#);
    // Round-trips in the form it was written in.
    assert_eq!(
        serde_json::to_value(&c).expect("ser"),
        json!({"equals": "9"})
    );

    let c: TextCondition = serde_json::from_value(json!({"json": {"a": [1, 2]}})).expect("parse");
    assert_eq!(c.comparator(), "json");
    assert_eq!(c.params()["value"], json!({"a": [1, 2]}));
}

#[test]
fn general_form_carries_params() {
    let value = json!({"comparator": "regex", "params": {"value": "^ok", "full_match": true}});
    let c: TextCondition = serde_json::from_value(value.clone()).expect("parse");
    assert_eq!(c.comparator(), "regex");
    assert_eq!(c.params()["full_match"], json!(true));
    assert_eq!(serde_json::to_value(&c).expect("ser"), value);

    let c: TextCondition =
        serde_json::from_value(json!({"comparator": "sorted-lines"})).expect("no params");
    assert_eq!(c.params_json(), "{}");
}

#[test]
fn malformed_conditions_are_refused_with_a_hint() {
    for (value, needle) in [
        (json!("equals"), "expected an object"),
        (json!({}), "exactly one key"),
        (json!({"equals": "9", "trim": false}), "exactly one key"),
        (json!({"comparator": 3}), "non-empty string"),
        (
            json!({"comparator": "regex", "params": "^ok"}),
            "must be an object",
        ),
        (
            json!({"comparator": "regex", "value": "^ok"}),
            "unexpected key \"value\"",
        ),
    ] {
        let err = serde_json::from_value::<TextCondition>(value.clone())
            .expect_err(&format!("{value} must be refused"));
        assert!(err.to_string().contains(needle), "{value}: {err}");
    }
}

#[test]
fn conditions_run_on_the_host() {
    let stdout = ObservedStream::complete(b"9\n".to_vec());
    let c: TextCondition = r#"{"equals": "9"}"#.parse().expect("parse");
    host().validate_condition(&c).expect("valid");
    assert_eq!(
        host().compare_condition(&c, &stdout).expect("run"),
        ComparisonOutcome::Match
    );

    let c: TextCondition = r#"{"comparator": "equals", "params": {"value": "9", "trim": false}}"#
        .parse()
        .expect("parse");
    assert!(matches!(
        host().compare_condition(&c, &stdout).expect("run"),
        ComparisonOutcome::Mismatch(_)
    ));

    let c: TextCondition = r#"{"equals": "9", "colour": "red"}"#
        .parse::<TextCondition>()
        .err()
        .map(|_| {
            r#"{"comparator": "equals", "params": {"value": "9", "colour": "red"}}"#
                .parse()
                .expect("parse")
        })
        .expect("shorthand with options is refused");
    assert!(
        host().validate_condition(&c).is_err(),
        "unknown param refused by validate"
    );
}
