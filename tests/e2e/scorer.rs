//! The scorer library against the real Docker backend and the real
//! comparator host (needs the engine and the pinned image that
//! `scripts/setup.sh` prepares, and its `progscore.toml`).
//!
//! Containers are counted by their `progscore.owner` label through the
//! engine (`docker events`, `docker ps -a`), never by our own counters.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::scoring_common::{SQUARE, expect};
use progscore_comparator_host::{ComparatorHost, HostOptions};
use progscore_docker::{DockerClient, DockerOptions, OWNER_LABEL};
use progscore_evidence::{EvidenceStore, ScoreStatus};
use progscore_runtime::comparators::WasmComparators;
use progscore_sandbox::{ProfileSpec, RuntimeProfile, SandboxError};
use progscore_scoring::{
    EvidenceUse, ObservationRef, ProgramExecutionScorer, ProgramExecutionSource, ProgramInput,
    ReplayRequest, ScoreRequest, ScoringError,
};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

#[derive(Deserialize)]
struct Config {
    profiles: BTreeMap<String, ProfileSpec>,
}

fn config_path() -> PathBuf {
    progscore_e2e::generated_config()
}

/// The configured `python` profile, and `python-128`: the same with a
/// 128-byte output cap.
fn profiles() -> Vec<RuntimeProfile> {
    let path = config_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/setup.sh first", path.display()));
    let config: Config = toml::from_str(&text).expect("progscore.toml parses");
    let base = path.parent().expect("the config has a folder");
    let python = config.profiles.get("python").expect("a `python` profile");
    let mut small = python.clone();
    small.limits.output = "128B".into();
    vec![
        RuntimeProfile::from_spec("python", python, base).expect("a valid profile"),
        RuntimeProfile::from_spec("python-128", &small, base).expect("a valid profile"),
    ]
}

struct Engine {
    scorer: Arc<ProgramExecutionScorer>,
    store: Arc<EvidenceStore>,
    owner: String,
    events: ContainerEvents,
}

/// A `docker events` stream of this client's container creations and
/// removals, read from the client's birth on (`--since` covers the start-up
/// race; streaming avoids the engine's short event backlog).
struct ContainerEvents {
    child: std::process::Child,
    seen: Arc<SeenEvents>,
}

/// (event, container id) pairs in the engine's order, and a signal on each.
type SeenEvents = (std::sync::Mutex<Vec<(String, String)>>, std::sync::Condvar);

impl ContainerEvents {
    fn follow(owner: &str, since: SystemTime) -> ContainerEvents {
        let mut child = Command::new("docker")
            .args([
                "events",
                "--since",
                &unix(since - Duration::from_secs(1)),
                "--filter",
                "type=container",
                "--filter",
                "event=create",
                "--filter",
                "event=destroy",
                "--filter",
                &format!("label={OWNER_LABEL}={owner}"),
                "--format",
                "{{.Action}} {{.Actor.ID}}",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("the docker CLI runs");
        let stdout = child.stdout.take().expect("piped stdout");
        let seen: Arc<SeenEvents> = Arc::default();
        let sink = seen.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some((action, id)) = line.split_once(' ') {
                    sink.0
                        .lock()
                        .expect("the event list")
                        .push((action.to_string(), id.to_string()));
                    sink.1.notify_all();
                }
            }
        });
        ContainerEvents { child, seen }
    }

    /// How many containers were created, once the engine has reported the
    /// removal of every container it reported created (so no creation
    /// event is still on its way).
    fn created_once_all_removed(&self) -> usize {
        let (events, changed) = &*self.seen;
        let settled = |events: &Vec<(String, String)>| {
            let created: Vec<&String> = events
                .iter()
                .filter(|(action, _)| action == "create")
                .map(|(_, id)| id)
                .collect();
            let removed = created.iter().all(|id| {
                events
                    .iter()
                    .any(|(action, other)| action == "destroy" && other == *id)
            });
            removed.then_some(created.len())
        };
        let mut events = events.lock().expect("the event list");
        loop {
            if let Some(created) = settled(&events) {
                return created;
            }
            events = changed.wait(events).expect("the event list");
        }
    }
}

impl Drop for ContainerEvents {
    fn drop(&mut self) {
        // Only the `docker events` process this helper started.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn comparators() -> Arc<WasmComparators> {
    let mut host = ComparatorHost::new(HostOptions::default()).expect("the comparator host starts");
    host.register_builtins().expect("the built-ins load");
    Arc::new(WasmComparators(Arc::new(host)))
}

fn engine_with(options: DockerOptions) -> Engine {
    let since = SystemTime::now();
    let client = DockerClient::new(profiles(), options).expect("a Docker client");
    let owner = client.owner().to_string();
    let store = Arc::new(EvidenceStore::open_in_memory().unwrap());
    let source = ProgramExecutionSource::new(Arc::new(client), store.clone());
    Engine {
        scorer: Arc::new(ProgramExecutionScorer::new(source, comparators())),
        store,
        events: ContainerEvents::follow(&owner, since),
        owner,
    }
}

fn engine() -> Engine {
    engine_with(DockerOptions::default())
}

fn unix(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    format!("{}.{:09}", since.as_secs(), since.subsec_nanos())
}

impl Engine {
    /// Containers created with this client's owner label, as the engine's
    /// event stream tells once each of them was reported removed.
    fn containers_created(&self) -> usize {
        self.events.created_once_all_removed()
    }

    /// Returns once a container of this client is running.
    async fn wait_for_a_running_container(&self) {
        loop {
            let output = Command::new("docker")
                .args([
                    "ps",
                    "-q",
                    "--filter",
                    &format!("label={OWNER_LABEL}={}", self.owner),
                    "--filter",
                    "status=running",
                ])
                .output()
                .expect("the docker CLI runs");
            if !String::from_utf8_lossy(&output.stdout).trim().is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Containers with this client's owner label that still exist.
    fn containers_left(&self) -> usize {
        let output = Command::new("docker")
            .args([
                "ps",
                "-aq",
                "--filter",
                &format!("label={OWNER_LABEL}={}", self.owner),
            ])
            .output()
            .expect("the docker CLI runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .count()
    }
}

fn inline(program: &[u8], expectation: progscore_scoring::ScoringExpectation) -> ScoreRequest {
    ScoreRequest::new(ProgramInput::Inline(program.to_vec()), expectation)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doc_flow_square_true_then_replay_8_false_without_a_container() {
    let engine = engine();
    let score = engine
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(score.value, Some(true), "{}", score.rationale);
    assert_eq!(
        score.rationale,
        "All 1 case(s) produced the expected result under python."
    );
    assert_eq!(engine.containers_created(), 1);
    let replayed = engine
        .scorer
        .replayer()
        .replay(ReplayRequest {
            item_id: None,
            observation: ObservationRef::Id(score.observation_ids[0].clone()),
            expectation: expect("python", &[(&["3"], "8")]),
        })
        .unwrap();
    assert_eq!(replayed.value, Some(false));
    assert_eq!(
        replayed.rationale,
        "The program did not produce the expected result under python: case 0 output did not match."
    );
    assert_eq!(replayed.observation_ids, score.observation_ids);
    assert_eq!(engine.containers_created(), 1, "replay created a container");
    assert_eq!(engine.containers_left(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_output_under_a_128_byte_cap() {
    let engine = engine();
    let spaces = b"import sys\nsys.stdout.write('9' + ' ' * (1024 * 1024))\n";
    let score = engine
        .scorer
        .score(inline(spaces, expect("python-128", &[(&[], "9")])))
        .await
        .unwrap();
    assert_eq!(
        score.status,
        ScoreStatus::Undetermined,
        "{}",
        score.rationale
    );
    assert_eq!(score.value, None);
    let observation = engine
        .store
        .observation(&score.observation_ids[0])
        .unwrap()
        .unwrap();
    let stdout = &observation.run.events[0].stdout;
    assert!(stdout.truncated && stdout.data.len() == 128, "{stdout:?}");
    let xs = b"import sys\nsys.stdout.write('8' + 'x' * (1024 * 1024))\n";
    let score = engine
        .scorer
        .score(inline(xs, expect("python-128", &[(&[], "9")])))
        .await
        .unwrap();
    assert_eq!(score.value, Some(false), "{}", score.rationale);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_engine_is_refused_not_false() {
    let dir = tempfile::tempdir().unwrap();
    let engine =
        engine_with(DockerOptions::default().with_socket(dir.path().join("no-engine.sock")));
    let refused = engine
        .scorer
        .score(inline(SQUARE, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            ScoringError::Refused(SandboxError::EngineUnavailable { .. })
        ),
        "{refused:?}"
    );
    assert!(
        refused
            .to_string()
            .contains("cannot reach the Docker engine at unix://"),
        "{refused}"
    );
    assert_eq!(engine.store.counts().unwrap().scores, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_markdown_program_runs_as_is_and_fails() {
    let engine = engine();
    let fenced = b"```python\nimport sys\nprint(int(sys.argv[1]) ** 2)\n```\n";
    let score = engine
        .scorer
        .score(inline(fenced, expect("python", &[(&["3"], "9")])))
        .await
        .unwrap();
    assert_eq!(score.value, Some(false), "{}", score.rationale);
    assert_eq!(score.cases[0].exit_code, Some(1), "python's syntax error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_scores_of_one_attempt_create_one_container() {
    let engine = engine();
    let first = || inline(SQUARE, expect("python", &[(&["3"], "9")]));
    let a = engine.scorer.score(first()).await.unwrap();
    let b = engine.scorer.score(first()).await.unwrap();
    // 256 other attempts, four at a time (the engine's sweet spot on 2 cores).
    let mut others = tokio::task::JoinSet::new();
    let mut next = 0u32;
    let mut done = 0;
    while done < 256 {
        while others.len() < 4 && next < 256 {
            let scorer = engine.scorer.clone();
            let n = next;
            next += 1;
            others.spawn(async move {
                scorer
                    .score(inline(
                        format!("print({n})\n").as_bytes(),
                        expect("python", &[(&[], &n.to_string())]),
                    ))
                    .await
            });
        }
        let joined = others.join_next().await.expect("a task").expect("no panic");
        assert_eq!(joined.unwrap().value, Some(true));
        done += 1;
    }
    let c = engine.scorer.score(first()).await.unwrap();
    assert_eq!(b.evidence, EvidenceUse::Stored);
    assert_eq!(c.evidence, EvidenceUse::Stored);
    assert_eq!(a.observation_ids, c.observation_ids);
    assert_eq!(
        engine.containers_created(),
        1 + 256,
        "the first attempt ran more than once"
    );
    assert_eq!(engine.containers_left(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_scores_of_one_attempt_share_one_container() {
    let engine = engine();
    let request = || inline(SQUARE, expect("python", &[(&["3"], "9")]));
    let (a, b) = tokio::join!(
        engine.scorer.score(request()),
        engine.scorer.score(request())
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.observation_ids, b.observation_ids);
    assert_eq!((a.value, b.value), (Some(true), Some(true)));
    assert_eq!(engine.containers_created(), 1);
}

const SLEEPER: &[u8] = b"import time\ntime.sleep(60)\nprint('done')\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_cancelled_caller_leaves_the_other_its_verdict() {
    let engine = engine();
    let program = b"import time\ntime.sleep(2)\nprint('done')\n";
    let cancel = CancellationToken::new();
    let request = || inline(program, expect("python", &[(&[], "done")]));
    let cancelled = engine.scorer.score(request().cancel(cancel.clone()));
    let kept = engine.scorer.score(request());
    let canceller = async {
        engine.wait_for_a_running_container().await;
        cancel.cancel();
    };
    let (cancelled, kept, ()) = tokio::join!(cancelled, kept, canceller);
    assert!(
        matches!(cancelled, Err(ScoringError::Cancelled)),
        "{cancelled:?}"
    );
    assert_eq!(kept.unwrap().value, Some(true));
    assert_eq!(engine.containers_created(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_callers_cancelled_stop_and_clean_the_run() {
    let engine = engine();
    let first = CancellationToken::new();
    let second = CancellationToken::new();
    let request = || inline(SLEEPER, expect("python", &[(&[], "done")]));
    let a = engine.scorer.score(request().cancel(first.clone()));
    let b = engine.scorer.score(request().cancel(second.clone()));
    let canceller = async {
        engine.wait_for_a_running_container().await;
        first.cancel();
        second.cancel();
    };
    // The program sleeps 60 s: a verdict would mean the run was not stopped.
    let (a, b, ()) = tokio::join!(a, b, canceller);
    // Counted the moment both callers have returned: whichever left last
    // waited for the cleanup (`join!` polls them in no fixed order).
    let left = engine.containers_left();
    assert!(matches!(a, Err(ScoringError::Cancelled)), "{a:?}");
    assert!(matches!(b, Err(ScoringError::Cancelled)), "{b:?}");
    assert_eq!(engine.containers_created(), 1);
    assert_eq!(left, 0, "a container outlived the cancelled run");
    assert_eq!(engine.store.counts().unwrap().observations, 0);
}
