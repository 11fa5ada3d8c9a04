//! The built-in checkers: one component serving six names, selected by the
//! `mode` parameter (the host sets it from the name the user wrote, and
//! refuses a `mode` of the user's own).
//!
//! Every mode reads the output and the answer as bytes (not necessarily
//! UTF-8); none needs the test's input. Tokens are separated by ASCII
//! whitespace.
//!
//! - `tokens`: the same tokens, byte for byte (`case_insensitive`, default
//!   false, folds case first).
//! - `yes_no`: the same tokens, where an answer token "yes" or "no" (in any
//!   case) matches the same word in any case; other tokens exactly.
//! - `floats`: the same tokens, where an answer token that parses as a
//!   finite number matches an output number within absolute error `abs` or
//!   relative error `rel` (of the answer's value; both default 1e-6); other
//!   tokens exactly. A word where a number belongs is a presentation error.
//! - `sorted_tokens`: the answer's tokens (as a multiset), in non-decreasing
//!   order (two numbers compared as numbers, anything else as bytes).
//! - `unordered_tokens`: the answer's tokens (as a multiset), in any order.
//! - `exact_lines`: the same lines exactly, but CR LF equals LF and a missing
//!   final newline is allowed.
//!
//! Truncation rule: only tokens (lines) that end before the cut are trusted;
//! the last kept one may be cut, but still proves that one more exists. A
//! trusted token that differs from the answer's at its place (in order), a
//! token the answer has fewer of (any order), two trusted tokens out of order
//! (`sorted_tokens`), or more tokens than the answer has, proves a wrong
//! answer; anything else is undetermined. A truncated output is never
//! accepted.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use guest_support::{Params, fold_case, is_space, kind_of, normalize_newlines};
use serde_json::Value;

// The generated export of `check` takes the flattened test (10 arguments).
#[allow(clippy::too_many_arguments)]
mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit/checker@0.1.0",
        world: "checker",
    });
}

use bindings::progscore::checker::types::ObservedStream;
use bindings::{Judgement, Test};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Tokens,
    YesNo,
    Floats,
    SortedTokens,
    UnorderedTokens,
    ExactLines,
}

/// Each mode's name and the parameters it takes (beside `mode`).
const MODES: &[(&str, Mode, &[&str])] = &[
    ("tokens", Mode::Tokens, &["case_insensitive"]),
    ("yes_no", Mode::YesNo, &[]),
    ("floats", Mode::Floats, &["abs", "rel"]),
    ("sorted_tokens", Mode::SortedTokens, &[]),
    ("unordered_tokens", Mode::UnorderedTokens, &[]),
    ("exact_lines", Mode::ExactLines, &[]),
];

struct Options {
    mode: Mode,
    case_insensitive: bool,
    abs: f64,
    rel: f64,
}

fn parse(json: &str) -> Result<Options, String> {
    let value: Value =
        serde_json::from_str(json).map_err(|e| format!("parameters are not valid JSON: {e}"))?;
    let Value::Object(map) = &value else {
        return Err(format!(
            "parameters must be a JSON object, got {}",
            kind_of(&value)
        ));
    };
    let names: Vec<&str> = MODES.iter().map(|(name, _, _)| *name).collect();
    let mode_name = match map.get("mode") {
        Some(Value::String(name)) => name.as_str(),
        Some(other) => {
            return Err(format!(
                "parameter \"mode\" must be a string, got {}",
                kind_of(other)
            ));
        }
        None => {
            return Err(format!(
                "parameter \"mode\" is required (one of {})",
                names.join(", ")
            ));
        }
    };
    let Some((name, mode, allowed)) = MODES.iter().find(|(name, _, _)| *name == mode_name) else {
        return Err(format!(
            "unknown mode \"{mode_name}\" (known: {})",
            names.join(", ")
        ));
    };
    for key in map.keys() {
        if key != "mode" && !allowed.contains(&key.as_str()) {
            let takes = if allowed.is_empty() {
                "no parameters".to_string()
            } else {
                allowed
                    .iter()
                    .map(|a| format!("\"{a}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(format!(
                "unknown parameter \"{key}\" (the {name} checker takes {takes})"
            ));
        }
    }
    let mut all = vec!["mode"];
    all.extend_from_slice(allowed);
    let p = Params::parse(json, &all)?;
    Ok(Options {
        mode: *mode,
        case_insensitive: p.bool_or("case_insensitive", false)?,
        abs: p.non_negative_or("abs", 1e-6)?,
        rel: p.non_negative_or("rel", 1e-6)?,
    })
}

/// A judgement, independent of the generated bindings.
#[derive(Debug, Clone, PartialEq)]
enum Verdict {
    Accepted(String),
    WrongAnswer(String),
    PresentationError(String),
    Undetermined(String),
}

/// The output as far as it is evidence.
struct Output<'a> {
    /// Tokens (or lines) that end before the cut: all of them when complete.
    trusted: Vec<&'a [u8]>,
    /// Whether a token (line) follows them that may be cut.
    partial: bool,
    truncated: bool,
    kept: usize,
    total: u64,
}

impl Output<'_> {
    /// How many tokens (lines) the output is known to have, at least.
    fn seen(&self) -> usize {
        self.trusted.len() + usize::from(self.partial)
    }

    /// The suffix of a proven verdict on a truncated output.
    fn note(&self) -> String {
        if self.truncated {
            format!(" ({})", self.cut())
        } else {
            String::new()
        }
    }

    fn cut(&self) -> String {
        format!(
            "the output was truncated after {} bytes of {}",
            self.kept, self.total
        )
    }
}

fn tokens(bytes: &[u8]) -> Vec<&[u8]> {
    bytes
        .split(|&b| is_space(b))
        .filter(|t| !t.is_empty())
        .collect()
}

fn output_tokens(stream: &ObservedStream) -> Output<'_> {
    let mut trusted = tokens(&stream.bytes);
    // A token running to the end of a truncated stream may be cut.
    let partial = stream.truncated
        && stream.bytes.last().is_some_and(|&b| !is_space(b))
        && trusted.pop().is_some();
    Output {
        trusted,
        partial,
        truncated: stream.truncated,
        kept: stream.bytes.len(),
        total: stream.total_bytes,
    }
}

/// The lines of a complete text: CR LF read as LF, one final LF dropped.
fn lines(bytes: &[u8]) -> Vec<Vec<u8>> {
    let text = normalize_newlines(bytes);
    let text = text.strip_suffix(b"\n").unwrap_or(&text);
    if text.is_empty() {
        return Vec::new();
    }
    text.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// 1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, ..., 21st.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// `bytes` in single quotes for a message: lossy UTF-8, control characters
/// escaped, cut to about 60 characters.
fn quote(bytes: &[u8]) -> String {
    const MAX_CHARS: usize = 60;
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::from("'");
    for (count, c) in text.chars().enumerate() {
        if count == MAX_CHARS {
            out.push_str("'…");
            return out;
        }
        out.extend(c.escape_debug());
    }
    out.push('\'');
    out
}

fn number(bytes: &[u8]) -> Option<f64> {
    std::str::from_utf8(bytes).ok()?.parse::<f64>().ok()
}

fn finite_number(bytes: &[u8]) -> Option<f64> {
    number(bytes).filter(|x| x.is_finite())
}

/// Why the output's `got` is not the answer's `want` at 0-based place `i`,
/// or `None` when it matches.
fn token_mismatch(options: &Options, i: usize, want: &[u8], got: &[u8]) -> Option<Verdict> {
    let differs = || {
        Verdict::WrongAnswer(format!(
            "{} token differs: expected {}, found {}",
            ordinal(i + 1),
            quote(want),
            quote(got)
        ))
    };
    let equal = match options.mode {
        Mode::Tokens if options.case_insensitive => fold_case(want) == fold_case(got),
        Mode::YesNo if want.eq_ignore_ascii_case(b"yes") || want.eq_ignore_ascii_case(b"no") => {
            want.eq_ignore_ascii_case(got)
        }
        Mode::Floats => {
            if let Some(x) = finite_number(want) {
                let Some(y) = number(got) else {
                    return Some(Verdict::PresentationError(format!(
                        "{} token: expected a number ({}), found {}",
                        ordinal(i + 1),
                        quote(want),
                        quote(got)
                    )));
                };
                let error = (x - y).abs();
                if error <= options.abs || error <= options.rel * x.abs() {
                    return None;
                }
                return Some(Verdict::WrongAnswer(format!(
                    "{} number differs: expected {}, found {} (error {error:e}, above absolute {:e} and relative {:e})",
                    ordinal(i + 1),
                    quote(want),
                    quote(got),
                    options.abs,
                    options.rel
                )));
            }
            want == got
        }
        _ => want == got,
    };
    (!equal).then(differs)
}

fn with_note(verdict: Verdict, out: &Output<'_>) -> Verdict {
    match verdict {
        Verdict::WrongAnswer(m) => Verdict::WrongAnswer(m + &out.note()),
        Verdict::PresentationError(m) => Verdict::PresentationError(m + &out.note()),
        other => other,
    }
}

/// `tokens`, `yes_no`, `floats`: token by token, in order.
fn check_in_order(options: &Options, answer: &[&[u8]], out: &Output<'_>) -> Verdict {
    for (i, (want, got)) in answer.iter().zip(&out.trusted).enumerate() {
        if let Some(verdict) = token_mismatch(options, i, want, got) {
            return with_note(verdict, out);
        }
    }
    count_then(answer.len(), out, "token", "agree with the answer so far")
}

/// The verdict once every trusted token (line) agrees: by their count.
fn count_then(expected: usize, out: &Output<'_>, word: &str, agreeing: &str) -> Verdict {
    let seen = out.seen();
    if out.truncated {
        if seen > expected {
            return Verdict::WrongAnswer(format!(
                "answer has {}, output has at least {seen}{}",
                plural(expected, word),
                out.note()
            ));
        }
        return Verdict::Undetermined(format!(
            "{}; its {} {agreeing}",
            out.cut(),
            plural(out.trusted.len(), &format!("complete {word}"))
        ));
    }
    if seen != expected {
        return Verdict::WrongAnswer(format!(
            "answer has {}, output has {seen}",
            plural(expected, word)
        ));
    }
    Verdict::Accepted(plural(expected, word))
}

/// How two tokens of a sorted output compare: as numbers when both are.
fn token_order(a: &[u8], b: &[u8]) -> Ordering {
    match (number(a), number(b)) {
        (Some(x), Some(y)) if !x.is_nan() && !y.is_nan() => x.total_cmp(&y),
        _ => a.cmp(b),
    }
}

/// `sorted_tokens` and `unordered_tokens`: the same multiset of tokens.
fn check_multiset(options: &Options, answer: &[&[u8]], out: &Output<'_>) -> Verdict {
    if options.mode == Mode::SortedTokens {
        for (i, pair) in out.trusted.windows(2).enumerate() {
            if token_order(pair[0], pair[1]) == Ordering::Greater {
                return Verdict::WrongAnswer(format!(
                    "output is not sorted: {} token {} comes before {} token {}{}",
                    ordinal(i + 1),
                    quote(pair[0]),
                    ordinal(i + 2),
                    quote(pair[1]),
                    out.note()
                ));
            }
        }
    }
    let seen = out.seen();
    if !out.truncated && seen != answer.len() {
        return Verdict::WrongAnswer(format!(
            "answer has {}, output has {seen}",
            plural(answer.len(), "token")
        ));
    }
    let mut left: BTreeMap<&[u8], usize> = BTreeMap::new();
    for token in answer {
        *left.entry(token).or_default() += 1;
    }
    for got in &out.trusted {
        match left.get_mut(got) {
            Some(n) if *n > 0 => *n -= 1,
            _ => {
                let times = answer.iter().filter(|t| *t == got).count();
                let has = if times == 0 {
                    "the answer has no such token".to_string()
                } else {
                    format!("the answer has it {}", plural(times, "time"))
                };
                return Verdict::WrongAnswer(format!(
                    "output has token {} more often than the answer ({has}){}",
                    quote(got),
                    out.note()
                ));
            }
        }
    }
    let agreeing = if options.mode == Mode::SortedTokens {
        "are the answer's and in order so far"
    } else {
        "are the answer's so far"
    };
    count_then(answer.len(), out, "token", agreeing)
}

/// `exact_lines`.
fn check_lines(answer: &[u8], stream: &ObservedStream) -> Verdict {
    let want = lines(answer);
    let complete: Vec<Vec<u8>>;
    let normal: Vec<u8>;
    let out = if stream.truncated {
        // Lines ended by an LF are trusted; what follows the last LF may be
        // cut (a CR there may yet be followed by its LF).
        normal = normalize_newlines(&stream.bytes);
        let (trusted, rest) = match normal.iter().rposition(|&b| b == b'\n') {
            Some(end) => (
                normal[..end].split(|&b| b == b'\n').collect(),
                &normal[end + 1..],
            ),
            None => (Vec::new(), &normal[..]),
        };
        Output {
            trusted,
            partial: !rest.is_empty(),
            truncated: true,
            kept: stream.bytes.len(),
            total: stream.total_bytes,
        }
    } else {
        complete = lines(&stream.bytes);
        Output {
            trusted: complete.iter().map(Vec::as_slice).collect(),
            partial: false,
            truncated: false,
            kept: stream.bytes.len(),
            total: stream.total_bytes,
        }
    };
    for (i, (want, got)) in want.iter().zip(&out.trusted).enumerate() {
        if want.as_slice() != *got {
            return Verdict::WrongAnswer(format!(
                "{} line differs: expected {}, found {}{}",
                ordinal(i + 1),
                quote(want),
                quote(got),
                out.note()
            ));
        }
    }
    count_then(want.len(), &out, "line", "agree with the answer so far")
}

fn check(options: &Options, test: &Test) -> Verdict {
    if options.mode == Mode::ExactLines {
        return check_lines(&test.answer, &test.output);
    }
    let answer = tokens(&test.answer);
    let out = output_tokens(&test.output);
    match options.mode {
        Mode::SortedTokens | Mode::UnorderedTokens => check_multiset(options, &answer, &out),
        _ => check_in_order(options, &answer, &out),
    }
}

struct Component;

impl bindings::Guest for Component {
    fn validate(params: String) -> Result<(), String> {
        parse(&params).map(|_| ())
    }

    fn check(params: String, test: Test) -> Result<Judgement, String> {
        let options = parse(&params)?;
        Ok(match check(&options, &test) {
            Verdict::Accepted(m) => Judgement::Accepted(m),
            Verdict::WrongAnswer(m) => Judgement::WrongAnswer(m),
            Verdict::PresentationError(m) => Judgement::PresentationError(m),
            Verdict::Undetermined(m) => Judgement::Undetermined(m),
        })
    }
}

bindings::export!(Component with_types_in bindings);

#[cfg(test)]
mod tests {
    use super::*;

    fn run(params: &str, output: &[u8], truncated: bool, answer: &[u8]) -> Verdict {
        let options = parse(params).expect("params");
        let test = Test {
            input: Vec::new(),
            output: ObservedStream {
                bytes: output.to_vec(),
                truncated,
                total_bytes: output.len() as u64 + u64::from(truncated),
            },
            answer: answer.to_vec(),
        };
        check(&options, &test)
    }

    #[test]
    fn ordinals() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st",
                "111th"
            ]
        );
    }

    #[test]
    fn lines_ignore_one_final_newline_and_cr() {
        assert_eq!(lines(b""), Vec::<Vec<u8>>::new());
        assert_eq!(lines(b"a\r\nb"), lines(b"a\nb\n"));
        assert_eq!(lines(b"a\n\n").len(), 2);
    }

    #[test]
    fn params_need_a_known_mode() {
        assert!(parse("{}").is_err_and(|e| e.contains("\"mode\" is required")));
        assert!(parse(r#"{"mode":"words"}"#).is_err_and(|e| e.contains("unknown mode")));
        assert!(parse(r#"{"mode":"yes_no","x":1}"#).is_err_and(|e| e.contains("\"x\"")));
    }

    #[test]
    fn a_cut_token_still_counts() {
        let tokens = r#"{"mode":"tokens"}"#;
        assert!(matches!(
            run(tokens, b"1 2", true, b"1"),
            Verdict::WrongAnswer(_)
        ));
        assert!(matches!(
            run(tokens, b"1 2", true, b"1 2"),
            Verdict::Undetermined(_)
        ));
        assert_eq!(
            run(tokens, b"1 2", false, b"1 2"),
            Verdict::Accepted("2 tokens".to_string())
        );
    }
}
