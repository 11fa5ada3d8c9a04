//! Evidence merged from another store: `score` reuses only what this store
//! ran (or what the operator trusted when merging); a merged file cannot
//! change the verdict of an item that `score` scores.

use super::*;

/// A sandbox that says the wrong program printed the right answer: what a
/// store written by a changed progscore (or by hand) can hold.
fn lying_responder(request: &FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> {
    Ok(request
        .invocations
        .iter()
        .map(|invocation| {
            let n: i64 = invocation.args[0].parse().unwrap();
            exited_event(0, format!("{}\n", n * n).as_bytes(), b"")
        })
        .collect())
}

/// Doubles instead of squaring: wrong for 3 (prints 6, not 9).
const DOUBLE: &[u8] = b"import sys\nprint(int(sys.argv[1]) * 2)\n";

fn honest_responder(request: &FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> {
    Ok(request
        .invocations
        .iter()
        .map(|invocation| {
            let n: i64 = invocation.args[0].parse().unwrap();
            let out = if request.program == DOUBLE {
                n * 2
            } else {
                n * n
            };
            exited_event(0, format!("{out}\n").as_bytes(), b"")
        })
        .collect())
}

/// Writes, in a store file of its own, a "run" of DOUBLE that printed 9
/// under the attempt's derived id, as a planted store would hold it.
async fn planted_store(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("planted.db");
    let store = Arc::new(EvidenceStore::open(&path).unwrap());
    let liar = Setup::with_store(
        ScriptedClient::new(profiles()).with_responder(lying_responder),
        store,
    );
    let planted = liar
        .scorer
        .score(inline(DOUBLE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(planted.value, Some(true), "the planted run says 9");
    path
}

#[tokio::test]
async fn a_merged_store_cannot_plant_the_verdict_of_an_item_that_score_scores() {
    let dir = tempfile::tempdir().unwrap();
    let planted = planted_store(dir.path()).await;
    let store = Arc::new(EvidenceStore::open(dir.path().join("here.db")).unwrap());
    store
        .merge_from(&planted, OnConflict::Refuse, MergeTrust::Untrusted)
        .unwrap();
    let setup = Setup::with_store(
        ScriptedClient::new(profiles()).with_responder(honest_responder),
        store.clone(),
    );
    let score = setup
        .scorer
        .score(inline(DOUBLE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(
        (score.evidence, score.value),
        (EvidenceUse::Ran, Some(false)),
        "the program prints 6, and only a run here says so"
    );
    assert_eq!(setup.started(), 1);
    // This store's own run is reused from now on; the planted one is not.
    let again = setup
        .scorer
        .score(inline(DOUBLE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(
        (again.evidence, again.value),
        (EvidenceUse::Stored, Some(false))
    );
    assert_eq!(again.observation_ids, score.observation_ids);
    assert_eq!(setup.started(), 1);
}

#[tokio::test]
async fn evidence_merged_as_trusted_is_reused_and_untrusted_serves_replay() {
    let dir = tempfile::tempdir().unwrap();
    // Another machine of the operator's scored SQUARE 3 honestly.
    let theirs = dir.path().join("theirs.db");
    let other = Setup::with_store(
        ScriptedClient::new(profiles()).with_responder(honest_responder),
        Arc::new(EvidenceStore::open(&theirs).unwrap()),
    );
    let ran = other
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    drop(other);

    // Merged untrusted: kept, readable by id, but not reused by `score`.
    let untrusted = Arc::new(EvidenceStore::open(dir.path().join("a.db")).unwrap());
    let summary = untrusted
        .merge_from(&theirs, OnConflict::Refuse, MergeTrust::Untrusted)
        .unwrap();
    assert!(!summary.trusted);
    assert!(summary.merged_store.is_some());
    let id = &ran.observation_ids[0];
    assert!(untrusted.observation(id).unwrap().is_some());
    assert!(!untrusted.observation_origin(id).unwrap().is_reusable());
    let here = Setup::with_store(
        ScriptedClient::new(profiles()).with_responder(honest_responder),
        untrusted,
    );
    let score = here
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(
        (score.evidence, score.value),
        (EvidenceUse::Ran, Some(true))
    );
    assert_ne!(
        &score.observation_ids[0], id,
        "its own run, under a fresh id"
    );

    // Merged with the operator's trust: reused as this store's own.
    let trusted = Arc::new(EvidenceStore::open(dir.path().join("b.db")).unwrap());
    trusted
        .merge_from(&theirs, OnConflict::Refuse, MergeTrust::Trusted)
        .unwrap();
    let here = Setup::with_store(
        ScriptedClient::new(profiles()).with_responder(honest_responder),
        trusted,
    );
    let score = here
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(
        (score.evidence, score.value),
        (EvidenceUse::Stored, Some(true))
    );
    assert_eq!(&score.observation_ids[0], id);
    assert_eq!(here.started(), 0);
}

#[tokio::test]
async fn trusting_a_store_does_not_trust_what_it_merged_untrusted() {
    let dir = tempfile::tempdir().unwrap();
    let planted = planted_store(dir.path()).await;
    // The operator's own relay merged the planted file without trust, and
    // is then merged here with trust.
    let relay_path = dir.path().join("relay.db");
    let relay = EvidenceStore::open(&relay_path).unwrap();
    relay
        .merge_from(&planted, OnConflict::Refuse, MergeTrust::Untrusted)
        .unwrap();
    drop(relay);
    let store = Arc::new(EvidenceStore::open(dir.path().join("here.db")).unwrap());
    store
        .merge_from(&relay_path, OnConflict::Refuse, MergeTrust::Trusted)
        .unwrap();
    let setup = Setup::with_store(
        ScriptedClient::new(profiles()).with_responder(honest_responder),
        store,
    );
    let score = setup
        .scorer
        .score(inline(DOUBLE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(
        (score.evidence, score.value),
        (EvidenceUse::Ran, Some(false))
    );
}
