//! `lines`: the output has the expected lines.
//!
//! Parameters: `value` (required: a string, split into lines, or an array of
//! strings, one per line) and `unordered` (default false: the same lines in any
//! order, counted with multiplicity).
//!
//! Lines are split on LF; each line loses its trailing whitespace (so CR LF
//! endings and trailing spaces do not matter), and empty lines at the end of
//! the output or of `value` are ignored. Lines are compared as bytes, so a
//! line that is not UTF-8 never equals an expected (UTF-8) line.
//!
//! Truncation rule: only complete lines of the kept prefix (those ended by an
//! LF) are evidence; the last, partial line is not. In order: a complete line
//! that differs from the expected line at its position, or a non-empty complete
//! line beyond the expected count, is a mismatch. Unordered: a non-empty line
//! seen more often than expected is a mismatch. Anything else is undetermined;
//! a truncated output never matches.

use std::collections::BTreeMap;

use guest_support::{Observed, Params, Verdict, kind_of, preview, trim_end, truncation_note};
use serde_json::Value;

struct Options {
    expected: Vec<Vec<u8>>,
    unordered: bool,
}

fn parse(json: &str) -> Result<Options, String> {
    let p = Params::parse(json, &["value", "unordered"])?;
    let expected = match p.required("value")? {
        Value::String(text) => split_lines(text.as_bytes()),
        Value::Array(items) => {
            let mut lines = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let Value::String(line) = item else {
                    return Err(format!(
                        "parameter \"value\"[{i}] must be a string, got {}",
                        kind_of(item)
                    ));
                };
                if line.contains('\n') {
                    return Err(format!(
                        "parameter \"value\"[{i}] contains a newline; give one line per item"
                    ));
                }
                lines.push(trim_end(line.as_bytes()).to_vec());
            }
            drop_trailing_empty(&mut lines);
            lines
        }
        other => {
            return Err(format!(
                "parameter \"value\" must be a string or an array of strings, got {}",
                kind_of(other)
            ));
        }
    };
    Ok(Options {
        expected,
        unordered: p.bool_or("unordered", false)?,
    })
}

/// Lines of a complete text, normalised.
fn split_lines(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut lines: Vec<Vec<u8>> = bytes
        .split(|&b| b == b'\n')
        .map(|l| trim_end(l).to_vec())
        .collect();
    drop_trailing_empty(&mut lines);
    lines
}

fn drop_trailing_empty(lines: &mut Vec<Vec<u8>>) {
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
}

fn compare(options: &Options, observed: &Observed<'_>) -> Verdict {
    if observed.truncated {
        return compare_truncated(options, observed);
    }
    let got = split_lines(observed.bytes);
    if options.unordered {
        let (missing, extra) = multiset_difference(&options.expected, &got);
        return match (missing.first(), extra.first()) {
            (None, None) => Verdict::Match,
            (Some(line), _) => Verdict::Mismatch(format!(
                "expected line {} is missing ({} missing, {} unexpected, order ignored)",
                preview(line),
                missing.len(),
                extra.len()
            )),
            (None, Some(line)) => Verdict::Mismatch(format!(
                "unexpected line {} ({} unexpected, order ignored)",
                preview(line),
                extra.len()
            )),
        };
    }
    for (i, (want, have)) in options.expected.iter().zip(&got).enumerate() {
        if want != have {
            return Verdict::Mismatch(format!(
                "line {}: expected {}, got {}",
                i + 1,
                preview(want),
                preview(have)
            ));
        }
    }
    if got.len() != options.expected.len() {
        return Verdict::Mismatch(format!(
            "expected {} line(s), got {}",
            options.expected.len(),
            got.len()
        ));
    }
    Verdict::Match
}

fn compare_truncated(options: &Options, observed: &Observed<'_>) -> Verdict {
    // Lines ended by an LF inside the kept bytes are complete; the rest is not.
    let complete_end = observed
        .bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let complete: Vec<Vec<u8>> = if complete_end == 0 {
        Vec::new()
    } else {
        observed.bytes[..complete_end - 1]
            .split(|&b| b == b'\n')
            .map(|l| trim_end(l).to_vec())
            .collect()
    };
    if options.unordered {
        let (_, extra) = multiset_difference(&options.expected, &complete);
        if let Some(line) = extra.iter().find(|l| !l.is_empty()) {
            return Verdict::Mismatch(format!(
                "unexpected line {} ({}; order ignored)",
                preview(line),
                truncation_note(observed)
            ));
        }
    } else {
        for (i, have) in complete.iter().enumerate() {
            match options.expected.get(i) {
                Some(want) if want != have => {
                    return Verdict::Mismatch(format!(
                        "line {}: expected {}, got {} ({})",
                        i + 1,
                        preview(want),
                        preview(have),
                        truncation_note(observed)
                    ));
                }
                // Extra empty lines may still be the ignored trailing ones.
                None if !have.is_empty() => {
                    return Verdict::Mismatch(format!(
                        "expected {} line(s), line {} is {} ({})",
                        options.expected.len(),
                        i + 1,
                        preview(have),
                        truncation_note(observed)
                    ));
                }
                _ => {}
            }
        }
    }
    Verdict::Undetermined(format!(
        "the {} complete line(s) kept agree so far ({})",
        complete.len(),
        truncation_note(observed)
    ))
}

/// Lines of `expected` not in `got`, and lines of `got` not in `expected`,
/// counted with multiplicity.
fn multiset_difference(expected: &[Vec<u8>], got: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut counts: BTreeMap<&[u8], i64> = BTreeMap::new();
    for line in expected {
        *counts.entry(line).or_default() += 1;
    }
    let mut extra = Vec::new();
    for line in got {
        match counts.get_mut(line.as_slice()) {
            Some(n) if *n > 0 => *n -= 1,
            _ => extra.push(line.clone()),
        }
    }
    let missing = counts
        .into_iter()
        .flat_map(|(line, n)| std::iter::repeat_n(line.to_vec(), n.max(0) as usize))
        .collect();
    (missing, extra)
}

guest_support::export_comparator!(parse, compare);
