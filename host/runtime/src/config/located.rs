//! What is wrong in a configuration, and where: the error every refusal
//! of a config is, and the helpers that find a table's or a key's line so
//! that a message can name it as `file:line`.

use std::time::Duration;

use thiserror::Error;

/// Why a config could not be loaded; every message names the file, and the
/// line where it can be found.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: cannot read the config: {cause}")]
    Read { path: String, cause: std::io::Error },
    /// The TOML is malformed or has unknown/mistyped fields.
    #[error("{path}: {message}")]
    Parse {
        path: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A profile was refused.
    #[error("{location}: {message}")]
    Profile {
        /// `file:line` of the profile's table.
        location: String,
        message: String,
    },
}

/// `[table] field = value` as a duration from 1s to `max`, or a refusal
/// naming the file, the field's line and the bounds.
pub fn bounded_duration(
    shown: &str,
    text: &str,
    table: &str,
    field: &str,
    value: &str,
    max: Duration,
) -> Result<Duration, ConfigError> {
    let parsed = humantime::parse_duration(value).ok();
    match parsed {
        Some(duration) if duration >= Duration::from_secs(1) && duration <= max => Ok(duration),
        _ => Err(ConfigError::Profile {
            location: locate_key(shown, text, table, field)
                .unwrap_or_else(|| locate(shown, text, table)),
            message: format!(
                "{table}.{field} = {value:?}: {} (e.g. \"2m\")",
                match parsed {
                    None => "not a duration".to_string(),
                    Some(_) =>
                        format!("must be between 1s and {}", humantime::format_duration(max)),
                }
            ),
        }),
    }
}

/// `file:line` of `key = ...` inside the table `[table]` (dotted keys of a
/// parent table, such as `limits.timeout` under `[profiles.python]`, are
/// not looked for: the caller falls back to the table's header).
pub fn locate_key(path: &str, text: &str, table: &str, key: &str) -> Option<String> {
    let start = locate_line(text, table)?;
    text.lines()
        .enumerate()
        .skip(start + 1)
        .take_while(|(_, line)| !line.trim_start().starts_with('['))
        .find(|(_, line)| {
            let line = line.trim_start();
            let rest = line
                .strip_prefix(key)
                .or_else(|| line.strip_prefix(&format!("\"{key}\"")));
            rest.is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|(index, _)| format!("{path}:{}", index + 1))
}

/// The 0-based line of the header `[table]` (a dotted name's parts bare or
/// quoted), if any.
fn locate_line(text: &str, table: &str) -> Option<usize> {
    let parts: Vec<&str> = table.split('.').collect();
    text.lines().position(|line| {
        let Some(inner) = line
            .trim()
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        else {
            return false;
        };
        let written: Vec<&str> = inner
            .split('.')
            .map(|part| part.trim().trim_matches('"'))
            .collect();
        written == parts
    })
}

/// `file:line` of a table header such as `[profiles.python]`, or the file alone.
pub fn locate(path: &str, text: &str, table: &str) -> String {
    let header = format!("[{table}]");
    let quoted = match table.split_once('.') {
        Some((section, name)) => format!("[{section}.\"{name}\"]"),
        None => header.clone(),
    };
    text.lines()
        .position(|line| {
            let line = line.trim();
            line == header || line == quoted
        })
        .map(|index| format!("{path}:{}", index + 1))
        .unwrap_or_else(|| path.to_string())
}
