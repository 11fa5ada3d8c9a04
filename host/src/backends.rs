//! One [`SandboxClient`] over every configured backend, routed by profile.

use std::collections::HashMap;

use progscore_docker::{DockerClient, DockerOptions, EngineReport};
use progscore_sandbox::{
    Backend, BoxFuture, Invocation, ProgramRun, RuntimeProfile, SandboxClient, SandboxError,
};

/// Every backend the config needs, each built only if a profile uses it.
pub struct Backends {
    profiles: Vec<RuntimeProfile>,
    by_profile: HashMap<String, Backend>,
    docker: Option<DockerClient>,
}

impl Backends {
    /// Builds the backends the profiles use.
    pub fn new(profiles: Vec<RuntimeProfile>) -> Result<Backends, SandboxError> {
        let of = |backend: Backend| -> Vec<RuntimeProfile> {
            profiles
                .iter()
                .filter(|p| p.backend == backend)
                .cloned()
                .collect()
        };
        let docker_profiles = of(Backend::Docker);
        let docker = if docker_profiles.is_empty() {
            None
        } else {
            Some(DockerClient::new(
                docker_profiles,
                DockerOptions::default(),
            )?)
        };
        Ok(Backends {
            by_profile: profiles
                .iter()
                .map(|p| (p.name.clone(), p.backend))
                .collect(),
            profiles,
            docker,
        })
    }

    /// The Docker engine's report, when a profile uses Docker.
    pub async fn docker_report(&self) -> Option<EngineReport> {
        match &self.docker {
            Some(docker) => Some(docker.diagnose().await),
            None => None,
        }
    }

    fn client_for(&self, backend: Backend) -> Option<&dyn SandboxClient> {
        match backend {
            Backend::Docker => self.docker.as_ref().map(|c| c as &dyn SandboxClient),
            Backend::Wasi => None,
        }
    }
}

impl SandboxClient for Backends {
    fn profiles(&self) -> Vec<&RuntimeProfile> {
        self.profiles.iter().collect()
    }

    fn execute<'a>(
        &'a self,
        program: &'a [u8],
        profile: &'a str,
        invocations: &'a [Invocation],
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        let backend = self.by_profile.get(profile).copied();
        match backend.and_then(|b| self.client_for(b).map(|c| (b, c))) {
            Some((_, client)) => client.execute(program, profile, invocations),
            None => {
                let error = match backend {
                    None => SandboxError::UnknownProfile {
                        name: profile.to_string(),
                        known: self
                            .profiles
                            .iter()
                            .map(|p| p.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    },
                    Some(backend) => SandboxError::WrongBackend {
                        profile: profile.to_string(),
                        backend: backend.to_string(),
                    },
                };
                Box::pin(async move { Err(error) })
            }
        }
    }
}
