//! Batch files: one JSON item per line, each checked on its own so a bad
//! line is reported (file, line, field) without losing the good ones.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use progscore_scoring::ScoringExpectation;
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
        let bytes = std::fs::read(path).map_err(|source| BatchReadError {
            file: path.display().to_string(),
            source,
        })?;
        Ok(Batch::parse_bytes(path, &bytes))
    }

    /// Parses batch text that came from `path`.
    pub fn parse(path: &Path, text: &str) -> Batch {
        Batch::parse_bytes(path, text.as_bytes())
    }

    /// Parses a batch file's bytes that came from `path`. Each line is
    /// decoded on its own: a line that is not UTF-8 is refused (naming the
    /// first bad byte), and the other lines are still read.
    pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Batch {
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Batch::parse_lines(&path.display().to_string(), Some(base), bytes)
    }

    /// Parses batch lines that came over a network from `source` (a name
    /// for messages, such as `request`): the same shape, but `program_file`
    /// is refused, since a path would name a file of this machine.
    pub fn parse_sent(source: &str, bytes: &[u8]) -> Batch {
        Batch::parse_lines(source, None, bytes)
    }

    /// The lines of `bytes` from `file`; `program_file`s resolve against
    /// `base`, or are refused without one.
    fn parse_lines(file: &str, base: Option<&Path>, bytes: &[u8]) -> Batch {
        let file = file.to_string();
        let mut batch = Batch::default();
        let mut seen = HashSet::new();
        for (index, raw) in lines(bytes).enumerate() {
            let line = index + 1;
            let error =
                |id: Option<String>, field: Option<String>, message: String| BatchLineError {
                    file: file.clone(),
                    line,
                    id,
                    field,
                    message,
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
                    batch.errors.push(error(
                        id,
                        None,
                        format!(
                            "not UTF-8 at byte {} (a batch line is UTF-8 JSON: give a binary program as `program_file`, binary stdin as {{\"base64\": ...}})",
                            bad.valid_up_to() + 1
                        ),
                    ));
                    continue;
                }
            };
            if raw.trim().is_empty() || raw.trim_start().starts_with("//") {
                continue;
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
                    batch
                        .errors
                        .push(error(id, field, err.into_inner().to_string()));
                    continue;
                }
            };
            let id = parsed.id;
            if id.trim().is_empty() {
                batch
                    .errors
                    .push(error(None, Some("id".into()), "must not be empty".into()));
                continue;
            }
            if !seen.insert(id.clone()) {
                batch.errors.push(error(
                    Some(id.clone()),
                    Some("id".into()),
                    format!("`{id}` appears on an earlier line"),
                ));
                continue;
            }
            let program = match (parsed.program, parsed.program_file) {
                (Some(program), None) => program.into_bytes(),
                (None, Some(_)) if base.is_none() => {
                    batch.errors.push(error(
                        Some(id),
                        Some("program_file".into()),
                        "not accepted here: send the code itself as `program`".into(),
                    ));
                    continue;
                }
                (None, Some(program_file)) => {
                    let resolved = base.unwrap_or(Path::new(".")).join(&program_file);
                    match std::fs::read(&resolved) {
                        Ok(bytes) => bytes,
                        Err(err) => {
                            batch.errors.push(error(
                                Some(id),
                                Some("program_file".into()),
                                format!("cannot read {}: {err}", resolved.display()),
                            ));
                            continue;
                        }
                    }
                }
                (Some(_), Some(_)) => {
                    batch.errors.push(error(
                        Some(id),
                        Some("program".into()),
                        "give either `program` or `program_file`, not both".into(),
                    ));
                    continue;
                }
                (None, None) => {
                    batch.errors.push(error(
                        Some(id),
                        Some("program".into()),
                        "missing: give `program` (the code) or `program_file` (a path)".into(),
                    ));
                    continue;
                }
            };
            batch.items.push(BatchItem {
                line,
                id,
                program,
                expectation: parsed.expectation,
            });
        }
        batch
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
