//! User comparators: load by path and pin, pin mismatch, unknown names, and
//! the compiled-component cache.

use progscore_comparator_host::{
    ComparatorError, ComparatorHost, ComparatorSource, ComparisonOutcome, HostOptions,
    ObservedBehaviour, ObservedEvent, ObservedStream, ObservedTrace, test_guests,
};

use crate::hostile::sha256_of;
use crate::test_options;

fn sorted_lines() -> &'static str {
    test_guests::example("sorted-lines").expect("example fixture")
}

#[test]
fn example_user_comparator_loads_and_runs() {
    let path = sorted_lines();
    let mut host = ComparatorHost::new(test_options()).expect("host");
    host.register_builtins().expect("built-ins");
    host.register_user("sorted-lines", path, &sha256_of(path))
        .expect("register");

    let info = host
        .comparators()
        .into_iter()
        .find(|c| c.name == "sorted-lines")
        .expect("listed");
    assert_eq!(info.source, ComparatorSource::User { path: path.into() });
    assert_eq!(info.sha256, sha256_of(path));

    host.validate("sorted-lines", r#"{"numeric":true}"#)
        .expect("valid");
    let err = host
        .validate("sorted-lines", r#"{"numerik":true}"#)
        .expect_err("typo");
    assert!(err.to_string().contains("numerik"), "{err}");

    let sorted = ObservedStream::complete(b"2\n10\n33\n".to_vec());
    assert_eq!(
        host.compare("sorted-lines", r#"{"numeric":true}"#, &sorted)
            .expect("call"),
        ComparisonOutcome::Match
    );
    // As bytes, "10" sorts before "2".
    assert!(matches!(
        host.compare("sorted-lines", "{}", &sorted).expect("call"),
        ComparisonOutcome::Mismatch(_)
    ));
    let cut = ObservedStream::truncated(b"1\n2\n3".to_vec(), 100);
    assert!(matches!(
        host.compare("sorted-lines", "{}", &cut).expect("call"),
        ComparisonOutcome::Undetermined(_)
    ));
}

#[test]
fn pin_mismatch_is_refused_naming_the_comparator_and_both_hashes() {
    let path = sorted_lines();
    let actual = sha256_of(path);
    let wrong = "0".repeat(64);
    let mut host = ComparatorHost::new(test_options()).expect("host");
    let err = host
        .register_user("my-sorter", path, &wrong)
        .expect_err("must refuse");
    assert!(
        matches!(err, ComparatorError::PinMismatch { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("\"my-sorter\""), "{text}");
    assert!(text.contains(&actual) && text.contains(&wrong), "{text}");
    assert!(host.names().is_empty(), "nothing registered");

    // Upper-case hex pins are the same pin.
    host.register_user("my-sorter", path, &actual.to_uppercase())
        .expect("upper-case pin");
}

#[test]
fn bad_pins_missing_files_and_duplicates_are_refused() {
    let mut host = ComparatorHost::new(test_options()).expect("host");
    host.register_builtins().expect("built-ins");
    let err = host
        .register_user("x", sorted_lines(), "abc")
        .expect_err("short pin");
    assert!(matches!(err, ComparatorError::BadPin { .. }), "{err:?}");
    let err = host
        .register_user("x", "/nonexistent/x.wasm", &"a".repeat(64))
        .expect_err("missing file");
    assert!(err.to_string().contains("/nonexistent/x.wasm"), "{err}");
    let path = sorted_lines();
    let err = host
        .register_user("equals", path, &sha256_of(path))
        .expect_err("shadowing a built-in");
    assert!(matches!(err, ComparatorError::Duplicate(_)), "{err:?}");
}

#[test]
fn a_file_that_is_not_a_component_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("junk.wasm");
    std::fs::write(&path, b"\0asm junk").expect("write");
    let sha = {
        use sha2::{Digest, Sha256};
        hex::encode(Sha256::digest(b"\0asm junk"))
    };
    let mut host = ComparatorHost::new(test_options()).expect("host");
    let err = host.register_user("junk", &path, &sha).expect_err("junk");
    assert!(
        matches!(err, ComparatorError::NotAComparator { .. }),
        "{err:?}"
    );
}

#[test]
fn compiled_comparators_are_cached_on_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = HostOptions {
        cache_dir: Some(dir.path().join("cache")),
        ..test_options()
    };
    let started = std::time::Instant::now();
    let mut host = ComparatorHost::new(options.clone()).expect("host");
    host.register_builtins().expect("built-ins");
    let cold = started.elapsed();
    assert!(host.warnings().is_empty(), "{:?}", host.warnings());
    let entries = std::fs::read_dir(dir.path().join("cache"))
        .expect("cache dir")
        .count();
    // One entry per built-in component: the six comparators, and the one
    // component that the six built-in checkers share (compiled once).
    assert_eq!(entries, 7, "one entry per built-in component");
    drop(host);

    let started = std::time::Instant::now();
    let mut host = ComparatorHost::new(options).expect("host");
    host.register_builtins().expect("built-ins");
    let warm = started.elapsed();
    eprintln!("host with built-ins: compiled {cold:?}, from cache {warm:?}");
    assert!(
        warm * 3 < cold,
        "cached start {warm:?} should be far below {cold:?}"
    );
    assert_eq!(
        host.compare(
            "equals",
            r#"{"value":"x"}"#,
            &ObservedStream::complete(b"x".to_vec())
        )
        .expect("call"),
        ComparisonOutcome::Match
    );
}

#[cfg(unix)]
#[test]
fn a_cache_others_can_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("shared");
    std::fs::create_dir(&cache).expect("mkdir");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let options = HostOptions {
        cache_dir: Some(cache),
        ..test_options()
    };
    let err = ComparatorHost::new(options).err().expect("refused");
    assert!(err.to_string().contains("writable by other users"), "{err}");
}

#[test]
fn listing_serializes_for_the_cli() {
    let info = crate::host()
        .comparators()
        .into_iter()
        .find(|c| c.name == "equals")
        .expect("equals");
    let json = serde_json::to_value(&info).expect("serialize");
    assert_eq!(json["name"], "equals");
    assert_eq!(json["kind"], "builtin");
    assert_eq!(json["sha256"].as_str().map(str::len), Some(64));
}

fn no_connections() -> &'static str {
    test_guests::example("no-connections").expect("example fixture")
}

fn connect_event(address: &str, port: u16) -> ObservedEvent {
    ObservedEvent {
        kind: "net.connect".into(),
        at_ms: 12,
        result: Some("ENETUNREACH".into()),
        json: format!(
            r#"{{"at_ms":12,"kind":"net.connect","family":"inet","address":"{address}","port":{port},"result":"ENETUNREACH"}}"#
        ),
    }
}

fn trace(events: Vec<ObservedEvent>) -> ObservedTrace {
    ObservedTrace {
        traced_kinds: vec!["net.connect".into(), "proc.exec".into()],
        counts: if events.is_empty() {
            Vec::new()
        } else {
            vec![("net.connect".into(), events.len() as u64)]
        },
        events,
        ..ObservedTrace::default()
    }
}

#[test]
fn a_comparator_of_version_0_2_0_judges_the_traced_behaviour_and_0_1_0_ones_still_run() {
    let path = no_connections();
    let mut host = ComparatorHost::new(test_options()).expect("host");
    host.register_user("no-connections", path, &sha256_of(path))
        .expect("a 0.2.0 component registers");
    host.register_user("sorted-lines", sorted_lines(), &sha256_of(sorted_lines()))
        .expect("a 0.1.0 component registers beside it");
    let stream = ObservedStream::complete(b"1\n2\n".to_vec());
    let allow = r#"{"allow": ["10.0.0.1:80"]}"#;
    let judge = |behaviour: ObservedBehaviour| {
        host.compare_in_context("no-connections", allow, &stream, &behaviour)
            .expect("call")
    };

    // A recorded connection to an address not allowed proves a mismatch.
    let outcome = judge(ObservedBehaviour::Traced(trace(vec![connect_event(
        "203.0.113.9",
        443,
    )])));
    let ComparisonOutcome::Mismatch(why) = outcome else {
        panic!("{outcome:?}")
    };
    assert!(why.contains("203.0.113.9:443"), "{why}");
    // An allowed one, and a complete trace with none: match.
    assert_eq!(
        judge(ObservedBehaviour::Traced(trace(vec![connect_event(
            "10.0.0.1", 80
        )]))),
        ComparisonOutcome::Match
    );
    assert_eq!(
        judge(ObservedBehaviour::Traced(trace(Vec::new()))),
        ComparisonOutcome::Match
    );
    // Only a complete trace proves an absence.
    let mut cut = trace(Vec::new());
    cut.incomplete = Some("the stream was cut".into());
    assert!(matches!(
        judge(ObservedBehaviour::Traced(cut)),
        ComparisonOutcome::Undetermined(_)
    ));
    let mut dropped = trace(Vec::new());
    dropped.counts = vec![("net.connect".into(), 3)];
    dropped.dropped = 3;
    assert!(matches!(
        judge(ObservedBehaviour::Traced(dropped)),
        ComparisonOutcome::Undetermined(_)
    ));
    assert!(matches!(
        judge(ObservedBehaviour::NotTraced("runc".into())),
        ComparisonOutcome::Undetermined(_)
    ));
    assert!(matches!(
        judge(ObservedBehaviour::Absent),
        ComparisonOutcome::Undetermined(_)
    ));
    // Its parameters are checked like any comparator's.
    let err = host
        .validate("no-connections", r#"{"alow": []}"#)
        .expect_err("typo");
    assert!(err.to_string().contains("alow"), "{err}");

    // The 0.1.0 comparator is called as before; the behaviour is not its.
    assert_eq!(
        host.compare_in_context(
            "sorted-lines",
            "{}",
            &stream,
            &ObservedBehaviour::Traced(trace(vec![connect_event("203.0.113.9", 443)]))
        )
        .expect("call"),
        ComparisonOutcome::Match
    );
}
