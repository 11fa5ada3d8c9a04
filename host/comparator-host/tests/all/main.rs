//! Integration tests of progscore-comparator-host, linked into one binary (one
//! link on 2 cores instead of one per file). One host is shared by all tests:
//! it must survive every hostile guest in the same process.

mod builtins;
mod checkers;
mod hostile;
mod user;

use std::sync::OnceLock;
use std::time::Duration;

use progscore_comparator_host::{ComparatorHost, ComparisonOutcome, HostOptions, ObservedStream};

/// Deadline of the shared host: short, so hostile tests are quick, but far
/// above what a built-in needs.
pub const TEST_TIMEOUT: Duration = Duration::from_millis(1000);

/// Options for test hosts: a cache under the target dir (so the guests are
/// compiled once per build, not per test run).
pub fn test_options() -> HostOptions {
    HostOptions {
        cache_dir: Some(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("comparator-cache")),
        call_timeout: TEST_TIMEOUT,
        memory_limit: 64 << 20,
        max_concurrent_calls: 8,
    }
}

/// The shared host, with the built-ins registered.
pub fn host() -> &'static ComparatorHost {
    static HOST: OnceLock<ComparatorHost> = OnceLock::new();
    HOST.get_or_init(|| {
        let mut host = ComparatorHost::new(test_options()).expect("create host");
        host.register_builtins().expect("register built-ins");
        host
    })
}

/// Runs a built-in on complete output.
pub fn run(name: &str, params: &str, output: &[u8]) -> ComparisonOutcome {
    host()
        .compare(name, params, &ObservedStream::complete(output.to_vec()))
        .unwrap_or_else(|e| panic!("{name} {params}: {e}"))
}

/// Runs a built-in on output of which only `kept` was kept out of `total`.
pub fn run_truncated(name: &str, params: &str, kept: &[u8], total: u64) -> ComparisonOutcome {
    host()
        .compare(
            name,
            params,
            &ObservedStream::truncated(kept.to_vec(), total),
        )
        .unwrap_or_else(|e| panic!("{name} {params}: {e}"))
}

/// The three outcomes as letters, for compact truth tables.
pub fn letter(outcome: &ComparisonOutcome) -> char {
    match outcome {
        ComparisonOutcome::Match => 'M',
        ComparisonOutcome::Mismatch(_) => 'X',
        ComparisonOutcome::Undetermined(_) => 'U',
    }
}
