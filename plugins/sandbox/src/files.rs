//! Files a program brings beside its source: data it reads, headers or
//! modules it includes. They are placed in the program's folder
//! ([`SANDBOX_DIR`]), read-only like the program, and visible to the
//! compile step and to every invocation.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::bytes::ByteString;
use crate::profile::{RuntimeProfile, SANDBOX_DIR};

/// At most this many files beside one program.
pub const MAX_FILES: usize = 256;
/// At most this many bytes in all of a program's files together (as
/// stdin: they are held in memory and stored with the attempt).
pub const MAX_FILES_BYTES: usize = 16 * 1024 * 1024;
/// The longest relative path of one file, in bytes.
pub const MAX_FILE_PATH_BYTES: usize = 1024;

/// A program's files by relative path (in JSON: `{"data/in.txt": "text"}`,
/// bytes that are not UTF-8 as `{"base64": "..."}`). Valid by construction
/// ([`ProgramFiles::new`]); the empty set means "the program alone".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ProgramFiles(BTreeMap<String, ByteString>);

/// The empty set, for a request that brings no files.
static NO_FILES: ProgramFiles = ProgramFiles(BTreeMap::new());

impl ProgramFiles {
    /// No files: the program alone.
    pub fn none() -> &'static ProgramFiles {
        &NO_FILES
    }
}

/// Why a program's files were refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum InvalidFiles {
    #[error(
        "file `{path}`: {reason} (a file's path is relative to the program's folder, {SANDBOX_DIR}, like `data/input.txt`)"
    )]
    Path { path: String, reason: &'static str },
    #[error("{count} files: at most {MAX_FILES} may be placed beside a program")]
    TooMany { count: usize },
    #[error("the files hold {bytes} bytes together: at most {MAX_FILES_BYTES}")]
    TooLarge { bytes: usize },
    #[error("file `{file}` is also a folder of file `{other}`")]
    FileIsFolder { file: String, other: String },
    #[error("file `{path}` would replace the program itself ({program})")]
    ReplacesProgram { path: String, program: String },
}

impl InvalidFiles {
    /// The file at fault, when one is.
    pub fn path(&self) -> Option<&str> {
        match self {
            InvalidFiles::Path { path, .. } | InvalidFiles::ReplacesProgram { path, .. } => {
                Some(path)
            }
            InvalidFiles::FileIsFolder { file, .. } => Some(file),
            InvalidFiles::TooMany { .. } | InvalidFiles::TooLarge { .. } => None,
        }
    }
}

impl ProgramFiles {
    /// Checks every path and the bounds.
    pub fn new(
        files: impl IntoIterator<Item = (String, ByteString)>,
    ) -> Result<ProgramFiles, InvalidFiles> {
        let files: BTreeMap<String, ByteString> = files.into_iter().collect();
        if files.len() > MAX_FILES {
            return Err(InvalidFiles::TooMany { count: files.len() });
        }
        let bytes: usize = files.values().map(ByteString::len).sum();
        if bytes > MAX_FILES_BYTES {
            return Err(InvalidFiles::TooLarge { bytes });
        }
        for path in files.keys() {
            check_path(path).map_err(|reason| InvalidFiles::Path {
                path: path.clone(),
                reason,
            })?;
        }
        // A file that is also a folder of another: its contents sort from
        // "file/" on.
        for file in files.keys() {
            if let Some(other) = files
                .range(format!("{file}/")..)
                .next()
                .map(|(k, _)| k)
                .filter(|k| k.starts_with(&format!("{file}/")))
            {
                return Err(InvalidFiles::FileIsFolder {
                    file: file.clone(),
                    other: other.clone(),
                });
            }
        }
        Ok(ProgramFiles(files))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The files by relative path, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.0
            .iter()
            .map(|(path, bytes)| (path.as_str(), bytes.as_bytes()))
    }

    /// `fingerprint` (a profile's) with these files' digests under
    /// `"files"` (`{path: sha256}`): an attempt with files is keyed by
    /// them. Unchanged without files, so nothing stored changes meaning.
    pub fn keyed(&self, fingerprint: serde_json::Value) -> serde_json::Value {
        let mut fingerprint = fingerprint;
        if !self.is_empty() {
            fingerprint["files"] = self.digests();
        }
        fingerprint
    }

    /// Whether `fingerprint` (an observation's) records exactly these files.
    pub fn are_keyed_in(&self, fingerprint: &serde_json::Value) -> bool {
        match fingerprint.get("files") {
            None => self.is_empty(),
            Some(recorded) => !self.is_empty() && *recorded == self.digests(),
        }
    }

    /// `fingerprint` without the files' digests (and an interactive
    /// attempt's interactor): the profile's own part.
    pub fn unkeyed(fingerprint: &serde_json::Value) -> std::borrow::Cow<'_, serde_json::Value> {
        const KEYED: [&str; 2] = ["files", "interactor"];
        if KEYED.iter().all(|key| fingerprint.get(key).is_none()) {
            return std::borrow::Cow::Borrowed(fingerprint);
        }
        let mut own = fingerprint.clone();
        if let Some(map) = own.as_object_mut() {
            for key in KEYED {
                map.remove(key);
            }
        }
        std::borrow::Cow::Owned(own)
    }

    fn digests(&self) -> serde_json::Value {
        self.0
            .iter()
            .map(|(path, bytes)| {
                (
                    path.clone(),
                    serde_json::Value::String(crate::sha256_hex(bytes.as_bytes())),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// Refused when a file would take the place of `profile`'s program (its
    /// source file, or a folder holding it).
    pub fn check_for(&self, profile: &RuntimeProfile) -> Result<(), InvalidFiles> {
        self.check_source(profile.source_name(), &profile.program_path())
    }

    /// Refused when a file would take the place of the program at `source`
    /// (relative to its folder; `shown` is its path in the sandbox).
    pub fn check_source(&self, source: &str, shown: &str) -> Result<(), InvalidFiles> {
        for path in self.0.keys() {
            if path == source || source.starts_with(&format!("{path}/")) {
                return Err(InvalidFiles::ReplacesProgram {
                    path: path.clone(),
                    program: shown.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Writes the program (as `profile`'s source file) and the files into
    /// `folder`, an empty folder that becomes the sandbox's program folder:
    /// everything world-readable, nothing writable.
    pub fn write_with_program(
        &self,
        profile: &RuntimeProfile,
        program: &[u8],
        folder: &Path,
    ) -> std::io::Result<()> {
        let mut folders = Vec::new();
        for (path, bytes) in std::iter::once((profile.source_name(), program)).chain(self.iter()) {
            let target = folder.join(path);
            if let Some(parent) = target.parent() {
                if !parent.exists() {
                    std::fs::create_dir_all(parent)?;
                }
                folders.push(parent.to_path_buf());
            }
            std::fs::write(&target, bytes)?;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o444))?;
        }
        // Folders last (read-only folders could not be filled), deepest first.
        folders.sort();
        folders.dedup();
        for dir in folders.iter().rev() {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555))?;
        }
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o555))
    }
}

impl<'de> Deserialize<'de> for ProgramFiles {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let files = BTreeMap::<String, ByteString>::deserialize(deserializer)?;
        ProgramFiles::new(files).map_err(serde::de::Error::custom)
    }
}

fn check_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("the path is empty");
    }
    if path.len() > MAX_FILE_PATH_BYTES {
        return Err("the path is longer than 1024 bytes");
    }
    if path.contains('\0') {
        return Err("the path holds a NUL byte");
    }
    if path.starts_with('/') {
        return Err("the path is absolute");
    }
    if path.ends_with('/') {
        return Err("the path names a folder");
    }
    for component in Path::new(path).components() {
        match component {
            Component::Normal(name) if name.len() <= 255 => {}
            Component::Normal(_) => return Err("a part of the path is longer than 255 bytes"),
            _ => return Err("the path holds `.` or `..`"),
        }
    }
    // `Path::components` drops `.` and doubled slashes silently: refuse them
    // so that one file has one spelling (and one attempt key).
    if path.split('/').any(|part| part.is_empty() || part == ".") {
        return Err("the path holds an empty part or `.`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(paths: &[&str]) -> Result<ProgramFiles, InvalidFiles> {
        ProgramFiles::new(paths.iter().map(|p| (p.to_string(), ByteString::from("x"))))
    }

    #[test]
    fn relative_paths_inside_the_folder_are_taken() {
        let taken = files(&["input.txt", "data/a.csv", "data/b.csv"]).unwrap();
        assert_eq!(taken.len(), 3);
    }

    #[test]
    fn paths_that_leave_the_folder_or_are_ambiguous_are_refused() {
        for bad in [
            "/etc/passwd",
            "../x",
            "a/../../x",
            "./a",
            "a//b",
            "a/",
            "",
            "a\0b",
        ] {
            let err = files(&[bad]).unwrap_err();
            assert!(
                matches!(err, InvalidFiles::Path { .. }),
                "{bad:?} gave {err:?}"
            );
            assert!(err.to_string().contains("relative to the program's folder"));
        }
    }

    #[test]
    fn a_file_that_is_another_files_folder_is_refused() {
        let err = files(&["a", "a.txt", "a/b"]).unwrap_err();
        assert_eq!(
            err,
            InvalidFiles::FileIsFolder {
                file: "a".into(),
                other: "a/b".into()
            }
        );
    }

    #[test]
    fn bounds_are_kept() {
        let many: Vec<String> = (0..=MAX_FILES).map(|i| format!("f{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(matches!(
            files(&refs).unwrap_err(),
            InvalidFiles::TooMany { .. }
        ));
        let big =
            ProgramFiles::new([("big".to_string(), ByteString(vec![0; MAX_FILES_BYTES + 1]))]);
        assert!(matches!(big.unwrap_err(), InvalidFiles::TooLarge { .. }));
    }

    #[test]
    fn json_round_trips_and_checks_paths() {
        let parsed: ProgramFiles =
            serde_json::from_str(r#"{"in.txt": "1 2\n", "raw": {"base64": "AP8="}}"#).unwrap();
        assert_eq!(
            parsed.iter().collect::<Vec<_>>(),
            vec![("in.txt", &b"1 2\n"[..]), ("raw", &[0u8, 255][..])]
        );
        let again: ProgramFiles =
            serde_json::from_value(serde_json::to_value(&parsed).unwrap()).unwrap();
        assert_eq!(again, parsed);
        let err = serde_json::from_str::<ProgramFiles>(r#"{"../x": ""}"#).unwrap_err();
        assert!(err.to_string().contains("file `../x`"), "{err}");
    }
}
