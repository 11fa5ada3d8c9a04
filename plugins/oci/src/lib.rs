//! The progscore OCI backend: no daemon.
//!
//! Every invocation runs in a fresh container started by an OCI runtime
//! binary directly (`runc run`, or `runsc run` for gVisor), from an image
//! fetched by digest from its registry and unpacked once into a verified,
//! content-addressed cache (`progscore_oci_image`). The hardening is the
//! Docker backend's, item by item, written into each bundle's `config.json`
//! ([`bundle`]): new PID, mount, network (loopback only), IPC, UTS and
//! cgroup namespaces; a non-root user; no capabilities; `noNewPrivileges`;
//! a seccomp allowlist at least as strict as Docker's default ([`seccomp`]);
//! a read-only root shared by every container; a size-limited tmpfs at
//! /tmp; the program bind-mounted read-only from a private workspace;
//! memory with no swap, a CPU quota, a pids limit; Docker's rlimits.
//!
//! The program's limits run from the moment the runtime released it; CPU
//! time, peak memory, CPU waits and OOM kills are read from the
//! invocation's own cgroup (`progscore_container::cgroup`). Each client
//! keeps its runtimes' state in a root of its own, so a sweep after a crash
//! removes its containers and never another's.

mod apparmor;
mod bundle;
mod client;
mod image;
mod invocation;
mod options;
mod runtime;
mod seccomp;
mod sweep;

pub use bundle::container_config;
pub use client::OciClient;
pub use options::{DEFAULT_RUNTIME_TIMEOUT, OciOptions};
pub use progscore_oci_image::CachedImage;
