//! One [`SandboxClient`] over every configured backend, routed by profile.

use std::collections::HashMap;

use std::path::PathBuf;

use progscore_docker::{DockerClient, DockerOptions, EngineReport};
use progscore_oci::OciClient;
pub use progscore_oci::OciOptions;
use progscore_sandbox::{
    Backend, BoxFuture, Preflight, ProgramRun, RunRequest, RuntimeProfile, SandboxClient,
    SandboxError,
};
use progscore_wasi::{WasiClient, WasiOptions, WorkerCommand};

/// The name of the engine a config without `[[docker.engines]]` has.
pub use progscore_docker::DEFAULT_ENGINE_NAME;

/// Turns this process into a WASI worker when it was started as one (the
/// faces' binaries double as workers): call first thing in `main`; the exit
/// code to end with, or `None` to go on as usual.
pub fn run_wasi_worker_if_requested() -> Option<std::process::ExitCode> {
    progscore_wasi::worker::run_if_requested()
}

/// Every backend the config needs, each built only if a profile uses it.
pub struct Backends {
    profiles: Vec<RuntimeProfile>,
    by_profile: HashMap<String, Backend>,
    docker: Option<DockerClient>,
    wasi: Option<WasiClient>,
    oci: Option<OciClient>,
}

/// Where WASI guests run.
#[derive(Debug, Clone)]
pub enum WasiWorkers {
    /// Worker processes started by this command (one per core): guests in
    /// one process slow each other down, so processes are the fast choice.
    Command(WorkerCommand),
    /// The `progscore-wasi-worker` binary next to the running executable
    /// when there is one (a cargo build puts it there), else in-process threads.
    Auto,
}

impl WasiWorkers {
    /// Workers that are this executable again (it calls
    /// [`run_wasi_worker_if_requested`] first thing), or [`WasiWorkers::Auto`]
    /// when the executable cannot be found.
    pub fn this_executable() -> WasiWorkers {
        match WorkerCommand::current_exe() {
            Ok(command) => WasiWorkers::Command(command),
            Err(_) => WasiWorkers::Auto,
        }
    }

    /// Workers that are `binary`, a progscore executable, started with the
    /// worker's environment variable set.
    pub fn progscore_binary(binary: PathBuf) -> WasiWorkers {
        let mut command = WorkerCommand::new(binary);
        command
            .env
            .push((progscore_wasi::WORKER_ENV.into(), "1".into()));
        WasiWorkers::Command(command)
    }
}

impl Backends {
    /// Builds the backends the profiles use, with default Docker options;
    /// WASI guests run as [`WasiWorkers::Auto`].
    pub fn new(profiles: Vec<RuntimeProfile>) -> Result<Backends, SandboxError> {
        Backends::build(
            profiles,
            DockerOptions::default(),
            OciOptions::default(),
            WasiWorkers::Auto,
        )
    }

    /// Builds the backends the profiles use: Docker with `docker`, OCI
    /// with `oci_options`, WASI
    /// guests run as `workers` says.
    pub fn build(
        profiles: Vec<RuntimeProfile>,
        docker: DockerOptions,
        oci_options: OciOptions,
        workers: WasiWorkers,
    ) -> Result<Backends, SandboxError> {
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
            Some(DockerClient::new(docker_profiles, docker)?)
        };
        let wasi_profiles = of(Backend::Wasi);
        let wasi = if wasi_profiles.is_empty() {
            None
        } else {
            let options = match workers {
                WasiWorkers::Command(command) => WasiOptions::with_workers(command),
                WasiWorkers::Auto => match sibling_worker() {
                    Some(path) => WasiOptions::with_workers(WorkerCommand::new(path)),
                    None => WasiOptions::in_process(),
                },
            };
            Some(WasiClient::new(wasi_profiles, options)?)
        };
        let oci_profiles = of(Backend::Oci);
        let oci = if oci_profiles.is_empty() {
            None
        } else {
            Some(OciClient::new(oci_profiles, oci_options)?)
        };
        Ok(Backends {
            wasi,
            oci,
            by_profile: profiles
                .iter()
                .map(|p| (p.name.clone(), p.backend))
                .collect(),
            profiles,
            docker,
        })
    }

    /// The owner name the Docker backend labels its containers with
    /// (`progscore.owner=<owner>`), when a profile uses Docker.
    pub fn docker_owner(&self) -> Option<&str> {
        self.docker.as_ref().map(DockerClient::owner)
    }

    /// The folder holding the Docker backend's per-run workspaces (empty
    /// between runs), when a profile uses Docker.
    pub fn docker_workspaces(&self) -> Option<&std::path::Path> {
        self.docker.as_ref().map(DockerClient::owner_dir)
    }

    /// How many programs the Docker engines take at once in all, when a
    /// profile uses Docker and every engine is bounded (after a preflight).
    pub fn docker_capacity(&self) -> Option<usize> {
        self.docker.as_ref().and_then(DockerClient::capacity)
    }

    /// Each Docker engine's report, when a profile uses Docker.
    pub async fn docker_report(&self) -> Option<Vec<EngineReport>> {
        match &self.docker {
            Some(docker) => Some(docker.diagnose().await),
            None => None,
        }
    }

    /// The OCI backend's image cache, each image checked (None without OCI
    /// profiles).
    pub async fn oci_cache(&self) -> Option<Vec<progscore_oci::CachedImage>> {
        match &self.oci {
            Some(oci) => Some(oci.cached_images().await),
            None => None,
        }
    }

    /// For each OCI profile: its runtime, its image (fetched and unpacked if
    /// missing, its tree verified), the host's cgroups.
    pub async fn oci_report(&self) -> Vec<(String, Result<String, SandboxError>)> {
        match &self.oci {
            Some(oci) => oci.diagnose().await,
            None => Vec::new(),
        }
    }

    /// For each WASI profile: are its pinned files present and intact, and
    /// does its module compile (the first check compiles it into the cache).
    pub async fn wasi_report(&self) -> Vec<(String, Result<String, SandboxError>)> {
        let Some(wasi) = &self.wasi else {
            return Vec::new();
        };
        let mut report = Vec::new();
        for profile in self.profiles.iter().filter(|p| p.backend == Backend::Wasi) {
            let result = wasi.prepare(&profile.name).await.map(|()| {
                format!(
                    "module {} verified and compiled (wasmtime {})",
                    match &profile.artifact {
                        progscore_sandbox::Artifact::WasmModule { module, .. } =>
                            module.sha256.clone(),
                        progscore_sandbox::Artifact::DockerImage { image } => image.to_string(),
                    },
                    progscore_wasi::WASMTIME_VERSION
                )
            });
            report.push((profile.name.clone(), result));
        }
        report
    }

    fn client_for(&self, backend: Backend) -> Option<&dyn SandboxClient> {
        match backend {
            Backend::Docker => self.docker.as_ref().map(|c| c as &dyn SandboxClient),
            Backend::Wasi => self.wasi.as_ref().map(|c| c as &dyn SandboxClient),
            Backend::Oci => self.oci.as_ref().map(|c| c as &dyn SandboxClient),
        }
    }
}

impl SandboxClient for Backends {
    fn profiles(&self) -> Vec<&RuntimeProfile> {
        self.profiles.iter().collect()
    }

    fn run<'a>(
        &'a self,
        request: RunRequest<'a>,
    ) -> BoxFuture<'a, Result<ProgramRun, SandboxError>> {
        // Each side of a conversation goes to its own profile's backend.
        if request.interactor.is_some() {
            return Box::pin(progscore_sandbox::converse(self, request));
        }
        match self.route(request.profile_name()) {
            Ok(client) => client.run(request),
            Err(error) => Box::pin(async move { Err(error) }),
        }
    }

    fn preflight<'a>(&'a self, profile: &'a str) -> BoxFuture<'a, Result<Preflight, SandboxError>> {
        match self.route(profile) {
            Ok(client) => client.preflight(profile),
            Err(error) => Box::pin(async move { Err(error) }),
        }
    }
}

impl Backends {
    /// The client that runs `profile`.
    fn route(&self, profile: &str) -> Result<&dyn SandboxClient, SandboxError> {
        let backend = self.by_profile.get(profile).copied();
        backend
            .and_then(|b| self.client_for(b))
            .ok_or_else(|| match backend {
                None => SandboxError::unknown_profile(profile, &self.profiles),
                Some(backend) => SandboxError::WrongBackend {
                    profile: profile.to_string(),
                    backend: backend.to_string(),
                },
            })
    }
}

/// `progscore-wasi-worker` beside the running executable, or one folder up
/// (test binaries live in `target/<profile>/deps`).
fn sibling_worker() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join("progscore-wasi-worker"),
        dir.parent()?.join("progscore-wasi-worker"),
    ]
    .into_iter()
    .find(|path| path.is_file())
}
