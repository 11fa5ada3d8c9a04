//! Interactive items: the program talks to an interactor (testlib's
//! conventions: `interactor INPUT OUTPUT ANSWER`, the conversation on its
//! stdin and stdout), and the interactor gives each case's verdict.
//!
//! The run is one attempt: the program's cases and the interactor's, side
//! by side in sandboxes of their own ([`progscore_sandbox::conversation`]),
//! keyed by the program's and the interactor's identities together (the
//! interactor's source, profile, files, and every case's input and answer
//! under `"interactor"` in the fingerprint). Its observation holds both
//! sides and the transcripts, so a rescore runs nothing.
//!
//! Whose a case's outcome is, with the same truth as every verdict here:
//! - either side's sandbox failing (or a case not run) decides nothing;
//! - when the interactor ended first, it judged a conversation the program
//!   was still in: its wrong answer or presentation error is false, its
//!   fault (a crash, its timeout, FAIL, an answer outside the protocol) is
//!   undetermined whatever the program did after (a program whose input
//!   ended may well crash), and its acceptance stands only if the program
//!   then ended as expected on its own;
//! - otherwise the program ended first, or was ended at a limit while the
//!   interactor still ran. A crash or memory kill is the program's. A
//!   wall-clock timeout is the program's only when the CPU it used proves
//!   it worked through its time: a program that waited may have waited
//!   for the interactor (a deadlock, or an interactor held up by a busy
//!   machine), which proves nothing about it. A program that ended as
//!   expected is judged by what the interactor then said.

use std::collections::BTreeMap;

use progscore_sandbox::{
    ByteString, Interaction, Invocation, InvocationEvent, MAX_FILES, MAX_FILES_BYTES, Outcome,
    ProgramFiles, ProgramRun, RuntimeProfile, TimeLimit, sha256_hex,
};
use serde_json::json;

use crate::checker::{CheckerProgram, CheckerProtocol, CheckerVerdict, CheckerVerdicts, judge};
use crate::error::ExpectationError;
use crate::expectation::ProgramBehaves;
use crate::verdict::{CaseDecision, ReasonKind};

/// Where the interactor reads a case's input and answer, relative to its
/// folder; its OUTPUT (testlib's file for a checker after it) goes nowhere.
fn case_files(index: usize) -> [String; 2] {
    [
        format!("case-{index}/input"),
        format!("case-{index}/answer"),
    ]
}

const INTERACTOR_OUTPUT: &str = "/dev/null";

/// The interactor's side of an item's attempt: what runs beside the
/// program, and its part of the attempt's key.
#[derive(Debug, Clone, PartialEq)]
pub struct InteractorAttempt {
    /// The interactor's source, run verbatim.
    pub program: ByteString,
    /// Its configured profile with its own limits.
    pub profile: RuntimeProfile,
    /// Its own files and every case's input and answer.
    pub files: ProgramFiles,
    /// One per case: `INPUT OUTPUT ANSWER`.
    pub invocations: Vec<Invocation>,
    /// What the attempt's fingerprint records of it (under `"interactor"`).
    pub key: serde_json::Value,
}

fn refused(field: &str, message: String) -> ExpectationError {
    ExpectationError::Checker {
        field: format!("interactor{}", if field.is_empty() { "" } else { "." }) + field,
        message,
    }
}

/// Checks what only an interactor asks: testlib's protocol, no checker
/// beside it, points that are a positive number.
pub(crate) fn validate(
    behaves: &ProgramBehaves,
    interactor: &CheckerProgram,
) -> Result<(), ExpectationError> {
    if behaves.checker.is_some() {
        return Err(ExpectationError::Checker {
            field: "checker".into(),
            message: "an interactive item is judged by its interactor; it takes no checker".into(),
        });
    }
    if interactor.protocol != CheckerProtocol::Testlib {
        return Err(refused(
            "protocol",
            "an interactor follows testlib's conventions (`interactor INPUT OUTPUT ANSWER`, exit codes 0, 1, 2, 3, 7)".into(),
        ));
    }
    if let Some(points) = interactor.max_points
        && !(points.is_finite() && points > 0.0)
    {
        return Err(refused(
            "max_points",
            format!("{points} is not a positive number of points"),
        ));
    }
    Ok(())
}

/// The interactor's side of the attempt for `behaves`' cases: each case's
/// stdin becomes its INPUT and its answer its ANSWER (the program gets
/// neither: its stdin is the conversation). `profile` is the interactor's
/// configured profile with its own limits.
pub(crate) fn attempt(
    behaves: &ProgramBehaves,
    interactor: &CheckerProgram,
    profile: RuntimeProfile,
) -> Result<InteractorAttempt, ExpectationError> {
    let mut files: Vec<(String, ByteString)> = interactor
        .files
        .iter()
        .map(|(path, bytes)| (path.to_string(), ByteString(bytes.to_vec())))
        .collect();
    let mut invocations = Vec::with_capacity(behaves.cases.len());
    for (index, case) in behaves.cases.iter().enumerate() {
        let [input, answer] = case_files(index);
        invocations.push(Invocation::with_args([
            input.clone(),
            INTERACTOR_OUTPUT.to_string(),
            answer.clone(),
        ]));
        files.push((input, case.invocation.stdin.clone().unwrap_or_default()));
        files.push((answer, case.expected.answer.clone().unwrap_or_default()));
    }
    let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
    if files.len() > MAX_FILES || bytes > MAX_FILES_BYTES {
        return Err(refused(
            "",
            format!(
                "the interactor's files and every case's input and answer ({} files, {bytes} bytes) \
                 exceed what one run can be given ({MAX_FILES} files, {MAX_FILES_BYTES} bytes): split the item",
                files.len()
            ),
        ));
    }
    let files = ProgramFiles::new(files).map_err(|e| refused("files", e.to_string()))?;
    files
        .check_for(&profile)
        .map_err(|e| refused("files", e.to_string()))?;
    let key = json!({
        "profile": profile.name,
        // The configured profile (not what an engine resolves it to): a
        // rescore finds the run without asking any engine.
        "fingerprint": files.keyed(profile.fingerprint_json()),
        "source_sha256": sha256_hex(interactor.source.as_bytes()),
        "invocations": invocations,
    });
    Ok(InteractorAttempt {
        program: interactor.source.clone(),
        profile,
        files,
        invocations,
        key,
    })
}

/// What the interactive evidence decides before the program's own rules:
/// the interactor's verdicts (for cases the program ended as expected) and
/// the cases nothing can be decided of.
#[derive(Debug, Default)]
pub(crate) struct Judged {
    pub(crate) checks: CheckerVerdicts,
    pub(crate) decided: BTreeMap<usize, CaseDecision>,
}

/// Judges `run`'s cases by its interaction (see the module's rules).
pub(crate) fn judged(
    behaves: &ProgramBehaves,
    interactor: &CheckerProgram,
    run: &ProgramRun,
) -> Judged {
    let mut judged = Judged::default();
    let Some(interaction) = run.interaction.as_deref() else {
        for index in 0..behaves.cases.len() {
            judged.decided.insert(
                index,
                CaseDecision::Undetermined(
                    ReasonKind::NoEvidence,
                    format!("case {index}: the run holds no conversation with the interactor"),
                ),
            );
        }
        return judged;
    };
    for (index, case) in behaves.cases.iter().enumerate() {
        let Some(program) = run.events.get(index) else {
            continue;
        };
        match decide(
            index,
            case.expected.exit_code,
            interactor,
            program,
            interaction,
        ) {
            Decision::Program => {}
            Decision::Judge(verdict) => {
                judged.checks.insert(index, verdict);
            }
            Decision::Decided(decided) => {
                judged.decided.insert(index, decided);
            }
        }
    }
    judged
}

enum Decision {
    /// The program's own outcome decides (the verdict rules' usual path).
    Program,
    /// The program ended as expected: this verdict decides.
    Judge(CheckerVerdict),
    /// Decided before the program's own rules.
    Decided(CaseDecision),
}

fn undetermined(kind: ReasonKind, clause: String) -> Decision {
    Decision::Decided(CaseDecision::Undetermined(kind, clause))
}

fn decide(
    index: usize,
    expected_code: i64,
    interactor: &CheckerProgram,
    program: &InvocationEvent,
    interaction: &Interaction,
) -> Decision {
    // An interactor that did not build decides nothing, whatever became
    // of the program (its cases were never begun).
    if let Some(Outcome::CompileError { reason }) = interaction
        .interactor
        .events
        .get(index)
        .map(|event| &event.outcome)
    {
        return undetermined(
            ReasonKind::CheckerUndecided,
            format!("case {index}: the interactor did not build ({reason})"),
        );
    }
    // The program's own unproven outcomes keep their usual reasons.
    if matches!(
        program.outcome,
        Outcome::SandboxError { .. } | Outcome::NotRun { .. } | Outcome::CompileError { .. }
    ) {
        return Decision::Program;
    }
    let Some(other) = interaction.interactor.events.get(index) else {
        return undetermined(
            ReasonKind::NotRun,
            format!("case {index}: the interactor has no event for it"),
        );
    };
    match &other.outcome {
        Outcome::SandboxError { message } => {
            return undetermined(
                ReasonKind::SandboxError,
                format!("case {index}: the interactor's sandbox failed: {message}"),
            );
        }
        Outcome::NotRun { reason } => {
            return undetermined(
                ReasonKind::NotRun,
                format!("case {index}: the interactor did not run: {reason}"),
            );
        }
        _ => {}
    }
    let verdict = judge(interactor, other);
    let transcript = interaction.transcripts.get(index);
    let program_ended_as_expected =
        matches!(program.outcome, Outcome::Exited { exit_code } if exit_code == expected_code);
    if transcript.is_some_and(|t| t.interactor_ended_first()) {
        return match verdict {
            CheckerVerdict::Undetermined(why) => undetermined(
                ReasonKind::CheckerUndecided,
                format!("case {index}: the interactor could not decide: {why}"),
            ),
            // Whatever the program did after, the interactor's word is the
            // reason shown (its own failure would be false too).
            CheckerVerdict::WrongAnswer(message) => Decision::Decided(CaseDecision::Failed(
                format!("case {index} was judged wrong by the interactor"),
                Some(message).filter(|m| !m.is_empty()),
            )),
            CheckerVerdict::PresentationError(message) => Decision::Decided(CaseDecision::Failed(
                format!("case {index} was judged malformed by the interactor"),
                Some(message).filter(|m| !m.is_empty()),
            )),
            accepted if program_ended_as_expected => Decision::Judge(accepted),
            _ => Decision::Program,
        };
    }
    match &program.outcome {
        Outcome::TimedOut {
            limit: TimeLimit::Wall,
            unconfirmed: None,
        } if !program.worked_through_its_limit() => undetermined(
            ReasonKind::UnconfirmedTimeout,
            format!(
                "case {index} timed out while the interactor still ran, using {} of CPU: \
                 it may have waited for the interactor, which proves nothing about it",
                program
                    .usage
                    .as_ref()
                    .and_then(|usage| usage.cpu_ms)
                    .map_or("an unmeasured amount".to_string(), |ms| format!("{ms} ms")),
            ),
        ),
        Outcome::Exited { exit_code } if *exit_code == expected_code => match verdict {
            CheckerVerdict::Undetermined(why) => undetermined(
                ReasonKind::CheckerUndecided,
                format!("case {index}: the interactor could not decide: {why}"),
            ),
            decided => Decision::Judge(decided),
        },
        _ => Decision::Program,
    }
}

/// The request's interactor for `attempt`'s run.
pub(crate) fn request(attempt: &InteractorAttempt) -> progscore_sandbox::InteractorRequest<'_> {
    progscore_sandbox::InteractorRequest {
        program: attempt.program.as_bytes(),
        profile: progscore_sandbox::RunProfile::Variant(&attempt.profile),
        files: &attempt.files,
        invocations: &attempt.invocations,
    }
}
