//! The progscore execution contract.
//!
//! A caller names a trusted [`RuntimeProfile`] and hands a program's bytes and a
//! list of [`Invocation`]s to a [`SandboxClient`]; it gets back a [`ProgramRun`]
//! with one [`InvocationEvent`] per invocation. This crate knows nothing of
//! scoring, storage or comparators, so tools that only need to run programs can
//! depend on it alone. Backends (Docker, WASI) implement [`SandboxClient`]
//! beside it; [`fake::ScriptedClient`] lets callers of the contract be tested
//! without one.

pub mod behaviour;
pub mod bytes;
pub mod canonical;
pub mod capture;
pub mod client;
pub mod conversation;
pub mod converse;
pub mod fake;
pub mod files;
pub mod invocation;
pub mod owner;
pub mod profile;
pub mod run;
pub mod timing;

pub use behaviour::{
    Action, ActionKind, Behaviour, BehaviourEvent, BehaviourTrace, FileAccess, MAX_KEPT_EVENTS,
    PathPattern,
};
pub use bytes::ByteString;
pub use canonical::{canonical_json, sha256_hex};
pub use capture::StreamCapture;
pub use client::InteractorRequest;
pub use client::{
    BoxFuture, CaseDone, CaseSink, Preflight, RunProfile, RunRequest, SandboxClient,
    SandboxClientExt, SandboxError,
};
pub use conversation::{ConversationSide, Inlet, LiveCase, Outlet};
pub use converse::converse;
pub use files::{InvalidFiles, MAX_FILES, MAX_FILES_BYTES, ProgramFiles};
pub use invocation::{Invocation, InvocationError, MAX_ARG_BYTES, MAX_ARGV_BYTES, MAX_STDIN_BYTES};
pub use owner::{
    CleanupPending, DeadOwner, Owner, OwnerError, default_owner_root, ensure_private_root,
    lock_proves_owner_gone,
};
pub use profile::{
    Artifact, BUILD_PATH, Backend, CompileStep, DEFAULT_DOCKER_USER, DEFAULT_SENSITIVE_PATHS,
    ImageRef, Limits, LimitsSpec, PartialLimitsSpec, PinnedFile, ProfileError, ProfileSpec,
    RuntimeProfile, SANDBOX_DIR, Stage, TimeFactor, TimeFactorSpec, TraceSettings, TraceSpec,
    is_sha256_hex,
};
pub use run::{
    CapturedStream, CompileEvent, Interaction, InvocationEvent, MAX_TURNS, Outcome, ProgramRun,
    Provenance, ResourceUsage, Side, TimeLimit, Transcript, Turn,
};
pub use timing::{CpuWindow, MAX_FROZEN, TimeoutProof, fair_extension};
