//! The trait every backend implements, and the errors it may return.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use thiserror::Error;

use crate::conversation::ConversationSide;
use crate::files::{InvalidFiles, ProgramFiles};
use crate::invocation::{InvalidInvocation, Invocation};
use crate::profile::RuntimeProfile;
use crate::run::{CompileEvent, InvocationEvent, ProgramRun};

/// A boxed, sendable future, so the trait stays object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Which of a client's profiles a run is under.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RunProfile<'a> {
    /// A profile of the client, by its name, with its own limits.
    Named(&'a str),
    /// One of the client's profiles (by its name) with other limits
    /// ([`RuntimeProfile::with_limits`]); the named profile's preflight
    /// stands for it. Anything but the limits differing is refused
    /// ([`SandboxError::NotAVariant`]).
    Variant(&'a RuntimeProfile),
}

/// One case's event, told as soon as the backend has it (see
/// [`RunRequest::on_case`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CaseDone {
    /// The invocation's index in the request.
    pub index: usize,
    /// Its event, as the run that reached it produced it.
    pub event: InvocationEvent,
    /// The build that case ran against, for a profile that builds.
    pub compile: Option<CompileEvent>,
}

/// Where a backend tells each case's event before the call ends.
#[derive(Clone)]
pub struct CaseSink(Arc<dyn Fn(CaseDone) + Send + Sync>);

impl CaseSink {
    pub fn new(sink: impl Fn(CaseDone) + Send + Sync + 'static) -> CaseSink {
        CaseSink(Arc::new(sink))
    }

    /// Tells case `index`'s event (and the build it ran against).
    pub fn report(&self, index: usize, event: &InvocationEvent, compile: Option<&CompileEvent>) {
        (self.0)(CaseDone {
            index,
            event: event.clone(),
            compile: compile.cloned(),
        });
    }
}

impl std::fmt::Debug for CaseSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CaseSink")
    }
}

/// The other side of an interactive request: the interactor, its profile
/// (or a variant with its own limits), the files beside it, and one
/// invocation per invocation of the program (its arguments; its stdin is
/// the program's stdout).
#[derive(Debug, Clone, Copy)]
pub struct InteractorRequest<'a> {
    pub program: &'a [u8],
    pub profile: RunProfile<'a>,
    pub files: &'a ProgramFiles,
    pub invocations: &'a [Invocation],
}

/// What one call runs: a program, under a profile (or a variant of one),
/// with files beside it, once per invocation.
#[derive(Debug, Clone)]
pub struct RunRequest<'a> {
    /// The program's bytes, run verbatim.
    pub program: &'a [u8],
    pub profile: RunProfile<'a>,
    /// Placed beside the program (in its folder, read-only, seen by the
    /// compile step and every invocation); empty: the program alone. A
    /// backend that cannot place files refuses them
    /// ([`SandboxError::FilesUnsupported`]).
    pub files: &'a ProgramFiles,
    pub invocations: &'a [Invocation],
    /// Told each case's event as soon as it is decided, before the call
    /// ends. The call's [`ProgramRun`] stays the answer: a program that
    /// moves to another engine runs its cases again, so a case may be told
    /// twice (each time an event one real run produced), and a backend that
    /// cannot tell early tells nothing.
    pub on_case: Option<CaseSink>,
    /// An interactive request: the interactor each case's program talks
    /// to (see [`crate::conversation`]). Backends run it with
    /// [`crate::converse::converse`]; one that cannot run a side of a
    /// conversation refuses it ([`SandboxError::InteractiveUnsupported`]).
    pub interactor: Option<InteractorRequest<'a>>,
    /// Set by [`crate::converse::converse`] only: this run is one side
    /// of a conversation, and its cases' stdin and stdout are live.
    pub conversation: Option<ConversationSide>,
}

impl<'a> RunRequest<'a> {
    /// `program` under the profile named `profile`, once per invocation.
    pub fn new(program: &'a [u8], profile: &'a str, invocations: &'a [Invocation]) -> Self {
        RunRequest {
            program,
            profile: RunProfile::Named(profile),
            files: ProgramFiles::none(),
            invocations,
            on_case: None,
            interactor: None,
            conversation: None,
        }
    }

    /// `program` under `variant` (a profile of the client, or one with
    /// other limits), once per invocation.
    pub fn variant(
        program: &'a [u8],
        variant: &'a RuntimeProfile,
        invocations: &'a [Invocation],
    ) -> Self {
        RunRequest {
            profile: RunProfile::Variant(variant),
            ..RunRequest::new(program, &variant.name, invocations)
        }
    }

    /// The same request with `files` beside the program.
    pub fn with_files(self, files: &'a ProgramFiles) -> Self {
        RunRequest { files, ..self }
    }

    /// The same request, each case talking to `interactor`.
    pub fn with_interactor(self, interactor: InteractorRequest<'a>) -> Self {
        RunRequest {
            interactor: Some(interactor),
            ..self
        }
    }

    /// The same request, telling each case's event to `sink` as it is decided.
    pub fn on_case(self, sink: CaseSink) -> Self {
        RunRequest {
            on_case: Some(sink),
            ..self
        }
    }

    /// The name of the client's profile the request runs under.
    pub fn profile_name(&self) -> &'a str {
        match self.profile {
            RunProfile::Named(name) => name,
            RunProfile::Variant(variant) => &variant.name,
        }
    }

    /// The profile to run: `own` (the client's profile of that name)
    /// itself, or the variant once checked against it.
    pub fn profile_against<'p>(
        &self,
        own: &'p RuntimeProfile,
    ) -> Result<&'p RuntimeProfile, SandboxError>
    where
        'a: 'p,
    {
        match self.profile {
            RunProfile::Named(_) => Ok(own),
            RunProfile::Variant(variant) => {
                SandboxError::check_variant(own, variant)?;
                Ok(variant)
            }
        }
    }
}

/// Runs programs under named profiles.
///
/// Contract for implementations:
/// - every invocation runs in a fresh sandbox; nothing carries over;
/// - the program's bytes run verbatim; nothing is extracted from them;
/// - a fault of the sandbox becomes `Outcome::SandboxError` for that
///   invocation and `Outcome::NotRun` for the rest, never an exit code;
/// - dropping the returned future stops the run and still removes everything
///   the call created; the drop only completes after that cleanup (backends
///   do the cleanup on a task that the future's drop waits for, or
///   synchronously).
///
/// One method runs programs ([`SandboxClient::run`]); the shorthands for
/// common requests are [`SandboxClientExt`]'s.
pub trait SandboxClient: Send + Sync {
    /// The profiles this client can run, by name.
    fn profiles(&self) -> Vec<&RuntimeProfile>;

    /// One profile by name.
    fn profile(&self, name: &str) -> Option<&RuntimeProfile> {
        self.profiles().into_iter().find(|p| p.name == name)
    }

    /// Runs the request's program once per invocation.
    ///
    /// `Err` means nothing of the program's behaviour is known: the request
    /// was refused before anything ran (unknown profile, missing image, an
    /// engine that cannot enforce the limits, a variant that changes more
    /// than limits, files the backend cannot place, an invocation that
    /// cannot be delivered...), or the engine was lost during the run and
    /// did not come back ([`SandboxError::EngineUnavailable`]).
    fn run<'a>(
        &'a self,
        request: RunRequest<'a>,
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>>;

    /// Checks, before anything runs, that `profile` can run here (engine
    /// reachable, artifact present by its pin, runtime registered, limits
    /// enforceable) and resolves what the backend decides for it. Callers
    /// derive attempt keys from [`Preflight::fingerprint`].
    ///
    /// The default only checks that the profile is known.
    fn preflight<'a>(&'a self, profile: &'a str) -> BoxFuture<'a, Result<Preflight, SandboxError>> {
        Box::pin(async move {
            let found = self
                .profile(profile)
                .ok_or_else(|| SandboxError::unknown_profile(profile, self.profiles()))?;
            Ok(Preflight::of(found, String::new()))
        })
    }
}

/// Shorthands for [`SandboxClient::run`], for every client.
pub trait SandboxClientExt: SandboxClient {
    /// Runs `program` once per invocation under the profile named `profile`.
    fn execute<'a>(
        &'a self,
        program: &'a [u8],
        profile: &'a str,
        invocations: &'a [Invocation],
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        self.run(RunRequest::new(program, profile, invocations))
    }

    /// Runs `program` once per invocation under `variant` ([`RunProfile::Variant`]).
    fn execute_variant<'a>(
        &'a self,
        program: &'a [u8],
        variant: &'a RuntimeProfile,
        invocations: &'a [Invocation],
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        self.run(RunRequest::variant(program, variant, invocations))
    }

    /// Runs `program` with `files` beside it under `variant`.
    fn execute_with_files<'a>(
        &'a self,
        program: &'a [u8],
        variant: &'a RuntimeProfile,
        files: &'a ProgramFiles,
        invocations: &'a [Invocation],
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        self.run(RunRequest::variant(program, variant, invocations).with_files(files))
    }
}

impl<C: SandboxClient + ?Sized> SandboxClientExt for C {}

/// What a backend found when it checked a profile before any run.
#[derive(Debug, Clone, PartialEq)]
pub struct Preflight {
    /// Everything that decides how a program runs under the profile: its
    /// [`RuntimeProfile::fingerprint_json`], with what the backend resolved
    /// filled in (the engine's default runtime when the profile names none).
    pub fingerprint: serde_json::Value,
    /// What was checked, in one line (for `doctor` and logs).
    pub detail: String,
}

impl Preflight {
    /// The profile's own fingerprint, nothing resolved.
    pub fn of(profile: &RuntimeProfile, detail: String) -> Preflight {
        Preflight {
            fingerprint: profile.fingerprint_json(),
            detail,
        }
    }
}

/// Why a request was refused before any invocation ran.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SandboxError {
    /// No profile of that name is configured for this client.
    #[error("unknown profile `{name}`; configured profiles: {known}")]
    UnknownProfile {
        /// What was asked for.
        name: String,
        /// Comma-separated list of known names.
        known: String,
    },
    /// The engine could not be reached at all.
    #[error("sandbox engine unavailable: {message}")]
    EngineUnavailable { message: String },
    /// The engine cannot enforce a limit the profile needs.
    #[error("the engine cannot enforce {missing}: {hint}")]
    EngineUnsupported {
        /// What is missing (e.g. "swap limits").
        missing: String,
        /// How to fix it.
        hint: String,
    },
    /// The pinned artifact is not present; progscore never pulls or downloads.
    #[error("profile `{profile}`: {artifact} is not present; {hint}")]
    ArtifactMissing {
        profile: String,
        artifact: String,
        /// How to provide it.
        hint: String,
    },
    /// The artifact is present but must not be used.
    #[error("profile `{profile}`: {artifact} refused: {reason}")]
    ArtifactRefused {
        profile: String,
        artifact: String,
        /// Why (declares volumes, hash mismatch...).
        reason: String,
    },
    /// The profile names a runtime the engine does not list.
    #[error(
        "profile `{profile}`: runtime `{runtime}` is not registered with the engine (it lists: {available}); {hint}"
    )]
    RuntimeMissing {
        profile: String,
        /// The runtime asked for.
        runtime: String,
        /// What the engine lists.
        available: String,
        /// How to register it.
        hint: String,
    },
    /// The profile belongs to another backend.
    #[error("profile `{profile}` uses backend `{backend}`, which this client does not run")]
    WrongBackend {
        profile: String,
        /// Its backend.
        backend: String,
    },
    /// An invocation cannot be delivered to a program as given (a NUL byte in
    /// an argument, arguments or stdin beyond the documented sizes).
    #[error(transparent)]
    InvalidInvocation(#[from] InvalidInvocation),
    /// A program's own limits this client cannot apply, or a "variant"
    /// that differs from its profile in more than limits.
    #[error("profile `{profile}`: {reason}")]
    NotAVariant { profile: String, reason: String },
    /// Files a program brings that cannot be placed as given.
    #[error(transparent)]
    InvalidFiles(#[from] InvalidFiles),
    /// A backend that cannot place files beside a program.
    #[error("profile `{profile}`: this backend cannot place files beside a program")]
    FilesUnsupported { profile: String },
    /// A backend that cannot run a side of an interactive conversation.
    #[error(
        "profile `{profile}`: this backend cannot run an interactive case (a program and an interactor talking); use a Docker or OCI profile"
    )]
    InteractiveUnsupported { profile: String },
    /// Any other fault before the run started (workspace creation, ...).
    #[error("sandbox setup failed: {message}")]
    Setup { message: String },
    /// Another machine's backend refused the request or could not answer
    /// (the message names the node); `transient` when retrying later may
    /// succeed (an engine away, a node lost) rather than a setting to fix.
    #[error("{message}")]
    Remote { message: String, transient: bool },
}

impl SandboxError {
    /// `UnknownProfile` for `name`, listing the profiles a client knows.
    pub fn unknown_profile<'p>(
        name: &str,
        known: impl IntoIterator<Item = &'p RuntimeProfile>,
    ) -> SandboxError {
        SandboxError::UnknownProfile {
            name: name.to_string(),
            known: known
                .into_iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// `Ok` when `variant` is `own` with other limits only (see
    /// [`RuntimeProfile::is_variant`]), else `NotAVariant`: what a backend
    /// that applies a program's own limits checks before it runs.
    pub fn check_variant(
        own: &RuntimeProfile,
        variant: &RuntimeProfile,
    ) -> Result<(), SandboxError> {
        if own.is_variant(variant) {
            return Ok(());
        }
        Err(SandboxError::NotAVariant {
            profile: variant.name.clone(),
            reason: "a program's own limits may change the profile's limits, nothing else".into(),
        })
    }

    /// Whether this is a passing infrastructure fault (worth retrying later)
    /// rather than a configuration problem the user must fix.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            SandboxError::EngineUnavailable { .. }
                | SandboxError::Setup { .. }
                | SandboxError::Remote {
                    transient: true,
                    ..
                }
        )
    }
}
