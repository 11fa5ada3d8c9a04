//! What came back from running a program: one event per invocation.

use serde::{Deserialize, Serialize};

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
}

impl ProgramRun {
    /// Whether any event is a sandbox error or was not run: the program's
    /// behaviour is then not fully known.
    pub fn has_infrastructure_fault(&self) -> bool {
        self.events.iter().any(|event| {
            matches!(
                event.outcome,
                Outcome::SandboxError { .. } | Outcome::NotRun { .. }
            )
        })
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
    /// Wall time of the invocation, from container creation to removal.
    pub duration_ms: u64,
    /// What ran, exactly; absent for invocations that were not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
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
            provenance: None,
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
    /// The wall-clock deadline expired; the program was killed.
    TimedOut,
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
}

impl Outcome {
    /// The outcome's kind as it appears in JSON (`exited`, `timed_out`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Exited { .. } => "exited",
            Outcome::TimedOut => "timed_out",
            Outcome::MemoryLimit => "memory_limit",
            Outcome::SandboxError { .. } => "sandbox_error",
            Outcome::NotRun { .. } => "not_run",
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
    /// `docker` or `wasi`.
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
            provenance: None,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["outcome"], "exited");
        assert_eq!(json["exit_code"], 3);
        assert_eq!(json["stdout"]["data"], "9\n");
        let back: InvocationEvent = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
        let timed_out = serde_json::to_value(InvocationEvent {
            outcome: Outcome::TimedOut,
            ..event
        })
        .unwrap();
        assert_eq!(timed_out["outcome"], "timed_out");
        assert!(timed_out.get("exit_code").is_none());
    }
}
