//! Truth tables of the built-in comparators, complete, truncated and non-UTF-8.

use progscore_comparator_host::ComparisonOutcome;

use crate::{host, letter, run, run_truncated};

/// One row: comparator, params, kept output, `Some(total)` when truncated,
/// expected outcome letter (M match, X mismatch, U undetermined).
type Row<'a> = (&'a str, &'a str, &'a [u8], Option<u64>, char);

fn check(rows: &[Row<'_>]) {
    let mut failures = Vec::new();
    for (i, (name, params, output, total, want)) in rows.iter().enumerate() {
        let outcome = match total {
            None => run(name, params, output),
            Some(total) => run_truncated(name, params, output, *total),
        };
        if letter(&outcome) != *want {
            failures.push(format!(
                "row {i}: {name} {params} on {} (total {total:?}): want {want}, got {outcome:?}",
                shown(output)
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// An output for a failure message: whole when short, else its length and end.
fn shown(output: &[u8]) -> String {
    const TAIL: usize = 60;
    if output.len() <= TAIL {
        return format!("{:?}", String::from_utf8_lossy(output));
    }
    let tail = &output[output.len() - TAIL..];
    format!(
        "{} bytes ending {:?}",
        output.len(),
        String::from_utf8_lossy(tail)
    )
}

#[test]
fn equals_truth_table() {
    check(&[
        ("equals", r#"{"value":"9"}"#, b"9\n", None, 'M'),
        ("equals", r#"{"value":"9"}"#, b"  9  \r\n", None, 'M'),
        ("equals", r#"{"value":"9"}"#, b"10\n", None, 'X'),
        ("equals", r#"{"value":"9","trim":false}"#, b"9\n", None, 'X'),
        (
            "equals",
            r#"{"value":"9\n","trim":false}"#,
            b"9\n",
            None,
            'M',
        ),
        (
            "equals",
            r#"{"value":"Hello","ignore_case":true}"#,
            b"hELLO",
            None,
            'M',
        ),
        (
            "equals",
            r#"{"value":"ÉTÉ","ignore_case":true}"#,
            "été".as_bytes(),
            None,
            'M',
        ),
        ("equals", r#"{"value":"Hello"}"#, b"hello", None, 'X'),
        (
            "equals",
            r#"{"value":"a\nb","normalize_newlines":true}"#,
            b"a\r\nb\r\n",
            None,
            'M',
        ),
        ("equals", r#"{"value":"a\nb"}"#, b"a\r\nb", None, 'X'),
        // Non-UTF-8 output is compared as bytes: never equal to UTF-8 text.
        ("equals", r#"{"value":"9"}"#, b"\xff9", None, 'X'),
        ("equals", r#"{"value":"caf\u00e9"}"#, b"caf\xe9", None, 'X'),
        // Truncated: the kept part departs from the value: proven mismatch.
        ("equals", r#"{"value":"9"}"#, b"10", Some(5000), 'X'),
        (
            "equals",
            r#"{"value":"hello world"}"#,
            b"help",
            Some(5000),
            'X',
        ),
        // Truncated but agreeing so far: undetermined, never match.
        (
            "equals",
            r#"{"value":"hello world"}"#,
            b"hello",
            Some(11),
            'U',
        ),
        ("equals", r#"{"value":"9"}"#, b"9", Some(2), 'U'),
        ("equals", r#"{"value":"9"}"#, b"  ", Some(9), 'U'),
        // Without normalisation the total length alone proves a mismatch.
        (
            "equals",
            r#"{"value":"hello world","trim":false}"#,
            b"hello",
            Some(20),
            'X',
        ),
        (
            "equals",
            r#"{"value":"hello world","trim":false}"#,
            b"hello",
            Some(11),
            'U',
        ),
        // A character cut in two by truncation proves nothing.
        (
            "equals",
            r#"{"value":"é!","ignore_case":true}"#,
            &[0xc3],
            Some(3),
            'U',
        ),
        (
            "equals",
            r#"{"value":"a\nb","normalize_newlines":true}"#,
            b"a\r",
            Some(5),
            'U',
        ),
    ]);
}

#[test]
fn contains_truth_table() {
    check(&[
        ("contains", r#"{"value":"ok"}"#, b"all ok\n", None, 'M'),
        ("contains", r#"{"value":"ok"}"#, b"all fine\n", None, 'X'),
        (
            "contains",
            r#"{"value":"OK","ignore_case":true}"#,
            b"all ok\n",
            None,
            'M',
        ),
        (
            "contains",
            r#"{"value":"ok"}"#,
            b"\xff\xfeok\xff",
            None,
            'M',
        ),
        ("contains", r#"{"value":"ok"}"#, b"\xff\xfe\xff", None, 'X'),
        // Found in the kept part: a match whatever was cut.
        (
            "contains",
            r#"{"value":"ok"}"#,
            b"ok and then",
            Some(1 << 20),
            'M',
        ),
        // Not found yet: it may be in the cut part.
        (
            "contains",
            r#"{"value":"ok"}"#,
            b"still running",
            Some(1 << 20),
            'U',
        ),
        ("contains", r#"{"value":"ok"}"#, b"o", Some(2), 'U'),
    ]);
}

/// The `regex` built-in follows Python's `re`: every expected letter of the
/// complete-output rows below was checked against CPython 3.11's
/// `re.search` (`re.fullmatch` for `full_match`).
#[test]
fn regex_truth_table() {
    check(&[
        ("regex", r#"{"value":"^ok"}"#, b"ok\n", None, 'M'),
        ("regex", r#"{"value":"^ok"}"#, b"not ok\n", None, 'X'),
        (
            "regex",
            r#"{"value":"\\d+ apples"}"#,
            b"I have 12 apples",
            None,
            'M',
        ),
        (
            "regex",
            r#"{"value":"\\d+","full_match":true}"#,
            b"123",
            None,
            'M',
        ),
        (
            "regex",
            r#"{"value":"\\d+","full_match":true}"#,
            b"123\n",
            None,
            'X',
        ),
        (
            "regex",
            r#"{"value":"\\d+\\s*","full_match":true}"#,
            b"123\n",
            None,
            'M',
        ),
        // Non-UTF-8: the valid parts match as text; an invalid byte is
        // matched by nothing, not even `.` (and `\xff` is U+00FF, `ÿ`).
        ("regex", r#"{"value":"ok"}"#, b"\xff\xfeok", None, 'M'),
        ("regex", r#"{"value":"^.ok$"}"#, b"\xffok", None, 'X'),
        ("regex", r#"{"value":"[^a]ok"}"#, b"\xffok", None, 'X'),
        ("regex", r#"{"value":"\\xffok"}"#, b"\xffok", None, 'X'),
        (
            "regex",
            r#"{"value":"\\xffok"}"#,
            "ÿok".as_bytes(),
            None,
            'M',
        ),
        ("regex", r#"{"value":"^ok$"}"#, b"ok\n\xff", None, 'X'),
        // Truncated: a match that cannot depend on what follows is proven.
        (
            "regex",
            r#"{"value":"^ok"}"#,
            b"ok, and more",
            Some(1 << 20),
            'M',
        ),
        ("regex", r#"{"value":"\\d+"}"#, b"x 12", Some(1 << 20), 'M'),
        // `$` and `\b` look past the match: only a match before the end counts.
        ("regex", r#"{"value":"ok$"}"#, b"ok", Some(1 << 20), 'U'),
        (
            "regex",
            r#"{"value":"(?m)ok$"}"#,
            b"ok\nmore",
            Some(1 << 20),
            'M',
        ),
        ("regex", r#"{"value":"\\bcat\\b"}"#, b"cat", Some(10), 'U'),
        (
            "regex",
            r#"{"value":"\\bcat\\b"}"#,
            b"a cat sat",
            Some(100),
            'M',
        ),
        // No continuation can match: proven mismatch.
        (
            "regex",
            r#"{"value":"^ok"}"#,
            b"error: boom",
            Some(1 << 20),
            'X',
        ),
        (
            "regex",
            r#"{"value":"\\d+","full_match":true}"#,
            b"12a",
            Some(10),
            'X',
        ),
        // Could still match later, or fully: undetermined.
        (
            "regex",
            r#"{"value":"ok"}"#,
            b"still running",
            Some(1 << 20),
            'U',
        ),
        (
            "regex",
            r#"{"value":"\\d+","full_match":true}"#,
            b"123",
            Some(10),
            'U',
        ),
    ]);
}

/// Python semantics, row by row; every expected letter was checked against
/// CPython 3.11's `re` (`python3 -c 'import re; print(re.search(p, s))'`).
#[test]
fn regex_follows_python_re() {
    check(&[
        // Python's `$` without MULTILINE: the end, or before a newline that
        // ends the output. A full match must still reach the very end.
        ("regex", r#"{"value":"^[0-9]+$"}"#, b"123\n", None, 'M'),
        ("regex", r#"{"value":"^[0-9]+$"}"#, b"123", None, 'M'),
        ("regex", r#"{"value":"^[0-9]+$"}"#, b"123\n\n", None, 'X'),
        ("regex", r#"{"value":"^[0-9]+$"}"#, b"123\nx", None, 'X'),
        ("regex", r#"{"value":"^[0-9]+$"}"#, b"12a\n", None, 'X'),
        (
            "regex",
            r#"{"value":"^[0-9]+$","full_match":true}"#,
            b"123\n",
            None,
            'X',
        ),
        (
            "regex",
            r#"{"value":"^[0-9]+$","full_match":true}"#,
            b"123",
            None,
            'M',
        ),
        (
            "regex",
            r#"{"value":"[0-9]+$","full_match":true}"#,
            b"123",
            None,
            'M',
        ),
        ("regex", r#"{"value":"^$"}"#, b"", None, 'M'),
        ("regex", r#"{"value":"^$"}"#, b"\n", None, 'M'),
        (
            "regex",
            r#"{"value":"^$","full_match":true}"#,
            b"\n",
            None,
            'X',
        ),
        ("regex", r#"{"value":"done$"}"#, b"all done\n", None, 'M'),
        ("regex", r#"{"value":"(?:ok|fine)$"}"#, b"fine\n", None, 'M'),
        ("regex", r#"{"value":"^(?:a$|b)"}"#, b"a\n", None, 'M'),
        ("regex", r#"{"value":"^(?:a$|b)"}"#, b"a\nb", None, 'X'),
        ("regex", r#"{"value":"^x(?:y$)?"}"#, b"xy\n", None, 'M'),
        ("regex", r#"{"value":"^x(y$|z)"}"#, b"xy\nq", None, 'X'),
        ("regex", r#"{"value":"(?-m:ok$)"}"#, b"ok\n", None, 'M'),
        // `\Z` is the very end only.
        ("regex", r#"{"value":"^[0-9]+\\Z"}"#, b"123\n", None, 'X'),
        ("regex", r#"{"value":"^[0-9]+\\Z"}"#, b"123", None, 'M'),
        ("regex", r#"{"value":"\\d+\\n\\Z"}"#, b"12\n", None, 'M'),
        // MULTILINE `^` and `$`: at every line, the same in both engines.
        ("regex", r#"{"value":"(?m)^b$"}"#, b"a\nb\nc", None, 'M'),
        ("regex", r#"{"value":"(?m)a$"}"#, b"a\nb", None, 'M'),
        ("regex", r#"{"value":"a$"}"#, b"a\nb", None, 'X'),
        ("regex", r#"{"value":"(?m)^$"}"#, b"a\n", None, 'M'),
        ("regex", r#"{"value":"(?m)^c"}"#, b"a\nb\nc", None, 'M'),
        ("regex", r#"{"value":"^c"}"#, b"a\nb\nc", None, 'X'),
        ("regex", r#"{"value":"(?m:^b$)"}"#, b"a\nb\nc", None, 'M'),
        (
            "regex",
            r#"{"value":"(?m)^b$","full_match":true}"#,
            b"a\nb\nc",
            None,
            'X',
        ),
        // Python's classes and case rules, not the engine's: `²` is a word
        // character, `\x1c` a space; `İ` and `ı` match `i` case-insensitively
        // (not under ASCII rules); `ß` does not match `SS`.
        (
            "regex",
            r#"{"value":"^\\w+$"}"#,
            "héllo\n".as_bytes(),
            None,
            'M',
        ),
        ("regex", r#"{"value":"^\\w$"}"#, "²".as_bytes(), None, 'M'),
        ("regex", r#"{"value":"^\\s$"}"#, b"\x1c", None, 'M'),
        (
            "regex",
            r#"{"value":"(?a)^\\w+$"}"#,
            "héllo".as_bytes(),
            None,
            'X',
        ),
        ("regex", r#"{"value":"(?a)^\\w+$"}"#, b"hello", None, 'M'),
        ("regex", r#"{"value":"^\\d+$"}"#, "٣٤".as_bytes(), None, 'M'),
        (
            "regex",
            r#"{"value":"(?a)^\\d+$"}"#,
            "٣٤".as_bytes(),
            None,
            'X',
        ),
        ("regex", r#"{"value":"(?i)^i$"}"#, "İ".as_bytes(), None, 'M'),
        ("regex", r#"{"value":"(?i)^i$"}"#, "ı".as_bytes(), None, 'M'),
        (
            "regex",
            r#"{"value":"(?ai)^i$"}"#,
            "ı".as_bytes(),
            None,
            'X',
        ),
        ("regex", r#"{"value":"(?i)^k$"}"#, "K".as_bytes(), None, 'M'),
        ("regex", r#"{"value":"(?i)straße"}"#, b"STRASSE", None, 'X'),
        (
            "regex",
            r#"{"value":"(?i)stra(?-i:ß)e"}"#,
            "STRAßE".as_bytes(),
            None,
            'M',
        ),
        ("regex", r#"{"value":"(?s)a.b"}"#, b"a\nb", None, 'M'),
        ("regex", r#"{"value":"a.b"}"#, b"a\nb", None, 'X'),
        // Python's syntax: `{` is a literal unless it is a repetition (even
        // `\d{1, 3}`), `{,n}` is `{0,n}`, verbose mode keeps spaces in classes,
        // octal escapes, `\xff` is U+00FF, `[\b]` a backspace, `\<` a `<`.
        ("regex", r#"{"value":"a{b"}"#, b"a{b", None, 'M'),
        ("regex", r#"{"value":"x{}"}"#, b"x{}", None, 'M'),
        ("regex", r#"{"value":"^x{,2}$"}"#, b"xx", None, 'M'),
        ("regex", r#"{"value":"^x{,2}$"}"#, b"xxx", None, 'X'),
        ("regex", r#"{"value":"\\d{1, 3}"}"#, b"1{1, 3}", None, 'M'),
        (
            "regex",
            r#"{"value":"(?x) ^ \\d+ \\s* $  # digits"}"#,
            b"42\n",
            None,
            'M',
        ),
        ("regex", r#"{"value":"(?x)[ ]"}"#, b"a b", None, 'M'),
        (
            "regex",
            r#"{"value":"\\101\\x42\\u0043\\U00000044"}"#,
            b"ABCD",
            None,
            'M',
        ),
        ("regex", r#"{"value":"(?#a comment)ok"}"#, b"ok", None, 'M'),
        ("regex", r#"{"value":"(?P<word>ok)"}"#, b"ok", None, 'M'),
        ("regex", r#"{"value":"\\xff"}"#, "ÿ".as_bytes(), None, 'M'),
        ("regex", r#"{"value":"[\\b]"}"#, b"\x08", None, 'M'),
        ("regex", r#"{"value":"\\<x\\>"}"#, b"<x>", None, 'M'),
        // Word boundaries. `\B` never matches in an empty string in CPython 3.11.
        ("regex", r#"{"value":"\\bcat\\b"}"#, b"a cat sat", None, 'M'),
        ("regex", r#"{"value":"\\bcat\\b"}"#, b"concat", None, 'X'),
        (
            "regex",
            r#"{"value":"(?a)\\bx\\b"}"#,
            "x²".as_bytes(),
            None,
            'M',
        ),
        ("regex", r#"{"value":"\\B"}"#, b"", None, 'X'),
        ("regex", r#"{"value":"\\b"}"#, b"", None, 'X'),
        ("regex", r#"{"value":"\\B"}"#, b"ab", None, 'M'),
    ]);
}

/// A truncated output's kept part never ends the output: the translated `$`
/// (an optional final newline, then the end) and `\Z` only match at the end
/// of the kept part, which proves nothing.
#[test]
fn regex_truncated_dollar_is_not_the_end() {
    check(&[
        // In full, `123\n` would match; `123\n4...` would not: undetermined.
        ("regex", r#"{"value":"^[0-9]+$"}"#, b"123\n", Some(100), 'U'),
        ("regex", r#"{"value":"^[0-9]+$"}"#, b"123", Some(100), 'U'),
        ("regex", r#"{"value":"ok$"}"#, b"ok\n", Some(100), 'U'),
        ("regex", r#"{"value":"done\\Z"}"#, b"done", Some(100), 'U'),
        (
            "regex",
            r#"{"value":"^[0-9]+$","full_match":true}"#,
            b"123",
            Some(100),
            'U',
        ),
        // What is kept already rules a match out: proven mismatch.
        ("regex", r#"{"value":"^[0-9]+$"}"#, b"12a", Some(100), 'X'),
        (
            "regex",
            r#"{"value":"^[0-9]+$"}"#,
            b"123\n4",
            Some(100),
            'X',
        ),
        (
            "regex",
            r#"{"value":"^[0-9]+\\Z"}"#,
            b"123\n",
            Some(100),
            'X',
        ),
        (
            "regex",
            r#"{"value":"^[0-9]+$","full_match":true}"#,
            b"123\n",
            Some(100),
            'X',
        ),
        // A match that ends before the kept part does is proven: MULTILINE
        // `$` sees the newline after it.
        (
            "regex",
            r#"{"value":"(?m)^[0-9]+$"}"#,
            b"123\nabc",
            Some(100),
            'M',
        ),
        // ...but a non-MULTILINE `$` cannot be followed by anything.
        (
            "regex",
            r#"{"value":"[0-9]+$"}"#,
            b"123\nabc",
            Some(100),
            'U',
        ),
    ]);
}

/// Python's `\b` uses Python's word characters (`str.isalnum()` or `_`),
/// which differ from the engine's for some characters: next to one, the
/// answer would not be Python's, so an output containing one is undetermined
/// for a pattern with a Unicode `\b` or `\B` (ASCII `(?a)` ones are exact).
#[test]
fn regex_word_boundaries_next_to_disputed_characters() {
    check(&[
        // Python: `²` is a word character, so there is no boundary after x.
        (
            "regex",
            r#"{"value":"\\bx\\b"}"#,
            "x²".as_bytes(),
            None,
            'U',
        ),
        // A combining mark is not one in Python, and is in the engine.
        (
            "regex",
            r#"{"value":"e\\B"}"#,
            "e\u{301}".as_bytes(),
            None,
            'U',
        ),
        (
            "regex",
            r#"{"value":"(?a)\\bx\\b"}"#,
            "x²".as_bytes(),
            None,
            'M',
        ),
        ("regex", r#"{"value":"\\bx"}"#, "é x".as_bytes(), None, 'M'),
        (
            "regex",
            r#"{"value":"\\bx"}"#,
            "²".as_bytes(),
            Some(10),
            'U',
        ),
    ]);
}

/// What the engine cannot run with Python's meaning is refused by `validate`,
/// naming the construct and where it is.
#[test]
fn regex_refuses_what_it_cannot_run_as_python() {
    let cases: &[(&str, &[&str])] = &[
        (
            r#"{"value":"abc(?=x)"}"#,
            &["lookahead (?=...) at offset 3 is not supported"],
        ),
        (
            r#"{"value":"(?!x)"}"#,
            &["negative lookahead (?!...) at offset 0"],
        ),
        (
            r#"{"value":"a(?<=x)"}"#,
            &["lookbehind (?<=...) at offset 1"],
        ),
        (
            r#"{"value":"(?<!x)"}"#,
            &["negative lookbehind (?<!...) at offset 0"],
        ),
        (r#"{"value":"(a)\\1"}"#, &["backreference \\1 at offset 3"]),
        (
            r#"{"value":"(?P<n>a)(?P=n)"}"#,
            &["backreference (?P=n) at offset 8"],
        ),
        (
            r#"{"value":"(a)?(?(1)b|c)"}"#,
            &["conditional group", "at offset 4"],
        ),
        (
            r#"{"value":"(?>a)"}"#,
            &["atomic group (?>...) at offset 0"],
        ),
        (
            r#"{"value":"a*+"}"#,
            &["possessive quantifier *+ at offset 1"],
        ),
        (
            r#"{"value":"a++"}"#,
            &["possessive quantifier ++ at offset 1"],
        ),
        (
            r#"{"value":"a?+"}"#,
            &["possessive quantifier ?+ at offset 1"],
        ),
        (r#"{"value":"a{1,2}+"}"#, &["possessive quantifier {m,n}+"]),
        (r#"{"value":"(?L)a"}"#, &["flag L (LOCALE) at offset 0"]),
        (
            r#"{"value":"[a&&b]"}"#,
            &["'&&' inside a character class at offset 2"],
        ),
        (
            r#"{"value":"[a-z--b]"}"#,
            &["'--' inside a character class at offset 4"],
        ),
        (
            r#"{"value":"[a~~b]"}"#,
            &["'~~' inside a character class at offset 2"],
        ),
        (
            r#"{"value":"[[:alpha:]]"}"#,
            &["'[' at the start of a character class at offset 1"],
        ),
        (r#"{"value":"\\N{EM DASH}"}"#, &["\\N{...} at offset 0"]),
        // A `$` that more pattern may follow is Python's look-ahead.
        (
            r#"{"value":"a$\\n"}"#,
            &[
                "'$' followed by more pattern at offset 1",
                "\\n?\\Z",
                "(?m)",
            ],
        ),
        (
            r#"{"value":"(a$)+"}"#,
            &["'$' followed by more pattern at offset 2"],
        ),
        (
            r#"{"value":"$x?"}"#,
            &["'$' followed by more pattern at offset 0"],
        ),
        // What Python itself rejects, with its message.
        (r#"{"value":"\\z"}"#, &["bad escape \\z", "\\Z"]),
        (r#"{"value":"\\pL"}"#, &["bad escape \\p at offset 0"]),
        (
            r#"{"value":"(?-u:\\xFF)"}"#,
            &["cannot turn off flags 'a', 'u' and 'L'"],
        ),
        (
            r#"{"value":"(?<name>x)"}"#,
            &["unknown extension ?<n", "(?P<name>...)"],
        ),
        (r#"{"value":"a(?i)b"}"#, &["global flags not at the start"]),
        (r#"{"value":"a**"}"#, &["multiple repeat at offset 2"]),
        (
            r#"{"value":"x{3,2}"}"#,
            &["min repeat greater than max repeat"],
        ),
    ];
    for (params, needles) in cases {
        let err = host()
            .validate("regex", params)
            .expect_err(&format!("regex must refuse {params}"));
        let text = err.to_string();
        for needle in *needles {
            assert!(
                text.contains(needle),
                "regex {params}: error {text:?} should mention {needle:?}"
            );
        }
    }
    // What Python reads as it is, so do we; and `$` that ends the pattern,
    // inside groups, alternatives or an optional part, is translated.
    for params in [
        r#"{"value":"a{b"}"#,
        r#"{"value":"a{,2}"}"#,
        r#"{"value":"(?a)\\w"}"#,
        r#"{"value":"(?:a$|b(c$)?)"}"#,
        r#"{"value":"(?m)a$\\n"}"#,
        r#"{"value":"a$(?:)"}"#,
        r#"{"value":"[--a]"}"#,
    ] {
        host()
            .validate("regex", params)
            .unwrap_or_else(|e| panic!("regex must accept {params}: {e}"));
    }
}

/// The regex built-in searches short outputs and long ones with different
/// engines (the lazy DFA only pays for itself on long ones); the answer must
/// not depend on which. Each case is checked with its key text at the end of
/// outputs from tiny to 64 KiB, across the switch at a few KiB.
#[test]
fn regex_answers_do_not_depend_on_output_length() {
    // (params, tail appended to the filler, truncated?, expected letter)
    let cases: &[(&str, &[u8], bool, char)] = &[
        (
            r#"{"value":"(?m)^line 31: [a-z]+$"}"#,
            b"line 31: abc\n",
            false,
            'M',
        ),
        (
            r#"{"value":"(?m)^line 31: [a-z]+$"}"#,
            b"line 31: abc1\n",
            false,
            'X',
        ),
        (r#"{"value":"\\b42\\b"}"#, b"answer: 42\n", false, 'M'),
        (r#"{"value":"\\b42\\b"}"#, b"answer: 421\n", false, 'X'),
        (r#"{"value":"(?s).*needle"}"#, b"a needle", false, 'M'),
        (r#"{"value":"(?s).*needle"}"#, b"a needl", false, 'X'),
        (
            r#"{"value":"(?i)HELLO,? WORLD"}"#,
            "héllo hello world".as_bytes(),
            false,
            'M',
        ),
        (
            r#"{"value":"[a-z\\s]+","full_match":true}"#,
            b"done\n",
            false,
            'M',
        ),
        (
            r#"{"value":"[a-z\\s]+","full_match":true}"#,
            b"done 1\n",
            false,
            'X',
        ),
        (r#"{"value":"\\xffok"}"#, "ÿok".as_bytes(), false, 'M'),
        (r#"{"value":"\\xffok"}"#, b"\xffok", false, 'X'),
        (r#"{"value":"^.ok$"}"#, b"\xffok", false, 'X'),
        // Truncated: a match before the end is proven, one at the end is not.
        (r#"{"value":"\\d+ apples"}"#, b"12 apples and", true, 'M'),
        (r#"{"value":"apples$"}"#, b"12 apples", true, 'U'),
        (r#"{"value":"apples$"}"#, b"12 apples\n", true, 'U'),
        // Python's `$`: before a newline that ends the output.
        (r#"{"value":"[a-z]+ 31$"}"#, b"line 31\n", false, 'M'),
        (r#"{"value":"[a-z]+ 31$"}"#, b"line 31\n\n", false, 'X'),
    ];
    let mut outputs = Vec::new();
    for filler_len in [0usize, 100, 1000, 2000, 2100, 5000, 64 << 10] {
        // Whole lines of lowercase words, so the tail starts a line.
        let filler = b"filler text\n".repeat(filler_len.div_ceil(12));
        for (params, tail, truncated, want) in cases {
            let output = [filler.as_slice(), tail].concat();
            let total = truncated.then_some(output.len() as u64 + 100);
            outputs.push((*params, output, total, *want));
        }
    }
    let rows: Vec<Row<'_>> = outputs
        .iter()
        .map(|(params, output, total, want)| ("regex", *params, output.as_slice(), *total, *want))
        .collect();
    check(&rows);
}

#[test]
fn json_truth_table() {
    check(&[
        (
            "json",
            r#"{"value":{"a":1,"b":[1,2]}}"#,
            br#"{"b":[1,2],"a":1}"#,
            None,
            'M',
        ),
        (
            "json",
            r#"{"value":{"a":1}}"#,
            b" {\"a\": 1.0}\n",
            None,
            'M',
        ),
        ("json", r#"{"value":{"a":1}}"#, br#"{"a":1e0}"#, None, 'M'),
        ("json", r#"{"value":{"a":1}}"#, br#"{"a":2}"#, None, 'X'),
        (
            "json",
            r#"{"value":{"a":1}}"#,
            br#"{"a":1,"b":2}"#,
            None,
            'X',
        ),
        ("json", r#"{"value":[1,2]}"#, b"[2,1]", None, 'X'),
        (
            "json",
            r#"{"value":0.3,"float_tolerance":1e-9}"#,
            b"0.30000000000000004",
            None,
            'M',
        ),
        ("json", r#"{"value":0.3}"#, b"0.31", None, 'X'),
        ("json", r#"{"value":"hi"}"#, br#""hi""#, None, 'M'),
        ("json", r#"{"value":{"a":1}}"#, b"not json", None, 'X'),
        ("json", r#"{"value":"\u00e9"}"#, b"\"\xe9\"", None, 'X'),
        // Truncated: syntax error already in the kept part: proven mismatch.
        (
            "json",
            r#"{"value":{"a":1}}"#,
            b"Traceback (most",
            Some(1 << 20),
            'X',
        ),
        // Unfinished but fine so far: undetermined.
        (
            "json",
            r#"{"value":{"a":1}}"#,
            br#"{"a":"#,
            Some(1 << 20),
            'U',
        ),
        // Complete value kept, but different: proven mismatch.
        (
            "json",
            r#"{"value":{"a":1}}"#,
            br#"{"a":2}"#,
            Some(1 << 20),
            'X',
        ),
        // Complete and equal, but something follows: undetermined.
        (
            "json",
            r#"{"value":{"a":1}}"#,
            br#"{"a":1}"#,
            Some(1 << 20),
            'U',
        ),
        // A bare number may go on: 12 could be 123.
        ("json", r#"{"value":123}"#, b"12", Some(3), 'U'),
        // A character cut in two inside a string proves nothing.
        ("json", r#"{"value":"é"}"#, &[b'"', 0xc3], Some(4), 'U'),
    ]);
}

#[test]
fn number_truth_table() {
    check(&[
        (
            "number",
            r#"{"value":42}"#,
            b"The answer is 42.\n",
            None,
            'M',
        ),
        (
            "number",
            r#"{"value":3.14159,"abs":0.001}"#,
            b"pi ~ 3.1416",
            None,
            'M',
        ),
        ("number", r#"{"value":3.14159}"#, b"3.1416", None, 'X'),
        ("number", r#"{"value":100,"rel":0.01}"#, b"100.5", None, 'M'),
        ("number", r#"{"value":[1,2,3]}"#, b"1\n2\n3\n", None, 'M'),
        ("number", r#"{"value":"1 2 3"}"#, b"1, 2, 3", None, 'M'),
        ("number", r#"{"value":[1,2,3]}"#, b"1 2", None, 'X'),
        ("number", r#"{"value":[1,2]}"#, b"1 2 3", None, 'X'),
        ("number", r#"{"value":-1.5e3}"#, b"x=-1500", None, 'M'),
        ("number", r#"{"value":7}"#, b"\xff7\xfe", None, 'M'),
        ("number", r#"{"value":7}"#, b"no numbers", None, 'X'),
        // Truncated: a complete wrong number is a proven mismatch.
        ("number", r#"{"value":[1,2]}"#, b"5 ", Some(100), 'X'),
        ("number", r#"{"value":[1]}"#, b"1 2 ", Some(100), 'X'),
        // The last token may continue (12 -> 123): undetermined.
        ("number", r#"{"value":123}"#, b"12", Some(3), 'U'),
        ("number", r#"{"value":[1,2]}"#, b"1 ", Some(100), 'U'),
    ]);
}

#[test]
fn lines_truth_table() {
    check(&[
        ("lines", r#"{"value":"a\nb\n"}"#, b"a\nb\n", None, 'M'),
        (
            "lines",
            r#"{"value":"a\nb"}"#,
            b"a  \r\nb\r\n\n\n",
            None,
            'M',
        ),
        ("lines", r#"{"value":["a","b"]}"#, b"a\nb", None, 'M'),
        ("lines", r#"{"value":["a","b"]}"#, b"b\na", None, 'X'),
        (
            "lines",
            r#"{"value":["a","b"],"unordered":true}"#,
            b"b\na\n",
            None,
            'M',
        ),
        (
            "lines",
            r#"{"value":["a","a","b"],"unordered":true}"#,
            b"a\nb\nb\n",
            None,
            'X',
        ),
        ("lines", r#"{"value":["a","b"]}"#, b"a\nb\nc", None, 'X'),
        ("lines", r#"{"value":["a"]}"#, b"\xff\n", None, 'X'),
        // Truncated: a complete line that differs proves a mismatch.
        (
            "lines",
            r#"{"value":["a","b"]}"#,
            b"a\nx\nb",
            Some(100),
            'X',
        ),
        ("lines", r#"{"value":["a"]}"#, b"a\nextra\n", Some(100), 'X'),
        (
            "lines",
            r#"{"value":["a","b"],"unordered":true}"#,
            b"c\n",
            Some(100),
            'X',
        ),
        // The partial last line proves nothing.
        ("lines", r#"{"value":["a","b"]}"#, b"a\nzz", Some(100), 'U'),
        ("lines", r#"{"value":["a","b"]}"#, b"a\n", Some(4), 'U'),
    ]);
}

#[test]
fn validate_refuses_unknown_and_bad_params() {
    let cases: &[(&str, &str, &str)] = &[
        ("equals", r#"{"value":"9","colour":"red"}"#, "colour"),
        ("equals", r#"{"valeu":"9"}"#, "valeu"),
        ("equals", r#"{}"#, "value"),
        ("equals", r#"{"value":9}"#, "string"),
        ("equals", r#"{"value":"9","trim":"yes"}"#, "trim"),
        ("contains", r#"{"value":""}"#, "empty"),
        ("regex", r#"{"value":"(unclosed"}"#, "regex"),
        ("regex", r#"{"value":"a","fullmatch":true}"#, "fullmatch"),
        ("json", r#"{"value":1,"tolerance":0.1}"#, "tolerance"),
        (
            "json",
            r#"{"value":1,"float_tolerance":-1}"#,
            "float_tolerance",
        ),
        ("number", r#"{"value":"no digits"}"#, "no number"),
        ("number", r#"{"value":1,"absolute":0.1}"#, "absolute"),
        ("lines", r#"{"value":["a\nb"]}"#, "newline"),
        ("lines", r#"{"value":"a","sorted":true}"#, "sorted"),
        ("equals", "not json", "JSON"),
        ("equals", r#"["value"]"#, "object"),
    ];
    for (name, params, needle) in cases {
        let err = host()
            .validate(name, params)
            .expect_err(&format!("{name} must refuse {params}"));
        let text = err.to_string();
        assert!(
            text.contains(needle) && text.contains(name),
            "{name} {params}: error {text:?} should mention {needle:?}"
        );
        // compare refuses the same parameters as an error, not a verdict.
        assert!(
            host()
                .compare(
                    name,
                    params,
                    &progscore_comparator_host::ObservedStream::complete(b"9".to_vec())
                )
                .is_err(),
            "{name} compare must refuse {params}"
        );
    }
    for (name, params) in [
        (
            "equals",
            r#"{"value":"9","trim":false,"ignore_case":true,"normalize_newlines":true}"#,
        ),
        ("regex", r#"{"value":"^a","full_match":true}"#),
        ("json", r#"{"value":{"a":[1]},"float_tolerance":0.5}"#),
        ("number", r#"{"value":[1,2],"abs":0.1,"rel":0.2}"#),
        ("lines", r#"{"value":"a\nb","unordered":true}"#),
        ("contains", r#"{"value":"x","ignore_case":true}"#),
    ] {
        host()
            .validate(name, params)
            .unwrap_or_else(|e| panic!("{name} must accept {params}: {e}"));
    }
}

#[test]
fn reasons_say_what_differs() {
    let outcome = run("equals", r#"{"value":"9"}"#, b"10\n");
    let reason = outcome.reason().unwrap_or_default();
    assert!(
        reason.contains("\"9\"") && reason.contains("\"10\""),
        "{reason}"
    );
    let outcome = run("json", r#"{"value":{"a":[1,2]}}"#, br#"{"a":[1,3]}"#);
    assert!(
        outcome.reason().unwrap_or_default().contains("$.a[1]"),
        "{outcome:?}"
    );
    let outcome = run_truncated("contains", r#"{"value":"ok"}"#, b"abc", 1000);
    assert!(
        outcome
            .reason()
            .unwrap_or_default()
            .contains("3 of 1000 bytes"),
        "{outcome:?}"
    );
}

#[test]
fn builtins_are_listed_and_unknown_names_refused() {
    let names = host().names();
    for name in ["equals", "contains", "regex", "json", "number", "lines"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let err = host()
        .compare(
            "equal",
            r#"{"value":"9"}"#,
            &progscore_comparator_host::ObservedStream::complete(vec![]),
        )
        .expect_err("unknown comparator");
    let text = err.to_string();
    assert!(
        text.contains("\"equal\"") && text.contains("equals"),
        "{text}"
    );
    assert!(host().validate("nope", "{}").is_err());
}

#[test]
fn many_threads_share_one_host() {
    let handles: Vec<_> = (0..16)
        .map(|i| {
            std::thread::spawn(move || {
                for j in 0..20 {
                    let expected = format!("{}", i * 100 + j);
                    let params = format!(r#"{{"value":"{expected}"}}"#);
                    let outcome = run("equals", &params, format!("{expected}\n").as_bytes());
                    assert_eq!(outcome, ComparisonOutcome::Match);
                    let outcome = run("equals", &params, b"nope");
                    assert_eq!(letter(&outcome), 'X');
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().expect("thread");
    }
}

#[test]
fn usable_from_tokio_tasks() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..8 {
            // Directly on a worker thread (no spawn_blocking): the host must not
            // need a runtime of its own, nor panic inside one.
            tasks.push(tokio::spawn(async move {
                run("regex", r#"{"value":"^\\d+$"}"#, format!("{i}").as_bytes())
            }));
        }
        for task in tasks {
            assert_eq!(task.await.expect("task"), ComparisonOutcome::Match);
        }
    });
}

/// The parser, the translation and the engine's compiler recurse on nested
/// groups, in a guest with a small stack: nesting is bounded, and the bound
/// itself runs.
#[test]
fn regex_deep_nesting_is_bounded() {
    let nested = |depth: usize, close: &str, end: &str| {
        let pattern = format!("{}a{}{end}", "(?:".repeat(depth), close.repeat(depth));
        serde_json::json!({ "value": pattern }).to_string()
    };
    for (close, end) in [(")", ""), (")*", ""), (")?", "$")] {
        let params = nested(100, close, end);
        assert_eq!(
            run("regex", &params, b"xa\n"),
            ComparisonOutcome::Match,
            "{params}"
        );
        let err = host()
            .validate("regex", &nested(101, close, end))
            .expect_err("101 levels");
        assert!(
            err.to_string().contains("nesting deeper than 100 levels"),
            "{err}"
        );
    }
}
