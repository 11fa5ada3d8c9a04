//! Resource limits: human units in, plain units out.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{LimitsSpec, PartialLimitsSpec, ProfileError};

/// Limits in force, in plain units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Memory cap in bytes (swap equal: no swap).
    pub memory_bytes: u64,
    /// CPU quota in cores.
    pub cpus: f64,
    /// Maximum processes/threads.
    pub pids: u32,
    /// Wall-clock limit in milliseconds, counted from the program's start
    /// (engine work before and after does not count).
    pub timeout_ms: u64,
    /// CPU-time limit in milliseconds, if any: every process of the program
    /// together. Exceeding it is a timeout whatever the machine's load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_time_ms: Option<u64>,
    /// Bytes kept per output stream.
    pub output_bytes: u64,
    /// Size of the tmpfs at /tmp in bytes.
    pub tmp_bytes: u64,
    /// WASI fuel per invocation, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// The compile's: the most the build folder may hold, in bytes (its
    /// files' bytes plus 512 per entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_bytes: Option<u64>,
}

impl Limits {
    /// The wall-clock limit as a [`Duration`].
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// The CPU-time limit as a [`Duration`], if any.
    pub fn cpu_time(&self) -> Option<Duration> {
        self.cpu_time_ms.map(Duration::from_millis)
    }
}

/// Checks `spec`, written under `section` (`limits`, `compile_limits`).
pub(super) fn resolve_limits(
    profile: &str,
    section: &'static str,
    spec: &LimitsSpec,
) -> Result<Limits, ProfileError> {
    let bad = |field: &'static str, value: String, reason: String| ProfileError::BadLimit {
        profile: profile.to_string(),
        section,
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
    let build_bytes = match (&spec.build, section) {
        (None, _) => None,
        (Some(text), "compile_limits") => Some(size("build", text, 4096)?),
        (Some(text), _) => {
            return Err(bad(
                "build",
                text.clone(),
                "bounds the compile's build folder: set it under compile_limits".into(),
            ));
        }
    };
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
    let cpu_time = match &spec.cpu_time {
        None => None,
        Some(text) => {
            let cpu_time = humantime::parse_duration(text).map_err(|e| {
                bad(
                    "cpu_time",
                    text.clone(),
                    format!("not a duration ({e}); e.g. \"2s\""),
                )
            })?;
            if cpu_time < Duration::from_millis(10) || cpu_time > Duration::from_secs(3600) {
                return Err(bad(
                    "cpu_time",
                    text.clone(),
                    "must be between 10ms and 1h".into(),
                ));
            }
            Some(cpu_time.as_millis() as u64)
        }
    };
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
        cpu_time_ms: cpu_time,
        output_bytes,
        tmp_bytes,
        fuel: spec.fuel,
        build_bytes,
    })
}

impl Limits {
    /// These limits written as a spec (sizes in bytes, times in
    /// milliseconds), so that a [`PartialLimitsSpec`] can be laid over them.
    pub fn to_spec(&self) -> LimitsSpec {
        LimitsSpec {
            memory: format!("{}B", self.memory_bytes),
            cpus: self.cpus,
            pids: self.pids,
            timeout: format!("{}ms", self.timeout_ms),
            cpu_time: self.cpu_time_ms.map(|ms| format!("{ms}ms")),
            output: format!("{}B", self.output_bytes),
            tmp: format!("{}B", self.tmp_bytes),
            build: self.build_bytes.map(|bytes| format!("{bytes}B")),
            fuel: self.fuel,
        }
    }

    /// These limits with the keys `change` writes replaced, checked as a
    /// profile's are (`section`: `limits` or `compile_limits`, for errors).
    /// `cpus` is refused: the schedule counts programs against the CPUs by
    /// the profile's own value, so a request cannot change it.
    pub fn changed(
        &self,
        profile: &str,
        section: &'static str,
        change: &PartialLimitsSpec,
    ) -> Result<Limits, ProfileError> {
        if let Some(cpus) = change.cpus
            && cpus != self.cpus
        {
            return Err(ProfileError::BadLimit {
                profile: profile.to_string(),
                section,
                field: "cpus",
                value: cpus.to_string(),
                reason: format!(
                    "is the profile's ({}) and cannot be changed per program: \
                     the schedule counts programs against the CPUs by it",
                    self.cpus
                ),
            });
        }
        resolve_limits(profile, section, &change.clone().over(self.to_spec()))
    }
}
