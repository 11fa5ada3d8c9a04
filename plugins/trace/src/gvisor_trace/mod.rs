//! What a program tried under gVisor, read from runsc's runtime monitoring.
//!
//! runsc started with `--pod-init-config=FILE` streams "trace points" (a
//! system call entered or returned, with its arguments) to a remote sink:
//! a Unix `SOCK_SEQPACKET` socket that runsc connects to from the host when
//! the sandbox is created. [`GvisorTrace::listen`] binds that socket in a
//! folder of the caller's, writes the config naming it
//! ([`pod_init_config`]), and reads the one connection runsc makes: a
//! handshake, then one message per point (an 8-byte header, then a
//! protobuf payload). After the sandbox is gone, [`GvisorTrace::finish`]
//! gives the program's [`Behaviour`]: the connections, sockets, binds,
//! executions, spawns, signals, ptrace calls, writes, sensitive reads,
//! removals and renames it tried, with their results.
//!
//! A trace claims absences ("never connected"), so it is marked incomplete
//! whenever something may be missing: a message that could not be read
//! (after which nothing more is recorded, though the stream is drained so
//! that the sandbox never stalls on it), points the sandbox says it dropped,
//! or a stream that did not end. No connection, or a handshake that is not
//! runsc's, is no trace at all.
//!
//! runsc retries a point the socket has no room for (see the config), so a
//! slow reader slows the program rather than losing its events; a reader
//! that stops reading closes its end, and runsc then drops (and counts).

mod config;
pub(crate) mod reader;
mod wire;

#[cfg(test)]
mod tests;

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use progscore_sandbox::behaviour::{Behaviour, PathPattern};
use prost::Message;
use tokio::task::JoinHandle;
use tokio_seqpacket::{UnixSeqpacket, UnixSeqpacketListener};
use tokio_util::sync::CancellationToken;

pub use config::pod_init_config;
use reader::Reader;

use crate::tracer_hold::{StreamClock, TracerHold};

/// The socket's name in the caller's folder.
const SOCKET_NAME: &str = "trace.sock";

/// The pod init config's name in the caller's folder.
const CONFIG_NAME: &str = "trace.json";

/// The longest socket path a `sockaddr_un` holds (108 bytes with the NUL).
const MAX_SOCKET_PATH: usize = 107;

/// The receive buffer, allocated once per trace. runsc does not enlarge its
/// socket's send buffer, so the largest message it can send is below the
/// host's default (`net.core.wmem_default`, 208 KiB here): every message
/// fits, even an exec with a long argv. A message that fills the buffer
/// anyway may be cut and makes the trace incomplete.
const RECEIVE_BUFFER: usize = 256 * 1024;

/// Why a trace is missing.
const NEVER_CONNECTED: &str = "the sandbox never connected its trace";

/// A gVisor trace being received: listening, then reading runsc's stream on
/// a task of its own (on the runtime [`GvisorTrace::listen`] was called
/// on). Dropping it stops the task, closes the stream and removes the
/// socket and the config.
#[derive(Debug)]
pub struct GvisorTrace {
    socket_path: PathBuf,
    /// The socket's folder, held open when its path is too long for a
    /// Unix socket: the socket is then reached through this descriptor.
    _folder: Option<std::fs::File>,
    config_path: PathBuf,
    /// Set when the sandbox is gone: a connection not made by then never
    /// will be.
    finishing: CancellationToken,
    /// Set when the reading must end, whatever it reached.
    stop: CancellationToken,
    task: Option<JoinHandle<Behaviour>>,
    /// The time the sandbox may have waited for room in the stream.
    hold: Arc<TracerHold>,
}

impl GvisorTrace {
    /// Binds `dir/trace.sock`, writes `dir/trace.json` (the pod init config
    /// naming it; give it to runsc as `--pod-init-config`), and starts
    /// reading on the current tokio runtime. Reads of paths matching
    /// `sensitive` are recorded; writes always are.
    ///
    /// A socket path longer than a Unix socket allows (107 bytes: deep
    /// temporary folders reach it) is bound and named through the folder's
    /// descriptor (`/proc/PID/fd/N/trace.sock`), which runsc, as root on
    /// this host, can follow.
    ///
    /// Fails when called outside a tokio runtime, when the socket's path is
    /// not UTF-8, or when either file cannot be made (a socket left there
    /// included).
    pub fn listen(dir: &Path, sensitive: Vec<PathPattern>) -> io::Result<GvisorTrace> {
        GvisorTrace::listen_with_buffer(dir, sensitive, RECEIVE_BUFFER)
    }

    fn listen_with_buffer(
        dir: &Path,
        sensitive: Vec<PathPattern>,
        buffer_len: usize,
    ) -> io::Result<GvisorTrace> {
        // The reading task and the socket's registration need a runtime;
        // without one they would panic.
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(io::Error::other(
                "a gVisor trace is read on a tokio runtime, and none is running here",
            ));
        }
        // runsc connects from its own working directory: the path is absolute.
        let dir = std::path::absolute(dir)?;
        let socket_path = dir.join(SOCKET_NAME);
        let (folder, bind_path, endpoint) = if socket_path.as_os_str().len() > MAX_SOCKET_PATH {
            let folder = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
                .open(&dir)
                .map_err(|error| {
                    io::Error::new(
                        error.kind(),
                        format!("opening the trace folder {}: {error}", dir.display()),
                    )
                })?;
            let fd = folder.as_raw_fd();
            (
                Some(folder),
                PathBuf::from(format!("/proc/self/fd/{fd}/{SOCKET_NAME}")),
                PathBuf::from(format!(
                    "/proc/{}/fd/{fd}/{SOCKET_NAME}",
                    std::process::id()
                )),
            )
        } else {
            (None, socket_path.clone(), socket_path.clone())
        };
        if socket_path.to_str().is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the trace socket path {} is not UTF-8, which the pod init config needs",
                    socket_path.display()
                ),
            ));
        }
        let listener =
            UnixSeqpacketListener::bind_with_backlog(&bind_path, 1).map_err(|error| {
                io::Error::new(
                    error.kind(),
                    format!(
                        "binding the trace socket {}: {error}",
                        socket_path.display()
                    ),
                )
            })?;
        // From here on, dropping `trace` removes what was made.
        let mut trace = GvisorTrace {
            config_path: dir.join(CONFIG_NAME),
            socket_path,
            _folder: folder,
            finishing: CancellationToken::new(),
            stop: CancellationToken::new(),
            task: None,
            hold: TracerHold::new(),
        };
        let config = pod_init_config(&endpoint).to_string();
        std::fs::write(&trace.config_path, config).map_err(|error| {
            io::Error::new(
                error.kind(),
                format!(
                    "writing the pod init config {}: {error}",
                    trace.config_path.display()
                ),
            )
        })?;
        trace.task = Some(tokio::spawn(read_trace(
            listener,
            Reader::new(sensitive),
            buffer_len,
            trace.finishing.clone(),
            trace.stop.clone(),
            trace.hold.clone(),
        )));
        Ok(trace)
    }

    /// The pod init config to give runsc (`--pod-init-config=PATH`).
    pub fn pod_init_config_path(&self) -> &Path {
        &self.config_path
    }

    /// The time the sandbox may have waited for this reader (runsc retries
    /// a point the socket has no room for): for the program's window.
    pub fn hold(&self) -> Arc<TracerHold> {
        self.hold.clone()
    }

    /// The behaviour traced, once the sandbox has been destroyed: waits up
    /// to `grace` for the stream to end (runsc closes it as the sandbox
    /// goes). A stream still open then is cut and the trace marked
    /// incomplete. No connection at all (said at once, without waiting), or
    /// a handshake that is not runsc's, is [`Behaviour::NotTraced`].
    pub async fn finish(mut self, grace: Duration) -> Behaviour {
        let Some(mut task) = self.task.take() else {
            return Behaviour::not_traced("the trace reader was not started");
        };
        self.finishing.cancel();
        let ended = match tokio::time::timeout(grace, &mut task).await {
            Ok(ended) => ended,
            Err(_) => {
                self.stop.cancel();
                task.await
            }
        };
        ended.unwrap_or_else(|error| {
            Behaviour::not_traced(format!("the trace reader failed: {error}"))
        })
    }
}

impl Drop for GvisorTrace {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            // Aborting drops the socket: runsc's next point fails at once
            // (EPIPE) instead of waiting on a reader that is gone.
            task.abort();
        }
        for path in [&self.socket_path, &self.config_path] {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => {
                    let path = path.display();
                    tracing::warn!(%path, %error, "could not remove a gVisor trace file");
                }
            }
        }
    }
}

/// The reading task: one connection, its handshake, its messages.
async fn read_trace(
    listener: UnixSeqpacketListener,
    mut reader: Reader,
    buffer_len: usize,
    finishing: CancellationToken,
    stop: CancellationToken,
    hold: Arc<TracerHold>,
) -> Behaviour {
    let socket = match accept(listener, &finishing, &stop).await {
        Ok(Some(socket)) => socket,
        Ok(None) => return Behaviour::not_traced(NEVER_CONNECTED),
        Err(reason) => return Behaviour::not_traced(reason),
    };
    // Declared after the socket, so dropped before it (an abort included).
    let mut clock = StreamClock::connected(hold, socket.as_raw_fd());
    let mut buffer = vec![0; buffer_len];
    if let Err(reason) = handshake(&socket, &mut buffer, &stop).await {
        return Behaviour::not_traced(reason);
    }
    loop {
        let received = tokio::select! {
            biased;
            _ = stop.cancelled() => {
                reader.stop_reading("the trace stream did not end");
                break;
            }
            received = socket.recv(&mut buffer) => received,
        };
        match received {
            // runsc never sends an empty message: this is the stream's end.
            Ok(info) if info.bytes_read() == 0 => break,
            Ok(info) => {
                let length = info.bytes_read();
                let possibly_cut = info.truncated() || length >= buffer.len();
                reader.message(&buffer[..length.min(buffer.len())], possibly_cut);
                clock.read(reader.latest_time_ns(), !readable_now(&socket));
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => {
                reader.stop_reading(format!("reading the trace failed: {error}"));
                break;
            }
        }
    }
    Behaviour::Traced(reader.finish())
}

/// The one connection runsc makes, or `None` when there was none by the
/// time the sandbox was gone. The listener is closed after it: nobody else
/// may connect.
async fn accept(
    mut listener: UnixSeqpacketListener,
    finishing: &CancellationToken,
    stop: &CancellationToken,
) -> Result<Option<UnixSeqpacket>, String> {
    let mut finished = false;
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.cancelled() => return Ok(None),
            _ = finishing.cancelled(), if !finished => {
                // runsc connects as the sandbox is created, before the
                // program runs: once the sandbox is gone, a connection is
                // either waiting to be accepted or was never made.
                if !connection_waiting(&listener) {
                    return Ok(None);
                }
                finished = true;
                continue;
            }
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok(socket) => return Ok(Some(socket)),
            // The connecting side went away, or a signal: wait on.
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                ) => {}
            Err(error) => return Err(format!("accepting the trace connection failed: {error}")),
        }
    }
}

/// Whether a connection waits on the listener, asked of the kernel (the
/// runtime's readiness may not have caught up yet).
fn connection_waiting(listener: &UnixSeqpacketListener) -> bool {
    let mut poll = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, and the listener's descriptor stays open
    // for the call; a zero timeout never blocks.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & libc::POLLIN != 0
}

/// Whether more messages wait on the stream now (asked of the kernel).
fn readable_now(socket: &UnixSeqpacket) -> bool {
    let mut poll = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for an open descriptor; a zero timeout
    // never blocks.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & libc::POLLIN != 0
}

/// Reads runsc's handshake and answers it; says why when it is not one.
async fn handshake(
    socket: &UnixSeqpacket,
    buffer: &mut [u8],
    stop: &CancellationToken,
) -> Result<(), String> {
    let received = tokio::select! {
        biased;
        _ = stop.cancelled() => return Err("the sandbox sent no trace handshake".to_string()),
        received = socket.recv(buffer) => received,
    };
    let info = received.map_err(|error| format!("reading the trace handshake failed: {error}"))?;
    let length = info.bytes_read();
    if length == 0 {
        return Err("the sandbox closed its trace before the handshake".to_string());
    }
    if info.truncated() || length >= buffer.len() {
        return Err("the trace handshake is longer than any runsc sends".to_string());
    }
    let theirs = wire::Handshake::decode(&buffer[..length])
        .map_err(|error| format!("the trace handshake is not a handshake message: {error}"))?;
    if theirs.version < 1 {
        return Err(format!(
            "the trace handshake gives version {}, not a version of runsc's protocol",
            theirs.version
        ));
    }
    let ours = wire::Handshake {
        version: wire::READER_VERSION,
    };
    socket
        .send(&ours.encode_to_vec())
        .await
        .map_err(|error| format!("answering the trace handshake failed: {error}"))?;
    Ok(())
}
