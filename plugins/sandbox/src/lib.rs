//! The progscore execution contract.
//!
//! A caller names a trusted [`RuntimeProfile`] and hands a program's bytes and a
//! list of [`Invocation`]s to a [`SandboxClient`]; it gets back a [`ProgramRun`]
//! with one [`InvocationEvent`] per invocation. This crate knows nothing of
//! scoring, storage or comparators, so tools that only need to run programs can
//! depend on it alone. Backends (Docker, WASI) implement [`SandboxClient`]
//! beside it; [`fake::ScriptedClient`] lets callers of the contract be tested
//! without one.

pub mod bytes;
pub mod canonical;
pub mod capture;
pub mod client;
pub mod fake;
pub mod invocation;
pub mod profile;
pub mod run;

pub use bytes::ByteString;
pub use canonical::{canonical_json, sha256_hex};
pub use capture::StreamCapture;
pub use client::{BoxFuture, SandboxClient, SandboxError};
pub use invocation::Invocation;
pub use profile::{
    Artifact, Backend, ImageRef, Limits, LimitsSpec, PinnedFile, ProfileError, ProfileSpec,
    RuntimeProfile, is_sha256_hex,
};
pub use run::{CapturedStream, InvocationEvent, Outcome, ProgramRun, Provenance};
