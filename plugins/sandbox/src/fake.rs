//! A scripted sandbox client for testing *callers* of the contract.
//!
//! It runs nothing: a responder function decides each run's events. It counts
//! calls, completions and cancellations so callers' tests can check sharing
//! and cancellation. It is never a stand-in for a real backend's tests.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::canonical::sha256_hex;
use crate::client::{BoxFuture, Preflight, RunRequest, SandboxClient, SandboxError};
use crate::invocation::Invocation;
use crate::profile::RuntimeProfile;
use crate::run::Interaction;
use crate::run::{CapturedStream, CompileEvent, InvocationEvent, Outcome, ProgramRun};

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct FakeRequest {
    /// The program's bytes.
    pub program: Vec<u8>,
    /// The profile name.
    pub profile: String,
    /// The invocations.
    pub invocations: Vec<Invocation>,
    /// The limits it ran under: the profile's, or a variant's.
    pub limits: crate::profile::Limits,
    /// The files placed beside the program.
    pub files: crate::files::ProgramFiles,
    /// The interactor of an interactive request, as the fake saw it.
    pub interactor: Option<Box<FakeRequest>>,
}

type Responder = dyn Fn(&FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> + Send + Sync;
type CompileResponder = dyn Fn(&FakeRequest) -> Option<CompileEvent> + Send + Sync;
type InteractionResponder = dyn Fn(&FakeRequest) -> Interaction + Send + Sync;
type PreflightHook = dyn Fn(&RuntimeProfile) -> Result<Preflight, SandboxError> + Send + Sync;

/// Counters shared by all clones of a [`ScriptedClient`].
#[derive(Debug, Default)]
pub struct FakeCounters {
    /// `execute` calls that started.
    pub started: AtomicUsize,
    /// Calls that returned a result.
    pub completed: AtomicUsize,
    /// Calls whose future was dropped before completing.
    pub cancelled: AtomicUsize,
}

/// A [`SandboxClient`] whose runs are scripted by a function.
#[derive(Clone)]
pub struct ScriptedClient {
    profiles: Vec<RuntimeProfile>,
    responder: Arc<Responder>,
    compile: Option<Arc<CompileResponder>>,
    interaction: Option<Arc<InteractionResponder>>,
    preflight: Option<Arc<PreflightHook>>,
    delay: Duration,
    case_gate: Option<Arc<tokio::sync::Semaphore>>,
    counters: Arc<FakeCounters>,
}

impl ScriptedClient {
    /// A client for these profiles whose runs all exit 0 with no output.
    pub fn new(profiles: Vec<RuntimeProfile>) -> Self {
        ScriptedClient {
            profiles,
            responder: Arc::new(|request: &FakeRequest| {
                Ok(request
                    .invocations
                    .iter()
                    .map(|_| exited_event(0, b"", b""))
                    .collect())
            }),
            compile: None,
            interaction: None,
            preflight: None,
            delay: Duration::ZERO,
            case_gate: None,
            counters: Arc::default(),
        }
    }

    /// Decides each profile's preflight (the default: the profile's own
    /// fingerprint, nothing resolved).
    pub fn with_preflight<F>(mut self, preflight: F) -> Self
    where
        F: Fn(&RuntimeProfile) -> Result<Preflight, SandboxError> + Send + Sync + 'static,
    {
        self.preflight = Some(Arc::new(preflight));
        self
    }

    /// Decides each run's events (one per invocation) or refuses the request.
    pub fn with_responder<F>(mut self, responder: F) -> Self
    where
        F: Fn(&FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> + Send + Sync + 'static,
    {
        self.responder = Arc::new(responder);
        self
    }

    /// Decides the compile event of each run of a profile that compiles
    /// (the default: none recorded). A failed build's cases stay the
    /// responder's to script (as [`Outcome::CompileError`]), as a backend
    /// decides them from the build.
    pub fn with_compile<F>(mut self, compile: F) -> Self
    where
        F: Fn(&FakeRequest) -> Option<CompileEvent> + Send + Sync + 'static,
    {
        self.compile = Some(Arc::new(compile));
        self
    }

    /// Decides what the interactor of an interactive request did (its run
    /// and the transcripts); the request's `interactor` is set. The
    /// default: every interactor case exits 0 with no output, and no
    /// transcript.
    pub fn with_interaction<F>(mut self, interaction: F) -> Self
    where
        F: Fn(&FakeRequest) -> Interaction + Send + Sync + 'static,
    {
        self.interaction = Some(Arc::new(interaction));
        self
    }

    /// Makes every run take this long (a tokio sleep), to test concurrency.
    /// Cases that end one after another, each when `gate` gives a permit
    /// (after `delay`), each told to the request's [`crate::CaseSink`] as
    /// it ends: a test decides when each case ends.
    pub fn with_case_gate(mut self, gate: Arc<tokio::sync::Semaphore>) -> Self {
        self.case_gate = Some(gate);
        self
    }

    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// The shared counters.
    pub fn counters(&self) -> &FakeCounters {
        &self.counters
    }
}

/// An `exited` event with complete (untruncated) output.
pub fn exited_event(exit_code: i64, stdout: &[u8], stderr: &[u8]) -> InvocationEvent {
    event(Outcome::Exited { exit_code }, stdout, stderr)
}

/// An event with this outcome and complete output.
pub fn event(outcome: Outcome, stdout: &[u8], stderr: &[u8]) -> InvocationEvent {
    InvocationEvent {
        outcome,
        stdout: CapturedStream::complete(stdout.to_vec()),
        stderr: CapturedStream::complete(stderr.to_vec()),
        duration_ms: 1,
        usage: None,
        provenance: None,
        behaviour: None,
    }
}

struct CancelGuard {
    counters: Arc<FakeCounters>,
    done: bool,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if !self.done {
            self.counters.cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl ScriptedClient {
    async fn run_checked(
        &self,
        request: &RunRequest<'_>,
        profile: &RuntimeProfile,
    ) -> Result<ProgramRun, SandboxError> {
        let RunRequest {
            program,
            files,
            invocations,
            ..
        } = *request;
        profile.check_invocations(invocations)?;
        files.check_for(profile)?;
        self.counters.started.fetch_add(1, Ordering::SeqCst);
        let mut guard = CancelGuard {
            counters: self.counters.clone(),
            done: false,
        };
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let scripted = FakeRequest {
            program: program.to_vec(),
            profile: profile.name.clone(),
            invocations: invocations.to_vec(),
            limits: profile.limits.clone(),
            files: files.clone(),
            interactor: request.interactor.map(|interactor| {
                Box::new(FakeRequest {
                    program: interactor.program.to_vec(),
                    profile: match interactor.profile {
                        crate::client::RunProfile::Named(name) => name.to_string(),
                        crate::client::RunProfile::Variant(variant) => variant.name.clone(),
                    },
                    invocations: interactor.invocations.to_vec(),
                    limits: match interactor.profile {
                        crate::client::RunProfile::Named(_) => profile.limits.clone(),
                        crate::client::RunProfile::Variant(variant) => variant.limits.clone(),
                    },
                    files: interactor.files.clone(),
                    interactor: None,
                })
            }),
        };
        let compile = match (&profile.compile, &self.compile) {
            (Some(_), Some(compile)) => compile(&scripted),
            _ => None,
        };
        let interaction = scripted.interactor.as_ref().map(|interactor| {
            Box::new(match &self.interaction {
                Some(responder) => responder(&scripted),
                None => Interaction {
                    interactor: ProgramRun {
                        profile: interactor.profile.clone(),
                        program_sha256: sha256_hex(&interactor.program),
                        events: interactor
                            .invocations
                            .iter()
                            .map(|_| exited_event(0, b"", b""))
                            .collect(),
                        sandbox_warnings: Vec::new(),
                        compile: None,
                        interaction: None,
                    },
                    transcripts: Vec::new(),
                },
            })
        });
        let result = (self.responder)(&scripted).map(|events| ProgramRun {
            profile: profile.name.clone(),
            program_sha256: sha256_hex(program),
            events,
            sandbox_warnings: Vec::new(),
            compile,
            interaction,
        });
        if let Ok(run) = &result {
            for (index, event) in run.events.iter().enumerate() {
                if let Some(gate) = &self.case_gate
                    && let Ok(permit) = gate.acquire().await
                {
                    permit.forget();
                }
                if let Some(sink) = &request.on_case {
                    sink.report(index, event, run.compile.as_ref());
                }
            }
        }
        guard.done = true;
        self.counters.completed.fetch_add(1, Ordering::SeqCst);
        result
    }
}

impl SandboxClient for ScriptedClient {
    fn profiles(&self) -> Vec<&RuntimeProfile> {
        self.profiles.iter().collect()
    }

    fn run<'a>(
        &'a self,
        request: RunRequest<'a>,
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        Box::pin(async move {
            let name = request.profile_name();
            let Some(own) = self.profile(name) else {
                return Err(SandboxError::unknown_profile(name, &self.profiles));
            };
            let profile = request.profile_against(own)?;
            self.run_checked(&request, profile).await
        })
    }

    fn preflight<'a>(&'a self, profile: &'a str) -> BoxFuture<'a, Result<Preflight, SandboxError>> {
        Box::pin(async move {
            let found = self
                .profile(profile)
                .ok_or_else(|| SandboxError::unknown_profile(profile, &self.profiles))?;
            match &self.preflight {
                Some(hook) => hook(found),
                None => Ok(Preflight::of(found, String::new())),
            }
        })
    }
}
