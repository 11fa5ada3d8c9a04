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

/// What a connection may take of the server's time and sockets (`[serve]
/// header_timeout`, `idle_timeout`, `body_timeout`, `max_connections`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// From a request's first byte to the end of its head (`header_timeout`);
    /// past it the client is answered 408 and the connection closed.
    pub header_timeout: Duration,
    /// How long a connection may stay open with no request on it
    /// (`idle_timeout`): a new connection before its first byte, a kept-alive
    /// one between requests. Past it the connection is closed.
    pub idle_timeout: Duration,
    /// From a request's head to the end of its body (`body_timeout`): past
    /// it, 408 (a deadline for the whole body, however it trickles).
    pub body_timeout: Duration,
    /// Connections open at once (`max_connections`); one more is answered
    /// 503 with `Retry-After` and closed at once.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(75),
            body_timeout: Duration::from_secs(30),
            max_connections: 512,
        }
    }
}

/// How many of the largest bodies `max_bodies_in_memory` holds by default.
pub const DEFAULT_BODIES_IN_MEMORY: u64 = 8;

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
            hosts: Vec::new(),
            origins: Vec::new(),
            connections: ConnectionLimits::default(),
            max_bodies_in_memory: DEFAULT_BODIES_IN_MEMORY * (32 << 20),
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

/// A `Host` header's value (or a `hosts` entry) as its name and port:
/// `name`, `name:port`, `[v6]`, `[v6]:port`; `None` when it is none of them.
/// The name keeps its brackets and case.
pub fn split_host(host: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = if host.starts_with('[') {
        let end = host.find(']')? + 1;
        let (name, rest) = host.split_at(end);
        match rest {
            "" => (name, None),
            rest => (name, Some(rest.strip_prefix(':')?)),
        }
    } else {
        match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok()?),
        None => None,
    };
    let bracketed = name.len() > 2 && name.starts_with('[') && name.ends_with(']');
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
    (bracketed || plain).then_some((name, port))
}

/// A `hosts` entry in lower case without a trailing dot, or why it is not
/// one: a DNS name or an address, with an optional port, as a `Host`
/// header carries it.
fn checked_host(host: &str) -> Result<String, String> {
    let lower = host.to_ascii_lowercase();
    match split_host(&lower) {
        Some((name, port)) => {
            let name = name.trim_end_matches('.');
            Ok(match port {
                Some(port) => format!("{name}:{port}"),
                None => name.to_string(),
            })
        }
        None => Err(format!(
            "{host:?} is not a host name as a Host header gives it: write \"sandbox.internal\" (any port) or \"sandbox.internal:8080\", without a scheme or a path"
        )),
    }
}

/// An `origins` entry in lower case (`scheme://host[:port]`, as a
/// browser's `Origin` header gives it), or why it is not one.
fn checked_origin(origin: &str) -> Result<String, String> {
    let lower = origin.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"));
    match rest {
        Some(rest) if !rest.is_empty() && !rest.contains('/') && checked_host(rest).is_ok() => {
            Ok(lower)
        }
        _ if lower == "null" => {
            Err("\"null\" is the origin of any sandboxed page or file: it cannot be trusted".into())
        }
        _ => Err(format!(
            "{origin:?} is not an origin as a browser sends it: write \"https://tools.example.org\" or \"http://localhost:3000\" (a scheme, a host, a port; no path, no trailing slash)"
        )),
    }
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
    fn who_may_call_and_how_slow_clients_are_let_go_are_read_with_defaults() {
        let defaults = ServeSettings::default();
        assert!(defaults.hosts.is_empty() && defaults.origins.is_empty());
        assert_eq!(defaults.connections.header_timeout, Duration::from_secs(10));
        assert_eq!(defaults.connections.idle_timeout, Duration::from_secs(75));
        assert_eq!(defaults.connections.body_timeout, Duration::from_secs(30));
        assert_eq!(defaults.connections.max_connections, 512);
        assert_eq!(defaults.max_bodies_in_memory, 256 << 20);
        let text = format!(
            "{PROFILE}\n[serve]\nhosts = [\"Sandbox.Internal.\", \"judge:9000\", \"[fd00::1]:8080\"]\norigins = [\"https://Tools.example.org\", \"http://localhost:3000\"]\nheader_timeout = \"2s\"\nidle_timeout = \"3s\"\nbody_timeout = \"4s\"\nmax_connections = 8\nmax_body = \"16MiB\"\n"
        );
        let serve = Config::parse(Path::new("c.toml"), &text).unwrap().serve;
        assert_eq!(
            serve.hosts,
            ["sandbox.internal", "judge:9000", "[fd00::1]:8080"]
        );
        assert_eq!(
            serve.origins,
            ["https://tools.example.org", "http://localhost:3000"]
        );
        assert_eq!(
            serve.connections,
            ConnectionLimits {
                header_timeout: Duration::from_secs(2),
                idle_timeout: Duration::from_secs(3),
                body_timeout: Duration::from_secs(4),
                max_connections: 8,
            }
        );
        // Eight of the largest bodies unless told.
        assert_eq!(serve.max_bodies_in_memory, 128 << 20);
        let text = format!("{PROFILE}\n[serve]\nmax_bodies_in_memory = \"64MiB\"\n");
        let serve = Config::parse(Path::new("c.toml"), &text).unwrap().serve;
        assert_eq!(serve.max_bodies_in_memory, 64 << 20);
    }

    #[test]
    fn host_headers_split_into_name_and_port() {
        assert_eq!(
            split_host("localhost:8080"),
            Some(("localhost", Some(8080)))
        );
        assert_eq!(split_host("example.org"), Some(("example.org", None)));
        assert_eq!(split_host("[::1]:80"), Some(("[::1]", Some(80))));
        assert_eq!(split_host("[::1]"), Some(("[::1]", None)));
        for bad in [
            "", ":80", "a:b", "a:99999", "[::1", "[::1]x", "a b", "http://a", "a/b", "[]",
        ] {
            assert_eq!(split_host(bad), None, "{bad:?}");
        }
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
            (
                "hosts = [\"http://evil.example\"]",
                "c.toml:7: serve.hosts: \"http://evil.example\" is not a host name",
            ),
            (
                "origins = [\"https://tools.example.org/\"]",
                "c.toml:7: serve.origins: \"https://tools.example.org/\" is not an origin",
            ),
            (
                "origins = [\"null\"]",
                "c.toml:7: serve.origins: \"null\" is the origin of any sandboxed page",
            ),
            (
                "header_timeout = \"0s\"",
                "c.toml:7: serve.header_timeout = \"0s\": must be between 1s and 1h",
            ),
            (
                "max_connections = 0",
                "c.toml:7: serve.max_connections: max_connections = 0",
            ),
            (
                "max_bodies_in_memory = \"1MiB\"",
                "c.toml:7: serve.max_bodies_in_memory: \"1MiB\" is smaller than max_body",
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
