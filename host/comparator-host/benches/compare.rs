//! Per-call cost of comparators, WASM next to the same check in native Rust,
//! and host start-up time. Plain `main` printing medians:
//!
//! ```text
//! cargo bench -p progscore-comparator-host --bench compare
//! ```
//!
//! A WASM call is the whole path a scorer pays: a slot, a fresh store,
//! instantiation from the pre-instance (pooling allocator), the call, and the
//! verdict back. Targets: ≤ 30 µs median per call; host start with cached
//! built-ins ≤ 50 ms.

use std::hint::black_box;
use std::time::{Duration, Instant};

use progscore_comparator_host::{
    CheckOutcome, ComparatorHost, ComparisonOutcome, HostOptions, ObservedStream,
};
use regex_automata::MatchKind;
use regex_automata::meta;
use regex_automata::util::syntax;

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

    // The `tokens` checker on the same output, the answer being the expected
    // text: the guest also tokenizes and compares both sides.
    let wasm = time(|| {
        let outcome = host
            .check("tokens", "{}", b"", &observed, &output)
            .expect("check");
        assert!(
            matches!(outcome, CheckOutcome::Accepted(_)),
            "tokens: {outcome:?}"
        );
        black_box(outcome)
    });
    let native = time(|| {
        let params: serde_json::Value = serde_json::from_str("{}").expect("json");
        black_box(params);
        let tokens = |b: &[u8]| -> Vec<Vec<u8>> {
            b.split(u8::is_ascii_whitespace)
                .filter(|t| !t.is_empty())
                .map(<[u8]>::to_vec)
                .collect()
        };
        black_box(tokens(&output) == tokens(&output))
    });
    row("tokens checker (accepted)", wasm, native);

    // The guest compiles its pattern on every call (fresh instance), so the
    // native side does too, with the same engines: on outputs this short the
    // guest leaves out the lazy DFA (see guests/builtin/regex).
    let pattern = "(?m)^line 31: [a-z]+$";
    let regex_params = serde_json::json!({ "value": pattern }).to_string();
    let wasm = time(|| call(&host, "regex", &regex_params, &observed));
    let native = time(|| black_box(native_regex(pattern, false).is_match(&output)));
    row("regex (search, match at the end)", wasm, native);
    let native = time(|| {
        let re = regex::bytes::Regex::new(pattern).expect("regex");
        black_box(re.is_match(&output))
    });
    row(
        "  native with the regex crate's defaults",
        Duration::ZERO,
        native,
    );

    let wasm = time(|| call(&host, "regex", r#"{"value":"line 31"}"#, &observed));
    let native = time(|| black_box(native_regex("line 31", false).is_match(&output)));
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

    // A long output takes the guest's other path: the pattern is compiled a
    // second time with the lazy DFA, which then searches.
    let long: Vec<u8> = output.repeat(64);
    let long_observed = ObservedStream::complete(long.clone());
    let wasm = time_n(300, || call(&host, "regex", &regex_params, &long_observed));
    let native = time_n(300, || {
        black_box(native_regex(pattern, false));
        black_box(native_regex(pattern, true).is_match(&long))
    });
    println!();
    row("regex on 64 KiB of output", wasm, native);

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

/// Compiles `pattern` as the regex built-in does: `regex::bytes` semantics,
/// with or without the lazy DFA.
fn native_regex(pattern: &str, lazy_dfa: bool) -> meta::Regex {
    meta::Builder::new()
        .configure(
            meta::Config::new()
                .match_kind(MatchKind::LeftmostFirst)
                .utf8_empty(false)
                .nfa_size_limit(Some(8 << 20))
                .hybrid_cache_capacity(2 << 20)
                .hybrid(lazy_dfa),
        )
        .syntax(syntax::Config::new().utf8(false))
        .build(pattern)
        .expect("regex")
}

fn time<R>(f: impl FnMut() -> R) -> Duration {
    time_n(SAMPLES, f)
}

fn time_n<R>(samples: usize, mut f: impl FnMut() -> R) -> Duration {
    for _ in 0..WARMUP {
        black_box(f());
    }
    let mut samples: Vec<Duration> = (0..samples)
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

/// One line of the table; a zero WASM time leaves its column empty.
fn row(name: &str, wasm: Duration, native: Duration) {
    let wasm = if wasm.is_zero() {
        String::new()
    } else {
        format!("{:.1} µs", wasm.as_secs_f64() * 1e6)
    };
    println!(
        "{:<44} {:>12} {:>10.2} µs",
        name,
        wasm,
        native.as_secs_f64() * 1e6
    );
}
