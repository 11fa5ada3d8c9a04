//! Helpers shared by the scoring test binaries: profiles, a native `equals`
//! comparator (test-only; production uses the WebAssembly built-ins), and
//! expectation builders.

#![allow(dead_code)]

use std::path::Path;

use progscore_sandbox::{Backend, CapturedStream, LimitsSpec, ProfileSpec, RuntimeProfile};
use progscore_scoring::{
    ComparatorRefusal, ComparatorVerdict, OutputComparator, ProgramCase, ScoringExpectation,
    TextCondition,
};

pub const DIGEST: &str = "127.0.0.1:5000/python-sandbox@sha256:04523e07d3e8eff083d854274411456f0a069de00b901a826c97a9428f7bbac4";

pub const SQUARE: &[u8] = b"import sys\nprint(int(sys.argv[1]) ** 2)\n";

/// A Docker profile with this name and output cap.
pub fn profile(name: &str, output: &str) -> RuntimeProfile {
    let spec = ProfileSpec {
        backend: Backend::Docker,
        image: Some(DIGEST.into()),
        module: None,
        stdlib: None,
        command: vec!["python3".into(), "-I".into()],
        runtime: None,
        user: None,
        scratch: false,
        limits: LimitsSpec {
            output: output.into(),
            ..LimitsSpec::default()
        },
        source: None,
        compile: None,
        compile_limits: None,
        engines: None,
        trace: None,
        time_factor: None,
    };
    RuntimeProfile::from_spec(name, &spec, Path::new(".")).expect("a valid test profile")
}

/// `python` and `other`, both 64 KiB output caps.
pub fn profiles() -> Vec<RuntimeProfile> {
    vec![profile("python", "64KiB"), profile("other", "64KiB")]
}

/// One case per (args, expected stdout), exit code 0, under `profile`.
pub fn expect(profile: &str, cases: &[(&[&str], &str)]) -> ScoringExpectation {
    ScoringExpectation::program_behaves(
        profile,
        cases
            .iter()
            .map(|(args, stdout)| {
                ProgramCase::new(args.iter().copied(), TextCondition::equals(*stdout))
            })
            .collect(),
    )
}

/// Native comparators for tests: `equals` (trimmed, truncation-aware) and
/// `undecided` (always undetermined).
pub struct NativeComparators;

impl OutputComparator for NativeComparators {
    fn validate(&self, name: &str, params: &serde_json::Value) -> Result<(), ComparatorRefusal> {
        match name {
            "equals" => {
                let object = params.as_object();
                let ok = object.is_some_and(|o| {
                    o.get("value").is_some_and(serde_json::Value::is_string)
                        && o.keys().all(|k| k == "value")
                });
                if ok {
                    Ok(())
                } else {
                    Err(ComparatorRefusal::InvalidParams {
                        name: name.into(),
                        message: "`value` must be a string, and nothing else is accepted".into(),
                    })
                }
            }
            "undecided" => Ok(()),
            _ => Err(ComparatorRefusal::Unknown { name: name.into() }),
        }
    }

    fn compare(
        &self,
        name: &str,
        params: &serde_json::Value,
        observed: &CapturedStream,
    ) -> ComparatorVerdict {
        match (
            name,
            params.get("value").and_then(serde_json::Value::as_str),
        ) {
            ("equals", Some(expected)) => equals(expected, observed),
            ("undecided", _) => ComparatorVerdict::Undetermined("it never decides".into()),
            _ => ComparatorVerdict::Undetermined(format!("comparator `{name}` cannot run")),
        }
    }
}

/// Trimmed equality. With a truncated stream: a mismatch only when the kept
/// prefix already rules a match out, otherwise undetermined.
pub fn equals(expected: &str, observed: &CapturedStream) -> ComparatorVerdict {
    let expected = expected.trim();
    let text = String::from_utf8_lossy(observed.data.as_bytes());
    if !observed.truncated {
        return if text.trim() == expected {
            ComparatorVerdict::Match
        } else {
            ComparatorVerdict::Mismatch(format!("expected {expected:?}, got {:?}", text.trim()))
        };
    }
    let kept = text.trim_start();
    let possible = expected.starts_with(kept)
        || (kept.starts_with(expected) && kept[expected.len()..].trim().is_empty());
    if possible {
        ComparatorVerdict::Undetermined(
            "the output was truncated before the point that decides".into(),
        )
    } else {
        ComparatorVerdict::Mismatch("the kept prefix already differs".into())
    }
}
