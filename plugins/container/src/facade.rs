//! The [`SandboxClient`] face of a container backend, written once: every
//! call runs on a runtime of the client's own, a dropped call waits for its
//! cleanup ([`spawn_guarded`]), and the owner's record says a cleanup is
//! pending until the call's own cleanup is done. A backend supplies what
//! differs as a [`Backend`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use progscore_sandbox::{
    BoxFuture, Invocation, Owner, Preflight, ProgramFiles, ProgramRun, RuntimeProfile,
    SandboxClient, SandboxError,
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
    /// already looked up; the files checked against it).
    fn run(
        &self,
        program: &[u8],
        profile: &RuntimeProfile,
        files: &ProgramFiles,
        invocations: &[Invocation],
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

/// The profile a call runs under: one of the backend's, or a variant of
/// one with other limits.
enum Chosen {
    Named(String),
    Variant(Box<RuntimeProfile>),
}

impl<B: Backend> Guarded<B> {
    fn run_guarded<'a>(
        &'a self,
        program: &'a [u8],
        chosen: Chosen,
        files: ProgramFiles,
        invocations: &'a [Invocation],
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        let backend = self.backend.clone();
        let program = program.to_vec();
        let invocations = invocations.to_vec();
        let cleanup_bound = self.backend.cleanup_bound();
        let task = spawn_guarded(self.runtime(), cleanup_bound, |token| async move {
            // Not done if the task is dropped mid-cleanup (its bound overran
            // and the client stopped): the owner's record then stays, so the
            // next start's sweep finds what the call left.
            let cleanup = backend.owner().cleanup_pending();
            let run = async {
                let profile = match &chosen {
                    Chosen::Named(name) => backend.profile(name)?,
                    Chosen::Variant(variant) => {
                        SandboxError::check_variant(backend.profile(&variant.name)?, variant)?;
                        variant
                    }
                };
                profile.check_invocations(&invocations)?;
                files.check_for(profile)?;
                backend
                    .run(&program, profile, &files, &invocations, &token)
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

    fn execute<'a>(
        &'a self,
        program: &'a [u8],
        profile: &'a str,
        invocations: &'a [Invocation],
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        self.run_guarded(
            program,
            Chosen::Named(profile.to_string()),
            ProgramFiles::default(),
            invocations,
        )
    }

    fn execute_variant<'a>(
        &'a self,
        program: &'a [u8],
        variant: &'a RuntimeProfile,
        invocations: &'a [Invocation],
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        self.run_guarded(
            program,
            Chosen::Variant(Box::new(variant.clone())),
            ProgramFiles::default(),
            invocations,
        )
    }

    fn execute_with_files<'a>(
        &'a self,
        program: &'a [u8],
        variant: &'a RuntimeProfile,
        files: &'a ProgramFiles,
        invocations: &'a [Invocation],
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        self.run_guarded(
            program,
            Chosen::Variant(Box::new(variant.clone())),
            files.clone(),
            invocations,
        )
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

/// Implements `SandboxClient` for a backend's client type by handing every
/// call to its [`Guarded`] field: `delegate_sandbox_client!(DockerClient,
/// client);`.
#[macro_export]
macro_rules! delegate_sandbox_client {
    ($client:ty, $field:ident) => {
        impl $crate::__sandbox::SandboxClient for $client {
            fn profiles(&self) -> Vec<&$crate::__sandbox::RuntimeProfile> {
                $crate::__sandbox::SandboxClient::profiles(&self.$field)
            }

            fn execute<'a>(
                &'a self,
                program: &'a [u8],
                profile: &'a str,
                invocations: &'a [$crate::__sandbox::Invocation],
            ) -> $crate::__sandbox::BoxFuture<
                'a,
                Result<$crate::__sandbox::ProgramRun, $crate::__sandbox::SandboxError>,
            > {
                $crate::__sandbox::SandboxClient::execute(
                    &self.$field,
                    program,
                    profile,
                    invocations,
                )
            }

            fn execute_variant<'a>(
                &'a self,
                program: &'a [u8],
                variant: &'a $crate::__sandbox::RuntimeProfile,
                invocations: &'a [$crate::__sandbox::Invocation],
            ) -> $crate::__sandbox::BoxFuture<
                'a,
                Result<$crate::__sandbox::ProgramRun, $crate::__sandbox::SandboxError>,
            > {
                $crate::__sandbox::SandboxClient::execute_variant(
                    &self.$field,
                    program,
                    variant,
                    invocations,
                )
            }

            fn execute_with_files<'a>(
                &'a self,
                program: &'a [u8],
                variant: &'a $crate::__sandbox::RuntimeProfile,
                files: &'a $crate::__sandbox::ProgramFiles,
                invocations: &'a [$crate::__sandbox::Invocation],
            ) -> $crate::__sandbox::BoxFuture<
                'a,
                Result<$crate::__sandbox::ProgramRun, $crate::__sandbox::SandboxError>,
            > {
                $crate::__sandbox::SandboxClient::execute_with_files(
                    &self.$field,
                    program,
                    variant,
                    files,
                    invocations,
                )
            }

            fn preflight<'a>(
                &'a self,
                profile: &'a str,
            ) -> $crate::__sandbox::BoxFuture<
                'a,
                Result<$crate::__sandbox::Preflight, $crate::__sandbox::SandboxError>,
            > {
                $crate::__sandbox::SandboxClient::preflight(&self.$field, profile)
            }
        }
    };
}
