//! The [`SandboxClient`] face of a container backend, written once: every
//! call runs on a runtime of the client's own, a dropped call waits for its
//! cleanup ([`spawn_guarded`]), and the owner's record says a cleanup is
//! pending until the call's own cleanup is done. A backend supplies what
//! differs as a [`Backend`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use progscore_sandbox::{
    BoxFuture, CaseSink, ConversationSide, Invocation, Owner, Preflight, ProgramFiles, ProgramRun,
    RunProfile, RunRequest, RuntimeProfile, SandboxClient, SandboxError,
};
use tokio_util::sync::CancellationToken;

use crate::guard::{shut_down, spawn_guarded};

/// What a container backend does behind the shared face.
pub trait Backend: Send + Sync + 'static {
    /// The profiles' `backend` value this backend runs.
    const KIND: progscore_sandbox::Backend;

    fn profiles(&self) -> &[RuntimeProfile];

    /// This client's owner (its workspaces, containers and cgroups).
    fn owner(&self) -> &Owner;

    /// How long a dropped call may block its caller while it cleans up: the
    /// sum of its cleanup's own bounds.
    fn cleanup_bound(&self) -> Duration;

    /// Runs a program with its files (the profile is this backend's,
    /// already looked up; the files checked against it), telling each
    /// case's event to `on_case` as it is decided. With `conversation`,
    /// the run is one side of an interactive request
    /// ([`progscore_sandbox::conversation`]).
    #[allow(
        clippy::too_many_arguments,
        reason = "the request's parts, checked, and the call's token"
    )]
    fn run(
        &self,
        program: &[u8],
        profile: &RuntimeProfile,
        files: &ProgramFiles,
        invocations: &[Invocation],
        on_case: Option<&CaseSink>,
        conversation: Option<&ConversationSide>,
        token: &CancellationToken,
    ) -> impl Future<Output = Result<ProgramRun, SandboxError>> + Send;

    /// Checks that a profile (this backend's) can run.
    fn preflight(
        &self,
        profile: &RuntimeProfile,
    ) -> impl Future<Output = Result<Preflight, SandboxError>> + Send;

    /// Called as the client is dropped, while its runtime still runs (a
    /// last try at what calls left).
    fn stopping(&self, _runtime: &tokio::runtime::Runtime) {}

    /// Called as the client is dropped, once its runtime has stopped.
    fn stopped(&self) {}

    /// The profile named `name`, when it is one of this backend's.
    fn profile(&self, name: &str) -> Result<&RuntimeProfile, SandboxError> {
        let profiles = self.profiles();
        let profile = profiles
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| SandboxError::unknown_profile(name, profiles))?;
        if profile.backend != Self::KIND {
            return Err(SandboxError::WrongBackend {
                profile: profile.name.clone(),
                backend: profile.backend.to_string(),
            });
        }
        Ok(profile)
    }
}

/// A backend behind the shared face, on a runtime of its own.
pub struct Guarded<B: Backend> {
    backend: Arc<B>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl<B: Backend> Guarded<B> {
    /// Starts the client's own runtime (two workers, threads named
    /// `thread_name`) for `backend`.
    pub fn new(backend: B, thread_name: &str) -> Result<Guarded<B>, SandboxError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(thread_name)
            .enable_all()
            .build()
            .map_err(|e| SandboxError::Setup {
                message: format!("cannot start the client's runtime ({thread_name}): {e}"),
            })?;
        Ok(Guarded {
            backend: Arc::new(backend),
            runtime: Some(runtime),
        })
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Runs `work` with the backend on the client's own runtime (not
    /// guarded: for reports and checks that create nothing to clean up).
    pub fn spawn<F, W>(&self, work: W) -> tokio::task::JoinHandle<F::Output>
    where
        W: FnOnce(Arc<B>) -> F,
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime().spawn(work(self.backend.clone()))
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        match &self.runtime {
            Some(runtime) => runtime,
            None => unreachable!("the runtime is only taken in Drop"),
        }
    }
}

impl<B: Backend> Guarded<B> {
    fn run_guarded<'a>(
        &'a self,
        request: RunRequest<'a>,
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        if request.interactor.is_some() {
            return Box::pin(progscore_sandbox::converse(self, request));
        }
        let backend = self.backend.clone();
        let program = request.program.to_vec();
        let invocations = request.invocations.to_vec();
        let files = request.files.clone();
        let name = request.profile_name().to_string();
        let variant = match request.profile {
            RunProfile::Named(_) => None,
            RunProfile::Variant(variant) => Some(variant.clone()),
        };
        let on_case = request.on_case;
        let conversation = request.conversation;
        let cleanup_bound = self.backend.cleanup_bound();
        let task = spawn_guarded(self.runtime(), cleanup_bound, |token| async move {
            // Not done if the task is dropped mid-cleanup (its bound overran
            // and the client stopped): the owner's record then stays, so the
            // next start's sweep finds what the call left.
            let cleanup = backend.owner().cleanup_pending();
            let run = async {
                let own = backend.profile(&name)?;
                let profile = match &variant {
                    None => own,
                    Some(variant) => {
                        SandboxError::check_variant(own, variant)?;
                        variant
                    }
                };
                profile.check_invocations(&invocations)?;
                files.check_for(profile)?;
                backend
                    .run(
                        &program,
                        profile,
                        &files,
                        &invocations,
                        on_case.as_ref(),
                        conversation.as_ref(),
                        &token,
                    )
                    .await
            }
            .await;
            cleanup.done();
            run
        });
        Box::pin(async move {
            task.await.map_err(|e| SandboxError::Setup {
                message: format!("the sandbox task failed: {e}"),
            })?
        })
    }
}

impl<B: Backend> Drop for Guarded<B> {
    fn drop(&mut self) {
        // No call can be in flight here (calls borrow the client), but a
        // preflight whose caller gave up (a signal during the checks) may
        // be: it is dropped now, with the owner record it holds.
        if let Some(runtime) = self.runtime.take() {
            self.backend.stopping(&runtime);
            shut_down(runtime);
        }
        self.backend.stopped();
    }
}

impl<B: Backend> SandboxClient for Guarded<B> {
    fn profiles(&self) -> Vec<&RuntimeProfile> {
        self.backend.profiles().iter().collect()
    }

    fn run<'a>(
        &'a self,
        request: RunRequest<'a>,
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        self.run_guarded(request)
    }

    fn preflight<'a>(&'a self, profile: &'a str) -> BoxFuture<'a, Result<Preflight, SandboxError>> {
        let profile = profile.to_string();
        let task = self.spawn(|backend| async move {
            let profile = backend.profile(&profile)?;
            backend.preflight(profile).await
        });
        Box::pin(async move {
            task.await.map_err(|e| SandboxError::Setup {
                message: format!("the preflight task failed: {e}"),
            })?
        })
    }
}
