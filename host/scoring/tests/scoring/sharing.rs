//! Sharing and cancellation.

use super::*;

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
