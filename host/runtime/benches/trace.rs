//! Behaviour tracing on against off, on the same ordinary programs, under
//! gVisor through Docker and through the OCI backend, and under WASI (its
//! path imports traced, and an empty `/` preopened): rounds of one batch
//! untraced then traced (paired, so the machine's load is shared alike),
//! the wall time of each and the ratio per round. Target: tracing adds at
//! most 15% wall time.
//!
//! `cargo bench -p progscore-runtime --bench trace` (after scripts/setup.sh).
//! PROGSCORE_BENCH_PROGRAMS sets the batch size (default 40),
//! PROGSCORE_BENCH_ROUNDS the rounds (default 3), PROGSCORE_BENCH_ONLY one
//! backend's label (`docker`, `oci` or `wasi`).

use progscore_sandbox::SandboxClientExt as _;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use progscore_runtime::backends::Backends;
use progscore_runtime::config::Config;
use progscore_sandbox::{
    DEFAULT_SENSITIVE_PATHS, Invocation, Outcome, RuntimeProfile, TraceSettings,
};

/// Programs in flight at once: the CLI's policy on this machine's 2 CPUs.
const JOBS: usize = 6;

fn setting(name: &str) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(match name {
            "PROGSCORE_BENCH_ROUNDS" => 3,
            _ => 40,
        })
}

fn main() {
    let count = setting("PROGSCORE_BENCH_PROGRAMS");
    let rounds = setting("PROGSCORE_BENCH_ROUNDS");
    let config = Config::load(&progscore_test_kit::generated_config_path())
        .expect("progscore.toml: run scripts/setup.sh");
    let mut profiles: Vec<RuntimeProfile> = Vec::new();
    for name in ["python-gvisor", "python-oci-gvisor", "python-wasi"] {
        let plain = config.profile(name).expect("profile").clone();
        let mut traced = plain.clone();
        traced.name = format!("{name}-traced");
        traced.trace = Some(TraceSettings {
            sensitive: DEFAULT_SENSITIVE_PATHS.map(String::from).to_vec(),
        });
        profiles.extend([plain, traced]);
    }
    let backends = Backends::new(profiles).expect("backends");
    // Ordinary programs: imports, computation, output; nothing a trace
    // records, so the cost measured is the trace's own.
    let programs: Vec<String> = (0..count)
        .map(|i| {
            format!(
                "import json, re, collections\nn = {}\nwords = re.findall(r'\\w+', 'a b c ' * n)\nprint(json.dumps(collections.Counter(words).most_common(2)), sum(k * k for k in range(n)), {i})\n",
                1000 + i
            )
        })
        .collect();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    // Warm-up, both sides of every backend: the OCI image is fetched and
    // unpacked once, each WASI profile's module loaded (else the first
    // round's untraced side pays it).
    for profile in [
        "python-gvisor",
        "python-gvisor-traced",
        "python-oci-gvisor",
        "python-oci-gvisor-traced",
        "python-wasi",
        "python-wasi-traced",
    ] {
        runtime.block_on(run_batch(&backends, profile, &programs[..2]));
    }

    println!("{count} programs per batch, {JOBS} in flight, {rounds} paired rounds");
    println!(
        "  {:<24} {:>6} {:>12} {:>12} {:>8}",
        "backend", "round", "off (s)", "on (s)", "on/off"
    );
    for (label, plain) in [
        ("docker gVisor (runsc)", "python-gvisor"),
        ("oci gVisor (runsc)", "python-oci-gvisor"),
        ("wasi (wasmtime)", "python-wasi"),
    ] {
        let only = std::env::var("PROGSCORE_BENCH_ONLY").unwrap_or_default();
        if !label.starts_with(only.as_str()) {
            continue;
        }
        let traced = format!("{plain}-traced");
        let mut ratios = Vec::new();
        for round in 0..rounds {
            let off = runtime.block_on(run_batch(&backends, plain, &programs));
            let on = runtime.block_on(run_batch(&backends, &traced, &programs));
            let ratio = on.as_secs_f64() / off.as_secs_f64();
            ratios.push(ratio);
            println!(
                "  {:<24} {:>6} {:>12.2} {:>12.2} {:>7.2}x",
                label,
                round + 1,
                off.as_secs_f64(),
                on.as_secs_f64(),
                ratio
            );
        }
        ratios.sort_by(f64::total_cmp);
        println!(
            "  {label}: median on/off {:.2}x (target <= 1.15x)",
            ratios[ratios.len() / 2]
        );
    }
}

/// Runs the batch; every program must exit 0, and a traced one must come
/// with a complete trace of nothing tried.
async fn run_batch(backends: &Backends, profile: &str, programs: &[String]) -> Duration {
    let started = Instant::now();
    futures_util::stream::iter(programs.iter())
        .map(|program| async move {
            let run = backends
                .execute(program.as_bytes(), profile, &[Invocation::default()])
                .await
                .unwrap_or_else(|e| panic!("{profile}: {e}"));
            let event = &run.events[0];
            assert!(
                matches!(event.outcome, Outcome::Exited { exit_code: 0 }),
                "{profile}: {run:?}"
            );
            if let Some(behaviour) = &event.behaviour {
                let trace = behaviour.trace().expect("traced");
                assert!(
                    trace.counts.is_empty() && trace.incomplete.is_none(),
                    "{profile}: {trace:?}"
                );
            }
        })
        .buffer_unordered(JOBS)
        .collect::<Vec<()>>()
        .await;
    started.elapsed()
}
