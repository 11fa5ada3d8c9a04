//! `regex`: the output matches the regular expression `value`.
//!
//! Parameters: `value` (the pattern, Rust `regex` syntax, required) and
//! `full_match` (default false: search anywhere; true: the whole output must
//! match). Matching is over bytes (`regex::bytes`): Unicode classes and `.`
//! match UTF-8 characters, and bytes that are not UTF-8 are only matched by
//! byte-level syntax such as `(?-u:\xFF)` or `(?s-u:.)`.
//!
//! Truncation rule:
//! - search: a match found in the kept prefix is a match when the pattern has
//!   no assertion that looks past the match (`$`, `\z`, `\b`, `\B`), or when the
//!   match ends before the last kept character (so what follows is known).
//! - full match: a truncated output never matches.
//! - both: a mismatch when no continuation of the kept prefix could ever match,
//!   found by running the pattern's DFA over the prefix until it is dead (e.g.
//!   `^ok` against output starting `error`). Anything else is undetermined.

use guest_support::{Observed, Params, Verdict, preview, truncation_note, without_cut_char};
use regex::bytes::{Regex, RegexBuilder};
use regex_automata::hybrid::dfa::DFA;
use regex_automata::{Anchored, Input};
use regex_syntax::hir::Look;

/// Keeps a hostile pattern from exhausting the instance's memory while compiling.
const SIZE_LIMIT: usize = 8 << 20;

struct Options {
    pattern: String,
    regex: Regex,
    full_match: bool,
}

fn parse(json: &str) -> Result<Options, String> {
    let p = Params::parse(json, &["value", "full_match"])?;
    let pattern = p.required_str("value")?;
    let full_match = p.bool_or("full_match", false)?;
    let anchored = if full_match {
        format!(r"\A(?:{pattern})\z")
    } else {
        pattern.clone()
    };
    let regex = RegexBuilder::new(&anchored)
        .size_limit(SIZE_LIMIT)
        .build()
        .map_err(|e| format!("parameter \"value\" is not a valid regex: {e}"))?;
    Ok(Options {
        pattern,
        regex,
        full_match,
    })
}

fn compare(options: &Options, observed: &Observed<'_>) -> Verdict {
    let what = if options.full_match {
        "does not fully match"
    } else {
        "does not match"
    };
    if !observed.truncated {
        return if options.regex.is_match(observed.bytes) {
            Verdict::Match
        } else {
            Verdict::Mismatch(format!(
                "the output {} {what} /{}/",
                preview(observed.bytes),
                options.pattern
            ))
        };
    }

    let kept = without_cut_char(observed.bytes);
    if !options.full_match && match_is_proven(options, kept) {
        return Verdict::Match;
    }
    match prefix_is_dead(options, kept) {
        Some(true) => Verdict::Mismatch(format!(
            "the output starts {}, which no continuation can make match /{}/ ({})",
            preview(kept),
            options.pattern,
            truncation_note(observed)
        )),
        _ => Verdict::Undetermined(format!(
            "the kept part does not decide /{}/ ({})",
            options.pattern,
            truncation_note(observed)
        )),
    }
}

/// Whether a match inside `kept` stays a match whatever follows it.
fn match_is_proven(options: &Options, kept: &[u8]) -> bool {
    if !looks_ahead(&options.pattern) {
        return options.regex.is_match(kept);
    }
    // An assertion may read the character after the match: only a match that
    // ends before the end of the kept bytes sees real output there.
    options.regex.find_iter(kept).any(|m| m.end() < kept.len())
}

/// Whether the pattern contains an assertion that inspects text after the
/// current position. Parsing failures count as "yes" (the safe answer).
fn looks_ahead(pattern: &str) -> bool {
    let Ok(hir) = regex_syntax::Parser::new().parse(pattern) else {
        return true;
    };
    let looks = hir.properties().look_set();
    looks
        .iter()
        .any(|look| !matches!(look, Look::Start | Look::StartLF | Look::StartCRLF))
}

/// Some(true) when the DFA for the pattern dies on `kept`: no output that
/// starts with `kept` can match. None when the lazy DFA gives up.
fn prefix_is_dead(options: &Options, kept: &[u8]) -> Option<bool> {
    // For a full match, `\z` keeps the DFA from matching before the end, so
    // it dies exactly when no continuation can match the whole output.
    let pattern = if options.full_match {
        format!(r"\A(?:{})\z", options.pattern)
    } else {
        options.pattern.clone()
    };
    let dfa = DFA::new(&pattern).ok()?;
    let mut cache = dfa.create_cache();
    let anchored = if options.full_match {
        Anchored::Yes
    } else {
        Anchored::No
    };
    let input = Input::new(kept).anchored(anchored);
    let mut state = dfa.start_state_forward(&mut cache, &input).ok()?;
    for &byte in kept {
        state = dfa.next_state(&mut cache, state, byte).ok()?;
        if state.is_match() {
            // A match was seen; leftmost-first DFAs go dead after one, which
            // would not mean "no match".
            return Some(false);
        }
        if state.is_dead() {
            return Some(true);
        }
        if state.is_quit() {
            return None;
        }
    }
    Some(false)
}

guest_support::export_comparator!(parse, compare);
