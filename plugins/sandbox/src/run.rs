//! What came back from running a program: one event per invocation.

use serde::{Deserialize, Serialize};

use crate::behaviour::Behaviour;
use crate::bytes::ByteString;
use crate::profile::Limits;

/// The result of one `execute` call: one event per invocation, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgramRun {
    /// The profile the program ran under.
    pub profile: String,
    /// sha256 of the program's bytes, as run.
    pub program_sha256: String,
    /// One event per invocation, in the order given.
    pub events: Vec<InvocationEvent>,
    /// Problems of the sandbox itself that did not change an outcome but must
    /// be seen (a container that could not be removed, ...).
    #[serde(default)]
    pub sandbox_warnings: Vec<String>,
    /// The compile, for profiles that build the program before its cases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile: Option<CompileEvent>,
    /// For an interactive run: the interactor's run and each case's
    /// transcript ([`crate::conversation`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interaction: Option<Box<Interaction>>,
}

/// What happened when the program was built: the compiler's outcome, its
/// bounded output, durations and provenance, and what it produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompileEvent {
    /// The compile, as a container run (its argv and limits in the provenance).
    #[serde(flatten)]
    pub event: InvocationEvent,
    /// sha256 of the build folder's contents (paths, kinds, modes and bytes)
    /// after a successful compile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_sha256: Option<String>,
}

/// How much of the compiler's first error line a case's reason quotes.
const QUOTED_ERROR_CHARS: usize = 200;

impl CompileEvent {
    /// The compiler's first line that says `error` (else its first non-empty
    /// line), from stderr then stdout, cut to a readable length.
    fn first_error_line(&self) -> Option<String> {
        let text = |stream: &CapturedStream| String::from_utf8_lossy(&stream.data.0).into_owned();
        let output = format!("{}\n{}", text(&self.event.stderr), text(&self.event.stdout));
        let lines = || output.lines().map(str::trim).filter(|l| !l.is_empty());
        let line = lines()
            .find(|l| l.to_ascii_lowercase().contains("error"))
            .or_else(|| lines().next())?;
        let mut quoted: String = line.chars().take(QUOTED_ERROR_CHARS).collect();
        if quoted.len() < line.len() {
            quoted.push('…');
        }
        Some(quoted)
    }

    /// Whether the build succeeded: the compiler exited 0.
    pub fn succeeded(&self) -> bool {
        matches!(self.event.outcome, Outcome::Exited { exit_code: 0 })
    }

    /// What the cases' events are when the build did not succeed: a proven
    /// failure (`compile_error`) when the compiler failed, ran out of time or
    /// memory; `not_run` (unproven) when the sandbox failed or the timeout is
    /// not proven. `None` when it succeeded.
    pub fn case_event(&self) -> Option<InvocationEvent> {
        let reason = match &self.event.outcome {
            Outcome::Exited { exit_code: 0 } => return None,
            Outcome::Exited { exit_code } => match self.first_error_line() {
                Some(line) => format!("the compiler exited with code {exit_code}: {line}"),
                None => format!("the compiler exited with code {exit_code}"),
            },
            Outcome::TimedOut {
                unconfirmed: Some(why),
                ..
            } => {
                return Some(InvocationEvent::not_run(format!(
                    "the compile timed out, but the timeout is not proven: {why}"
                )));
            }
            Outcome::TimedOut {
                limit: TimeLimit::Cpu,
                ..
            } => "the compile exceeded its CPU time limit".into(),
            Outcome::TimedOut { .. } => "the compile timed out".into(),
            Outcome::MemoryLimit => "the compile exceeded its memory limit".into(),
            Outcome::CompileError { reason } => reason.clone(),
            Outcome::SandboxError { message } => {
                return Some(InvocationEvent::not_run(format!(
                    "the compile hit a sandbox error: {message}"
                )));
            }
            Outcome::NotRun { reason } => {
                return Some(InvocationEvent::not_run(format!(
                    "the compile was not run: {reason}"
                )));
            }
        };
        Some(InvocationEvent {
            outcome: Outcome::CompileError { reason },
            ..InvocationEvent::not_run("")
        })
    }
}

impl ProgramRun {
    /// Whether any event rests on a condition that says nothing proven about
    /// the program: a sandbox error, an invocation not run, or a timeout that
    /// could not be confirmed. Such a run is never reusable evidence.
    ///
    /// In an interactive run, a case also rests on its interactor: its
    /// sandbox failing or its timeout unconfirmed, or a program that timed
    /// out waiting (not working) while the interactor still ran, which a
    /// run on a quieter machine may decide.
    pub fn rests_on_unproven_conditions(&self) -> bool {
        self.events.iter().any(|event| event.outcome.is_unproven())
            || self.interaction.as_ref().is_some_and(|interaction| {
                self.events
                    .iter()
                    .enumerate()
                    .any(|(index, program)| interaction.case_rests_on_unproven(index, program))
            })
    }
}

impl Interaction {
    /// Whether case `index` (the program's `program` event) rests on
    /// something of the conversation that proves nothing (see
    /// [`ProgramRun::rests_on_unproven_conditions`]).
    pub fn case_rests_on_unproven(&self, index: usize, program: &InvocationEvent) -> bool {
        let interactor_unproven = self
            .interactor
            .events
            .get(index)
            .is_none_or(|event| event.outcome.is_unproven());
        let waited = matches!(
            program.outcome,
            Outcome::TimedOut {
                limit: TimeLimit::Wall,
                unconfirmed: None,
            }
        ) && !program.worked_through_its_limit()
            && !self
                .transcripts
                .get(index)
                .is_some_and(Transcript::interactor_ended_first);
        interactor_unproven || waited
    }
}

impl InvocationEvent {
    /// Whether a timed-out program used (nearly) its promised CPU over its
    /// limit ([`crate::timing::FAIR_SHARE`] of `min(cpus, 1)` × the wall
    /// limit): it was working, not waiting for anything outside it.
    pub fn worked_through_its_limit(&self) -> bool {
        let (Some(cpu_ms), Some(provenance)) = (
            self.usage.as_ref().and_then(|usage| usage.cpu_ms),
            self.provenance.as_ref(),
        ) else {
            return false;
        };
        let limits = &provenance.limits;
        let promised = limits.cpus.clamp(0.0, 1.0) * limits.timeout_ms as f64;
        cpu_ms as f64 >= crate::timing::FAIR_SHARE * promised
    }
}

/// What happened to one invocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvocationEvent {
    /// How the invocation ended.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Captured standard output.
    pub stdout: CapturedStream,
    /// Captured standard error.
    pub stderr: CapturedStream,
    /// Wall time of the program, from its start to its end (engine work
    /// before and after it, such as creating or removing a container, is not
    /// counted).
    pub duration_ms: u64,
    /// What the program consumed, where the backend can measure it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ResourceUsage>,
    /// What ran, exactly; absent for invocations that were not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// What the program tried to do, for a profile that traces it
    /// (`trace`): the sandbox's trace, or why there is none. Absent for
    /// profiles that do not trace (and in evidence stored before tracing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behaviour: Option<Behaviour>,
}

/// What an invocation consumed, as far as its backend can tell.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceUsage {
    /// CPU time of every process of the program (user and system), in
    /// milliseconds. Under gVisor it includes the work of gVisor's own kernel
    /// on the program's behalf.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<u64>,
    /// The highest memory use seen, in bytes (Docker: the container's cgroup;
    /// WASI: the guest's linear memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    /// For a timed-out program: how long it was ready to run but waited for a
    /// CPU beyond its own quota, in milliseconds. A large figure means the
    /// machine, not the program, used the time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_wait_ms: Option<u64>,
}

impl InvocationEvent {
    /// An event for an invocation that was never started.
    pub fn not_run(reason: impl Into<String>) -> Self {
        InvocationEvent {
            outcome: Outcome::NotRun {
                reason: reason.into(),
            },
            stdout: CapturedStream::default(),
            stderr: CapturedStream::default(),
            duration_ms: 0,
            usage: None,
            provenance: None,
            behaviour: None,
        }
    }

    /// An event for an invocation the sandbox could not run (nothing is
    /// known about the program from it).
    pub fn sandbox_error(message: impl Into<String>) -> Self {
        InvocationEvent {
            outcome: Outcome::SandboxError {
                message: message.into(),
            },
            ..InvocationEvent::not_run("")
        }
    }
}

/// How an invocation ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// The program exited (or was killed by a signal: 128 + signal number).
    Exited {
        /// The exit status.
        exit_code: i64,
    },
    /// The program was killed for running past a time limit.
    TimedOut {
        /// Which limit: the wall clock (from the program's start) or its CPU time.
        #[serde(default, skip_serializing_if = "TimeLimit::is_wall")]
        limit: TimeLimit,
        /// Set when the timeout is not proven: the program got much less CPU
        /// than its profile promises while the machine was busy, and a rerun
        /// could not confirm it. Says what was measured. Such a timeout
        /// decides nothing about the program.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unconfirmed: Option<String>,
    },
    /// The program was killed for exceeding its memory cap (from the
    /// container state, never guessed from exit code 137).
    MemoryLimit,
    /// The sandbox failed; the program's behaviour is unknown.
    SandboxError {
        /// What failed.
        message: String,
    },
    /// Not run because an earlier invocation hit a sandbox error.
    NotRun {
        /// Why.
        reason: String,
    },
    /// Not run because the program did not build: the compiler failed, or
    /// ran out of time or memory (the run's compile event has its output).
    CompileError {
        /// How the compile ended.
        reason: String,
    },
}

/// The time limit a [`Outcome::TimedOut`] program ran past.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeLimit {
    /// The wall-clock limit (`limits.timeout`), counted from the program's start.
    #[default]
    Wall,
    /// The CPU-time limit (`limits.cpu_time`).
    Cpu,
}

impl TimeLimit {
    fn is_wall(&self) -> bool {
        *self == TimeLimit::Wall
    }
}

impl Outcome {
    /// A proven timeout of the wall-clock limit.
    pub fn timed_out() -> Outcome {
        Outcome::TimedOut {
            limit: TimeLimit::Wall,
            unconfirmed: None,
        }
    }

    /// Whether this outcome says nothing proven about the program: a sandbox
    /// error, not run, or an unconfirmed timeout.
    pub fn is_unproven(&self) -> bool {
        match self {
            Outcome::SandboxError { .. } | Outcome::NotRun { .. } => true,
            Outcome::TimedOut { unconfirmed, .. } => unconfirmed.is_some(),
            Outcome::Exited { .. } | Outcome::MemoryLimit | Outcome::CompileError { .. } => false,
        }
    }

    /// The outcome's kind as it appears in JSON (`exited`, `timed_out`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Exited { .. } => "exited",
            Outcome::TimedOut { .. } => "timed_out",
            Outcome::MemoryLimit => "memory_limit",
            Outcome::SandboxError { .. } => "sandbox_error",
            Outcome::NotRun { .. } => "not_run",
            Outcome::CompileError { .. } => "compile_error",
        }
    }
}

/// A captured output stream: the bytes kept, the bytes seen, and whether
/// anything was dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapturedStream {
    /// The kept prefix of the stream.
    pub data: ByteString,
    /// Whether bytes beyond the cap were dropped.
    pub truncated: bool,
    /// Every byte the program wrote to the stream, kept or not.
    pub total_bytes: u64,
}

impl CapturedStream {
    /// A complete (untruncated) stream of these bytes.
    pub fn complete(bytes: impl Into<Vec<u8>>) -> Self {
        let bytes = bytes.into();
        CapturedStream {
            total_bytes: bytes.len() as u64,
            data: ByteString(bytes),
            truncated: false,
        }
    }
}

/// Exactly what ran, for the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// `docker`, `oci` or `wasi`.
    pub backend: String,
    /// The OCI runtime (`runc`, `runsc`) or the WASM engine (`wasmtime 48.0.8`).
    pub runtime: String,
    /// The artifact as the profile pins it (image digest/id, module sha256).
    pub artifact: String,
    /// The engine's resolved image id, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// The image's repo digests as the engine reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repo_digests: Vec<String>,
    /// The engine and its version.
    pub engine: String,
    /// Docker: the configured engine that ran it (`[engines.NAME]`, or
    /// `default`), when the client has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_name: Option<String>,
    /// The exact argv that ran inside the sandbox.
    pub command: Vec<String>,
    /// The user the program ran as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The container's name (Docker), for finding it in engine logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// Limits in force.
    pub limits: Limits,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_is_flattened_into_the_event() {
        let event = InvocationEvent {
            outcome: Outcome::Exited { exit_code: 3 },
            stdout: CapturedStream::complete(b"9\n".to_vec()),
            stderr: CapturedStream::default(),
            duration_ms: 12,
            usage: None,
            provenance: None,
            behaviour: None,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["outcome"], "exited");
        assert_eq!(json["exit_code"], 3);
        assert_eq!(json["stdout"]["data"], "9\n");
        let back: InvocationEvent = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
        let timed_out = serde_json::to_value(InvocationEvent {
            outcome: Outcome::timed_out(),
            ..event.clone()
        })
        .unwrap();
        assert_eq!(timed_out["outcome"], "timed_out");
        assert!(timed_out.get("exit_code").is_none());
        // A proven wall-clock timeout reads as it always did, so evidence
        // stored before limits and confirmations existed reads back the same.
        assert_eq!(
            timed_out.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["duration_ms", "outcome", "stderr", "stdout"]
        );
    }

    fn compile_ending(outcome: Outcome, stderr: &str) -> CompileEvent {
        CompileEvent {
            event: InvocationEvent {
                outcome,
                stderr: CapturedStream::complete(stderr.as_bytes().to_vec()),
                ..InvocationEvent::not_run("")
            },
            artifact_sha256: None,
        }
    }

    #[test]
    fn a_failed_build_decides_the_cases_and_only_a_proven_one_is_a_failure() {
        let built = compile_ending(Outcome::Exited { exit_code: 0 }, "");
        assert!(built.succeeded() && built.case_event().is_none());

        let gcc = "main.c: In function 'main':\nmain.c:1:25: error: expected expression before ';' token\n";
        let failed = compile_ending(Outcome::Exited { exit_code: 1 }, gcc)
            .case_event()
            .unwrap();
        assert_eq!(
            failed.outcome,
            Outcome::CompileError {
                reason: "the compiler exited with code 1: main.c:1:25: error: expected expression before ';' token".into()
            }
        );
        assert!(!failed.outcome.is_unproven());
        for (outcome, reason) in [
            (Outcome::timed_out(), "the compile timed out"),
            (
                Outcome::MemoryLimit,
                "the compile exceeded its memory limit",
            ),
        ] {
            let event = compile_ending(outcome, "").case_event().unwrap();
            assert_eq!(
                event.outcome,
                Outcome::CompileError {
                    reason: reason.into()
                }
            );
        }

        // What says nothing about the program leaves the cases unproven.
        for outcome in [
            Outcome::SandboxError {
                message: "engine gone".into(),
            },
            Outcome::TimedOut {
                limit: TimeLimit::Wall,
                unconfirmed: Some("busy".into()),
            },
            Outcome::NotRun {
                reason: "cancelled".into(),
            },
        ] {
            let event = compile_ending(outcome.clone(), "").case_event().unwrap();
            assert!(
                matches!(event.outcome, Outcome::NotRun { .. }),
                "{outcome:?}: {event:?}"
            );
            assert!(event.outcome.is_unproven());
        }

        // A long first line is quoted, cut.
        let long = format!("error: {}", "x".repeat(500));
        let Outcome::CompileError { reason } =
            compile_ending(Outcome::Exited { exit_code: 2 }, &long)
                .case_event()
                .unwrap()
                .outcome
        else {
            panic!("not a compile error");
        };
        assert!(
            reason.ends_with('…') && reason.chars().count() < 260,
            "{reason}"
        );
    }

    #[test]
    fn unconfirmed_timeouts_and_cpu_limits_are_explicit() {
        let outcome = Outcome::TimedOut {
            limit: TimeLimit::Cpu,
            unconfirmed: Some("busy".into()),
        };
        let json = serde_json::to_value(&outcome).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"outcome": "timed_out", "limit": "cpu", "unconfirmed": "busy"})
        );
        assert_eq!(serde_json::from_value::<Outcome>(json).unwrap(), outcome);
        assert!(outcome.is_unproven());
        assert!(!Outcome::timed_out().is_unproven());
        assert!(!Outcome::MemoryLimit.is_unproven());
        let legacy: Outcome = serde_json::from_str(r#"{"outcome": "timed_out"}"#).unwrap();
        assert_eq!(legacy, Outcome::timed_out());
    }
}

/// Turns a transcript lists; beyond them, only counted (the bytes are in
/// each side's stdout).
pub const MAX_TURNS: usize = 4096;

/// Which side of a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The program being judged.
    Program,
    /// The judge's interactor.
    Interactor,
}

impl Side {
    pub(crate) fn other(self) -> Side {
        match self {
            Side::Program => Side::Interactor,
            Side::Interactor => Side::Program,
        }
    }

    pub(crate) fn slot(self) -> usize {
        match self {
            Side::Program => 0,
            Side::Interactor => 1,
        }
    }
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Program => "program",
            Side::Interactor => "interactor",
        })
    }
}

/// What the interactor did, stored with the program's run: its own run
/// (compile and one event per case) and each case's transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interaction {
    /// The interactor's run.
    pub interactor: ProgramRun,
    /// One per case, in order (empty for a case that never began).
    pub transcripts: Vec<Transcript>,
}

/// One case's conversation: every write as it crossed, and when each
/// side's output ended, in microseconds from the case's start (both sides
/// had begun it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transcript {
    /// The writes, in the order they crossed (up to [`MAX_TURNS`]).
    pub turns: Vec<Turn>,
    /// Writes beyond [`MAX_TURNS`], counted only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub turns_dropped: u64,
    /// When the program's output ended (it exited or was killed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_ended_us: Option<u64>,
    /// When the interactor's output ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interactor_ended_us: Option<u64>,
    /// Bytes the program wrote that the interactor never took (it had
    /// stopped reading or ended).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub program_bytes_undelivered: u64,
    /// Bytes the interactor wrote that the program never took.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub interactor_bytes_undelivered: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One write that crossed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// Who wrote it.
    pub from: Side,
    /// When it crossed, in microseconds from the case's start.
    pub at_us: u64,
    /// How many bytes.
    pub bytes: u64,
}

impl Transcript {
    /// Whether the interactor's output ended before the program's: its
    /// verdict was given on a conversation the program had not left (and
    /// progscore had not cut by ending the program).
    pub fn interactor_ended_first(&self) -> bool {
        match (self.interactor_ended_us, self.program_ended_us) {
            (Some(interactor), Some(program)) => interactor < program,
            (Some(_), None) => true,
            _ => false,
        }
    }

    /// How many bytes `side` wrote, by the turns listed.
    pub fn bytes_from(&self, side: Side) -> u64 {
        self.turns
            .iter()
            .filter(|turn| turn.from == side)
            .map(|turn| turn.bytes)
            .sum()
    }
}
