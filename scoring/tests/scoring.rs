//! The scorer against the scripted sandbox client: verdict rules, evidence
//! reuse, sharing and cancellation, replay refusals, the store's part.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{NativeComparators, SQUARE, expect, profile, profiles};
use progscore_evidence::{
    EvidenceStore, Observation, ObservationFilter, ScoreFilter, ScoreStatus, StoreError,
};
use progscore_sandbox::fake::{FakeRequest, ScriptedClient, event, exited_event};
use progscore_sandbox::{
    ByteString, CapturedStream, InvocationEvent, Outcome, SandboxError, TimeLimit, sha256_hex,
};
use progscore_scoring::{
    Attempt, Condition, EvidenceUse, ExpectationError, ObservationRef, ProgramCase,
    ProgramExecutionScorer, ProgramExecutionSource, ProgramInput, ProgramResult, ReasonKind,
    ReplayRefusal, ReplayRequest, RescoreRequest, ScoreRequest, ScoringError, ScoringExpectation,
    TextCondition,
};
use tokio_util::sync::CancellationToken;

/// Runs the square program "for real" in the fake's terms: the square of the
/// first argument for the square program, a syntax error for anything else.
fn square_responder(request: &FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> {
    Ok(request
        .invocations
        .iter()
        .map(|invocation| {
            let n = invocation.args.first().and_then(|a| a.parse::<i64>().ok());
            match n {
                Some(n) if request.program == SQUARE => {
                    exited_event(0, format!("{}\n", n * n).as_bytes(), b"")
                }
                _ => exited_event(1, b"", b"SyntaxError: invalid syntax\n"),
            }
        })
        .collect())
}

struct Setup {
    client: ScriptedClient,
    store: Arc<EvidenceStore>,
    scorer: ProgramExecutionScorer,
}

impl Setup {
    fn new(client: ScriptedClient) -> Setup {
        Setup::with_store(client, Arc::new(EvidenceStore::open_in_memory().unwrap()))
    }

    fn with_store(client: ScriptedClient, store: Arc<EvidenceStore>) -> Setup {
        let source = ProgramExecutionSource::new(Arc::new(client.clone()), store.clone());
        let scorer = ProgramExecutionScorer::new(source, Arc::new(NativeComparators));
        Setup {
            client,
            store,
            scorer,
        }
    }

    fn square() -> Setup {
        Setup::new(ScriptedClient::new(profiles()).with_responder(square_responder))
    }

    fn started(&self) -> usize {
        self.client.counters().started.load(Ordering::SeqCst)
    }

    fn cancelled(&self) -> usize {
        self.client.counters().cancelled.load(Ordering::SeqCst)
    }
}

fn inline(program: &[u8], expectation: ScoringExpectation) -> ScoreRequest {
    ScoreRequest::new(ProgramInput::Inline(program.to_vec()), expectation)
}

/// A client whose every run returns these events (one per invocation expected).
fn scripted(events: Vec<InvocationEvent>) -> Setup {
    Setup::new(ScriptedClient::new(profiles()).with_responder(move |_| Ok(events.clone())))
}

fn truncated(kept: &[u8], total: u64) -> CapturedStream {
    CapturedStream {
        data: ByteString(kept.to_vec()),
        truncated: true,
        total_bytes: total,
    }
}

// ---------------------------------------------------------------- shapes

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
    fn assert_send<T: Send>(_: &T) {}
    let setup = Setup::square();
    let future = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])));
    assert_send(&future);
}

// ---------------------------------------------------------------- doc flow

#[tokio::test]
async fn doc_flow_square_is_true_then_replay_with_8_is_false_without_running() {
    let setup = Setup::square();
    let score = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])).item_id("square-3"))
        .await
        .unwrap();
    assert_eq!(score.status, ScoreStatus::Complete);
    assert_eq!(score.value, Some(true));
    assert_eq!(
        score.rationale,
        "All 1 case(s) produced the expected result under python."
    );
    assert_eq!(score.evidence, EvidenceUse::Ran);
    assert_eq!(score.observation_ids.len(), 1);
    assert_eq!(score.cases[0].matched, Some(true));
    assert_eq!(score.cases[0].outcome, "exited");
    assert_eq!(setup.started(), 1);

    let replayed = setup
        .scorer
        .replay(ReplayRequest {
            item_id: Some("square-3".into()),
            observation: ObservationRef::Id(score.observation_ids[0].clone()),
            expectation: expect("python", &[(&["3"], "8")]),
        })
        .unwrap();
    assert_eq!(replayed.value, Some(false));
    assert_eq!(
        replayed.rationale,
        "The program did not produce the expected result under python: case 0 output did not match."
    );
    assert_eq!(replayed.observation_ids, score.observation_ids);
    assert_eq!(replayed.evidence, EvidenceUse::Replayed);
    assert_eq!(setup.started(), 1, "replay ran something");

    // Both scores are recorded with their expectation and its fingerprint.
    let stored = setup.store.score(replayed.score_id).unwrap().unwrap();
    assert_eq!(
        stored.record.expectation_sha256,
        expect("python", &[(&["3"], "8")]).fingerprint().unwrap()
    );
    assert_eq!(
        stored.record.expectation,
        serde_json::to_value(expect("python", &[(&["3"], "8")])).unwrap()
    );
    let counts = setup.store.counts().unwrap();
    assert_eq!(
        (counts.observations, counts.scores, counts.links),
        (1, 2, 2)
    );
}

// ---------------------------------------------------------------- verdict rules

#[tokio::test]
async fn every_verdict_rule() {
    let ok = || exited_event(0, b"9\n", b"");
    let py = |cases: usize| expect("python", &vec![(&["3"][..], "9"); cases]);
    struct Rule {
        events: Vec<InvocationEvent>,
        value: Option<bool>,
        rationale: &'static str,
    }
    let rules = vec![
        Rule {
            events: vec![ok(), ok()],
            value: Some(true),
            rationale: "All 2 case(s) produced the expected result under python.",
        },
        Rule {
            events: vec![ok(), exited_event(0, b"10\n", b"")],
            value: Some(false),
            rationale: "The program did not produce the expected result under python: case 1 output did not match.",
        },
        Rule {
            events: vec![exited_event(1, b"9\n", b"boom")],
            value: Some(false),
            rationale: "The program did not produce the expected result under python: case 0 exited with code 1, expected 0.",
        },
        Rule {
            events: vec![event(Outcome::timed_out(), b"9\n", b"")],
            value: Some(false),
            rationale: "The program did not produce the expected result under python: case 0 timed out.",
        },
        Rule {
            events: vec![event(Outcome::MemoryLimit, b"", b"")],
            value: Some(false),
            rationale: "The program did not produce the expected result under python: case 0 exceeded its memory limit.",
        },
        Rule {
            events: vec![
                event(
                    Outcome::SandboxError {
                        message: "container create failed".into(),
                    },
                    b"",
                    b"",
                ),
                InvocationEvent::not_run("an earlier invocation hit a sandbox error"),
            ],
            value: None,
            rationale: "The result under python is undetermined: case 0 hit a sandbox error: container create failed.",
        },
        Rule {
            events: vec![
                ok(),
                InvocationEvent::not_run("an earlier invocation hit a sandbox error"),
            ],
            value: None,
            rationale: "The result under python is undetermined: case 1 was not run: an earlier invocation hit a sandbox error.",
        },
        // A proven failure wins over an undetermined case, whatever the order.
        Rule {
            events: vec![
                event(
                    Outcome::SandboxError {
                        message: "engine hiccup".into(),
                    },
                    b"",
                    b"",
                ),
                event(Outcome::timed_out(), b"", b""),
            ],
            value: Some(false),
            rationale: "The program did not produce the expected result under python: case 1 timed out.",
        },
    ];
    for rule in rules {
        let cases = rule.events.len();
        let setup = scripted(rule.events.clone());
        let score = setup.scorer.score(inline(SQUARE, py(cases))).await.unwrap();
        assert_eq!(score.value, rule.value, "{:?}", rule.events);
        assert_eq!(score.rationale, rule.rationale);
        assert_eq!(
            score.status,
            if rule.value.is_some() {
                ScoreStatus::Complete
            } else {
                ScoreStatus::Undetermined
            }
        );
        assert_eq!(score.reason.is_some(), rule.value.is_none());
    }
}

#[tokio::test]
async fn a_comparator_that_cannot_decide_leaves_the_case_undetermined() {
    let setup = scripted(vec![exited_event(0, b"9\n", b"")]);
    let mut expectation = expect("python", &[(&["3"], "9")]);
    let Condition::ProgramBehaves(behaves) = &mut expectation.conditions[0];
    behaves.cases[0].expected.stderr = Some(TextCondition::new("undecided", serde_json::json!({})));
    let score = setup
        .scorer
        .score(inline(SQUARE, expectation))
        .await
        .unwrap();
    assert_eq!(score.status, ScoreStatus::Undetermined);
    assert_eq!(
        score.rationale,
        "The result under python is undetermined: case 0 error output could not be checked: it never decides."
    );
    assert_eq!(score.cases[0].matched, None);
}

#[tokio::test]
async fn stderr_and_exit_code_conditions_are_checked() {
    let setup = scripted(vec![exited_event(3, b"", b"usage: square N\n")]);
    let expectation = ScoringExpectation::program_behaves(
        "python",
        vec![ProgramCase {
            invocation: progscore_sandbox::Invocation::default(),
            expected: ProgramResult {
                stdout: None,
                stderr: Some(TextCondition::equals("usage: square N")),
                exit_code: 3,
            },
        }],
    );
    let score = setup
        .scorer
        .score(inline(SQUARE, expectation.clone()))
        .await
        .unwrap();
    assert_eq!(score.value, Some(true));
    let setup = scripted(vec![exited_event(3, b"", b"oops\n")]);
    let score = setup
        .scorer
        .score(inline(SQUARE, expectation))
        .await
        .unwrap();
    assert_eq!(
        score.rationale,
        "The program did not produce the expected result under python: case 0 error output did not match."
    );
}

#[tokio::test]
async fn truncated_output_is_undetermined_unless_the_prefix_already_differs() {
    let mut nine = b"9".to_vec();
    nine.extend(std::iter::repeat_n(b' ', 127));
    let setup = scripted(vec![InvocationEvent {
        stdout: truncated(&nine, 1 + 1024 * 1024),
        ..exited_event(0, b"", b"")
    }]);
    let score = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(
        score.status,
        ScoreStatus::Undetermined,
        "{}",
        score.rationale
    );
    assert_eq!(score.value, None);
    assert!(
        score
            .rationale
            .contains("case 0 output could not be checked"),
        "{}",
        score.rationale
    );

    let mut eight = b"8".to_vec();
    eight.extend(std::iter::repeat_n(b'x', 127));
    let setup = scripted(vec![InvocationEvent {
        stdout: truncated(&eight, 1 + 1024 * 1024),
        ..exited_event(0, b"", b"")
    }]);
    let score = setup
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(score.value, Some(false));
}

// ---------------------------------------------------------------- faults

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

// ---------------------------------------------------------------- reuse

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

// ---------------------------------------------------------------- sharing and cancellation

fn slow_square() -> Setup {
    Setup::new(
        ScriptedClient::new(profiles())
            .with_responder(square_responder)
            .with_delay(Duration::from_millis(300)),
    )
}

#[tokio::test]
async fn concurrent_scores_of_one_attempt_share_one_run() {
    let setup = slow_square();
    let request = || inline(SQUARE, expect("python", &[(&["3"], "9")]));
    let (a, b) = tokio::join!(setup.scorer.score(request()), setup.scorer.score(request()));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(setup.started(), 1);
    assert_eq!(a.observation_ids, b.observation_ids);
    let mut origins = [a.evidence, b.evidence];
    origins.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(origins, [EvidenceUse::Joined, EvidenceUse::Ran]);
    let counts = setup.store.counts().unwrap();
    assert_eq!(
        (counts.observations, counts.scores, counts.links),
        (1, 2, 2)
    );
    assert_eq!(setup.scorer.source().in_flight(), 0);
}

#[tokio::test]
async fn one_of_two_callers_cancelled_the_other_still_gets_its_verdict() {
    let setup = slow_square();
    let cancel = CancellationToken::new();
    let request = || inline(SQUARE, expect("python", &[(&["3"], "9")]));
    let cancelled = setup.scorer.score(request().cancel(cancel.clone()));
    let kept = setup.scorer.score(request());
    let canceller = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
    };
    let (cancelled, kept, ()) = tokio::join!(cancelled, kept, canceller);
    assert!(
        matches!(cancelled, Err(ScoringError::Cancelled)),
        "{cancelled:?}"
    );
    assert_eq!(kept.unwrap().value, Some(true));
    assert_eq!(setup.started(), 1);
    assert_eq!(
        setup.cancelled(),
        0,
        "the run was stopped although a caller still waited"
    );
    assert_eq!(setup.store.counts().unwrap().scores, 1);
}

#[tokio::test]
async fn both_callers_cancelled_stop_the_run_and_the_last_returns_after_cleanup() {
    let setup = slow_square();
    let first = CancellationToken::new();
    let second = CancellationToken::new();
    let request = || inline(SQUARE, expect("python", &[(&["3"], "9")]));
    let a = setup.scorer.score(request().cancel(first.clone()));
    let b = async {
        let result = setup.scorer.score(request().cancel(second.clone())).await;
        // The last caller to leave returns only once the run's future was
        // dropped, i.e. after the sandbox's cleanup.
        (result, setup.cancelled())
    };
    let canceller = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        first.cancel();
        tokio::time::sleep(Duration::from_millis(50)).await;
        second.cancel();
    };
    let (a, (b, cancelled_when_b_returned), ()) = tokio::join!(a, b, canceller);
    assert!(matches!(a, Err(ScoringError::Cancelled)));
    assert!(matches!(b, Err(ScoringError::Cancelled)));
    assert_eq!(cancelled_when_b_returned, 1);
    assert_eq!(setup.client.counters().completed.load(Ordering::SeqCst), 0);
    assert_eq!(setup.scorer.source().in_flight(), 0);
    let counts = setup.store.counts().unwrap();
    assert_eq!(
        (counts.observations, counts.scores),
        (0, 0),
        "a cancelled score wrote something"
    );
    // Nothing is remembered of the cancelled run: the next score runs it.
    let score = setup.scorer.score(request()).await.unwrap();
    assert_eq!(score.value, Some(true));
    assert_eq!(setup.started(), 2);
}

#[tokio::test]
async fn dropping_the_only_callers_future_stops_the_run() {
    let setup = slow_square();
    let request = inline(SQUARE, expect("python", &[(&["3"], "9")]));
    let timed_out =
        tokio::time::timeout(Duration::from_millis(50), setup.scorer.score(request)).await;
    assert!(timed_out.is_err());
    // The drop aborts the run's task; the runtime drops its future next.
    for _ in 0..100 {
        if setup.cancelled() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(setup.cancelled(), 1);
    assert_eq!(setup.scorer.source().in_flight(), 0);
}

// ---------------------------------------------------------------- store races

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
            profile: "python".into(),
            program_sha256: attempt.program_sha256.clone(),
            events: vec![exited_event(0, b"8\n", b"")],
            sandbox_warnings: Vec::new(),
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
async fn child_process_scores_into_a_shared_file() {
    let Ok(path) = std::env::var(CHILD_DB) else {
        return;
    };
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
                    "child_process_scores_into_a_shared_file",
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

// ---------------------------------------------------------------- validation

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

// ---------------------------------------------------------------- replay

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
    let refusal = |request: ReplayRequest| match setup.scorer.replay(request) {
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

// ---------------------------------------------------------------- rescore

#[tokio::test]
async fn rescore_reports_changed_verdicts_and_never_runs() {
    let setup = Setup::square();
    let score = |expected: &'static str| {
        inline(SQUARE, expect("python", &[(&["3"], expected)])).item_id("square-3")
    };
    setup.scorer.score(score("9")).await.unwrap();
    let rescore = |item: &str, program: &[u8], expected: &str| RescoreRequest {
        item_id: Some(item.into()),
        program: ProgramInput::Inline(program.to_vec()),
        expectation: expect("python", &[(&["3"], expected)]),
    };
    let same = setup
        .scorer
        .rescore(rescore("square-3", SQUARE, "9"))
        .unwrap();
    assert!(!same.changed);
    assert_eq!(same.previous.as_ref().unwrap().record.value, Some(true));
    let changed = setup
        .scorer
        .rescore(rescore("square-3", SQUARE, "8"))
        .unwrap();
    assert!(changed.changed);
    assert_eq!(changed.score.value, Some(false));
    let unseen = setup
        .scorer
        .rescore(rescore("cube-3", b"print(27)", "27"))
        .unwrap();
    assert_eq!(unseen.score.status, ScoreStatus::Undetermined);
    assert_eq!(unseen.score.reason.as_deref(), Some("no stored evidence"));
    assert_eq!(
        unseen.score.rationale,
        "The result under python is undetermined: no stored evidence."
    );
    assert!(unseen.score.observation_ids.is_empty());
    assert!(unseen.previous.is_none() && !unseen.changed);
    let batch = setup
        .scorer
        .rescore_batch(vec![
            rescore("square-3", SQUARE, "9"),
            RescoreRequest {
                item_id: Some("bad".into()),
                program: ProgramInput::Inline(SQUARE.to_vec()),
                expectation: expect("ruby", &[(&["3"], "9")]),
            },
        ])
        .unwrap();
    let first = batch[0].as_ref().unwrap();
    assert!(first.changed, "8 (false) before, 9 (true) now");
    assert_eq!(first.score.value, Some(true));
    assert!(matches!(batch[1], Err(ScoringError::Expectation(_))));
    assert_eq!(setup.started(), 1);
}
