//! `json`: the output is JSON structurally equal to `value`.
//!
//! Parameters: `value` (the expected JSON value itself, any type, required)
//! and `float_tolerance` (default 0: numbers within this absolute difference
//! are equal). Object key order is ignored; numbers compare by value (`1`,
//! `1.0` and `1e0` are equal; integers exactly, others as f64); arrays compare
//! in order. Surrounding whitespace is allowed. Output that is not UTF-8 is not
//! JSON, hence a mismatch.
//!
//! Truncation rule: a syntax error inside the kept prefix is a mismatch (no
//! continuation repairs it). A kept prefix that is already a complete value
//! other than a bare number (which might continue) is a mismatch when it
//! differs from `value`; when it equals `value` the rest of the output could
//! still be non-whitespace, so it is undetermined. Everything else (an
//! unfinished value) is undetermined; a truncated output never matches.

use guest_support::{Observed, Params, Verdict, preview, truncation_note, without_cut_char};
use serde_json::error::Category;
use serde_json::{Number, Value};

struct Options {
    value: Value,
    tolerance: f64,
}

fn parse(json: &str) -> Result<Options, String> {
    let p = Params::parse(json, &["value", "float_tolerance"])?;
    Ok(Options {
        value: p.required("value")?.clone(),
        tolerance: p.non_negative_or("float_tolerance", 0.0)?,
    })
}

fn compare(options: &Options, observed: &Observed<'_>) -> Verdict {
    if !observed.truncated {
        return match serde_json::from_slice::<Value>(observed.bytes) {
            Ok(got) => match difference(&options.value, &got, options.tolerance, "$") {
                None => Verdict::Match,
                Some(diff) => Verdict::Mismatch(diff),
            },
            Err(e) => Verdict::Mismatch(format!(
                "the output is not JSON ({e}): {}",
                preview(observed.bytes)
            )),
        };
    }

    let kept = without_cut_char(observed.bytes);
    match serde_json::from_slice::<Value>(kept) {
        Err(e) if e.classify() == Category::Eof => Verdict::Undetermined(format!(
            "the kept part is unfinished JSON ({})",
            truncation_note(observed)
        )),
        Err(e) => Verdict::Mismatch(format!(
            "the output is not JSON ({e}; {})",
            truncation_note(observed)
        )),
        Ok(Value::Number(_)) if ends_inside_number(kept) => Verdict::Undetermined(format!(
            "the kept part ends inside a number ({})",
            truncation_note(observed)
        )),
        Ok(got) => match difference(&options.value, &got, options.tolerance, "$") {
            Some(diff) => Verdict::Mismatch(format!("{diff} ({})", truncation_note(observed))),
            None => Verdict::Undetermined(format!(
                "the kept part equals the expected value, but more output follows ({})",
                truncation_note(observed)
            )),
        },
    }
}

/// A bare number at the very end of the kept bytes could have more digits.
fn ends_inside_number(kept: &[u8]) -> bool {
    kept.last()
        .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
}

/// The first difference between `want` and `got`, located by a JSON path.
fn difference(want: &Value, got: &Value, tolerance: f64, path: &str) -> Option<String> {
    match (want, got) {
        (Value::Number(a), Value::Number(b)) => {
            if numbers_equal(a, b, tolerance) {
                None
            } else {
                Some(format!("at {path}: expected {a}, got {b}"))
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return Some(format!(
                    "at {path}: expected an array of {} item(s), got {}",
                    a.len(),
                    b.len()
                ));
            }
            a.iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (x, y))| difference(x, y, tolerance, &format!("{path}[{i}]")))
        }
        (Value::Object(a), Value::Object(b)) => {
            if let Some(key) = a.keys().find(|k| !b.contains_key(*k)) {
                return Some(format!("at {path}: missing key \"{key}\""));
            }
            if let Some(key) = b.keys().find(|k| !a.contains_key(*k)) {
                return Some(format!("at {path}: unexpected key \"{key}\""));
            }
            a.iter().find_map(|(k, x)| {
                let y = &b[k];
                difference(x, y, tolerance, &format!("{path}.{k}"))
            })
        }
        _ if want == got => None,
        _ => Some(format!(
            "at {path}: expected {}, got {}",
            short(want),
            short(got)
        )),
    }
}

fn numbers_equal(a: &Number, b: &Number, tolerance: f64) -> bool {
    // Integers compare exactly (f64 would merge large neighbours)...
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64())
        && (x == y || tolerance == 0.0)
    {
        return x == y;
    }
    if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64())
        && (x == y || tolerance == 0.0)
    {
        return x == y;
    }
    // ...everything else by value.
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y || (x - y).abs() <= tolerance,
        _ => false,
    }
}

fn short(v: &Value) -> String {
    const MAX_CHARS: usize = 60;
    let text = v.to_string();
    if text.chars().count() > MAX_CHARS {
        text.chars().take(MAX_CHARS).chain(['…']).collect()
    } else {
        text
    }
}

guest_support::export_comparator!(parse, compare);
