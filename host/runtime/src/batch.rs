//! Batch files: one JSON item per line, each checked on its own so a bad
//! line is reported (file, line, field) without losing the good ones.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use progscore_scoring::{ProgramInput, RescoreRequest, ScoringExpectation};
use serde::Deserialize;
use thiserror::Error;

/// One scorable item from a batch line.
#[derive(Debug, Clone)]
pub struct BatchItem {
    /// 1-based line number in the batch file.
    pub line: usize,
    /// The item's id, unique in the batch.
    pub id: String,
    /// The program's bytes, verbatim.
    pub program: Vec<u8>,
    /// What the program must do.
    pub expectation: ScoringExpectation,
}

impl BatchItem {
    /// The item as a rescore asks for it: its id, program and expectation.
    pub fn rescore_request(&self) -> RescoreRequest {
        RescoreRequest {
            item_id: Some(self.id.clone()),
            program: ProgramInput::Inline(self.program.clone()),
            expectation: self.expectation.clone(),
        }
    }

    /// The profile the item's expectation names (a validated item has one).
    pub fn profile(&self) -> Option<&str> {
        self.expectation
            .conditions
            .first()
            .map(|condition| match condition {
                progscore_scoring::Condition::ProgramBehaves(behaves) => behaves.profile.as_str(),
            })
    }
}

/// A line that could not become an item.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{file}:{line}: {}{message}", field.as_ref().map(|f| format!("field `{f}`: ")).unwrap_or_default())]
pub struct BatchLineError {
    /// The batch file.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// The item's id, when it could be read.
    pub id: Option<String>,
    /// The field at fault (a path like `expectation.conditions[0].program_behaves.profile`).
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// Why the batch file as a whole could not be read.
#[derive(Debug, Error)]
#[error("{file}: cannot read the batch: {source}")]
pub struct BatchReadError {
    /// The batch file.
    pub file: String,
    /// Why.
    pub source: std::io::Error,
}

/// A parsed batch: the good items and the bad lines, in file order.
#[derive(Debug, Default)]
pub struct Batch {
    /// Items ready to score.
    pub items: Vec<BatchItem>,
    /// Lines that were refused.
    pub errors: Vec<BatchLineError>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLine {
    id: String,
    #[serde(default)]
    program: Option<String>,
    #[serde(default)]
    program_file: Option<PathBuf>,
    expectation: ScoringExpectation,
}

impl Batch {
    /// Reads a batch file; relative `program_file`s resolve against its folder.
    pub fn read(path: &Path) -> Result<Batch, BatchReadError> {
        Ok(Batch::collect(
            BatchSource::File(path.to_path_buf()).lines()?,
        ))
    }

    /// Parses batch text that came from `path`.
    pub fn parse(path: &Path, text: &str) -> Batch {
        Batch::parse_bytes(path, text.as_bytes())
    }

    /// Parses a batch file's bytes that came from `path`. Each line is
    /// decoded on its own: a line that is not UTF-8 is refused (naming the
    /// first bad byte), and the other lines are still read.
    pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Batch {
        let mut parser = LineParser::new(path.display().to_string(), Some(folder_of(path)));
        Batch::collect(
            lines(bytes)
                .enumerate()
                .filter_map(|(index, raw)| parser.parse(index + 1, raw)),
        )
    }

    /// Parses batch lines that came over a network from `source` (a name
    /// for messages, such as `request`): the same shape, but `program_file`
    /// is refused, since a path would name a file of this machine.
    pub fn parse_sent(source: &str, bytes: &[u8]) -> Batch {
        let mut parser = LineParser::new(source.to_string(), None);
        Batch::collect(
            lines(bytes)
                .enumerate()
                .filter_map(|(index, raw)| parser.parse(index + 1, raw)),
        )
    }

    fn collect(read: impl Iterator<Item = Result<BatchItem, BatchLineError>>) -> Batch {
        let mut batch = Batch::default();
        for line in read {
            match line {
                Ok(item) => batch.items.push(item),
                Err(error) => batch.errors.push(error),
            }
        }
        batch
    }
}

/// Where a batch's lines come from: read line by line as they are needed,
/// so that a batch of millions is never in memory at once.
#[derive(Debug, Clone)]
pub enum BatchSource {
    /// A batch file; relative `program_file`s resolve against its folder.
    File(PathBuf),
    /// Lines sent over a network (a request's body), named `source` in
    /// messages; `program_file` is refused there.
    Sent {
        /// A name for messages, such as `request`.
        source: String,
        /// The lines.
        bytes: std::sync::Arc<[u8]>,
    },
}

impl BatchSource {
    /// The name messages give the batch (the file's path, or the source).
    pub fn name(&self) -> String {
        match self {
            BatchSource::File(path) => path.display().to_string(),
            BatchSource::Sent { source, .. } => source.clone(),
        }
    }

    /// The batch's lines in order, each an item or the error naming what is
    /// wrong with it (blank lines and `//` comments skipped). An id seen on
    /// an earlier line is refused; ids are remembered by a 128-bit digest,
    /// so that memory stays small for millions of items.
    pub fn lines(
        &self,
    ) -> Result<Box<dyn Iterator<Item = Result<BatchItem, BatchLineError>> + Send>, BatchReadError>
    {
        match self {
            BatchSource::File(path) => {
                let read_error = |source| BatchReadError {
                    file: path.display().to_string(),
                    source,
                };
                let file = std::fs::File::open(path).map_err(read_error)?;
                let mut parser = LineParser::new(path.display().to_string(), Some(folder_of(path)));
                let mut reader = std::io::BufReader::new(file);
                let mut buffer = Vec::new();
                let mut number = 0;
                let mut failed = false;
                let name = path.display().to_string();
                Ok(Box::new(std::iter::from_fn(move || {
                    loop {
                        if failed {
                            return None;
                        }
                        buffer.clear();
                        match std::io::BufRead::read_until(&mut reader, b'\n', &mut buffer) {
                            Ok(0) => return None,
                            Ok(_) => {}
                            Err(error) => {
                                // The file could not be read on: said as
                                // the line where reading stopped.
                                failed = true;
                                return Some(Err(BatchLineError {
                                    file: name.clone(),
                                    line: number + 1,
                                    id: None,
                                    field: None,
                                    message: format!("cannot read the batch on from here: {error}"),
                                }));
                            }
                        }
                        number += 1;
                        let raw = buffer.strip_suffix(b"\n").unwrap_or(&buffer);
                        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
                        if let Some(parsed) = parser.parse(number, raw) {
                            return Some(parsed);
                        }
                    }
                })))
            }
            BatchSource::Sent { source, bytes } => {
                let mut parser = LineParser::new(source.clone(), None);
                let bytes = bytes.clone();
                let mut at = 0;
                let mut number = 0;
                Ok(Box::new(std::iter::from_fn(move || {
                    loop {
                        if at >= bytes.len() {
                            return None;
                        }
                        let end = bytes[at..]
                            .iter()
                            .position(|b| *b == b'\n')
                            .map_or(bytes.len(), |n| at + n);
                        let raw = &bytes[at..end];
                        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
                        at = end + 1;
                        number += 1;
                        if let Some(parsed) = parser.parse(number, raw) {
                            return Some(parsed);
                        }
                    }
                })))
            }
        }
    }
}

fn folder_of(path: &Path) -> PathBuf {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// Parses one batch line at a time, remembering the ids seen.
struct LineParser {
    file: String,
    /// Where `program_file`s resolve; `None`: refused.
    base: Option<PathBuf>,
    /// A digest of every id seen.
    seen: SeenIds,
}

/// The 128-bit digests of the ids seen, exactly, in about 16 bytes each: the
/// latest in a small hash set, the rest in one sorted vector (a hash set of
/// them all took twice that, and three times while it grew: 53 MB at a
/// million ids).
#[derive(Default)]
struct SeenIds {
    recent: HashSet<u128>,
    sorted: Vec<u128>,
}

impl SeenIds {
    /// Digests kept in the hash set before they are merged into the sorted
    /// vector.
    const RECENT: usize = 1 << 14;

    /// Whether `digest` is new (and now remembered).
    fn insert(&mut self, digest: u128) -> bool {
        if self.sorted.binary_search(&digest).is_ok() || !self.recent.insert(digest) {
            return false;
        }
        if self.recent.len() >= SeenIds::RECENT {
            let mut fresh: Vec<u128> = self.recent.drain().collect();
            fresh.sort_unstable();
            // Merged from the back, in place.
            let mut old = self.sorted.len();
            let mut new = fresh.len();
            self.sorted.resize(old + new, 0);
            while new > 0 {
                let at = old + new - 1;
                if old > 0 && self.sorted[old - 1] > fresh[new - 1] {
                    self.sorted[at] = self.sorted[old - 1];
                    old -= 1;
                } else {
                    self.sorted[at] = fresh[new - 1];
                    new -= 1;
                }
            }
        }
        true
    }
}

impl LineParser {
    fn new(file: String, base: Option<PathBuf>) -> LineParser {
        LineParser {
            file,
            base,
            seen: SeenIds::default(),
        }
    }

    fn id_digest(id: &str) -> u128 {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(id.as_bytes());
        let mut out = [0u8; 16];
        out.copy_from_slice(&digest[..16]);
        u128::from_le_bytes(out)
    }

    /// Line `line` (1-based), without its line end: `None` for a blank
    /// line or a comment.
    fn parse(&mut self, line: usize, raw: &[u8]) -> Option<Result<BatchItem, BatchLineError>> {
        let base = self.base.as_deref();
        let error = |id: Option<String>, field: Option<String>, message: String| {
            Some(Err(BatchLineError {
                file: self.file.clone(),
                line,
                id,
                field,
                message,
            }))
        };
        let raw = match std::str::from_utf8(raw) {
            Ok(raw) => raw,
            Err(bad) => {
                // The id, when the bad byte is elsewhere (in the
                // program, say), so the result line can name the item.
                let lossy = String::from_utf8_lossy(raw);
                let id = serde_json::from_str::<serde_json::Value>(&lossy)
                    .ok()
                    .and_then(|v| v.get("id").and_then(|id| id.as_str()).map(String::from))
                    .filter(|id| !id.contains(char::REPLACEMENT_CHARACTER));
                return error(
                    id,
                    None,
                    format!(
                        "not UTF-8 at byte {} (a batch line is UTF-8 JSON: give a binary program as `program_file`, binary stdin as {{\"base64\": ...}})",
                        bad.valid_up_to() + 1
                    ),
                );
            }
        };
        if raw.trim().is_empty() || raw.trim_start().starts_with("//") {
            return None;
        }
        let deserializer = &mut serde_json::Deserializer::from_str(raw);
        let parsed: Result<RawLine, _> = serde_path_to_error::deserialize(deserializer);
        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err(err) => {
                let path = err.path().to_string();
                let id = serde_json::from_str::<serde_json::Value>(raw)
                    .ok()
                    .and_then(|v| v.get("id").and_then(|id| id.as_str()).map(String::from));
                let field = (path != ".").then_some(path);
                return error(id, field, err.into_inner().to_string());
            }
        };
        let id = parsed.id;
        if id.trim().is_empty() {
            return error(None, Some("id".into()), "must not be empty".into());
        }
        if !self.seen.insert(LineParser::id_digest(&id)) {
            return error(
                Some(id.clone()),
                Some("id".into()),
                format!("`{id}` appears on an earlier line"),
            );
        }
        let program = match (parsed.program, parsed.program_file) {
            (Some(program), None) => program.into_bytes(),
            (None, Some(_)) if base.is_none() => {
                return error(
                    Some(id),
                    Some("program_file".into()),
                    "not accepted here: send the code itself as `program`".into(),
                );
            }
            (None, Some(program_file)) => {
                let resolved = base.unwrap_or(Path::new(".")).join(&program_file);
                match std::fs::read(&resolved) {
                    Ok(bytes) => bytes,
                    Err(err) => {
                        return error(
                            Some(id),
                            Some("program_file".into()),
                            format!("cannot read {}: {err}", resolved.display()),
                        );
                    }
                }
            }
            (Some(_), Some(_)) => {
                return error(
                    Some(id),
                    Some("program".into()),
                    "give either `program` or `program_file`, not both".into(),
                );
            }
            (None, None) => {
                return error(
                    Some(id),
                    Some("program".into()),
                    "missing: give `program` (the code) or `program_file` (a path)".into(),
                );
            }
        };
        Some(Ok(BatchItem {
            line,
            id,
            program,
            expectation: parsed.expectation,
        }))
    }
}

/// The lines of `bytes`, as [`str::lines`] splits them: at `\n`, with a
/// `\r` before it dropped, and no empty last line after a final `\n`.
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut parts = (!bytes.is_empty()).then(|| bytes.split(|b| *b == b'\n'));
    std::iter::from_fn(move || parts.as_mut()?.next())
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_ids_are_exact_across_merges() {
        let mut seen = SeenIds::default();
        let count = SeenIds::RECENT * 3 + 5;
        for i in 0..count {
            assert!(seen.insert(LineParser::id_digest(&format!("item-{i}"))));
        }
        assert_eq!(seen.sorted.len() + seen.recent.len(), count);
        assert!(seen.sorted.windows(2).all(|pair| pair[0] < pair[1]));
        // Every id again, whether merged into the sorted part or recent.
        for i in (0..count).rev() {
            assert!(!seen.insert(LineParser::id_digest(&format!("item-{i}"))));
        }
        assert!(seen.insert(LineParser::id_digest("item-new")));
    }

    #[test]
    fn a_duplicate_far_down_a_large_batch_is_named_by_its_line() {
        let lines: Vec<String> = (0..SeenIds::RECENT * 2 + 10)
            .map(|i| GOOD.replace("\"a\"", &format!("\"id-{i}\"")))
            .chain(std::iter::once(GOOD.replace("\"a\"", "\"id-3\"")))
            .collect();
        let batch = Batch::parse(Path::new("b.jsonl"), &lines.join("\n"));
        assert_eq!(batch.items.len(), lines.len() - 1);
        assert_eq!(batch.errors.len(), 1);
        assert_eq!(batch.errors[0].line, lines.len());
        assert_eq!(batch.errors[0].id.as_deref(), Some("id-3"));
        assert!(
            batch.errors[0]
                .message
                .contains("appears on an earlier line")
        );
    }

    const GOOD: &str = r#"{"id": "a", "program": "print(9)", "expectation": {"conditions": [{"program_behaves": {"profile": "python", "cases": [{"invocation": {"args": []}, "expected": {"stdout": {"equals": "9"}}}]}}]}}"#;

    #[test]
    fn good_lines_survive_bad_ones_and_errors_name_line_and_field() {
        let text = format!(
            "{GOOD}\n\nnot json\n{}\n{}\n{}\n",
            GOOD.replace("\"stdout\"", "\"stdot\"")
                .replace("\"a\"", "\"b\""),
            GOOD.replace(
                "\"program\": \"print(9)\"",
                "\"program_file\": \"missing.py\""
            )
            .replace("\"a\"", "\"c\""),
            GOOD,
        );
        let batch = Batch::parse(Path::new("dir/batch.jsonl"), &text);
        assert_eq!(batch.items.len(), 1);
        assert_eq!(batch.items[0].id, "a");
        let errors: Vec<String> = batch.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(errors.len(), 4, "{errors:#?}");
        assert!(
            errors[0].starts_with("dir/batch.jsonl:3: "),
            "{}",
            errors[0]
        );
        assert!(
            errors[1].starts_with("dir/batch.jsonl:4: field `expectation.conditions[0].program_behaves.cases[0].expected")
                && errors[1].contains("stdot"),
            "{}",
            errors[1]
        );
        assert!(
            errors[2]
                .starts_with("dir/batch.jsonl:5: field `program_file`: cannot read dir/missing.py"),
            "{}",
            errors[2]
        );
        assert!(
            errors[3].starts_with("dir/batch.jsonl:6: field `id`")
                && errors[3].contains("earlier line"),
            "{}",
            errors[3]
        );
        assert_eq!(batch.errors[1].id.as_deref(), Some("b"));
    }

    #[test]
    fn sent_lines_may_not_name_files_of_this_machine() {
        let text = format!(
            "{GOOD}\n{}\n",
            GOOD.replace(
                "\"program\": \"print(9)\"",
                "\"program_file\": \"/etc/shadow\""
            )
            .replace("\"a\"", "\"b\"")
        );
        let batch = Batch::parse_sent("request", text.as_bytes());
        assert_eq!(batch.items.len(), 1);
        assert_eq!(
            batch.errors[0].to_string(),
            "request:2: field `program_file`: not accepted here: send the code itself as `program`"
        );
    }

    #[test]
    fn a_line_that_is_not_utf8_is_refused_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("batch.jsonl");
        let mut bytes = Vec::new();
        bytes.extend_from_slice(GOOD.as_bytes());
        bytes.extend_from_slice(b"\r\n");
        // One byte that is not UTF-8, inside the program's text.
        let bad = GOOD
            .replace("\"a\"", "\"b\"")
            .replace("print(9)", "print(9)#\u{1}");
        let at = bad.find('\u{1}').unwrap();
        let mut bad = bad.into_bytes();
        bad[at] = 0xff;
        bytes.extend_from_slice(&bad);
        bytes.push(b'\n');
        bytes.extend_from_slice(GOOD.replace("\"a\"", "\"c\"").as_bytes());
        bytes.push(b'\n');
        std::fs::write(&path, &bytes).unwrap();
        let batch = Batch::read(&path).unwrap();
        let ids: Vec<&str> = batch.items.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["a", "c"]);
        assert_eq!(batch.items[1].line, 3);
        let errors: Vec<String> = batch.errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            errors[0].starts_with(&format!(
                "{}:2: not UTF-8 at byte {}",
                path.display(),
                at + 1
            )),
            "{}",
            errors[0]
        );
        assert_eq!(batch.errors[0].id.as_deref(), Some("b"));
    }
}
