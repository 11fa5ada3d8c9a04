//! open-r1's Piston packages, `codeforces` and `cms_ioi`, in their file
//! protocol, judged by progscore's rules.
//!
//! A `codeforces` request names one of the package's languages (`c++17`,
//! `cf_c++17`, `c++20`, `python3`, `cf_python3`, ...) and carries
//! `main.<ext>`, `input.txt`, `correct_output.txt`, an optional
//! `checker.py` and `grader_config` (`TIME_LIMIT` seconds, `MEMORY_LIMIT`
//! MB, `INPUT_MODE`: `file` runs the program on `input.txt` and takes its
//! `output.txt`, under `cpp-codeforces-file` or `python-file`). A `cms_ioi`
//! request carries the submission as `graders/<task>.cpp`, `input.txt`, an optional `correct_output.txt`, the
//! task's graders (`graders/grader.cpp`, `graders/<task>.h`,
//! `graders/grader_config.json` with `task_type`, `time_limit` seconds and
//! `memory_limit` bytes) and an optional `checker/checker.cpp`.
//!
//! The program runs once (its build shared with other requests of the same
//! program, as any Piston run's is), under the task's own limits and the
//! contest profiles (`cpp-codeforces`, `cpp20-codeforces`, `cpp-ioi`,
//! `python`); then its output is judged against the answer by the task's
//! checker (a checker program: `checker.py` under Codeforces' conventions,
//! `checker/checker.cpp` under CMS's) or, without one, by the built-in
//! checker that does what the package's diff does (`yes_no` tokens for
//! Codeforces, `tokens` for CMS). Both runs are evidence.
//!
//! The answer is the package's: `run.stdout` is `1` or `0` (Codeforces) or
//! the score (CMS), `compile.code` the build's exit status. A run or a
//! judgement that proves nothing (a sandbox fault, an unproven timeout, a
//! checker that failed) is never `0`: it is a 503 with `Retry-After`, which
//! open-r1's client retries.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::response::{IntoResponse, Response};
use progscore_sandbox::{ByteString, Invocation, InvocationEvent, Outcome, ProgramFiles};
use progscore_scoring::evidence::Observation;
use progscore_scoring::{
    Checker, CheckerProgram, CheckerProtocol, Condition, ObservationRef, ProgramBehaves,
    ProgramCase, ProgramInput, ProgramResult, ReplayRequest, Score, ScoreRequest, ScoringError,
    ScoringExpectation,
};

use super::{ExecuteRequest, ExecuteResponse, Stage, refusal, retried, stage};
use crate::http::error::ApiError;
use crate::jobs::execute::{
    Executed, JobError, LimitStage, Part, ProgramJob, RequestLimits, execute, name_evidence,
    size_value, time_value,
};
use crate::state::AppState;

/// Which package a request speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Package {
    /// `codeforces`, in this language.
    Codeforces(CodeforcesLanguage),
    /// `cms_ioi`.
    CmsIoi,
}

/// The `codeforces` package's languages progscore serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CodeforcesLanguage {
    /// GNU C++ up to C++17.
    Cpp17,
    /// C++20.
    Cpp20,
    /// Python 3.
    Python3,
}

impl CodeforcesLanguage {
    /// The profile it runs under: with stdin and stdout, or with
    /// `input.txt` and `output.txt` (`file_io`), where one is served.
    fn profile(self, file_io: bool) -> Option<&'static str> {
        Some(match (self, file_io) {
            (CodeforcesLanguage::Cpp17, false) => "cpp-codeforces",
            (CodeforcesLanguage::Cpp17, true) => "cpp-codeforces-file",
            (CodeforcesLanguage::Cpp20, false) => "cpp20-codeforces",
            (CodeforcesLanguage::Cpp20, true) => return None,
            (CodeforcesLanguage::Python3, false) => "python",
            (CodeforcesLanguage::Python3, true) => "python-file",
        })
    }
}

/// The package a request speaks, if any: a `cms_ioi` language, or a
/// `codeforces` language with the package's `grader_config` among the
/// files (without it, `python3` and the rest are plain Piston runs).
pub(super) fn package_of(request: &ExecuteRequest) -> Option<Package> {
    let language = request.language.as_str();
    if matches!(language, "cms_ioi" | "cms") {
        return Some(Package::CmsIoi);
    }
    let speaks_codeforces = request
        .files
        .iter()
        .any(|file| file.name.as_deref() == Some("grader_config"));
    if !speaks_codeforces {
        return None;
    }
    let cf = match language {
        "c++" | "cf_c++" | "GNU C++" | "c++0x" | "cf_c++0x" | "GNU C++0x" | "c++11"
        | "cf_c++11" | "GNU C++11" | "c++14" | "cf_c++14" | "C++14 (GCC 6-32)" | "c++17"
        | "cf_c++17" | "C++17 (GCC 7-32)" | "C++17 (GCC 9-64)" => CodeforcesLanguage::Cpp17,
        "c++20" | "cf_c++20" | "C++20 (GCC 11-64)" | "C++20 (GCC 13-64)" => {
            CodeforcesLanguage::Cpp20
        }
        "python3" | "cf_python3" | "Python 3" => CodeforcesLanguage::Python3,
        _ => return None,
    };
    Some(Package::Codeforces(cf))
}

/// A request's files by name (decoded), and where each was.
struct Files {
    by_name: BTreeMap<String, (usize, Vec<u8>)>,
    /// The first file's name (the program).
    first: Option<String>,
}

impl Files {
    fn of(request: &ExecuteRequest) -> Result<Files, ApiError> {
        let mut by_name = BTreeMap::new();
        let mut first = None;
        for (index, file) in request.files.iter().enumerate() {
            let name = file
                .name
                .clone()
                .unwrap_or_else(|| format!("file{index}.code"));
            if index == 0 {
                first = Some(name.clone());
            }
            by_name.insert(name, (index, file.decoded(index)?));
        }
        Ok(Files { by_name, first })
    }

    fn take(&mut self, name: &str) -> Option<Vec<u8>> {
        self.by_name.remove(name).map(|(_, bytes)| bytes)
    }

    fn text(&mut self, name: &str) -> Result<Option<String>, ApiError> {
        let Some((index, bytes)) = self.by_name.remove(name) else {
            return Ok(None);
        };
        String::from_utf8(bytes).map(Some).map_err(|_| {
            ApiError::bad_field(
                format!("files[{index}].content"),
                format!("{name} is not UTF-8"),
            )
        })
    }
}

/// What a package request runs and how it is judged.
struct Task {
    program: Vec<u8>,
    profile: String,
    input: Vec<u8>,
    /// The jury's answer; without one, the package shows the program's own
    /// output (nothing is judged).
    answer: Option<Vec<u8>>,
    checker: Checker,
    beside: ProgramFiles,
    limits: RequestLimits,
    /// `codeforces` answers 1 or 0; `cms_ioi` the score.
    scored: bool,
    /// A `cms_ioi` Communication task: the task's manager, run beside the
    /// program through progscore's bridge (an interactor); it decides.
    manager: Option<CheckerProgram>,
}

/// `POST /api/v2/execute` for a package.
pub(super) async fn execute_package(
    state: &Arc<AppState>,
    request: ExecuteRequest,
    package: Package,
) -> Response {
    let task = match package {
        Package::Codeforces(language) => codeforces_task(state, &request, language),
        Package::CmsIoi => cms_task(state, &request),
    };
    let task = match task {
        Ok(task) => task,
        Err(error) => return refusal(error),
    };
    if task.manager.is_some() {
        return execute_communication(state, &request, task).await;
    }
    let version = env!("CARGO_PKG_VERSION").to_string();
    let answer_with = |compile: Option<Stage>, run: Option<Stage>| ExecuteResponse {
        language: request.language.clone(),
        version: version.clone(),
        compile,
        run,
    };
    let job = ProgramJob::run_once(
        task.program.clone(),
        task.profile.clone(),
        Vec::new(),
        Some(task.input.clone()),
    )
    .with_limits(task.limits.clone())
    .with_files(task.beside.clone());
    let field = |part: Part| match part {
        Part::Program => "files[0].content".to_string(),
        Part::Stdin(_) => "files[input.txt].content".to_string(),
        Part::Limit(_) => "files[grader_config].content".to_string(),
        _ => "language".to_string(),
    };
    let executed = match execute(state, job, &field).await {
        Ok(executed) => executed,
        Err(JobError::Invalid(error)) => return refusal(error),
        Err(error) => {
            return retried(answer_with(
                None,
                Some(Stage::internal(format!(
                    "the program was not run: {}",
                    error_text(error)
                ))),
            ));
        }
    };
    let observation = executed.observation.id.clone();
    let compile = Some(compile_stage(&executed));
    if executed.proves_nothing() {
        let mut response = retried(answer_with(
            compile,
            Some(Stage::internal(format!(
                "the run proves nothing of the program (observation {observation})"
            ))),
        ));
        name_evidence(&mut response, &executed);
        return response;
    }
    let Some(event) = executed.event().cloned() else {
        return retried(answer_with(
            compile,
            Some(Stage::internal("the run has no event".into())),
        ));
    };
    if matches!(event.outcome, Outcome::CompileError { .. }) {
        let mut response = Json(answer_with(compile, None)).into_response();
        name_evidence(&mut response, &executed);
        return response;
    }
    let Some(answer) = task.answer.clone() else {
        // No answer: the package shows the program's output.
        let mut response =
            Json(answer_with(compile, Some(stage(&event, &observation)))).into_response();
        name_evidence(&mut response, &executed);
        return response;
    };
    let expectation = expectation(&task, Some(answer));
    let judged = state
        .scorer()
        .replay_checked(
            ReplayRequest {
                item_id: None,
                observation: ObservationRef::Id(observation.clone()),
                expectation,
            },
            &state.run_token(),
        )
        .await;
    let mut response = match judged {
        Ok(score) => match judged_stage(&score, &event, task.scored) {
            Some(run) => Json(answer_with(compile, Some(run))).into_response(),
            None => retried(answer_with(
                compile,
                Some(Stage::internal(format!(
                    "the output could not be judged: {}",
                    score.reason.as_deref().unwrap_or("undetermined")
                ))),
            )),
        },
        Err(error) => retried(answer_with(
            compile,
            Some(Stage::internal(format!(
                "the output could not be judged: {error}"
            ))),
        )),
    };
    name_evidence(&mut response, &executed);
    response
}

fn error_text(error: JobError) -> String {
    match error {
        JobError::Invalid(error) => error.message,
        JobError::Busy { profile, refusal } => refusal.message(&profile),
        JobError::Refused { message, .. } => message,
        JobError::Cancelled => "the server is shutting down".into(),
        JobError::Internal { incident, .. } => incident,
    }
}

/// The build's stage as the packages report it: always present (open-r1
/// reads `compile.code`), 0 for a program that needs no build.
fn compile_stage(executed: &Executed) -> Stage {
    compile_stage_of(&executed.observation)
}

fn compile_stage_of(observation: &Observation) -> Stage {
    match &observation.run.compile {
        Some(compile) => {
            let mut build = stage(&compile.event, &observation.id);
            if let Outcome::Exited { exit_code } = compile.event.outcome {
                build.code = Some(exit_code);
            }
            build
        }
        None => Stage {
            stdout: String::new(),
            stderr: String::new(),
            output: String::new(),
            code: Some(0),
            signal: None,
            status: None,
            message: None,
            cpu_time: None,
            wall_time: None,
            memory: None,
        },
    }
}

/// The judged run as the package prints it, or `None` when the score is
/// undetermined (never a 0 for what proves nothing).
fn judged_stage(score: &Score, event: &InvocationEvent, scored: bool) -> Option<Stage> {
    let value = score.score?;
    let case = score.cases.first();
    let case_score = case.and_then(|c| c.score).unwrap_or(value);
    let (code, feedback) = match &event.outcome {
        Outcome::TimedOut { .. } => (124, "Time limit exceeded".to_string()),
        Outcome::MemoryLimit => (134, "Memory limit exceeded".to_string()),
        Outcome::Exited { exit_code } if *exit_code != 0 => (
            *exit_code,
            format!("Runtime error with exit code {exit_code}"),
        ),
        _ if value >= 1.0 => (0, "Output is correct".to_string()),
        _ if case_score > 0.0 => (0, "Partially correct".to_string()),
        _ => (0, "Output isn't correct".to_string()),
    };
    let detail = case
        .and_then(|c| c.checker.clone().or_else(|| c.detail.clone()))
        .filter(|d| !d.is_empty())
        .map(|d| {
            if d.starts_with(&feedback) {
                d
            } else {
                format!("{feedback}: {d}")
            }
        })
        .unwrap_or(feedback);
    let stdout = if scored {
        format!("{}\n", trim_score(case_score))
    } else if value >= 1.0 {
        "1\n".to_string()
    } else {
        "0\n".to_string()
    };
    Some(Stage {
        output: format!("{stdout}{detail}"),
        stdout,
        stderr: detail,
        code: Some(code),
        signal: None,
        status: (code != 0).then_some("RE"),
        message: None,
        cpu_time: event.usage.as_ref().and_then(|u| u.cpu_ms),
        wall_time: Some(event.duration_ms),
        memory: event.usage.as_ref().and_then(|u| u.peak_memory_bytes),
    })
}

/// A score as CMS prints it: `1`, `0`, `0.5`.
fn trim_score(score: f64) -> String {
    let text = format!("{score:.6}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_string()
}

/// The judgement of the one case, as an expectation over the stored run:
/// by the task's checker against `answer`, or, for a Communication task,
/// by its manager.
fn expectation(task: &Task, answer: Option<Vec<u8>>) -> ScoringExpectation {
    let case = ProgramCase {
        invocation: Invocation {
            args: Vec::new(),
            stdin: Some(ByteString(task.input.clone())),
        },
        expected: ProgramResult {
            stdout: None,
            stderr: None,
            exit_code: 0,
            behaviour: None,
            answer: answer.map(ByteString),
        },
    };
    let mut expectation = ScoringExpectation::program_behaves(task.profile.clone(), vec![case])
        .with_limits(task.limits.run.clone(), task.limits.compile.clone())
        .with_files(task.beside.clone());
    let Condition::ProgramBehaves(behaves): &mut Condition = &mut expectation.conditions[0];
    let behaves: &mut ProgramBehaves = behaves;
    match &task.manager {
        Some(manager) => behaves.interactor = Some(Box::new(manager.clone())),
        None => behaves.checker = Some(task.checker.clone()),
    }
    expectation
}

/// The served profile `name`, or a refusal saying which profile the
/// package needs.
fn contest_profile(state: &AppState, name: &str, language: &str) -> Result<String, ApiError> {
    let profile = state.language_profile(name).ok_or_else(|| {
        ApiError::bad_field(
            "language",
            format!(
                "{language} runs under profile `{name}`, which is not served here (scripts/setup.sh \
                 writes it with the cpp language; served: {})",
                state.served_names().join(", ")
            ),
        )
    })?;
    Ok(profile.to_string())
}

fn codeforces_task(
    state: &AppState,
    request: &ExecuteRequest,
    language: CodeforcesLanguage,
) -> Result<Task, ApiError> {
    let mut files = Files::of(request)?;
    let main = files
        .first
        .clone()
        .ok_or_else(|| ApiError::bad_field("files", "give the program as files[0]"))?;
    let program = files.take(&main).expect("the first file is named");
    let config = files.text("grader_config")?.unwrap_or_default();
    let mut limits = RequestLimits::default();
    let mut file_input = false;
    for (line_number, line) in config.lines().enumerate() {
        let field = format!("files[grader_config].content line {}", line_number + 1);
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "TIME_LIMIT" if !value.is_empty() => {
                let seconds: f64 = value.parse().map_err(|_| {
                    ApiError::bad_field(&field, format!("TIME_LIMIT {value:?} is not seconds"))
                })?;
                let timeout = time_value(seconds * 1000.0, 1.0, "seconds")
                    .map_err(|why| ApiError::bad_field(&field, why.to_string()))?;
                limits.set_timeout(LimitStage::Run, timeout);
            }
            "MEMORY_LIMIT" if !value.is_empty() => {
                let megabytes: f64 = value.parse().map_err(|_| {
                    ApiError::bad_field(&field, format!("MEMORY_LIMIT {value:?} is not megabytes"))
                })?;
                let memory = size_value(megabytes * 1024.0 * 1024.0, 1.0, "megabytes")
                    .map_err(|why| ApiError::bad_field(&field, why.to_string()))?;
                limits.set_memory(LimitStage::Run, memory);
            }
            "INPUT_MODE" => file_input = value == "file",
            _ => {}
        }
    }
    // INPUT_MODE=file: the profile gives the program input.txt and takes
    // its output.txt as its output.
    let Some(profile) = language.profile(file_input) else {
        return Err(ApiError::bad_field(
            "files[grader_config].content",
            format!(
                "INPUT_MODE=file is served for C++17 and Python, not {}",
                request.language
            ),
        ));
    };
    let profile = contest_profile(state, profile, &request.language)?;
    let input = files
        .take("input.txt")
        .ok_or_else(|| ApiError::bad_field("files", "the codeforces package needs input.txt"))?;
    let answer = files.take("correct_output.txt");
    let checker = match files.take("checker.py") {
        Some(source) => Checker::Program(Box::new(CheckerProgram {
            profile: state
                .language_profile("python")
                .unwrap_or("python")
                .to_string(),
            source: ByteString(source),
            files: ProgramFiles::default(),
            protocol: CheckerProtocol::Codeforces,
            max_points: None,
            limits: None,
        })),
        None => Checker::Component {
            name: "yes_no".into(),
            params: serde_json::json!({}),
        },
    };
    Ok(Task {
        program,
        profile,
        input,
        answer,
        checker,
        beside: ProgramFiles::default(),
        limits,
        scored: false,
        manager: None,
    })
}

fn cms_task(state: &AppState, request: &ExecuteRequest) -> Result<Task, ApiError> {
    let profile = contest_profile(state, "cpp-ioi", &request.language)?;
    let mut files = Files::of(request)?;
    let main = files
        .first
        .clone()
        .ok_or_else(|| ApiError::bad_field("files", "give the submission as files[0]"))?;
    let program = files.take(&main).expect("the first file is named");
    let input = files
        .take("input.txt")
        .ok_or_else(|| ApiError::bad_field("files", "the cms_ioi package needs input.txt"))?;
    let answer = files.take("correct_output.txt");
    let config_text = files.text("graders/grader_config.json")?.ok_or_else(|| {
        ApiError::bad_field(
            "files",
            "the cms_ioi package needs graders/grader_config.json",
        )
    })?;
    let field = "files[graders/grader_config.json].content";
    let config: serde_json::Value = serde_json::from_str(&config_text)
        .map_err(|error| ApiError::bad_field(field, format!("is not JSON: {error}")))?;
    let communication = match config.get("task_type").and_then(|t| t.as_str()) {
        None | Some("Batch") => false,
        Some("Communication") => true,
        Some(other) => {
            return Err(ApiError::bad_field(
                field,
                format!("task_type {other:?} is not served (Batch and Communication are)"),
            ));
        }
    };
    let manager = if communication {
        Some(communication_manager(
            state, request, &config, &mut files, field,
        )?)
    } else {
        None
    };
    let mut limits = RequestLimits::default();
    if let Some(seconds) = config.get("time_limit").and_then(|t| t.as_f64()) {
        let timeout = time_value(seconds * 1000.0, 1.0, "seconds")
            .map_err(|why| ApiError::bad_field(field, format!("time_limit: {why}")))?;
        limits.set_timeout(LimitStage::Run, timeout);
    }
    if let Some(bytes) = config.get("memory_limit").and_then(|m| m.as_f64()) {
        let memory = size_value(bytes, 1.0, "bytes")
            .map_err(|why| ApiError::bad_field(field, format!("memory_limit: {why}")))?;
        limits.set_memory(LimitStage::Run, memory);
    }
    // The checker and its files are the jury's: never beside the program.
    let checker_source = files.take("checker/checker.cpp");
    let mut checker_files = Vec::new();
    let mut beside = Vec::new();
    for (name, (_, bytes)) in std::mem::take(&mut files.by_name) {
        match name.strip_prefix("checker/") {
            Some(own) => checker_files.push((own.to_string(), ByteString(bytes))),
            None => beside.push((name, ByteString(bytes))),
        }
    }
    let beside = ProgramFiles::new(beside)
        .map_err(|invalid| ApiError::bad_field("files", invalid.to_string()))?;
    let checker = match checker_source {
        Some(source) => Checker::Program(Box::new(CheckerProgram {
            profile: contest_profile(state, "cpp", &request.language)?,
            source: ByteString(source),
            files: ProgramFiles::new(checker_files)
                .map_err(|invalid| ApiError::bad_field("files", invalid.to_string()))?,
            protocol: CheckerProtocol::Cms,
            max_points: None,
            limits: None,
        })),
        None => Checker::Component {
            name: "tokens".into(),
            params: serde_json::json!({}),
        },
    };
    Ok(Task {
        program,
        profile,
        input,
        answer,
        checker,
        beside,
        limits,
        scored: true,
        manager,
    })
}

/// The manager of a Communication task, as an interactor: progscore's
/// bridge, with the task's `graders/manager.cpp` and its headers beside it
/// (taken from the files: the jury's, never beside the program). One user
/// process talking on its stdin and stdout is served.
fn communication_manager(
    state: &AppState,
    request: &ExecuteRequest,
    config: &serde_json::Value,
    files: &mut Files,
    field: &str,
) -> Result<CheckerProgram, ApiError> {
    let processes = config
        .get("task_type_parameters_Communication_num_processes")
        .and_then(|n| n.as_u64())
        .unwrap_or(1);
    if processes != 1 {
        return Err(ApiError::bad_field(
            field,
            format!(
                "task_type_parameters_Communication_num_processes {processes}: one user process is served"
            ),
        ));
    }
    match config
        .get("task_type_parameters_Communication_user_io")
        .and_then(|io| io.as_str())
    {
        None | Some("std_io") => {}
        Some(other) => {
            return Err(ApiError::bad_field(
                field,
                format!("task_type_parameters_Communication_user_io {other:?}: std_io is served"),
            ));
        }
    }
    if config
        .get("task_type_parameters_Communication_manager_args")
        .is_some()
    {
        return Err(ApiError::bad_field(
            field,
            "task_type_parameters_Communication_manager_args: not served",
        ));
    }
    let manager = files.take("graders/manager.cpp").ok_or_else(|| {
        ApiError::bad_field("files", "a Communication task needs graders/manager.cpp")
    })?;
    // The manager's headers beside it, as it includes them.
    let mut beside = vec![("manager.cpp".to_string(), ByteString(manager))];
    for (name, (_, bytes)) in &files.by_name {
        if let Some(own) = name.strip_prefix("graders/")
            && own.ends_with(".h")
        {
            beside.push((own.to_string(), ByteString(bytes.clone())));
        }
    }
    Ok(CheckerProgram {
        profile: contest_profile(state, "cpp", &request.language)?,
        source: ByteString(CMS_MANAGER_BRIDGE.as_bytes().to_vec()),
        files: ProgramFiles::new(beside)
            .map_err(|invalid| ApiError::bad_field("files", invalid.to_string()))?,
        protocol: CheckerProtocol::Testlib,
        max_points: None,
        limits: None,
    })
}

/// The bridge that runs a CMS Communication manager as an interactor.
const CMS_MANAGER_BRIDGE: &str = include_str!("cms_manager_bridge.cpp");

/// A Communication task: the program talks to the task's manager, which
/// gives the score; run as an interactive item (two sandboxes, the
/// conversation kept as evidence) and answered as the package answers.
async fn execute_communication(
    state: &Arc<AppState>,
    request: &ExecuteRequest,
    task: Task,
) -> Response {
    let version = env!("CARGO_PKG_VERSION").to_string();
    let answer_with = |compile: Option<Stage>, run: Option<Stage>| ExecuteResponse {
        language: request.language.clone(),
        version: version.clone(),
        compile,
        run,
    };
    let expectation = expectation(&task, None);
    let scored = state
        .scorer()
        .score_observed(
            ScoreRequest::new(ProgramInput::Inline(task.program.clone()), expectation)
                .cancel(state.run_token()),
        )
        .await;
    let scored = match scored {
        Ok(scored) => scored,
        Err(ScoringError::Expectation(error)) => {
            return refusal(ApiError::bad_field("files", error.to_string()));
        }
        Err(error) => {
            return retried(answer_with(
                None,
                Some(Stage::internal(format!("the program was not run: {error}"))),
            ));
        }
    };
    let observation = &scored.observation;
    let compile = Some(compile_stage_of(observation));
    let Some(event) = observation.run.events.first() else {
        return retried(answer_with(
            compile,
            Some(Stage::internal("the run has no event".into())),
        ));
    };
    if matches!(event.outcome, Outcome::CompileError { .. }) {
        return Json(answer_with(compile, None)).into_response();
    }
    match judged_stage(&scored.score, event, true) {
        Some(run) => Json(answer_with(compile, Some(run))).into_response(),
        None => retried(answer_with(
            compile,
            Some(Stage::internal(format!(
                "the conversation could not be judged: {}",
                scored.score.reason.as_deref().unwrap_or("undetermined")
            ))),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::trim_score;

    #[test]
    fn scores_print_as_cms_prints_them() {
        assert_eq!(trim_score(1.0), "1");
        assert_eq!(trim_score(0.0), "0");
        assert_eq!(trim_score(0.5), "0.5");
        assert_eq!(trim_score(1.0 / 3.0), "0.333333");
    }
}
