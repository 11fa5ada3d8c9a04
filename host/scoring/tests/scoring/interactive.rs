//! Interactive items on the scripted sandbox: the interactor's verdict
//! decides a case the program ended as expected; the interactor's faults,
//! and a timeout that may have been a wait for the interactor, are
//! undetermined whatever the program did after; the run (both sides and
//! the transcripts) is one observation, so a rescore runs nothing.

use progscore_sandbox::{Interaction, ProgramRun, ResourceUsage, Side, Transcript, Turn};

use super::*;

const PROGRAM: &[u8] = b"# asks, reads, answers\n";
const INTERACTOR: &str = "# a testlib interactor\n";

/// The scenario of case `index`: its input, as the interactor was given it.
fn scenario(request: &FakeRequest, index: usize) -> String {
    let interactor = request.interactor.as_ref().expect("an interactive request");
    let path = format!("case-{index}/input");
    interactor
        .files
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, bytes)| String::from_utf8_lossy(bytes).to_string())
        .unwrap_or_else(|| panic!("the interactor was not given {path}"))
}

fn timed_out(cpu_ms: u64) -> InvocationEvent {
    let mut timed_out = event(
        Outcome::TimedOut {
            limit: TimeLimit::Wall,
            unconfirmed: None,
        },
        b"? 1\n",
        b"",
    );
    timed_out.usage = Some(ResourceUsage {
        cpu_ms: Some(cpu_ms),
        ..ResourceUsage::default()
    });
    let mut limits = profiles()[0].limits.clone();
    limits.timeout_ms = 1000;
    limits.cpus = 1.0;
    timed_out.provenance = Some(progscore_sandbox::Provenance {
        backend: "docker".into(),
        runtime: "runc".into(),
        artifact: String::new(),
        image_id: None,
        repo_digests: Vec::new(),
        engine: String::new(),
        engine_name: None,
        command: Vec::new(),
        user: None,
        container: None,
        limits,
    });
    timed_out
}

/// (program, interactor, who ended first) for each scenario.
fn sides(scenario: &str) -> (InvocationEvent, InvocationEvent, Side) {
    let ok = || exited_event(0, b"? 5\n! 5\n", b"");
    match scenario {
        "accepted" => (
            ok(),
            exited_event(0, b"<\n=\n", b"ok found it"),
            Side::Program,
        ),
        "points" => (
            ok(),
            exited_event(7, b"=\n", b"points 0.5 used twice the queries"),
            Side::Program,
        ),
        // The interactor said wrong answer and left; the program, its
        // input gone, crashed.
        "wrong-then-crash" => (
            exited_event(134, b"? 5\n", b""),
            exited_event(1, b"", b"wrong answer query limit exceeded"),
            Side::Interactor,
        ),
        // The interactor crashed first; the program then crashed too.
        "interactor-crash" => (
            exited_event(134, b"? 5\n", b""),
            exited_event(139, b"", b""),
            Side::Interactor,
        ),
        "interactor-fail" => (
            ok(),
            exited_event(3, b"", b"FAIL the input is broken"),
            Side::Program,
        ),
        // Killed at its limit while the interactor still ran, having
        // used almost no CPU: it may have waited for the interactor.
        "idle-timeout" => (
            timed_out(3),
            exited_event(1, b"", b"wrong answer unexpected end"),
            Side::Program,
        ),
        // Killed at its limit having worked through it.
        "busy-timeout" => (
            timed_out(990),
            exited_event(1, b"", b"wrong answer unexpected end"),
            Side::Program,
        ),
        "interactor-sandbox" => (
            ok(),
            InvocationEvent::sandbox_error("the interactor's container was removed from outside"),
            Side::Program,
        ),
        other => panic!("unknown scenario {other}"),
    }
}

fn transcript(first: Side) -> Transcript {
    let (program_ended_us, interactor_ended_us) = match first {
        Side::Program => (Some(900), Some(950)),
        Side::Interactor => (Some(950), Some(900)),
    };
    Transcript {
        turns: vec![
            Turn {
                from: Side::Program,
                at_us: 100,
                bytes: 4,
            },
            Turn {
                from: Side::Interactor,
                at_us: 200,
                bytes: 2,
            },
        ],
        program_ended_us,
        interactor_ended_us,
        ..Transcript::default()
    }
}

/// A client playing each case's scenario, counting runs.
fn setup() -> Setup {
    let client = ScriptedClient::new(profiles())
        .with_responder(|request| {
            Ok((0..request.invocations.len())
                .map(|index| sides(&scenario(request, index)).0)
                .collect())
        })
        .with_interaction(|request| {
            let interactor = request.interactor.as_ref().expect("an interactor");
            let (events, transcripts) = (0..request.invocations.len())
                .map(|index| {
                    let (_, interactor, first) = sides(&scenario(request, index));
                    (interactor, transcript(first))
                })
                .unzip();
            Interaction {
                interactor: ProgramRun {
                    profile: interactor.profile.clone(),
                    program_sha256: sha256_hex(&interactor.program),
                    events,
                    sandbox_warnings: Vec::new(),
                    compile: None,
                    interaction: None,
                },
                transcripts,
            }
        });
    Setup::new(client)
}

fn interactive(scenarios: &[&str], interactor: serde_json::Value) -> ScoringExpectation {
    let cases = scenarios
        .iter()
        .map(|scenario| ProgramCase {
            invocation: progscore_sandbox::Invocation::default().stdin(scenario.as_bytes()),
            expected: ProgramResult {
                stdout: None,
                stderr: None,
                exit_code: 0,
                behaviour: None,
                answer: Some(ByteString(b"5".to_vec())),
            },
        })
        .collect();
    let mut expectation = ScoringExpectation::program_behaves("python", cases);
    let Condition::ProgramBehaves(behaves) = &mut expectation.conditions[0];
    behaves.interactor = Some(serde_json::from_value(interactor).expect("an interactor"));
    expectation
}

fn interactor() -> serde_json::Value {
    serde_json::json!({"profile": "other", "source": INTERACTOR})
}

async fn scored(setup: &Setup, scenarios: &[&str]) -> progscore_scoring::Score {
    setup
        .scorer
        .score(inline(PROGRAM, interactive(scenarios, interactor())).item_id("guess"))
        .await
        .expect("scored")
}

#[tokio::test]
async fn the_interactor_decides_a_case_the_program_ended_as_expected() {
    let setup = setup();
    let accepted = scored(&setup, &["accepted", "accepted"]).await;
    assert_eq!(accepted.value, Some(true), "{}", accepted.rationale);
    assert_eq!(
        accepted.cases[0].checker.as_deref(),
        Some("ok found it"),
        "the interactor's message is shown"
    );
    let points = scored(&setup, &["accepted", "points"]).await;
    assert_eq!(points.value, Some(false));
    assert_eq!(points.cases[1].score, Some(0.5));
    // The interactor got each case's input and answer as files, the
    // program neither: its stdin is the conversation.
}

#[tokio::test]
async fn a_wrong_answer_given_first_is_false_even_if_the_program_crashed_after() {
    let setup = setup();
    let score = scored(&setup, &["accepted", "wrong-then-crash"]).await;
    assert_eq!(score.value, Some(false));
    let detail = score.cases[1].detail.as_deref().unwrap_or_default();
    assert!(detail.contains("query limit exceeded"), "{detail}");
}

#[tokio::test]
async fn the_interactors_faults_are_undetermined_whatever_the_program_did_after() {
    for (scenario, kind) in [
        ("interactor-crash", ReasonKind::CheckerUndecided),
        ("interactor-fail", ReasonKind::CheckerUndecided),
        ("interactor-sandbox", ReasonKind::SandboxError),
    ] {
        let setup = setup();
        let score = scored(&setup, &["accepted", scenario]).await;
        assert_eq!(score.value, None, "{scenario}: {}", score.rationale);
        assert_eq!(
            score.reason_kind,
            Some(kind),
            "{scenario}: {:?}",
            score.reason
        );
    }
}

#[tokio::test]
async fn a_timeout_is_the_programs_only_when_its_cpu_proves_it_worked_through_it() {
    let setup = setup();
    let idle = scored(&setup, &["idle-timeout"]).await;
    assert_eq!(idle.value, None, "{}", idle.rationale);
    assert_eq!(idle.reason_kind, Some(ReasonKind::UnconfirmedTimeout));
    assert!(
        idle.reason
            .as_deref()
            .is_some_and(|r| r.contains("waited for the interactor")),
        "{:?}",
        idle.reason
    );
    let busy = scored(&setup, &["busy-timeout"]).await;
    assert_eq!(busy.value, Some(false), "{}", busy.rationale);
}

#[tokio::test]
async fn one_run_holds_both_sides_and_a_rescore_with_other_points_runs_nothing() {
    let setup = setup();
    scored(&setup, &["accepted", "points"]).await;
    assert_eq!(setup.started(), 1, "the pair is one run");
    let stored = setup
        .store
        .list_observations(&ObservationFilter::default())
        .unwrap();
    assert_eq!(stored.len(), 1);
    let observation = setup.store.observation(&stored[0].id).unwrap().unwrap();
    let interaction = observation
        .run
        .interaction
        .expect("the conversation is kept");
    assert_eq!(interaction.interactor.events.len(), 2);
    assert_eq!(interaction.transcripts[1].bytes_from(Side::Program), 4);
    // Another verdict rule (points out of 2): the same evidence.
    let rescore = setup
        .scorer
        .replayer()
        .rescore(RescoreRequest {
            item_id: Some("guess".into()),
            program: ProgramInput::Inline(PROGRAM.to_vec()),
            expectation: interactive(
                &["accepted", "points"],
                serde_json::json!({"profile": "other", "source": INTERACTOR, "max_points": 2}),
            ),
        })
        .unwrap();
    assert_eq!(rescore.score.cases[1].score, Some(0.25));
    assert_eq!(setup.started(), 1, "a rescore runs nothing");
    // Another interactor talks another conversation: it runs again.
    let other = setup
        .scorer
        .score(
            inline(
                PROGRAM,
                interactive(
                    &["accepted", "points"],
                    serde_json::json!({"profile": "other", "source": "# another\n"}),
                ),
            )
            .item_id("guess"),
        )
        .await
        .unwrap();
    assert_eq!(other.evidence, EvidenceUse::Ran);
    assert_eq!(setup.started(), 2);
}

#[tokio::test]
async fn an_interactor_is_refused_beside_a_checker_or_under_another_protocol() {
    let setup = setup();
    let mut with_checker = interactive(&["accepted"], interactor());
    let Condition::ProgramBehaves(behaves) = &mut with_checker.conditions[0];
    behaves.checker = Some(serde_json::from_value(serde_json::json!("tokens")).unwrap());
    let refused = setup.scorer.validate(&with_checker).unwrap_err();
    assert!(refused.to_string().contains("interactor"), "{refused}");
    let cms = interactive(
        &["accepted"],
        serde_json::json!({"profile": "other", "source": INTERACTOR, "protocol": "cms"}),
    );
    let refused = setup.scorer.validate(&cms).unwrap_err();
    assert_eq!(
        refused.field_path(),
        "conditions[0].program_behaves.interactor.protocol"
    );
    let unknown = interactive(
        &["accepted"],
        serde_json::json!({"profile": "nope", "source": INTERACTOR}),
    );
    let refused = setup.scorer.validate(&unknown).unwrap_err();
    assert!(
        refused.to_string().contains("unknown profile `nope`"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_run_whose_interactor_proved_nothing_is_never_reused() {
    for scenario in ["interactor-sandbox", "idle-timeout"] {
        let setup = setup();
        let first = scored(&setup, &["accepted", scenario]).await;
        assert_eq!(first.value, None, "{scenario}");
        let again = scored(&setup, &["accepted", scenario]).await;
        assert_eq!(again.evidence, EvidenceUse::Ran, "{scenario}");
        assert_eq!(setup.started(), 2, "{scenario}: it runs again");
    }
    // A proven conversation is reused.
    let setup = setup();
    scored(&setup, &["accepted", "busy-timeout"]).await;
    let again = scored(&setup, &["accepted", "busy-timeout"]).await;
    assert_eq!(again.evidence, EvidenceUse::Stored);
    assert_eq!(setup.started(), 1);
}
