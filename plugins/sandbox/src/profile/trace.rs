//! A profile's tracing setting (`trace`): whether the sandbox records what the
//! program tried to do, and which reads count as sensitive.

use serde::{Deserialize, Serialize};

use super::ProfileError;
use crate::behaviour::PathPattern;

/// Reads of these paths are recorded (`fs.open` with `access: read`) when a
/// profile does not name its own list; every write is recorded anyway.
pub const DEFAULT_SENSITIVE_PATHS: [&str; 7] = [
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/sudoers.d/**",
    "/root/**",
    "/proc/*/environ",
    "/proc/*/mem",
];

/// `trace` as written: `trace = true`, or a table with its settings.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum TraceSpec {
    /// `trace = true` (default settings) or `false` (no trace).
    On(bool),
    /// `[profiles.NAME.trace]`.
    Settings(TraceSettingsSpec),
}

/// `[profiles.NAME.trace]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSettingsSpec {
    /// Absolute path patterns (`*` within a name, `**` across folders) whose
    /// reads are recorded; [`DEFAULT_SENSITIVE_PATHS`] when absent.
    #[serde(default)]
    pub sensitive: Option<Vec<String>>,
}

/// A checked tracing setting; part of the profile's fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceSettings {
    /// Path patterns whose reads are recorded.
    pub sensitive: Vec<String>,
}

impl TraceSettings {
    /// The sensitive paths as patterns (checked when the profile loaded).
    pub fn sensitive_patterns(&self) -> Vec<PathPattern> {
        self.sensitive
            .iter()
            .filter_map(|pattern| PathPattern::new(pattern).ok())
            .collect()
    }

    /// Checks the written setting; `None` when tracing is off.
    pub(super) fn from_spec(
        profile: &str,
        spec: Option<&TraceSpec>,
    ) -> Result<Option<TraceSettings>, ProfileError> {
        let sensitive = match spec {
            None | Some(TraceSpec::On(false)) => return Ok(None),
            Some(TraceSpec::On(true))
            | Some(TraceSpec::Settings(TraceSettingsSpec { sensitive: None })) => {
                DEFAULT_SENSITIVE_PATHS.map(String::from).to_vec()
            }
            Some(TraceSpec::Settings(TraceSettingsSpec {
                sensitive: Some(patterns),
            })) => patterns.clone(),
        };
        for pattern in &sensitive {
            PathPattern::new(pattern).map_err(|why| ProfileError::BadTracePattern {
                profile: profile.to_string(),
                pattern: pattern.clone(),
                why,
            })?;
        }
        Ok(Some(TraceSettings { sensitive }))
    }
}
