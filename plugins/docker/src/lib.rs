//! The progscore Docker backend.
//!
//! Every invocation runs in a fresh, hardened container created through the
//! engine's API (bollard): no network, no log driver, a non-root user, no
//! capabilities, `no-new-privileges`, a read-only root with a small tmpfs at
//! /tmp, the program bind-mounted read-only from a private workspace, memory
//! with no swap, a CPU quota, a pids limit, and its own parent cgroup from
//! which CPU time and peak memory are read. The program's time limits run
//! from its start; engine requests have their own bound. gVisor is the same
//! backend with `runtime = "runsc"`.
//!
//! All engine traffic runs on a runtime owned by the client, so that a caller
//! that drops a call's future can block until the call's cleanup has finished
//! on that runtime without deadlocking its own.

mod client;
mod container;
mod delivery;
mod doctor;
mod engine;
mod events;
mod health;
mod held;
mod invocation;
mod options;
mod pool;
mod program;
mod streams;
mod sweep;

pub use client::DockerClient;
pub use doctor::{EngineReport, ProfileCheck};
pub use options::{
    Capacity, DEFAULT_CALLS_PER_CPU, DEFAULT_ENGINE_NAME, DEFAULT_ENGINE_TIMEOUT,
    DEFAULT_OUTAGE_WAIT, DockerOptions, Endpoint, EngineOptions, OWNER_LABEL, TlsFiles,
};
