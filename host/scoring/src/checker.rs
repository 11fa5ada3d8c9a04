//! Checkers: judges that see a case's input, the program's output and the
//! expected answer, as competitive programming's special judges do.
//!
//! Two forms, one verdict shape ([`CheckerVerdict`]):
//! - a component (`progscore:checker@0.1.0`, built-in or configured), called
//!   like a comparator through [`crate::OutputComparator::check`];
//! - a checker program in any configured profile, run in a fresh sandbox of
//!   its own under testlib's, CMS's or Codeforces' conventions. Its run is an
//!   observation like the program's (keyed by the checker's source, its
//!   files, and the inputs, outputs and answers it judged), so a rescore
//!   with another checker or answer never runs the program again, and the
//!   same checker on the same output is not run twice.
//!
//! A checker that crashes, runs out of time or memory, says FAIL or answers
//! outside its protocol leaves the case undetermined, never false.

use std::collections::BTreeMap;

use progscore_sandbox::{ByteString, InvocationEvent, Outcome, PartialLimitsSpec, ProgramFiles};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

/// The checker of an item: `"tokens"`, `{"component": {"name": "floats",
/// "params": {"abs": 1e-9}}}` or `{"program": {...}}`. Written back in the
/// tagged form, so both spellings of a component fingerprint alike.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Checker {
    /// A checker component (built-in or configured) by name.
    Component {
        /// Its name.
        name: String,
        /// Its parameters (an object).
        #[serde(default)]
        params: serde_json::Value,
    },
    /// A checker program, run in a sandbox of its own.
    Program(Box<CheckerProgram>),
}

/// The tagged forms, as written.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum TaggedChecker {
    Component {
        name: String,
        #[serde(default)]
        params: Option<serde_json::Value>,
    },
    Program(Box<CheckerProgram>),
}

impl<'de> Deserialize<'de> for Checker {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        const SHAPE: &str = r#"a checker is "NAME", {"component": {"name": "NAME", "params": {...}}} or {"program": {"profile": "...", "source": "..."}}"#;
        let value = serde_json::Value::deserialize(deserializer)?;
        if let serde_json::Value::String(name) = &value {
            if name.is_empty() {
                return Err(D::Error::custom(format!("an empty checker name; {SHAPE}")));
            }
            return Ok(Checker::Component {
                name: name.clone(),
                params: serde_json::Value::Object(Default::default()),
            });
        }
        match serde_json::from_value::<TaggedChecker>(value) {
            Ok(TaggedChecker::Component { name, params }) => {
                let params = match params {
                    None => serde_json::Value::Object(Default::default()),
                    Some(params @ serde_json::Value::Object(_)) => params,
                    Some(other) => {
                        return Err(D::Error::custom(format!(
                            "`params` of checker `{name}` must be an object, got {other}"
                        )));
                    }
                };
                Ok(Checker::Component { name, params })
            }
            Ok(TaggedChecker::Program(program)) => Ok(Checker::Program(program)),
            Err(error) => Err(D::Error::custom(format!("{error}; {SHAPE}"))),
        }
    }
}

/// A checker program: its source in a configured profile, the files it
/// needs (a user's `testlib.h`), and the conventions it follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckerProgram {
    /// The configured profile it runs under (`cpp`, `python`, ...).
    pub profile: String,
    /// Its source (or script), run verbatim.
    pub source: ByteString,
    /// Files beside it, seen by its compile and its runs.
    #[serde(default, skip_serializing_if = "ProgramFiles::is_empty")]
    pub files: ProgramFiles,
    /// How it is called and how it answers (`testlib` when absent).
    #[serde(default, skip_serializing_if = "CheckerProtocol::is_testlib")]
    pub protocol: CheckerProtocol,
    /// testlib's points are divided by this to give a score in [0, 1]
    /// (1 when absent: points must already be a fraction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_points: Option<f64>,
    /// Its own limits over its profile's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<PartialLimitsSpec>,
}

/// A checker program's conventions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckerProtocol {
    /// testlib: `checker INPUT OUTPUT ANSWER`; exit 0 OK, 1 wrong answer,
    /// 2 presentation error, 3 FAIL, 4 presentation error (dirt), 7 points
    /// (`points X` on stderr or stdout), 8 wrong answer (unexpected end of
    /// the output).
    #[default]
    Testlib,
    /// CMS: `checker INPUT ANSWER OUTPUT`; exit 0 with the score in [0, 1]
    /// on stdout and the message on stderr.
    Cms,
    /// Codeforces' Python checkers as open-r1 runs them:
    /// `checker INPUT ANSWER OUTPUT`; exit 0 printing `1` (or `100`) for a
    /// right output and `0` for a wrong one.
    Codeforces,
}

impl CheckerProtocol {
    fn is_testlib(&self) -> bool {
        *self == CheckerProtocol::Testlib
    }

    /// The arguments a checker is called with, from its three files.
    pub(crate) fn args(self, input: &str, output: &str, answer: &str) -> Vec<String> {
        match self {
            CheckerProtocol::Testlib => vec![input.into(), output.into(), answer.into()],
            CheckerProtocol::Cms | CheckerProtocol::Codeforces => {
                vec![input.into(), answer.into(), output.into()]
            }
        }
    }
}

/// What a checker said of one case.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckerVerdict {
    /// The output is right.
    Accepted(String),
    /// The output is wrong.
    WrongAnswer(String),
    /// The output is malformed.
    PresentationError(String),
    /// Partly right: a score in [0, 1].
    Points {
        /// The score.
        score: f64,
        /// The checker's message.
        message: String,
    },
    /// Nothing could be decided (a checker fault, FAIL, no evidence): why.
    Undetermined(String),
}

/// Program checkers' verdicts, by case index.
pub type CheckerVerdicts = BTreeMap<usize, CheckerVerdict>;

/// What a checker program's run of one case says, under its protocol.
pub(crate) fn judge(checker: &CheckerProgram, event: &InvocationEvent) -> CheckerVerdict {
    let stderr = message_of(&event.stderr.data.0);
    let stdout = String::from_utf8_lossy(&event.stdout.data.0)
        .trim()
        .to_string();
    let exit_code = match &event.outcome {
        Outcome::Exited { exit_code } => *exit_code,
        Outcome::CompileError { reason } => {
            return CheckerVerdict::Undetermined(format!("the checker did not compile ({reason})"));
        }
        Outcome::TimedOut { .. } => {
            return CheckerVerdict::Undetermined("the checker ran out of time".into());
        }
        Outcome::MemoryLimit => {
            return CheckerVerdict::Undetermined("the checker ran out of memory".into());
        }
        Outcome::SandboxError { message } => {
            return CheckerVerdict::Undetermined(format!(
                "the checker's sandbox failed: {message}"
            ));
        }
        Outcome::NotRun { reason } => {
            return CheckerVerdict::Undetermined(format!("the checker was not run: {reason}"));
        }
    };
    match checker.protocol {
        CheckerProtocol::Testlib => {
            let message = if stderr.is_empty() {
                message_of(stdout.as_bytes())
            } else {
                stderr
            };
            match exit_code {
                0 => CheckerVerdict::Accepted(message),
                1 | 8 => CheckerVerdict::WrongAnswer(message),
                2 | 4 => CheckerVerdict::PresentationError(message),
                3 => CheckerVerdict::Undetermined(format!(
                    "the checker says FAIL (the test's data or the checker is wrong): {message}"
                )),
                7 => match points_in(&message).or_else(|| points_in(&stdout)) {
                    Some(points) => scaled(points, checker.max_points, message),
                    None => CheckerVerdict::Undetermined(format!(
                        "the checker gave points (exit code 7) without a number of points: {message}"
                    )),
                },
                code => CheckerVerdict::Undetermined(format!(
                    "the checker exited with code {code}, which testlib's conventions do not \
                     define: {message}"
                )),
            }
        }
        CheckerProtocol::Cms | CheckerProtocol::Codeforces if exit_code != 0 => {
            CheckerVerdict::Undetermined(format!(
                "the checker exited with code {exit_code}: {stderr}"
            ))
        }
        CheckerProtocol::Cms => match stdout.parse::<f64>() {
            Ok(score) => scaled(score, None, stderr),
            Err(_) => CheckerVerdict::Undetermined(format!(
                "the checker printed {stdout:?}, not a score in [0, 1]"
            )),
        },
        CheckerProtocol::Codeforces => match stdout.as_str() {
            "1" | "100" => CheckerVerdict::Accepted(stderr),
            "0" => CheckerVerdict::WrongAnswer(stderr),
            other => CheckerVerdict::Undetermined(format!(
                "the checker printed {other:?}, neither 1 (or 100) nor 0"
            )),
        },
    }
}

/// A score from points: full marks accepted, none a wrong answer, between
/// them points; beyond [0, 1] (after scaling) the checker is at fault.
fn scaled(points: f64, max_points: Option<f64>, message: String) -> CheckerVerdict {
    let score = points / max_points.unwrap_or(1.0);
    if !score.is_finite() || !(0.0..=1.0).contains(&score) {
        return CheckerVerdict::Undetermined(format!(
            "the checker gave {points} points, outside 0 to {} (set the checker's `max_points`)",
            max_points.unwrap_or(1.0)
        ));
    }
    if score >= 1.0 {
        CheckerVerdict::Accepted(message)
    } else if score <= 0.0 {
        CheckerVerdict::WrongAnswer(message)
    } else {
        CheckerVerdict::Points { score, message }
    }
}

/// The number of points in a testlib message: `points 0.5 ...`, or a
/// message that starts with a number.
fn points_in(message: &str) -> Option<f64> {
    let mut words = message.split_whitespace();
    let first = words.next()?;
    let number = if first.eq_ignore_ascii_case("points") {
        words.next()?
    } else {
        first
    };
    number.parse::<f64>().ok()
}

/// A checker's message: its first 500 characters, trimmed.
fn message_of(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    match text.char_indices().nth(500) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use progscore_sandbox::CapturedStream;

    fn event(outcome: Outcome, stdout: &str, stderr: &str) -> InvocationEvent {
        InvocationEvent {
            outcome,
            stdout: CapturedStream::complete(stdout.as_bytes().to_vec()),
            stderr: CapturedStream::complete(stderr.as_bytes().to_vec()),
            ..InvocationEvent::not_run("test")
        }
    }

    fn checker(protocol: CheckerProtocol) -> CheckerProgram {
        CheckerProgram {
            profile: "cpp".into(),
            source: ByteString(b"int main(){}".to_vec()),
            files: ProgramFiles::default(),
            protocol,
            max_points: None,
            limits: None,
        }
    }

    #[test]
    fn testlib_exit_codes_give_verdicts_and_fail_is_undetermined() {
        let testlib = checker(CheckerProtocol::Testlib);
        let exited = |code| Outcome::Exited { exit_code: code };
        assert_eq!(
            judge(&testlib, &event(exited(0), "", "ok 3 numbers\n")),
            CheckerVerdict::Accepted("ok 3 numbers".into())
        );
        assert!(matches!(
            judge(&testlib, &event(exited(1), "", "wrong answer")),
            CheckerVerdict::WrongAnswer(_)
        ));
        assert!(matches!(
            judge(&testlib, &event(exited(2), "", "")),
            CheckerVerdict::PresentationError(_)
        ));
        assert!(matches!(
            judge(&testlib, &event(exited(3), "", "answer file broken")),
            CheckerVerdict::Undetermined(reason) if reason.contains("FAIL")
        ));
        assert_eq!(
            judge(&testlib, &event(exited(7), "", "points 0.25 three of four")),
            CheckerVerdict::Points {
                score: 0.25,
                message: "points 0.25 three of four".into()
            }
        );
        assert!(matches!(
            judge(&testlib, &event(exited(7), "", "points 25")),
            CheckerVerdict::Undetermined(reason) if reason.contains("max_points")
        ));
        let scaled = CheckerProgram {
            max_points: Some(100.0),
            ..testlib.clone()
        };
        assert!(matches!(
            judge(&scaled, &event(exited(7), "", "points 25")),
            CheckerVerdict::Points { score, .. } if (score - 0.25).abs() < 1e-12
        ));
        assert!(matches!(
            judge(&testlib, &event(exited(139), "", "")),
            CheckerVerdict::Undetermined(_)
        ));
        assert!(matches!(
            judge(&testlib, &event(Outcome::MemoryLimit, "", "")),
            CheckerVerdict::Undetermined(_)
        ));
    }

    #[test]
    fn cms_and_codeforces_read_stdout() {
        let exited = |code| Outcome::Exited { exit_code: code };
        let cms = checker(CheckerProtocol::Cms);
        assert!(matches!(
            judge(&cms, &event(exited(0), "0.5\n", "half")),
            CheckerVerdict::Points { score, .. } if score == 0.5
        ));
        assert!(matches!(
            judge(&cms, &event(exited(0), "1", "")),
            CheckerVerdict::Accepted(_)
        ));
        assert!(matches!(
            judge(&cms, &event(exited(1), "1", "")),
            CheckerVerdict::Undetermined(_)
        ));
        let cf = checker(CheckerProtocol::Codeforces);
        assert!(matches!(
            judge(&cf, &event(exited(0), "100\n", "")),
            CheckerVerdict::Accepted(_)
        ));
        assert!(matches!(
            judge(&cf, &event(exited(0), "0", "")),
            CheckerVerdict::WrongAnswer(_)
        ));
        assert!(matches!(
            judge(&cf, &event(exited(0), "maybe", "")),
            CheckerVerdict::Undetermined(_)
        ));
    }

    #[test]
    fn a_checker_is_a_name_or_a_tagged_form() {
        let short: Checker = serde_json::from_str(r#""tokens""#).unwrap();
        let long: Checker =
            serde_json::from_str(r#"{"component": {"name": "tokens", "params": {}}}"#).unwrap();
        assert_eq!(short, long);
        let program: Checker = serde_json::from_str(
            r#"{"program": {"profile": "python", "source": "print(1)", "protocol": "cms"}}"#,
        )
        .unwrap();
        assert!(matches!(program, Checker::Program(p) if p.protocol == CheckerProtocol::Cms));
        let error = serde_json::from_str::<Checker>(r#"{"program": {"profile": "python"}}"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("source"), "{error}");
    }
}
