//! `number`: every number in the output is close to the expected one.
//!
//! Parameters: `value` (required: a number, an array of numbers, or a string
//! whose number tokens are the expected numbers, e.g. `"3 4.5 -1e3"`), `abs`
//! and `rel` (tolerances, default 1e-9 each: two numbers are close when
//! `|a - b| <= abs` or `|a - b| <= rel * max(|a|, |b|)`).
//!
//! A number token is `[+-]?(digits[.digits]|.digits)([eE][+-]?digits)?`; a sign
//! belongs to it only when not preceded by a letter, digit or `.`. Text between
//! numbers is ignored, bytes that are not UTF-8 included. The output must have
//! exactly as many number tokens as expected, each close to its counterpart.
//!
//! Truncation rule: a token is complete when a byte that cannot continue a
//! number follows it inside the kept prefix. A complete token far from its
//! expected counterpart, or more complete tokens than expected, is a mismatch;
//! otherwise undetermined. A truncated output never matches.

use guest_support::{Observed, Params, Verdict, kind_of, preview, truncation_note};
use serde_json::Value;

struct Options {
    expected: Vec<f64>,
    abs: f64,
    rel: f64,
}

fn parse(json: &str) -> Result<Options, String> {
    let p = Params::parse(json, &["value", "abs", "rel"])?;
    let expected = match p.required("value")? {
        Value::Number(n) => vec![as_f64(n)?],
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::Number(n) => as_f64(n),
                other => Err(format!(
                    "parameter \"value\"[{i}] must be a number, got {}",
                    kind_of(other)
                )),
            })
            .collect::<Result<_, _>>()?,
        Value::String(text) => {
            let tokens: Vec<f64> = tokens(text.as_bytes())
                .into_iter()
                .map(|t| t.value)
                .collect();
            if tokens.is_empty() {
                return Err(format!(
                    "parameter \"value\" has no number in it: {}",
                    preview(text.as_bytes())
                ));
            }
            tokens
        }
        other => {
            return Err(format!(
                "parameter \"value\" must be a number, an array of numbers or a string, got {}",
                kind_of(other)
            ));
        }
    };
    Ok(Options {
        expected,
        abs: p.non_negative_or("abs", 1e-9)?,
        rel: p.non_negative_or("rel", 1e-9)?,
    })
}

fn as_f64(n: &serde_json::Number) -> Result<f64, String> {
    n.as_f64()
        .ok_or_else(|| format!("parameter \"value\" has a number out of range: {n}"))
}

struct Token {
    value: f64,
    text: String,
    /// Byte offset just after the token.
    end: usize,
}

fn compare(options: &Options, observed: &Observed<'_>) -> Verdict {
    let mut found = tokens(observed.bytes);
    if observed.truncated {
        // Keep only tokens followed, inside the kept bytes, by something that
        // cannot continue a number.
        found.retain(|t| {
            observed.bytes[t.end..]
                .iter()
                .any(|&b| !(b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-')))
        });
    }
    for (i, (want, got)) in options.expected.iter().zip(&found).enumerate() {
        if !close(*want, got.value, options) {
            return Verdict::Mismatch(with_note(
                format!("number {}: expected {want}, got {}", i + 1, got.text),
                observed,
            ));
        }
    }
    if found.len() > options.expected.len() {
        return Verdict::Mismatch(with_note(
            format!(
                "expected {} number(s), got at least {} (next: {})",
                options.expected.len(),
                found.len(),
                found[options.expected.len()].text
            ),
            observed,
        ));
    }
    if observed.truncated {
        return Verdict::Undetermined(format!(
            "the {} complete number(s) kept agree so far ({})",
            found.len(),
            truncation_note(observed)
        ));
    }
    if found.len() < options.expected.len() {
        return Verdict::Mismatch(format!(
            "expected {} number(s), got {} in {}",
            options.expected.len(),
            found.len(),
            preview(observed.bytes)
        ));
    }
    Verdict::Match
}

fn with_note(reason: String, observed: &Observed<'_>) -> String {
    if observed.truncated {
        format!("{reason} ({})", truncation_note(observed))
    } else {
        reason
    }
}

fn close(want: f64, got: f64, options: &Options) -> bool {
    let diff = (want - got).abs();
    want == got || diff <= options.abs || diff <= options.rel * want.abs().max(got.abs())
}

/// Number tokens of `bytes`, left to right.
fn tokens(bytes: &[u8]) -> Vec<Token> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let mut j = i;
        let signed = matches!(bytes[j], b'+' | b'-')
            && (j == 0 || !(bytes[j - 1].is_ascii_alphanumeric() || bytes[j - 1] == b'.'));
        if signed {
            j += 1;
        }
        let digits_before = count_digits(bytes, j);
        j += digits_before;
        let mut digits_after = 0;
        if bytes.get(j) == Some(&b'.') {
            digits_after = count_digits(bytes, j + 1);
            if digits_after > 0 || digits_before > 0 {
                j += 1 + digits_after;
            }
        }
        if digits_before + digits_after == 0 {
            i += 1;
            continue;
        }
        if matches!(bytes.get(j), Some(b'e' | b'E')) {
            let mut k = j + 1;
            if matches!(bytes.get(k), Some(b'+' | b'-')) {
                k += 1;
            }
            let exp_digits = count_digits(bytes, k);
            if exp_digits > 0 {
                j = k + exp_digits;
            }
        }
        let text = String::from_utf8_lossy(&bytes[start..j]).into_owned();
        // The token grammar is a subset of what Rust parses as f64.
        if let Ok(value) = text.parse::<f64>() {
            out.push(Token {
                value,
                text,
                end: j,
            });
        }
        i = j.max(start + 1);
    }
    out
}

fn count_digits(bytes: &[u8], from: usize) -> usize {
    bytes.get(from..).map_or(0, |rest| {
        rest.iter().take_while(|b| b.is_ascii_digit()).count()
    })
}

guest_support::export_comparator!(parse, compare);
