//! Scoring throughput, printed as figures (harness = false).
//!
//! 1. Replay/rescore from a store holding 10,000 observations (4 cases
//!    each), as case verdicts per second, beside a baseline in the same run:
//!    reading and decoding the same rows (with their integrity check) and
//!    nothing else. Target: >= 20,000 case verdicts/s.
//! 2. The scorer's overhead on top of execution: >= 100 programs scored end
//!    to end through the real Docker backend vs the same number run by the
//!    backend alone. Target: <= 5%.
//!
//! The WebAssembly built-ins compare. `cargo bench -p progscore-runtime --bench scoring`
//! (after scripts/setup.sh).

#[path = "../../scoring/tests/common/mod.rs"]
mod common;

use progscore_sandbox::SandboxClientExt as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use progscore_evidence::{
    EvidenceStore, Observation, ScoreOrigin, ScoreRecord, ScoreStatus, now_rfc3339,
};
use progscore_runtime::comparators::WasmComparators;
use progscore_runtime::config::Config;
use progscore_runtime::session::load_comparators;
use progscore_sandbox::fake::exited_event;
use progscore_sandbox::{Invocation, ProgramRun, SandboxClient, sha256_hex};
use progscore_scoring::{
    Attempt, ObservationRef, OutputComparator, ProgramExecutionScorer, ProgramExecutionSource,
    ProgramInput, ReplayRequest, Replayer, RescoreRequest, SOURCE_IDENTITY, ScoreRequest,
    ScoringExpectation,
};

const OBSERVATIONS: usize = 10_000;
const CASES: usize = 4;
const PROGRAMS: usize = 100;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (comparators, comparator_kind) = comparators();
    println!("comparators: {comparator_kind}");
    replay_throughput(comparators.clone());
    runtime.block_on(scorer_overhead(comparators));
}

fn comparators() -> (Arc<dyn OutputComparator>, &'static str) {
    let host = load_comparators(&config()).expect("the comparator host starts");
    (
        Arc::new(WasmComparators(Arc::new(host))),
        "WebAssembly built-ins (progscore-comparator-host)",
    )
}

/// The config scripts/setup.sh generated.
fn config() -> Config {
    let path = progscore_test_kit::generated_config_path();
    Config::load(&path).expect("progscore.toml (run scripts/setup.sh)")
}

fn program(i: usize) -> Vec<u8> {
    format!("import sys\nprint(int(sys.argv[1]) ** 2)  # {i}\n").into_bytes()
}

fn args(case: usize) -> Vec<String> {
    vec![(case + 2).to_string()]
}

fn expectation(profile: &str, off_by: usize) -> ScoringExpectation {
    let cases: Vec<(Vec<String>, String)> = (0..CASES)
        .map(|case| (args(case), ((case + 2) * (case + 2) + off_by).to_string()))
        .collect();
    let borrowed: Vec<(Vec<&str>, &str)> = cases
        .iter()
        .map(|(a, e)| (a.iter().map(String::as_str).collect(), e.as_str()))
        .collect();
    let refs: Vec<(&[&str], &str)> = borrowed.iter().map(|(a, e)| (a.as_slice(), *e)).collect();
    common::expect(profile, &refs)
}

fn replay_throughput(comparators: Arc<dyn OutputComparator>) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let store = Arc::new(EvidenceStore::open(dir.path().join("bench.db")).expect("a store"));
    let profile = common::profile("python", "64KiB");
    let invocations: Vec<Invocation> = (0..CASES).map(|c| Invocation::with_args(args(c))).collect();

    let fill = Instant::now();
    let mut ids = Vec::with_capacity(OBSERVATIONS);
    let mut programs = Vec::with_capacity(OBSERVATIONS);
    for i in 0..OBSERVATIONS {
        let program = program(i);
        let sha = sha256_hex(&program);
        let attempt = Attempt::new(&profile, &sha, invocations.clone()).expect("an attempt");
        let events = (0..CASES)
            .map(|c| exited_event(0, format!("{}\n", (c + 2) * (c + 2)).as_bytes(), b""))
            .collect();
        let observation = Observation {
            id: attempt.observation_id(),
            attempt_key: attempt.key.clone(),
            source: SOURCE_IDENTITY.into(),
            profile: "python".into(),
            profile_fingerprint: attempt.profile_fingerprint.clone(),
            program_sha256: sha.clone(),
            invocations: invocations.clone(),
            run: ProgramRun {
                interaction: None,
                profile: "python".into(),
                program_sha256: sha.clone(),
                events,
                sandbox_warnings: Vec::new(),
                compile: None,
            },
            created_at: now_rfc3339(),
        };
        let record = ScoreRecord {
            item_id: Some(format!("item-{i}")),
            origin: ScoreOrigin::Execute,
            program_sha256: sha,
            profile: "python".into(),
            expectation: serde_json::json!({}),
            expectation_sha256: "0".repeat(64),
            status: ScoreStatus::Complete,
            value: Some(true),
            rationale: "seeded".into(),
            reason: None,
            cases: serde_json::json!([]),
            observation_ids: vec![observation.id.clone()],
            score: None,
            score_groups: None,
        };
        store
            .record_observation_with_score(Some(&program), &observation, &record)
            .expect("seeding the store");
        ids.push(observation.id);
        programs.push(program);
    }
    println!(
        "store: {} observations x {CASES} cases seeded in {:.1} s",
        OBSERVATIONS,
        fill.elapsed().as_secs_f64()
    );

    let verdicts = (OBSERVATIONS * CASES) as f64;
    let rate = |elapsed: Duration| verdicts / elapsed.as_secs_f64();

    // Baseline: read and decode the same rows (with their integrity check).
    let start = Instant::now();
    for id in &ids {
        let observation = store.observation(id).expect("a read").expect("stored");
        std::hint::black_box(observation);
    }
    let baseline = start.elapsed();

    let replayer = Replayer::new(store.clone(), comparators, vec![profile.clone()]);
    let changed = expectation("python", 1);

    let start = Instant::now();
    for id in &ids {
        let score = replayer
            .replay(ReplayRequest {
                item_id: None,
                observation: ObservationRef::Id(id.clone()),
                expectation: changed.clone(),
            })
            .expect("a replay");
        assert_eq!(score.value, Some(false));
    }
    let one_by_one = start.elapsed();

    let start = Instant::now();
    for chunk in ids.chunks(1000) {
        let requests = chunk
            .iter()
            .map(|id| ReplayRequest {
                item_id: None,
                observation: ObservationRef::Id(id.clone()),
                expectation: changed.clone(),
            })
            .collect();
        for result in replayer.replay_batch(requests).expect("a batch") {
            assert_eq!(result.expect("a replay").value, Some(false));
        }
    }
    let batched = start.elapsed();

    let same = expectation("python", 0);
    let start = Instant::now();
    for (i, program) in programs.iter().enumerate() {
        let rescore = replayer
            .rescore(RescoreRequest {
                item_id: Some(format!("item-{i}")),
                program: ProgramInput::Inline(program.clone()),
                expectation: same.clone(),
            })
            .expect("a rescore");
        assert!(rescore.score.value == Some(true) && rescore.previous.is_some());
    }
    let rescored = start.elapsed();

    let start = Instant::now();
    for (chunk_index, chunk) in programs.chunks(1000).enumerate() {
        let requests = chunk
            .iter()
            .enumerate()
            .map(|(i, program)| RescoreRequest {
                item_id: Some(format!("item-{}", chunk_index * 1000 + i)),
                program: ProgramInput::Inline(program.clone()),
                expectation: changed.clone(),
            })
            .collect();
        for result in replayer.rescore_batch(requests).expect("a batch") {
            let rescore = result.expect("a rescore");
            assert!(rescore.changed && rescore.score.value == Some(false));
        }
    }
    let rescored_batch = start.elapsed();

    println!(
        "replay/rescore over {OBSERVATIONS} observations ({verdicts} case verdicts each pass):"
    );
    println!(
        "  baseline: read+decode rows only       {:>9.0} case verdicts/s  ({:.2} s)",
        rate(baseline),
        baseline.as_secs_f64()
    );
    println!(
        "  replay, one transaction per score     {:>9.0} case verdicts/s  ({:.2} s)",
        rate(one_by_one),
        one_by_one.as_secs_f64()
    );
    println!(
        "  replay_batch, 1000 scores per commit  {:>9.0} case verdicts/s  ({:.2} s)",
        rate(batched),
        batched.as_secs_f64()
    );
    println!(
        "  rescore (item's last score + attempt) {:>9.0} case verdicts/s  ({:.2} s)",
        rate(rescored),
        rescored.as_secs_f64()
    );
    println!(
        "  rescore_batch, 1000 scores per commit {:>9.0} case verdicts/s  ({:.2} s)",
        rate(rescored_batch),
        rescored_batch.as_secs_f64()
    );
    println!("  target: >= 20000 case verdicts/s");
}

/// Runs `programs` through `run` four at a time; returns the wall time.
async fn four_at_a_time<F, Fut>(count: usize, run: F) -> Duration
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let start = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..count {
        if set.len() >= 4 {
            set.join_next().await.expect("a task").expect("no panic");
        }
        set.spawn(run(i));
    }
    while let Some(done) = set.join_next().await {
        done.expect("no panic");
    }
    start.elapsed()
}

async fn scorer_overhead(comparators: Arc<dyn OutputComparator>) {
    let (client, backend) = backend();
    let store = Arc::new(EvidenceStore::open_in_memory().expect("a store"));
    let scorer = Arc::new(ProgramExecutionScorer::new(
        ProgramExecutionSource::new(client.clone(), store),
        comparators,
    ));
    let invocations: Arc<Vec<Invocation>> =
        Arc::new((0..1).map(|c| Invocation::with_args(args(c))).collect());
    let one_case = {
        let refs: Vec<(&[&str], &str)> = vec![(&["2"], "4")];
        common::expect("python", &refs)
    };
    // Each pass runs programs no other pass ran, so nothing is reused.
    let backend_pass = |round: usize| {
        let client = client.clone();
        let invocations = invocations.clone();
        four_at_a_time(PROGRAMS, move |i| {
            let client = client.clone();
            let invocations = invocations.clone();
            async move {
                let program = program(round * 1_000_000 + i);
                let run = client.execute(&program, "python", &invocations).await;
                assert!(run.is_ok_and(|run| !run.rests_on_unproven_conditions()));
            }
        })
    };
    let warm = backend_pass(9).await;
    let backend_a = backend_pass(1).await;
    let scored = four_at_a_time(PROGRAMS, |i| {
        let scorer = scorer.clone();
        let expectation = one_case.clone();
        async move {
            let program = program(2_000_000 + i);
            let score = scorer
                .score(ScoreRequest::new(
                    ProgramInput::Inline(program),
                    expectation,
                ))
                .await
                .expect("a score");
            assert_eq!(score.value, Some(true), "{}", score.rationale);
        }
    })
    .await;
    let backend_b = backend_pass(3).await;
    let alone = (backend_a + backend_b) / 2;
    let overhead = (scored.as_secs_f64() / alone.as_secs_f64() - 1.0) * 100.0;
    println!("scorer overhead, {PROGRAMS} programs, 4 in flight, backend: {backend}");
    println!("  (warm-up pass: {:.2} s)", warm.as_secs_f64());
    println!(
        "  backend alone  {:.2} s ({:.1} programs/s; passes {:.2} s and {:.2} s)",
        alone.as_secs_f64(),
        PROGRAMS as f64 / alone.as_secs_f64(),
        backend_a.as_secs_f64(),
        backend_b.as_secs_f64()
    );
    println!(
        "  scored         {:.2} s ({:.1} programs/s)",
        scored.as_secs_f64(),
        PROGRAMS as f64 / scored.as_secs_f64()
    );
    println!("  overhead       {overhead:+.1}%   (target <= 5%)");
}

fn backend() -> (Arc<dyn SandboxClient>, &'static str) {
    let profile = config()
        .profile("python")
        .expect("a python profile")
        .clone();
    let client = progscore_docker::DockerClient::new(
        vec![profile],
        progscore_docker::DockerOptions::default(),
    )
    .expect("a Docker client");
    (Arc::new(client), "Docker (real engine)")
}
