//! Per-call cost of comparators, WASM next to the same check in native Rust,
//! and host start-up time. Plain `main` printing medians:
//!
//! ```text
//! cargo bench -p progscore-comparators --bench compare
//! ```
//!
//! A WASM call is the whole path a scorer pays: a slot, a fresh store,
//! instantiation from the pre-instance (pooling allocator), the call, and the
//! verdict back. Targets: ≤ 30 µs median per call; host start with cached
//! built-ins ≤ 50 ms.

use std::hint::black_box;
use std::time::{Duration, Instant};

use progscore_comparators::{ComparatorHost, ComparisonOutcome, HostOptions, ObservedStream};

const WARMUP: usize = 200;
const SAMPLES: usize = 3000;

fn main() {
    let cache = std::env::temp_dir().join(format!("progscore-bench-cache-{}", std::process::id()));
    let options = HostOptions {
        cache_dir: Some(cache.clone()),
        ..HostOptions::default()
    };

    // Start-up: first with an empty cache (compiles), then cached.
    let started = Instant::now();
    let mut host = ComparatorHost::new(options.clone()).expect("host");
    host.register_builtins().expect("built-ins");
    let cold = started.elapsed();
    drop(host);
    let mut starts = Vec::new();
    for _ in 0..15 {
        let started = Instant::now();
        let mut host = ComparatorHost::new(options.clone()).expect("host");
        host.register_builtins().expect("built-ins");
        starts.push(started.elapsed());
    }
    println!(
        "host start, built-ins compiled (empty cache): {:>10.1} ms",
        ms(cold)
    );
    println!(
        "host start, built-ins cached:                 {:>10.2} ms median (target <= 50 ms)",
        ms(median(&mut starts))
    );

    let mut host = ComparatorHost::new(options).expect("host");
    host.register_builtins().expect("built-ins");

    // 1 KiB of output: 32 lines of 32 bytes.
    let output: Vec<u8> = (0..32)
        .flat_map(|i| format!("line {i:02}: abcdefghijklmnopqrstuv\n").into_bytes())
        .collect();
    assert_eq!(output.len(), 1024);
    let observed = ObservedStream::complete(output.clone());
    let expected = String::from_utf8(output.clone()).expect("ascii");

    println!();
    println!(
        "{:<44} {:>12} {:>12}",
        "check on 1 KiB of output", "WASM median", "native median"
    );

    let equals_params = serde_json::json!({ "value": expected }).to_string();
    let wasm = time(|| call(&host, "equals", &equals_params, &observed));
    let native = time(|| {
        // What the built-in does: parse the params, trim both sides, compare.
        let params: serde_json::Value = serde_json::from_str(&equals_params).expect("json");
        let value = params["value"].as_str().expect("value").trim().as_bytes();
        black_box(value == output.trim_ascii())
    });
    row("equals (match)", wasm, native);

    let regex_params = r#"{"value":"(?m)^line 31: [a-z]+$"}"#;
    let wasm = time(|| call(&host, "regex", regex_params, &observed));
    let native = time(|| {
        // The guest compiles its pattern on every call (fresh instance), so
        // the native side does too.
        let re = regex::bytes::Regex::new("(?m)^line 31: [a-z]+$").expect("regex");
        black_box(re.is_match(&output))
    });
    row("regex (search, match at the end)", wasm, native);

    // The same with a literal pattern: most of the row above is compiling the
    // pattern inside the guest, which a fresh instance does on every call.
    let wasm = time(|| call(&host, "regex", r#"{"value":"line 31"}"#, &observed));
    let native = time(|| {
        let re = regex::bytes::Regex::new("line 31").expect("regex");
        black_box(re.is_match(&output))
    });
    row("regex (literal pattern)", wasm, native);

    // The floor: a fresh instance and a call that only parses its params.
    let wasm = time(|| host.validate("equals", r#"{"value":"x"}"#).expect("valid"));
    let native = time(|| {
        black_box(serde_json::from_str::<serde_json::Value>(
            r#"{"value":"x"}"#,
        ))
    });
    row("instantiate + validate only (equals)", wasm, native);

    let wasm = time(|| call(&host, "contains", r#"{"value":"line 31"}"#, &observed));
    let native = time(|| black_box(output.windows(7).any(|w| w == b"line 31")));
    row("contains", wasm, native);

    // Several threads at once, to show the pool is not a bottleneck.
    let threads = 2;
    let per_thread = SAMPLES;
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                for _ in 0..per_thread {
                    call(&host, "equals", &equals_params, &observed);
                }
            });
        }
    });
    let elapsed = started.elapsed();
    println!();
    println!(
        "equals from {threads} threads: {:.0} calls/s ({} calls in {:.0} ms)",
        (threads * per_thread) as f64 / elapsed.as_secs_f64(),
        threads * per_thread,
        ms(elapsed)
    );

    drop(host);
    if let Err(e) = std::fs::remove_dir_all(&cache) {
        eprintln!("could not remove {}: {e}", cache.display());
    }
}

fn call(host: &ComparatorHost, name: &str, params: &str, observed: &ObservedStream) {
    let outcome = host.compare(name, params, observed).expect("call");
    assert_eq!(outcome, ComparisonOutcome::Match, "{name}");
}

fn time<R>(mut f: impl FnMut() -> R) -> Duration {
    for _ in 0..WARMUP {
        black_box(f());
    }
    let mut samples: Vec<Duration> = (0..SAMPLES)
        .map(|_| {
            let started = Instant::now();
            black_box(f());
            started.elapsed()
        })
        .collect();
    median(&mut samples)
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn row(name: &str, wasm: Duration, native: Duration) {
    println!(
        "{:<44} {:>9.1} µs {:>10.2} µs",
        name,
        wasm.as_secs_f64() * 1e6,
        native.as_secs_f64() * 1e6
    );
}
