//! `progscore._native`: the host's crates behind a small Python surface.
//!
//! Everything crosses the boundary once, as JSON in the shapes the CLI and
//! the store already use (profiles, invocations, expectations, runs,
//! observations, scores); the Python package (`python/progscore`) turns it
//! into typed objects. Work runs on this module's tokio runtime, never on
//! the caller's event loop, as [`NativeTask`]s: the loop is woken when one
//! ends, and reads its outcome on its own thread (see `task.rs` for why
//! progscore's threads never touch Python).

mod batch;
mod counts;
mod errors;
mod remote;
mod task;
mod wake;

use progscore_sandbox::SandboxClientExt as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use progscore_runtime::backends::{Backends, WasiWorkers};
use progscore_runtime::config::{Config, DockerSettings, UserComparator};
use progscore_runtime::session::{comparator_host, scorer_over};
use progscore_sandbox::{Invocation, ProfileSpec, RuntimeProfile, SandboxClient};
use progscore_scoring::evidence::{EvidenceStore, Observation, ScoreFilter};
use progscore_scoring::{
    ObservationRef, ProgramExecutionScorer, ProgramInput, ReplayRequest, RescoreRequest,
    ScoreRequest, ScoringError, ScoringExpectation,
};
use pyo3::prelude::*;
use tokio_util::sync::CancellationToken;

use crate::batch::NativeBatch;
use crate::counts::{counts_of, parse_fail_on};
use crate::errors::{
    EvidenceStoreError, InvalidExpectationError, ProgscoreError, ReplayRefusedError,
    SandboxRefusedError,
};
use crate::remote::NativeDesk;
use crate::task::{Failure, NativeTask, NativeWaker};

/// The sandboxes of a set of profiles (Docker, gVisor, WASI), and the user
/// comparators a config names.
#[pyclass(frozen, module = "progscore._native")]
struct NativeClient {
    /// Where programs run: this machine's backends, or other machines'
    /// (`remote_from_config`).
    sandbox: Arc<dyn SandboxClient>,
    /// This machine's backends, when programs run here.
    backends: Option<Arc<Backends>>,
    profiles: Vec<RuntimeProfile>,
    comparators: Vec<UserComparator>,
    languages: BTreeMap<String, String>,
}

#[pymethods]
impl NativeClient {
    /// Profiles given as JSON: `{"name": {ProfileSpec as in the config}}`.
    #[staticmethod]
    fn from_profiles(profiles_json: &str) -> PyResult<NativeClient> {
        let specs: BTreeMap<String, ProfileSpec> = serde_json::from_str(profiles_json)
            .map_err(|e| InvalidExpectationError::new_err(format!("profiles: {e}")))?;
        let profiles = specs
            .iter()
            .map(|(name, spec)| RuntimeProfile::from_spec(name, spec, Path::new(".")))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| InvalidExpectationError::new_err(e.to_string()))?;
        NativeClient::build(
            profiles,
            DockerSettings::default(),
            progscore_runtime::backends::OciOptions::default(),
            Vec::new(),
        )
    }

    /// Every profile and user comparator of a progscore.toml.
    #[staticmethod]
    fn from_config(path: PathBuf) -> PyResult<NativeClient> {
        let config =
            Config::load(&path).map_err(|e| InvalidExpectationError::new_err(e.to_string()))?;
        let mut client = NativeClient::build(
            config.profiles,
            config.docker,
            config.oci,
            config.comparators,
        )?;
        client.languages = config.languages;
        Ok(client)
    }

    /// A progscore.toml's profiles and comparators with programs run on
    /// other machines: every request waits on the returned desk for the
    /// caller's dispatcher (`progscore.ray`). Nothing runs here. Also the
    /// config's store path.
    #[staticmethod]
    fn remote_from_config(path: PathBuf) -> PyResult<(NativeClient, NativeDesk, PathBuf)> {
        let config =
            Config::load(&path).map_err(|e| InvalidExpectationError::new_err(e.to_string()))?;
        let desk = NativeDesk::new()?;
        let sandbox = progscore_runtime::remote::RemoteClient::new(
            config.profiles.clone(),
            desk.desk.clone(),
        );
        let client = NativeClient {
            sandbox: Arc::new(sandbox),
            backends: None,
            profiles: config.profiles,
            comparators: config.comparators,
            languages: config.languages,
        };
        Ok((client, desk, config.store_path))
    }

    /// The node side of `progscore.ray`: answers one request (JSON) from
    /// this client's sandboxes; the task's result is the reply's JSON.
    fn start_serve(&self, waker: &NativeWaker, request_json: &str) -> PyResult<NativeTask> {
        remote::start_serve(self.sandbox.clone(), waker, request_json)
    }

    /// The configured profiles' names, sorted.
    fn profile_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.profiles.iter().map(|p| p.name.clone()).collect();
        names.sort();
        names
    }

    /// The value of the `progscore.owner` label on this client's
    /// containers (None without a Docker profile).
    fn docker_owner(&self) -> Option<String> {
        let backends = self.backends.as_ref()?;
        backends.docker_owner().map(str::to_owned)
    }

    /// The folder of this client's per-run workspaces (None without a
    /// Docker profile).
    fn docker_workspaces(&self) -> Option<String> {
        let backends = self.backends.as_ref()?;
        backends
            .docker_workspaces()
            .map(|dir| dir.to_string_lossy().into_owned())
    }

    /// Starts running `program` once per invocation (JSON list); the task's
    /// result is the run as JSON.
    fn start_execute(
        &self,
        waker: &NativeWaker,
        program: Vec<u8>,
        profile: String,
        invocations_json: &str,
    ) -> PyResult<NativeTask> {
        let invocations: Vec<Invocation> = serde_json::from_str(invocations_json)
            .map_err(|e| InvalidExpectationError::new_err(format!("invocations: {e}")))?;
        let sandbox = self.sandbox.clone();
        Ok(NativeTask::spawn(
            waker,
            move |token: CancellationToken| async move {
                let run = tokio::select! {
                    biased;
                    // Dropping the run stops it; the drop returns after the
                    // sandbox's cleanup.
                    () = token.cancelled() => return Err(Failure::Cancelled),
                    run = sandbox.execute(&program, &profile, &invocations) => run,
                };
                let run = run.map_err(|e| Failure::Refused(e.to_string()))?;
                serde_json::to_string(&run).map_err(|e| Failure::Other(e.to_string()))
            },
        ))
    }
}

impl NativeClient {
    fn build(
        profiles: Vec<RuntimeProfile>,
        docker: DockerSettings,
        oci: progscore_runtime::backends::OciOptions,
        comparators: Vec<UserComparator>,
    ) -> PyResult<NativeClient> {
        let backends = Backends::build(profiles.clone(), docker.options(), oci, wasi_workers())
            .map_err(|e| SandboxRefusedError::new_err(e.to_string()))?;
        let backends = Arc::new(backends);
        Ok(NativeClient {
            sandbox: backends.clone(),
            backends: Some(backends),
            profiles,
            comparators,
            languages: BTreeMap::new(),
        })
    }
}

/// WASI guests run in worker processes when the progscore binary is on the
/// PATH (it doubles as the worker), else on threads of this process.
fn wasi_workers() -> WasiWorkers {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("progscore"))
            .find(|candidate| candidate.is_file())
    });
    match on_path {
        Some(binary) => WasiWorkers::progscore_binary(binary),
        None => WasiWorkers::Auto,
    }
}

/// The SQLite evidence store (the same file the CLI uses).
#[pyclass(frozen, module = "progscore._native")]
struct NativeStore {
    store: Arc<EvidenceStore>,
}

#[pymethods]
impl NativeStore {
    #[new]
    fn new(path: PathBuf) -> PyResult<NativeStore> {
        let store =
            EvidenceStore::open(&path).map_err(|e| EvidenceStoreError::new_err(e.to_string()))?;
        Ok(NativeStore {
            store: Arc::new(store),
        })
    }

    /// Reads the stored observations with these ids, in order; the task's
    /// result is a JSON list of each observation's JSON (as stored, so that a
    /// replay can prove it unchanged). An id that is not stored is an error
    /// naming it.
    fn start_observations(&self, waker: &NativeWaker, ids: Vec<String>) -> NativeTask {
        let store = self.store.clone();
        NativeTask::spawn_blocking(waker, move || {
            let records = ids
                .iter()
                .map(|id| match store.observation(id) {
                    Ok(Some(observation)) => serde_json::to_string(&observation)
                        .map_err(|e| Failure::Store(e.to_string())),
                    Ok(None) => Err(Failure::Replay(format!("observation {id} is not stored"))),
                    Err(e) => Err(Failure::Store(e.to_string())),
                })
                .collect::<Result<Vec<String>, Failure>>()?;
            serde_json::to_string(&records).map_err(|e| Failure::Other(e.to_string()))
        })
    }

    /// Reads stored scores (newest first), filtered by item or observation;
    /// the task's result is their JSON list.
    #[pyo3(signature = (waker, item_id=None, observation_id=None))]
    fn start_scores(
        &self,
        waker: &NativeWaker,
        item_id: Option<String>,
        observation_id: Option<String>,
    ) -> NativeTask {
        let store = self.store.clone();
        NativeTask::spawn_blocking(waker, move || {
            let filter = ScoreFilter {
                item_id,
                observation_id,
                ..ScoreFilter::default()
            };
            let scores = store
                .list_scores(&filter)
                .map_err(|e| Failure::Store(e.to_string()))?;
            serde_json::to_string(&scores).map_err(|e| Failure::Other(e.to_string()))
        })
    }
}

/// Scores programs through a client's sandboxes into a store, with the
/// built-in comparators and the client's user comparators.
#[pyclass(frozen, module = "progscore._native")]
struct NativeScorer {
    scorer: Arc<ProgramExecutionScorer>,
    backends: Option<Arc<Backends>>,
}

#[pymethods]
impl NativeScorer {
    #[new]
    fn new(client: &NativeClient, store: &NativeStore) -> PyResult<NativeScorer> {
        // A comparator that cannot be loaded is the caller's to fix (its
        // file or its pinned digest): never a built-in's fault.
        let comparators = comparator_host(&client.comparators)
            .map_err(|e| InvalidExpectationError::new_err(e.to_string()))?;
        let scorer = scorer_over(
            client.sandbox.clone(),
            store.store.clone(),
            Arc::new(comparators),
            client.languages.clone(),
        );
        Ok(NativeScorer {
            scorer: Arc::new(scorer),
            backends: client.backends.clone(),
        })
    }

    /// Programs in flight when the caller does not say: the runtime's batch
    /// policy, as `progscore score` applies it.
    fn default_jobs(&self) -> usize {
        use progscore_runtime::batch_run::{ItemScoring as _, ScorerItems};
        ScorerItems::new(&self.scorer, self.backends.clone()).default_jobs()
    }

    /// Reads a batch file once as `progscore score` does (each line checked
    /// as scoring would); the batch it gives runs on the runtime's batch
    /// driver.
    fn survey_batch(&self, path: PathBuf) -> PyResult<NativeBatch> {
        NativeBatch::survey(self.scorer.clone(), self.backends.clone(), path)
    }

    /// Checks `profile` before anything runs (as `progscore score` does for
    /// every profile of a batch); the task's result is what was checked.
    fn start_preflight(&self, waker: &NativeWaker, profile: String) -> NativeTask {
        let scorer = self.scorer.clone();
        NativeTask::spawn(waker, move |_token| async move {
            let found = scorer
                .preflight(&profile)
                .await
                .map_err(|e| Failure::Refused(e.to_string()))?;
            Ok(found.detail)
        })
    }

    /// Checks an expectation (JSON) as scoring would, running nothing.
    fn validate(&self, expectation_json: &str) -> PyResult<()> {
        let expectation = parse_expectation(expectation_json)?;
        self.scorer
            .validate(&expectation)
            .map_err(|e| InvalidExpectationError::new_err(e.to_string()))
    }

    /// Starts scoring `program`; the task's result is the score as JSON.
    #[pyo3(signature = (waker, program, expectation_json, item_id=None, fresh=false))]
    fn start_score(
        &self,
        waker: &NativeWaker,
        program: Vec<u8>,
        expectation_json: &str,
        item_id: Option<String>,
        fresh: bool,
    ) -> PyResult<NativeTask> {
        let expectation = parse_expectation(expectation_json)?;
        // Refused here, before anything runs or a task exists.
        self.scorer
            .validate(&expectation)
            .map_err(|e| InvalidExpectationError::new_err(e.to_string()))?;
        let scorer = self.scorer.clone();
        Ok(NativeTask::spawn(waker, move |token| async move {
            let mut request = ScoreRequest::new(ProgramInput::Inline(program), expectation)
                .fresh(fresh)
                .cancel(token);
            request.item_id = item_id;
            let score = scorer.score(request).await.map_err(Failure::from)?;
            serde_json::to_string(&score).map_err(|e| Failure::Other(e.to_string()))
        }))
    }

    /// Starts scoring a batch item as `progscore score` does; the task's
    /// result is `{"score": ..., "line": the result line}`, and the verdict
    /// is counted in `summary`.
    #[pyo3(signature = (waker, summary, program, expectation_json, item_id, fresh=false))]
    fn start_score_item(
        &self,
        waker: &NativeWaker,
        summary: &NativeSummary,
        program: Vec<u8>,
        expectation_json: &str,
        item_id: String,
        fresh: bool,
    ) -> PyResult<NativeTask> {
        let expectation = parse_expectation(expectation_json)?;
        let scorer = self.scorer.clone();
        let summary = summary.summary.clone();
        Ok(NativeTask::spawn(waker, move |token| async move {
            let request = ScoreRequest::new(ProgramInput::Inline(program), expectation)
                .item_id(item_id)
                .fresh(fresh)
                .cancel(token);
            let score = scorer.score(request).await.map_err(Failure::from)?;
            summary
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .add(&score);
            let line = progscore_runtime::results::result_line(&score, None);
            let both = serde_json::json!({"score": score, "line": line});
            Ok(both.to_string())
        }))
    }

    /// Scores a stored observation (JSON, identical to the stored copy)
    /// against an expectation; runs nothing. The task's result is the score.
    #[pyo3(signature = (waker, observation_json, expectation_json, item_id=None))]
    fn start_replay(
        &self,
        waker: &NativeWaker,
        observation_json: &str,
        expectation_json: &str,
        item_id: Option<String>,
    ) -> PyResult<NativeTask> {
        let observation: Observation = serde_json::from_str(observation_json)
            .map_err(|e| ReplayRefusedError::new_err(format!("not an observation: {e}")))?;
        let expectation = parse_expectation(expectation_json)?;
        let scorer = self.scorer.clone();
        Ok(NativeTask::spawn_blocking(waker, move || {
            let score = scorer.replayer().replay(ReplayRequest {
                item_id,
                observation: ObservationRef::Given(Box::new(observation)),
                expectation,
            })?;
            serde_json::to_string(&score).map_err(|e| Failure::Other(e.to_string()))
        }))
    }

    /// Re-grades `program` from stored evidence only; the task's result is
    /// the score and the item's previous one.
    #[pyo3(signature = (waker, program, expectation_json, item_id=None))]
    fn start_rescore(
        &self,
        waker: &NativeWaker,
        program: Vec<u8>,
        expectation_json: &str,
        item_id: Option<String>,
    ) -> PyResult<NativeTask> {
        let expectation = parse_expectation(expectation_json)?;
        let scorer = self.scorer.clone();
        Ok(NativeTask::spawn_blocking(waker, move || {
            let rescored = scorer.replayer().rescore(RescoreRequest {
                item_id,
                program: ProgramInput::Inline(program),
                expectation,
            })?;
            serde_json::to_string(&rescored).map_err(|e| Failure::Other(e.to_string()))
        }))
    }
}

fn parse_expectation(json: &str) -> PyResult<ScoringExpectation> {
    serde_json::from_str(json).map_err(|e| InvalidExpectationError::new_err(e.to_string()))
}

impl From<ScoringError> for Failure {
    fn from(error: ScoringError) -> Failure {
        match error {
            ScoringError::Cancelled => Failure::Cancelled,
            ScoringError::Expectation(e) => Failure::Invalid(e.to_string()),
            ScoringError::Refused(e) => Failure::Refused(e.to_string()),
            ScoringError::Replay(e) => Failure::Replay(e.to_string()),
            e @ (ScoringError::ItemOfAnotherProgram { .. } | ScoringError::EmptyItemId) => {
                Failure::Replay(e.to_string())
            }
            ScoringError::Store(e) => Failure::Store(e.to_string()),
            other => Failure::Other(other.to_string()),
        }
    }
}

/// Programs in flight for a machine of `cores` cores, by the batch policy.
#[pyfunction]
fn jobs_for_cores(cores: usize) -> usize {
    progscore_runtime::policy::jobs_for_cores(cores, 0)
}

/// A batch's summary, counted and printed as `progscore score` does.
#[pyclass(frozen, module = "progscore._native")]
#[derive(Default)]
struct NativeSummary {
    summary: Arc<std::sync::Mutex<progscore_runtime::results::Summary>>,
}

impl NativeSummary {
    fn lock(&self) -> std::sync::MutexGuard<'_, progscore_runtime::results::Summary> {
        self.summary
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[pymethods]
impl NativeSummary {
    #[new]
    fn new() -> NativeSummary {
        NativeSummary::default()
    }

    /// Counts an item that failed without a verdict.
    fn add_error(&self) {
        self.lock().errors += 1;
    }

    /// Counts an item the sandboxes refused.
    fn add_not_scored(&self) {
        self.lock().not_scored += 1;
    }

    /// Counts an item cancelled before its end.
    fn add_cancelled(&self) {
        self.lock().cancelled += 1;
    }

    /// `{true, false, undetermined, errors, not_scored, cancelled}`.
    fn counts(&self) -> BTreeMap<&'static str, usize> {
        counts_of(&self.lock())
    }

    /// The exit status of `progscore score` for a batch that came to this
    /// summary with `bad_lines` refused lines; `signal_exit` when a signal
    /// stopped it; `fail_on` holds `"false"` and/or `"undetermined"`.
    #[pyo3(signature = (bad_lines, fail_on, signal_exit=None))]
    fn exit_status(
        &self,
        bad_lines: usize,
        fail_on: Vec<String>,
        signal_exit: Option<u8>,
    ) -> PyResult<u8> {
        use progscore_runtime::policy::{BatchEnd, exit_status};
        let fail = parse_fail_on(&fail_on)?;
        let summary = self.lock();
        let end = BatchEnd::of(&summary, signal_exit);
        Ok(exit_status(end, &summary, fail, bad_lines))
    }

    /// The summary's text, for a batch that took `wall_seconds`.
    fn render(&self, wall_seconds: f64, bad_lines: usize) -> String {
        self.lock().render(
            std::time::Duration::from_secs_f64(wall_seconds.max(0.0)),
            bad_lines,
        )
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeClient>()?;
    m.add_class::<NativeDesk>()?;
    m.add_class::<NativeSummary>()?;
    m.add_class::<NativeBatch>()?;
    m.add_function(wrap_pyfunction!(jobs_for_cores, m)?)?;
    m.add_class::<NativeStore>()?;
    m.add_class::<NativeScorer>()?;
    m.add_class::<NativeTask>()?;
    m.add_class::<NativeWaker>()?;
    let py = m.py();
    m.add("ProgscoreError", py.get_type::<ProgscoreError>())?;
    m.add(
        "InvalidExpectationError",
        py.get_type::<InvalidExpectationError>(),
    )?;
    m.add("SandboxRefusedError", py.get_type::<SandboxRefusedError>())?;
    m.add("ReplayRefusedError", py.get_type::<ReplayRefusedError>())?;
    m.add("EvidenceStoreError", py.get_type::<EvidenceStoreError>())?;
    Ok(())
}
