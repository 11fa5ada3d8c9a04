//! Judge0 submissions accepted: the request's fields checked and decoded
//! (base64, `additional_files` as a checked zip), its limits within
//! `[serve]`'s maxima, and the job it becomes.

use axum::http::StatusCode;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use progscore_sandbox::{ByteString, MAX_FILES, MAX_FILES_BYTES, PartialLimitsSpec, ProgramFiles};
use serde::{Deserialize, Serialize};

use super::model::*;
use crate::http::body_limits::BodyShare;
use crate::http::error::ApiError;
use crate::jobs::execute::{
    LimitKey, LimitPart, LimitStage, Part, ProgramJob, RequestLimits, size_value, time_value,
};
use crate::state::AppState;

/// A submission as clients send it. `cpu_time_limit`, `wall_time_limit`
/// (seconds), `memory_limit` (KB) and `max_processes_and_or_threads` are
/// the program's own limits; `cpu_extra_time`, `stack_limit` and
/// `max_file_size` are checked and ignored (see [`accept`]); what progscore
/// cannot honour is refused naming the field.
#[derive(Debug, Deserialize)]
pub(super) struct SubmissionRequest {
    pub(super) source_code: Option<String>,
    pub(super) language_id: Option<i64>,
    #[serde(default)]
    pub(super) stdin: Option<String>,
    #[serde(default)]
    pub(super) expected_output: Option<String>,
    #[serde(default)]
    pub(super) command_line_arguments: Option<String>,
    #[serde(default)]
    pub(super) compiler_options: Option<String>,
    #[serde(default)]
    pub(super) additional_files: Option<String>,
    #[serde(default)]
    pub(super) callback_url: Option<String>,
    #[serde(default)]
    pub(super) enable_network: Option<bool>,
    #[serde(default)]
    pub(super) redirect_stderr_to_stdout: Option<bool>,
    #[serde(default)]
    pub(super) number_of_runs: Option<i64>,
    #[serde(default)]
    pub(super) cpu_time_limit: Option<f64>,
    #[serde(default)]
    pub(super) cpu_extra_time: Option<f64>,
    #[serde(default)]
    pub(super) wall_time_limit: Option<f64>,
    #[serde(default)]
    pub(super) memory_limit: Option<f64>,
    #[serde(default)]
    pub(super) stack_limit: Option<i64>,
    #[serde(default)]
    pub(super) max_processes_and_or_threads: Option<i64>,
    #[serde(default)]
    pub(super) enable_per_process_and_thread_time_limit: Option<bool>,
    #[serde(default)]
    pub(super) enable_per_process_and_thread_memory_limit: Option<bool>,
    #[serde(default)]
    pub(super) max_file_size: Option<i64>,
}

/// What is stored for a submission: the request decoded (text as base64,
/// so any bytes survive) and the profile it runs under.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct StoredRequest {
    pub(super) language_id: i64,
    pub(super) profile: String,
    pub(super) source_code: String,
    pub(super) stdin: Option<String>,
    pub(super) expected_output: Option<String>,
    pub(super) command_line_arguments: Option<String>,
    /// The program's own limits (rows stored before limits were applied
    /// have none: the profile's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) limits: Option<PartialLimitsSpec>,
    /// `additional_files` as sent (a base64 zip; checked when accepted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) additional_files: Option<String>,
}

pub(super) fn encode(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

pub(super) fn decode(text: &str) -> Option<Vec<u8>> {
    // Judge0's clients may wrap base64 at 60 or 76 columns.
    let joined: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    BASE64.decode(joined).ok()
}

/// The request checked and decoded, with the profile its language is.
pub(super) fn accept(
    state: &AppState,
    request: SubmissionRequest,
    base64: bool,
) -> Result<StoredRequest, ApiError> {
    let language_id = request
        .language_id
        .ok_or_else(|| unprocessable("language_id", "can't be blank"))?;
    let profile = served_language(state, language_id).ok_or_else(|| {
        let served: Vec<String> = served_languages(state)
            .into_iter()
            .map(|(id, name, _)| format!("{id} ({name})"))
            .collect();
        unprocessable(
            "language_id",
            format!(
                "language with id {language_id} is not served here (served: {})",
                served.join(", ")
            ),
        )
    })?;
    let text = |field: &str, value: Option<String>| -> Result<Option<String>, ApiError> {
        match value {
            None => Ok(None),
            Some(value) if base64 => decode(&value)
                .map(|bytes| Some(encode(&bytes)))
                .ok_or_else(|| unprocessable(field, "is not valid base64 (base64_encoded=true)")),
            Some(value) => Ok(Some(encode(value.as_bytes()))),
        }
    };
    let limits = submission_limits(&request)?;
    let source_code = text("source_code", request.source_code)?
        .ok_or_else(|| unprocessable("source_code", "can't be blank"))?;
    let refuse = |field: &str, why: &str| Err(unprocessable(field, why));
    if request
        .compiler_options
        .as_deref()
        .is_some_and(|o| !o.trim().is_empty())
    {
        return refuse(
            "compiler_options",
            "is not supported: the profile's build command applies",
        );
    }
    // Files beside the program: a base64 zip, as Judge0 takes them,
    // unpacked once by `accept_files`.
    let additional_files = request.additional_files.filter(|f| !f.is_empty());
    if request
        .callback_url
        .as_deref()
        .is_some_and(|u| !u.is_empty())
    {
        return refuse(
            "callback_url",
            "is not supported: fetch the result with GET /submissions/{token}, or send wait=true",
        );
    }
    if request.enable_network == Some(true) {
        return refuse(
            "enable_network",
            "is not supported: programs never reach a network",
        );
    }
    if request.redirect_stderr_to_stdout == Some(true) {
        return refuse(
            "redirect_stderr_to_stdout",
            "is not supported: stdout and stderr are kept apart",
        );
    }
    if request.number_of_runs.is_some_and(|n| n != 1) {
        return refuse(
            "number_of_runs",
            "must be 1: a program runs once per submission",
        );
    }
    // progscore's limits hold for all the program's processes together.
    for (field, asked) in [
        (
            "enable_per_process_and_thread_time_limit",
            request.enable_per_process_and_thread_time_limit,
        ),
        (
            "enable_per_process_and_thread_memory_limit",
            request.enable_per_process_and_thread_memory_limit,
        ),
    ] {
        if asked == Some(true) {
            return refuse(
                field,
                "is not supported: the limits hold for all the program's processes and threads together",
            );
        }
    }
    Ok(StoredRequest {
        language_id,
        profile,
        source_code,
        stdin: text("stdin", request.stdin)?,
        expected_output: text("expected_output", request.expected_output)?,
        command_line_arguments: request.command_line_arguments,
        limits: limits.run,
        additional_files,
    })
}

/// The most entries (files and folders) an `additional_files` archive may
/// list: the files a program may bring, and as many folders.
pub(super) const MAX_ZIP_ENTRIES: usize = 2 * MAX_FILES;

/// An entry that declares more than this must not inflate more than
/// [`MAX_COMPRESSION_RATIO`] times its compressed size (smaller ones are
/// bounded by their size alone).
pub(super) const RATIO_CHECKED_FROM: u64 = 1 << 20;

/// How many times its compressed size an entry past
/// [`RATIO_CHECKED_FROM`] may inflate to (text compresses 3-10x; a bomb
/// hundreds of times).
pub(super) const MAX_COMPRESSION_RATIO: u64 = 100;

/// The signature every central directory record (one per entry a reader
/// lists) begins with.
pub(super) const CENTRAL_RECORD: &[u8; 4] = b"PK\x01\x02";

/// The files of an accepted submission's `additional_files`, checked and
/// then unpacked once, on blocking threads (not the server's async ones),
/// and checked against its profile: 422 naming `additional_files` when
/// refused. The archive stays with the stored request; the files go with
/// the job, with their share of the body memory budget (taken by their
/// declared size before they are inflated: 503 when it is spent).
pub(super) async fn accept_files(
    state: &AppState,
    request: &mut StoredRequest,
    body: Option<&BodyShare>,
) -> Result<(ProgramFiles, Option<BodyShare>), ApiError> {
    let Some(archive) = request.additional_files.take() else {
        return Ok((ProgramFiles::default(), None));
    };
    let blocking_failed = |e: tokio::task::JoinError| {
        ApiError::internal(format!("unpacking additional_files failed: {e}"))
    };
    let (archive, checked) = tokio::task::spawn_blocking(move || {
        let checked = CheckedArchive::open(&archive);
        (archive, checked)
    })
    .await
    .map_err(blocking_failed)?;
    request.additional_files = Some(archive);
    let checked = checked.map_err(|why| unprocessable("additional_files", why))?;
    let share = body.map(|body| body.more(checked.declared)).transpose()?;
    let files = tokio::task::spawn_blocking(move || checked.inflate())
        .await
        .map_err(blocking_failed)?
        .map_err(|why| unprocessable("additional_files", why))?;
    if let Some((served, _)) = state.served(&request.profile) {
        files
            .check_for(served)
            .map_err(|invalid| unprocessable("additional_files", invalid.to_string()))?;
    }
    Ok((files, share))
}

/// The files of `additional_files` (a base64 zip archive; folders are
/// implied by the files' paths). Before anything is inflated, the archive
/// is checked from its directory: at most [`MAX_ZIP_ENTRIES`] entries
/// (counted by their records' signatures before the directory is even
/// parsed), at most [`MAX_FILES`] files, each entry's declared size and
/// their total within [`MAX_FILES_BYTES`], and no large entry compressed
/// past [`MAX_COMPRESSION_RATIO`]. Then each entry is inflated once, and no
/// further than the size it declares.
#[cfg(test)]
pub(super) fn unzip_files(archive: &str) -> Result<ProgramFiles, String> {
    CheckedArchive::open(archive)?.inflate()
}

/// An archive whose directory passed the checks described at `unzip_files`, nothing
/// of it inflated yet.
pub(super) struct CheckedArchive {
    pub(super) zip: zip::ZipArchive<std::io::Cursor<Vec<u8>>>,
    /// Its files' declared sizes together.
    pub(super) declared: u64,
    pub(super) files: usize,
}

impl CheckedArchive {
    pub(super) fn open(archive: &str) -> Result<CheckedArchive, String> {
        let bytes = BASE64
            .decode(archive.trim())
            .map_err(|e| format!("is not valid base64: {e}"))?;
        let records = bytes
            .windows(CENTRAL_RECORD.len())
            .filter(|window| window == CENTRAL_RECORD)
            .count();
        if records > MAX_ZIP_ENTRIES {
            return Err(format!(
                "the archive lists {records} entries: at most {MAX_ZIP_ENTRIES} are read (at most {MAX_FILES} files beside a program, and their folders)"
            ));
        }
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
            .map_err(|e| format!("is not a zip archive: {e}"))?;
        let mut files = 0;
        let mut declared_total: u64 = 0;
        for index in 0..zip.len() {
            // Raw: the entry's directory record, nothing inflated.
            let entry = zip
                .by_index_raw(index)
                .map_err(|e| format!("entry {index} cannot be read: {e}"))?;
            if entry.is_dir() {
                continue;
            }
            files += 1;
            if files > MAX_FILES {
                return Err(format!(
                    "the archive holds more than {MAX_FILES} files: at most {MAX_FILES} may be placed beside a program"
                ));
            }
            let (name, declared, packed) = (entry.name(), entry.size(), entry.compressed_size());
            declared_total = declared_total.saturating_add(declared);
            if declared_total > MAX_FILES_BYTES as u64 {
                return Err(format!(
                    "the files declare more than {MAX_FILES_BYTES} bytes together (`{name}` alone {declared})"
                ));
            }
            if declared > RATIO_CHECKED_FROM && declared / packed.max(1) > MAX_COMPRESSION_RATIO {
                return Err(format!(
                    "`{name}` inflates {declared} bytes from {packed}: more than {MAX_COMPRESSION_RATIO} times its compressed size is refused for files over {RATIO_CHECKED_FROM} bytes"
                ));
            }
        }
        Ok(CheckedArchive {
            zip,
            declared: declared_total,
            files,
        })
    }

    /// Each file inflated once, no further than the size it declares.
    pub(super) fn inflate(mut self) -> Result<ProgramFiles, String> {
        use std::io::Read as _;
        let mut inflated = Vec::with_capacity(self.files);
        for index in 0..self.zip.len() {
            let mut entry = self
                .zip
                .by_index(index)
                .map_err(|e| format!("entry {index} cannot be read: {e}"))?;
            if entry.is_dir() {
                continue;
            }
            let name = entry.name().to_string();
            let declared = entry.size();
            let mut content = Vec::with_capacity(usize::try_from(declared).unwrap_or(0));
            (&mut entry)
                .take(declared.saturating_add(1))
                .read_to_end(&mut content)
                .map_err(|e| format!("`{name}` cannot be inflated: {e}"))?;
            if content.len() as u64 > declared {
                return Err(format!(
                    "`{name}` inflates past the {declared} bytes it declares"
                ));
            }
            inflated.push((name, ByteString(content)));
        }
        ProgramFiles::new(inflated).map_err(|invalid| invalid.to_string())
    }
}

/// The submission's own limits: `cpu_time_limit` (s) the CPU time of all
/// its processes together, `wall_time_limit` (s) its wall clock,
/// `memory_limit` (KB) its memory, `max_processes_and_or_threads` its
/// processes and threads. Checked and ignored: `cpu_extra_time` (the grace
/// before the kill; the verdict is the same), `stack_limit` (the stack is
/// bounded by the memory limit), `max_file_size` (files go to a tmpfs
/// bounded by the profile's `tmp`).
pub(super) fn submission_limits(request: &SubmissionRequest) -> Result<RequestLimits, ApiError> {
    let mut limits = RequestLimits::default();
    let stage = LimitStage::Run;
    if let Some(seconds) = request.cpu_time_limit {
        let value = time_value(seconds, 1000.0, "seconds")
            .map_err(|why| unprocessable("cpu_time_limit", why.to_string()))?;
        limits.set_cpu_time(stage, value);
    }
    if let Some(seconds) = request.wall_time_limit {
        let value = time_value(seconds, 1000.0, "seconds")
            .map_err(|why| unprocessable("wall_time_limit", why.to_string()))?;
        limits.set_timeout(stage, value);
    }
    if let Some(kb) = request.memory_limit {
        let value = size_value(kb, 1024.0, "KB")
            .map_err(|why| unprocessable("memory_limit", why.to_string()))?;
        limits.set_memory(stage, value);
    }
    if let Some(pids) = request.max_processes_and_or_threads {
        if pids < 1 {
            return Err(unprocessable(
                "max_processes_and_or_threads",
                format!("{pids}: give at least 1"),
            ));
        }
        limits.set_pids(stage, u32::try_from(pids).unwrap_or(u32::MAX));
    }
    if let Some(extra) = request.cpu_extra_time
        && !(extra.is_finite() && extra >= 0.0)
    {
        return Err(unprocessable(
            "cpu_extra_time",
            format!("{extra} is not a time: give a number of seconds >= 0"),
        ));
    }
    for (field, value) in [
        ("stack_limit", request.stack_limit),
        ("max_file_size", request.max_file_size),
    ] {
        if let Some(kb) = value
            && kb < 0
        {
            return Err(unprocessable(
                field,
                format!("{kb} is not a size: give a number of KB >= 0"),
            ));
        }
    }
    Ok(limits)
}

/// The request field a limit came from.
pub(super) fn limit_field(limit: LimitPart) -> String {
    match limit.key {
        LimitKey::CpuTime => "cpu_time_limit".into(),
        LimitKey::Timeout => "wall_time_limit".into(),
        LimitKey::Memory => "memory_limit".into(),
        LimitKey::Pids => "max_processes_and_or_threads".into(),
        // Not set by a submission.
        _ => limit.path(),
    }
}

/// The job a stored request runs as, with its files (unpacked once, when
/// it was accepted).
pub(super) fn job_of(request: &StoredRequest, files: ProgramFiles) -> ProgramJob {
    let bytes = |text: &Option<String>| text.as_deref().and_then(decode);
    let args = request
        .command_line_arguments
        .as_deref()
        .map(|line| line.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    ProgramJob::run_once(
        decode(&request.source_code).unwrap_or_default(),
        request.profile.clone(),
        args,
        bytes(&request.stdin),
    )
    .with_limits(RequestLimits {
        run: request.limits.clone(),
        compile: None,
    })
    .with_files(files)
}

pub(super) fn field_name(part: Part) -> String {
    match part {
        Part::Program => "source_code".into(),
        Part::Invocations => "language_id".into(),
        Part::Args(_) => "command_line_arguments".into(),
        Part::Stdin(_) => "stdin".into(),
        Part::Limit(limit) => limit_field(limit),
    }
}

/// The served maxima and the profile's delivery limits, checked before a
/// submission is stored, so a bad one gets a 4xx naming the field.
pub(super) fn check_input(
    state: &AppState,
    request: &StoredRequest,
    job: &ProgramJob,
) -> Option<ApiError> {
    let (profile, _) = state.served(&request.profile)?;
    crate::jobs::execute::check_job(state.settings(), profile, job, &field_name)
        .err()
        .map(|error| {
            if error.status == StatusCode::BAD_REQUEST {
                error.with_status(StatusCode::UNPROCESSABLE_ENTITY)
            } else {
                error
            }
        })
}

#[cfg(test)]
mod zip_tests {
    use std::io::Write as _;

    use zip::write::SimpleFileOptions;

    use super::*;

    /// A zip of `entries` (name, bytes; a name ending in `/` a folder),
    /// each deflated.
    fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options =
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in entries {
            if name.ends_with('/') {
                writer.add_directory(*name, options).unwrap();
            } else {
                writer.start_file(*name, options).unwrap();
                writer.write_all(bytes).unwrap();
            }
        }
        writer.finish().unwrap().into_inner()
    }

    fn unzip(bytes: &[u8]) -> Result<ProgramFiles, String> {
        unzip_files(&BASE64.encode(bytes))
    }

    /// `bytes` with every entry's compressed data overwritten: inflating
    /// any of it fails, so a refusal that names something else was made
    /// before inflating.
    fn with_data_spoiled(mut bytes: Vec<u8>) -> Vec<u8> {
        let mut offset = 0;
        while let Some(found) = bytes[offset..].windows(4).position(|w| w == b"PK\x03\x04") {
            let header = offset + found;
            let name = u16::from_le_bytes([bytes[header + 26], bytes[header + 27]]) as usize;
            let extra = u16::from_le_bytes([bytes[header + 28], bytes[header + 29]]) as usize;
            let packed = u32::from_le_bytes(bytes[header + 18..header + 22].try_into().unwrap());
            let data = header + 30 + name + extra;
            for byte in &mut bytes[data..data + packed as usize] {
                *byte = 0xff;
            }
            offset = data + packed as usize;
        }
        bytes
    }

    #[test]
    fn files_and_folders_are_unpacked() {
        let files = unzip(&zip_of(&[
            ("data/", b""),
            ("data/in.txt", b"1 2 3\n"),
            ("square.h", b"int square(int);\n"),
        ]))
        .unwrap();
        let unpacked: Vec<(&str, &[u8])> = files.iter().collect();
        assert_eq!(
            unpacked,
            [
                ("data/in.txt", &b"1 2 3\n"[..]),
                ("square.h", &b"int square(int);\n"[..])
            ]
        );
    }

    #[test]
    fn a_zip_of_many_empty_entries_is_refused_by_its_entry_count_before_it_is_parsed() {
        let names: Vec<String> = (0..=MAX_ZIP_ENTRIES).map(|i| format!("e{i}")).collect();
        let entries: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
        let refused = unzip(&zip_of(&entries)).unwrap_err();
        assert!(
            refused.contains(&format!("lists {} entries", MAX_ZIP_ENTRIES + 1)),
            "{refused}"
        );
        // Counted before the directory is parsed: records alone, with no
        // archive around them, are refused by their count.
        let records = CENTRAL_RECORD.repeat(100_000);
        let refused = unzip(&records).unwrap_err();
        assert!(refused.contains("lists 100000 entries"), "{refused}");
        // Within the entries but past the files a program may bring.
        let names: Vec<String> = (0..=MAX_FILES).map(|i| format!("f{i}")).collect();
        let entries: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
        let refused = unzip(&with_data_spoiled(zip_of(&entries))).unwrap_err();
        assert!(
            refused.contains(&format!("more than {MAX_FILES} files")),
            "{refused}"
        );
    }

    #[test]
    fn a_highly_compressed_entry_is_refused_by_its_declared_size_or_ratio_before_inflating() {
        // 8 MiB of zeros in a few KiB: within the bytes, past the ratio.
        let bomb = with_data_spoiled(zip_of(&[("zeros", &vec![0; 8 << 20])]));
        let refused = unzip(&bomb).unwrap_err();
        assert!(
            refused.contains("`zeros` inflates 8388608 bytes from")
                && refused.contains("more than 100 times"),
            "{refused}"
        );
        // Past the bytes all files may hold, however well compressed (each
        // small enough that its ratio is not asked).
        let megabyte = vec![0; 1 << 20];
        let names: Vec<String> = (0..17).map(|i| format!("m{i}")).collect();
        let entries: Vec<(&str, &[u8])> = names
            .iter()
            .map(|n| (n.as_str(), megabyte.as_slice()))
            .collect();
        let refused = unzip(&with_data_spoiled(zip_of(&entries))).unwrap_err();
        assert!(
            refused.contains(&format!("declare more than {MAX_FILES_BYTES} bytes")),
            "{refused}"
        );
        // A small entry is bounded by its size alone.
        assert!(unzip(&zip_of(&[("zeros", &vec![0; 64 << 10])])).is_ok());
    }

    #[test]
    fn an_entry_is_inflated_no_further_than_the_size_it_declares() {
        let mut bytes = zip_of(&[("in.txt", b"a line longer than it claims\n")]);
        // The directory says 5 bytes.
        let record = bytes.windows(4).position(|w| w == CENTRAL_RECORD).unwrap();
        bytes[record + 24..record + 28].copy_from_slice(&5u32.to_le_bytes());
        let refused = unzip(&bytes).unwrap_err();
        assert!(
            refused.contains("`in.txt` inflates past the 5 bytes it declares"),
            "{refused}"
        );
    }
}
