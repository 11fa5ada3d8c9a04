//! `GET /metrics`: what the server did, in the Prometheus text format.
//!
//! Requests by route pattern and status (never by path: ids stay out),
//! queue depth, runs and waits per profile, queue refusals, verdicts and
//! undetermined reasons by kind, where the evidence came from, run times,
//! and runs the sandbox refused (an engine away). Gauges are read from the
//! queues when scraped; counters and histograms are kept as things happen.

use std::time::Duration;

use progscore_scoring::Score;
use progscore_scoring::evidence::{PruneSummary, StoreUsage};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProfileLabels {
    profile: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    profile: String,
    /// `full` (the line was full) or `waited` (no turn within the wait).
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerdictLabels {
    profile: String,
    /// `true`, `false` or `undetermined`.
    verdict: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TableLabels {
    /// `programs`, `observations`, `scores`, `submissions`, `leases`.
    table: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreBytesLabels {
    /// `file` (the database file), `wal` (its write-ahead log), `in_use`
    /// (the file's pages not on the free list).
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EvidenceLabels {
    /// `ran`, `joined`, `stored`.
    evidence: String,
}

fn seconds_histogram() -> Histogram {
    // 1 ms .. about 9 minutes.
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

/// The server's metrics.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    queue_waiting: Family<ProfileLabels, Gauge>,
    queue_running: Family<ProfileLabels, Gauge>,
    queue_wait_seconds: Family<ProfileLabels, Histogram, fn() -> Histogram>,
    queue_refusals: Family<RefusalLabels, Counter>,
    verdicts: Family<VerdictLabels, Counter>,
    undetermined: Family<ReasonLabels, Counter>,
    evidence: Family<EvidenceLabels, Counter>,
    run_seconds: Family<ProfileLabels, Histogram, fn() -> Histogram>,
    sandbox_refusals: Family<ProfileLabels, Counter>,
    reruns: Family<ProfileLabels, Counter>,
    runs_in_flight: Gauge,
    store_rows: Family<TableLabels, Gauge>,
    store_bytes: Family<StoreBytesLabels, Gauge>,
    pruned_rows: Family<TableLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric, registered under `progscore_`.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("progscore");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "Requests answered, by route pattern and status",
            requests.clone(),
        );
        let queue_waiting = Family::<ProfileLabels, Gauge>::default();
        registry.register(
            "queue_waiting",
            "Requests waiting for a turn, per profile",
            queue_waiting.clone(),
        );
        let queue_running = Family::<ProfileLabels, Gauge>::default();
        registry.register(
            "queue_running",
            "Programs holding a turn, per profile",
            queue_running.clone(),
        );
        let queue_wait_seconds =
            Family::<ProfileLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                seconds_histogram,
            );
        registry.register(
            "queue_wait_seconds",
            "How long a request waited for its turn",
            queue_wait_seconds.clone(),
        );
        let queue_refusals = Family::<RefusalLabels, Counter>::default();
        registry.register(
            "queue_refusals",
            "Requests refused for overload (full: the line was full; waited: no turn in time; memory: the memory budget stayed held)",
            queue_refusals.clone(),
        );
        let verdicts = Family::<VerdictLabels, Counter>::default();
        registry.register(
            "verdicts",
            "Runs' verdicts (every invocation exits 0, or the request's expectation)",
            verdicts.clone(),
        );
        let undetermined = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "undetermined",
            "Undetermined verdicts by reason kind",
            undetermined.clone(),
        );
        let evidence = Family::<EvidenceLabels, Counter>::default();
        registry.register(
            "evidence",
            "Where a request's evidence came from (ran, joined a run in flight, stored)",
            evidence.clone(),
        );
        let run_seconds =
            Family::<ProfileLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                seconds_histogram,
            );
        registry.register(
            "run_seconds",
            "Time from a turn to the stored evidence, for programs that ran",
            run_seconds.clone(),
        );
        let reruns = Family::<ProfileLabels, Counter>::default();
        registry.register(
            "reruns",
            "Runs done again because the run before proved nothing (a sandbox fault, an engine away, an unproven timeout)",
            reruns.clone(),
        );
        let sandbox_refusals = Family::<ProfileLabels, Counter>::default();
        registry.register(
            "sandbox_refusals",
            "Runs the sandbox refused before anything ran (an engine away)",
            sandbox_refusals.clone(),
        );
        let runs_in_flight = Gauge::default();
        registry.register(
            "runs_in_flight",
            "Runs not yet ended (their cleanup included)",
            runs_in_flight.clone(),
        );
        let store_rows = Family::<TableLabels, Gauge>::default();
        registry.register(
            "store_rows",
            "Rows in the evidence store, per table (read when scraped)",
            store_rows.clone(),
        );
        let store_bytes = Family::<StoreBytesLabels, Gauge>::default();
        registry.register(
            "store_bytes",
            "The evidence store's size: the file, its write-ahead log, the bytes in use",
            store_bytes.clone(),
        );
        let pruned_rows = Family::<TableLabels, Counter>::default();
        registry.register(
            "store_pruned_rows",
            "Rows removed by [serve] retention, per table",
            pruned_rows.clone(),
        );
        Metrics {
            registry,
            store_rows,
            store_bytes,
            pruned_rows,
            requests,
            queue_waiting,
            queue_running,
            queue_wait_seconds,
            queue_refusals,
            verdicts,
            undetermined,
            evidence,
            run_seconds,
            sandbox_refusals,
            reruns,
            runs_in_flight,
        }
    }

    /// A request answered.
    pub fn request(&self, route: &str, status: u16) {
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_string(),
                status,
            })
            .inc();
    }

    /// A turn given after `waited`.
    pub fn turn(&self, profile: &str, waited: Duration) {
        self.queue_wait_seconds
            .get_or_create(&profile_labels(profile))
            .observe(waited.as_secs_f64());
    }

    /// A request refused for overload.
    pub fn queue_refusal(&self, profile: &str, kind: &str) {
        self.queue_refusals
            .get_or_create(&RefusalLabels {
                profile: profile.to_string(),
                kind: kind.to_string(),
            })
            .inc();
    }

    /// A run done again because the one before proved nothing.
    pub fn rerun(&self, profile: &str) {
        self.reruns.get_or_create(&profile_labels(profile)).inc();
    }

    /// A run the sandbox refused (an engine away...).
    pub fn sandbox_refusal(&self, profile: &str) {
        self.sandbox_refusals
            .get_or_create(&profile_labels(profile))
            .inc();
    }

    /// A score, its evidence, and (when it ran) how long the run took.
    pub fn scored(&self, score: &Score, took: Duration) {
        let verdict = match score.value {
            Some(true) => "true",
            Some(false) => "false",
            None => "undetermined",
        };
        self.verdicts
            .get_or_create(&VerdictLabels {
                profile: score.profile.clone(),
                verdict: verdict.to_string(),
            })
            .inc();
        if let Some(kind) = score.reason_kind {
            let reason = serde_json::to_value(kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            self.undetermined
                .get_or_create(&ReasonLabels { reason })
                .inc();
        }
        let evidence = serde_json::to_value(score.evidence)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        if evidence == "ran" {
            self.run_seconds
                .get_or_create(&profile_labels(&score.profile))
                .observe(took.as_secs_f64());
        }
        self.evidence
            .get_or_create(&EvidenceLabels { evidence })
            .inc();
    }

    /// The store's size and rows, as read now.
    pub fn store_usage(&self, usage: &StoreUsage) {
        for (table, rows) in [
            ("programs", usage.programs),
            ("observations", usage.observations),
            ("scores", usage.scores),
            ("submissions", usage.submissions),
            ("leases", usage.leases),
        ] {
            self.store_rows
                .get_or_create(&table_labels(table))
                .set(i64::try_from(rows).unwrap_or(i64::MAX));
        }
        for (kind, bytes) in [
            ("file", usage.file_bytes),
            ("wal", usage.wal_bytes),
            ("in_use", usage.in_use_bytes),
        ] {
            self.store_bytes
                .get_or_create(&StoreBytesLabels {
                    kind: kind.to_string(),
                })
                .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
    }

    /// What a prune removed.
    pub fn pruned(&self, summary: &PruneSummary) {
        for (table, rows) in [
            ("programs", summary.programs_removed),
            ("observations", summary.observations_removed),
            ("scores", summary.scores_removed),
            ("submissions", summary.submissions_removed),
        ] {
            self.pruned_rows
                .get_or_create(&table_labels(table))
                .inc_by(rows);
        }
    }

    /// The text exposition, with the gauges set from `queues` (profile,
    /// waiting, running) and the runs in flight.
    pub fn encode(&self, queues: &[(String, usize, usize)], runs_in_flight: usize) -> String {
        for (profile, waiting, running) in queues {
            let labels = profile_labels(profile);
            self.queue_waiting
                .get_or_create(&labels)
                .set(i64::try_from(*waiting).unwrap_or(i64::MAX));
            self.queue_running
                .get_or_create(&labels)
                .set(i64::try_from(*running).unwrap_or(i64::MAX));
        }
        self.runs_in_flight
            .set(i64::try_from(runs_in_flight).unwrap_or(i64::MAX));
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

fn table_labels(table: &str) -> TableLabels {
    TableLabels {
        table: table.to_string(),
    }
}

fn profile_labels(profile: &str) -> ProfileLabels {
    ProfileLabels {
        profile: profile.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_routes_queues_and_refusals() {
        let metrics = Metrics::new();
        metrics.request("/run_code", 200);
        metrics.request("/run_code", 200);
        metrics.request("/submissions", 422);
        metrics.turn("python", Duration::from_millis(3));
        metrics.queue_refusal("python", "full");
        metrics.sandbox_refusal("cpp");
        let text = metrics.encode(&[("python".into(), 2, 6)], 7);
        for line in [
            "progscore_http_requests_total{route=\"/run_code\",status=\"200\"} 2",
            "progscore_http_requests_total{route=\"/submissions\",status=\"422\"} 1",
            "progscore_queue_waiting{profile=\"python\"} 2",
            "progscore_queue_running{profile=\"python\"} 6",
            "progscore_queue_wait_seconds_count{profile=\"python\"} 1",
            "progscore_queue_refusals_total{profile=\"python\",kind=\"full\"} 1",
            "progscore_sandbox_refusals_total{profile=\"cpp\"} 1",
            "progscore_runs_in_flight 7",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn the_store_size_rows_and_prunes_are_exposed() {
        let metrics = Metrics::new();
        metrics.store_usage(&StoreUsage {
            file_bytes: 4096,
            wal_bytes: 8,
            in_use_bytes: 2048,
            programs: 1,
            observations: 2,
            scores: 3,
            submissions: 4,
            leases: 0,
        });
        metrics.pruned(&PruneSummary {
            observations_removed: 5,
            scores_removed: 6,
            ..PruneSummary::default()
        });
        let text = metrics.encode(&[], 0);
        for line in [
            "progscore_store_bytes{kind=\"file\"} 4096",
            "progscore_store_bytes{kind=\"in_use\"} 2048",
            "progscore_store_rows{table=\"observations\"} 2",
            "progscore_store_rows{table=\"submissions\"} 4",
            "progscore_store_pruned_rows_total{table=\"observations\"} 5",
            "progscore_store_pruned_rows_total{table=\"scores\"} 6",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
    }
}
