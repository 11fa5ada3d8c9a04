//! Gathering a report from result lines and a real store file: a line whose
//! ids name another item's evidence never shows that evidence.

use progscore_report::{Limits, ResultLines, gather};
use progscore_sandbox::fake::exited_event;
use progscore_sandbox::{Invocation, ProgramRun, sha256_hex};
use progscore_scoring::evidence::{
    EvidenceStore, Observation, ScoreOrigin, ScoreRecord, ScoreStatus,
};
use serde_json::json;

/// One item's run, stored with its score; the score's id.
fn store_item(store: &EvidenceStore, item: &str, program: &str, stdout: &str) -> (i64, String) {
    let program_sha256 = sha256_hex(program.as_bytes());
    let id = format!("obs-{}", &sha256_hex(item.as_bytes())[..32]);
    let observation = Observation {
        id: id.clone(),
        attempt_key: sha256_hex(id.as_bytes()),
        source: "program_execution/v1".into(),
        profile: "python".into(),
        profile_fingerprint: json!({"backend": "docker"}),
        program_sha256: program_sha256.clone(),
        invocations: vec![Invocation::with_args(["3"])],
        run: ProgramRun {
            interaction: None,
            profile: "python".into(),
            program_sha256: program_sha256.clone(),
            events: vec![exited_event(0, stdout.as_bytes(), b"")],
            sandbox_warnings: Vec::new(),
            compile: None,
        },
        created_at: "2026-01-01T00:00:00.000Z".into(),
    };
    let record = ScoreRecord {
        item_id: Some(item.into()),
        origin: ScoreOrigin::Execute,
        program_sha256,
        profile: "python".into(),
        expectation: json!({"conditions": []}),
        expectation_sha256: "e".repeat(64),
        status: ScoreStatus::Complete,
        value: Some(true),
        rationale: "All 1 case(s) produced the expected result under python.".into(),
        reason: None,
        cases: json!([]),
        observation_ids: vec![id.clone()],
        score: None,
        score_groups: None,
    };
    let (score_id, _) = store
        .record_observation_with_score(Some(program.as_bytes()), &observation, &record)
        .unwrap();
    (score_id, id)
}

fn line(id: &str, score_id: i64, observation_id: &str, value: bool) -> serde_json::Value {
    json!({
        "id": id, "status": "complete", "value": value, "rationale": "r",
        "score_id": score_id, "observation_ids": [observation_id],
        "cases": [{"outcome": "exited", "exit_code": 0, "matched": true, "duration_ms": 5}],
    })
}

#[test]
fn lines_whose_evidence_is_another_items_do_not_show_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path().join("evidence.db")).unwrap();
    let (alpha_score, alpha_obs) =
        store_item(&store, "alpha", "print('alpha code')", "alpha out\n");
    let (beta_score, _) = store_item(&store, "beta", "print('beta code')", "beta out\n");
    let results = ResultLines::from_values(
        "results.jsonl",
        vec![
            // Its own evidence.
            line("alpha", alpha_score, &alpha_obs, true),
            // Results from another store: the same score id is another item's.
            line(
                "gamma",
                beta_score,
                "obs-0123456789abcdef0123456789abcdef",
                true,
            ),
            // The right score, another item's observation.
            line("beta", beta_score, &alpha_obs, true),
            // The right ids, another verdict than stored.
            line("alpha", alpha_score, &alpha_obs, false),
        ],
    );
    let report = gather(&results, None, &store, Limits::default()).unwrap();
    let alpha = &report.items[0];
    assert!(alpha.notes.is_empty(), "{:?}", alpha.notes);
    assert_eq!(alpha.program.as_ref().unwrap().text, "print('alpha code')");
    assert_eq!(
        alpha.cases[0].stdout.as_ref().unwrap().shown.text,
        "alpha out\n"
    );
    for (item, why) in [
        (&report.items[1], "is of item `beta`"),
        (&report.items[2], "other observations"),
        (&report.items[3], "the line says `false`"),
    ] {
        assert!(item.program.is_none(), "{}: {:?}", item.id, item.program);
        assert!(item.program_sha256.is_none(), "{}", item.id);
        assert!(
            item.cases
                .iter()
                .all(|c| c.stdout.is_none() && c.stderr.is_none()),
            "{}: {:?}",
            item.id,
            item.cases
        );
        let notes = item.notes.join("\n");
        assert!(
            notes.contains("is not its own") && notes.contains(why),
            "{}: {notes}",
            item.id
        );
    }
    assert_eq!(report.mismatched_lines, vec![2, 3, 4]);
    // The page shows none of the other items' code or output.
    let page = progscore_report::render(&report).unwrap();
    assert_eq!(page.matches("beta code").count(), 0);
    assert_eq!(page.matches("beta out").count(), 0);
}
