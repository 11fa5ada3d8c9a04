//! Expected against observed, line by line.

use similar::{ChangeTag, TextDiff};

use crate::model::Diff;

/// Whether the texts are the same once a final newline is set aside (as the
/// `equals` comparator compares them): such a pair gets no diff.
pub(crate) fn same_text(expected: &str, observed: &str) -> bool {
    expected.strip_suffix('\n').unwrap_or(expected)
        == observed.strip_suffix('\n').unwrap_or(observed)
}

/// How much of one diff line is shown.
const LINE_BYTES: usize = 240;

/// The line diff of `expected` against `observed` on `stream`, at most
/// `cap` lines, each cut at 240 bytes (a program may print one line of
/// megabytes).
pub(crate) fn lines(stream: &'static str, expected: &str, observed: &str, cap: usize) -> Diff {
    let expected = with_final_newline(expected);
    let observed = with_final_newline(observed);
    let diff = TextDiff::from_lines(expected.as_str(), observed.as_str());
    let mut lines = Vec::new();
    let mut cut = false;
    for change in diff.iter_all_changes() {
        if lines.len() == cap {
            cut = true;
            break;
        }
        let op = match change.tag() {
            ChangeTag::Equal => '=',
            ChangeTag::Delete => '-',
            ChangeTag::Insert => '+',
        };
        let line = change.value();
        lines.push((op, shorten(line.strip_suffix('\n').unwrap_or(line))));
    }
    Diff { stream, lines, cut }
}

fn shorten(line: &str) -> String {
    if line.len() <= LINE_BYTES {
        return line.to_string();
    }
    let mut end = LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\u{2026} [{} bytes in all]", &line[..end], line.len())
}

fn with_final_newline(text: &str) -> String {
    if text.is_empty() || text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_line_is_one_removal_and_one_addition() {
        let diff = lines("stdout", "a\nb\nc", "a\nB\nc\n", 100);
        assert_eq!(
            diff.lines,
            vec![
                ('=', "a".to_string()),
                ('-', "b".to_string()),
                ('+', "B".to_string()),
                ('=', "c".to_string()),
            ]
        );
        assert!(!diff.cut);
        assert!(same_text("9", "9\n"));
        assert!(!same_text("9", "8\n"));
    }

    #[test]
    fn a_huge_line_is_cut_and_says_its_size() {
        let diff = lines("stdout", "0", &"x".repeat(65536), 10);
        let added = &diff.lines[1].1;
        assert!(added.len() < 300, "{}", added.len());
        assert!(added.ends_with("[65536 bytes in all]"), "{added}");
    }

    #[test]
    fn long_diffs_are_cut_and_say_so() {
        let observed: String = (0..50).map(|i| format!("{i}\n")).collect();
        let diff = lines("stdout", "", &observed, 10);
        assert_eq!(diff.lines.len(), 10);
        assert!(diff.cut);
    }
}
