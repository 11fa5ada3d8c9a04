//! Judge0 CE's dialect: `/submissions` (single and batch, `wait`,
//! `base64_encoded`, `fields`), `/languages`, `/statuses`, `/about`,
//! `/config_info`, in the shapes the `judge0` Python SDK and Judge0's other
//! clients read, so that they work by a change of URL.
//!
//! Status mapping (the three-valued verdict kept):
//! - anything that proves nothing about the program (a sandbox error, a
//!   case not run, a timeout the machine was too busy to prove, the sandbox
//!   refusing the run, a stdout cut short that matches the expected output
//!   so far) is 13 Internal Error, never Wrong Answer or a runtime error;
//! - a proven timeout is 5; a build that failed is 6 with the compiler's
//!   output; a memory kill is 12 with signal 9;
//! - exit 0 is 3 Accepted, or 4 Wrong Answer when `expected_output` is
//!   given and differs (compared as Judge0 does: each line's trailing
//!   whitespace and the text's surrounding blank space ignored);
//! - any other exit is 11 (NZEC), or, for 128 + a signal, the signal's own
//!   status (7 SIGSEGV, 8 SIGXFSZ, 9 SIGFPE, 10 SIGABRT, 12 others).
//!
//! Limits: `cpu_time_limit` and `wall_time_limit` (seconds), `memory_limit`
//! (KB) and `max_processes_and_or_threads` are the program's own limits,
//! each within `[serve]`'s maxima, else 422 naming the field (nothing is
//! stored); `cpu_extra_time`, `stack_limit` and `max_file_size` are checked
//! and ignored; per-process limits and the network are refused.
//!
//! Tokens and results live in the evidence store's `submissions` table, so
//! `GET /submissions/{token}` answers after a restart. A submission whose
//! server died before it ran is answered 13, saying so. Beyond Judge0:
//! `wait=true` also on batches, and no batch-size cap of 20 (the
//! `[serve] max_batch_items` bound applies).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Extension, Path, Query, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use progscore_sandbox::{
    ByteString, CapturedStream, MAX_FILES, MAX_FILES_BYTES, Outcome, PartialLimitsSpec,
    ProgramFiles,
};
use progscore_scoring::store_call;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::body::JsonBody;
use crate::body_limits::BodyShare;
use crate::error::ApiError;
use crate::execute::{
    Executed, JobError, LimitKey, LimitPart, LimitStage, OBSERVATION_HEADER, Part, ProgramJob,
    RequestLimits, execute, size_value, time_value, unproven_reason,
};
use crate::state::AppState;

/// The dialect's name in the submissions table.
const DIALECT: &str = "judge0";

/// The Judge0 CE version whose language ids are served (the SDK maps its
/// language aliases by this version).
const JUDGE0_VERSION: &str = "1.13.1";

/// Judge0 CE 1.13.1's language ids, their names there, and the progscore
/// language name each stands for. An id is listed by `/languages` when its
/// language name is a served profile (or a `[languages]` name of one).
const LANGUAGES: &[(i64, &str, &str)] = &[
    (46, "Bash", "bash"),
    (50, "C (GCC)", "c"),
    (51, "C# (Mono)", "csharp"),
    (52, "C++ (GCC)", "cpp"),
    (53, "C++ (GCC)", "cpp"),
    (54, "C++ (GCC)", "cpp"),
    (56, "D (DMD)", "d"),
    (60, "Go", "go"),
    (62, "Java (OpenJDK)", "java"),
    (63, "JavaScript (Node.js)", "javascript"),
    (64, "Lua", "lua"),
    (68, "PHP", "php"),
    (71, "Python (3)", "python"),
    (72, "Ruby", "ruby"),
    (73, "Rust", "rust"),
    (74, "TypeScript", "typescript"),
    (80, "R", "r"),
    (81, "Scala", "scala"),
    (85, "Perl", "perl"),
];

/// Judge0's statuses.
const STATUSES: &[(i64, &str)] = &[
    (1, "In Queue"),
    (2, "Processing"),
    (3, "Accepted"),
    (4, "Wrong Answer"),
    (5, "Time Limit Exceeded"),
    (6, "Compilation Error"),
    (7, "Runtime Error (SIGSEGV)"),
    (8, "Runtime Error (SIGXFSZ)"),
    (9, "Runtime Error (SIGFPE)"),
    (10, "Runtime Error (SIGABRT)"),
    (11, "Runtime Error (NZEC)"),
    (12, "Runtime Error (Other)"),
    (13, "Internal Error"),
    (14, "Exec Format Error"),
];
const IN_QUEUE: i64 = 1;
const ACCEPTED: i64 = 3;
const WRONG_ANSWER: i64 = 4;
const TIME_LIMIT_EXCEEDED: i64 = 5;
const COMPILATION_ERROR: i64 = 6;
const NZEC: i64 = 11;
const RUNTIME_ERROR_OTHER: i64 = 12;
const INTERNAL_ERROR: i64 = 13;

/// What `GET /submissions/{token}` returns without `fields`, as Judge0.
const DEFAULT_FIELDS: &[&str] = &[
    "token",
    "time",
    "memory",
    "stdout",
    "stderr",
    "compile_output",
    "message",
    "status",
];

/// Every field a submission has.
const ALL_FIELDS: &[&str] = &[
    "source_code",
    "language_id",
    "stdin",
    "expected_output",
    "command_line_arguments",
    "stdout",
    "stderr",
    "compile_output",
    "message",
    "status",
    "status_id",
    "exit_code",
    "exit_signal",
    "time",
    "wall_time",
    "memory",
    "token",
    "created_at",
    "finished_at",
    "language",
];

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/submissions", post(create))
        .route("/submissions/batch", post(create_batch).get(get_batch))
        .route("/submissions/{token}", get(get_one))
        .route("/languages", get(languages))
        .route("/languages/{id}", get(language))
        .route("/statuses", get(statuses))
        .route("/about", get(about))
        .route("/config_info", get(config_info))
}

/// A refusal in Judge0's shape: `{"FIELD": ["what is wrong"]}` with 422,
/// as its clients read validation errors.
fn unprocessable(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::bad_field(field, message).with_status(StatusCode::UNPROCESSABLE_ENTITY)
}

fn judge0_error(error: ApiError) -> Response {
    let Some(field) = error.field.clone() else {
        return error.into_response();
    };
    let mut response = (error.status, Json(json!({ field: [error.message] }))).into_response();
    if let Some(after) = error.retry_after
        && let Ok(value) = HeaderValue::from_str(&after.as_secs().max(1).to_string())
    {
        response
            .headers_mut()
            .insert(axum::http::header::RETRY_AFTER, value);
    }
    response
}

/// The query options Judge0 takes (`base64_encoded`, `wait`, `fields`,
/// `tokens`), each checked by name.
struct Options {
    base64: bool,
    wait: bool,
    fields: Vec<&'static str>,
    tokens: Vec<String>,
}

impl Options {
    fn parse(query: &BTreeMap<String, String>) -> Result<Options, ApiError> {
        let flag = |name: &str| -> Result<bool, ApiError> {
            match query.get(name).map(String::as_str) {
                None | Some("false") | Some("") => Ok(false),
                Some("true") => Ok(true),
                Some(other) => Err(ApiError::bad_field(
                    name,
                    format!("`{other}` is not a boolean (true or false)"),
                )),
            }
        };
        let fields = match query.get("fields").map(String::as_str) {
            None | Some("") => DEFAULT_FIELDS.to_vec(),
            Some("*") => ALL_FIELDS.to_vec(),
            Some(list) => {
                let mut fields = Vec::new();
                let mut unknown = Vec::new();
                for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    match ALL_FIELDS.iter().find(|known| **known == name) {
                        Some(known) => fields.push(*known),
                        None => unknown.push(name.to_string()),
                    }
                }
                if !unknown.is_empty() {
                    return Err(ApiError::bad_field(
                        "fields",
                        format!("invalid fields: [{}]", unknown.join(", ")),
                    ));
                }
                fields
            }
        };
        let tokens = query
            .get("tokens")
            .map(|list| {
                list.split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        Ok(Options {
            base64: flag("base64_encoded")?,
            wait: flag("wait")?,
            fields,
            tokens,
        })
    }
}

/// A submission as clients send it. `cpu_time_limit`, `wall_time_limit`
/// (seconds), `memory_limit` (KB) and `max_processes_and_or_threads` are
/// the program's own limits; `cpu_extra_time`, `stack_limit` and
/// `max_file_size` are checked and ignored (see [`accept`]); what progscore
/// cannot honour is refused naming the field.
#[derive(Debug, Deserialize)]
struct SubmissionRequest {
    source_code: Option<String>,
    language_id: Option<i64>,
    #[serde(default)]
    stdin: Option<String>,
    #[serde(default)]
    expected_output: Option<String>,
    #[serde(default)]
    command_line_arguments: Option<String>,
    #[serde(default)]
    compiler_options: Option<String>,
    #[serde(default)]
    additional_files: Option<String>,
    #[serde(default)]
    callback_url: Option<String>,
    #[serde(default)]
    enable_network: Option<bool>,
    #[serde(default)]
    redirect_stderr_to_stdout: Option<bool>,
    #[serde(default)]
    number_of_runs: Option<i64>,
    #[serde(default)]
    cpu_time_limit: Option<f64>,
    #[serde(default)]
    cpu_extra_time: Option<f64>,
    #[serde(default)]
    wall_time_limit: Option<f64>,
    #[serde(default)]
    memory_limit: Option<f64>,
    #[serde(default)]
    stack_limit: Option<i64>,
    #[serde(default)]
    max_processes_and_or_threads: Option<i64>,
    #[serde(default)]
    enable_per_process_and_thread_time_limit: Option<bool>,
    #[serde(default)]
    enable_per_process_and_thread_memory_limit: Option<bool>,
    #[serde(default)]
    max_file_size: Option<i64>,
}

/// What is stored for a submission: the request decoded (text as base64,
/// so any bytes survive) and the profile it runs under.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredRequest {
    language_id: i64,
    profile: String,
    source_code: String,
    stdin: Option<String>,
    expected_output: Option<String>,
    command_line_arguments: Option<String>,
    /// The program's own limits (rows stored before limits were applied
    /// have none: the profile's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    limits: Option<PartialLimitsSpec>,
    /// `additional_files` as sent (a base64 zip; checked when accepted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    additional_files: Option<String>,
}

/// What is stored once a submission has run (text as base64).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct StoredResult {
    status_id: i64,
    stdout: Option<String>,
    stderr: Option<String>,
    compile_output: Option<String>,
    message: Option<String>,
    exit_code: Option<i64>,
    exit_signal: Option<i64>,
    time: Option<f64>,
    wall_time: Option<f64>,
    memory: Option<u64>,
    observation_id: Option<String>,
}

impl StoredResult {
    fn internal_error(message: impl Into<String>) -> StoredResult {
        StoredResult {
            status_id: INTERNAL_ERROR,
            message: Some(encode(message.into().as_bytes())),
            ..StoredResult::default()
        }
    }
}

fn encode(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

fn decode(text: &str) -> Option<Vec<u8>> {
    // Judge0's clients may wrap base64 at 60 or 76 columns.
    let joined: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    BASE64.decode(joined).ok()
}

/// The request checked and decoded, with the profile its language is.
fn accept(
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
const MAX_ZIP_ENTRIES: usize = 2 * MAX_FILES;

/// An entry that declares more than this must not inflate more than
/// [`MAX_COMPRESSION_RATIO`] times its compressed size (smaller ones are
/// bounded by their size alone).
const RATIO_CHECKED_FROM: u64 = 1 << 20;

/// How many times its compressed size an entry past
/// [`RATIO_CHECKED_FROM`] may inflate to (text compresses 3-10x; a bomb
/// hundreds of times).
const MAX_COMPRESSION_RATIO: u64 = 100;

/// The signature every central directory record (one per entry a reader
/// lists) begins with.
const CENTRAL_RECORD: &[u8; 4] = b"PK\x01\x02";

/// The files of an accepted submission's `additional_files`, checked and
/// then unpacked once, on blocking threads (not the server's async ones),
/// and checked against its profile: 422 naming `additional_files` when
/// refused. The archive stays with the stored request; the files go with
/// the job, with their share of the body memory budget (taken by their
/// declared size before they are inflated: 503 when it is spent).
async fn accept_files(
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
fn unzip_files(archive: &str) -> Result<ProgramFiles, String> {
    CheckedArchive::open(archive)?.inflate()
}

/// An archive whose directory passed the checks described at `unzip_files`, nothing
/// of it inflated yet.
struct CheckedArchive {
    zip: zip::ZipArchive<std::io::Cursor<Vec<u8>>>,
    /// Its files' declared sizes together.
    declared: u64,
    files: usize,
}

impl CheckedArchive {
    fn open(archive: &str) -> Result<CheckedArchive, String> {
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
    fn inflate(mut self) -> Result<ProgramFiles, String> {
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
fn submission_limits(request: &SubmissionRequest) -> Result<RequestLimits, ApiError> {
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
fn limit_field(limit: LimitPart) -> String {
    match limit.key {
        LimitKey::CpuTime => "cpu_time_limit".into(),
        LimitKey::Timeout => "wall_time_limit".into(),
        LimitKey::Memory => "memory_limit".into(),
        LimitKey::Pids => "max_processes_and_or_threads".into(),
        // Not set by a submission.
        _ => limit.path(),
    }
}

/// The served Judge0 languages: id, Judge0 name, progscore profile.
fn served_languages(state: &AppState) -> Vec<(i64, &'static str, String)> {
    LANGUAGES
        .iter()
        .filter_map(|(id, name, language)| {
            state
                .language_profile(language)
                .map(|profile| (*id, *name, profile.to_string()))
        })
        .collect()
}

fn served_language(state: &AppState, id: i64) -> Option<String> {
    served_languages(state)
        .into_iter()
        .find(|(served, _, _)| *served == id)
        .map(|(_, _, profile)| profile)
}

/// The job a stored request runs as, with its files (unpacked once, when
/// it was accepted).
fn job_of(request: &StoredRequest, files: ProgramFiles) -> ProgramJob {
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

fn field_name(part: Part) -> String {
    match part {
        Part::Program => "source_code".into(),
        Part::Invocations => "language_id".into(),
        Part::Args(_) => "command_line_arguments".into(),
        Part::Stdin(_) => "stdin".into(),
        Part::Limit(limit) => limit_field(limit),
    }
}

/// How long a submission that found its profile busy waits before asking
/// for a turn again.
const OVERLOAD_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);

/// Runs a stored request; what to store as its result. A request the
/// sandbox could not be given (a field at fault) is `Err`.
async fn run(
    state: &Arc<AppState>,
    request: &StoredRequest,
    job: ProgramJob,
) -> Result<StoredResult, ApiError> {
    let expected = request.expected_output.as_deref().and_then(decode);
    let mut outcome = execute(state, job.clone(), &field_name).await;
    // A submission is queued work: a busy profile delays it, it never
    // decides it. It stays "In Queue" until it gets a turn (or the server
    // drains, and the next start fails it as abandoned).
    while matches!(outcome, Err(JobError::Busy { .. })) && !state.is_draining() {
        tokio::time::sleep(OVERLOAD_PAUSE).await;
        outcome = execute(state, job.clone(), &field_name).await;
    }
    match outcome {
        Ok(executed) => Ok(judge(&executed, expected.as_deref())),
        Err(JobError::Invalid(error)) => Err(error),
        Err(JobError::Busy { .. }) => Ok(StoredResult::internal_error(
            "the server shut down before the program ran; submit it again",
        )),
        Err(JobError::Refused { message, .. }) => Ok(StoredResult::internal_error(format!(
            "the sandbox could not run the program: {message}"
        ))),
        Err(JobError::Cancelled) => Ok(StoredResult::internal_error(
            "the server shut down before the program ran to its end; submit it again",
        )),
        Err(JobError::Internal {
            incident: message, ..
        }) => Ok(StoredResult::internal_error(format!(
            "progscore failed: {message}"
        ))),
    }
}

/// Judge0's view of a run (see the module doc for the mapping).
fn judge(executed: &Executed, expected: Option<&[u8]>) -> StoredResult {
    let run = &executed.observation.run;
    let observation = executed.observation.id.clone();
    let unproven = |what: String| StoredResult {
        observation_id: Some(observation.clone()),
        ..StoredResult::internal_error(format!("{what} (observation {observation})"))
    };
    let compile_output = run.compile.as_ref().map(|compile| {
        let mut output = compile.event.stdout.data.0.clone();
        output.extend_from_slice(&compile.event.stderr.data.0);
        encode(&output)
    });
    if let Some(compile) = &run.compile
        && compile.event.outcome.is_unproven()
    {
        return unproven(unproven_reason(&compile.event.outcome, "the build"));
    }
    let Some(event) = executed.event() else {
        return unproven("the run has no event".into());
    };
    if let Outcome::CompileError { reason } = &event.outcome {
        return StoredResult {
            status_id: COMPILATION_ERROR,
            compile_output,
            message: Some(encode(reason.as_bytes())),
            observation_id: Some(observation),
            ..StoredResult::default()
        };
    }
    if event.outcome.is_unproven() {
        return unproven(unproven_reason(&event.outcome, "the program"));
    }
    let usage = event.usage.as_ref();
    let mut result = StoredResult {
        status_id: ACCEPTED,
        stdout: Some(encode(&event.stdout.data.0)),
        stderr: Some(encode(&event.stderr.data.0)),
        compile_output,
        time: usage.and_then(|u| u.cpu_ms).map(|ms| ms as f64 / 1000.0),
        wall_time: Some(event.duration_ms as f64 / 1000.0),
        memory: usage
            .and_then(|u| u.peak_memory_bytes)
            .map(|bytes| bytes / 1024),
        observation_id: Some(observation.clone()),
        ..StoredResult::default()
    };
    match &event.outcome {
        Outcome::Exited { exit_code: 0 } => {
            result.exit_code = Some(0);
            if let Some(expected) = expected {
                match compare(&event.stdout, expected) {
                    Some(true) => {}
                    Some(false) => result.status_id = WRONG_ANSWER,
                    None => {
                        return unproven(
                            "stdout was cut at the profile's output limit and matches the expected output as far as it goes".into(),
                        );
                    }
                }
            }
        }
        Outcome::Exited { exit_code } => {
            let signal = (129..=192).contains(exit_code).then(|| exit_code - 128);
            result.status_id = match signal {
                Some(11) => 7,
                Some(25) => 8,
                Some(8) => 9,
                Some(6) => 10,
                Some(_) => RUNTIME_ERROR_OTHER,
                None => NZEC,
            };
            result.exit_code = Some(*exit_code);
            result.exit_signal = signal;
        }
        Outcome::TimedOut { .. } => {
            result.status_id = TIME_LIMIT_EXCEEDED;
            result.message = Some(encode(b"Time limit exceeded"));
        }
        Outcome::MemoryLimit => {
            result.status_id = RUNTIME_ERROR_OTHER;
            result.exit_signal = Some(9);
            result.message = Some(encode(
                b"Memory limit exceeded: the program was killed (signal 9)",
            ));
        }
        // The unproven and compile outcomes were answered above.
        other => return unproven(other.kind().to_string()),
    }
    result
}

/// Judge0's comparison: each line's trailing whitespace and the text's
/// surrounding blank space ignored. `None` when stdout was cut short and
/// the kept part does not already differ: nothing is proven.
fn compare(stdout: &CapturedStream, expected: &[u8]) -> Option<bool> {
    let kept = &stdout.data.0;
    if stdout.truncated {
        return if expected.starts_with(kept) {
            None
        } else {
            Some(false)
        };
    }
    Some(normalize(kept) == normalize(expected))
}

/// Judge0's own normalisation (Ruby's `split("\n").map(&:rstrip)
/// .join("\n").strip`), on bytes: only ASCII whitespace and NUL are blank
/// space, so a trailing no-break space or any other Unicode space still
/// differs, and bytes that are not UTF-8 are compared as they are, never
/// replaced.
fn normalize(text: &[u8]) -> Vec<u8> {
    fn blank(byte: &u8) -> bool {
        matches!(byte, b'\0' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
    }
    fn trim_end(mut bytes: &[u8]) -> &[u8] {
        while let [rest @ .., last] = bytes
            && blank(last)
        {
            bytes = rest;
        }
        bytes
    }
    let joined = text
        .split(|byte| *byte == b'\n')
        .map(trim_end)
        .collect::<Vec<_>>()
        .join(&b'\n');
    let start = joined
        .iter()
        .position(|byte| !blank(byte))
        .unwrap_or(joined.len());
    trim_end(&joined[start..]).to_vec()
}

/// The Judge0 JSON of a stored submission, with the asked fields only.
fn render(
    token: &str,
    request: &StoredRequest,
    result: Option<&StoredResult>,
    created_at: &str,
    finished_at: Option<&str>,
    options: &Options,
) -> Result<Value, ApiError> {
    let status_id = result.map_or(IN_QUEUE, |r| r.status_id);
    let description = STATUSES
        .iter()
        .find(|(id, _)| *id == status_id)
        .map_or("Internal Error", |(_, d)| d);
    let language_name = LANGUAGES
        .iter()
        .find(|(id, _, _)| *id == request.language_id)
        .map_or("", |(_, name, _)| name);
    let mut out = serde_json::Map::new();
    for field in &options.fields {
        let stored_text = |text: Option<&String>| text.cloned();
        let value = match *field {
            "source_code" => text_value(Some(&request.source_code), options.base64, field)?,
            "stdin" => text_value(request.stdin.as_ref(), options.base64, field)?,
            "expected_output" => {
                text_value(request.expected_output.as_ref(), options.base64, field)?
            }
            "command_line_arguments" => json!(request.command_line_arguments),
            "language_id" => json!(request.language_id),
            "language" => json!({"id": request.language_id, "name": language_name}),
            "stdout" => text_value(
                result.and_then(|r| stored_text(r.stdout.as_ref())).as_ref(),
                options.base64,
                field,
            )?,
            "stderr" => text_value(
                result.and_then(|r| stored_text(r.stderr.as_ref())).as_ref(),
                options.base64,
                field,
            )?,
            "compile_output" => text_value(
                result
                    .and_then(|r| stored_text(r.compile_output.as_ref()))
                    .as_ref(),
                options.base64,
                field,
            )?,
            "message" => text_value(
                result
                    .and_then(|r| stored_text(r.message.as_ref()))
                    .as_ref(),
                options.base64,
                field,
            )?,
            "status" => json!({"id": status_id, "description": description}),
            "status_id" => json!(status_id),
            "exit_code" => json!(result.and_then(|r| r.exit_code)),
            "exit_signal" => json!(result.and_then(|r| r.exit_signal)),
            // Judge0 writes times as decimal strings.
            "time" => json!(result.and_then(|r| r.time).map(|t| format!("{t:.3}"))),
            "wall_time" => json!(result.and_then(|r| r.wall_time).map(|t| format!("{t:.3}"))),
            "memory" => json!(result.and_then(|r| r.memory)),
            "token" => json!(token),
            "created_at" => json!(created_at),
            "finished_at" => json!(finished_at),
            _ => Value::Null,
        };
        out.insert((*field).to_string(), value);
    }
    Ok(Value::Object(out))
}

/// A text field: base64 as stored when asked, else UTF-8 (as Judge0, text
/// that is not UTF-8 needs `base64_encoded=true`).
fn text_value(stored: Option<&String>, base64: bool, field: &str) -> Result<Value, ApiError> {
    let Some(stored) = stored else {
        return Ok(Value::Null);
    };
    if base64 {
        return Ok(json!(stored));
    }
    let bytes = decode(stored).unwrap_or_default();
    String::from_utf8(bytes).map(Value::String).map_err(|_| {
        ApiError::bad_field(
            field,
            "this field cannot be converted to UTF-8: ask with base64_encoded=true",
        )
    })
}

/// This server's owner name and lock file, recorded with each submission
/// it runs.
fn this_owner(state: &AppState) -> (String, Option<String>) {
    match state.submissions_owner() {
        Some(owner) => (
            owner.name().to_string(),
            Some(owner.lock_path().display().to_string()),
        ),
        // No lock to record: a row another server can never judge gone.
        None => (format!("progscore-serve-{}", std::process::id()), None),
    }
}

/// Whether the server that runs an unfinished submission is provably gone:
/// its lock file exists and nobody holds the lock (the kernel released it
/// when that process ended, however it ended; pids prove nothing across
/// PID namespaces). A row from before locks were recorded was written by a
/// progscore that can no longer open this store (its schema is newer), so
/// its owner has stopped.
fn owner_gone(state: &AppState, stored: &progscore_scoring::evidence::StoredSubmission) -> bool {
    if stored.owner == this_owner(state).0 {
        return false;
    }
    match &stored.owner_lock {
        Some(lock) => progscore_sandbox::lock_proves_owner_gone(std::path::Path::new(lock)),
        None => true,
    }
}

/// Fails what this server accepted and did not finish (a cancelled run
/// stores its own result; this is for rows whose task never got there), so
/// that nothing of a server that stopped stays "In Queue". Called once the
/// server's runs have ended.
pub(crate) fn fail_unfinished(state: &AppState) {
    let Some(owner) = state.submissions_owner() else {
        return;
    };
    let result = StoredResult::internal_error(
        "the server stopped before this submission ran; submit it again",
    );
    let Ok(text) = serde_json::to_string(&result) else {
        return;
    };
    match state
        .session()
        .store
        .finish_unfinished_submissions_of(owner.name(), &text)
    {
        Ok(0) => {}
        Ok(failed) => tracing::warn!(failed, "failed the submissions this server did not finish"),
        Err(error) => {
            tracing::error!(%error, "could not fail the submissions this server did not finish")
        }
    }
}

/// A stored submission as Judge0 renders it; an unfinished one whose owner
/// died is finished as Internal Error first.
fn load(
    state: &AppState,
    token: &str,
    options: &Options,
) -> Result<Option<(Value, Option<String>)>, ApiError> {
    let store = &state.session().store;
    let Some(mut stored) = store
        .submission(token)
        .map_err(|e| ApiError::internal(e.to_string()))?
    else {
        return Ok(None);
    };
    if stored.dialect != DIALECT {
        return Ok(None);
    }
    if stored.result.is_none() && owner_gone(state, &stored) {
        let abandoned = StoredResult::internal_error(
            "the server that accepted this submission stopped before it ran; submit it again",
        );
        let text =
            serde_json::to_string(&abandoned).map_err(|e| ApiError::internal(e.to_string()))?;
        let _ = store.finish_submission(token, &text);
        stored = store
            .submission(token)
            .map_err(|e| ApiError::internal(e.to_string()))?
            .unwrap_or(stored);
    }
    let request: StoredRequest = serde_json::from_str(&stored.request)
        .map_err(|e| ApiError::internal(format!("submission {token}: {e}")))?;
    let result: Option<StoredResult> = match &stored.result {
        Some(text) => Some(
            serde_json::from_str(text)
                .map_err(|e| ApiError::internal(format!("submission {token}: {e}")))?,
        ),
        None => None,
    };
    let observation = result.as_ref().and_then(|r| r.observation_id.clone());
    let rendered = render(
        token,
        &request,
        result.as_ref(),
        &stored.created_at,
        stored.finished_at.as_deref(),
        options,
    )?;
    Ok(Some((rendered, observation)))
}

/// Stores a new submission and runs it as `job`: in the background, or
/// (when `wait`) before answering. Its token. It holds `held` (its request
/// body's and its files' shares of the memory budget) until it has run.
async fn submit(
    state: &Arc<AppState>,
    request: StoredRequest,
    job: ProgramJob,
    wait: bool,
    held: Vec<BodyShare>,
) -> Result<String, ApiError> {
    if state.is_draining() {
        return Err(ApiError::draining());
    }
    let token = uuid::Uuid::new_v4().to_string();
    let text = serde_json::to_string(&request).map_err(|e| ApiError::internal(e.to_string()))?;
    let (owner, owner_lock) = this_owner(state);
    store_call(|| {
        state.session().store.insert_submission(
            &token,
            DIALECT,
            &owner,
            owner_lock.as_deref(),
            &text,
        )
    })
    .map_err(|e| ApiError::internal(e.to_string()))?;
    let work = {
        let state = state.clone();
        let token = token.clone();
        async move {
            let _held = held;
            let result = match run(&state, &request, job).await {
                Ok(result) => result,
                // Checked before the submission was stored; a profile
                // limit the request breaks (an argument too long...).
                Err(error) => StoredResult::internal_error(format!(
                    "the program could not be given its input: {}: {}",
                    error.field.unwrap_or_default(),
                    error.message
                )),
            };
            match serde_json::to_string(&result) {
                Ok(text) => {
                    if let Err(error) =
                        store_call(|| state.session().store.finish_submission(&token, &text))
                    {
                        tracing::error!(%token, %error, "could not store a submission's result");
                    }
                }
                Err(error) => tracing::error!(%token, %error, "could not encode a result"),
            }
        }
    };
    // The run is the server's, not the connection's: a `wait=true` client
    // that goes away leaves it running to its stored result (fetchable by
    // token), never a row "In Queue" until a restart.
    let running = state.tracker().spawn(work);
    if wait {
        let _ = running.await;
    }
    Ok(token)
}

/// `POST /submissions`.
async fn create(
    State(state): State<Arc<AppState>>,
    Query(query): Query<BTreeMap<String, String>>,
    body: Option<Extension<BodyShare>>,
    JsonBody(request): JsonBody<SubmissionRequest>,
) -> Response {
    let options = match Options::parse(&query) {
        Ok(options) => options,
        Err(error) => return error.into_response(),
    };
    let mut request = match accept(&state, request, options.base64) {
        Ok(request) => request,
        Err(error) => return judge0_error(error),
    };
    let body = body.map(|Extension(share)| share);
    let (files, files_share) = match accept_files(&state, &mut request, body.as_ref()).await {
        Ok(accepted) => accepted,
        Err(error) => return judge0_error(error),
    };
    let job = job_of(&request, files);
    if let Some(refusal) = check_input(&state, &request, &job) {
        return judge0_error(refusal);
    }
    let held = body.into_iter().chain(files_share).collect();
    let token = match submit(&state, request, job, options.wait, held).await {
        Ok(token) => token,
        Err(error) => return error.into_response(),
    };
    if !options.wait {
        return (StatusCode::CREATED, Json(json!({"token": token}))).into_response();
    }
    match store_call(|| load(&state, &token, &options)) {
        Ok(Some((value, observation))) => with_observation(
            (StatusCode::CREATED, Json(value)).into_response(),
            observation,
        ),
        Ok(None) => {
            ApiError::internal(format!("submission {token} was not stored")).into_response()
        }
        Err(error) => error.into_response(),
    }
}

/// The served maxima and the profile's delivery limits, checked before a
/// submission is stored, so a bad one gets a 4xx naming the field.
fn check_input(state: &AppState, request: &StoredRequest, job: &ProgramJob) -> Option<ApiError> {
    let (profile, _) = state.served(&request.profile)?;
    crate::execute::check_job(state.settings(), profile, job, &field_name)
        .err()
        .map(|error| {
            if error.status == StatusCode::BAD_REQUEST {
                error.with_status(StatusCode::UNPROCESSABLE_ENTITY)
            } else {
                error
            }
        })
}

fn with_observation(mut response: Response, observation: Option<String>) -> Response {
    if let Some(id) = observation
        && let Ok(value) = HeaderValue::from_str(&id)
    {
        response.headers_mut().insert(OBSERVATION_HEADER, value);
    }
    response
}

/// `GET /submissions/{token}`.
async fn get_one(
    State(state): State<Arc<AppState>>,
    Path(token): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let options = match Options::parse(&query) {
        Ok(options) => options,
        Err(error) => return error.into_response(),
    };
    match store_call(|| load(&state, &token, &options)) {
        Ok(Some((value, observation))) => {
            with_observation(Json(value).into_response(), observation)
        }
        Ok(None) => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("no submission with token {token}")})),
        )
            .into_response(),
        Err(error) => error.into_response(),
    }
}

#[derive(Debug, Deserialize)]
struct BatchRequest {
    submissions: Vec<SubmissionRequest>,
}

/// `POST /submissions/batch`: a token (or the item's refusal) per item, in
/// order; with `wait=true`, the finished submissions.
async fn create_batch(
    State(state): State<Arc<AppState>>,
    Query(query): Query<BTreeMap<String, String>>,
    body: Option<Extension<BodyShare>>,
    JsonBody(batch): JsonBody<BatchRequest>,
) -> Response {
    let options = match Options::parse(&query) {
        Ok(options) => options,
        Err(error) => return error.into_response(),
    };
    let max = state.settings().max_batch_items;
    if batch.submissions.is_empty() {
        return ApiError::bad_field("submissions", "give at least one submission").into_response();
    }
    if batch.submissions.len() > max {
        return ApiError::bad_field(
            "submissions",
            format!(
                "{} submissions; this server accepts at most {max} in one batch ([serve] max_batch_items)",
                batch.submissions.len()
            ),
        )
        .with_status(StatusCode::PAYLOAD_TOO_LARGE)
        .into_response();
    }
    let body = body.map(|Extension(share)| share);
    let items = batch.submissions.into_iter().map(|request| {
        let state = state.clone();
        let body = body.clone();
        async move {
            let mut request = accept(&state, request, options.base64)?;
            let (files, files_share) = accept_files(&state, &mut request, body.as_ref()).await?;
            let job = job_of(&request, files);
            if let Some(refusal) = check_input(&state, &request, &job) {
                return Err(refusal);
            }
            let held = body.into_iter().chain(files_share).collect();
            submit(&state, request, job, options.wait, held).await
        }
    });
    let tokens = futures_util::future::join_all(items).await;
    let mut answers = Vec::with_capacity(tokens.len());
    for token in tokens {
        let answer = match token {
            Ok(token) if options.wait => match store_call(|| load(&state, &token, &options)) {
                Ok(Some((value, _))) => value,
                Ok(None) => json!({"token": token}),
                Err(error) => return error.into_response(),
            },
            Ok(token) => json!({"token": token}),
            Err(error) => match error.field {
                Some(field) => json!({ field: [error.message] }),
                None => json!({"error": error.message}),
            },
        };
        answers.push(answer);
    }
    (StatusCode::CREATED, Json(Value::Array(answers))).into_response()
}

/// `GET /submissions/batch?tokens=...`: `{"submissions": [...]}`, `null`
/// for a token not stored.
async fn get_batch(
    State(state): State<Arc<AppState>>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let options = match Options::parse(&query) {
        Ok(options) => options,
        Err(error) => return error.into_response(),
    };
    if options.tokens.is_empty() {
        return ApiError::bad_field("tokens", "give the tokens, separated by commas")
            .into_response();
    }
    if options.tokens.len() > state.settings().max_batch_items {
        return ApiError::bad_field(
            "tokens",
            format!(
                "{} tokens; at most {} at once ([serve] max_batch_items)",
                options.tokens.len(),
                state.settings().max_batch_items
            ),
        )
        .into_response();
    }
    let mut submissions = Vec::with_capacity(options.tokens.len());
    for token in &options.tokens {
        match store_call(|| load(&state, token, &options)) {
            Ok(found) => submissions.push(found.map_or(Value::Null, |(value, _)| value)),
            Err(error) => return error.into_response(),
        }
    }
    Json(json!({"submissions": submissions})).into_response()
}

/// `GET /languages`.
async fn languages(State(state): State<Arc<AppState>>) -> Json<Value> {
    Json(Value::Array(
        served_languages(&state)
            .into_iter()
            .map(|(id, name, profile)| json!({"id": id, "name": format!("{name} (progscore profile {profile})")}))
            .collect(),
    ))
}

/// `GET /languages/{id}`.
async fn language(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> Response {
    let found = id.parse::<i64>().ok().and_then(|id| {
        served_languages(&state)
            .into_iter()
            .find(|(served, _, _)| *served == id)
    });
    match found {
        Some((id, name, profile)) => Json(json!({
            "id": id,
            "name": format!("{name} (progscore profile {profile})"),
            "is_archived": false,
            "source_file": null,
            "compile_cmd": null,
            "run_cmd": null,
        }))
        .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("no served language with id {id}")})),
        )
            .into_response(),
    }
}

/// `GET /statuses`.
async fn statuses() -> Json<Value> {
    Json(Value::Array(
        STATUSES
            .iter()
            .map(|(id, description)| json!({"id": id, "description": description}))
            .collect(),
    ))
}

/// `GET /about`: the Judge0 version whose language ids are served.
async fn about() -> Json<Value> {
    Json(json!({
        "version": JUDGE0_VERSION,
        "homepage": "https://github.com/progscore/progscore",
        "source_code": "https://github.com/progscore/progscore",
        "maintainer": format!("progscore {} (Judge0 CE {JUDGE0_VERSION} compatible API)", env!("CARGO_PKG_VERSION")),
    }))
}

/// `GET /config_info`: Judge0's configuration keys, as progscore applies
/// them: the `max_*` keys are `[serve]`'s per-request maxima; a submission
/// without limits runs under its profile's.
async fn config_info(State(state): State<Arc<AppState>>) -> Json<Value> {
    let settings = state.settings();
    let maxima = settings.request_limits;
    let max_cpu_time = maxima.cpu_time.as_secs_f64();
    let max_wall_time = maxima.timeout.as_secs_f64();
    let max_memory_kb = maxima.memory / 1024;
    Json(json!({
        "maintenance_mode": false,
        "enable_wait_result": true,
        "enable_compiler_options": false,
        "allowed_languages_for_compile_options": [],
        "enable_command_line_arguments": true,
        "enable_submission_delete": false,
        "enable_callbacks": false,
        "callbacks_max_tries": 0,
        "callbacks_timeout": 0.0,
        "enable_additional_files": true,
        "max_queue_size": settings.queue,
        "cpu_time_limit": max_cpu_time.min(5.0),
        "max_cpu_time_limit": max_cpu_time,
        "cpu_extra_time": 0.0,
        "max_cpu_extra_time": 0.0,
        "wall_time_limit": max_wall_time.min(10.0),
        "max_wall_time_limit": max_wall_time,
        "memory_limit": max_memory_kb.min(262144),
        "max_memory_limit": max_memory_kb,
        "stack_limit": 65536,
        "max_stack_limit": 65536,
        "max_processes_and_or_threads": maxima.pids.min(64),
        "max_max_processes_and_or_threads": maxima.pids,
        "enable_per_process_and_thread_time_limit": false,
        "allow_enable_per_process_and_thread_time_limit": false,
        "enable_per_process_and_thread_memory_limit": false,
        "allow_enable_per_process_and_thread_memory_limit": false,
        "max_file_size": 1024,
        "max_max_file_size": 1024,
        "number_of_runs": 1,
        "max_number_of_runs": 1,
        "redirect_stderr_to_stdout": false,
        "max_extract_size": 0,
        "enable_batched_submissions": true,
        "max_submission_batch_size": settings.max_batch_items,
        "submission_cache_duration": 0.0,
        "use_docs_as_homepage": false,
        "allow_enable_network": false,
        "enable_network": false,
    }))
}

#[cfg(test)]
mod tests {
    use progscore_sandbox::ByteString;

    use super::*;

    fn stream(text: &str, truncated: bool) -> CapturedStream {
        CapturedStream {
            data: ByteString(text.as_bytes().to_vec()),
            truncated,
            total_bytes: text.len() as u64 + if truncated { 100 } else { 0 },
        }
    }

    #[test]
    fn output_is_compared_as_judge0_does() {
        assert_eq!(compare(&stream("9\n", false), b"9"), Some(true));
        assert_eq!(compare(&stream("a  \r\nb\n\n", false), b"a\nb"), Some(true));
        assert_eq!(compare(&stream("10\n", false), b"9\n"), Some(false));
        // Leading space inside a line matters.
        assert_eq!(compare(&stream("a\n b\n", false), b"a\nb"), Some(false));
        // Only ASCII blank space is trimmed: a no-break space is output.
        assert_eq!(compare(&stream("42\u{a0}", false), b"42"), Some(false));
        assert_eq!(compare(&stream("42\t \r\n\0", false), b"42"), Some(true));
        // Bytes that are not UTF-8 are compared as bytes, never replaced.
        let raw = |bytes: &[u8]| CapturedStream::complete(bytes.to_vec());
        assert_eq!(compare(&raw(b"\xff\n"), "\u{fffd}".as_bytes()), Some(false));
        assert_eq!(compare(&raw(b"\xff\n"), b"\xff"), Some(true));
    }

    #[test]
    fn a_cut_stdout_proves_a_difference_but_never_a_match() {
        assert_eq!(compare(&stream("1234", true), b"123456789"), None);
        assert_eq!(compare(&stream("12x4", true), b"123456789"), Some(false));
    }

    #[test]
    fn unknown_fields_and_bad_flags_are_refused_by_name() {
        let query = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let error = Options::parse(&query(&[("fields", "stdout,nope")]))
            .err()
            .unwrap();
        assert_eq!(error.field.as_deref(), Some("fields"));
        assert!(error.message.contains("nope"));
        let error = Options::parse(&query(&[("wait", "yes")])).err().unwrap();
        assert_eq!(error.field.as_deref(), Some("wait"));
        let options =
            Options::parse(&query(&[("fields", "*"), ("base64_encoded", "true")])).unwrap();
        assert!(options.base64);
        assert_eq!(options.fields.len(), ALL_FIELDS.len());
    }
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
