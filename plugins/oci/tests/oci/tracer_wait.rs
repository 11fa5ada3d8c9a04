//! Time a traced program's calls wait for the seccomp listener is the
//! listener's: a correct program held up by a slow listener gets that time
//! back, and a timeout that cannot be told apart from it is unconfirmed
//! (undetermined), never a proven `false`. A spinner is still a proven
//! timeout. The listener is made slow by a test hook (each wake-up
//! answered late), as a starved listener would be.

use std::path::Path;
use std::time::Duration;

use progscore_oci::{OciClient, OciOptions};
use progscore_sandbox::{Outcome, RuntimeProfile, TraceSpec};
use progscore_trace::tracer_hold::test_hooks::slow_listeners_under;

use super::{leftovers, run, spec, stdout};

const TRACED: &str = "python-oci-traced";

/// How late the slow listener answers each call.
const ANSWER_DELAY: Duration = Duration::from_millis(5);

/// A traced runc client with a 500 ms limit whose listeners are slow.
fn slow_traced_client() -> OciClient {
    let mut traced = spec("python-oci");
    traced.trace = Some(TraceSpec::On(true));
    traced.limits.timeout = "500ms".into();
    let traced = RuntimeProfile::from_spec(TRACED, &traced, Path::new(".")).expect("profile");
    let client = OciClient::new(vec![traced], OciOptions::default()).expect("client");
    slow_listeners_under(client.owner_dir(), ANSWER_DELAY);
    client
}

/// A program doing `opens` opens (each a notified call) and nothing else.
fn opener(opens: usize) -> String {
    format!("for _ in range({opens}):\n    open('/etc/hostname').close()\nprint('done')\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correct_program_held_by_its_tracer_gets_the_time_back() {
    let client = slow_traced_client();
    // 120 opens answered 5 ms late (600 ms at least): well past
    // the 500 ms limit in wall time, a few ms of the program's own.
    let run = run(&client, TRACED, &opener(120)).await;
    let event = &run.events[0];
    assert_eq!(event.outcome, Outcome::Exited { exit_code: 0 }, "{run:?}");
    assert_eq!(stdout(&run), "done\n");
    assert!(
        event.duration_ms > 500,
        "the tracer did not hold it up: {run:?}"
    );
    assert_eq!(leftovers(&client), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_held_by_the_tracer_is_unconfirmed_never_proven() {
    let client = slow_traced_client();
    // 2,000 opens answered 5 ms late: 10 s of the listener's, beyond what
    // a 500 ms limit stretches to (4x).
    let run = run(&client, TRACED, &opener(2000)).await;
    let Outcome::TimedOut {
        unconfirmed: Some(why),
        ..
    } = &run.events[0].outcome
    else {
        panic!("a timeout held by the tracer must be unconfirmed: {run:?}");
    };
    eprintln!("unconfirmed: {why}");
    assert!(
        why.contains("for its behaviour tracer") && why.contains("cannot be told apart"),
        "{why}"
    );
    assert_eq!(leftovers(&client), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_spinner_is_still_a_proven_timeout() {
    let client = slow_traced_client();
    let run = run(
        &client,
        TRACED,
        "open('/etc/hostname').close()\nwhile True:\n    pass\n",
    )
    .await;
    assert!(
        matches!(
            run.events[0].outcome,
            Outcome::TimedOut {
                unconfirmed: None,
                ..
            }
        ),
        "{run:?}"
    );
    assert_eq!(leftovers(&client), Vec::<String>::new());
}
