//! Runtime profiles: trusted, caller-configured names for how programs run.
//!
//! A [`ProfileSpec`] is what a user writes under `[profiles.NAME]` in the TOML
//! config; [`RuntimeProfile::from_spec`] checks it once, when the config loads,
//! and turns every string into a typed value. An image given by tag is refused
//! here, so nothing later can run an artifact that was not pinned.

mod artifact;
mod build;
mod error;
mod limits;
mod spec;
mod trace;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::canonical::{canonical_json, sha256_hex};
use crate::invocation::{InvalidInvocation, Invocation};

pub use artifact::{Artifact, ImageRef, PinnedFile, is_sha256_hex};
pub use build::{BUILD_PATH, CompileStep, DEFAULT_SOURCE, SANDBOX_DIR, Stage};
pub use error::ProfileError;
pub use limits::Limits;
pub use spec::{LimitsSpec, PartialLimitsSpec, PinnedFileSpec, ProfileSpec, TimeFactorSpec};
pub use trace::{DEFAULT_SENSITIVE_PATHS, TraceSettings, TraceSettingsSpec, TraceSpec};

use artifact::resolve_pinned;
use limits::resolve_limits;

/// Which backend runs a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// A container per invocation in a Docker engine (runc, or runsc for gVisor).
    Docker,
    /// A WASI build of the runtime inside wasmtime, in the calling process.
    Wasi,
    /// A container per invocation run by an OCI runtime binary (runc, runsc)
    /// directly from an image fetched by digest: no daemon.
    Oci,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Docker => "docker",
            Backend::Wasi => "wasi",
            Backend::Oci => "oci",
        })
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
    /// The OCI runtime (Docker and OCI). Docker: `None` means the engine's
    /// default, which the backend resolves and records ([`crate::Preflight`]).
    /// OCI: the runtime binary (`runc` unless the profile names another).
    pub runtime: Option<String>,
    /// The `UID[:GID]` the program runs as (Docker and OCI; never root).
    pub user: Option<String>,
    /// WASI: whether the program gets a writable scratch directory.
    pub scratch: bool,
    /// Resource limits in force for every invocation.
    pub limits: Limits,
    /// Docker and OCI: the program's file name (`/sandbox/<source>`);
    /// `program` when `None`.
    pub source: Option<String>,
    /// Docker and OCI: how the program is built before its cases.
    pub compile: Option<CompileStep>,
    /// Docker: the engines it may run on (every engine when empty). Not part
    /// of the fingerprint: engines that run the same pinned image and
    /// runtime give the same evidence.
    pub engines: Vec<String>,
    /// Whether (and how) each invocation's behaviour is traced.
    pub trace: Option<TraceSettings>,
    /// How a program's own time limits are scaled (see
    /// [`ProfileSpec::time_factor`]).
    pub time_factor: Option<TimeFactor>,
}

/// A checked `time_factor`: a program's own time limit `t` runs as
/// `t * multiply + add_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimeFactor {
    /// The factor, at least 1.
    pub multiply: f64,
    /// Milliseconds added.
    pub add_ms: u64,
}

impl TimeFactor {
    fn from_spec(profile: &str, spec: &TimeFactorSpec) -> Result<TimeFactor, ProfileError> {
        let bad = |field: &'static str, value: String, reason: &str| ProfileError::BadLimit {
            profile: profile.to_string(),
            section: "time_factor",
            field,
            value,
            reason: reason.to_string(),
        };
        let multiply = spec.multiply.unwrap_or(1.0);
        if !(1.0..=100.0).contains(&multiply) {
            return Err(bad(
                "multiply",
                multiply.to_string(),
                "must be between 1 and 100 (a factor that shortens a limit would fail programs the problem allows)",
            ));
        }
        let add_ms = match &spec.add {
            None => 0,
            Some(text) => {
                let added = humantime::parse_duration(text).map_err(|e| {
                    bad(
                        "add",
                        text.clone(),
                        &format!("not a duration ({e}); e.g. \"1s\""),
                    )
                })?;
                u64::try_from(added.as_millis()).unwrap_or(u64::MAX)
            }
        };
        Ok(TimeFactor { multiply, add_ms })
    }

    /// `ms` scaled.
    pub fn apply(&self, ms: u64) -> u64 {
        ((ms as f64) * self.multiply).round() as u64 + self.add_ms
    }
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
            Backend::Docker | Backend::Oci => {
                for (present, field) in [
                    (spec.module.is_some(), "module"),
                    (spec.stdlib.is_some(), "stdlib"),
                    (spec.scratch, "scratch"),
                    (spec.limits.fuel.is_some(), "limits.fuel"),
                    // Without a daemon there is no engine to choose.
                    (
                        spec.backend == Backend::Oci && spec.engines.is_some(),
                        "engines",
                    ),
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
                if spec.backend == Backend::Oci && matches!(image, ImageRef::Id(_)) {
                    // An image id names an engine's local copy; without a
                    // daemon the image comes from its registry, by digest.
                    return Err(ProfileError::ImageIdWithoutEngine {
                        profile,
                        image: image.to_string(),
                    });
                }
                Artifact::DockerImage { image }
            }
            Backend::Wasi => {
                for (present, field) in [
                    (spec.image.is_some(), "image"),
                    (spec.runtime.is_some(), "runtime"),
                    (spec.user.is_some(), "user"),
                    // The WASI runtime is one interpreter module: nothing
                    // to compile with, nowhere to keep a build.
                    (spec.source.is_some(), "source"),
                    (spec.compile.is_some(), "compile"),
                    (spec.compile_limits.is_some(), "compile_limits"),
                    (spec.engines.is_some(), "engines"),
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
        let user = match spec.backend {
            Backend::Docker | Backend::Oci => {
                let user = spec.user.as_deref().unwrap_or(DEFAULT_DOCKER_USER);
                if !is_non_root_user(user) {
                    return Err(ProfileError::BadUser {
                        profile,
                        user: user.to_string(),
                    });
                }
                Some(user.to_string())
            }
            Backend::Wasi => None,
        };
        if let Some(source) = &spec.source
            && !build::is_plain_file_name(source)
        {
            return Err(ProfileError::BadSource {
                profile,
                source_name: source.clone(),
            });
        }
        let compile = match (&spec.compile, &spec.compile_limits) {
            (None, Some(_)) => {
                return Err(ProfileError::CompileLimitsWithoutCompile { profile });
            }
            (None, None) => None,
            (Some(command), limits) => {
                if command.is_empty() || command.iter().any(|word| word.is_empty()) {
                    return Err(ProfileError::BadCompile { profile });
                }
                let limits = limits
                    .clone()
                    .unwrap_or_default()
                    .over(LimitsSpec::compile_default());
                Some(CompileStep {
                    command: command.clone(),
                    limits: resolve_limits(&profile, "compile_limits", &limits)?,
                })
            }
        };
        Ok(RuntimeProfile {
            name: profile.clone(),
            backend: spec.backend,
            artifact,
            command: spec.command.clone(),
            runtime: match spec.backend {
                // No engine resolves it later: the binary is named here, so
                // the fingerprint says what ran.
                Backend::Oci => Some(spec.runtime.clone().unwrap_or_else(|| "runc".into())),
                Backend::Docker | Backend::Wasi => spec.runtime.clone(),
            },
            user,
            scratch: spec.scratch,
            limits: resolve_limits(&profile, "limits", &spec.limits)?,
            source: spec.source.clone(),
            compile,
            engines: spec.engines.clone().unwrap_or_default(),
            trace: TraceSettings::from_spec(&profile, spec.trace.as_ref())?,
            time_factor: spec
                .time_factor
                .as_ref()
                .map(|factor| TimeFactor::from_spec(&profile, factor))
                .transpose()?,
        })
    }

    /// This profile with other limits for its cases (`limits`) and its
    /// compile (`compile_limits`): what a program that brings its own limits
    /// runs under. Only the keys written change; the image, runtime, command
    /// and user stay the profile's, so the profile's preflight holds for the
    /// variant, and the variant's fingerprint says what differs.
    pub fn with_limits(
        &self,
        limits: Option<&PartialLimitsSpec>,
        compile_limits: Option<&PartialLimitsSpec>,
    ) -> Result<RuntimeProfile, ProfileError> {
        let mut variant = self.clone();
        if let Some(change) = limits {
            variant.limits = self.limits.changed(&self.name, "limits", change)?;
            // The program's own time limits, scaled for this language.
            if let Some(factor) = &self.time_factor {
                if change.timeout.is_some() {
                    variant.limits.timeout_ms = factor.apply(variant.limits.timeout_ms);
                }
                if change.cpu_time.is_some() {
                    variant.limits.cpu_time_ms =
                        variant.limits.cpu_time_ms.map(|ms| factor.apply(ms));
                }
            }
        }
        if let Some(change) = compile_limits {
            let Some(compile) = &mut variant.compile else {
                return Err(ProfileError::CompileLimitsWithoutCompile {
                    profile: self.name.clone(),
                });
            };
            compile.limits = compile
                .limits
                .changed(&self.name, "compile_limits", change)?;
        }
        Ok(variant)
    }

    /// Whether `variant` is this profile with other limits only (see
    /// [`Self::with_limits`]): same name, backend, artifact, command,
    /// runtime, user and compile command, the same CPUs.
    pub fn is_variant(&self, variant: &RuntimeProfile) -> bool {
        let mut same = variant.clone();
        same.limits = self.limits.clone();
        if let (Some(own), Some(theirs)) = (&self.compile, &mut same.compile) {
            theirs.limits = own.limits.clone();
        }
        same == *self && variant.limits.cpus == self.limits.cpus
    }

    /// This profile's fingerprint with what a backend resolved for the
    /// profile it varies (`resolved`, that profile's preflight fingerprint)
    /// filled in: the runtime, when this profile leaves it to the engine.
    pub fn fingerprint_resolved_as(&self, resolved: &serde_json::Value) -> serde_json::Value {
        let mut own = self.fingerprint_json();
        if self.runtime.is_none()
            && let Some(runtime @ serde_json::Value::String(_)) = resolved.get("runtime")
        {
            own["runtime"] = runtime.clone();
        }
        own
    }

    /// The container image, for Docker and OCI profiles.
    pub fn image(&self) -> Option<&ImageRef> {
        match &self.artifact {
            Artifact::DockerImage { image } => Some(image),
            Artifact::WasmModule { .. } => None,
        }
    }

    /// Everything that decides how a program runs under this profile, as
    /// canonical JSON: backend, artifact identity (digest/id or file hashes, not
    /// paths), command, runtime, user, limits. The name is not part of it.
    /// A runtime left to the engine's default is `null` here; the backend's
    /// [`crate::Preflight`] fills it in.
    pub fn fingerprint_json(&self) -> serde_json::Value {
        let artifact = match &self.artifact {
            Artifact::DockerImage { image } => serde_json::json!({"image": image.to_string()}),
            Artifact::WasmModule { module, stdlib } => serde_json::json!({
                "module_sha256": module.sha256,
                "stdlib_sha256": stdlib.as_ref().map(|s| s.sha256.clone()),
            }),
        };
        let mut fingerprint = serde_json::json!({
            "backend": self.backend,
            "artifact": artifact,
            "command": self.command,
            "runtime": self.runtime,
            "user": self.user,
            "scratch": self.scratch,
            "limits": self.limits,
        });
        // Present only when set, so profiles without them keep the
        // fingerprints (and the stored evidence) they always had.
        if let Some(source) = &self.source {
            fingerprint["source"] = serde_json::json!(source);
        }
        if let Some(compile) = &self.compile {
            fingerprint["compile"] = serde_json::json!(compile);
        }
        if let Some(trace) = &self.trace {
            fingerprint["trace"] = serde_json::json!(trace);
        }
        if let Some(factor) = &self.time_factor {
            fingerprint["time_factor"] = serde_json::json!(factor);
        }
        fingerprint
    }

    /// Whether `fingerprint` (as a backend resolved it, or as evidence
    /// recorded it) describes this profile: it is this profile's fingerprint,
    /// or, when the profile leaves the runtime to the engine, this profile's
    /// with some runtime filled in.
    pub fn resolves_to(&self, fingerprint: &serde_json::Value) -> bool {
        let mut own = self.fingerprint_json();
        if own == *fingerprint {
            return true;
        }
        if self.runtime.is_some() {
            return false;
        }
        match fingerprint.get("runtime") {
            Some(runtime @ serde_json::Value::String(_)) => {
                own["runtime"] = runtime.clone();
                own == *fingerprint
            }
            _ => false,
        }
    }

    /// Checks every invocation as it will be delivered after this profile's
    /// command and the program's path (see [`Invocation::check`]).
    pub fn check_invocations(&self, invocations: &[Invocation]) -> Result<(), InvalidInvocation> {
        // Room for the program's path, whichever backend places it.
        let command: Vec<String> = self
            .command
            .iter()
            .cloned()
            .chain([PROGRAM_PATH_ALLOWANCE.to_string()])
            .collect();
        for (index, invocation) in invocations.iter().enumerate() {
            invocation
                .check(&command)
                .map_err(|error| InvalidInvocation { index, error })?;
        }
        Ok(())
    }

    /// sha256 of [`Self::fingerprint_json`] in canonical form.
    pub fn fingerprint(&self) -> String {
        let json =
            canonical_json(&self.fingerprint_json()).expect("a JSON value always serializes");
        sha256_hex(json.as_bytes())
    }
}

/// Stands for the program's path when invocations are checked: longer than
/// any backend's (`/sandbox/program`, `/program/main.py`).
const PROGRAM_PATH_ALLOWANCE: &str =
    "/program/path/as/long/as/any/backend/places/it/0123456789abcdef";

/// The user Docker profiles run as unless they say otherwise: nobody.
pub const DEFAULT_DOCKER_USER: &str = "65534:65534";

/// `UID` or `UID:GID`, numeric, with a non-zero UID and GID.
fn is_non_root_user(user: &str) -> bool {
    let numeric_non_zero = |part: &str| {
        !part.is_empty()
            && part.bytes().all(|b| b.is_ascii_digit())
            && part.parse::<u32>().is_ok_and(|id| id != 0)
    };
    match user.split_once(':') {
        Some((uid, gid)) => numeric_non_zero(uid) && numeric_non_zero(gid),
        None => numeric_non_zero(user),
    }
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
    fn the_user_is_part_of_the_fingerprint_and_never_root() {
        let spec = docker_spec(DIGEST);
        let nobody = RuntimeProfile::from_spec("p", &spec, Path::new(".")).unwrap();
        assert_eq!(nobody.user.as_deref(), Some(DEFAULT_DOCKER_USER));
        let mut other = spec.clone();
        other.user = Some("1000:1000".into());
        let other = RuntimeProfile::from_spec("p", &other, Path::new(".")).unwrap();
        assert_ne!(nobody.fingerprint(), other.fingerprint());
        for root in ["0", "0:0", "1000:0", "root", "", "1000:", "-1"] {
            let mut spec = spec.clone();
            spec.user = Some(root.into());
            let err = RuntimeProfile::from_spec("p", &spec, Path::new(".")).unwrap_err();
            assert!(matches!(err, ProfileError::BadUser { .. }), "{root}: {err}");
        }
    }

    #[test]
    fn a_cpu_time_limit_is_parsed_and_fingerprinted() {
        let spec = docker_spec(DIGEST);
        let without = RuntimeProfile::from_spec("p", &spec, Path::new(".")).unwrap();
        assert_eq!(without.limits.cpu_time(), None);
        assert!(
            without.fingerprint_json()["limits"]
                .get("cpu_time_ms")
                .is_none()
        );
        let mut with = spec.clone();
        with.limits.cpu_time = Some("1500ms".into());
        let with = RuntimeProfile::from_spec("p", &with, Path::new(".")).unwrap();
        assert_eq!(with.limits.cpu_time_ms, Some(1500));
        assert_ne!(without.fingerprint(), with.fingerprint());
        let mut bad = spec;
        bad.limits.cpu_time = Some("soon".into());
        let message = RuntimeProfile::from_spec("p", &bad, Path::new("."))
            .unwrap_err()
            .to_string();
        assert!(message.contains("limits.cpu_time"), "{message}");
    }

    #[test]
    fn an_oci_profile_names_its_runtime_and_needs_a_repo_digest() {
        let spec = |extra: &str, image: &str| -> ProfileSpec {
            toml::from_str(&format!(
                "backend = \"oci\"\nimage = \"{image}\"\ncommand = [\"python3\"]\n{extra}"
            ))
            .unwrap()
        };
        let by_digest = format!("127.0.0.1:5000/python-sandbox@{DIGEST}");
        let runc = RuntimeProfile::from_spec("p", &spec("", &by_digest), Path::new(".")).unwrap();
        assert_eq!(runc.runtime.as_deref(), Some("runc"));
        assert_eq!(runc.user.as_deref(), Some(DEFAULT_DOCKER_USER));
        assert_eq!(runc.fingerprint_json()["backend"], "oci");
        let runsc = RuntimeProfile::from_spec(
            "p",
            &spec("runtime = \"runsc\"\n", &by_digest),
            Path::new("."),
        )
        .unwrap();
        assert_ne!(runc.fingerprint(), runsc.fingerprint());
        let err = RuntimeProfile::from_spec("p", &spec("", DIGEST), Path::new(".")).unwrap_err();
        assert!(
            matches!(err, ProfileError::ImageIdWithoutEngine { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("repo@sha256"), "{err}");
        let err =
            RuntimeProfile::from_spec("p", &spec("scratch = true\n", &by_digest), Path::new("."))
                .unwrap_err();
        assert!(
            matches!(
                err,
                ProfileError::FieldNotForBackend {
                    field: "scratch",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_resolved_runtime_matches_only_a_profile_that_left_it_open() {
        let spec = docker_spec(DIGEST);
        let open = RuntimeProfile::from_spec("p", &spec, Path::new(".")).unwrap();
        let mut resolved = open.fingerprint_json();
        assert!(open.resolves_to(&resolved));
        resolved["runtime"] = serde_json::json!("runc");
        assert!(open.resolves_to(&resolved));
        let mut pinned = spec.clone();
        pinned.runtime = Some("runsc".into());
        let pinned = RuntimeProfile::from_spec("p", &pinned, Path::new(".")).unwrap();
        assert!(!pinned.resolves_to(&resolved));
        resolved["limits"]["pids"] = serde_json::json!(1);
        assert!(!open.resolves_to(&resolved));
    }

    fn compiling(extra: &str) -> Result<RuntimeProfile, ProfileError> {
        let spec: ProfileSpec = toml::from_str(&format!(
            "backend = \"docker\"\nimage = \"{DIGEST}\"\ncommand = [\"/build/main\"]\n{extra}"
        ))
        .unwrap();
        RuntimeProfile::from_spec("cpp", &spec, Path::new("."))
    }

    #[test]
    fn a_compile_step_has_its_own_limits_over_compile_defaults() {
        let profile = compiling(
            "source = \"main.cpp\"\ncompile = [\"g++\", \"-o\", \"/build/main\", \"/sandbox/main.cpp\"]\n\
             [compile_limits]\ntimeout = \"30s\"\n",
        )
        .unwrap();
        let compile = profile.compile.as_ref().unwrap();
        assert_eq!(compile.limits.timeout_ms, 30_000);
        // Keys not written come from the compile defaults, not the program's.
        assert_eq!(compile.limits.memory_bytes, 1 << 30);
        assert_eq!(compile.limits.pids, 128);
        assert_eq!(profile.limits.memory_bytes, 256 << 20);
        assert_eq!(profile.program_path(), "/sandbox/main.cpp");
        assert_eq!(
            profile.argv(Stage::Compile, &["ignored".into()]),
            ["g++", "-o", "/build/main", "/sandbox/main.cpp"]
        );
        assert_eq!(
            profile.argv(Stage::Case, &["3".into()]),
            ["/build/main", "3"]
        );
        assert_eq!(profile.build_writable(Stage::Compile), Some(true));
        assert_eq!(profile.build_writable(Stage::Case), Some(false));
        assert_eq!(profile.limits_of(Stage::Compile).timeout_ms, 30_000);
    }

    #[test]
    fn the_build_folder_is_bounded_for_the_compile_only() {
        let compile = "source = \"main.cpp\"\ncompile = [\"g++\", \"-o\", \"/build/main\", \"/sandbox/main.cpp\"]\n";
        let profile = compiling(compile).unwrap();
        assert_eq!(
            profile.limits_of(Stage::Compile).build_bytes,
            Some(256 << 20),
            "the default bound"
        );
        assert_eq!(profile.limits.build_bytes, None);
        let set = compiling(&format!("{compile}[compile_limits]\nbuild = \"1MiB\"\n")).unwrap();
        assert_eq!(set.limits_of(Stage::Compile).build_bytes, Some(1 << 20));
        let misplaced = compiling(&format!("{compile}[limits]\nbuild = \"1MiB\"\n"))
            .unwrap_err()
            .to_string();
        assert!(
            misplaced.contains("limits.build") && misplaced.contains("compile_limits"),
            "{misplaced}"
        );
        let tiny = compiling(&format!("{compile}[compile_limits]\nbuild = \"1KiB\"\n"))
            .unwrap_err()
            .to_string();
        assert!(tiny.contains("compile_limits.build"), "{tiny}");
    }

    #[test]
    fn the_fingerprint_covers_source_and_compile_and_is_unchanged_without_them() {
        let plain = RuntimeProfile::from_spec("p", &docker_spec(DIGEST), Path::new(".")).unwrap();
        assert!(plain.fingerprint_json().get("compile").is_none());
        assert!(plain.fingerprint_json().get("source").is_none());
        assert_eq!(
            plain.argv(Stage::Case, &["3".into()]),
            ["python3", "-I", "/sandbox/program", "3"]
        );
        let base = "source = \"main.c\"\ncompile = [\"gcc\", \"/sandbox/main.c\"]\n";
        let a = compiling(base).unwrap();
        let other_command = compiling(&base.replace("gcc", "cc")).unwrap();
        let other_limits = compiling(&format!("{base}[compile_limits]\npids = 100\n")).unwrap();
        let other_source =
            compiling(&base.replace("source = \"main.c\"", "source = \"x.c\"")).unwrap();
        for other in [&other_command, &other_limits, &other_source] {
            assert_ne!(a.fingerprint(), other.fingerprint());
        }
    }

    #[test]
    fn bad_compile_settings_are_refused_naming_the_field() {
        for (extra, field) in [
            ("source = \"../x.c\"\n", "source"),
            ("source = \"\"\n", "source"),
            ("compile = []\n", "compile"),
            ("[compile_limits]\ntimeout = \"1s\"\n", "compile_limits"),
        ] {
            let message = compiling(extra).unwrap_err().to_string();
            assert!(message.contains(field), "{extra}: {message}");
        }
        let message = compiling("compile = [\"gcc\"]\n[compile_limits]\nmemory = \"lots\"\n")
            .unwrap_err()
            .to_string();
        assert!(message.contains("compile_limits.memory"), "{message}");
        let err = toml::from_str::<ProfileSpec>(
            "backend = \"docker\"\nimage = \"x\"\ncommand = [\"a\"]\n[compile_limits]\ntimeot = \"1s\"\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("timeot"), "{err}");
    }

    #[test]
    fn unknown_fields_are_refused_by_the_parser() {
        let err = toml::from_str::<ProfileSpec>(
            "backend = \"docker\"\nimage = \"x\"\ncommand = [\"a\"]\nimgae = \"y\"\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("imgae"), "{err}");
    }

    #[test]
    fn a_time_factor_scales_a_programs_own_time_limits_and_is_in_the_fingerprint() {
        let mut spec = docker_spec(DIGEST);
        spec.time_factor = Some(TimeFactorSpec {
            multiply: Some(3.0),
            add: Some("1s".into()),
        });
        let profile = RuntimeProfile::from_spec("python", &spec, Path::new(".")).unwrap();
        assert_eq!(
            profile.limits.timeout_ms, 10_000,
            "the profile's own: unscaled"
        );
        let problem = PartialLimitsSpec {
            timeout: Some("2s".into()),
            cpu_time: Some("1s".into()),
            ..PartialLimitsSpec::default()
        };
        let variant = profile.with_limits(Some(&problem), None).unwrap();
        assert_eq!(variant.limits.timeout_ms, 7_000, "2s x 3 + 1s");
        assert_eq!(variant.limits.cpu_time_ms, Some(4_000), "1s x 3 + 1s");
        assert_eq!(
            variant.fingerprint_json()["time_factor"],
            serde_json::json!({"multiply": 3.0, "add_ms": 1000})
        );
        // Without one, nothing changes, and the fingerprint has no such key.
        let plain =
            RuntimeProfile::from_spec("python", &docker_spec(DIGEST), Path::new(".")).unwrap();
        assert_eq!(
            plain
                .with_limits(Some(&problem), None)
                .unwrap()
                .limits
                .timeout_ms,
            2_000
        );
        assert!(plain.fingerprint_json().get("time_factor").is_none());
        // A factor that would shorten a problem's limit is refused, named.
        spec.time_factor = Some(TimeFactorSpec {
            multiply: Some(0.5),
            add: None,
        });
        let err = RuntimeProfile::from_spec("python", &spec, Path::new(".")).unwrap_err();
        assert!(err.to_string().contains("time_factor.multiply"), "{err}");
    }
}
