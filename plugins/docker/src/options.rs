//! How a [`crate::DockerClient`] reaches its engines and bounds their work.

use std::path::PathBuf;
use std::time::Duration;

/// The label every container progscore creates carries; its value names the
/// client that owns it (a `progscore_sandbox::Owner`).
pub const OWNER_LABEL: &str = "progscore.owner";

/// The owner kind of Docker clients: their owners are named `progscore-docker-…`.
pub(crate) const OWNER_KIND: &str = "docker";

/// Default bound on each engine request. Generous: on a busy machine the
/// engine can take seconds per request, and its expiry costs a run.
pub const DEFAULT_ENGINE_TIMEOUT: Duration = Duration::from_secs(120);

/// Default time calls wait for an engine that stopped answering.
pub const DEFAULT_OUTAGE_WAIT: Duration = Duration::from_secs(120);

/// Programs in flight per CPU an engine reports, when its capacity is not
/// given: measured on a 2-core machine, throughput rises to 3 calls per core
/// and falls after (containers mostly wait on the engine, not on a core).
pub const DEFAULT_CALLS_PER_CPU: usize = 3;

/// The name of the engine a client uses when no engines are configured.
pub const DEFAULT_ENGINE_NAME: &str = "default";

/// How the client reaches its engines, where it keeps workspaces, and how
/// long it gives them.
#[derive(Debug, Clone)]
pub struct DockerOptions {
    /// The engines, in the order they are preferred when equally free. A
    /// profile runs on every one that passes its preflight (or on those it
    /// names). Never empty.
    pub engines: Vec<EngineOptions>,
    /// The private folder (0700, created or checked) under which each
    /// client registers its owner folder and keeps its workspaces. The
    /// program is bind-mounted from it, so it must be visible to every
    /// engine at the same path (engines on this host).
    pub owner_root: PathBuf,
    /// Bound on each request to an engine (create, attach, start, kill,
    /// inspect, remove) and on the output's end after the program exited.
    /// Its expiry is a sandbox error; it is never the program's time.
    pub engine_timeout: Duration,
    /// How long calls wait for engines that stopped answering before they
    /// give up (counted from the first failure), when no other engine can
    /// take their program.
    pub outage_wait: Duration,
}

/// One engine of the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineOptions {
    /// Its name in the config (`[engines.NAME]`), in provenance and messages.
    pub name: String,
    /// Where it answers.
    pub endpoint: Endpoint,
    /// How many programs it runs at once.
    pub capacity: Capacity,
}

/// How many programs an engine runs at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capacity {
    /// No bound of the client's own: the caller's concurrency is the bound
    /// (the implicit engine, as before engines could be configured).
    Unbounded,
    /// This many per CPU the engine reports.
    PerCpu(usize),
    /// Exactly this many.
    Fixed(usize),
}

/// An engine's address, as `docker context` writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `unix:///var/run/docker.sock`.
    Unix(PathBuf),
    /// `tcp://HOST:PORT`, in TLS with these files when given.
    Tcp {
        address: String,
        tls: Option<TlsFiles>,
    },
    /// `ssh://USER@HOST`, through the system's `ssh` (bollard's transport).
    Ssh {
        address: String,
        key: Option<PathBuf>,
    },
}

/// The client's TLS files for a `tcp://` engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Endpoint {
    /// Parses `unix://PATH`, `tcp://HOST:PORT` or `ssh://[USER@]HOST[:PORT]`;
    /// the error says what is wrong with it.
    pub fn parse(
        url: &str,
        tls: Option<TlsFiles>,
        key: Option<PathBuf>,
    ) -> Result<Endpoint, String> {
        let (scheme, rest) = url.split_once("://").ok_or_else(|| {
            format!(
                "`{url}` is not an engine URL (unix://PATH, tcp://HOST:PORT or ssh://USER@HOST)"
            )
        })?;
        if rest.is_empty() {
            return Err(format!("`{url}` names no socket or host"));
        }
        let only = |what: &str, given: bool| {
            if given {
                Err(format!(
                    "`{what}` applies to {} engines only, not `{url}`",
                    match what {
                        "tls" => "tcp://",
                        _ => "ssh://",
                    }
                ))
            } else {
                Ok(())
            }
        };
        match scheme {
            "unix" => {
                only("tls", tls.is_some())?;
                only("ssh_key", key.is_some())?;
                if !rest.starts_with('/') {
                    return Err(format!("`{url}`: the socket path must be absolute"));
                }
                Ok(Endpoint::Unix(PathBuf::from(rest)))
            }
            "tcp" => {
                only("ssh_key", key.is_some())?;
                if !rest.contains(':') {
                    return Err(format!("`{url}`: give the port (tcp://HOST:2376)"));
                }
                Ok(Endpoint::Tcp {
                    address: rest.to_string(),
                    tls,
                })
            }
            "ssh" => {
                only("tls", tls.is_some())?;
                Ok(Endpoint::Ssh {
                    address: rest.to_string(),
                    key,
                })
            }
            other => Err(format!(
                "`{url}`: unknown scheme `{other}` (unix, tcp or ssh)"
            )),
        }
    }

    /// Whether the engine is on this host (a unix socket): it sees this
    /// host's files, and its cgroups are this host's. Programs reach other
    /// engines through volumes.
    pub fn is_local(&self) -> bool {
        matches!(self, Endpoint::Unix(_))
    }

    /// The address as users write it.
    pub fn url(&self) -> String {
        match self {
            Endpoint::Unix(path) => format!("unix://{}", path.display()),
            Endpoint::Tcp { address, .. } => format!("tcp://{address}"),
            Endpoint::Ssh { address, .. } => format!("ssh://{address}"),
        }
    }
}

impl EngineOptions {
    /// An engine on a unix socket, bounded by its CPUs.
    pub fn unix(name: impl Into<String>, socket: impl Into<PathBuf>) -> EngineOptions {
        EngineOptions {
            name: name.into(),
            endpoint: Endpoint::Unix(socket.into()),
            capacity: Capacity::PerCpu(DEFAULT_CALLS_PER_CPU),
        }
    }

    /// The engine used when none is configured: `DOCKER_HOST` when it is a
    /// unix socket, else the local socket; bounded by the caller only.
    pub fn implicit() -> EngineOptions {
        let socket = std::env::var("DOCKER_HOST")
            .ok()
            .and_then(|host| host.strip_prefix("unix://").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("/var/run/docker.sock"));
        EngineOptions {
            name: DEFAULT_ENGINE_NAME.into(),
            endpoint: Endpoint::Unix(socket),
            capacity: Capacity::Unbounded,
        }
    }

    /// How many programs it runs at once, given the CPUs it reports (`None`:
    /// unbounded).
    pub fn capacity_for(&self, cpus: usize) -> Option<usize> {
        match self.capacity {
            Capacity::Unbounded => None,
            Capacity::PerCpu(per_cpu) => Some((per_cpu * cpus).max(1)),
            Capacity::Fixed(n) => Some(n.max(1)),
        }
    }
}

impl Default for DockerOptions {
    fn default() -> Self {
        DockerOptions {
            engines: vec![EngineOptions::implicit()],
            owner_root: progscore_sandbox::default_owner_root(),
            engine_timeout: DEFAULT_ENGINE_TIMEOUT,
            outage_wait: DEFAULT_OUTAGE_WAIT,
        }
    }
}

impl DockerOptions {
    /// These options with one engine at `socket` (unbounded, as the implicit
    /// engine): for tests and tools that point at one engine.
    pub fn with_socket(mut self, socket: impl Into<PathBuf>) -> DockerOptions {
        self.engines = vec![EngineOptions {
            endpoint: Endpoint::Unix(socket.into()),
            ..EngineOptions::implicit()
        }];
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_urls_parse_and_print_back() {
        for url in [
            "unix:///run/docker-second.sock",
            "tcp://10.0.0.2:2376",
            "ssh://me@build-2",
        ] {
            assert_eq!(Endpoint::parse(url, None, None).expect(url).url(), url);
        }
    }

    #[test]
    fn bad_engine_urls_say_what_is_wrong() {
        let cases = [
            ("/var/run/docker.sock", "not an engine URL"),
            ("unix://run/docker.sock", "must be absolute"),
            ("tcp://10.0.0.2", "give the port"),
            ("http://10.0.0.2:2375", "unknown scheme `http`"),
            ("unix://", "names no socket"),
        ];
        for (url, expected) in cases {
            let err = Endpoint::parse(url, None, None).expect_err(url);
            assert!(err.contains(expected), "{url}: {err}");
        }
        let tls = TlsFiles {
            ca: "ca.pem".into(),
            cert: "cert.pem".into(),
            key: "key.pem".into(),
        };
        let err = Endpoint::parse("unix:///x.sock", Some(tls), None).expect_err("tls on unix");
        assert!(err.contains("tcp:// engines only"), "{err}");
        let err = Endpoint::parse("tcp://h:1", None, Some("k".into())).expect_err("key on tcp");
        assert!(err.contains("ssh:// engines only"), "{err}");
    }

    #[test]
    fn capacity_follows_the_engines_cpus_unless_fixed() {
        let mut engine = EngineOptions::unix("second", "/run/docker-second.sock");
        assert_eq!(engine.capacity_for(2), Some(2 * DEFAULT_CALLS_PER_CPU));
        engine.capacity = Capacity::Fixed(5);
        assert_eq!(engine.capacity_for(64), Some(5));
        assert_eq!(EngineOptions::implicit().capacity_for(2), None);
    }
}
