//! The `[serve]` table: how `progscore serve` listens, whom it admits, how
//! much it queues and accepts, and how long it drains. Parsed with the rest
//! of the config, so a bad value is named by file, line and field.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use super::retention::{RetentionSection, RetentionSettings, parse_retention};
use super::{ConfigError, bounded_duration, locate, locate_key};

/// The address `progscore serve` listens on when neither the flag nor the
/// config says: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// The shortest token accepted: a guessable token is no protection.
pub const MIN_TOKEN_BYTES: usize = 16;

/// The longest `queue_wait` and `drain` accepted.
pub const MAX_SERVE_WAIT: Duration = Duration::from_secs(60 * 60);

/// `progscore serve`'s settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeSettings {
    /// Where to listen (`listen`, default [`DEFAULT_LISTEN`]).
    pub listen: SocketAddr,
    /// Bearer tokens that admit a request; empty: no token is asked, which
    /// is allowed on a loopback address only.
    pub tokens: Vec<String>,
    /// The profiles served (`profiles`); `None`: every configured profile.
    pub profiles: Option<Vec<String>>,
    /// Programs in flight per profile (`concurrency`); `None`: the batch
    /// policy's default, as `progscore score` would use.
    pub concurrency: Option<usize>,
    /// Requests that may wait per profile beyond those in flight (`queue`).
    pub queue: usize,
    /// How long a request may wait for its turn (`queue_wait`): past it,
    /// the dialect's overload answer (504 on `/run_code`, 429 elsewhere).
    pub queue_wait: Duration,
    /// The largest request body, in bytes (`max_body`).
    pub max_body: u64,
    /// The largest program, in bytes (`max_code`).
    pub max_code: u64,
    /// The largest stdin of one invocation, in bytes (`max_stdin`).
    pub max_stdin: u64,
    /// The most invocations in one run (`max_invocations`).
    pub max_invocations: usize,
    /// The most items in one `/v1/batches` request (`max_batch_items`).
    pub max_batch_items: usize,
    /// How long in-flight work may finish after SIGTERM/SIGINT (`drain`);
    /// what is left then is cancelled, with the usual cleanup.
    pub drain: Duration,
    /// Run every request afresh instead of reusing stored evidence (`fresh`).
    pub fresh: bool,
    /// How long a request for a compiled program waits for others of the
    /// same program (`gather`): those that arrive meanwhile run as cases of
    /// one run, built once (verl sends one request per test case). Zero: no
    /// gathering.
    pub gather: Duration,
    /// The most memory the runs in flight may be given in all: the sum of
    /// their memory limits (a program's and, while it builds, its
    /// compile's). Past it a run waits for a turn like any other. `None`:
    /// three quarters of the machine's memory.
    pub memory_budget: Option<u64>,
    /// The per-request limits a request may ask for (a dialect's
    /// `run_timeout`, `memory_limit`...; a native expectation's `limits`):
    /// a request past one is refused naming its field and the setting.
    pub request_limits: RequestLimitMaxima,
    /// What the server prunes from its store, and how often (`retention`);
    /// `None`: nothing is removed.
    pub retention: Option<RetentionSettings>,
}

/// The most a request may ask for its program's own limits (`[serve]
/// max_timeout`, `max_cpu_time`, `max_memory`, `max_pids`,
/// `max_compile_timeout`). A request may ask for less than the profile's
/// as well as more; these bound what one request can hold of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimitMaxima {
    /// The longest wall-clock limit of a run (`max_timeout`).
    pub timeout: Duration,
    /// The longest CPU-time limit, of a run or a compile (`max_cpu_time`).
    pub cpu_time: Duration,
    /// The largest memory limit, of a run or a compile (`max_memory`).
    pub memory: u64,
    /// The most processes and threads, of a run or a compile (`max_pids`).
    pub pids: u32,
    /// The longest wall-clock limit of a compile (`max_compile_timeout`).
    pub compile_timeout: Duration,
}

impl Default for RequestLimitMaxima {
    fn default() -> Self {
        RequestLimitMaxima {
            timeout: Duration::from_secs(60),
            cpu_time: Duration::from_secs(60),
            memory: 4 << 30,
            pids: 256,
            compile_timeout: Duration::from_secs(120),
        }
    }
}

/// The longest a `max_*` time may be: a profile's limits go up to an hour.
pub const MAX_REQUEST_TIME: Duration = Duration::from_secs(60 * 60);

/// The smallest `max_memory`: a profile's memory limit is at least this.
pub const MIN_REQUEST_MEMORY: u64 = 6 << 20;

/// The longest `gather` accepted.
pub const MAX_GATHER: Duration = Duration::from_secs(5);

impl Default for ServeSettings {
    fn default() -> Self {
        ServeSettings {
            listen: DEFAULT_LISTEN.parse().expect("a valid default address"),
            tokens: Vec::new(),
            profiles: None,
            concurrency: None,
            queue: 1024,
            queue_wait: Duration::from_secs(60),
            max_body: 32 << 20,
            max_code: 1 << 20,
            max_stdin: 16 << 20,
            max_invocations: 256,
            max_batch_items: 10_000,
            drain: Duration::from_secs(30),
            fresh: false,
            gather: Duration::from_millis(50),
            memory_budget: None,
            request_limits: RequestLimitMaxima::default(),
            retention: None,
        }
    }
}

impl ServeSettings {
    /// Whether a request must carry one of the tokens.
    pub fn requires_token(&self) -> bool {
        !self.tokens.is_empty()
    }
}

/// The `[serve]` table as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServeSection {
    listen: Option<String>,
    tokens: Option<Vec<String>>,
    profiles: Option<Vec<String>>,
    concurrency: Option<usize>,
    queue: Option<usize>,
    queue_wait: Option<String>,
    max_body: Option<String>,
    max_code: Option<String>,
    max_stdin: Option<String>,
    max_invocations: Option<usize>,
    max_batch_items: Option<usize>,
    drain: Option<String>,
    fresh: Option<bool>,
    gather: Option<String>,
    memory_budget: Option<String>,
    max_timeout: Option<String>,
    max_cpu_time: Option<String>,
    max_memory: Option<String>,
    max_pids: Option<u32>,
    max_compile_timeout: Option<String>,
    retention: Option<RetentionSection>,
}

/// Checks the `[serve]` table of the config text `text` (from the file
/// `shown`); `profiles` are the configured profiles' names.
pub(crate) fn parse_serve(
    shown: &str,
    text: &str,
    section: ServeSection,
    profiles: &[&str],
) -> Result<ServeSettings, ConfigError> {
    let refuse = |field: &str, message: String| ConfigError::Profile {
        location: locate_key(shown, text, "serve", field)
            .unwrap_or_else(|| locate(shown, text, "serve")),
        message: format!("serve.{field}: {message}"),
    };
    let mut settings = ServeSettings::default();
    if let Some(listen) = &section.listen {
        settings.listen = listen.parse().map_err(|_| {
            refuse(
                "listen",
                format!("{listen:?} is not an address and port (e.g. \"127.0.0.1:8080\")"),
            )
        })?;
    }
    if let Some(tokens) = section.tokens {
        if let Some(short) = tokens.iter().position(|t| t.len() < MIN_TOKEN_BYTES) {
            return Err(refuse(
                "tokens",
                format!(
                    "token {} is shorter than {MIN_TOKEN_BYTES} bytes (make one with: openssl rand -hex 32)",
                    short + 1
                ),
            ));
        }
        if let Some(bad) = tokens
            .iter()
            .position(|t| !t.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(refuse(
                "tokens",
                format!(
                    "token {} holds a space or a byte that is not printable ASCII; a header cannot carry it",
                    bad + 1
                ),
            ));
        }
        settings.tokens = tokens;
    }
    if let Some(served) = section.profiles {
        if served.is_empty() {
            return Err(refuse(
                "profiles",
                "`profiles = []` serves nothing: name at least one, or remove it to serve every profile".into(),
            ));
        }
        if let Some(unknown) = served.iter().find(|p| !profiles.contains(&p.as_str())) {
            return Err(refuse(
                "profiles",
                format!(
                    "names `{unknown}`, which is not configured (configured: {})",
                    profiles.join(", ")
                ),
            ));
        }
        settings.profiles = Some(served);
    }
    for (field, value, target) in [
        ("concurrency", section.concurrency, None),
        ("queue", section.queue, Some(&mut settings.queue)),
        (
            "max_invocations",
            section.max_invocations,
            Some(&mut settings.max_invocations),
        ),
        (
            "max_batch_items",
            section.max_batch_items,
            Some(&mut settings.max_batch_items),
        ),
    ] {
        let Some(value) = value else { continue };
        if value == 0 && field != "queue" {
            return Err(refuse(field, format!("{field} = 0: give at least 1")));
        }
        match target {
            Some(target) => *target = value,
            None => settings.concurrency = Some(value),
        }
    }
    if let Some(value) = &section.memory_budget {
        let bytes = value
            .parse::<bytesize::ByteSize>()
            .map_err(|e| {
                refuse(
                    "memory_budget",
                    format!("{value:?} is not a size ({e}); e.g. \"16GiB\""),
                )
            })?
            .as_u64();
        if bytes < MIN_REQUEST_MEMORY {
            return Err(refuse(
                "memory_budget",
                format!("{value:?} is less than one program's smallest memory limit (6MiB)"),
            ));
        }
        settings.memory_budget = Some(bytes);
    }
    for (field, value, target) in [
        ("max_body", &section.max_body, &mut settings.max_body),
        ("max_code", &section.max_code, &mut settings.max_code),
        ("max_stdin", &section.max_stdin, &mut settings.max_stdin),
    ] {
        let Some(value) = value else { continue };
        let bytes = value
            .parse::<bytesize::ByteSize>()
            .map_err(|e| {
                refuse(
                    field,
                    format!("{value:?} is not a size ({e}); e.g. \"1MiB\""),
                )
            })?
            .as_u64();
        if bytes == 0 {
            return Err(refuse(field, format!("{value:?}: give at least 1 byte")));
        }
        *target = bytes;
    }
    if settings.max_code > settings.max_body || settings.max_stdin > settings.max_body {
        return Err(refuse(
            "max_body",
            format!(
                "max_body ({} bytes) is smaller than max_code or max_stdin: no request could carry them",
                settings.max_body
            ),
        ));
    }
    for (field, value, target) in [
        ("queue_wait", &section.queue_wait, &mut settings.queue_wait),
        ("drain", &section.drain, &mut settings.drain),
    ] {
        let Some(value) = value else { continue };
        *target = bounded_duration(shown, text, "serve", field, value, MAX_SERVE_WAIT)?;
    }
    if let Some(fresh) = section.fresh {
        settings.fresh = fresh;
    }
    if let Some(value) = &section.gather {
        settings.gather = match humantime::parse_duration(value) {
            Ok(gather) if gather <= MAX_GATHER => gather,
            parsed => {
                return Err(refuse(
                    "gather",
                    format!(
                        "{value:?}: {} (e.g. \"50ms\"; \"0s\" turns gathering off)",
                        if parsed.is_ok() {
                            "must be at most 5s"
                        } else {
                            "not a duration"
                        }
                    ),
                ));
            }
        };
    }
    let maxima = &mut settings.request_limits;
    for (field, value, target) in [
        ("max_timeout", &section.max_timeout, &mut maxima.timeout),
        ("max_cpu_time", &section.max_cpu_time, &mut maxima.cpu_time),
        (
            "max_compile_timeout",
            &section.max_compile_timeout,
            &mut maxima.compile_timeout,
        ),
    ] {
        let Some(value) = value else { continue };
        *target = bounded_duration(shown, text, "serve", field, value, MAX_REQUEST_TIME)?;
    }
    if let Some(value) = &section.max_memory {
        let bytes = value
            .parse::<bytesize::ByteSize>()
            .map_err(|e| {
                refuse(
                    "max_memory",
                    format!("{value:?} is not a size ({e}); e.g. \"4GiB\""),
                )
            })?
            .as_u64();
        if bytes < MIN_REQUEST_MEMORY {
            return Err(refuse(
                "max_memory",
                format!(
                    "{value:?}: give at least 6MiB (the least memory limit a profile may have)"
                ),
            ));
        }
        maxima.memory = bytes;
    }
    if let Some(pids) = section.max_pids {
        if pids == 0 {
            return Err(refuse("max_pids", "max_pids = 0: give at least 1".into()));
        }
        maxima.pids = pids;
    }
    if let Some(retention) = section.retention {
        settings.retention = Some(parse_retention(retention, refuse)?);
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    use super::*;

    const PROFILE: &str = "[profiles.python]\nbackend = \"docker\"\nimage = \"127.0.0.1:5000/python-sandbox@sha256:04523e07d3e8eff083d854274411456f0a069de00b901a826c97a9428f7bbac4\"\ncommand = [\"python3\"]\n";

    /// The error of a config whose `[serve]` table holds `line` (line 7).
    fn refusal(line: &str) -> String {
        let text = format!("{PROFILE}\n[serve]\n{line}\n");
        Config::parse(Path::new("c.toml"), &text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn the_serve_table_is_read_and_defaults_to_loopback() {
        let config = Config::parse(Path::new("c.toml"), PROFILE).unwrap();
        assert_eq!(config.serve, ServeSettings::default());
        assert!(config.serve.listen.ip().is_loopback());
        let text = format!(
            "{PROFILE}\n[serve]\nlisten = \"0.0.0.0:9000\"\ntokens = [\"{}\"]\nprofiles = [\"python\"]\nconcurrency = 4\nqueue = 0\nqueue_wait = \"5s\"\nmax_body = \"2MiB\"\nmax_code = \"64KiB\"\nmax_stdin = \"1MiB\"\nmax_invocations = 8\nmax_batch_items = 100\ndrain = \"10s\"\nfresh = true\ngather = \"0s\"\n",
            "t".repeat(32)
        );
        let serve = Config::parse(Path::new("c.toml"), &text).unwrap().serve;
        assert_eq!(serve.listen, "0.0.0.0:9000".parse().unwrap());
        assert!(serve.requires_token());
        assert_eq!(serve.profiles, Some(vec!["python".to_string()]));
        assert_eq!(serve.concurrency, Some(4));
        assert_eq!(serve.queue, 0);
        assert_eq!(serve.queue_wait, Duration::from_secs(5));
        assert_eq!(serve.max_body, 2 << 20);
        assert_eq!(serve.max_code, 64 << 10);
        assert_eq!(serve.max_stdin, 1 << 20);
        assert_eq!(serve.max_invocations, 8);
        assert_eq!(serve.max_batch_items, 100);
        assert_eq!(serve.drain, Duration::from_secs(10));
        assert!(serve.fresh);
        assert_eq!(serve.gather, Duration::ZERO);
        assert_eq!(serve.request_limits, RequestLimitMaxima::default());
    }

    #[test]
    fn the_request_limit_maxima_are_read_and_default_to_a_minute_and_4gib() {
        let defaults = ServeSettings::default().request_limits;
        assert_eq!(defaults.timeout, Duration::from_secs(60));
        assert_eq!(defaults.cpu_time, Duration::from_secs(60));
        assert_eq!(defaults.memory, 4 << 30);
        assert_eq!(defaults.pids, 256);
        assert_eq!(defaults.compile_timeout, Duration::from_secs(120));
        let text = format!(
            "{PROFILE}\n[serve]\nmax_timeout = \"20s\"\nmax_cpu_time = \"5s\"\nmax_memory = \"512MiB\"\nmax_pids = 16\nmax_compile_timeout = \"1m\"\n"
        );
        let maxima = Config::parse(Path::new("c.toml"), &text)
            .unwrap()
            .serve
            .request_limits;
        assert_eq!(
            maxima,
            RequestLimitMaxima {
                timeout: Duration::from_secs(20),
                cpu_time: Duration::from_secs(5),
                memory: 512 << 20,
                pids: 16,
                compile_timeout: Duration::from_secs(60),
            }
        );
    }

    #[test]
    fn bad_request_limit_maxima_name_the_file_line_and_field() {
        let cases = [
            (
                "max_timeout = \"2h\"",
                "c.toml:7: serve.max_timeout = \"2h\": must be between 1s and 1h",
            ),
            (
                "max_cpu_time = \"soon\"",
                "c.toml:7: serve.max_cpu_time = \"soon\": not a duration",
            ),
            (
                "max_compile_timeout = \"0s\"",
                "c.toml:7: serve.max_compile_timeout = \"0s\": must be between 1s and 1h",
            ),
            (
                "max_memory = \"lots\"",
                "c.toml:7: serve.max_memory: \"lots\" is not a size",
            ),
            (
                "max_memory = \"1MiB\"",
                "c.toml:7: serve.max_memory: \"1MiB\": give at least 6MiB",
            ),
            ("max_pids = 0", "c.toml:7: serve.max_pids: max_pids = 0"),
        ];
        for (line, expected) in cases {
            let message = refusal(line);
            assert!(
                message.starts_with(expected),
                "{message}\nwanted: {expected}"
            );
        }
        let message = refusal("max_pids = -1");
        assert!(message.contains("max_pids"), "{message}");
    }

    #[test]
    fn bad_serve_values_name_the_file_line_and_field() {
        let cases = [
            (
                "listen = \"everywhere\"",
                "c.toml:7: serve.listen: \"everywhere\" is not an address",
            ),
            (
                "tokens = [\"short\"]",
                "c.toml:7: serve.tokens: token 1 is shorter than 16 bytes",
            ),
            (
                "profiles = [\"cobol\"]",
                "c.toml:7: serve.profiles: names `cobol`, which is not configured (configured: python)",
            ),
            (
                "concurrency = 0",
                "c.toml:7: serve.concurrency: concurrency = 0",
            ),
            (
                "max_code = \"lots\"",
                "c.toml:7: serve.max_code: \"lots\" is not a size",
            ),
            (
                "drain = \"forever\"",
                "c.toml:7: serve.drain = \"forever\": not a duration",
            ),
            (
                "gather = \"9s\"",
                "c.toml:7: serve.gather: \"9s\": must be at most 5s",
            ),
            (
                "max_body = \"1KiB\"",
                "c.toml:7: serve.max_body: max_body (1024 bytes) is smaller",
            ),
        ];
        for (line, expected) in cases {
            let message = refusal(line);
            assert!(
                message.starts_with(expected),
                "{message}\nwanted: {expected}"
            );
        }
        let message = refusal("lisen = \"127.0.0.1:1\"");
        assert!(
            message.contains("c.toml") && message.contains("line 7") && message.contains("lisen"),
            "{message}"
        );
    }
}
