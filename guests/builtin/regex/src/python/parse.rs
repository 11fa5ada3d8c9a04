//! Python patterns parsed as CPython's `re` parses them: tokens, the parse
//! tree, and the parser. One concern, kept whole: it follows the grammar of
//! `re._parser` function by function, and reads best side by side with it.

use std::collections::BTreeSet;

use super::*;

// ---------------------------------------------------------------------------
// Tokens: a character, or a backslash and the character after it.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tok {
    Char(char),
    Esc(char),
}

impl Tok {
    pub(super) fn is(self, c: char) -> bool {
        self == Tok::Char(c)
    }

    pub(super) fn char_in(self, set: &str) -> Option<char> {
        match self {
            Tok::Char(c) if set.contains(c) => Some(c),
            _ => None,
        }
    }

    /// Its length in characters of the pattern.
    pub(super) fn width(self) -> usize {
        match self {
            Tok::Char(_) => 1,
            Tok::Esc(_) => 2,
        }
    }
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Char(c) => write!(f, "{c}"),
            Tok::Esc(c) => write!(f, "\\{c}"),
        }
    }
}

pub(super) const DIGITS: &str = "0123456789";
pub(super) const OCTDIGITS: &str = "01234567";
pub(super) const HEXDIGITS: &str = "0123456789abcdefABCDEF";
pub(super) const WHITESPACE: &str = " \t\n\r\x0b\x0c";
pub(super) const SPECIAL_CHARS: &str = ".\\[{()*+?^$|";
pub(super) const REPEAT_CHARS: &str = "*+?{";

/// `re._parser.Tokenizer`, tokenized up front (tokens do not depend on
/// context), with positions in characters.
pub(super) struct Source {
    pub(super) toks: Vec<(Tok, usize)>,
    pub(super) len: usize,
    pub(super) i: usize,
}

impl Source {
    pub(super) fn new(pattern: &str) -> Result<Source, Error> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut toks = Vec::with_capacity(chars.len());
        let mut i = 0;
        while i < chars.len() {
            if chars[i] == '\\' {
                let Some(&c) = chars.get(i + 1) else {
                    return Err(syntax("bad escape (end of pattern)", chars.len() - 1));
                };
                toks.push((Tok::Esc(c), i));
                i += 2;
            } else {
                toks.push((Tok::Char(chars[i]), i));
                i += 1;
            }
        }
        Ok(Source {
            toks,
            len: chars.len(),
            i: 0,
        })
    }

    pub(super) fn next(&self) -> Option<Tok> {
        self.toks.get(self.i).map(|t| t.0)
    }

    pub(super) fn get(&mut self) -> Option<Tok> {
        let t = self.next();
        if t.is_some() {
            self.i += 1;
        }
        t
    }

    pub(super) fn eat(&mut self, c: char) -> bool {
        if self.next() == Some(Tok::Char(c)) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// The offset of the next token.
    pub(super) fn tell(&self) -> usize {
        self.toks.get(self.i).map_or(self.len, |t| t.1)
    }

    /// Up to `n` single characters from `set`.
    pub(super) fn get_while(&mut self, n: usize, set: &str) -> String {
        let mut out = String::new();
        for _ in 0..n {
            match self.next().and_then(|t| t.char_in(set)) {
                Some(c) => {
                    out.push(c);
                    self.i += 1;
                }
                None => break,
            }
        }
        out
    }

    /// Tokens up to `terminator` (consumed), as text.
    pub(super) fn get_until(&mut self, terminator: char, name: &str) -> Result<String, Error> {
        let mut out = String::new();
        loop {
            let Some(t) = self.get() else {
                if out.is_empty() {
                    return Err(syntax(format!("missing {name}"), self.tell()));
                }
                return Err(syntax(
                    format!("missing {terminator}, unterminated name"),
                    self.tell() - out.chars().count(),
                ));
            };
            if t.is(terminator) {
                if out.is_empty() {
                    return Err(syntax(format!("missing {name}"), self.tell() - 1));
                }
                return Ok(out);
            }
            out.push_str(&t.to_string());
        }
    }

    pub(super) fn error(&self, message: impl Into<String>, back: usize) -> Error {
        syntax(message, self.tell().saturating_sub(back))
    }
}

// ---------------------------------------------------------------------------
// The parse tree: `re._parser`'s opcodes that can occur in a pattern we keep.

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Category {
    Digit,
    NotDigit,
    Space,
    NotSpace,
    Word,
    NotWord,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Item {
    Lit(u32),
    Range(u32, u32),
    Cat(Category),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum At {
    /// `^`
    Beginning,
    /// `\A`
    BeginningString,
    /// `$`
    End,
    /// `\Z`
    EndString,
    /// `\b`
    Boundary,
    /// `\B`
    NonBoundary,
}

#[derive(Debug, Clone)]
pub(super) enum Node {
    Lit(u32),
    NotLit(u32),
    In {
        negate: bool,
        items: Vec<Item>,
    },
    Any,
    At(At, usize),
    Repeat {
        min: u32,
        max: Option<u32>,
        greedy: bool,
        sub: Box<Node>,
    },
    /// A group with the flags it turns on and off (what a capturing group
    /// captured does not matter here).
    Group {
        capture: bool,
        add: u32,
        del: u32,
        sub: Vec<Node>,
    },
    Branch(Vec<Vec<Node>>),
}

impl Node {
    pub(super) fn is_plain_group(&self) -> bool {
        matches!(
            self,
            Node::Group {
                capture: false,
                add: 0,
                del: 0,
                ..
            }
        )
    }

    /// Matches only the empty string and asserts nothing: can be ignored
    /// when asking whether something follows a `$`.
    pub(super) fn is_transparent(&self) -> bool {
        match self {
            Node::Group { sub, .. } => sub.iter().all(Node::is_transparent),
            Node::Repeat { max, sub, .. } => *max == Some(0) || sub.is_transparent(),
            Node::Branch(branches) => branches.iter().flatten().all(Node::is_transparent),
            _ => false,
        }
    }
}

/// What a parenthesis brought.
pub(super) enum Parsed {
    Node(Node),
    /// `(?#...)`
    Comment,
    /// `(?i)` and the like, at the start.
    GlobalFlags,
}

// ---------------------------------------------------------------------------
// The parser: `re._parser._parse_sub`, `_parse`, `_escape`, `_class_escape`,
// `_parse_flags`, for str patterns.

pub(super) struct Parser {
    pub(super) src: Source,
    pub(super) global_flags: u32,
    pub(super) names: Vec<String>,
    pub(super) depth: usize,
}

impl Parser {
    pub(super) fn new(pattern: &str) -> Result<Parser, Error> {
        Ok(Parser {
            src: Source::new(pattern)?,
            global_flags: 0,
            names: Vec::new(),
            depth: 0,
        })
    }

    pub(super) fn parse(&mut self) -> Result<Vec<Node>, Error> {
        let tree = self.parse_sub(false, 0)?;
        if self.src.next().is_some() {
            return Err(self.src.error("unbalanced parenthesis", 0));
        }
        // `re._parser.fix_flags` for a str pattern.
        if self.global_flags & ASCII == 0 {
            self.global_flags |= UNICODE;
        } else if self.global_flags & UNICODE != 0 {
            return Err(syntax("ASCII and UNICODE flags are incompatible", 0));
        }
        Ok(tree)
    }

    pub(super) fn parse_sub(&mut self, verbose: bool, nested: usize) -> Result<Vec<Node>, Error> {
        let mut verbose = verbose;
        let mut items = Vec::new();
        loop {
            let first = nested == 0 && items.is_empty();
            items.push(self.parse_seq(verbose, nested + 1, first)?);
            if !self.src.eat('|') {
                break;
            }
            if nested == 0 {
                verbose = self.global_flags & VERBOSE != 0;
            }
        }
        if items.len() == 1 {
            return Ok(items.pop().unwrap_or_default());
        }
        // As CPython does (it matters: a set compares some characters
        // differently case-insensitively than a literal does), move an item
        // that every alternative starts with out in front...
        let mut seq = Vec::new();
        while let Some(prefix) = items[0].first() {
            if !items[1..]
                .iter()
                .all(|item| item.first().is_some_and(|first| same(first, prefix)))
            {
                break;
            }
            seq.push(prefix.clone());
            for item in &mut items {
                item.remove(0);
            }
        }
        // ...and make alternatives of single characters and sets one set.
        let mut set = Vec::new();
        let mergeable = items.iter().all(|item| match item.as_slice() {
            [Node::Lit(c)] => {
                set.push(Item::Lit(*c));
                true
            }
            [
                Node::In {
                    negate: false,
                    items,
                },
            ] => {
                set.extend_from_slice(items);
                true
            }
            _ => false,
        });
        if mergeable {
            seq.push(Node::In {
                negate: false,
                items: unique(set),
            });
        } else {
            seq.push(Node::Branch(items));
        }
        Ok(seq)
    }

    pub(super) fn enter(&mut self, offset: usize) -> Result<(), Error> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(unsupported(
                format!("nesting deeper than {MAX_NESTING} levels"),
                offset,
                "",
            ));
        }
        Ok(())
    }

    pub(super) fn parse_seq(
        &mut self,
        verbose: bool,
        nested: usize,
        first: bool,
    ) -> Result<Vec<Node>, Error> {
        let mut verbose = verbose;
        let mut seq: Vec<Node> = Vec::new();
        while let Some(this) = self.src.next() {
            if this.is('|') || this.is(')') {
                break;
            }
            let start = self.src.tell();
            self.src.get();

            if verbose {
                if this.char_in(WHITESPACE).is_some() {
                    continue;
                }
                if this.is('#') {
                    while let Some(t) = self.src.get() {
                        if t.is('\n') {
                            break;
                        }
                    }
                    continue;
                }
            }

            match this {
                Tok::Esc(c) => seq.push(self.escape(c, start)?),
                Tok::Char(c) if !SPECIAL_CHARS.contains(c) => seq.push(Node::Lit(c as u32)),
                Tok::Char('[') => seq.push(self.class(start)?),
                Tok::Char(c) if REPEAT_CHARS.contains(c) => {
                    self.repeat(c, start, &mut seq)?;
                }
                Tok::Char('.') => seq.push(Node::Any),
                Tok::Char('(') => match self.group(start, verbose, nested, first, &seq)? {
                    Parsed::Node(node) => seq.push(node),
                    Parsed::Comment => {}
                    // They may have turned on verbose.
                    Parsed::GlobalFlags => verbose = self.global_flags & VERBOSE != 0,
                },
                Tok::Char('^') => seq.push(Node::At(At::Beginning, start)),
                Tok::Char('$') => seq.push(Node::At(At::End, start)),
                Tok::Char(c) => {
                    return Err(syntax(
                        format!("unsupported special character {c:?}"),
                        start,
                    ));
                }
            }
        }
        // CPython unpacks non-capturing groups without flags.
        if seq.iter().any(Node::is_plain_group) {
            let mut flat = Vec::with_capacity(seq.len());
            for node in seq {
                match node {
                    Node::Group {
                        capture: false,
                        add: 0,
                        del: 0,
                        sub,
                    } => flat.extend(sub),
                    node => flat.push(node),
                }
            }
            seq = flat;
        }
        Ok(seq)
    }

    /// `(` was read at `start`.
    pub(super) fn group(
        &mut self,
        start: usize,
        verbose: bool,
        nested: usize,
        first: bool,
        seq: &[Node],
    ) -> Result<Parsed, Error> {
        let mut add = 0;
        let mut del = 0;
        let mut name = None;
        let mut capture = true;
        if self.src.eat('?') {
            capture = false;
            let Some(t) = self.src.get() else {
                return Err(self.src.error("unexpected end of pattern", 0));
            };
            match t {
                Tok::Char('P') => {
                    if self.src.eat('<') {
                        let n = self.src.get_until('>', "group name")?;
                        self.check_group_name(&n, 1)?;
                        name = Some(n);
                        capture = true;
                    } else if self.src.eat('=') {
                        let n = self.src.get_until(')', "group name")?;
                        self.check_group_name(&n, 1)?;
                        return Err(unsupported(
                            format!("backreference (?P={n})"),
                            start,
                            "the engine has no backreferences",
                        ));
                    } else {
                        let Some(c) = self.src.get() else {
                            return Err(self.src.error("unexpected end of pattern", 0));
                        };
                        return Err(self
                            .src
                            .error(format!("unknown extension ?P{c}"), c.width() + 2));
                    }
                }
                Tok::Char(':') => {}
                Tok::Char('#') => {
                    loop {
                        if self.src.next().is_none() {
                            return Err(syntax("missing ), unterminated comment", start));
                        }
                        if self.src.get() == Some(Tok::Char(')')) {
                            break;
                        }
                    }
                    return Ok(Parsed::Comment);
                }
                Tok::Char('=') => {
                    return Err(unsupported(
                        "lookahead (?=...)",
                        start,
                        "the engine has no look-around",
                    ));
                }
                Tok::Char('!') => {
                    return Err(unsupported(
                        "negative lookahead (?!...)",
                        start,
                        "the engine has no look-around",
                    ));
                }
                Tok::Char('<') => {
                    return match self.src.get() {
                        None => Err(self.src.error("unexpected end of pattern", 0)),
                        Some(Tok::Char('=')) => Err(unsupported(
                            "lookbehind (?<=...)",
                            start,
                            "the engine has no look-around",
                        )),
                        Some(Tok::Char('!')) => Err(unsupported(
                            "negative lookbehind (?<!...)",
                            start,
                            "the engine has no look-around",
                        )),
                        Some(c) => Err(syntax(
                            format!(
                                "unknown extension ?<{c} (a named group is written (?P<name>...) in Python)"
                            ),
                            start + 1,
                        )),
                    };
                }
                Tok::Char('(') => {
                    return Err(unsupported(
                        "conditional group (?(...)...)",
                        start,
                        "it depends on what a group matched",
                    ));
                }
                Tok::Char('>') => {
                    return Err(unsupported(
                        "atomic group (?>...)",
                        start,
                        "an automaton cannot give up backtracking positions",
                    ));
                }
                Tok::Char(c) if c == '-' || flag(c).is_some() => match self.flags(c, start)? {
                    None => {
                        if !first || !seq.is_empty() {
                            return Err(syntax(
                                "global flags not at the start of the expression",
                                start,
                            ));
                        }
                        return Ok(Parsed::GlobalFlags);
                    }
                    Some((a, d)) => {
                        add = a;
                        del = d;
                    }
                },
                other => {
                    return Err(self
                        .src
                        .error(format!("unknown extension ?{other}"), other.width() + 1));
                }
            }
        }
        if let Some(name) = name {
            if self.names.contains(&name) {
                return Err(syntax(
                    format!("redefinition of group name {name:?}"),
                    start,
                ));
            }
            self.names.push(name);
        }
        let sub_verbose = (verbose || add & VERBOSE != 0) && del & VERBOSE == 0;
        self.enter(start)?;
        let sub = self.parse_sub(sub_verbose, nested + 1)?;
        self.depth -= 1;
        if !self.src.eat(')') {
            return Err(syntax("missing ), unterminated subpattern", start));
        }
        Ok(Parsed::Node(Node::Group {
            capture,
            add,
            del,
            sub,
        }))
    }

    /// Group names must be identifiers. Python accepts any Unicode
    /// identifier; names do not matter here, so non-ASCII ones are refused
    /// rather than judged with tables we do not carry.
    pub(super) fn check_group_name(&self, name: &str, back: usize) -> Result<(), Error> {
        let offset = self.src.tell().saturating_sub(name.chars().count() + back);
        if !name.is_ascii() {
            return Err(unsupported(
                format!("non-ASCII group name {name:?}"),
                offset,
                "use an ASCII identifier",
            ));
        }
        let mut chars = name.chars();
        let ok = chars
            .next()
            .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
            && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
        if !ok {
            return Err(syntax(
                format!("bad character in group name {name:?}"),
                offset,
            ));
        }
        Ok(())
    }

    /// `_parse_flags`, after `(?` and its first character `c`. None for
    /// global flags `(?i)`, else the flags turned on and off.
    pub(super) fn flags(&mut self, c: char, start: usize) -> Result<Option<(u32, u32)>, Error> {
        let mut add = 0;
        let mut del = 0;
        let mut c = Tok::Char(c);
        if !c.is('-') {
            loop {
                let Tok::Char(ch) = c else { unreachable!() };
                let f = flag(ch).unwrap_or(0);
                if ch == 'L' {
                    return Err(unsupported(
                        "flag L (LOCALE)",
                        start,
                        "Python refuses it for str patterns",
                    ));
                }
                if ch == 't' {
                    return Err(unsupported("flag t (TEMPLATE)", start, ""));
                }
                add |= f;
                if f & TYPE_FLAGS != 0 && add & TYPE_FLAGS != f {
                    return Err(self.src.error(
                        "bad inline flags: flags 'a', 'u' and 'L' are incompatible",
                        0,
                    ));
                }
                let Some(next) = self.src.get() else {
                    return Err(self.src.error("missing -, : or )", 0));
                };
                c = next;
                if c.char_in(")-:").is_some() {
                    break;
                }
                match c {
                    Tok::Char(ch) if flag(ch).is_some() => {}
                    Tok::Char(ch) if ch.is_alphabetic() => {
                        return Err(self.src.error("unknown flag", 1));
                    }
                    _ => return Err(self.src.error("missing -, : or )", c.width())),
                }
            }
        }
        if c.is(')') {
            self.global_flags |= add;
            return Ok(None);
        }
        if c.is('-') {
            let Some(next) = self.src.get() else {
                return Err(self.src.error("missing flag", 0));
            };
            c = next;
            match c {
                Tok::Char(ch) if flag(ch).is_some() => {}
                Tok::Char(ch) if ch.is_alphabetic() => {
                    return Err(self.src.error("unknown flag", 1));
                }
                _ => return Err(self.src.error("missing flag", c.width())),
            }
            loop {
                let Tok::Char(ch) = c else { unreachable!() };
                let f = flag(ch).unwrap_or(0);
                if f & TYPE_FLAGS != 0 {
                    return Err(self.src.error(
                        "bad inline flags: cannot turn off flags 'a', 'u' and 'L'",
                        0,
                    ));
                }
                if f == TEMPLATE {
                    return Err(self
                        .src
                        .error("bad inline flags: cannot turn off global flag", 1));
                }
                del |= f;
                let Some(next) = self.src.get() else {
                    return Err(self.src.error("missing :", 0));
                };
                c = next;
                if c.is(':') {
                    break;
                }
                match c {
                    Tok::Char(ch) if flag(ch).is_some() => {}
                    Tok::Char(ch) if ch.is_alphabetic() => {
                        return Err(self.src.error("unknown flag", 1));
                    }
                    _ => return Err(self.src.error("missing :", c.width())),
                }
            }
        }
        if add & del != 0 {
            return Err(self
                .src
                .error("bad inline flags: flag turned on and off", 1));
        }
        Ok(Some((add, del)))
    }

    /// A repetition operator `c` read at `start`: replaces the last node.
    pub(super) fn repeat(
        &mut self,
        c: char,
        start: usize,
        seq: &mut Vec<Node>,
    ) -> Result<(), Error> {
        let here = self.src.i;
        let (min, max): (u64, Option<u64>) = match c {
            '?' => (0, Some(1)),
            '*' => (0, None),
            '+' => (1, None),
            _ => {
                // `{`: a repetition only in the forms {m}, {m,}, {,n}, {m,n}
                // and {,}; anything else is a literal `{`, as in Python.
                if self.src.next() == Some(Tok::Char('}')) {
                    seq.push(Node::Lit('{' as u32));
                    return Ok(());
                }
                let lo = self.src.get_while(usize::MAX, DIGITS);
                let hi = if self.src.eat(',') {
                    Some(self.src.get_while(usize::MAX, DIGITS))
                } else {
                    None
                };
                if !self.src.eat('}') {
                    seq.push(Node::Lit('{' as u32));
                    self.src.i = here;
                    return Ok(());
                }
                let count = |digits: &str| -> Result<u64, Error> {
                    match digits.parse::<u64>() {
                        Ok(n) if n < MAXREPEAT => Ok(n),
                        _ => Err(syntax("the repetition number is too large", start)),
                    }
                };
                let min = if lo.is_empty() { 0 } else { count(&lo)? };
                let max = match &hi {
                    None => Some(min),
                    Some(h) if h.is_empty() => None,
                    Some(h) => Some(count(h)?),
                };
                if max.is_some_and(|max| max < min) {
                    return Err(syntax("min repeat greater than max repeat", start));
                }
                (min, max)
            }
        };
        let item = match seq.pop() {
            None | Some(Node::At(..)) => return Err(syntax("nothing to repeat", start)),
            Some(Node::Repeat { .. }) => return Err(syntax("multiple repeat", start)),
            Some(item) => item,
        };
        let greedy = if self.src.eat('?') {
            false
        } else if self.src.eat('+') {
            let text = if c == '{' {
                "{m,n}+".to_string()
            } else {
                format!("{c}+")
            };
            return Err(unsupported(
                format!("possessive quantifier {text}"),
                start,
                "an automaton cannot give up backtracking positions",
            ));
        } else {
            true
        };
        // Counts are below MAXREPEAT, which fits in u32.
        let min = u32::try_from(min).unwrap_or(u32::MAX);
        let max = max.map(|m| u32::try_from(m).unwrap_or(u32::MAX));
        seq.push(Node::Repeat {
            min,
            max,
            greedy,
            sub: Box::new(item),
        });
        Ok(())
    }

    /// A character class; `[` was read at `start`.
    pub(super) fn class(&mut self, start: usize) -> Result<Node, Error> {
        if self.src.next() == Some(Tok::Char('[')) {
            return Err(unsupported(
                "'[' at the start of a character class",
                self.src.tell(),
                "Python reads it as a literal '[' and warns of a possible nested set \
                 (there are no POSIX classes such as [[:alpha:]]); write \\[",
            ));
        }
        let negate = self.src.eat('^');
        let mut set: Vec<Item> = Vec::new();
        loop {
            let at = self.src.tell();
            let Some(this) = self.src.get() else {
                return Err(syntax("unterminated character set", start));
            };
            if this.is(']') && !set.is_empty() {
                break;
            }
            let code1 = match this {
                Tok::Esc(c) => self.class_escape(c, at)?,
                Tok::Char(c) => {
                    if !set.is_empty() && "-&~|".contains(c) && self.src.next() == Some(this) {
                        return Err(unsupported(
                            format!("'{c}{c}' inside a character class"),
                            at,
                            format!(
                                "Python reads it literally but warns it may become a set operation; \
                                 this is not Rust's class syntax: write \\{c}\\{c}"
                            ),
                        ));
                    }
                    Item::Lit(c as u32)
                }
            };
            if self.src.eat('-') {
                let that_at = self.src.tell();
                let Some(that) = self.src.get() else {
                    return Err(syntax("unterminated character set", start));
                };
                if that.is(']') {
                    set.push(code1);
                    set.push(Item::Lit('-' as u32));
                    break;
                }
                let code2 = match that {
                    Tok::Esc(c) => self.class_escape(c, that_at)?,
                    Tok::Char('-') => {
                        return Err(unsupported(
                            "'--' inside a character class",
                            that_at - 1,
                            "Python reads it as a range but warns it may become a set difference; \
                             write \\-",
                        ));
                    }
                    Tok::Char(c) => Item::Lit(c as u32),
                };
                let (Item::Lit(lo), Item::Lit(hi)) = (code1, code2) else {
                    return Err(syntax(format!("bad character range {this}-{that}"), at));
                };
                if hi < lo {
                    return Err(syntax(format!("bad character range {this}-{that}"), at));
                }
                check_not_surrogate(lo, at)?;
                check_not_surrogate(hi, that_at)?;
                set.push(Item::Range(lo, hi));
            } else {
                set.push(code1);
            }
        }
        let unique = unique(set);
        Ok(match unique.as_slice() {
            [Item::Lit(c)] if negate => Node::NotLit(*c),
            [Item::Lit(c)] => Node::Lit(*c),
            _ => Node::In {
                negate,
                items: unique,
            },
        })
    }

    /// `\x`, `\u`, `\U`, `\N`: the value of a numeric escape after `c`.
    pub(super) fn numeric_escape(&mut self, c: char, at: usize) -> Result<Option<u32>, Error> {
        let digits = match c {
            'x' => 2,
            'u' => 4,
            'U' => 8,
            'N' => {
                return Err(unsupported(
                    "named character escape \\N{...}",
                    at,
                    "write the character itself or \\uXXXX",
                ));
            }
            _ => return Ok(None),
        };
        let hex = self.src.get_while(digits, HEXDIGITS);
        if hex.len() != digits {
            return Err(syntax(format!("incomplete escape \\{c}{hex}"), at));
        }
        let value = u32::from_str_radix(&hex, 16).unwrap_or(u32::MAX);
        if value > 0x10FFFF {
            return Err(syntax(format!("bad escape \\{c}{hex}"), at));
        }
        check_not_surrogate(value, at)?;
        Ok(Some(value))
    }

    /// `_escape`: an escape outside a class; `\` was at `at`.
    pub(super) fn escape(&mut self, c: char, at: usize) -> Result<Node, Error> {
        let category = |cat| Node::In {
            negate: false,
            items: vec![Item::Cat(cat)],
        };
        Ok(match c {
            'A' => Node::At(At::BeginningString, at),
            'b' => Node::At(At::Boundary, at),
            'B' => Node::At(At::NonBoundary, at),
            'd' => category(Category::Digit),
            'D' => category(Category::NotDigit),
            's' => category(Category::Space),
            'S' => category(Category::NotSpace),
            'w' => category(Category::Word),
            'W' => category(Category::NotWord),
            'Z' => Node::At(At::EndString, at),
            _ => {
                if let Some(v) = simple_escape(c) {
                    return Ok(Node::Lit(v));
                }
                if let Some(v) = self.numeric_escape(c, at)? {
                    return Ok(Node::Lit(v));
                }
                if c == '0' {
                    let oct = self.src.get_while(2, OCTDIGITS);
                    return Ok(Node::Lit(
                        u32::from_str_radix(&format!("0{oct}"), 8).unwrap_or(0),
                    ));
                }
                if c.is_ascii_digit() {
                    // An octal escape or a group reference (sigh, says CPython).
                    let mut text = c.to_string();
                    if let Some(d) = self.src.next().and_then(|t| t.char_in(DIGITS)) {
                        self.src.get();
                        text.push(d);
                        if OCTDIGITS.contains(c)
                            && OCTDIGITS.contains(d)
                            && let Some(d3) = self.src.next().and_then(|t| t.char_in(OCTDIGITS))
                        {
                            self.src.get();
                            text.push(d3);
                            let v = u32::from_str_radix(&text, 8).unwrap_or(u32::MAX);
                            if v > 0o377 {
                                return Err(syntax(
                                    format!("octal escape value \\{text} outside of range 0-0o377"),
                                    at,
                                ));
                            }
                            return Ok(Node::Lit(v));
                        }
                    }
                    return Err(unsupported(
                        format!("backreference \\{text}"),
                        at,
                        "the engine has no backreferences",
                    ));
                }
                if c == 'z' {
                    return Err(syntax(
                        "bad escape \\z (Python's re has no \\z before 3.14: write \\Z for the end of the output)",
                        at,
                    ));
                }
                if c.is_ascii_alphabetic() {
                    return Err(syntax(format!("bad escape \\{c}"), at));
                }
                Node::Lit(c as u32)
            }
        })
    }

    /// `_class_escape`: an escape inside a class; `\` was at `at`.
    pub(super) fn class_escape(&mut self, c: char, at: usize) -> Result<Item, Error> {
        if c == 'b' {
            return Ok(Item::Lit(0x08));
        }
        if let Some(v) = simple_escape(c) {
            return Ok(Item::Lit(v));
        }
        let cat = match c {
            'd' => Some(Category::Digit),
            'D' => Some(Category::NotDigit),
            's' => Some(Category::Space),
            'S' => Some(Category::NotSpace),
            'w' => Some(Category::Word),
            'W' => Some(Category::NotWord),
            _ => None,
        };
        if let Some(cat) = cat {
            return Ok(Item::Cat(cat));
        }
        if let Some(v) = self.numeric_escape(c, at)? {
            return Ok(Item::Lit(v));
        }
        if OCTDIGITS.contains(c) {
            let oct = format!("{c}{}", self.src.get_while(2, OCTDIGITS));
            let v = u32::from_str_radix(&oct, 8).unwrap_or(u32::MAX);
            if v > 0o377 {
                return Err(syntax(
                    format!("octal escape value \\{oct} outside of range 0-0o377"),
                    at,
                ));
            }
            return Ok(Item::Lit(v));
        }
        if c.is_ascii_digit() || c.is_ascii_alphabetic() {
            return Err(syntax(format!("bad escape \\{c}"), at));
        }
        Ok(Item::Lit(c as u32))
    }
}

/// The items of `set`, each once, in order (`re._parser._uniq`).
pub(super) fn unique(set: Vec<Item>) -> Vec<Item> {
    let mut seen = BTreeSet::new();
    set.into_iter().filter(|item| seen.insert(*item)).collect()
}

/// Whether CPython sees two items as equal when it looks for a prefix common
/// to all alternatives (groups and repetitions never are: it compares them
/// by identity).
pub(super) fn same(a: &Node, b: &Node) -> bool {
    match (a, b) {
        (Node::Lit(x), Node::Lit(y)) | (Node::NotLit(x), Node::NotLit(y)) => x == y,
        (
            Node::In {
                negate: n1,
                items: i1,
            },
            Node::In {
                negate: n2,
                items: i2,
            },
        ) => n1 == n2 && i1 == i2,
        (Node::Any, Node::Any) => true,
        (Node::At(x, _), Node::At(y, _)) => x == y,
        _ => false,
    }
}

/// `\a \f \n \r \t \v \\` (`\b` is handled by the caller: it differs inside
/// and outside classes).
pub(super) fn simple_escape(c: char) -> Option<u32> {
    Some(match c {
        'a' => 0x07,
        'f' => 0x0c,
        'n' => 0x0a,
        'r' => 0x0d,
        't' => 0x09,
        'v' => 0x0b,
        '\\' => 0x5c,
        _ => return None,
    })
}

pub(super) fn check_not_surrogate(c: u32, at: usize) -> Result<(), Error> {
    if (0xD800..0xE000).contains(&c) {
        return Err(unsupported(
            format!("surrogate code point U+{c:04X}"),
            at,
            "output decoded from UTF-8 never contains one",
        ));
    }
    Ok(())
}
