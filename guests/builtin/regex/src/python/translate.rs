//! The parse tree translated into the engine's HIR with Python's meaning.

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Dot, Hir, Look, Repetition};

use super::parse::*;
use super::*;

// ---------------------------------------------------------------------------
// Translation into HIR, following `re._compiler` and `_sre`.

/// How characters are compared: exactly, or case-insensitively with ASCII
/// rules (flags `ai`) or Unicode rules (flag `i`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fold {
    Exact,
    Ascii,
    Unicode,
}

/// Pairs of code points, sorted by the first.
type Table = &'static [(u32, u32)];

pub(super) const ASCII_LOWER: [(u32, u32); 26] = {
    let mut table = [(0, 0); 26];
    let mut i = 0;
    while i < 26 {
        table[i] = (b'A' as u32 + i as u32, b'a' as u32 + i as u32);
        i += 1;
    }
    table
};

pub(super) const ASCII_LOWER_INVERSE: [(u32, u32); 26] = {
    let mut table = [(0, 0); 26];
    let mut i = 0;
    while i < 26 {
        table[i] = (ASCII_LOWER[i].1, ASCII_LOWER[i].0);
        i += 1;
    }
    table
};

impl Fold {
    pub(super) fn of(flags: u32) -> Fold {
        if flags & IGNORECASE == 0 {
            Fold::Exact
        } else if flags & UNICODE != 0 {
            Fold::Unicode
        } else {
            Fold::Ascii
        }
    }

    /// `(c, lower(c))` wherever lower-casing changes `c`, sorted.
    pub(super) fn lower_table(self) -> &'static [(u32, u32)] {
        self.lower_tables().0
    }

    /// The lower-case table, and the same as `(lower(c), c)`, sorted.
    pub(super) fn lower_tables(self) -> (Table, Table) {
        match self {
            Fold::Exact => (&[], &[]),
            Fold::Ascii => (&ASCII_LOWER, &ASCII_LOWER_INVERSE),
            Fold::Unicode => (tables::LOWER, tables::LOWER_INVERSE),
        }
    }

    pub(super) fn lower(self, c: u32) -> u32 {
        lookup(self.lower_table(), c)
    }

    pub(super) fn is_cased(self, c: u32) -> bool {
        match self {
            Fold::Exact => false,
            Fold::Ascii => (c as u8 as u32 == c) && (c as u8).is_ascii_alphabetic(),
            Fold::Unicode => lookup(tables::LOWER, c) != c || lookup(tables::UPPER, c) != c,
        }
    }

    /// Whether any character of `lo..=hi` is cased.
    pub(super) fn any_cased(self, lo: u32, hi: u32) -> bool {
        let any_key = |table: &[(u32, u32)]| {
            let i = table.partition_point(|e| e.0 < lo);
            table.get(i).is_some_and(|e| e.0 <= hi)
        };
        match self {
            Fold::Exact => false,
            Fold::Ascii => (lo <= 0x5A && hi >= 0x41) || (lo <= 0x7A && hi >= 0x61),
            Fold::Unicode => any_key(tables::LOWER) || any_key(tables::UPPER),
        }
    }

    /// `re._casefix._EXTRA_CASES[lo]` (Unicode rules only).
    pub(super) fn fixes(self, lo: u32) -> &'static [u32] {
        if self != Fold::Unicode {
            return &[];
        }
        match tables::EXTRA_CASES.binary_search_by_key(&lo, |e| e.0) {
            Ok(i) => tables::EXTRA_CASES[i].1,
            Err(_) => &[],
        }
    }
}

pub(super) fn lookup(table: &[(u32, u32)], c: u32) -> u32 {
    match table.binary_search_by_key(&c, |e| e.0) {
        Ok(i) => table[i].1,
        Err(_) => c,
    }
}

pub(super) fn in_table(table: &[(u32, u32)], c: u32) -> bool {
    let i = table.partition_point(|r| r.1 < c);
    table.get(i).is_some_and(|r| r.0 <= c)
}

pub(super) fn contains(class: &ClassUnicode, c: u32) -> bool {
    let ranges = class.ranges();
    let i = ranges.partition_point(|r| (r.end() as u32) < c);
    ranges.get(i).is_some_and(|r| r.start() as u32 <= c)
}

/// A class of code points `lo..=hi`, without surrogates (empty if none left).
pub(super) fn range(lo: u32, hi: u32) -> Option<ClassUnicodeRange> {
    let lo = if (0xD800..0xE000).contains(&lo) {
        0xE000
    } else {
        lo
    };
    let hi = if (0xD800..0xE000).contains(&hi) {
        0xD7FF
    } else {
        hi
    };
    if lo > hi {
        return None;
    }
    Some(ClassUnicodeRange::new(
        char::from_u32(lo)?,
        char::from_u32(hi)?,
    ))
}

pub(super) fn class_of(ranges: impl IntoIterator<Item = (u32, u32)>) -> ClassUnicode {
    ClassUnicode::new(ranges.into_iter().filter_map(|(lo, hi)| range(lo, hi)))
}

pub(super) fn category(cat: Category, unicode: bool) -> ClassUnicode {
    let (table, negate): (&[(u32, u32)], bool) = match (cat, unicode) {
        (Category::Digit, true) => (tables::DIGIT, false),
        (Category::NotDigit, true) => (tables::DIGIT, true),
        (Category::Space, true) => (tables::SPACE, false),
        (Category::NotSpace, true) => (tables::SPACE, true),
        (Category::Word, true) => (tables::WORD, false),
        (Category::NotWord, true) => (tables::WORD, true),
        (Category::Digit, false) => (&[(0x30, 0x39)], false),
        (Category::NotDigit, false) => (&[(0x30, 0x39)], true),
        (Category::Space, false) => (&[(0x09, 0x0D), (0x20, 0x20)], false),
        (Category::NotSpace, false) => (&[(0x09, 0x0D), (0x20, 0x20)], true),
        (Category::Word, false) => (
            &[(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
            false,
        ),
        (Category::NotWord, false) => (
            &[(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
            true,
        ),
    };
    let mut class = class_of(table.iter().copied());
    if negate {
        class.negate();
    }
    class
}

pub(super) struct Translator {
    pub(super) full_match: bool,
    pub(super) empty_text: bool,
    pub(super) unicode_word_boundary: bool,
    pub(super) non_boundary: bool,
}

impl Translator {
    /// A concatenation; `tail` when nothing can follow it in a match.
    pub(super) fn seq(&mut self, nodes: &[Node], flags: u32, tail: bool) -> Result<Hir, Error> {
        let mut out = Vec::with_capacity(nodes.len());
        for (i, node) in nodes.iter().enumerate() {
            let node_tail = tail && nodes[i + 1..].iter().all(Node::is_transparent);
            out.push(self.node(node, flags, node_tail)?);
        }
        Ok(Hir::concat(out))
    }

    pub(super) fn node(&mut self, node: &Node, flags: u32, tail: bool) -> Result<Hir, Error> {
        Ok(match node {
            Node::Lit(c) => {
                let fold = Fold::of(flags);
                if fold == Fold::Exact || !fold.is_cased(*c) {
                    let c = char::from_u32(*c).unwrap_or(char::REPLACEMENT_CHARACTER);
                    Hir::literal(c.encode_utf8(&mut [0; 4]).as_bytes())
                } else {
                    Hir::class(Class::Unicode(self.literal_class(*c, fold)))
                }
            }
            Node::NotLit(c) => {
                let fold = Fold::of(flags);
                let mut class = if fold == Fold::Exact || !fold.is_cased(*c) {
                    class_of([(*c, *c)])
                } else {
                    self.literal_class(*c, fold)
                };
                class.negate();
                Hir::class(Class::Unicode(class))
            }
            Node::In { negate, items } => {
                let mut class = self.charset(items, flags);
                if *negate {
                    class.negate();
                }
                Hir::class(Class::Unicode(class))
            }
            Node::Any => Hir::dot(if flags & DOTALL != 0 {
                Dot::AnyChar
            } else {
                Dot::AnyCharExceptLF
            }),
            Node::At(at, offset) => self.at(*at, *offset, flags, tail)?,
            Node::Repeat {
                min,
                max,
                greedy,
                sub,
            } => {
                let sub_tail = (tail && max.is_some_and(|m| m <= 1)) || *max == Some(0);
                Hir::repetition(Repetition {
                    min: *min,
                    max: *max,
                    greedy: *greedy,
                    sub: Box::new(self.node(sub, flags, sub_tail)?),
                })
            }
            Node::Group { add, del, sub, .. } => {
                // `re._compiler._combine_flags`.
                let mut inner = flags;
                if add & TYPE_FLAGS != 0 {
                    inner &= !TYPE_FLAGS;
                }
                inner = (inner | add) & !del;
                self.seq(sub, inner, tail)?
            }
            Node::Branch(branches) => {
                let mut subs = Vec::with_capacity(branches.len());
                for branch in branches {
                    subs.push(self.seq(branch, flags, tail)?);
                }
                Hir::alternation(subs)
            }
        })
    }

    pub(super) fn at(
        &mut self,
        at: At,
        offset: usize,
        flags: u32,
        tail: bool,
    ) -> Result<Hir, Error> {
        let multiline = flags & MULTILINE != 0;
        let unicode = flags & UNICODE != 0;
        Ok(match at {
            At::Beginning if multiline => Hir::look(Look::StartLF),
            At::Beginning | At::BeginningString => Hir::look(Look::Start),
            At::End if multiline => Hir::look(Look::EndLF),
            At::End if tail && self.full_match => Hir::look(Look::End),
            At::End if tail => Hir::concat(vec![
                Hir::repetition(Repetition {
                    min: 0,
                    max: Some(1),
                    greedy: true,
                    sub: Box::new(Hir::literal(*b"\n")),
                }),
                Hir::look(Look::End),
            ]),
            At::End => {
                return Err(unsupported(
                    "'$' followed by more pattern",
                    offset,
                    "without MULTILINE, Python's $ matches at the end of the output or before \
                     a newline that ends it, a look-ahead the engine cannot express in the middle \
                     of a pattern: write \\n?\\Z, or use (?m) for the end of any line",
                ));
            }
            At::EndString => Hir::look(Look::End),
            At::Boundary => {
                self.unicode_word_boundary |= unicode;
                Hir::look(if unicode {
                    Look::WordUnicode
                } else {
                    Look::WordAscii
                })
            }
            At::NonBoundary => {
                self.unicode_word_boundary |= unicode;
                self.non_boundary = true;
                if self.empty_text {
                    Hir::fail()
                } else {
                    Hir::look(if unicode {
                        Look::WordUnicodeNegate
                    } else {
                        Look::WordAsciiNegate
                    })
                }
            }
        })
    }

    /// The characters a cased literal `c` matches case-insensitively:
    /// `lower(t)` is `lower(c)` or one of its extra cases.
    pub(super) fn literal_class(&mut self, c: u32, fold: Fold) -> ClassUnicode {
        let lo = fold.lower(c);
        let mut targets = vec![(lo, lo)];
        targets.extend(fold.fixes(lo).iter().map(|&k| (k, k)));
        self.lower_preimage(&class_of(targets), fold)
    }

    /// `{t : lower(t) in set}`: the set, without what lower-cases to
    /// something outside it, with what lower-cases into it.
    pub(super) fn lower_preimage(&mut self, set: &ClassUnicode, fold: Fold) -> ClassUnicode {
        let (table, inverse) = fold.lower_tables();
        let mut removed = Vec::new();
        let mut added = Vec::new();
        for r in set.ranges() {
            let (lo, hi) = (r.start() as u32, r.end() as u32);
            let start = table.partition_point(|e| e.0 < lo);
            for &(c, l) in table[start..].iter().take_while(|e| e.0 <= hi) {
                if !contains(set, l) {
                    removed.push((c, c));
                }
            }
            let start = inverse.partition_point(|e| e.0 < lo);
            for &(_, c) in inverse[start..].iter().take_while(|e| e.0 <= hi) {
                added.push((c, c));
            }
        }
        let mut out = set.clone();
        out.difference(&class_of(removed));
        out.union(&class_of(added));
        out
    }

    /// `{lower(c) : lo <= c <= hi}` for a range inside the BMP.
    pub(super) fn lower_image(&mut self, lo: u32, hi: u32, fold: Fold) -> ClassUnicode {
        let table = fold.lower_table();
        let mut out = class_of([(lo, hi)]);
        let start = table.partition_point(|e| e.0 < lo);
        let changed = table[start..].iter().take_while(|e| e.0 <= hi);
        out.difference(&class_of(changed.clone().map(|&(c, _)| (c, c))));
        out.union(&class_of(changed.map(|&(_, l)| (l, l))));
        out
    }

    /// The characters a class (without its negation) matches:
    /// `re._compiler._optimize_charset` and `_sre`'s `charset()`.
    pub(super) fn charset(&mut self, items: &[Item], flags: u32) -> ClassUnicode {
        let fold = Fold::of(flags);
        let unicode = flags & UNICODE != 0;
        // What `_sre` compares the (lower-cased, if folding) text character
        // with, and the categories, which lower-casing does not affect.
        let mut map: Vec<(u32, u32)> = Vec::with_capacity(items.len());
        let mut categories = ClassUnicode::empty();
        let mut upper_ranges = Vec::new();
        let mut has_cased = false;
        for item in items {
            match *item {
                Item::Cat(cat) => categories.union(&category(cat, unicode)),
                Item::Lit(c) if fold == Fold::Exact => map.push((c, c)),
                Item::Range(lo, hi) if fold == Fold::Exact => map.push((lo, hi)),
                Item::Lit(c) => {
                    let lo = fold.lower(c);
                    if lo > 0xFFFF {
                        // Beyond CPython's charmap: kept as is, compared
                        // with the lower-cased text character.
                        map.push((c, c));
                        has_cased = true;
                    } else {
                        map.push((lo, lo));
                        map.extend(fold.fixes(lo).iter().map(|&k| (k, k)));
                        has_cased |= fold.is_cased(c);
                    }
                }
                Item::Range(lo, hi) => {
                    if lo <= 0xFFFF {
                        let image = self.lower_image(lo, hi.min(0xFFFF), fold);
                        map.extend(
                            tables::EXTRA_CASES
                                .iter()
                                .filter(|e| fold == Fold::Unicode && contains(&image, e.0))
                                .flat_map(|e| e.1.iter().map(|&k| (k, k))),
                        );
                        map.extend(
                            image
                                .ranges()
                                .iter()
                                .map(|r| (r.start() as u32, r.end() as u32)),
                        );
                    }
                    if hi > 0xFFFF {
                        // RANGE_UNI_IGNORE: the lower-cased text character,
                        // or its upper case, in the range.
                        map.push((lo, hi));
                        upper_ranges.push((lo, hi));
                        has_cased = true;
                    } else {
                        has_cased |= fold.any_cased(lo, hi);
                    }
                }
            }
        }
        let mut map = class_of(map);
        if fold == Fold::Exact || !has_cased {
            map.union(&categories);
            return map;
        }
        let uppers = tables::UPPER
            .iter()
            .filter(|&&(_, u)| upper_ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&u)))
            .map(|&(c, _)| (c, c));
        map.union(&class_of(uppers));
        let mut out = self.lower_preimage(&map, fold);
        out.union(&categories);
        out
    }
}
