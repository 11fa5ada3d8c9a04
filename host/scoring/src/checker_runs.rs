//! A checker program's runs for an item: which cases it judges, grouped
//! into attempts as the files' bounds allow, and what its runs said. Apart
//! from `checker` (the shapes and the protocols), which the expectation
//! names, so that no file reaches itself through the other.

use progscore_sandbox::{
    ByteString, Invocation, InvocationEvent, MAX_FILES, MAX_FILES_BYTES, Outcome, ProgramFiles,
    RuntimeProfile, sha256_hex,
};

use crate::attempt::Attempt;
use crate::checker::{CheckerProgram, CheckerVerdict, CheckerVerdicts, judge};
use crate::expectation::ProgramBehaves;

/// Where the checker reads the case's files, relative to its folder.
fn case_files(index: usize) -> [String; 3] {
    [
        format!("case-{index}/input"),
        format!("case-{index}/output"),
        format!("case-{index}/answer"),
    ]
}

/// One checker run: the attempt (a compile and one invocation per case)
/// and the cases it judges, in invocation order.
#[derive(Debug, Clone)]
pub(crate) struct CheckerRun {
    pub(crate) attempt: Attempt,
    pub(crate) cases: Vec<usize>,
}

/// What a program checker must do for an item: its runs, and the cases
/// decided without one (an output not kept whole).
#[derive(Debug, Clone, Default)]
pub(crate) struct CheckerPlan {
    pub(crate) runs: Vec<CheckerRun>,
    pub(crate) decided: CheckerVerdicts,
}

/// Plans the checker program's runs for the program's `events`: every case
/// that exited as expected with its output kept whole is judged; cases are
/// grouped into as few runs as the files' bounds allow. `profile` is the
/// checker's configured profile with the checker's own limits.
pub(crate) fn plan(
    behaves: &ProgramBehaves,
    checker: &CheckerProgram,
    profile: &RuntimeProfile,
    events: &[InvocationEvent],
) -> Result<CheckerPlan, String> {
    // The checker's own limits are already the profile's (see
    // `Replayer::checker_profile`).
    let variant = profile.clone();
    let source_sha256 = sha256_hex(checker.source.as_bytes());
    let own_files: Vec<(String, ByteString)> = checker
        .files
        .iter()
        .map(|(path, bytes)| (path.to_string(), ByteString(bytes.to_vec())))
        .collect();
    let own_bytes: usize = own_files.iter().map(|(_, b)| b.len()).sum();
    let mut plan = CheckerPlan::default();
    let mut pending: Vec<(usize, [(String, ByteString); 3])> = Vec::new();
    let mut pending_bytes = 0;
    for (index, case) in behaves.cases.iter().enumerate() {
        let Some(event) = events.get(index) else {
            continue;
        };
        let exited_as_expected = matches!(
            event.outcome,
            Outcome::Exited { exit_code } if exit_code == case.expected.exit_code
        );
        if !exited_as_expected {
            continue;
        }
        if event.stdout.truncated {
            plan.decided.insert(
                index,
                CheckerVerdict::Undetermined(format!(
                    "the output was cut after {} of {} bytes, and a checker program judges only a whole output",
                    event.stdout.data.len(),
                    event.stdout.total_bytes
                )),
            );
            continue;
        }
        let input = case.invocation.stdin.clone().unwrap_or_default();
        let output = event.stdout.data.clone();
        let answer = case.expected.answer.clone().unwrap_or_default();
        let bytes = input.len() + output.len() + answer.len();
        if own_bytes + bytes > MAX_FILES_BYTES {
            plan.decided.insert(
                index,
                CheckerVerdict::Undetermined(format!(
                    "the case's input, output and answer ({bytes} bytes) and the checker's files \
                     exceed the {MAX_FILES_BYTES} bytes a checker run can be given"
                )),
            );
            continue;
        }
        let full = pending.len() * 3 + 3 + own_files.len() > MAX_FILES
            || own_bytes + pending_bytes + bytes > MAX_FILES_BYTES;
        if full && !pending.is_empty() {
            plan.runs.push(run_of(
                checker,
                &variant,
                &source_sha256,
                &own_files,
                std::mem::take(&mut pending),
            )?);
            pending_bytes = 0;
        }
        let [i, o, a] = case_files(index);
        pending.push((index, [(i, input), (o, output), (a, answer)]));
        pending_bytes += bytes;
    }
    if !pending.is_empty() {
        plan.runs.push(run_of(
            checker,
            &variant,
            &source_sha256,
            &own_files,
            pending,
        )?);
    }
    Ok(plan)
}

fn run_of(
    checker: &CheckerProgram,
    variant: &RuntimeProfile,
    source_sha256: &str,
    own_files: &[(String, ByteString)],
    cases: Vec<(usize, [(String, ByteString); 3])>,
) -> Result<CheckerRun, String> {
    let mut invocations = Vec::with_capacity(cases.len());
    let mut indices = Vec::with_capacity(cases.len());
    let mut files: Vec<(String, ByteString)> = own_files.to_vec();
    for (index, [input, output, answer]) in cases {
        invocations.push(Invocation::with_args(
            checker.protocol.args(&input.0, &output.0, &answer.0),
        ));
        files.extend([input, output, answer]);
        indices.push(index);
    }
    let files = ProgramFiles::new(files).map_err(|e| format!("the checker's files: {e}"))?;
    files
        .check_for(variant)
        .map_err(|e| format!("the checker's files: {e}"))?;
    // Keyed by the configured profile (not what an engine resolves it to),
    // so a rescore finds the run without asking any engine.
    let attempt = Attempt::from_parts(
        &variant.name,
        files.keyed(variant.fingerprint_json()),
        source_sha256,
        invocations,
    )
    .map_err(|e| e.to_string())?
    .with_variant(Some(variant.clone()))
    .with_files(files);
    Ok(CheckerRun {
        attempt,
        cases: indices,
    })
}

/// What a checker run's events say of the cases it judged.
pub(crate) fn judged<'a>(
    checker: &'a CheckerProgram,
    run: &'a CheckerRun,
    events: &'a [InvocationEvent],
) -> impl Iterator<Item = (usize, CheckerVerdict)> + 'a {
    run.cases.iter().enumerate().map(move |(position, &index)| {
        let verdict = match events.get(position) {
            Some(event) => judge(checker, event),
            None => CheckerVerdict::Undetermined("the checker's run has no event for it".into()),
        };
        (index, verdict)
    })
}

/// Every case a checker should judge, undetermined for `reason` (the
/// checker could not be planned or run at all).
pub(crate) fn all_undetermined(
    behaves: &ProgramBehaves,
    events: &[InvocationEvent],
    reason: &str,
) -> CheckerVerdicts {
    (0..behaves.cases.len().min(events.len()))
        .map(|index| (index, CheckerVerdict::Undetermined(reason.to_string())))
        .collect()
}
