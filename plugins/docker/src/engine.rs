//! What the engine can enforce, and whether a profile can run on it.

use bollard::Docker;
use bollard::errors::Error as BollardError;
use bollard::models::SystemInfo;
use progscore_sandbox::{RuntimeProfile, SandboxError};

/// progscore's runsc for the engine (`scripts/engine/runsc-traced`,
/// installed by `scripts/setup.sh`): runsc itself, plus the trace of a
/// container whose workspace holds a trace folder.
pub(crate) const TRACED_RUNSC: &str = "/usr/local/lib/progscore/runsc-traced";

/// Facts about the engine, read once per client.
#[derive(Debug, Clone)]
pub(crate) struct EngineFacts {
    /// "Docker Engine 20.10.24 (API 1.41)".
    pub description: String,
    /// Registered OCI runtimes.
    pub runtimes: Vec<String>,
    /// The binary each registered runtime runs, where the engine says.
    pub runtime_paths: std::collections::BTreeMap<String, String>,
    /// The runtime used when a profile names none.
    pub default_runtime: String,
    /// Limits the engine says it cannot enforce.
    pub unsupported: Vec<&'static str>,
    /// CPUs the engine's host has.
    pub cpus: usize,
    /// `cgroupfs` or `systemd`, as the engine reports it.
    pub cgroup_driver: Option<String>,
    /// `1` or `2`, as the engine reports it.
    pub cgroup_version: Option<String>,
    /// Whether the engine remaps container users into a subordinate range
    /// of the host's (`userns-remap`: its security options list
    /// `name=userns`).
    pub userns_remap: bool,
}

/// The image a profile pins, as the engine knows it.
#[derive(Debug, Clone)]
pub(crate) struct ImageFacts {
    pub image_id: String,
    pub repo_digests: Vec<String>,
}

impl EngineFacts {
    pub(crate) async fn read(docker: &Docker) -> Result<EngineFacts, SandboxError> {
        let info = docker.info().await.map_err(unavailable)?;
        let version = docker.version().await.map_err(unavailable)?;
        Ok(EngineFacts::from_info(
            &info,
            version.version.as_deref().unwrap_or("unknown"),
            version.api_version.as_deref().unwrap_or("unknown"),
        ))
    }

    fn from_info(info: &SystemInfo, version: &str, api: &str) -> EngineFacts {
        let mut unsupported = Vec::new();
        // An absent field means the engine did not say it can: refuse rather than assume.
        for (supported, what) in [
            (info.memory_limit, "memory limits"),
            (info.swap_limit, "swap limits"),
            (info.cpu_cfs_quota, "CPU quotas"),
            (info.pids_limit, "pids limits"),
        ] {
            if supported != Some(true) {
                unsupported.push(what);
            }
        }
        let mut runtimes: Vec<String> = info
            .runtimes
            .as_ref()
            .map(|r| r.keys().cloned().collect())
            .unwrap_or_default();
        runtimes.sort();
        let runtime_paths = info
            .runtimes
            .iter()
            .flatten()
            .filter_map(|(name, runtime)| Some((name.clone(), runtime.path.clone()?)))
            .collect();
        EngineFacts {
            description: format!("Docker Engine {version} (API {api})"),
            runtimes,
            runtime_paths,
            default_runtime: info
                .default_runtime
                .clone()
                .unwrap_or_else(|| "runc".into()),
            unsupported,
            cpus: info
                .ncpu
                .and_then(|n| usize::try_from(n).ok())
                .filter(|&n| n > 0)
                .unwrap_or(1),
            cgroup_driver: info.cgroup_driver.as_ref().map(|d| d.to_string()),
            cgroup_version: info.cgroup_version.as_ref().map(|v| v.to_string()),
            userns_remap: info
                .security_options
                .iter()
                .flatten()
                .any(|option| option.split(',').any(|field| field == "name=userns")),
        }
    }

    /// Whether this engine's `runtime` streams a behaviour trace to this
    /// host: its `runsc` is progscore's wrapper ([`TRACED_RUNSC`]) and the
    /// engine runs here (`local`: the trace's socket is in the call's
    /// workspace). Else why not.
    pub(crate) fn can_trace(&self, runtime: &str, local: bool) -> Result<(), String> {
        if !local {
            return Err(
                "the engine is on another host: gVisor's trace reaches only a local engine's caller"
                    .into(),
            );
        }
        match self.runtime_paths.get(runtime) {
            Some(path) if path == TRACED_RUNSC => Ok(()),
            path => Err(format!(
                "the engine's runtime `{runtime}` runs {}, not progscore's tracing wrapper {TRACED_RUNSC} (scripts/setup.sh registers it)",
                path.map(String::as_str).unwrap_or("an unknown binary")
            )),
        }
    }

    /// Refuses a profile with a compile step on an engine that remaps
    /// users. Its build folder belongs to the profile's user as the host
    /// numbers it (uid 65534 by default); under `userns-remap` the
    /// container's user is another host uid (its subordinate range's start
    /// plus 65534), which cannot write it, so every compile would fail as if
    /// the program did not compile. Preparing the folder for the remapped
    /// uid would need the remap user's ranges, which the engine does not
    /// report and which only the engine's own host could tell: refused, with
    /// the way out.
    pub(crate) fn require_build_owner(&self, profile: &RuntimeProfile) -> Result<(), SandboxError> {
        if profile.compile.is_none() || !self.userns_remap {
            return Ok(());
        }
        let (uid, gid) = profile.user_ids();
        Err(SandboxError::EngineUnsupported {
            missing: format!(
                "a build folder profile `{}`'s compile step can write",
                profile.name
            ),
            hint: format!(
                "the engine remaps container users (userns-remap), so the compile's user \
                 {uid}:{gid} is another uid on the host than the one owning the build folder, \
                 and every compile would fail as the program's compile error; run compiling \
                 profiles on an engine without userns-remap"
            ),
        })
    }

    /// Refuses an engine that cannot enforce every limit.
    pub(crate) fn require_limits(&self) -> Result<(), SandboxError> {
        if self.unsupported.is_empty() {
            return Ok(());
        }
        Err(SandboxError::EngineUnsupported {
            missing: self.unsupported.join(", "),
            hint: "the engine reports no kernel support (cgroup controllers missing or swap \
                   accounting off); on cgroup v1 boot with `swapaccount=1`, or use a host with \
                   cgroup v2 and the memory, cpu and pids controllers enabled"
                .into(),
        })
    }

    /// Refuses a profile whose runtime the engine does not list.
    pub(crate) fn require_runtime(&self, profile: &RuntimeProfile) -> Result<(), SandboxError> {
        let Some(runtime) = &profile.runtime else {
            return Ok(());
        };
        if self.runtimes.iter().any(|r| r == runtime) {
            return Ok(());
        }
        Err(SandboxError::RuntimeMissing {
            profile: profile.name.clone(),
            runtime: runtime.clone(),
            available: self.runtimes.join(", "),
            hint: format!(
                "register it in /etc/docker/daemon.json under \"runtimes\" (for gVisor: \
                 {{\"runsc\": {{\"path\": \"/usr/bin/runsc\", \"runtimeArgs\": [\"--network=none\"]}}}}) \
                 and reload dockerd, or run scripts/setup.sh; `{runtime}` must be installed"
            ),
        })
    }

    /// The runtime a profile will actually use.
    pub(crate) fn runtime_for(&self, profile: &RuntimeProfile) -> String {
        profile
            .runtime
            .clone()
            .unwrap_or_else(|| self.default_runtime.clone())
    }
}

/// Checks that the profile's image is present (never pulled) and declares no volumes.
pub(crate) async fn check_image(
    docker: &Docker,
    profile: &RuntimeProfile,
) -> Result<ImageFacts, SandboxError> {
    let Some(image) = profile.image() else {
        return Err(SandboxError::WrongBackend {
            profile: profile.name.clone(),
            backend: profile.backend.to_string(),
        });
    };
    let reference = image.to_string();
    let inspect = match docker.inspect_image(&reference).await {
        Ok(inspect) => inspect,
        Err(BollardError::DockerResponseServerError {
            status_code: 404, ..
        }) => {
            return Err(SandboxError::ArtifactMissing {
                profile: profile.name.clone(),
                artifact: format!("image {reference}"),
                hint: "progscore never pulls images: load or push it into this engine first \
                       (scripts/setup.sh builds the default python image)"
                    .into(),
            });
        }
        Err(err) => return Err(unavailable(err)),
    };
    let volumes = inspect.config.and_then(|c| c.volumes).unwrap_or_default();
    if !volumes.is_empty() {
        return Err(SandboxError::ArtifactRefused {
            profile: profile.name.clone(),
            artifact: format!("image {reference}"),
            reason: format!(
                "it declares VOLUME {} (anonymous volumes would be writable and outlive \
                 the container); rebuild it without VOLUME instructions",
                volumes.join(", ")
            ),
        });
    }
    Ok(ImageFacts {
        image_id: inspect.id.unwrap_or_default(),
        repo_digests: inspect.repo_digests.unwrap_or_default(),
    })
}

/// An engine call that failed: the engine is unreachable or misbehaving.
pub(crate) fn unavailable(err: BollardError) -> SandboxError {
    SandboxError::EngineUnavailable {
        message: describe(&err),
    }
}

/// A readable message for an engine error, without bollard's debug noise,
/// ending with its root cause (`connection refused`).
pub(crate) fn describe(err: &BollardError) -> String {
    match err {
        BollardError::DockerResponseServerError {
            status_code,
            message,
        } => format!("engine answered {status_code}: {message}"),
        other => match root_cause(other) {
            Some(cause) => format!("{other}: {cause}"),
            None => other.to_string(),
        },
    }
}

/// Why the engine could not be reached, in plain words (`connection refused`,
/// `no such socket`).
pub(crate) fn cause(err: &BollardError) -> String {
    match err {
        BollardError::SocketNotFoundError(_) => "no such socket".into(),
        other => root_cause(other).unwrap_or_else(|| describe(other)),
    }
}

/// Whether the request failed below HTTP (the engine may be gone), rather
/// than being answered.
pub(crate) fn is_transport_error(err: &BollardError) -> bool {
    matches!(
        err,
        BollardError::HyperLegacyError { .. }
            | BollardError::HyperResponseError { .. }
            | BollardError::IOError { .. }
            | BollardError::RequestTimeoutError
            | BollardError::SocketNotFoundError(_)
    )
}

/// The innermost cause of an error, in plain words for the common socket errors.
fn root_cause(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut deepest = None;
    let mut current = err.source();
    while let Some(cause) = current {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return Some(match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
                std::io::ErrorKind::NotFound => "no such socket".into(),
                std::io::ErrorKind::PermissionDenied => "permission denied".into(),
                std::io::ErrorKind::ConnectionReset => "connection reset".into(),
                _ => io.to_string(),
            });
        }
        deepest = Some(cause.to_string());
        current = cause.source();
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(security_options: &[&str]) -> EngineFacts {
        let info = SystemInfo {
            memory_limit: Some(true),
            swap_limit: Some(true),
            cpu_cfs_quota: Some(true),
            pids_limit: Some(true),
            security_options: Some(security_options.iter().map(|o| o.to_string()).collect()),
            ..SystemInfo::default()
        };
        EngineFacts::from_info(&info, "20.10.24", "1.41")
    }

    fn profile(compile: bool) -> RuntimeProfile {
        let mut spec = serde_json::json!({
            "backend": "docker",
            "image": format!("sha256:{}", "a".repeat(64)),
            "command": ["/build/main"],
        });
        if compile {
            spec["source"] = "main.c".into();
            spec["compile"] = serde_json::json!(["gcc", "-o", "/build/main", "/sandbox/main.c"]);
        }
        let spec: progscore_sandbox::ProfileSpec = serde_json::from_value(spec).unwrap();
        RuntimeProfile::from_spec("c", &spec, std::path::Path::new(".")).unwrap()
    }

    #[test]
    fn an_engine_remapping_users_refuses_compiling_profiles_with_the_reason() {
        // As Docker 20.10 reports an engine started with --userns-remap=default.
        let remapped = facts(&["name=seccomp,profile=default", "name=userns"]);
        assert!(remapped.userns_remap);
        let err = remapped.require_build_owner(&profile(true)).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("profile `c`'s compile step") && message.contains("userns-remap"),
            "{message}"
        );
        // Nothing to build: nothing to refuse.
        assert!(remapped.require_build_owner(&profile(false)).is_ok());
        // An engine without it builds as before.
        let plain = facts(&["name=seccomp,profile=default", "name=apparmor"]);
        assert!(!plain.userns_remap);
        assert!(plain.require_build_owner(&profile(true)).is_ok());
    }
}
