//! Runtime profiles: trusted, caller-configured names for how programs run.
//!
//! A [`ProfileSpec`] is what a user writes under `[profiles.NAME]` in the TOML
//! config; [`RuntimeProfile::from_spec`] checks it once, when the config loads,
//! and turns every string into a typed value. An image given by tag is refused
//! here, so nothing later can run an artifact that was not pinned.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::canonical::{canonical_json, sha256_hex};

/// Which backend runs a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// A container per invocation in a Docker engine (runc, or runsc for gVisor).
    Docker,
    /// A WASI build of the runtime inside wasmtime, in the calling process.
    Wasi,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Docker => "docker",
            Backend::Wasi => "wasi",
        })
    }
}

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
    /// Docker: the OCI runtime (`runc` when absent, `runsc` for gVisor).
    #[serde(default)]
    pub runtime: Option<String>,
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
    /// Wall-clock deadline for one whole invocation.
    pub timeout: String,
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
            output: "64KiB".into(),
            tmp: "16MiB".into(),
            fuel: None,
        }
    }
}

/// A checked, typed profile. Callers choose it by name only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuntimeProfile {
    /// The profile's name in the config.
    pub name: String,
    /// Which backend runs it.
    pub backend: Backend,
    /// The pinned artifact that runs the program.
    pub artifact: Artifact,
    /// Entrypoint and arguments; the program path and invocation args follow.
    pub command: Vec<String>,
    /// The OCI runtime (Docker only); `None` means the engine's default, runc.
    pub runtime: Option<String>,
    /// WASI: whether the program gets a writable scratch directory.
    pub scratch: bool,
    /// Resource limits in force for every invocation.
    pub limits: Limits,
}

/// The pinned thing a profile runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Artifact {
    /// A Docker image, by repo digest or image id.
    DockerImage {
        /// The reference.
        image: ImageRef,
    },
    /// A WASM runtime module and its standard library.
    WasmModule {
        /// The module.
        module: PinnedFile,
        /// The standard library archive, if the runtime needs one.
        stdlib: Option<PinnedFile>,
    },
}

/// A Docker image reference that cannot move: a repo digest or an image id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ImageRef {
    /// `repo@sha256:<64 hex>` (the repository may carry a registry host and a tag).
    Digest {
        /// Everything before `@`.
        repository: String,
        /// `sha256:<64 hex>`.
        digest: String,
    },
    /// `sha256:<64 hex>`: a local image id.
    Id(String),
}

impl ImageRef {
    /// Parses a pinned reference; `None` for anything that could move (a tag).
    pub fn parse_pinned(reference: &str) -> Option<ImageRef> {
        if let Some(hex) = reference.strip_prefix("sha256:") {
            return is_sha256_hex(hex).then(|| ImageRef::Id(reference.to_string()));
        }
        let (repository, digest) = reference.rsplit_once('@')?;
        let hex = digest.strip_prefix("sha256:")?;
        if repository.is_empty() || !is_sha256_hex(hex) {
            return None;
        }
        Some(ImageRef::Digest {
            repository: repository.to_string(),
            digest: digest.to_string(),
        })
    }
}

impl std::fmt::Display for ImageRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImageRef::Digest { repository, digest } => write!(f, "{repository}@{digest}"),
            ImageRef::Id(id) => f.write_str(id),
        }
    }
}

impl Serialize for ImageRef {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A resolved file path with the sha256 it must have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinnedFile {
    /// Absolute (or config-relative, resolved) path.
    pub path: PathBuf,
    /// Expected lower-case hex sha256.
    pub sha256: String,
}

/// Limits in force, in plain units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Memory cap in bytes (swap equal: no swap).
    pub memory_bytes: u64,
    /// CPU quota in cores.
    pub cpus: f64,
    /// Maximum processes/threads.
    pub pids: u32,
    /// Deadline for the whole invocation, in milliseconds.
    pub timeout_ms: u64,
    /// Bytes kept per output stream.
    pub output_bytes: u64,
    /// Size of the tmpfs at /tmp in bytes.
    pub tmp_bytes: u64,
    /// WASI fuel per invocation, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
}

impl Limits {
    /// The wall-clock deadline as a [`Duration`].
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

/// Why a profile was refused when the config loaded.
#[derive(Debug, Error, PartialEq)]
pub enum ProfileError {
    /// The image could move under us.
    #[error(
        "profile `{profile}`: image `{image}` is not pinned; give `repo@sha256:<64 hex digest>` or `sha256:<64 hex image id>`, never a tag"
    )]
    UnpinnedImage {
        /// Profile name.
        profile: String,
        /// What was given.
        image: String,
    },
    /// A field the backend needs is absent.
    #[error("profile `{profile}`: backend `{backend}` needs field `{field}`")]
    MissingField {
        /// Profile name.
        profile: String,
        /// Backend.
        backend: Backend,
        /// The missing field.
        field: &'static str,
    },
    /// A field that makes no sense for this backend.
    #[error("profile `{profile}`: field `{field}` does not apply to backend `{backend}`")]
    FieldNotForBackend {
        /// Profile name.
        profile: String,
        /// Backend.
        backend: Backend,
        /// The field.
        field: &'static str,
    },
    /// The command is empty or has an empty word.
    #[error("profile `{profile}`: `command` must be a non-empty list of non-empty strings")]
    BadCommand {
        /// Profile name.
        profile: String,
    },
    /// A limit could not be understood or is out of range.
    #[error("profile `{profile}`: limits.{field} = {value:?}: {reason}")]
    BadLimit {
        /// Profile name.
        profile: String,
        /// Field under `limits`.
        field: &'static str,
        /// What was given.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// A pinned file's sha256 is not 64 lower-case hex digits.
    #[error("profile `{profile}`: {field}.sha256 = {value:?} is not 64 lower-case hex digits")]
    BadSha256 {
        /// Profile name.
        profile: String,
        /// Which file.
        field: &'static str,
        /// What was given.
        value: String,
    },
    /// The runtime name is not a plain word.
    #[error("profile `{profile}`: runtime {runtime:?} is not a valid runtime name")]
    BadRuntime {
        /// Profile name.
        profile: String,
        /// What was given.
        runtime: String,
    },
}

impl RuntimeProfile {
    /// Checks a spec and resolves it. Relative paths are resolved against `base_dir`
    /// (the folder of the config file).
    pub fn from_spec(
        name: &str,
        spec: &ProfileSpec,
        base_dir: &Path,
    ) -> Result<RuntimeProfile, ProfileError> {
        let profile = name.to_string();
        if spec.command.is_empty() || spec.command.iter().any(|word| word.is_empty()) {
            return Err(ProfileError::BadCommand { profile });
        }
        let artifact = match spec.backend {
            Backend::Docker => {
                for (present, field) in [
                    (spec.module.is_some(), "module"),
                    (spec.stdlib.is_some(), "stdlib"),
                    (spec.scratch, "scratch"),
                    (spec.limits.fuel.is_some(), "limits.fuel"),
                ] {
                    if present {
                        return Err(ProfileError::FieldNotForBackend {
                            profile,
                            backend: spec.backend,
                            field,
                        });
                    }
                }
                let image = spec.image.as_deref().ok_or(ProfileError::MissingField {
                    profile: profile.clone(),
                    backend: spec.backend,
                    field: "image",
                })?;
                let image =
                    ImageRef::parse_pinned(image).ok_or_else(|| ProfileError::UnpinnedImage {
                        profile: profile.clone(),
                        image: image.to_string(),
                    })?;
                Artifact::DockerImage { image }
            }
            Backend::Wasi => {
                for (present, field) in [
                    (spec.image.is_some(), "image"),
                    (spec.runtime.is_some(), "runtime"),
                ] {
                    if present {
                        return Err(ProfileError::FieldNotForBackend {
                            profile,
                            backend: spec.backend,
                            field,
                        });
                    }
                }
                let module = spec.module.as_ref().ok_or(ProfileError::MissingField {
                    profile: profile.clone(),
                    backend: spec.backend,
                    field: "module",
                })?;
                Artifact::WasmModule {
                    module: resolve_pinned(&profile, "module", module, base_dir)?,
                    stdlib: spec
                        .stdlib
                        .as_ref()
                        .map(|stdlib| resolve_pinned(&profile, "stdlib", stdlib, base_dir))
                        .transpose()?,
                }
            }
        };
        if let Some(runtime) = &spec.runtime {
            let plain = !runtime.is_empty()
                && runtime
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !plain {
                return Err(ProfileError::BadRuntime {
                    profile,
                    runtime: runtime.clone(),
                });
            }
        }
        Ok(RuntimeProfile {
            name: profile.clone(),
            backend: spec.backend,
            artifact,
            command: spec.command.clone(),
            runtime: spec.runtime.clone(),
            scratch: spec.scratch,
            limits: resolve_limits(&profile, &spec.limits)?,
        })
    }

    /// The Docker image, for Docker profiles.
    pub fn image(&self) -> Option<&ImageRef> {
        match &self.artifact {
            Artifact::DockerImage { image } => Some(image),
            Artifact::WasmModule { .. } => None,
        }
    }

    /// Everything that decides how a program runs under this profile, as
    /// canonical JSON: backend, artifact identity (digest/id or file hashes, not
    /// paths), command, runtime, limits. The name is not part of it.
    pub fn fingerprint_json(&self) -> serde_json::Value {
        let artifact = match &self.artifact {
            Artifact::DockerImage { image } => serde_json::json!({"image": image.to_string()}),
            Artifact::WasmModule { module, stdlib } => serde_json::json!({
                "module_sha256": module.sha256,
                "stdlib_sha256": stdlib.as_ref().map(|s| s.sha256.clone()),
            }),
        };
        serde_json::json!({
            "backend": self.backend,
            "artifact": artifact,
            "command": self.command,
            "runtime": self.runtime,
            "scratch": self.scratch,
            "limits": self.limits,
        })
    }

    /// sha256 of [`Self::fingerprint_json`] in canonical form.
    pub fn fingerprint(&self) -> String {
        let json =
            canonical_json(&self.fingerprint_json()).expect("a JSON value always serializes");
        sha256_hex(json.as_bytes())
    }
}

/// Whether `hex` is a sha256 as progscore pins them: 64 lower-case hex digits.
pub fn is_sha256_hex(hex: &str) -> bool {
    hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn resolve_pinned(
    profile: &str,
    field: &'static str,
    spec: &PinnedFileSpec,
    base_dir: &Path,
) -> Result<PinnedFile, ProfileError> {
    if !is_sha256_hex(&spec.sha256) {
        return Err(ProfileError::BadSha256 {
            profile: profile.to_string(),
            field,
            value: spec.sha256.clone(),
        });
    }
    let path = if spec.path.is_absolute() {
        spec.path.clone()
    } else {
        base_dir.join(&spec.path)
    };
    Ok(PinnedFile {
        path,
        sha256: spec.sha256.clone(),
    })
}

fn resolve_limits(profile: &str, spec: &LimitsSpec) -> Result<Limits, ProfileError> {
    let bad = |field: &'static str, value: String, reason: String| ProfileError::BadLimit {
        profile: profile.to_string(),
        field,
        value,
        reason,
    };
    let size = |field: &'static str, text: &str, min: u64| -> Result<u64, ProfileError> {
        let bytes = text
            .parse::<bytesize::ByteSize>()
            .map_err(|e| {
                bad(
                    field,
                    text.to_string(),
                    format!("not a size ({e}); e.g. \"256MiB\""),
                )
            })?
            .as_u64();
        if bytes < min {
            return Err(bad(
                field,
                text.to_string(),
                format!("must be at least {min} bytes"),
            ));
        }
        Ok(bytes)
    };
    let memory_bytes = size("memory", &spec.memory, 6 * 1024 * 1024)?;
    let output_bytes = size("output", &spec.output, 1)?;
    let tmp_bytes = size("tmp", &spec.tmp, 4096)?;
    let timeout = humantime::parse_duration(&spec.timeout).map_err(|e| {
        bad(
            "timeout",
            spec.timeout.clone(),
            format!("not a duration ({e}); e.g. \"10s\""),
        )
    })?;
    if timeout < Duration::from_millis(100) || timeout > Duration::from_secs(3600) {
        return Err(bad(
            "timeout",
            spec.timeout.clone(),
            "must be between 100ms and 1h".into(),
        ));
    }
    if !(spec.cpus.is_finite() && spec.cpus >= 0.01 && spec.cpus <= 256.0) {
        return Err(bad(
            "cpus",
            spec.cpus.to_string(),
            "must be between 0.01 and 256".into(),
        ));
    }
    if spec.pids < 1 {
        return Err(bad(
            "pids",
            spec.pids.to_string(),
            "must be at least 1".into(),
        ));
    }
    Ok(Limits {
        memory_bytes,
        cpus: spec.cpus,
        pids: spec.pids,
        timeout_ms: timeout.as_millis() as u64,
        output_bytes,
        tmp_bytes,
        fuel: spec.fuel,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:04523e07d3e8eff083d854274411456f0a069de00b901a826c97a9428f7bbac4";

    fn docker_spec(image: &str) -> ProfileSpec {
        toml::from_str(&format!(
            "backend = \"docker\"\nimage = \"{image}\"\ncommand = [\"python3\", \"-I\"]\n"
        ))
        .unwrap()
    }

    #[test]
    fn a_tag_is_refused_naming_the_profile() {
        let err = RuntimeProfile::from_spec("python", &docker_spec("python:3.12"), Path::new("."))
            .unwrap_err();
        assert!(matches!(err, ProfileError::UnpinnedImage { .. }));
        let message = err.to_string();
        assert!(
            message.contains("`python`") && message.contains("python:3.12"),
            "{message}"
        );
    }

    #[test]
    fn digests_and_ids_are_accepted() {
        let by_digest = format!("127.0.0.1:5000/python-sandbox@{DIGEST}");
        let profile =
            RuntimeProfile::from_spec("p", &docker_spec(&by_digest), Path::new(".")).unwrap();
        assert_eq!(profile.image().unwrap().to_string(), by_digest);
        let profile = RuntimeProfile::from_spec("p", &docker_spec(DIGEST), Path::new(".")).unwrap();
        assert!(matches!(profile.image(), Some(ImageRef::Id(_))));
        // A short or upper-case digest is not a pin.
        for bad in ["repo@sha256:abc", "sha256:ABC", "repo@sha512:00"] {
            assert!(RuntimeProfile::from_spec("p", &docker_spec(bad), Path::new(".")).is_err());
        }
    }

    #[test]
    fn limits_parse_human_units_and_name_bad_fields() {
        let mut spec = docker_spec(DIGEST);
        spec.limits.memory = "128MiB".into();
        spec.limits.timeout = "2500ms".into();
        let profile = RuntimeProfile::from_spec("p", &spec, Path::new(".")).unwrap();
        assert_eq!(profile.limits.memory_bytes, 128 * 1024 * 1024);
        assert_eq!(profile.limits.timeout_ms, 2500);
        spec.limits.output = "lots".into();
        let message = RuntimeProfile::from_spec("p", &spec, Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("limits.output") && message.contains("lots"),
            "{message}"
        );
    }

    #[test]
    fn fingerprint_changes_with_limits_but_not_name() {
        let spec = docker_spec(DIGEST);
        let a = RuntimeProfile::from_spec("a", &spec, Path::new(".")).unwrap();
        let b = RuntimeProfile::from_spec("b", &spec, Path::new(".")).unwrap();
        assert_eq!(a.fingerprint(), b.fingerprint());
        let mut spec = spec;
        spec.limits.pids = 65;
        let c = RuntimeProfile::from_spec("a", &spec, Path::new(".")).unwrap();
        assert_ne!(a.fingerprint(), c.fingerprint());
    }

    #[test]
    fn unknown_fields_are_refused_by_the_parser() {
        let err = toml::from_str::<ProfileSpec>(
            "backend = \"docker\"\nimage = \"x\"\ncommand = [\"a\"]\nimgae = \"y\"\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("imgae"), "{err}");
    }
}
