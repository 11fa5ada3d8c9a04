//! `regex`: the output matches the regular expression `value`.
//!
//! Parameters: `value` (the pattern, Rust `regex` syntax, required) and
//! `full_match` (default false: search anywhere; true: the whole output must
//! match). Matching is over bytes, as `regex::bytes::Regex` does it (the same
//! engine, regex-automata's meta regex, configured the same way): Unicode
//! classes and `.` match UTF-8 characters, and bytes that are not UTF-8 are
//! only matched by byte-level syntax such as `(?-u:\xFF)` or `(?s-u:.)`.
//!
//! Truncation rule:
//! - search: a match found in the kept prefix is a match when the pattern has
//!   no assertion that looks past the match (`$`, `\z`, `\b`, `\B`), or when the
//!   match ends before the last kept character (so what follows is known).
//! - full match: a truncated output never matches.
//! - both: a mismatch when no continuation of the kept prefix could ever match,
//!   found by running the pattern's DFA over the prefix until it is dead (e.g.
//!   `^ok` against output starting `error`). Anything else is undetermined.

use std::borrow::Cow;

use guest_support::{Observed, Params, Verdict, preview, truncation_note, without_cut_char};
use regex_automata::hybrid::dfa::DFA;
use regex_automata::meta::{self, Regex};
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input, MatchKind};
use regex_syntax::hir::Look;

/// Keeps a hostile pattern from exhausting the instance's memory while compiling.
const SIZE_LIMIT: usize = 8 << 20;

/// The lazy DFA's cache, as the `regex` crate sets it.
const LAZY_DFA_CACHE: usize = 2 << 20;

/// Outputs up to this many bytes are searched without the lazy DFA (by the
/// bounded backtracker or the PikeVM, behind the same prefilters). Each call
/// compiles its pattern afresh (one instance per call), and building the lazy
/// DFAs, forward and reverse, costs more than a short search saves. Measured
/// in the guest: at 1-2 KiB most patterns take a half to a third of the time
/// without it, while patterns that defeat the prefilters (`(?s).*needle`) take
/// up to 2.8x longer; at 4 KiB those take 4x longer.
const SMALL_OUTPUT: usize = 2 << 10;

struct Options {
    pattern: String,
    /// The pattern as searched: wrapped in `\A(?:...)\z` for a full match.
    searched: String,
    /// Compiled without the lazy DFA, for small outputs; compiling it also
    /// validates the pattern.
    small: Regex,
    full_match: bool,
}

impl Options {
    /// The regex to search `len` bytes with. Both forms are built from the
    /// same syntax and match configuration, so they give the same answers;
    /// only their speed differs.
    fn regex_for(&self, len: usize) -> Result<Cow<'_, Regex>, String> {
        if len <= SMALL_OUTPUT {
            return Ok(Cow::Borrowed(&self.small));
        }
        build(&self.searched, true).map(Cow::Owned)
    }
}

/// Builds `pattern` exactly as `regex::bytes::Regex` does (Unicode on,
/// matching over bytes that need not be UTF-8, leftmost-first), with or
/// without the lazy DFA engine.
fn build(pattern: &str, lazy_dfa: bool) -> Result<Regex, String> {
    let config = meta::Config::new()
        .match_kind(MatchKind::LeftmostFirst)
        .utf8_empty(false)
        .nfa_size_limit(Some(SIZE_LIMIT))
        .hybrid_cache_capacity(LAZY_DFA_CACHE)
        .hybrid(lazy_dfa);
    meta::Builder::new()
        .configure(config)
        .syntax(syntax::Config::new().utf8(false))
        .build(pattern)
        .map_err(|e| {
            let why = if let Some(limit) = e.size_limit() {
                format!("its compiled form exceeds the size limit of {limit} bytes")
            } else if let Some(syntax) = e.syntax_error() {
                syntax.to_string()
            } else {
                e.to_string()
            };
            format!("parameter \"value\" is not a valid regex: {why}")
        })
}

fn parse(json: &str) -> Result<Options, String> {
    let p = Params::parse(json, &["value", "full_match"])?;
    let pattern = p.required_str("value")?;
    let full_match = p.bool_or("full_match", false)?;
    let searched = if full_match {
        format!(r"\A(?:{pattern})\z")
    } else {
        pattern.clone()
    };
    let small = build(&searched, false)?;
    Ok(Options {
        pattern,
        searched,
        small,
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
        let regex = match options.regex_for(observed.bytes.len()) {
            Ok(regex) => regex,
            Err(e) => return Verdict::Undetermined(e),
        };
        return if regex.is_match(observed.bytes) {
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
    if !options.full_match {
        match match_is_proven(options, kept) {
            Ok(true) => return Verdict::Match,
            Ok(false) => {}
            Err(e) => return Verdict::Undetermined(e),
        }
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
fn match_is_proven(options: &Options, kept: &[u8]) -> Result<bool, String> {
    let regex = options.regex_for(kept.len())?;
    if !looks_ahead(&options.pattern) {
        return Ok(regex.is_match(kept));
    }
    // An assertion may read the character after the match: only a match that
    // ends before the end of the kept bytes sees real output there.
    Ok(regex.find_iter(kept).any(|m| m.end() < kept.len()))
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
    let dfa = DFA::new(&options.searched).ok()?;
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
