//! Leases: sources in different processes (here: different sources, each
//! with its own connection to one store file, and a real child process for
//! the SIGKILL) run an attempt once.

use super::*;

use progscore_evidence::now_unix_ms;

/// A "process": its own source, client and connection to the store file.
fn process(path: &std::path::Path, client: ScriptedClient, ttl: Duration) -> Setup {
    let store = Arc::new(EvidenceStore::open(path).unwrap());
    let source =
        ProgramExecutionSource::new(Arc::new(client.clone()), store.clone()).with_lease_ttl(ttl);
    let scorer = ProgramExecutionScorer::new(source, Arc::new(NativeComparators));
    Setup {
        client,
        store,
        scorer,
    }
}

fn slow_square(delay: Duration) -> ScriptedClient {
    ScriptedClient::new(profiles())
        .with_responder(square_responder)
        .with_delay(delay)
}

fn request() -> ScoreRequest {
    inline(SQUARE, expect("python", &[(&["3"], "9")]))
}

fn attempt_key() -> String {
    Attempt::from_parts(
        "python",
        profile("python", "64KiB").fingerprint_json(),
        &sha256_hex(SQUARE),
        vec![progscore_sandbox::Invocation::with_args(["3"])],
    )
    .unwrap()
    .key
}

/// Waits (on the store's state) until someone holds the attempt's lease.
async fn lease_taken(store: &EvidenceStore, key: &str) -> progscore_evidence::Lease {
    for _ in 0..2000 {
        if let Some(lease) = store.lease(key).unwrap() {
            return lease;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("nobody took the attempt's lease");
}

#[tokio::test]
async fn two_processes_scoring_one_attempt_run_it_once_and_the_waiter_uses_the_stored_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let a = process(&path, slow_square(Duration::from_millis(300)), DEFAULT_TTL);
    let b = process(&path, slow_square(Duration::from_millis(300)), DEFAULT_TTL);
    let (x, y) = tokio::join!(a.scorer.score(request()), b.scorer.score(request()));
    let (x, y) = (x.unwrap(), y.unwrap());
    assert_eq!(a.started() + b.started(), 1, "the attempt ran twice");
    let mut origins = [x.evidence, y.evidence];
    origins.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(origins, [EvidenceUse::Ran, EvidenceUse::Stored]);
    assert_eq!(x.observation_ids, y.observation_ids);
    assert_eq!((x.value, y.value), (Some(true), Some(true)));
    let counts = a.store.counts().unwrap();
    assert_eq!(
        (counts.observations, counts.scores, counts.links),
        (1, 2, 2)
    );
    assert_eq!(a.store.lease(&attempt_key()).unwrap(), None, "not released");
}

const DEFAULT_TTL: Duration = progscore_scoring::DEFAULT_LEASE_TTL;

#[tokio::test]
async fn a_run_that_proved_nothing_is_not_reused_the_waiter_runs_it_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let faulty = ScriptedClient::new(profiles())
        .with_responder(|_| {
            Ok(vec![event(
                Outcome::SandboxError {
                    message: "the engine lost the container".into(),
                },
                b"",
                b"",
            )])
        })
        .with_delay(Duration::from_millis(300));
    let a = process(&path, faulty, DEFAULT_TTL);
    let b = process(&path, slow_square(Duration::ZERO), DEFAULT_TTL);
    let key = attempt_key();
    let first = a.scorer.score(request());
    let second = async {
        let lease = lease_taken(&b.store, &key).await;
        assert!(lease.owner.starts_with(a.scorer.source().lease_owner()));
        b.scorer.score(request()).await
    };
    let (first, second) = tokio::join!(first, second);
    let (first, second) = (first.unwrap(), second.unwrap());
    assert_eq!(first.value, None, "a sandbox error decides nothing");
    assert_eq!(first.evidence, EvidenceUse::Ran);
    assert_eq!(
        second.evidence,
        EvidenceUse::Ran,
        "the waiter reused a run that proved nothing"
    );
    assert_eq!(second.value, Some(true));
    assert_eq!((a.started(), b.started()), (1, 1));
    assert_ne!(first.observation_ids, second.observation_ids);
    assert_eq!(b.store.lease(&key).unwrap(), None);
}

#[tokio::test]
async fn a_refused_run_releases_the_lease_and_the_waiter_runs_it_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let refusing = ScriptedClient::new(profiles())
        .with_responder(|_| {
            Err(SandboxError::EngineUnavailable {
                message: "connection refused".into(),
            })
        })
        .with_delay(Duration::from_millis(300));
    let a = process(&path, refusing, DEFAULT_TTL);
    let b = process(&path, slow_square(Duration::ZERO), DEFAULT_TTL);
    let key = attempt_key();
    let first = a.scorer.score(request());
    let second = async {
        lease_taken(&b.store, &key).await;
        b.scorer.score(request()).await
    };
    let (first, second) = tokio::join!(first, second);
    assert!(matches!(first, Err(ScoringError::Refused(_))), "{first:?}");
    let second = second.unwrap();
    assert_eq!(second.evidence, EvidenceUse::Ran);
    assert_eq!(second.value, Some(true));
    assert_eq!((a.started(), b.started()), (1, 1));
}

#[tokio::test]
async fn a_waiter_cancelled_returns_at_once_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let b = process(&path, slow_square(Duration::ZERO), DEFAULT_TTL);
    let key = attempt_key();
    // Held, alive, by another process that never finishes.
    assert!(
        b.store
            .try_acquire_lease(&key, "elsewhere", Duration::from_secs(60))
            .unwrap()
    );
    let cancel = CancellationToken::new();
    let waiting = b.scorer.score(request().cancel(cancel.clone()));
    let canceller = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    };
    let (result, ()) = tokio::join!(waiting, canceller);
    assert!(matches!(result, Err(ScoringError::Cancelled)), "{result:?}");
    assert_eq!(b.started(), 0);
    assert_eq!(b.scorer.source().in_flight(), 0);
    assert_eq!(b.store.lease(&key).unwrap().unwrap().owner, "elsewhere");
}

#[tokio::test]
async fn a_fresh_run_waits_for_the_lease_then_runs_although_evidence_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let b = process(&path, slow_square(Duration::ZERO), DEFAULT_TTL);
    let first = b.scorer.score(request()).await.unwrap();
    assert_eq!(first.evidence, EvidenceUse::Ran);
    let key = attempt_key();
    assert!(
        b.store
            .try_acquire_lease(&key, "elsewhere", Duration::from_secs(60))
            .unwrap()
    );
    let fresh = b.scorer.score(request().fresh(true));
    let releaser = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = b.started();
        assert!(b.store.release_lease(&key, "elsewhere").unwrap());
        started
    };
    let (fresh, started_while_held) = tokio::join!(fresh, releaser);
    assert_eq!(started_while_held, 1, "a fresh run ignored a live lease");
    let fresh = fresh.unwrap();
    assert_eq!(fresh.evidence, EvidenceUse::Ran);
    assert_ne!(fresh.observation_ids, first.observation_ids);
    assert_eq!(b.started(), 2);
}

const CHILD_DB: &str = "PROGSCORE_TEST_LEASE_HOLDER_DB";

/// Not a test of its own: the body of the child process of
/// `a_lease_of_a_killed_process_is_taken_over_once_expired`, which holds the
/// attempt's lease (renewing it) while its run never ends, until killed.
#[tokio::test]
#[ignore = "the body of a child process, run by its parent test"]
async fn child_process_holds_a_lease_until_killed() {
    let path = std::env::var(CHILD_DB).expect("run by its parent test, which names the store");
    let holder = process(
        std::path::Path::new(&path),
        slow_square(Duration::from_secs(3600)),
        Duration::from_millis(900),
    );
    let _ = holder.scorer.score(request()).await;
    panic!("the run that never ends ended");
}

#[tokio::test]
async fn a_lease_of_a_killed_process_is_taken_over_once_expired() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    drop(EvidenceStore::open(&path).unwrap());
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "leases::child_process_holds_a_lease_until_killed",
            "--ignored",
            "--test-threads=1",
        ])
        .env(CHILD_DB, &path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ran_at = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let stamp = ran_at.clone();
    let client = ScriptedClient::new(profiles()).with_responder(move |request| {
        stamp.store(now_unix_ms(), Ordering::SeqCst);
        square_responder(request)
    });
    let b = process(&path, client, DEFAULT_TTL);
    let key = attempt_key();
    let held = lease_taken(&b.store, &key).await;
    assert!(
        held.owner.contains(&format!("-{}-", child.id())),
        "{held:?}"
    );
    // Renewed while its holder lives: past its first expiry it is still held.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let renewed = b.store.lease(&key).unwrap().unwrap();
    assert_eq!(renewed.owner, held.owner);
    assert!(renewed.expires_at_ms > held.expires_at_ms, "not renewed");
    child.kill().unwrap(); // SIGKILL: no cleanup, no release.
    child.wait().unwrap();
    let dead = b.store.lease(&key).unwrap().unwrap();
    assert_eq!(dead.owner, held.owner);
    let score = b.scorer.score(request()).await.unwrap();
    assert_eq!(score.evidence, EvidenceUse::Ran);
    assert_eq!(score.value, Some(true));
    assert_eq!(b.started(), 1);
    assert!(
        ran_at.load(Ordering::SeqCst) >= dead.expires_at_ms,
        "ran before the dead holder's lease expired"
    );
    assert_eq!(b.store.lease(&key).unwrap(), None);
}

#[tokio::test]
async fn a_holder_cancelled_mid_run_has_released_its_lease_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let a = process(&path, slow_square(Duration::from_secs(3600)), DEFAULT_TTL);
    let key = attempt_key();
    let cancel = CancellationToken::new();
    let holder = a.scorer.score(request().cancel(cancel.clone()));
    let canceller = async {
        lease_taken(&a.store, &key).await;
        cancel.cancel();
    };
    let (result, ()) = tokio::join!(holder, canceller);
    assert!(matches!(result, Err(ScoringError::Cancelled)), "{result:?}");
    assert_eq!(a.cancelled(), 1);
    assert_eq!(
        a.store.lease(&key).unwrap(),
        None,
        "the lease outlived its run"
    );
}

#[tokio::test]
async fn a_scorer_that_ends_removes_the_leases_its_flights_could_not_release() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let a = process(&path, slow_square(Duration::ZERO), DEFAULT_TTL);
    let score = a.scorer.score(request()).await.unwrap();
    assert_eq!(score.value, Some(true));
    // A flight's release that failed (the store was busy when it tried)
    // leaves a live row under this scorer's name; another process's lease
    // of another attempt is not this scorer's to remove.
    let owner = format!("{}/41", a.scorer.source().lease_owner());
    let (left, others) = ("l".repeat(64), "o".repeat(64));
    assert!(
        a.store
            .try_acquire_lease(&left, &owner, DEFAULT_TTL)
            .unwrap()
    );
    assert!(
        a.store
            .try_acquire_lease(&others, "elsewhere/1", DEFAULT_TTL)
            .unwrap()
    );
    let store = a.store.clone();
    drop(a);
    assert_eq!(
        store.lease(&left).unwrap(),
        None,
        "the lease outlived its scorer"
    );
    assert_eq!(store.lease(&others).unwrap().unwrap().owner, "elsewhere/1");
    assert_eq!(store.lease(&attempt_key()).unwrap(), None);
}
