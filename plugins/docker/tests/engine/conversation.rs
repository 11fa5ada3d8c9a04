//! Interactive runs on the real engine: a program and an interactor in two
//! containers, each one's stdout the other's stdin, case by case.

use progscore_sandbox::{
    InteractorRequest, Invocation, Outcome, ProgramFiles, RunProfile, RunRequest, SandboxClient,
    Side,
};

use super::{RUNC, harness, profile};

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

#[tokio::test]
async fn a_program_and_its_interactor_talk_case_by_case_and_the_transcript_says_how() {
    let h = harness(vec![profile(RUNC)]);
    let none = ProgramFiles::none();
    let cases = vec![Invocation::default(), Invocation::default()];
    let interactor_cases = vec![Invocation::with_args(["3"]), Invocation::with_args(["50"])];
    let request =
        RunRequest::new(PROGRAM.as_bytes(), RUNC, &cases).with_interactor(InteractorRequest {
            program: INTERACTOR.as_bytes(),
            profile: RunProfile::Named(RUNC),
            files: none,
            invocations: &interactor_cases,
        });
    let run = h.client.run(request).await.expect("the pair runs");
    let interaction = run.interaction.as_ref().expect("an interactive run");
    for (index, rounds) in [(0usize, 3u64), (1, 50)] {
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
        let transcript = &interaction.transcripts[index];
        // Every line each side wrote crossed, in order, and both ends are
        // recorded.
        assert_eq!(
            transcript.bytes_from(Side::Program),
            program.stdout.total_bytes,
            "{transcript:?}"
        );
        assert_eq!(
            transcript.bytes_from(Side::Interactor),
            interactor.stdout.total_bytes
        );
        assert!(transcript.turns.len() as u64 >= rounds, "{transcript:?}");
        assert!(transcript.program_ended_us.is_some() && transcript.interactor_ended_us.is_some());
        let times: Vec<u64> = transcript.turns.iter().map(|turn| turn.at_us).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    }
}

#[tokio::test]
async fn an_interactor_that_gives_up_ends_the_conversation_and_the_program_sees_its_end() {
    let h = harness(vec![profile(RUNC)]);
    let none = ProgramFiles::none();
    // Answers wrong: the interactor exits 1 at once, and the program, its
    // stdin closed, ends too.
    let wrong = PROGRAM.replace("int(line) * 2", "int(line) * 3");
    let cases = vec![Invocation::default()];
    let interactor_cases = vec![Invocation::with_args(["5"])];
    let request =
        RunRequest::new(wrong.as_bytes(), RUNC, &cases).with_interactor(InteractorRequest {
            program: INTERACTOR.as_bytes(),
            profile: RunProfile::Named(RUNC),
            files: none,
            invocations: &interactor_cases,
        });
    let run = h.client.run(request).await.expect("the pair runs");
    let interaction = run.interaction.as_ref().expect("an interactive run");
    let interactor = &interaction.interactor.events[0];
    assert_eq!(interactor.outcome, Outcome::Exited { exit_code: 1 });
    assert!(
        String::from_utf8_lossy(&interactor.stderr.data.0).contains("wrong answer to 1"),
        "{interactor:?}"
    );
    assert_eq!(run.events[0].outcome, Outcome::Exited { exit_code: 0 });
    assert!(interaction.transcripts[0].interactor_ended_first());
}
