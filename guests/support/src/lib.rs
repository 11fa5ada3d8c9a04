//! Shared helpers for progscore's built-in comparators: strict parameter
//! parsing (unknown names are refused), text previews for reasons, and the
//! small byte-level tools every truncation rule needs.
//!
//! This crate is plain Rust (no WIT): each built-in converts [`Verdict`] into
//! its generated binding type, so this code is testable on the host too.

use serde_json::{Map, Value};

/// A comparator's answer, independent of the generated bindings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The output meets the expectation.
    Match,
    /// The output does not meet the expectation, with a reason for a human.
    Mismatch(String),
    /// The comparator cannot decide, with the reason.
    Undetermined(String),
}

/// The observed stream, borrowed from the call.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// Bytes kept (a prefix of the output when `truncated`).
    pub bytes: &'a [u8],
    /// Whether bytes were dropped after `bytes`.
    pub truncated: bool,
    /// Total bytes the program wrote.
    pub total_bytes: u64,
}

/// Parameters of one call: a JSON object whose names are all known.
pub struct Params {
    map: Map<String, Value>,
}

impl Params {
    /// Parses `json` as an object and refuses any name not in `allowed`.
    pub fn parse(json: &str, allowed: &[&str]) -> Result<Params, String> {
        let value: Value = serde_json::from_str(json)
            .map_err(|e| format!("parameters are not valid JSON: {e}"))?;
        let Value::Object(map) = value else {
            return Err(format!(
                "parameters must be a JSON object, got {}",
                kind_of(&value)
            ));
        };
        let unknown: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !allowed.contains(k))
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "unknown parameter(s) {}; known: {}",
                quote_list(&unknown),
                quote_list(allowed)
            ));
        }
        Ok(Params { map })
    }

    /// The raw value of `name`, if present.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.map.get(name)
    }

    /// A required string parameter.
    pub fn required_str(&self, name: &str) -> Result<String, String> {
        match self.map.get(name) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(format!(
                "parameter \"{name}\" must be a string, got {}",
                kind_of(other)
            )),
            None => Err(format!("parameter \"{name}\" is required")),
        }
    }

    /// A required parameter of any JSON type.
    pub fn required(&self, name: &str) -> Result<&Value, String> {
        self.map
            .get(name)
            .ok_or_else(|| format!("parameter \"{name}\" is required"))
    }

    /// An optional boolean, `default` when absent.
    pub fn bool_or(&self, name: &str, default: bool) -> Result<bool, String> {
        match self.map.get(name) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(format!(
                "parameter \"{name}\" must be true or false, got {}",
                kind_of(other)
            )),
        }
    }

    /// An optional non-negative finite number, `default` when absent.
    pub fn non_negative_or(&self, name: &str, default: f64) -> Result<f64, String> {
        match self.map.get(name) {
            None => Ok(default),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(x) if x.is_finite() && x >= 0.0 => Ok(x),
                _ => Err(format!(
                    "parameter \"{name}\" must be a non-negative number, got {n}"
                )),
            },
            Some(other) => Err(format!(
                "parameter \"{name}\" must be a non-negative number, got {}",
                kind_of(other)
            )),
        }
    }
}

/// The JSON type name of `v`, for error messages.
pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn quote_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A short, printable rendering of `bytes` for reasons: lossy UTF-8, control
/// characters escaped, cut to about 60 characters.
pub fn preview(bytes: &[u8]) -> String {
    const MAX_CHARS: usize = 60;
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::from("\"");
    for (count, c) in text.chars().enumerate() {
        if count == MAX_CHARS {
            out.push_str("\"…");
            return out;
        }
        out.extend(c.escape_debug());
    }
    out.push('"');
    out
}

/// `bytes` without a trailing incomplete UTF-8 sequence. A truncated stream can
/// be cut in the middle of a character; the cut part is not evidence of
/// anything, so truncation rules look only at what is before it.
pub fn without_cut_char(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        // `error_len() == None` means "the input ended inside a character".
        Err(e) if e.error_len().is_none() => &bytes[..e.valid_up_to()],
        _ => bytes,
    }
}

/// Lower-cases `bytes`: valid UTF-8 runs by Unicode rules, invalid bytes kept
/// as they are (so two different invalid bytes never compare equal).
pub fn fold_case(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            let mut buf = [0u8; 4];
            for lower in c.to_lowercase() {
                out.extend_from_slice(lower.encode_utf8(&mut buf).as_bytes());
            }
        }
        out.extend_from_slice(chunk.invalid());
    }
    out
}

/// Replaces every CR LF with LF.
pub fn normalize_newlines(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
            i += 1;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// Whether `b` is ASCII whitespace (space, tab, LF, CR, FF, VT).
pub fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// `bytes` without leading ASCII whitespace.
pub fn trim_start(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|&b| !is_space(b))
        .unwrap_or(bytes.len());
    &bytes[start..]
}

/// `bytes` without trailing ASCII whitespace.
pub fn trim_end(bytes: &[u8]) -> &[u8] {
    let end = bytes
        .iter()
        .rposition(|&b| !is_space(b))
        .map_or(0, |i| i + 1);
    &bytes[..end]
}

/// A reason suffix telling how much of the output was seen.
pub fn truncation_note(observed: &Observed<'_>) -> String {
    format!(
        "output truncated: {} of {} bytes kept",
        observed.bytes.len(),
        observed.total_bytes
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_params_are_named() {
        let err = Params::parse(r#"{"value":"x","colour":1}"#, &["value"])
            .err()
            .unwrap_or_default();
        assert!(err.contains("\"colour\""), "{err}");
    }

    #[test]
    fn cut_char_is_dropped() {
        let s = "é".as_bytes();
        assert_eq!(without_cut_char(&s[..1]), b"");
        assert_eq!(without_cut_char(b"a\xff"), b"a\xff");
    }

    #[test]
    fn fold_keeps_invalid_bytes() {
        assert_eq!(fold_case(b"AB\xffC"), b"ab\xffc".to_vec());
    }
}

/// Generates the component glue of a built-in: the WIT bindings, `validate`
/// (which only parses the options) and `compare` (which parses them again,
/// since every call is a fresh instance, and runs `$compare`).
///
/// `$parse: fn(&str) -> Result<Options, String>`,
/// `$compare: fn(&Options, &Observed) -> Verdict`.
#[macro_export]
macro_rules! export_comparator {
    ($parse:path, $compare:path) => {
        // In a module of their own so the generated names (`Verdict`, ...)
        // do not collide with the built-in's.
        mod bindings {
            wit_bindgen::generate!({
                path: "../../../wit/comparator@0.1.0",
                world: "comparator",
            });
        }

        struct Component;

        impl bindings::Guest for Component {
            fn validate(params: String) -> Result<(), String> {
                $parse(&params).map(|_| ())
            }

            fn compare(
                params: String,
                observed: bindings::progscore::comparator::types::ObservedStream,
            ) -> Result<bindings::progscore::comparator::types::Verdict, String> {
                use bindings::progscore::comparator::types::Verdict as Wit;
                let options = $parse(&params)?;
                let observed = $crate::Observed {
                    bytes: &observed.bytes,
                    truncated: observed.truncated,
                    total_bytes: observed.total_bytes,
                };
                let verdict = $compare(&options, &observed);
                // The instance is thrown away after this call: tearing down
                // the parsed options (a compiled regex is a large graph) would
                // be work for nothing.
                ::core::mem::forget(options);
                Ok(match verdict {
                    $crate::Verdict::Match => Wit::Match,
                    $crate::Verdict::Mismatch(reason) => Wit::Mismatch(reason),
                    $crate::Verdict::Undetermined(reason) => Wit::Undetermined(reason),
                })
            }
        }

        bindings::export!(Component with_types_in bindings);
    };
}
