//! What a program is expected to do: the serde shapes users write.

use progscore_sandbox::{
    ByteString, Invocation, PartialLimitsSpec, ProgramFiles, canonical_json, sha256_hex,
};
use serde::de::Error as _;

use crate::behaviour::BehaviourCondition;
use crate::checker::{Checker, CheckerProgram};
use crate::score_policy::ScorePolicy;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Everything a score checks. Today exactly one condition, a
/// [`ProgramBehaves`]; the list leaves room for more kinds later.
///
/// JSON: `{"conditions": [{"program_behaves": {"profile": "python", "cases": [...]}}]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoringExpectation {
    /// The conditions; validation requires exactly one.
    pub conditions: Vec<Condition>,
}

/// One condition of an expectation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Condition {
    /// The program, run under a profile, behaves as each case says.
    ProgramBehaves(ProgramBehaves),
}

/// Run the program under `profile` once per case and check each result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramBehaves {
    /// A configured profile's name.
    pub profile: String,
    /// The program's own limits for its cases, over the profile's (the keys
    /// of a profile's `limits`; `cpus` stays the profile's). A run under
    /// other limits is another attempt: its evidence is its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<PartialLimitsSpec>,
    /// The program's own limits for its compile, over the profile's
    /// `compile_limits` (a profile with a compile step only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_limits: Option<PartialLimitsSpec>,
    /// Files placed beside the program (its folder, read-only), seen by its
    /// compile and every case: `{"data/in.txt": "text"}`, bytes that are
    /// not UTF-8 as `{"base64": "..."}`. Part of the attempt's key.
    #[serde(default, skip_serializing_if = "ProgramFiles::is_empty")]
    pub files: ProgramFiles,
    /// What every case's traced behaviour must show (a profile with
    /// `trace`): `{"never": [...], "attempts": [...]}`. A case's own
    /// `expected.behaviour` adds to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behaviour: Option<BehaviourCondition>,
    /// How the item's score comes from its cases' (`all_pass` when absent:
    /// the boolean verdict as 1 or 0). Part of the expectation, not of the
    /// attempt: another policy rescores the same evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<ScorePolicy>,
    /// The judge of every case's output against its `expected.answer`: a
    /// checker component (`"tokens"`, `{"component": {...}}`) or a checker
    /// program run in a sandbox of its own (`{"program": {...}}`). Part of
    /// the expectation, not of the attempt: another checker rescores the
    /// same evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checker: Option<Checker>,
    /// An interactive item's interactor (testlib's conventions): a program
    /// in a sandbox of its own that talks to the program case by case, its
    /// stdout the program's stdin and the program's stdout its stdin. Each
    /// case's `stdin` and `answer` are its INPUT and ANSWER files only; it
    /// gives the case's verdict. Part of the attempt (it changes what the
    /// program does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interactor: Option<Box<CheckerProgram>>,
    /// The cases, in order; each is one invocation.
    pub cases: Vec<ProgramCase>,
}

/// One invocation and what it must produce.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramCase {
    /// Arguments and stdin.
    pub invocation: Invocation,
    /// The expected result.
    pub expected: ProgramResult,
}

/// Conditions on one invocation's result. Unknown fields are refused, so a
/// misspelt `stdout` cannot silently check nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramResult {
    /// A condition on standard output, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout: Option<TextCondition>,
    /// A condition on standard error, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<TextCondition>,
    /// The expected exit code; 0 when absent. Validation refuses a code
    /// outside [`EXIT_CODES`].
    #[serde(default)]
    pub exit_code: i64,
    /// What this case's traced behaviour must show (see
    /// [`ProgramBehaves::behaviour`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behaviour: Option<BehaviourCondition>,
    /// The expected answer (the jury's output), given to the item's
    /// `checker` with the case's input and the program's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<ByteString>,
}

/// The exit codes a program can be seen to exit with: a process's exit
/// status is 8 bits (POSIX `waitpid`; what Docker, runc and runsc report),
/// and a program killed by signal N is seen as 128 + N. An expected code
/// outside this range could never match, so it is refused, not scored.
pub const EXIT_CODES: std::ops::RangeInclusive<i64> = 0..=255;

/// A check of one output stream by a named comparator with parameters.
///
/// JSON, either the shorthand `{"NAME": VALUE}` (for a comparator whose main
/// parameter is `value`: `{"equals": "9"}` means
/// `{"comparator": "equals", "params": {"value": "9"}}`), or the full form
/// `{"comparator": "NAME", "params": {...}}`. It is always written back in the
/// full form, so both spellings fingerprint alike.
#[derive(Debug, Clone, PartialEq)]
pub struct TextCondition {
    /// The comparator's name (built-in or configured).
    pub comparator: String,
    /// Its parameters, as the comparator defines them.
    pub params: serde_json::Value,
}

impl TextCondition {
    /// A condition with this comparator and parameters.
    pub fn new(comparator: impl Into<String>, params: serde_json::Value) -> Self {
        TextCondition {
            comparator: comparator.into(),
            params,
        }
    }

    /// The shorthand: `comparator` with `{"value": value}`.
    pub fn value(comparator: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
        TextCondition::new(comparator, serde_json::json!({ "value": value.into() }))
    }

    /// `{"equals": expected}`.
    pub fn equals(expected: impl Into<String>) -> Self {
        TextCondition::value("equals", expected.into())
    }
}

impl Serialize for TextCondition {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("comparator", &self.comparator)?;
        map.serialize_entry("params", &self.params)?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for TextCondition {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        const SHAPE: &str =
            r#"a text condition is {"NAME": VALUE} or {"comparator": "NAME", "params": {...}}"#;
        let mut map = match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Object(map) => map,
            other => {
                return Err(D::Error::custom(format!(
                    "{SHAPE}, not {other} (an object is expected)"
                )));
            }
        };
        if let Some(name) = map.remove("comparator") {
            let name = match name {
                serde_json::Value::String(name) if !name.is_empty() => name,
                other => {
                    return Err(D::Error::custom(format!(
                        "`comparator` must be a non-empty string, got {other}; {SHAPE}"
                    )));
                }
            };
            let params = match map.remove("params") {
                None => serde_json::Value::Object(Default::default()),
                Some(params @ serde_json::Value::Object(_)) => params,
                Some(other) => {
                    return Err(D::Error::custom(format!(
                        "`params` of comparator `{name}` must be an object, got {other}"
                    )));
                }
            };
            if let Some(key) = map.keys().next() {
                return Err(D::Error::custom(format!(
                    "unexpected key `{key}` next to `comparator` (options go in `params`)"
                )));
            }
            return Ok(TextCondition::new(name, params));
        }
        let mut entries = map.into_iter();
        match (entries.next(), entries.next()) {
            (Some((name, value)), None) if !name.is_empty() && name != "params" => {
                Ok(TextCondition::value(name, value))
            }
            _ => Err(D::Error::custom(format!(
                "{SHAPE}; the shorthand has exactly one key, the comparator's name"
            ))),
        }
    }
}

impl ScoringExpectation {
    /// An expectation with one `program_behaves` condition.
    pub fn program_behaves(profile: impl Into<String>, cases: Vec<ProgramCase>) -> Self {
        ScoringExpectation {
            conditions: vec![Condition::ProgramBehaves(ProgramBehaves {
                profile: profile.into(),
                limits: None,
                compile_limits: None,
                files: ProgramFiles::default(),
                behaviour: None,
                score: None,
                checker: None,
                interactor: None,
                cases,
            })],
        }
    }

    /// The same expectation with the program's own limits for its cases
    /// and its compile (see [`ProgramBehaves::limits`]) on its
    /// `program_behaves` condition.
    pub fn with_limits(
        mut self,
        limits: Option<PartialLimitsSpec>,
        compile_limits: Option<PartialLimitsSpec>,
    ) -> Self {
        for Condition::ProgramBehaves(behaves) in &mut self.conditions {
            behaves.limits = limits.clone();
            behaves.compile_limits = compile_limits.clone();
        }
        self
    }

    /// The same expectation with `files` placed beside the program (see
    /// [`ProgramBehaves::files`]).
    pub fn with_files(mut self, files: ProgramFiles) -> Self {
        for Condition::ProgramBehaves(behaves) in &mut self.conditions {
            behaves.files = files.clone();
        }
        self
    }

    /// The canonical JSON form (sorted keys, full-form text conditions).
    pub fn canonical_json(&self) -> Result<String, serde_json::Error> {
        canonical_json(self)
    }

    /// sha256 of [`Self::canonical_json`]: identifies what a score checked.
    pub fn fingerprint(&self) -> Result<String, serde_json::Error> {
        Ok(sha256_hex(self.canonical_json()?.as_bytes()))
    }
}

impl ProgramCase {
    /// A case: these arguments (no stdin), this stdout condition, exit code 0.
    pub fn new<I, S>(args: I, stdout: TextCondition) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ProgramCase {
            invocation: Invocation::with_args(args),
            expected: ProgramResult {
                stdout: Some(stdout),
                stderr: None,
                exit_code: 0,
                behaviour: None,
                answer: None,
            },
        }
    }
}
