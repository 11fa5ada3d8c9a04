//! `[serve] retention`: how a long-running server keeps its store from
//! growing without end, and the parsing `progscore store prune` shares.
//!
//! ```toml
//! [serve]
//! retention = { max_age = "30d", max_size = "20GiB", every = "1h" }
//! ```
//!
//! Off unless configured: evidence is what progscore exists to keep, so
//! removing it is the operator's decision. `include_scored = true` also
//! removes what a named item's latest score rests on.

use std::time::Duration;

use progscore_scoring::evidence::RetentionPolicy;
use serde::Deserialize;

/// How often a server prunes when `every` is not given.
pub const DEFAULT_PRUNE_EVERY: Duration = Duration::from_secs(60 * 60);

/// The shortest `every` accepted: a prune reads every observation's size.
pub const MIN_PRUNE_EVERY: Duration = Duration::from_secs(60);

/// A server's retention, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionSettings {
    /// What each prune removes.
    pub policy: RetentionPolicy,
    /// How often it prunes (the first time at start).
    pub every: Duration,
}

/// `retention = { ... }` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionSection {
    max_age: Option<String>,
    max_size: Option<String>,
    every: Option<String>,
    include_scored: Option<bool>,
}

/// An age such as `30d`, `12h`, `90m`: at least a minute.
pub fn parse_age(value: &str) -> Result<Duration, String> {
    match humantime::parse_duration(value) {
        Ok(age) if age >= Duration::from_secs(60) => Ok(age),
        Ok(_) => Err(format!("{value:?}: give at least 1m")),
        Err(e) => Err(format!("{value:?} is not an age ({e}); e.g. \"30d\"")),
    }
}

/// A size such as `10GiB`: at least 1 MiB.
pub fn parse_size(value: &str) -> Result<u64, String> {
    match value.parse::<bytesize::ByteSize>() {
        Ok(size) if size.as_u64() >= 1 << 20 => Ok(size.as_u64()),
        Ok(_) => Err(format!("{value:?}: give at least 1MiB")),
        Err(e) => Err(format!("{value:?} is not a size ({e}); e.g. \"10GiB\"")),
    }
}

/// Checks the table; `refuse(field, message)` names the field's place.
pub fn parse_retention(
    section: RetentionSection,
    refuse: impl Fn(&str, String) -> super::ConfigError,
) -> Result<RetentionSettings, super::ConfigError> {
    let field = |name: &str| format!("retention.{name}");
    let max_age = section
        .max_age
        .as_deref()
        .map(parse_age)
        .transpose()
        .map_err(|e| refuse(&field("max_age"), e))?;
    let max_size = section
        .max_size
        .as_deref()
        .map(parse_size)
        .transpose()
        .map_err(|e| refuse(&field("max_size"), e))?;
    if max_age.is_none() && max_size.is_none() {
        return Err(refuse(
            "retention",
            "give max_age, max_size or both (e.g. { max_age = \"30d\", max_size = \"20GiB\" }); \
             without retention nothing is removed"
                .into(),
        ));
    }
    let every = match &section.every {
        None => DEFAULT_PRUNE_EVERY,
        Some(value) => match humantime::parse_duration(value) {
            Ok(every) if every >= MIN_PRUNE_EVERY => every,
            Ok(_) => {
                return Err(refuse(
                    &field("every"),
                    format!("{value:?}: give at least 1m"),
                ));
            }
            Err(e) => {
                return Err(refuse(
                    &field("every"),
                    format!("{value:?} is not a duration ({e}); e.g. \"1h\""),
                ));
            }
        },
    };
    Ok(RetentionSettings {
        policy: RetentionPolicy {
            max_age,
            max_size,
            include_scored: section.include_scored.unwrap_or(false),
        },
        every,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_sizes_read_as_written_and_bad_ones_are_named() {
        assert_eq!(parse_age("30d"), Ok(Duration::from_secs(30 * 24 * 60 * 60)));
        assert_eq!(parse_size("10GiB"), Ok(10 << 30));
        assert!(parse_age("5s").unwrap_err().contains("at least 1m"));
        assert!(
            parse_age("soon")
                .unwrap_err()
                .contains("\"soon\" is not an age")
        );
        assert!(parse_size("12").unwrap_err().contains("at least 1MiB"));
    }
}
