//! What the page shows: the batch's overview, and every item as the data
//! the page's script renders (program output travels only as JSON strings).

use std::collections::BTreeMap;

use serde::Serialize;

/// How much of each thing the page keeps, so that a 10,000-item report
/// stays small enough to open quickly. The page says so wherever it cut.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Bytes of a program shown.
    pub program_bytes: usize,
    /// Bytes of each output stream (and of stdin) shown per case.
    pub excerpt_bytes: usize,
    /// Lines of a diff shown.
    pub diff_lines: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            program_bytes: 16 * 1024,
            excerpt_bytes: 2 * 1024,
            diff_lines: 200,
        }
    }
}

/// Everything one report holds.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Where the result lines came from.
    pub source: String,
    /// Where the baseline came from, if any.
    pub baseline_source: Option<String>,
    /// The store the evidence was read from.
    pub store: String,
    /// The caps applied.
    #[serde(skip)]
    pub limits: Limits,
    /// The items, in the order of the result lines.
    pub items: Vec<Item>,
    /// The span of the scores' timestamps, in seconds, when known.
    pub span_seconds: Option<f64>,
    /// Each distinct provenance (without its container), once.
    pub provenances: Vec<serde_json::Value>,
    /// Result lines (by number) whose evidence in the store is another
    /// item's: it is not shown for them.
    #[serde(skip)]
    pub mismatched_lines: Vec<usize>,
}

/// One scored item.
#[derive(Debug, Clone, Serialize)]
pub struct Item {
    /// The batch line's id (or `line N` when it had none).
    pub id: String,
    /// `true`, `false` or `undetermined`.
    pub verdict: &'static str,
    /// The profile the expectation named.
    pub profile: String,
    /// The stable human sentence.
    pub rationale: String,
    /// The item's score in [0, 1] under its policy, when decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Per group under the `groups` policy (`name`, `points`, `earned`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<serde_json::Value>,
    /// Why it is undetermined (or the failing clause).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The reason's kind (`sandbox_error`, `unconfirmed_timeout`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_kind: Option<String>,
    /// The store's score id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score_id: Option<i64>,
    /// `ran`, `joined`, `stored`, `replayed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// The observations the score used.
    pub observation_ids: Vec<String>,
    /// Wall time of every case together, in milliseconds.
    pub duration_ms: u64,
    /// CPU time of every case together, when every case was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<u64>,
    /// The highest peak memory of its cases, when measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    /// The program, as it ran (or why it is not shown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<Text>,
    /// The program's sha256.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program_sha256: Option<String>,
    /// The verdict in the baseline grading, when one was given and differs
    /// or not (`None` without a baseline or without this item in it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<&'static str>,
    /// The compile, for profiles that build the program first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compile: Option<Compile>,
    /// Cases, in order.
    pub cases: Vec<Case>,
    /// What could not be shown (evidence missing from the store...).
    pub notes: Vec<String>,
}

/// One case of an item.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    /// Its arguments.
    pub args: Vec<String>,
    /// Its stdin, when it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin: Option<Text>,
    /// The expected conditions, as the expectation wrote them.
    pub expected: BTreeMap<String, serde_json::Value>,
    /// `exited`, `timed_out`, ...
    pub outcome: String,
    /// The exit code, when it exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// `true` matched, `false` failed, `None` undetermined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched: Option<bool>,
    /// Why it failed or is undetermined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Wall time, from the program's start.
    pub duration_ms: u64,
    /// CPU time, when measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<u64>,
    /// Peak memory, when measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    /// Standard output as observed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<Stream>,
    /// Standard error as observed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<Stream>,
    /// Where an `equals` check on a stream failed: the expected text
    /// against the observed, line by line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<Diff>,
    /// What ran, exactly: an index into [`Report::provenances`] (cases
    /// of one image, runtime and limits share one entry).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<usize>,
    /// The container (or instance) it ran in, which no other case shares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// What the program tried (a profile that traces): its events, shown
    /// as text only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub behaviour: Option<progscore_sandbox::Behaviour>,
    /// An interactive case: its conversation with the interactor, and what
    /// the interactor said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Conversation>,
}

/// An interactive case's conversation, write by write as it crossed.
#[derive(Debug, Clone, Serialize)]
pub struct Conversation {
    /// The writes shown, in order.
    pub turns: Vec<ConversationTurn>,
    /// Writes the transcript recorded (shown or not).
    pub total_turns: u64,
    /// Bytes a side wrote beyond what its capture kept: those writes show
    /// with what was kept of them, or as counted only.
    pub cut: bool,
    /// When each side's output ended, in ms from the case's start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program_ended_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interactor_ended_ms: Option<f64>,
    /// How the interactor ended, and its message.
    pub interactor_outcome: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interactor_exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interactor_stderr: Option<Stream>,
}

/// One write of a conversation.
#[derive(Debug, Clone, Serialize)]
pub struct ConversationTurn {
    /// `program` or `interactor`.
    pub from: &'static str,
    /// When it crossed, in ms from the case's start.
    pub at_ms: f64,
    /// Its bytes as text (what the writer's capture kept of it).
    pub text: String,
    /// How many bytes it had.
    pub bytes: u64,
}

/// How the program was built, for profiles with a compile step.
#[derive(Debug, Clone, Serialize)]
pub struct Compile {
    /// `exited`, `timed_out`, `memory_limit`, `sandbox_error`...
    pub outcome: String,
    /// The compiler's exit code, when it exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// The compiler's argv.
    pub command: Vec<String>,
    /// Wall time of the compile.
    pub duration_ms: u64,
    /// sha256 of what it built, when it succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact_sha256: Option<String>,
    /// The compiler's output.
    pub stdout: Stream,
    /// The compiler's error output.
    pub stderr: Stream,
}

/// Some bytes shown as text.
#[derive(Debug, Clone, Serialize)]
pub struct Text {
    /// The text shown (invalid UTF-8 replaced).
    pub text: String,
    /// How many bytes there are in all.
    pub bytes: u64,
    /// Whether the page shows only the first part.
    pub cut: bool,
    /// Whether the bytes are not valid UTF-8 (shown with replacements).
    pub binary: bool,
}

/// One captured output stream.
#[derive(Debug, Clone, Serialize)]
pub struct Stream {
    /// What the page shows of what the sandbox kept.
    pub shown: Text,
    /// How many bytes the sandbox kept.
    pub kept_bytes: u64,
    /// How many bytes the program wrote.
    pub total_bytes: u64,
    /// Whether the sandbox dropped bytes beyond its cap.
    pub truncated: bool,
}

/// A line diff of expected against observed.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    /// Which stream.
    pub stream: &'static str,
    /// `[op, line]`: op is `=`, `-` (expected only) or `+` (observed only).
    pub lines: Vec<(char, String)>,
    /// Whether lines beyond the cap were left out.
    pub cut: bool,
}

/// Counts of one group of items.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub total: usize,
    pub passed: usize,
    pub failed: usize,
    pub undetermined: usize,
}

impl Counts {
    pub fn add(&mut self, verdict: &str) {
        self.total += 1;
        match verdict {
            "true" => self.passed += 1,
            "false" => self.failed += 1,
            _ => self.undetermined += 1,
        }
    }

    /// The share of `true`, as a percentage with one decimal.
    pub fn pass_rate(&self) -> String {
        if self.total == 0 {
            return "-".into();
        }
        format!("{:.1}%", 100.0 * self.passed as f64 / self.total as f64)
    }
}

impl Report {
    /// Counts over every item.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for item in &self.items {
            counts.add(item.verdict);
        }
        counts
    }

    /// Counts per profile, by profile name.
    pub fn by_profile(&self) -> BTreeMap<String, Counts> {
        let mut groups: BTreeMap<String, Counts> = BTreeMap::new();
        for item in &self.items {
            groups
                .entry(item.profile.clone())
                .or_default()
                .add(item.verdict);
        }
        groups
    }

    /// Undetermined items grouped by the kind of their reason: the kind, how
    /// many, and the first reason seen.
    pub fn undetermined_reasons(&self) -> Vec<(String, usize, String)> {
        let mut groups: BTreeMap<String, (usize, String)> = BTreeMap::new();
        for item in self.items.iter().filter(|i| i.verdict == "undetermined") {
            let kind = item.reason_kind.clone().unwrap_or_else(|| "unknown".into());
            let entry = groups
                .entry(kind)
                .or_insert_with(|| (0, item.reason.clone().unwrap_or_default()));
            entry.0 += 1;
        }
        let mut rows: Vec<(String, usize, String)> = groups
            .into_iter()
            .map(|(kind, (count, example))| (kind, count, example))
            .collect();
        rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        rows
    }

    /// Items whose verdict differs from the baseline's: (id, before, after).
    pub fn changes(&self) -> Vec<(&str, &'static str, &'static str)> {
        self.items
            .iter()
            .filter_map(|item| {
                let before = item.before?;
                (before != item.verdict).then_some((item.id.as_str(), before, item.verdict))
            })
            .collect()
    }
}
