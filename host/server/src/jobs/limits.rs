//! A request's own limits: what each dialect's limit fields become (a
//! [`RequestLimits`]: the keys of a profile's `limits` and `compile_limits`
//! in the config's own units), and their check before anything runs or is
//! stored: each key within `[serve]`'s maxima, the profile's rules (the
//! variant [`RuntimeProfile::with_limits`] builds), a bad one named by the
//! dialect's own field ([`LimitPart`]).
//!
//! The limits go on the job's expectation (`program_behaves.limits`), so
//! they are part of the attempt: an identical request with identical limits
//! reuses the stored evidence, one with other limits runs again.

use std::time::Duration;

use crate::settings::RequestLimitMaxima;
use progscore_sandbox::{PartialLimitsSpec, ProfileError, RuntimeProfile};

use crate::http::error::ApiError;

/// The longest time a dialect's value is turned into (about 31 years): a
/// larger one is refused by the maxima all the same, and stays a number a
/// duration parser reads.
const LONGEST_MS: f64 = 1e12;

/// The largest size a dialect's value is turned into (1 EB), for the same
/// reason.
const LARGEST_BYTES: f64 = 1e18;

/// The program's own limits over its profile's, for its cases (`run`) and
/// its compile (`compile`); `None`: the profile's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestLimits {
    /// Over the profile's `limits`.
    pub run: Option<PartialLimitsSpec>,
    /// Over the profile's `compile_limits` (a profile with a compile step).
    pub compile: Option<PartialLimitsSpec>,
}

impl RequestLimits {
    /// The spec of `stage`, made when absent.
    fn stage(&mut self, stage: LimitStage) -> &mut PartialLimitsSpec {
        match stage {
            LimitStage::Run => self.run.get_or_insert_with(PartialLimitsSpec::default),
            LimitStage::Compile => self.compile.get_or_insert_with(PartialLimitsSpec::default),
        }
    }

    /// Sets `stage`'s wall-clock limit.
    pub fn set_timeout(&mut self, stage: LimitStage, timeout: ConfigValue) {
        self.stage(stage).timeout = Some(timeout.0);
    }

    /// Sets `stage`'s CPU-time limit.
    pub fn set_cpu_time(&mut self, stage: LimitStage, cpu_time: ConfigValue) {
        self.stage(stage).cpu_time = Some(cpu_time.0);
    }

    /// Sets `stage`'s memory limit.
    pub fn set_memory(&mut self, stage: LimitStage, memory: ConfigValue) {
        self.stage(stage).memory = Some(memory.0);
    }

    /// Sets `stage`'s process and thread limit.
    pub fn set_pids(&mut self, stage: LimitStage, pids: u32) {
        self.stage(stage).pids = Some(pids);
    }

    /// What tells runs of other limits apart when requests are gathered
    /// into one run (the specs' JSON; the dialects write each value in one
    /// unit, so equal limits are equal text).
    pub fn gather_key(&self) -> String {
        serde_json::to_string(&(&self.run, &self.compile)).unwrap_or_default()
    }
}

/// A limit's value as the config writes it (`"2500ms"`, `"67108864B"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigValue(String);

/// A dialect's limit that is not a number of its unit at least 0.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{value} is not a {quantity}: give a number of {unit} >= 0")]
pub struct NotAQuantity {
    value: f64,
    /// `time` or `size`.
    quantity: &'static str,
    unit: String,
}

/// `value` of a time in `unit` (`ms_per_unit` milliseconds each), as the
/// config writes it; why not when it is not a number of them at least 0.
pub fn time_value(value: f64, ms_per_unit: f64, unit: &str) -> Result<ConfigValue, NotAQuantity> {
    if !value.is_finite() || value < 0.0 {
        return Err(NotAQuantity {
            value,
            quantity: "time",
            unit: unit.to_string(),
        });
    }
    let ms = (value * ms_per_unit).round().min(LONGEST_MS) as u64;
    Ok(ConfigValue(format!("{ms}ms")))
}

/// `value` of a size in `unit` (`bytes_per_unit` bytes each), as the config
/// writes it; why not when it is not a number of them at least 0.
pub fn size_value(
    value: f64,
    bytes_per_unit: f64,
    unit: &str,
) -> Result<ConfigValue, NotAQuantity> {
    if !value.is_finite() || value < 0.0 {
        return Err(NotAQuantity {
            value,
            quantity: "size",
            unit: unit.to_string(),
        });
    }
    let bytes = (value * bytes_per_unit).round().min(LARGEST_BYTES) as u64;
    Ok(ConfigValue(format!("{bytes}B")))
}

/// Whether a limit is the run's or the compile's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitStage {
    /// Each case (`limits`).
    Run,
    /// The compile (`compile_limits`).
    Compile,
}

impl LimitStage {
    /// The section's name in a profile and an expectation.
    pub fn section(self) -> &'static str {
        match self {
            LimitStage::Run => "limits",
            LimitStage::Compile => "compile_limits",
        }
    }
}

/// A key of a limits section; `Section` is the section as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKey {
    Section,
    Timeout,
    CpuTime,
    Memory,
    Pids,
    Cpus,
    Output,
    Tmp,
    Build,
}

impl LimitKey {
    fn named(field: &str) -> LimitKey {
        match field {
            "timeout" => LimitKey::Timeout,
            "cpu_time" => LimitKey::CpuTime,
            "memory" => LimitKey::Memory,
            "pids" => LimitKey::Pids,
            "cpus" => LimitKey::Cpus,
            "output" => LimitKey::Output,
            "tmp" => LimitKey::Tmp,
            "build" => LimitKey::Build,
            _ => LimitKey::Section,
        }
    }

    fn name(self) -> Option<&'static str> {
        Some(match self {
            LimitKey::Section => return None,
            LimitKey::Timeout => "timeout",
            LimitKey::CpuTime => "cpu_time",
            LimitKey::Memory => "memory",
            LimitKey::Pids => "pids",
            LimitKey::Cpus => "cpus",
            LimitKey::Output => "output",
            LimitKey::Tmp => "tmp",
            LimitKey::Build => "build",
        })
    }
}

/// One limit of a request, for naming it in the dialect's field names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitPart {
    /// The run's or the compile's.
    pub stage: LimitStage,
    /// Which key.
    pub key: LimitKey,
}

impl LimitPart {
    /// Its path in a native request: `limits.timeout`, `compile_limits`.
    pub fn path(self) -> String {
        match self.key.name() {
            Some(key) => format!("{}.{key}", self.stage.section()),
            None => self.stage.section().to_string(),
        }
    }
}

/// Checks `limits` for `profile`: each written time, memory and process
/// limit within `maxima`; `output`, `tmp` and `build` no more than the
/// profile's (a request may lower what the server keeps, not raise it);
/// then the profile's own rules for limits. `field` names a limit as the
/// dialect spells it.
pub fn check_limits(
    maxima: &RequestLimitMaxima,
    profile: &RuntimeProfile,
    limits: &RequestLimits,
    field: &dyn Fn(LimitPart) -> String,
) -> Result<(), ApiError> {
    for (stage, spec) in [
        (LimitStage::Run, &limits.run),
        (LimitStage::Compile, &limits.compile),
    ] {
        let Some(spec) = spec else { continue };
        let part = |key| field(LimitPart { stage, key });
        let (max_timeout, timeout_setting) = match stage {
            LimitStage::Run => (maxima.timeout, "max_timeout"),
            LimitStage::Compile => (maxima.compile_timeout, "max_compile_timeout"),
        };
        for (key, value, max, setting) in [
            (
                LimitKey::Timeout,
                &spec.timeout,
                max_timeout,
                timeout_setting,
            ),
            (
                LimitKey::CpuTime,
                &spec.cpu_time,
                maxima.cpu_time,
                "max_cpu_time",
            ),
        ] {
            // A value that is not a duration is the profile's rules' to name.
            if let Some(asked) = value
                .as_deref()
                .and_then(|v| humantime::parse_duration(v).ok())
                && asked > max
            {
                return Err(over_maximum(
                    part(key),
                    &format_duration(asked),
                    &format_duration(max),
                    setting,
                ));
            }
        }
        if let Some(asked) = spec
            .memory
            .as_deref()
            .and_then(|v| v.parse::<bytesize::ByteSize>().ok())
            && asked.as_u64() > maxima.memory
        {
            return Err(over_maximum(
                part(LimitKey::Memory),
                &format!("{} bytes", asked.as_u64()),
                &format!("{} bytes", maxima.memory),
                "max_memory",
            ));
        }
        if let Some(asked) = spec.pids
            && asked > maxima.pids
        {
            return Err(over_maximum(
                part(LimitKey::Pids),
                &format!("{asked} processes and threads"),
                &maxima.pids.to_string(),
                "max_pids",
            ));
        }
    }
    let variant = profile
        .with_limits(limits.run.as_ref(), limits.compile.as_ref())
        .map_err(|error| profile_refusal(error, field))?;
    // What the server keeps and holds for a run: lowered, never raised.
    let not_raised = |stage, key, written: bool, own: u64, asked: u64| {
        if !written || asked <= own {
            return Ok(());
        }
        Err(ApiError::bad_field(
            field(LimitPart { stage, key }),
            format!(
                "asks for {asked} bytes: a request may lower the profile's {}.{} ({own} bytes), not raise it",
                stage.section(),
                key.name().unwrap_or_default()
            ),
        ))
    };
    if let Some(run) = &limits.run {
        let (own, asked) = (&profile.limits, &variant.limits);
        let stage = LimitStage::Run;
        not_raised(
            stage,
            LimitKey::Output,
            run.output.is_some(),
            own.output_bytes,
            asked.output_bytes,
        )?;
        not_raised(
            stage,
            LimitKey::Tmp,
            run.tmp.is_some(),
            own.tmp_bytes,
            asked.tmp_bytes,
        )?;
    }
    if let (Some(compile), Some(own), Some(asked)) =
        (&limits.compile, &profile.compile, &variant.compile)
    {
        let (own, asked) = (&own.limits, &asked.limits);
        let stage = LimitStage::Compile;
        not_raised(
            stage,
            LimitKey::Output,
            compile.output.is_some(),
            own.output_bytes,
            asked.output_bytes,
        )?;
        not_raised(
            stage,
            LimitKey::Tmp,
            compile.tmp.is_some(),
            own.tmp_bytes,
            asked.tmp_bytes,
        )?;
        if let (Some(own), Some(asked)) = (own.build_bytes, asked.build_bytes) {
            not_raised(stage, LimitKey::Build, compile.build.is_some(), own, asked)?;
        }
    }
    Ok(())
}

/// 400 naming `field`, what it asked and the setting that bounds it.
fn over_maximum(field: String, asked: &str, max: &str, setting: &str) -> ApiError {
    ApiError::bad_field(
        field,
        format!(
            "asks for {asked}; this server allows at most {max} per request ([serve] {setting})"
        ),
    )
}

fn format_duration(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

/// The profile's refusal of a request's limits, naming the request's field.
fn profile_refusal(error: ProfileError, field: &dyn Fn(LimitPart) -> String) -> ApiError {
    match error {
        ProfileError::BadLimit {
            section,
            field: key,
            value,
            reason,
            ..
        } => {
            let stage = if section == "compile_limits" {
                LimitStage::Compile
            } else {
                LimitStage::Run
            };
            let part = LimitPart {
                stage,
                key: LimitKey::named(key),
            };
            ApiError::bad_field(field(part), format!("asks for {value}: {reason}"))
        }
        ProfileError::CompileLimitsWithoutCompile { profile } => ApiError::bad_field(
            field(LimitPart {
                stage: LimitStage::Compile,
                key: LimitKey::Section,
            }),
            format!("profile `{profile}` has no compile step: it takes no compile limits"),
        ),
        other => ApiError::bad_field(
            field(LimitPart {
                stage: LimitStage::Run,
                key: LimitKey::Section,
            }),
            other.to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialect_values_are_written_in_the_configs_units() {
        assert_eq!(time_value(2.5, 1000.0, "seconds").unwrap().0, "2500ms");
        assert_eq!(time_value(3000.0, 1.0, "ms").unwrap().0, "3000ms");
        assert_eq!(
            size_value(64.0, (1u64 << 20) as f64, "MiB").unwrap().0,
            "67108864B"
        );
        assert!(time_value(-1.0, 1000.0, "seconds").is_err());
        assert!(time_value(f64::NAN, 1000.0, "seconds").is_err());
        assert!(size_value(f64::INFINITY, 1.0, "bytes").is_err());
        // Huge values stay readable, for the maxima to refuse.
        let huge = time_value(1e300, 1000.0, "seconds").unwrap().0;
        assert!(humantime::parse_duration(&huge).is_ok(), "{huge}");
        let huge = size_value(1e300, 1024.0, "KB").unwrap().0;
        assert!(huge.parse::<bytesize::ByteSize>().is_ok(), "{huge}");
    }

    #[test]
    fn equal_limits_gather_together_and_others_apart() {
        let mut one = RequestLimits::default();
        one.set_timeout(LimitStage::Run, time_value(2.0, 1000.0, "s").unwrap());
        let mut same = RequestLimits::default();
        same.set_timeout(LimitStage::Run, time_value(2000.0, 1.0, "ms").unwrap());
        assert_eq!(one.gather_key(), same.gather_key());
        let mut other = same.clone();
        other.set_pids(LimitStage::Run, 8);
        assert_ne!(one.gather_key(), other.gather_key());
        assert_ne!(one.gather_key(), RequestLimits::default().gather_key());
    }

    #[test]
    fn a_native_limit_is_named_by_its_path() {
        let part = LimitPart {
            stage: LimitStage::Compile,
            key: LimitKey::Timeout,
        };
        assert_eq!(part.path(), "compile_limits.timeout");
        let whole = LimitPart {
            stage: LimitStage::Run,
            key: LimitKey::Section,
        };
        assert_eq!(whole.path(), "limits");
    }
}
