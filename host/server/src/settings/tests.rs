//! The `[serve]` table read from a config's text: values, defaults, and
//! refusals that name the file, the line and the field.

use std::path::Path;

use progscore_runtime::config::Config;

use super::*;

/// The `[serve]` settings of a config text (from `c.toml`), or its error.
fn read(text: &str) -> Result<ServeSettings, ConfigError> {
    ServeSettings::from_config(&Config::parse(Path::new("c.toml"), text)?)
}

const PROFILE: &str = "[profiles.python]\nbackend = \"docker\"\nimage = \"127.0.0.1:5000/python-sandbox@sha256:04523e07d3e8eff083d854274411456f0a069de00b901a826c97a9428f7bbac4\"\ncommand = [\"python3\"]\n";

/// The error of a config whose `[serve]` table holds `line` (line 7).
fn refusal(line: &str) -> String {
    let text = format!("{PROFILE}\n[serve]\n{line}\n");
    read(&text).unwrap_err().to_string()
}

#[test]
fn the_serve_table_is_read_and_defaults_to_loopback() {
    let serve = read(PROFILE).unwrap();
    assert_eq!(serve, ServeSettings::default());
    assert!(serve.listen.ip().is_loopback());
    let text = format!(
        "{PROFILE}\n[serve]\nlisten = \"0.0.0.0:9000\"\ntokens = [\"{}\"]\nprofiles = [\"python\"]\nconcurrency = 4\nqueue = 0\nqueue_wait = \"5s\"\nmax_body = \"2MiB\"\nmax_code = \"64KiB\"\nmax_stdin = \"1MiB\"\nmax_invocations = 8\nmax_batch_items = 100\ndrain = \"10s\"\nfresh = true\ngather = \"0s\"\n",
        "t".repeat(32)
    );
    let serve = read(&text).unwrap();
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
    let maxima = read(&text).unwrap().request_limits;
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
    let serve = read(&text).unwrap();
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
    let serve = read(&text).unwrap();
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
