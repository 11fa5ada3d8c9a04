//! Profiles as users write them in the config (`[profiles.NAME]`), with
//! human units; [`super::RuntimeProfile::from_spec`] checks them.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Backend;
use super::trace::TraceSpec;

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
    /// Docker and OCI: the program's file name inside the sandbox
    /// (`/sandbox/<source>`); `program` when absent.
    #[serde(default)]
    pub source: Option<String>,
    /// Docker and OCI: how to build the program, run verbatim once per call
    /// before its cases, with `/build` writable; the cases then run `command`
    /// with `/build` read-only and without the program's path appended.
    #[serde(default)]
    pub compile: Option<Vec<String>>,
    /// The compile's own limits (same keys as `limits`); defaults to
    /// [`LimitsSpec::compile_default`].
    #[serde(default)]
    pub compile_limits: Option<PartialLimitsSpec>,
    /// Docker: the configured engines (`[engines.NAME]`) it may run on;
    /// every engine that passes its preflight when absent.
    #[serde(default)]
    pub engines: Option<Vec<String>>,
    /// Record what the program tries to do (`trace = true`, or a table with
    /// `sensitive` path patterns): each invocation's behaviour, traced by
    /// the sandbox where the backend can, else `not_traced` with the reason.
    #[serde(default)]
    pub trace: Option<TraceSpec>,
    /// How a program's own time limits (an item's `limits.timeout` and
    /// `limits.cpu_time`) are scaled under this profile: `multiply` then
    /// `add`, as judges give slower languages more time for one problem
    /// (`{ multiply = 3, add = "1s" }`). The profile's own limits are not
    /// scaled.
    #[serde(default)]
    pub time_factor: Option<TimeFactorSpec>,
}

/// `time_factor = { multiply = K, add = "C" }` (see
/// [`ProfileSpec::time_factor`]).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TimeFactorSpec {
    /// The factor (1 when absent).
    #[serde(default)]
    pub multiply: Option<f64>,
    /// Added after multiplying (`"500ms"`; none when absent).
    #[serde(default)]
    pub add: Option<String>,
}

/// Limits of which only some keys are written; the rest come from a base
/// ([`PartialLimitsSpec::over`]).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PartialLimitsSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
}

impl PartialLimitsSpec {
    /// The written keys, the rest from `base`.
    pub fn over(self, base: LimitsSpec) -> LimitsSpec {
        LimitsSpec {
            memory: self.memory.unwrap_or(base.memory),
            cpus: self.cpus.unwrap_or(base.cpus),
            pids: self.pids.unwrap_or(base.pids),
            timeout: self.timeout.unwrap_or(base.timeout),
            cpu_time: self.cpu_time.or(base.cpu_time),
            output: self.output.unwrap_or(base.output),
            tmp: self.tmp.unwrap_or(base.tmp),
            build: self.build.or(base.build),
            fuel: base.fuel,
        }
    }
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
    /// The compile only (`compile_limits`): the most the build folder may
    /// hold, its files' bytes plus 512 per entry (about its size as a tar).
    /// A build over it is the program's `compile_error`.
    pub build: Option<String>,
    /// WASI: optional fuel (instructions, roughly) per invocation.
    pub fuel: Option<u64>,
}

/// The build folder's bound unless `compile_limits.build` says otherwise.
pub const DEFAULT_BUILD: &str = "256MiB";

impl LimitsSpec {
    /// What a compile gets unless the profile says otherwise: compilers want
    /// more memory, time, processes and scratch space than a small program.
    pub fn compile_default() -> LimitsSpec {
        LimitsSpec {
            memory: "1GiB".into(),
            cpus: 1.0,
            pids: 128,
            timeout: "60s".into(),
            cpu_time: None,
            output: "64KiB".into(),
            tmp: "256MiB".into(),
            build: Some(DEFAULT_BUILD.into()),
            fuel: None,
        }
    }
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
            build: None,
            fuel: None,
        }
    }
}
