//! Profiles as users write them in the config (`[profiles.NAME]`), with
//! human units; [`super::RuntimeProfile::from_spec`] checks them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Backend;

/// A profile as written in the config (`[profiles.NAME]`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSpec {
    /// `docker` or `wasi`.
    pub backend: Backend,
    /// Docker: `repo@sha256:<digest>` or `sha256:<image id>`; never a tag.
    #[serde(default)]
    pub image: Option<String>,
    /// WASI: the runtime module, pinned by sha256.
    #[serde(default)]
    pub module: Option<PinnedFileSpec>,
    /// WASI: the runtime's standard library archive, pinned by sha256.
    #[serde(default)]
    pub stdlib: Option<PinnedFileSpec>,
    /// The command that runs the program; the program's path and the
    /// invocation's arguments follow it.
    pub command: Vec<String>,
    /// Docker: the OCI runtime (the engine's default when absent, `runsc`
    /// for gVisor).
    #[serde(default)]
    pub runtime: Option<String>,
    /// Docker: the non-root `UID[:GID]` the program runs as (default
    /// `65534:65534`, nobody).
    #[serde(default)]
    pub user: Option<String>,
    /// WASI: give the program a fresh writable scratch directory.
    #[serde(default)]
    pub scratch: bool,
    /// Resource limits; every field has a default.
    #[serde(default)]
    pub limits: LimitsSpec,
}

/// A file path with the sha256 it must have, as written in the config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedFileSpec {
    /// Path, relative to the config file's folder unless absolute.
    pub path: PathBuf,
    /// Expected lower-case hex sha256 of the file's bytes.
    pub sha256: String,
}

/// Limits as written in the config, with human units (`"256MiB"`, `"10s"`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsSpec {
    /// Memory cap; swap is set equal to it (no swap).
    pub memory: String,
    /// CPU quota in cores.
    pub cpus: f64,
    /// Maximum number of processes/threads.
    pub pids: u32,
    /// Wall-clock limit, counted from the program's start.
    pub timeout: String,
    /// Optional CPU-time limit (every process of the program together).
    pub cpu_time: Option<String>,
    /// Bytes kept per output stream; more is counted, not kept.
    pub output: String,
    /// Size of the writable tmpfs at /tmp.
    pub tmp: String,
    /// WASI: optional fuel (instructions, roughly) per invocation.
    pub fuel: Option<u64>,
}

impl Default for LimitsSpec {
    fn default() -> Self {
        LimitsSpec {
            memory: "256MiB".into(),
            cpus: 1.0,
            pids: 64,
            timeout: "10s".into(),
            cpu_time: None,
            output: "64KiB".into(),
            tmp: "16MiB".into(),
            fuel: None,
        }
    }
}
