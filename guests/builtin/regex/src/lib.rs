//! `regex`: the output matches the regular expression `value`, a Python `re`
//! pattern, as `re.search(value, output)` would find it (or, with
//! `full_match`, `re.fullmatch`).
//!
//! Parameters: `value` (the pattern, Python `re` syntax, required) and
//! `full_match` (default false: search anywhere; true: the whole output must
//! match).
//!
//! Syntax and meaning are CPython's `re` (3.11, the version whose character
//! tables are in `src/tables.rs`; `gen_tables.py` regenerates them), for the
//! subset that runs exactly on a finite automaton: the pattern is parsed as
//! `re` parses it (verbose mode, `{` read as a literal where Python reads
//! one, `{,n}`, octal escapes, `(?#...)`, scoped flags `(?i:...)` ...) and
//! translated with Python's meaning: `\w`, `\d`, `\s` and case-insensitive
//! matching use Python's Unicode tables (or its ASCII rules under `(?a)`),
//! `\Z` is the end of the output. Refused when the parameters are validated,
//! with the construct and its offset (in characters): look-ahead and
//! look-behind, backreferences (`\1`, `(?P=name)`), conditionals
//! `(?(1)...)`, atomic groups `(?>...)`, possessive quantifiers (`*+`, `++`,
//! `?+`, `{m,n}+`), the flags `L` and `t`, `\N{...}`, surrogates, non-ASCII
//! group names, and what Python reads literally only with a FutureWarning
//! (`[[`, `--`, `&&`, `~~`, `||` in a class: Rust's class syntax, which Python
//! does not have). Anything Python itself rejects is refused with Python's
//! message; so is `\z` (Python before 3.14 has none: write `\Z`).
//!
//! `$`: with MULTILINE (`(?m)`), the end of any line, as in Python. Without,
//! Python's `$` matches at the end of the output or before a newline that
//! ends it (so `^[0-9]+$` matches `"123\n"`). Where nothing can follow it
//! in a match (it ends the pattern, possibly inside groups, alternatives or
//! an optional part), it is translated exactly: for a search, an optional
//! final newline and then the end; for a full match, the end (so
//! `fullmatch("^[0-9]+$", "123\n")` is false, as in Python). A `$` that more
//! pattern may follow (`a$\n`, `(a$)+`, `$x?`) is refused: write `\n?\Z`,
//! or use `(?m)`.
//!
//! Matching is over bytes. Output that is not UTF-8 keeps its valid parts:
//! bytes that are not UTF-8 are matched by nothing (not `.`, not a negated
//! class). Two answers depend on the text, and are handled where they are
//! given: Python's `\b`/`\B` (Unicode mode) use Python's word characters,
//! which differ from the engine's for some characters (such as `²`, or
//! combining marks): for an output (or kept prefix) containing one, a
//! pattern with `\b` or `\B` is undetermined. And CPython 3.11's `\B` never
//! matches in an empty output.
//!
//! Truncation rule:
//! - search: a match found in the kept prefix is a match when the pattern has
//!   no assertion that looks past the match (`$`, `\Z`, `\b`, `\B`), or when
//!   the match ends before the last kept character (so what follows is
//!   known). The end of the kept prefix is never taken for the end of the
//!   output: a match that needs the end (`^[0-9]+$`, searched as
//!   `^[0-9]+\n?\z`, on a kept `123\n`) can only end where the kept prefix
//!   ends, so it proves nothing.
//! - full match: a truncated output never matches.
//! - both: a mismatch when no continuation of the kept prefix could ever match,
//!   found by running the pattern's DFA over the prefix until it is dead (e.g.
//!   `^ok` against output starting `error`). Anything else is undetermined.

mod python;
#[rustfmt::skip]
mod tables;

use std::borrow::Cow;

use guest_support::{Observed, Params, Verdict, preview, truncation_note, without_cut_char};
use regex_automata::hybrid::dfa::DFA;
use regex_automata::meta::{self, Regex};
use regex_automata::nfa::thompson;
use regex_automata::{Anchored, Input, MatchKind};
use regex_syntax::hir::{Hir, Look};

use python::Translation;

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
    /// The pattern in the engine's terms, as searched (anchored at both ends
    /// for a full match).
    translation: Translation,
    /// Compiled without the lazy DFA, for small UTF-8 outputs; compiling it
    /// also validates the pattern.
    small: Regex,
    full_match: bool,
}

impl Options {
    /// The regex to search `haystack` with. All forms are built from the same
    /// HIR and match configuration, so they give the same answers; only their
    /// speed differs, except where a UTF-8 output makes a difference: there,
    /// an empty match inside a character (which Python's positions, between
    /// characters, cannot produce, as with `\B` inside `é`) is not reported.
    fn regex_for(&self, haystack: &[u8]) -> Result<Cow<'_, Regex>, String> {
        let lazy_dfa = haystack.len() > SMALL_OUTPUT;
        // Only empty matches are affected: check the output only for a
        // pattern that can match the empty string.
        let may_be_empty = self.translation.hir.properties().minimum_len() == Some(0);
        let utf8 = !may_be_empty || std::str::from_utf8(haystack).is_ok();
        if utf8 && !lazy_dfa {
            return Ok(Cow::Borrowed(&self.small));
        }
        build(&self.translation.hir, lazy_dfa, utf8).map(Cow::Owned)
    }
}

/// Builds the engine for `hir`: leftmost-first, over bytes that need not be
/// UTF-8 (`utf8_empty(false)`, as `regex::bytes` does) unless the output is
/// known to be UTF-8, with or without the lazy DFA.
fn build(hir: &Hir, lazy_dfa: bool, utf8: bool) -> Result<Regex, String> {
    let config = meta::Config::new()
        .match_kind(MatchKind::LeftmostFirst)
        .utf8_empty(utf8)
        .nfa_size_limit(Some(SIZE_LIMIT))
        .hybrid_cache_capacity(LAZY_DFA_CACHE)
        .hybrid(lazy_dfa);
    meta::Builder::new()
        .configure(config)
        .build_from_hir(hir)
        .map_err(|e| {
            let why = if let Some(limit) = e.size_limit() {
                format!("its compiled form exceeds the size limit of {limit} bytes")
            } else {
                e.to_string()
            };
            format!("parameter \"value\" cannot be compiled: {why}")
        })
}

fn describe(error: python::Error) -> String {
    match error {
        python::Error::Syntax { .. } => {
            format!("parameter \"value\" is not a valid Python regex: {error}")
        }
        python::Error::Unsupported { .. } => format!("parameter \"value\": {error}"),
    }
}

fn parse(json: &str) -> Result<Options, String> {
    let p = Params::parse(json, &["value", "full_match"])?;
    let pattern = p.required_str("value")?;
    let full_match = p.bool_or("full_match", false)?;
    let translation = python::translate(&pattern, full_match, false).map_err(describe)?;
    let small = build(&translation.hir, false, true)?;
    Ok(Options {
        pattern,
        translation,
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
    let kept = if observed.truncated {
        without_cut_char(observed.bytes)
    } else {
        observed.bytes
    };
    if options.translation.unicode_word_boundary
        && let Some(c) = kept_word_difference(kept)
    {
        return Verdict::Undetermined(format!(
            "the output contains {c:?} (U+{:04X}), a character Python's \\w and this \
             engine's classify differently, so /{}/'s \\b or \\B may not decide as in Python",
            c as u32, options.pattern
        ));
    }
    if !observed.truncated {
        let matched = if kept.is_empty() && options.translation.non_boundary {
            // CPython 3.11's \B never matches in an empty string.
            python::translate(&options.pattern, options.full_match, true)
                .map_err(describe)
                .and_then(|t| build(&t.hir, false, true))
                .map(|regex| regex.is_match(b""))
        } else {
            options.regex_for(kept).map(|regex| regex.is_match(kept))
        };
        return match matched {
            Ok(true) => Verdict::Match,
            Ok(false) => Verdict::Mismatch(format!(
                "the output {} {what} /{}/",
                preview(kept),
                options.pattern
            )),
            Err(e) => Verdict::Undetermined(e),
        };
    }

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

/// The first character of `bytes` that Python's `\w` and the engine's
/// classify differently, if any.
fn kept_word_difference(bytes: &[u8]) -> Option<char> {
    if bytes.is_ascii() {
        return None;
    }
    bytes
        .utf8_chunks()
        .flat_map(|chunk| chunk.valid().chars())
        .find(|&c| !c.is_ascii() && python::word_differs(c))
}

/// Whether a match inside `kept` stays a match whatever follows it.
fn match_is_proven(options: &Options, kept: &[u8]) -> Result<bool, String> {
    let regex = options.regex_for(kept)?;
    if !looks_ahead(&options.translation.hir) {
        return Ok(regex.is_match(kept));
    }
    // An assertion may read the character after the match, and the end of
    // the kept bytes is not the end of the output (the translated `$` is
    // `\n?\z`, which only matches there): only a match that ends before the
    // end of the kept bytes sees real output after it.
    Ok(regex.find_iter(kept).any(|m| m.end() < kept.len()))
}

/// Whether the pattern contains an assertion that inspects text after the
/// current position.
fn looks_ahead(hir: &Hir) -> bool {
    hir.properties()
        .look_set()
        .iter()
        .any(|look| !matches!(look, Look::Start | Look::StartLF | Look::StartCRLF))
}

/// Some(true) when the DFA for the pattern dies on `kept`: no output that
/// starts with `kept` can match. None when the lazy DFA gives up (it does
/// on non-ASCII bytes when the pattern has a Unicode `\b`).
fn prefix_is_dead(options: &Options, kept: &[u8]) -> Option<bool> {
    // For a full match, `\z` keeps the DFA from matching before the end, so
    // it dies exactly when no continuation can match the whole output. The
    // end assertions (`$` as `\n?\z`, `\Z`) are only checked at the end of
    // input, which is never fed here: they keep a state alive, never kill it.
    let nfa = thompson::Compiler::new()
        .configure(thompson::Config::new().nfa_size_limit(Some(SIZE_LIMIT)))
        .build_from_hir(&options.translation.hir)
        .ok()?;
    let dfa = DFA::builder()
        .configure(DFA::config().unicode_word_boundary(true))
        .build_from_nfa(nfa)
        .ok()?;
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
