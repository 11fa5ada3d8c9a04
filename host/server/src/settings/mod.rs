//! The server's settings, the `[serve]` table: how `progscore serve`
//! listens, whom it admits ([`hosts`]), how much it queues and accepts and
//! what one connection or request may take ([`limits`]), and how long it
//! drains. Read from the config's text with the runtime's helpers, so a bad
//! value is named by file, line and field as every config error is.

pub mod hosts;
pub mod limits;

use std::net::SocketAddr;
use std::time::Duration;

use progscore_runtime::config::retention::{RetentionSection, RetentionSettings, parse_retention};
use progscore_runtime::config::{Config, ConfigError, bounded_duration, locate, locate_key};
use serde::Deserialize;

pub use hosts::split_host;
use hosts::{checked_host, checked_origin};
pub use limits::{
    ConnectionLimits, DEFAULT_BODIES_IN_MEMORY, MAX_REQUEST_TIME, MIN_REQUEST_MEMORY,
    RequestLimitMaxima,
};

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
    /// Names a request's `Host` may give besides the listen address
    /// (`hosts`, lower case): `name` (any port) or `name:port`. A page
    /// that rebinds its own DNS name to this server names itself, so it
    /// is refused.
    pub hosts: Vec<String>,
    /// Browser origins (`scheme://host[:port]`, lower case) whose pages may
    /// call the server (`origins`); a request carrying any other `Origin`
    /// is refused. Empty: no page may.
    pub origins: Vec<String>,
    /// How slow clients are let go, and how many may be connected at once.
    pub connections: ConnectionLimits,
    /// The most bytes of request bodies held at once, over every request
    /// waiting or in flight (`max_bodies_in_memory`); a request that would
    /// pass it is answered 503 with `Retry-After` before its body is read.
    pub max_bodies_in_memory: u64,
}

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
            hosts: Vec::new(),
            origins: Vec::new(),
            connections: ConnectionLimits::default(),
            max_bodies_in_memory: DEFAULT_BODIES_IN_MEMORY * (32 << 20),
        }
    }
}

impl ServeSettings {
    /// Reads and checks the `[serve]` table of a loaded config (its
    /// defaults when there is none); a bad value is named by the config's
    /// file, line and field.
    pub fn from_config(config: &Config) -> Result<ServeSettings, ConfigError> {
        /// The config as this crate reads it: only its `[serve]` table
        /// (the runtime checked the rest).
        #[derive(Deserialize)]
        struct ServeFile {
            #[serde(default)]
            serve: ServeSection,
        }
        let shown = config.path.display().to_string();
        let file: ServeFile = toml::from_str(&config.text).map_err(|e| ConfigError::Parse {
            path: shown.clone(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let names: Vec<&str> = config.profiles.iter().map(|p| p.name.as_str()).collect();
        parse_serve(&shown, &config.text, file.serve, &names)
    }

    /// Whether a request must carry one of the tokens.
    pub fn requires_token(&self) -> bool {
        !self.tokens.is_empty()
    }
}

/// The `[serve]` table as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ServeSection {
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
    hosts: Option<Vec<String>>,
    origins: Option<Vec<String>>,
    header_timeout: Option<String>,
    idle_timeout: Option<String>,
    body_timeout: Option<String>,
    max_connections: Option<usize>,
    max_bodies_in_memory: Option<String>,
}

/// Checks the `[serve]` table of the config text `text` (from the file
/// `shown`); `profiles` are the configured profiles' names.
fn parse_serve(
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
    settings.max_bodies_in_memory = DEFAULT_BODIES_IN_MEMORY.saturating_mul(settings.max_body);
    if let Some(value) = &section.max_bodies_in_memory {
        let bytes = value
            .parse::<bytesize::ByteSize>()
            .map_err(|e| {
                refuse(
                    "max_bodies_in_memory",
                    format!("{value:?} is not a size ({e}); e.g. \"256MiB\""),
                )
            })?
            .as_u64();
        if bytes < settings.max_body {
            return Err(refuse(
                "max_bodies_in_memory",
                format!(
                    "{value:?} is smaller than max_body ({} bytes): a request of max_body could never be read",
                    settings.max_body
                ),
            ));
        }
        settings.max_bodies_in_memory = bytes;
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
    let connections = &mut settings.connections;
    for (field, value, target) in [
        ("queue_wait", &section.queue_wait, &mut settings.queue_wait),
        ("drain", &section.drain, &mut settings.drain),
        (
            "header_timeout",
            &section.header_timeout,
            &mut connections.header_timeout,
        ),
        (
            "idle_timeout",
            &section.idle_timeout,
            &mut connections.idle_timeout,
        ),
        (
            "body_timeout",
            &section.body_timeout,
            &mut connections.body_timeout,
        ),
    ] {
        let Some(value) = value else { continue };
        *target = bounded_duration(shown, text, "serve", field, value, MAX_SERVE_WAIT)?;
    }
    if let Some(max) = section.max_connections {
        if max == 0 {
            return Err(refuse(
                "max_connections",
                "max_connections = 0: give at least 1".into(),
            ));
        }
        connections.max_connections = max;
    }
    if let Some(hosts) = section.hosts {
        settings.hosts = hosts
            .iter()
            .map(|host| checked_host(host).map_err(|why| refuse("hosts", why)))
            .collect::<Result<_, _>>()?;
    }
    if let Some(origins) = section.origins {
        settings.origins = origins
            .iter()
            .map(|origin| checked_origin(origin).map_err(|why| refuse("origins", why)))
            .collect::<Result<_, _>>()?;
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
mod tests;
