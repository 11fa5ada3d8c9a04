//! A job as every dialect hands it over: the program, its profile and
//! invocations ([`ProgramJob`]); what came of it ([`Executed`]); why it was
//! not run ([`JobError`]); and the check of a job against the served maxima
//! and the profile's delivery limits, and of its own limits against the
//! served maxima and the profile's rules, naming a bad part in the
//! dialect's own field names ([`Part`]).

use crate::settings::ServeSettings;
use progscore_sandbox::{ByteString, Invocation, ProgramFiles, RuntimeProfile};
use progscore_scoring::evidence::Observation;
use progscore_scoring::{Score, ScoringExpectation};

use crate::http::error::ApiError;
use crate::jobs::limits::{LimitPart, RequestLimits, check_limits};
use crate::jobs::queue::QueueRefusal;

/// What to run.
#[derive(Debug, Clone)]
pub struct ProgramJob {
    /// The program's bytes, run verbatim.
    pub program: Vec<u8>,
    /// The profile (already resolved from the dialect's language name).
    pub profile: String,
    /// One sandbox per invocation, in order.
    pub invocations: Vec<Invocation>,
    /// Run again even if the attempt's evidence is stored.
    pub fresh: bool,
    /// What to score the run against (its profile and invocations must be
    /// the job's); `None`: "every invocation exits 0".
    pub expectation: Option<ScoringExpectation>,
    /// The caller's item id, recorded with the score.
    pub item_id: Option<String>,
    /// The program's own limits over its profile's (the dialect's limit
    /// fields); a job with an expectation carries them on it as well.
    pub limits: RequestLimits,
    /// Files placed beside the program (the dialect's files fields); a job
    /// with an expectation carries them on it as well.
    pub files: ProgramFiles,
    /// When the client stops waiting, where its dialect says (verl's
    /// request timeout): a job that could not be answered by then is
    /// refused early, in the form the client retries, instead.
    pub deadline: Option<ClientDeadline>,
}

/// When a client stops waiting, and how long the job's run may take.
#[derive(Debug, Clone, Copy)]
pub struct ClientDeadline {
    /// The client gives up at this moment.
    pub answer_by: std::time::Instant,
    /// The most the build may take (zero for a profile without one).
    pub compile_budget: std::time::Duration,
    /// The most one case may take.
    pub case_budget: std::time::Duration,
}

impl ClientDeadline {
    /// How long a run of `cases` cases may still wait for its turn and be
    /// answered in time (zero: it cannot).
    pub fn may_wait(&self, cases: usize) -> std::time::Duration {
        self.answer_by
            .saturating_duration_since(std::time::Instant::now())
            .saturating_sub(self.run_budget(cases) + ANSWER_MARGIN)
    }

    fn run_budget(&self, cases: usize) -> std::time::Duration {
        self.compile_budget + self.case_budget * u32::try_from(cases).unwrap_or(u32::MAX)
    }
}

/// Kept free before a client's deadline: container start and removal,
/// storing, the answer's way back.
const ANSWER_MARGIN: std::time::Duration = std::time::Duration::from_secs(2);

impl ProgramJob {
    /// `program` run once under `profile` with `args` and `stdin`, scored
    /// "it exits 0", its stored evidence reused: what the run-and-report
    /// dialects ask for.
    pub fn run_once(
        program: Vec<u8>,
        profile: impl Into<String>,
        args: Vec<String>,
        stdin: Option<Vec<u8>>,
    ) -> ProgramJob {
        ProgramJob {
            program,
            profile: profile.into(),
            invocations: vec![Invocation {
                args,
                stdin: stdin.map(ByteString),
            }],
            fresh: false,
            expectation: None,
            item_id: None,
            limits: RequestLimits::default(),
            files: ProgramFiles::default(),
            deadline: None,
        }
    }

    /// The same job with `files` beside the program.
    pub fn with_files(mut self, files: ProgramFiles) -> ProgramJob {
        self.files = files;
        self
    }

    /// The same job for a client that stops waiting at `deadline`.
    pub fn with_deadline(mut self, deadline: Option<ClientDeadline>) -> ProgramJob {
        self.deadline = deadline;
        self
    }

    /// The same job under its own `limits` (see [`RequestLimits`]).
    pub fn with_limits(mut self, limits: RequestLimits) -> ProgramJob {
        self.limits = limits;
        self
    }
}

/// What came of it.
#[derive(Debug, Clone)]
pub struct Executed {
    /// The score "every invocation exits 0" (its `evidence` says whether the
    /// run was `ran`, `joined` or `stored`).
    pub score: Score,
    /// The observation the score rests on: this request's own (a request
    /// gathered with others gets its own part of their run, see
    /// [`crate::jobs::gather`]).
    pub observation: Observation,
}

impl Executed {
    /// The run's first event: a one-invocation request's own.
    pub fn event(&self) -> Option<&progscore_sandbox::InvocationEvent> {
        self.observation.run.events.first()
    }

    /// Whether the run proves nothing of the program: its build or one of
    /// its cases ended for a reason of the sandbox's (a sandbox error, not
    /// run, a timeout the machine was too busy to prove).
    pub fn proves_nothing(&self) -> bool {
        let run = &self.observation.run;
        run.compile
            .as_ref()
            .is_some_and(|compile| compile.event.outcome.is_unproven())
            || run.events.iter().any(|event| event.outcome.is_unproven())
    }
}

/// Why a job was not run, as the dialect must tell it.
#[derive(Debug, Clone)]
pub enum JobError {
    /// The request itself is wrong (a field named): a 4xx.
    Invalid(ApiError),
    /// No turn in the profile's queue: the dialect's overload answer.
    Busy {
        /// Which profile.
        profile: String,
        /// How.
        refusal: QueueRefusal,
    },
    /// The sandbox refused the run before anything ran (engine away...):
    /// nothing is known of the program.
    Refused {
        /// What clients are told of it.
        message: String,
        /// The engine stopped answering (a batch stops for it once).
        engine_gone: bool,
    },
    /// Cancelled: the server is draining.
    Cancelled,
    /// A fault of the server's own parts (the store).
    Internal {
        /// What clients are told: the fault's incident id in the log.
        incident: String,
        /// The evidence store itself failed (a batch stops for it once).
        store_fault: bool,
    },
}

impl JobError {
    /// A fault of the server's own parts: `detail` (which may name files
    /// and ids of this host) goes to the log under an incident id; the
    /// client is told the fault happened and that id.
    pub fn internal(detail: impl std::fmt::Display) -> JobError {
        JobError::Internal {
            incident: crate::http::error::logged_incident(&detail),
            store_fault: false,
        }
    }

    /// A fault of the evidence store itself, logged as [`JobError::internal`].
    pub fn store_failed(detail: impl std::fmt::Display) -> JobError {
        JobError::Internal {
            incident: crate::http::error::logged_incident(&detail),
            store_fault: true,
        }
    }

    /// The default answer; dialects map `Busy` and `Refused` their own way.
    pub fn into_api_error(self) -> ApiError {
        match self {
            JobError::Invalid(error) => error,
            JobError::Busy { profile, refusal } => ApiError {
                status: axum::http::StatusCode::TOO_MANY_REQUESTS,
                message: refusal.message(&profile),
                field: None,
                retry_after: Some(std::time::Duration::from_secs(1)),
            },
            JobError::Refused { message, .. } => ApiError {
                status: axum::http::StatusCode::SERVICE_UNAVAILABLE,
                message: format!("the sandbox could not run the program: {message}"),
                field: None,
                retry_after: Some(std::time::Duration::from_secs(5)),
            },
            JobError::Cancelled => ApiError::draining(),
            JobError::Internal {
                incident: message, ..
            } => ApiError {
                status: axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                message,
                field: None,
                retry_after: None,
            },
        }
    }
}

/// Checks a job against the served maxima and the profile's delivery
/// limits, and its own limits against the served maxima and the profile's
/// rules; `field` names a job's parts as the dialect spells them.
pub fn check_job(
    settings: &ServeSettings,
    profile: &RuntimeProfile,
    job: &ProgramJob,
    field: &(dyn Fn(Part) -> String + Sync),
) -> Result<(), ApiError> {
    let code = job.program.len() as u64;
    if code > settings.max_code {
        return Err(ApiError::too_large(
            field(Part::Program),
            code,
            settings.max_code,
        ));
    }
    if job.invocations.is_empty() {
        return Err(ApiError::bad_field(
            field(Part::Invocations),
            "give at least one invocation",
        ));
    }
    if job.invocations.len() > settings.max_invocations {
        return Err(ApiError::bad_field(
            field(Part::Invocations),
            format!(
                "{} invocations; this server accepts at most {} in one run ([serve] max_invocations)",
                job.invocations.len(),
                settings.max_invocations
            ),
        )
        .with_status(axum::http::StatusCode::PAYLOAD_TOO_LARGE));
    }
    for (index, invocation) in job.invocations.iter().enumerate() {
        let stdin = invocation.stdin.as_ref().map_or(0, |s| s.0.len()) as u64;
        if stdin > settings.max_stdin {
            return Err(ApiError::too_large(
                field(Part::Stdin(index)),
                stdin,
                settings.max_stdin,
            ));
        }
    }
    profile.check_invocations(&job.invocations).map_err(|bad| {
        let part = if bad.error.field.starts_with("stdin") {
            Part::Stdin(bad.index)
        } else {
            Part::Args(bad.index)
        };
        ApiError::bad_field(field(part), bad.error.message.clone())
    })?;
    check_limits(&settings.request_limits, profile, &job.limits, &|limit| {
        field(Part::Limit(limit))
    })
}

/// A part of a job, for naming it in the dialect's own field names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The program.
    Program,
    /// The invocations as a whole.
    Invocations,
    /// Invocation N's arguments.
    Args(usize),
    /// Invocation N's stdin.
    Stdin(usize),
    /// One of the job's own limits.
    Limit(LimitPart),
}
