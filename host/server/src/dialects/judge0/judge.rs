//! A submission run and judged: its job executed (kept In Queue while the
//! queues are full), and the run mapped onto Judge0's statuses.

use std::sync::Arc;

use progscore_sandbox::{CapturedStream, Outcome};
use serde::{Deserialize, Serialize};

use super::accept::*;
use super::model::*;
use crate::http::error::ApiError;
use crate::jobs::execute::{Executed, JobError, ProgramJob, execute, unproven_reason};
use crate::state::AppState;

/// What is stored once a submission has run (text as base64).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct StoredResult {
    pub(super) status_id: i64,
    pub(super) stdout: Option<String>,
    pub(super) stderr: Option<String>,
    pub(super) compile_output: Option<String>,
    pub(super) message: Option<String>,
    pub(super) exit_code: Option<i64>,
    pub(super) exit_signal: Option<i64>,
    pub(super) time: Option<f64>,
    pub(super) wall_time: Option<f64>,
    pub(super) memory: Option<u64>,
    pub(super) observation_id: Option<String>,
}

impl StoredResult {
    pub(super) fn internal_error(message: impl Into<String>) -> StoredResult {
        StoredResult {
            status_id: INTERNAL_ERROR,
            message: Some(encode(message.into().as_bytes())),
            ..StoredResult::default()
        }
    }
}

/// How long a submission that found its profile busy waits before asking
/// for a turn again.
pub(super) const OVERLOAD_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);

/// Runs a stored request; what to store as its result. A request the
/// sandbox could not be given (a field at fault) is `Err`.
pub(super) async fn run(
    state: &Arc<AppState>,
    request: &StoredRequest,
    job: ProgramJob,
) -> Result<StoredResult, ApiError> {
    let expected = request.expected_output.as_deref().and_then(decode);
    let mut outcome = execute(state, job.clone(), &field_name).await;
    // A submission is queued work: a busy profile delays it, it never
    // decides it. It stays "In Queue" until it gets a turn (or the server
    // drains, and the next start fails it as abandoned).
    while matches!(outcome, Err(JobError::Busy { .. })) && !state.is_draining() {
        tokio::time::sleep(OVERLOAD_PAUSE).await;
        outcome = execute(state, job.clone(), &field_name).await;
    }
    match outcome {
        Ok(executed) => Ok(judge(&executed, expected.as_deref())),
        Err(JobError::Invalid(error)) => Err(error),
        Err(JobError::Busy { .. }) => Ok(StoredResult::internal_error(
            "the server shut down before the program ran; submit it again",
        )),
        Err(JobError::Refused { message, .. }) => Ok(StoredResult::internal_error(format!(
            "the sandbox could not run the program: {message}"
        ))),
        Err(JobError::Cancelled) => Ok(StoredResult::internal_error(
            "the server shut down before the program ran to its end; submit it again",
        )),
        Err(JobError::Internal {
            incident: message, ..
        }) => Ok(StoredResult::internal_error(format!(
            "progscore failed: {message}"
        ))),
    }
}

/// Judge0's view of a run (see the module doc for the mapping).
pub(super) fn judge(executed: &Executed, expected: Option<&[u8]>) -> StoredResult {
    let run = &executed.observation.run;
    let observation = executed.observation.id.clone();
    let unproven = |what: String| StoredResult {
        observation_id: Some(observation.clone()),
        ..StoredResult::internal_error(format!("{what} (observation {observation})"))
    };
    let compile_output = run.compile.as_ref().map(|compile| {
        let mut output = compile.event.stdout.data.0.clone();
        output.extend_from_slice(&compile.event.stderr.data.0);
        encode(&output)
    });
    if let Some(compile) = &run.compile
        && compile.event.outcome.is_unproven()
    {
        return unproven(unproven_reason(&compile.event.outcome, "the build"));
    }
    let Some(event) = executed.event() else {
        return unproven("the run has no event".into());
    };
    if let Outcome::CompileError { reason } = &event.outcome {
        return StoredResult {
            status_id: COMPILATION_ERROR,
            compile_output,
            message: Some(encode(reason.as_bytes())),
            observation_id: Some(observation),
            ..StoredResult::default()
        };
    }
    if event.outcome.is_unproven() {
        return unproven(unproven_reason(&event.outcome, "the program"));
    }
    let usage = event.usage.as_ref();
    let mut result = StoredResult {
        status_id: ACCEPTED,
        stdout: Some(encode(&event.stdout.data.0)),
        stderr: Some(encode(&event.stderr.data.0)),
        compile_output,
        time: usage.and_then(|u| u.cpu_ms).map(|ms| ms as f64 / 1000.0),
        wall_time: Some(event.duration_ms as f64 / 1000.0),
        memory: usage
            .and_then(|u| u.peak_memory_bytes)
            .map(|bytes| bytes / 1024),
        observation_id: Some(observation.clone()),
        ..StoredResult::default()
    };
    match &event.outcome {
        Outcome::Exited { exit_code: 0 } => {
            result.exit_code = Some(0);
            if let Some(expected) = expected {
                match compare(&event.stdout, expected) {
                    Some(true) => {}
                    Some(false) => result.status_id = WRONG_ANSWER,
                    None => {
                        return unproven(
                            "stdout was cut at the profile's output limit and matches the expected output as far as it goes".into(),
                        );
                    }
                }
            }
        }
        Outcome::Exited { exit_code } => {
            let signal = (129..=192).contains(exit_code).then(|| exit_code - 128);
            result.status_id = match signal {
                Some(11) => 7,
                Some(25) => 8,
                Some(8) => 9,
                Some(6) => 10,
                Some(_) => RUNTIME_ERROR_OTHER,
                None => NZEC,
            };
            result.exit_code = Some(*exit_code);
            result.exit_signal = signal;
        }
        Outcome::TimedOut { .. } => {
            result.status_id = TIME_LIMIT_EXCEEDED;
            result.message = Some(encode(b"Time limit exceeded"));
        }
        Outcome::MemoryLimit => {
            result.status_id = RUNTIME_ERROR_OTHER;
            result.exit_signal = Some(9);
            result.message = Some(encode(
                b"Memory limit exceeded: the program was killed (signal 9)",
            ));
        }
        // The unproven and compile outcomes were answered above.
        other => return unproven(other.kind().to_string()),
    }
    result
}

/// Judge0's comparison: each line's trailing whitespace and the text's
/// surrounding blank space ignored. `None` when stdout was cut short and
/// the kept part does not already differ: nothing is proven.
pub(super) fn compare(stdout: &CapturedStream, expected: &[u8]) -> Option<bool> {
    let kept = &stdout.data.0;
    if stdout.truncated {
        return if expected.starts_with(kept) {
            None
        } else {
            Some(false)
        };
    }
    Some(normalize(kept) == normalize(expected))
}

/// Judge0's own normalisation (Ruby's `split("\n").map(&:rstrip)
/// .join("\n").strip`), on bytes: only ASCII whitespace and NUL are blank
/// space, so a trailing no-break space or any other Unicode space still
/// differs, and bytes that are not UTF-8 are compared as they are, never
/// replaced.
pub(super) fn normalize(text: &[u8]) -> Vec<u8> {
    fn blank(byte: &u8) -> bool {
        matches!(byte, b'\0' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
    }
    fn trim_end(mut bytes: &[u8]) -> &[u8] {
        while let [rest @ .., last] = bytes
            && blank(last)
        {
            bytes = rest;
        }
        bytes
    }
    let joined = text
        .split(|byte| *byte == b'\n')
        .map(trim_end)
        .collect::<Vec<_>>()
        .join(&b'\n');
    let start = joined
        .iter()
        .position(|byte| !blank(byte))
        .unwrap_or(joined.len());
    trim_end(&joined[start..]).to_vec()
}

#[cfg(test)]
mod tests {
    use progscore_sandbox::ByteString;

    use std::collections::BTreeMap;

    use super::*;

    fn stream(text: &str, truncated: bool) -> CapturedStream {
        CapturedStream {
            data: ByteString(text.as_bytes().to_vec()),
            truncated,
            total_bytes: text.len() as u64 + if truncated { 100 } else { 0 },
        }
    }

    #[test]
    fn output_is_compared_as_judge0_does() {
        assert_eq!(compare(&stream("9\n", false), b"9"), Some(true));
        assert_eq!(compare(&stream("a  \r\nb\n\n", false), b"a\nb"), Some(true));
        assert_eq!(compare(&stream("10\n", false), b"9\n"), Some(false));
        // Leading space inside a line matters.
        assert_eq!(compare(&stream("a\n b\n", false), b"a\nb"), Some(false));
        // Only ASCII blank space is trimmed: a no-break space is output.
        assert_eq!(compare(&stream("42\u{a0}", false), b"42"), Some(false));
        assert_eq!(compare(&stream("42\t \r\n\0", false), b"42"), Some(true));
        // Bytes that are not UTF-8 are compared as bytes, never replaced.
        let raw = |bytes: &[u8]| CapturedStream::complete(bytes.to_vec());
        assert_eq!(compare(&raw(b"\xff\n"), "\u{fffd}".as_bytes()), Some(false));
        assert_eq!(compare(&raw(b"\xff\n"), b"\xff"), Some(true));
    }

    #[test]
    fn a_cut_stdout_proves_a_difference_but_never_a_match() {
        assert_eq!(compare(&stream("1234", true), b"123456789"), None);
        assert_eq!(compare(&stream("12x4", true), b"123456789"), Some(false));
    }

    #[test]
    fn unknown_fields_and_bad_flags_are_refused_by_name() {
        let query = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let error = Options::parse(&query(&[("fields", "stdout,nope")]))
            .err()
            .unwrap();
        assert_eq!(error.field.as_deref(), Some("fields"));
        assert!(error.message.contains("nope"));
        let error = Options::parse(&query(&[("wait", "yes")])).err().unwrap();
        assert_eq!(error.field.as_deref(), Some("wait"));
        let options =
            Options::parse(&query(&[("fields", "*"), ("base64_encoded", "true")])).unwrap();
        assert!(options.base64);
        assert_eq!(options.fields.len(), ALL_FIELDS.len());
    }
}
