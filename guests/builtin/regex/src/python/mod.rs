//! Python `re` patterns, parsed as CPython's `re._parser` parses them and
//! translated into regex-syntax HIR with the same meaning, or refused.
//!
//! The parser follows the grammar of CPython 3.11's `re` module (the same
//! tokens, and Python's error messages), and the translation Python's
//! matching rules: the classes `\w`, `\d`, `\s` and case-insensitive
//! matching use CPython's own character tables ([`tables`], generated from
//! CPython), not the engine's. Only what has an exact equivalent in a finite automaton is translated;
//! everything else is refused with the construct and its offset (offsets
//! count characters of the pattern, as `re.error.pos` does).
//!
//! The one construct that needs care is `$` without MULTILINE: Python's `$`
//! matches at the end of the text *or before a newline that ends it*, a
//! look-ahead. Where nothing can follow it in a match (it ends the pattern,
//! possibly inside groups, alternatives or a repetition of at most one), that
//! is the same as consuming an optional final newline and then requiring the
//! end: `(?:\n?\z)` for a search. In a full match the match ends at the end of
//! the text anyway, so it is `\z`. Anywhere else it is refused.

use std::fmt;

mod parse;
mod translate;

use regex_syntax::hir::{Hir, Look};

use parse::Parser;
use translate::{Translator, in_table};

use crate::tables;

// Flag bits, as in `re._constants`.
const TEMPLATE: u32 = 1;
const IGNORECASE: u32 = 2;
const LOCALE: u32 = 4;
const MULTILINE: u32 = 8;
const DOTALL: u32 = 16;
const UNICODE: u32 = 32;
const VERBOSE: u32 = 64;
const ASCII: u32 = 256;
const TYPE_FLAGS: u32 = ASCII | LOCALE | UNICODE;

/// `_sre.MAXREPEAT`: counts must be below it; as a maximum it means "no limit".
const MAXREPEAT: u64 = 4_294_967_295;

/// Groups and repetitions nest at most this deep. The parser, the
/// translation and the engine's compiler all recurse, and a guest's stack
/// is small (regex-syntax's own default limit is 250 for the same reason).
const MAX_NESTING: usize = 100;

fn flag(c: char) -> Option<u32> {
    Some(match c {
        'i' => IGNORECASE,
        'L' => LOCALE,
        'm' => MULTILINE,
        's' => DOTALL,
        'x' => VERBOSE,
        'a' => ASCII,
        't' => TEMPLATE,
        'u' => UNICODE,
        _ => return None,
    })
}

/// Why a pattern is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// CPython's `re` itself rejects the pattern (its message, and offset).
    Syntax { message: String, offset: usize },
    /// Valid Python, but this engine cannot run it with Python's meaning.
    Unsupported {
        what: String,
        offset: usize,
        hint: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Syntax { message, offset } => write!(f, "{message} at offset {offset}"),
            Error::Unsupported { what, offset, hint } => {
                write!(f, "{what} at offset {offset} is not supported")?;
                if !hint.is_empty() {
                    write!(f, " ({hint})")?;
                }
                Ok(())
            }
        }
    }
}

fn syntax(message: impl Into<String>, offset: usize) -> Error {
    Error::Syntax {
        message: message.into(),
        offset,
    }
}

fn unsupported(what: impl Into<String>, offset: usize, hint: impl Into<String>) -> Error {
    Error::Unsupported {
        what: what.into(),
        offset,
        hint: hint.into(),
    }
}

/// A pattern translated for the engine.
#[derive(Debug, Clone)]
pub struct Translation {
    /// What to search for: for a full match, anchored at both ends.
    pub hir: Hir,
    /// The pattern has `\b` or `\B` in Unicode mode. Python's word characters
    /// (`str.isalnum()` or `_`) are not the engine's, so an answer is exact
    /// only for texts without [`word_differs`] characters.
    pub unicode_word_boundary: bool,
    /// The pattern has `\B`, which CPython (before 3.14) never matches in an
    /// empty text; translate again with `empty_text` for one.
    pub non_boundary: bool,
}

/// Translates `pattern` (Python syntax) for a search, or for a full match
/// (`re.fullmatch`). With `empty_text`, the result is only valid for
/// searching the empty text (there, `\B` never matches, as in CPython 3.11).
pub fn translate(pattern: &str, full_match: bool, empty_text: bool) -> Result<Translation, Error> {
    let mut parser = Parser::new(pattern)?;
    let tree = parser.parse()?;
    let mut translator = Translator {
        full_match,
        empty_text,
        unicode_word_boundary: false,
        non_boundary: false,
    };
    let flags = parser.global_flags;
    let body = translator.seq(&tree, flags, true)?;
    let hir = if full_match {
        Hir::concat(vec![Hir::look(Look::Start), body, Hir::look(Look::End)])
    } else {
        body
    };
    Ok(Translation {
        hir,
        unicode_word_boundary: translator.unicode_word_boundary,
        non_boundary: translator.non_boundary,
    })
}

/// Whether Python's `\w` and the engine's Unicode `\w` disagree about `c`,
/// so that `\b` and `\B` next to it may differ.
pub fn word_differs(c: char) -> bool {
    in_table(tables::WORD, c as u32) != regex_syntax::is_word_character(c)
}
