//! Interactive runs on the real runtimes: a program and an interactor in two
//! containers, each one's stdout the other's stdin, case by case.

use std::path::Path;
use std::time::Duration;

use progscore_oci::{OciClient, OciOptions};
use progscore_sandbox::{
    InteractorRequest, Invocation, Outcome, ProgramFiles, ProgramRun, RunProfile, RunRequest,
    RuntimeProfile, SandboxClient, Side,
};

use super::{client, leftovers, spec};

const RUNC: &str = "python-oci";
const GVISOR: &str = "python-oci-gvisor";

/// Asks the interactor for a number per line until it says `done`, echoing
/// each doubled.
const PROGRAM: &str = r#"
import sys
for line in sys.stdin:
    if line.strip() == "done":
        break
    print(int(line) * 2, flush=True)
print("bye", flush=True)
"#;

/// Sends 1..=N (N its first argument), checks each answer, exits 0 when
/// every answer was right and 1 otherwise; its message on stderr.
const INTERACTOR: &str = r#"
import sys
n = int(sys.argv[1])
for i in range(1, n + 1):
    print(i, flush=True)
    got = sys.stdin.readline()
    if got.strip() != str(2 * i):
        print(f"wrong answer to {i}: {got!r}", file=sys.stderr)
        sys.exit(1)
print("done", flush=True)
if sys.stdin.readline().strip() != "bye":
    sys.exit(2)
print(f"ok {n} round trips", file=sys.stderr)
"#;

/// Runs `program` under `profile` against the interactor under
/// `interactor_profile`, one case per entry of `rounds`.
async fn converse(
    program: &str,
    profile: &str,
    interactor_profile: &str,
    rounds: &[u64],
) -> ProgramRun {
    converse_on(
        &client(),
        program,
        INTERACTOR,
        profile,
        interactor_profile,
        rounds,
    )
    .await
}

async fn converse_on(
    client: &OciClient,
    program: &str,
    interactor: &str,
    profile: &str,
    interactor_profile: &str,
    rounds: &[u64],
) -> ProgramRun {
    let none = ProgramFiles::none();
    let cases = vec![Invocation::default(); rounds.len()];
    let interactor_cases: Vec<_> = rounds
        .iter()
        .map(|n| Invocation::with_args([n.to_string()]))
        .collect();
    let request =
        RunRequest::new(program.as_bytes(), profile, &cases).with_interactor(InteractorRequest {
            program: interactor.as_bytes(),
            profile: RunProfile::Named(interactor_profile),
            files: none,
            invocations: &interactor_cases,
        });
    let run = client.run(request).await.expect("the pair runs");
    assert_eq!(leftovers(client), Vec::<String>::new());
    run
}

/// Both sides of each case exited 0 with every round trip made, and the
/// transcript lists every byte each side wrote, in order, and both ends.
fn assert_talked(run: &ProgramRun, rounds: &[u64]) {
    let interaction = run.interaction.as_ref().expect("an interactive run");
    for (index, &rounds) in rounds.iter().enumerate() {
        let program = &run.events[index];
        let interactor = &interaction.interactor.events[index];
        assert_eq!(
            program.outcome,
            Outcome::Exited { exit_code: 0 },
            "{program:?}"
        );
        assert_eq!(
            interactor.outcome,
            Outcome::Exited { exit_code: 0 },
            "{}",
            String::from_utf8_lossy(&interactor.stderr.data.0)
        );
        assert_eq!(
            String::from_utf8_lossy(&interactor.stderr.data.0).trim(),
            format!("ok {rounds} round trips")
        );
        let answers: String = (1..=rounds).map(|i| format!("{}\n", 2 * i)).collect();
        assert_eq!(
            program.stdout.data.to_string_lossy(),
            format!("{answers}bye\n")
        );
        let transcript = &interaction.transcripts[index];
        assert_eq!(
            transcript.bytes_from(Side::Program),
            program.stdout.total_bytes,
            "{transcript:?}"
        );
        assert_eq!(
            transcript.bytes_from(Side::Interactor),
            interactor.stdout.total_bytes
        );
        assert_eq!(transcript.program_bytes_undelivered, 0, "{transcript:?}");
        assert_eq!(transcript.interactor_bytes_undelivered, 0);
        assert!(transcript.turns.len() as u64 >= rounds, "{transcript:?}");
        assert!(transcript.program_ended_us.is_some() && transcript.interactor_ended_us.is_some());
        let times: Vec<u64> = transcript.turns.iter().map(|turn| turn.at_us).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_and_its_interactor_talk_case_by_case_and_the_transcript_says_how() {
    let rounds = [3, 50];
    let run = converse(PROGRAM, RUNC, RUNC, &rounds).await;
    assert_talked(&run, &rounds);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_under_gvisor_talks_to_its_interactor_under_runc() {
    let rounds = [5];
    let run = converse(PROGRAM, GVISOR, RUNC, &rounds).await;
    assert_talked(&run, &rounds);
    let runtime = |run: &ProgramRun| {
        run.events[0]
            .provenance
            .as_ref()
            .map(|provenance| provenance.runtime.clone())
    };
    let interaction = run.interaction.as_ref().expect("an interactive run");
    assert_eq!(runtime(&run).as_deref(), Some("runsc"));
    assert_eq!(runtime(&interaction.interactor).as_deref(), Some("runc"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interactor_that_gives_up_ends_the_conversation_and_the_program_sees_its_end() {
    // Answers wrong: the interactor exits 1 at once, and the program, its
    // stdin closed, ends too.
    let wrong = PROGRAM.replace("int(line) * 2", "int(line) * 3");
    let run = converse(&wrong, RUNC, RUNC, &[5]).await;
    let interaction = run.interaction.as_ref().expect("an interactive run");
    let interactor = &interaction.interactor.events[0];
    assert_eq!(interactor.outcome, Outcome::Exited { exit_code: 1 });
    assert!(
        String::from_utf8_lossy(&interactor.stderr.data.0).contains("wrong answer to 1"),
        "{interactor:?}"
    );
    assert_eq!(run.events[0].outcome, Outcome::Exited { exit_code: 0 });
    assert_eq!(run.events[0].stdout.data.to_string_lossy(), "3\nbye\n");
    assert!(interaction.transcripts[0].interactor_ended_first());
}

/// The program's output ends when it exits, whatever its interactor still
/// does: its stdin is no longer fed then, and its event never waits for
/// the interactor's end (past the runtime's bound, which would make it a
/// sandbox error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_that_ended_is_not_held_by_an_interactor_still_running() {
    let runtime_timeout = Duration::from_secs(3);
    let mut long = spec(RUNC);
    long.limits.timeout = "20s".into();
    let profile = RuntimeProfile::from_spec(RUNC, &long, Path::new(".")).expect("profile");
    let client = OciClient::new(
        vec![profile],
        OciOptions {
            runtime_timeout,
            ..OciOptions::default()
        },
    )
    .expect("client");
    // Its verdict given, the interactor stays past the runtime's bound
    // after the program ended (its end of file seen).
    let lingering = INTERACTOR.replace(
        "print(f\"ok {n} round trips\", file=sys.stderr)",
        "sys.stdin.read()\nimport time\ntime.sleep(6)\nprint(f\"ok {n} round trips\", file=sys.stderr)",
    );
    assert_ne!(lingering, INTERACTOR);
    let rounds = [2];
    let run = converse_on(&client, PROGRAM, &lingering, RUNC, RUNC, &rounds).await;
    assert_talked(&run, &rounds);
}
