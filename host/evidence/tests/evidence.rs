//! The evidence store: schema, immutability, transactions, integrity, listing.

use progscore_evidence::{
    EvidenceStore, MIGRATIONS, MergeTrust, Observation, ObservationFilter, OnConflict,
    RecordOutcome, RetentionPolicy, SCHEMA_VERSION, ScoreFilter, ScoreOrigin, ScoreRecord,
    ScoreStatus, StoreError,
};
use progscore_sandbox::fake::exited_event;
use progscore_sandbox::{Invocation, ProgramRun, sha256_hex};
use rusqlite::Connection;

const PROGRAM: &[u8] = b"import sys\nprint(int(sys.argv[1]) ** 2)\n";

fn observation(id: &str, stdout: &str) -> Observation {
    let program_sha256 = sha256_hex(PROGRAM);
    Observation {
        id: id.to_string(),
        attempt_key: "a".repeat(64),
        source: "program_execution/v1".into(),
        profile: "python".into(),
        profile_fingerprint: serde_json::json!({"backend": "docker", "limits": {"cpus": 0.5}}),
        program_sha256: program_sha256.clone(),
        invocations: vec![Invocation::with_args(["3"])],
        run: ProgramRun {
            interaction: None,
            profile: "python".into(),
            program_sha256,
            events: vec![exited_event(0, stdout.as_bytes(), b"")],
            sandbox_warnings: Vec::new(),
            compile: None,
        },
        created_at: "2026-01-01T00:00:00.000Z".into(),
    }
}

fn score(item: Option<&str>, observation_ids: &[&str], value: Option<bool>) -> ScoreRecord {
    ScoreRecord {
        item_id: item.map(str::to_string),
        origin: ScoreOrigin::Execute,
        program_sha256: sha256_hex(PROGRAM),
        profile: "python".into(),
        expectation: serde_json::json!({"conditions": []}),
        expectation_sha256: "e".repeat(64),
        status: if value.is_some() {
            ScoreStatus::Complete
        } else {
            ScoreStatus::Undetermined
        },
        value,
        rationale: "r".into(),
        reason: value.is_none().then(|| "why".to_string()),
        cases: serde_json::json!([]),
        observation_ids: observation_ids.iter().map(|s| s.to_string()).collect(),
        score: None,
        score_groups: None,
    }
}

#[test]
fn a_new_store_is_at_the_current_version_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evidence.db");
    let store = EvidenceStore::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    drop(store);
    let conn = Connection::open(&path).unwrap();
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let memory = EvidenceStore::open_in_memory().unwrap();
    assert_eq!(memory.schema_version().unwrap(), SCHEMA_VERSION);
}

#[test]
fn a_newer_schema_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", SCHEMA_VERSION + 7)
        .unwrap();
    let err = match EvidenceStore::open(&path) {
        Err(err) => err,
        Ok(_) => panic!("a newer schema was accepted"),
    };
    assert!(matches!(err, StoreError::SchemaTooNew { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("future.db") && message.contains("newer progscore"),
        "{message}"
    );
}

#[test]
fn an_older_schema_is_migrated_keeping_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute(
            "INSERT INTO programs (sha256, content, size, created_at) VALUES (?1, ?2, ?3, 'then')",
            rusqlite::params![sha256_hex(PROGRAM), PROGRAM, PROGRAM.len() as i64],
        )
        .unwrap();
    }
    let store = EvidenceStore::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(
        store.program(&sha256_hex(PROGRAM)).unwrap().as_deref(),
        Some(PROGRAM)
    );
    drop(store);
    let conn = Connection::open(&path).unwrap();
    let indexes: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'scores_by_item'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(indexes, 1);
}

#[test]
fn an_observation_and_its_first_score_commit_together_and_identical_copies_link() {
    let store = EvidenceStore::open_in_memory().unwrap();
    let obs = observation("obs-1", "9\n");
    let (first, outcome) = store
        .record_observation_with_score(
            Some(PROGRAM),
            &obs,
            &score(Some("a"), &["obs-1"], Some(true)),
        )
        .unwrap();
    assert_eq!(outcome, RecordOutcome::Inserted);
    assert_eq!(store.observation("obs-1").unwrap().as_ref(), Some(&obs));
    assert_eq!(
        store.program(&obs.program_sha256).unwrap().as_deref(),
        Some(PROGRAM)
    );
    let (second, outcome) = store
        .record_observation_with_score(None, &obs, &score(Some("b"), &["obs-1"], Some(true)))
        .unwrap();
    assert_eq!(outcome, RecordOutcome::Linked);
    assert!(second > first);
    let counts = store.counts().unwrap();
    assert_eq!(
        (
            counts.programs,
            counts.observations,
            counts.scores,
            counts.links
        ),
        (1, 1, 2, 2)
    );
    let listed = store
        .list_observations(&ObservationFilter::default())
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].scores, 2);
    assert_eq!(listed[0].outcomes, vec!["exited".to_string()]);
}

#[test]
fn a_different_observation_under_a_stored_id_is_refused_and_nothing_is_written() {
    let store = EvidenceStore::open_in_memory().unwrap();
    let obs = observation("obs-1", "9\n");
    store
        .record_observation_with_score(None, &obs, &score(None, &["obs-1"], Some(true)))
        .unwrap();
    let before = store.counts().unwrap();
    let other = observation("obs-1", "8\n");
    let err = store
        .record_observation_with_score(Some(PROGRAM), &other, &score(None, &["obs-1"], Some(false)))
        .unwrap_err();
    match err {
        StoreError::ObservationConflict { id, stored } => {
            assert_eq!(id, "obs-1");
            assert_eq!(*stored, obs);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(
        store.counts().unwrap(),
        before,
        "the refused write left rows behind"
    );
}

#[test]
fn observations_scores_and_links_are_immutable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    let store = EvidenceStore::open(&path).unwrap();
    store
        .record_observation_with_score(
            Some(PROGRAM),
            &observation("obs-1", "9\n"),
            &score(None, &["obs-1"], Some(true)),
        )
        .unwrap();
    let conn = Connection::open(&path).unwrap();
    for statement in [
        "UPDATE observations SET run = '{}'",
        "DELETE FROM observations",
        "UPDATE scores SET value = 0",
        "DELETE FROM scores",
        "DELETE FROM score_observations",
        "UPDATE programs SET content = x'00'",
        "DELETE FROM programs",
    ] {
        let err = conn.execute(statement, []).unwrap_err();
        assert!(
            err.to_string().contains("immutable") || err.to_string().contains("append-only"),
            "{statement}: {err}"
        );
    }
}

#[test]
fn a_row_changed_behind_the_store_is_detected_as_tampered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    let store = EvidenceStore::open(&path).unwrap();
    store
        .record_observation_with_score(
            None,
            &observation("obs-1", "9\n"),
            &score(None, &["obs-1"], Some(true)),
        )
        .unwrap();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TRIGGER observations_no_update;
         UPDATE observations SET run = replace(run, '9\\n', '8\\n');",
    )
    .unwrap();
    let err = store.observation("obs-1").unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Tampered {
                what: "observation",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn scores_must_be_consistent_and_link_stored_observations() {
    let store = EvidenceStore::open_in_memory().unwrap();
    let mut bad = score(None, &[], Some(true));
    bad.status = ScoreStatus::Undetermined;
    assert!(matches!(
        store.record_score(&bad),
        Err(StoreError::InvalidRecord(_))
    ));
    assert!(matches!(
        store.record_score(&score(None, &["obs-missing"], None)),
        Err(StoreError::ObservationNotStored { .. })
    ));
    // A score with no evidence at all (a rescore without stored evidence) is fine.
    store.record_score(&score(Some("x"), &[], None)).unwrap();
}

#[test]
fn latest_score_per_item_and_listing_filters() {
    let store = EvidenceStore::open_in_memory().unwrap();
    store
        .record_observation_with_score(
            Some(PROGRAM),
            &observation("obs-1", "9\n"),
            &score(Some("square-3"), &["obs-1"], Some(true)),
        )
        .unwrap();
    store
        .record_score(&score(Some("other"), &["obs-1"], None))
        .unwrap();
    let last = store
        .record_score(&score(Some("square-3"), &["obs-1"], Some(false)))
        .unwrap();
    let latest = store.latest_score_for_item("square-3").unwrap().unwrap();
    assert_eq!(latest.id, last);
    assert_eq!(latest.record.value, Some(false));
    assert_eq!(latest.record.observation_ids, vec!["obs-1".to_string()]);
    assert!(store.latest_score_for_item("nobody").unwrap().is_none());
    let of_item = store
        .list_scores(&ScoreFilter {
            item_id: Some("square-3".into()),
            ..ScoreFilter::default()
        })
        .unwrap();
    assert_eq!(of_item.len(), 2);
    assert!(of_item[0].id > of_item[1].id, "newest first");
    let undetermined = store
        .list_scores(&ScoreFilter {
            status: Some(ScoreStatus::Undetermined),
            ..ScoreFilter::default()
        })
        .unwrap();
    assert_eq!(undetermined.len(), 1);
    let linked = store
        .list_scores(&ScoreFilter {
            observation_id: Some("obs-1".into()),
            limit: Some(2),
            ..ScoreFilter::default()
        })
        .unwrap();
    assert_eq!(linked.len(), 2);
    assert_eq!(store.score(last).unwrap().unwrap(), latest);
}

#[test]
fn programs_are_content_addressed() {
    let store = EvidenceStore::open_in_memory().unwrap();
    let id = store.put_program(PROGRAM).unwrap();
    assert_eq!(id, sha256_hex(PROGRAM));
    assert_eq!(store.put_program(PROGRAM).unwrap(), id);
    assert_eq!(store.counts().unwrap().programs, 1);
    assert!(store.program(&"0".repeat(64)).unwrap().is_none());
}

#[test]
fn a_store_is_shared_by_two_connections_to_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    let a = EvidenceStore::open(&path).unwrap();
    let b = EvidenceStore::open(&path).unwrap();
    let obs = observation("obs-1", "9\n");
    a.record_observation_with_score(None, &obs, &score(None, &["obs-1"], Some(true)))
        .unwrap();
    let (_, outcome) = b
        .record_observation_with_score(None, &obs, &score(None, &["obs-1"], Some(true)))
        .unwrap();
    assert_eq!(outcome, RecordOutcome::Linked);
    assert_eq!(a.counts().unwrap().links, 2);
}

#[test]
fn a_failed_first_score_rolls_its_observation_back() {
    let store = EvidenceStore::open_in_memory().unwrap();
    let obs = observation("obs-1", "9\n");
    // The score links a second observation that is not stored: the insert
    // fails after the observation's row was written in the same transaction.
    let err = store
        .record_observation_with_score(
            Some(PROGRAM),
            &obs,
            &score(None, &["obs-1", "obs-missing"], Some(true)),
        )
        .unwrap_err();
    assert!(err.to_string().contains("obs-missing"), "{err}");
    let counts = store.counts().unwrap();
    assert_eq!(
        (
            counts.programs,
            counts.observations,
            counts.scores,
            counts.links
        ),
        (0, 0, 0, 0),
        "nothing of the failed write stays"
    );
    assert!(store.observation("obs-1").unwrap().is_none());
}

#[test]
fn a_lease_is_taken_once_renewed_and_released_only_by_its_owner() {
    let store = EvidenceStore::open_in_memory().unwrap();
    let key = "k".repeat(64);
    let ttl = std::time::Duration::from_secs(30);
    assert_eq!(store.lease(&key).unwrap(), None);
    assert!(store.try_acquire_lease(&key, "a", ttl).unwrap());
    assert!(
        !store.try_acquire_lease(&key, "b", ttl).unwrap(),
        "a live lease was taken by another owner"
    );
    let held = store.lease(&key).unwrap().unwrap();
    assert_eq!(held.owner, "a");
    assert!(!held.is_expired_at(progscore_evidence::now_unix_ms()));
    // Its owner taking it again extends it.
    assert!(store.try_acquire_lease(&key, "a", ttl).unwrap());
    assert!(store.renew_lease(&key, "a", ttl).unwrap());
    assert!(!store.renew_lease(&key, "b", ttl).unwrap());
    assert!(!store.release_lease(&key, "b").unwrap());
    assert_eq!(store.lease(&key).unwrap().unwrap().owner, "a");
    assert!(store.release_lease(&key, "a").unwrap());
    assert_eq!(store.lease(&key).unwrap(), None);
    assert!(!store.release_lease(&key, "a").unwrap());
    assert!(!store.renew_lease(&key, "a", ttl).unwrap());
    assert!(store.try_acquire_lease(&key, "b", ttl).unwrap());
    // Another attempt's lease is independent.
    assert!(store.try_acquire_lease(&"j".repeat(64), "a", ttl).unwrap());
}

#[test]
fn an_expired_lease_is_taken_over_and_its_old_owner_cannot_renew_or_release_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leases.db");
    // Two connections, as two processes would have.
    let dead = EvidenceStore::open(&path).unwrap();
    let alive = EvidenceStore::open(&path).unwrap();
    let key = "k".repeat(64);
    let ttl = std::time::Duration::from_secs(30);
    // A lease of no length has expired as soon as it was written.
    assert!(
        dead.try_acquire_lease(&key, "dead", std::time::Duration::ZERO)
            .unwrap()
    );
    assert!(
        alive
            .lease(&key)
            .unwrap()
            .unwrap()
            .is_expired_at(progscore_evidence::now_unix_ms())
    );
    assert!(alive.try_acquire_lease(&key, "alive", ttl).unwrap());
    let held = alive.lease(&key).unwrap().unwrap();
    assert_eq!(held.owner, "alive");
    assert!(held.expires_at_ms > held.acquired_at_ms);
    assert!(!dead.renew_lease(&key, "dead", ttl).unwrap());
    assert!(!dead.release_lease(&key, "dead").unwrap());
    assert!(!dead.try_acquire_lease(&key, "dead", ttl).unwrap());
    assert_eq!(dead.lease(&key).unwrap().unwrap().owner, "alive");
}

#[test]
fn an_expired_lease_of_another_attempt_is_removed_when_a_lease_is_taken() {
    let store = EvidenceStore::open_in_memory().unwrap();
    let (stale, other) = ("s".repeat(64), "o".repeat(64));
    assert!(
        store
            .try_acquire_lease(&stale, "dead", std::time::Duration::ZERO)
            .unwrap()
    );
    assert!(
        store
            .try_acquire_lease(&other, "a", std::time::Duration::from_secs(30))
            .unwrap()
    );
    assert_eq!(store.lease(&stale).unwrap(), None);
    assert!(store.lease(&other).unwrap().is_some());
}

#[test]
fn of_many_owners_racing_for_a_free_lease_exactly_one_gets_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("race.db");
    drop(EvidenceStore::open(&path).unwrap());
    let key = "k".repeat(64);
    let barrier = std::sync::Barrier::new(8);
    let won: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (path, key, barrier) = (&path, &key, &barrier);
                scope.spawn(move || {
                    let store = EvidenceStore::open(path).unwrap();
                    barrier.wait();
                    store
                        .try_acquire_lease(
                            key,
                            &format!("owner-{i}"),
                            std::time::Duration::from_secs(30),
                        )
                        .unwrap()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| usize::from(h.join().unwrap()))
            .sum()
    });
    assert_eq!(won, 1);
}

#[test]
fn expired_leases_left_by_dead_owners_are_removed_when_the_store_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leases.db");
    let (stale, live) = ("s".repeat(64), "l".repeat(64));
    {
        // A process that took two leases and died without releasing them:
        // one has expired since, the other is still running out.
        // (The live one first: taking a lease removes expired ones.)
        let dead = EvidenceStore::open(&path).unwrap();
        assert!(
            dead.try_acquire_lease(&live, "dead/2", std::time::Duration::from_secs(60))
                .unwrap()
        );
        assert!(
            dead.try_acquire_lease(&stale, "dead/1", std::time::Duration::ZERO)
                .unwrap()
        );
    }
    // Any later command that opens the store (one that takes no lease too).
    let later = EvidenceStore::open(&path).unwrap();
    assert_eq!(
        later.lease(&stale).unwrap(),
        None,
        "the expired lease stayed"
    );
    assert_eq!(later.lease(&live).unwrap().unwrap().owner, "dead/2");
    assert_eq!(later.sweep_expired_leases().unwrap(), 0);
}

#[test]
fn an_owners_leases_are_released_by_prefix_and_no_one_elses() {
    let store = EvidenceStore::open_in_memory().unwrap();
    let ttl = std::time::Duration::from_secs(60);
    for (key, owner) in [
        ("a", "me/1"),
        ("b", "me/2"),
        ("c", "me-too/1"),
        ("d", "other/1"),
    ] {
        assert!(
            store
                .try_acquire_lease(&key.repeat(64), owner, ttl)
                .unwrap()
        );
    }
    assert_eq!(store.release_leases_of("me/").unwrap(), 2);
    assert_eq!(store.lease(&"a".repeat(64)).unwrap(), None);
    assert_eq!(store.lease(&"b".repeat(64)).unwrap(), None);
    assert!(store.lease(&"c".repeat(64)).unwrap().is_some());
    assert!(store.lease(&"d".repeat(64)).unwrap().is_some());
    assert_eq!(store.release_leases_of("").unwrap(), 0);
}

#[test]
fn a_submission_is_stored_and_its_first_result_stands_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evidence.db");
    {
        let store = EvidenceStore::open(&path).unwrap();
        store
            .insert_submission(
                "tok-1",
                "judge0",
                "owner-a",
                Some("/owners/owner-a.lock"),
                r#"{"code":"x"}"#,
            )
            .unwrap();
        let pending = store.submission("tok-1").unwrap().unwrap();
        assert_eq!(pending.result, None);
        assert_eq!(pending.finished_at, None);
        assert_eq!(pending.owner, "owner-a");
        assert_eq!(pending.owner_lock.as_deref(), Some("/owners/owner-a.lock"));
        // A token is never reused.
        assert!(
            store
                .insert_submission("tok-1", "judge0", "owner-b", None, "{}")
                .is_err()
        );
        assert!(store.finish_submission("tok-1", r#"{"status":3}"#).unwrap());
        assert!(
            !store
                .finish_submission("tok-1", r#"{"status":13}"#)
                .unwrap()
        );
        assert!(!store.finish_submission("no-such-token", "{}").unwrap());
        // A server that stops fails its own unfinished ones, no one else's.
        for (token, owner) in [("tok-a", "owner-a"), ("tok-b", "owner-b")] {
            store
                .insert_submission(token, "judge0", owner, None, "{}")
                .unwrap();
        }
        assert_eq!(
            store
                .finish_unfinished_submissions_of("owner-a", r#"{"status":13}"#)
                .unwrap(),
            1
        );
        assert!(store.submission("tok-a").unwrap().unwrap().result.is_some());
        assert!(store.submission("tok-b").unwrap().unwrap().result.is_none());
    }
    let store = EvidenceStore::open(&path).unwrap();
    let done = store.submission("tok-1").unwrap().unwrap();
    assert_eq!(done.result.as_deref(), Some(r#"{"status":3}"#));
    assert!(done.finished_at.is_some());
    assert_eq!(done.request, r#"{"code":"x"}"#);
    assert_eq!(store.submission("tok-2").unwrap(), None);
}

/// A store file with these observations (each with a score of its own).
fn store_with(path: &std::path::Path, observations: &[(&str, &str)]) -> EvidenceStore {
    let store = EvidenceStore::open(path).unwrap();
    for (id, stdout) in observations {
        store
            .record_observation_with_score(
                Some(PROGRAM),
                &observation(id, stdout),
                &score(Some(id), &[id], Some(true)),
            )
            .unwrap();
    }
    store
}

#[test]
fn stores_written_apart_merge_into_their_union_once() {
    let dir = tempfile::tempdir().unwrap();
    let here = store_with(
        &dir.path().join("here.db"),
        &[("obs-1", "9\n"), ("obs-2", "9\n")],
    );
    let there_path = dir.path().join("there.db");
    let there = store_with(&there_path, &[("obs-2", "9\n"), ("obs-3", "9\n")]);
    // A later score of the shared observation, made there.
    there
        .record_score(&score(Some("again"), &["obs-2"], Some(true)))
        .unwrap();
    let there_before = there.counts().unwrap();
    drop(there);

    let summary = here
        .merge_from(&there_path, OnConflict::Refuse, MergeTrust::Untrusted)
        .unwrap();
    assert_eq!(summary.observations_added, 1, "{summary:?}");
    assert_eq!(summary.observations_present, 1, "{summary:?}");
    assert_eq!(summary.scores_added, 3, "{summary:?}");
    assert_eq!(
        summary.programs_added, 0,
        "the program was here: {summary:?}"
    );
    let counts = here.counts().unwrap();
    assert_eq!(
        (counts.observations, counts.scores, counts.links),
        (3, 5, 5)
    );
    let merged = here.observation("obs-3").unwrap().expect("obs-3 merged");
    assert_eq!(merged, observation("obs-3", "9\n"));
    // A merged score keeps its links and its time.
    let again = here
        .latest_score_for_item("again")
        .unwrap()
        .expect("merged score");
    assert_eq!(again.record.observation_ids, vec!["obs-2".to_string()]);

    // The same file again adds nothing; the other file was only read.
    let twice = here
        .merge_from(&there_path, OnConflict::Refuse, MergeTrust::Untrusted)
        .unwrap();
    assert_eq!(
        (twice.observations_added, twice.scores_added),
        (0, 0),
        "{twice:?}"
    );
    assert_eq!((twice.observations_present, twice.scores_present), (2, 3));
    assert_eq!(here.counts().unwrap(), counts);
    let there = EvidenceStore::open(&there_path).unwrap();
    assert_eq!(there.counts().unwrap(), there_before);
}

#[test]
fn a_conflicting_observation_is_named_and_nothing_is_merged() {
    let dir = tempfile::tempdir().unwrap();
    let here = store_with(&dir.path().join("here.db"), &[("obs-1", "9\n")]);
    let before = here.counts().unwrap();
    let there_path = dir.path().join("there.db");
    drop(store_with(
        &there_path,
        &[("obs-0", "4\n"), ("obs-1", "10\n")],
    ));
    let err = here
        .merge_from(&there_path, OnConflict::Refuse, MergeTrust::Untrusted)
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::MergeConflict { count: 1, ids, .. } if ids == &["obs-1"]),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("there.db")
            && message.contains("obs-1")
            && message.contains("nothing was merged"),
        "{message}"
    );
    assert_eq!(
        here.counts().unwrap(),
        before,
        "obs-0 must not be merged alone"
    );

    // Keeping this store's copy: the rest merges, the other copy's score is skipped.
    let summary = here
        .merge_from(
            &there_path,
            OnConflict::KeepThisStore,
            MergeTrust::Untrusted,
        )
        .unwrap();
    assert_eq!(
        (summary.observations_added, summary.observations_conflicting),
        (1, 1),
        "{summary:?}"
    );
    assert_eq!(
        (summary.scores_added, summary.scores_skipped),
        (1, 1),
        "{summary:?}"
    );
    assert_eq!(summary.conflicting_ids, vec!["obs-1".to_string()]);
    assert_eq!(
        here.observation("obs-1").unwrap(),
        Some(observation("obs-1", "9\n")),
        "this store's copy stands"
    );
    assert!(here.observation("obs-0").unwrap().is_some());
}

#[test]
fn a_tampered_or_foreign_store_is_refused_and_nothing_is_merged() {
    let dir = tempfile::tempdir().unwrap();
    let here_path = dir.path().join("here.db");
    let here = store_with(&here_path, &[("obs-1", "9\n")]);
    let before = here.counts().unwrap();

    let there_path = dir.path().join("there.db");
    drop(store_with(
        &there_path,
        &[("obs-2", "9\n"), ("obs-3", "9\n")],
    ));
    let conn = Connection::open(&there_path).unwrap();
    conn.execute_batch(
        "DROP TRIGGER observations_no_update;
         UPDATE observations SET profile = 'python-gvisor' WHERE id = 'obs-3';",
    )
    .unwrap();
    drop(conn);
    let err = here
        .merge_from(&there_path, OnConflict::Refuse, MergeTrust::Untrusted)
        .unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(&err, StoreError::MergeSource { cause, .. } if matches!(**cause, StoreError::Tampered { .. })),
        "{err:?}"
    );
    assert!(
        message.contains("there.db") && message.contains("obs-3"),
        "{message}"
    );
    assert_eq!(
        here.counts().unwrap(),
        before,
        "obs-2 must not be merged alone"
    );

    // Not a store, no file, this store itself: refused, and said why.
    let foreign = dir.path().join("foreign.db");
    Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t (x);")
        .unwrap();
    for (path, why) in [
        (foreign, "not a progscore evidence store"),
        (dir.path().join("missing.db"), "no such file"),
        (here_path, "this store itself"),
    ] {
        let message = here
            .merge_from(&path, OnConflict::Refuse, MergeTrust::Untrusted)
            .unwrap_err()
            .to_string();
        assert!(message.contains(why), "{}: {message}", path.display());
    }
    assert_eq!(here.counts().unwrap(), before);
}

/// An observation of its own attempt, run at `created_at`.
fn observation_at(id: &str, created_at: &str) -> Observation {
    let mut observation = observation(id, "9\n");
    observation.attempt_key = sha256_hex(id.as_bytes());
    observation.created_at = created_at.into();
    observation
}

const LONG_AGO: &str = "2020-01-01T00:00:00.000Z";
const DAY: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

fn ids(store: &EvidenceStore) -> Vec<String> {
    let mut ids: Vec<String> = store
        .list_observations(&ObservationFilter::default())
        .unwrap()
        .into_iter()
        .map(|summary| summary.id)
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_prune_by_age_keeps_what_a_standing_score_rests_on_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path().join("evidence.db")).unwrap();
    let now = progscore_evidence::now_rfc3339();
    let record = |id: &str, at: &str, item: Option<&str>| {
        store
            .record_observation_with_score(
                Some(PROGRAM),
                &observation_at(id, at),
                &score(item, &[id], Some(true)),
            )
            .unwrap();
    };
    record("anonymous-old", LONG_AGO, None);
    record("item-x-old", LONG_AGO, Some("x"));
    record("item-y-superseded", LONG_AGO, Some("y"));
    record("item-y-now", &now, Some("y"));
    record("anonymous-new", &now, None);
    store
        .insert_submission("t-done", "judge0", "o", None, "{}")
        .unwrap();
    store.finish_submission("t-done", "{}").unwrap();
    store
        .insert_submission("t-running", "judge0", "o", None, "{}")
        .unwrap();
    let policy = RetentionPolicy {
        max_age: Some(30 * DAY),
        ..RetentionPolicy::default()
    };

    let dry = store.prune(&policy, true).unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.observations_removed, 2, "{dry:?}");
    assert_eq!(ids(&store).len(), 5, "a dry run removes nothing");

    let pruned = store.prune(&policy, false).unwrap();
    assert_eq!(
        (pruned.observations_removed, pruned.scores_removed),
        (2, 2),
        "{pruned:?}"
    );
    assert_eq!(pruned.observations_kept_for_scores, 1, "{pruned:?}");
    assert_eq!(
        ids(&store),
        ["anonymous-new", "item-x-old", "item-y-now"],
        "the old anonymous run and item y's superseded one go"
    );
    assert_eq!(
        store
            .latest_score_for_item("x")
            .unwrap()
            .unwrap()
            .record
            .observation_ids,
        ["item-x-old"]
    );
    assert_eq!(store.list_scores(&ScoreFilter::default()).unwrap().len(), 3);
    // The submissions are not old; the program is still used.
    assert_eq!(pruned.submissions_removed, 0);
    assert!(store.program(&sha256_hex(PROGRAM)).unwrap().is_some());

    let everything = store
        .prune(
            &RetentionPolicy {
                include_scored: true,
                ..policy.clone()
            },
            false,
        )
        .unwrap();
    assert_eq!(everything.observations_removed, 1, "{everything:?}");
    assert_eq!(ids(&store), ["anonymous-new", "item-y-now"]);
    assert!(store.latest_score_for_item("x").unwrap().is_none());
    // Outside a prune, evidence still cannot be deleted.
    let conn = Connection::open(dir.path().join("evidence.db")).unwrap();
    assert!(
        conn.execute("DELETE FROM observations WHERE id = 'anonymous-new'", [])
            .is_err()
    );
}

#[test]
fn old_finished_submissions_go_and_unfinished_ones_stay() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evidence.db");
    let store = EvidenceStore::open(&path).unwrap();
    for token in ["done", "running"] {
        store
            .insert_submission(token, "judge0", "o", None, "{}")
            .unwrap();
    }
    store.finish_submission("done", "{}").unwrap();
    Connection::open(&path)
        .unwrap()
        .execute_batch(&format!(
            "UPDATE submissions SET created_at = '{LONG_AGO}';
             UPDATE submissions SET finished_at = '{LONG_AGO}' WHERE token = 'done';"
        ))
        .unwrap();
    let pruned = store
        .prune(
            &RetentionPolicy {
                max_age: Some(DAY),
                ..RetentionPolicy::default()
            },
            false,
        )
        .unwrap();
    assert_eq!(pruned.submissions_removed, 1);
    assert!(store.submission("done").unwrap().is_none());
    assert!(store.submission("running").unwrap().is_some());
    assert_eq!(store.usage().unwrap().submissions, 1);
}

#[test]
fn a_prune_by_size_removes_the_oldest_until_the_store_fits() {
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path().join("evidence.db")).unwrap();
    let big = "x".repeat(8 * 1024);
    for n in 0..200 {
        let id = format!("obs-{n:03}");
        let mut observation = observation_at(
            &id,
            &format!("2026-01-01T00:{:02}:{:02}.000Z", n / 60, n % 60),
        );
        observation.run.events = vec![exited_event(0, big.as_bytes(), b"")];
        store
            .record_observation_with_score(
                Some(PROGRAM),
                &observation,
                &score(None, &[&id], Some(true)),
            )
            .unwrap();
    }
    let before = store.usage().unwrap();
    assert_eq!(before.observations, 200);
    let target = before.in_use_bytes / 2;
    let pruned = store
        .prune(
            &RetentionPolicy {
                max_size: Some(target),
                ..RetentionPolicy::default()
            },
            false,
        )
        .unwrap();
    assert!(
        pruned.bytes_in_use_after <= target,
        "{} bytes in use, more than {target}: {pruned:?}",
        pruned.bytes_in_use_after
    );
    assert!(
        pruned.observations_removed >= 90 && pruned.observations_removed < 130,
        "{pruned:?}"
    );
    assert_eq!(pruned.removed_ids[0], "obs-000", "oldest first");
    let left = ids(&store);
    assert!(left.contains(&"obs-199".to_string()));
    assert!(!left.contains(&"obs-000".to_string()));
    // A store that fits is left alone.
    let again = store
        .prune(
            &RetentionPolicy {
                max_size: Some(target),
                ..RetentionPolicy::default()
            },
            false,
        )
        .unwrap();
    assert_eq!(again.observations_removed, 0);
}
