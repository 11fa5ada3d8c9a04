//! What one connection and one request may take of the server: the
//! `[serve]` settings that bound a slow client and a request's own limits.

use std::time::Duration;

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
