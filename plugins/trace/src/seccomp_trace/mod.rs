//! What a program tried under runc, read with seccomp user notification.
//!
//! A traced container's seccomp profile names a `listenerPath` and gives
//! the calls that matter ([`policy::NOTIFIED`]) the action
//! `SCMP_ACT_NOTIFY`. runc installs the filter just before it executes the
//! program, connects to that Unix stream socket, and sends the container's
//! state (JSON) with the filter's notify descriptor (`SCM_RIGHTS`); from
//! then on each notified call of the container waits for an answer.
//! [`SeccompTrace::listen`] binds the socket; a thread of its own accepts
//! runc's one connection and serves the descriptor: it receives each
//! call, reads its arguments from the process's memory, answers exactly
//! the verdict the untraced profile would give ([`policy::verdict`]:
//! continue, or EPERM), and records the event as the gVisor reader would.
//! Calls before runc's exec of the program are runc's own: answered, not
//! recorded.
//!
//! Soundness. A listener that fails while the program runs leaves its
//! notified calls failing (ENOSYS) or waiting: results that are not the
//! program's. [`SeccompTrace::finish`] therefore says whether the listener
//! failed (a fault); the backend makes such a run a sandbox error. No
//! connection from runc at all is a fault too: the filter the run needed
//! was not applied.
//!
//! Opens (`open`, `openat`, `openat2`, `creat`) are performed by the
//! listener itself on the path it copied once, with the calling thread's
//! credentials, and the descriptor handed back ([`open`]): their events
//! name what was opened, whatever the program's threads write meanwhile,
//! and carry the result. Every other call's arguments (paths, addresses)
//! are read from the program's memory while it runs, so a second thread
//! could change them between the read and the kernel's: such an event is
//! marked `unverified`, and a call whose being an event at all was decided
//! on such memory (an open left to the kernel, a `sendmsg`) takes its kind
//! out of the trace's kinds. The kinds come from the call numbers and are
//! exact. A call the listener lets run (continue) is run by the kernel
//! after the answer, so its result is not seen: such events have no
//! `result`; a refused call's is its errno.

mod events;
mod open;
pub mod policy;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use progscore_sandbox::behaviour::{
    ActionKind, Behaviour, BehaviourEvent, BehaviourTrace, PathPattern,
};
use tokio::sync::oneshot;

use crate::gvisor_trace::reader::{errno_name, path_event};
use crate::tracer_hold::{ListenerClock, TracerHold};
use events::Target;
use policy::Verdict;

/// The socket's name in the caller's folder.
const SOCKET_NAME: &str = "seccomp.sock";

/// The longest socket path a `sockaddr_un` holds (108 bytes with the NUL).
const MAX_SOCKET_PATH: usize = 107;

/// How long runc may take to send the state once connected.
const STATE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the thread may take to end once told to stop.
const STOP_GRACE: Duration = Duration::from_secs(2);

const RUNNING: u8 = 0;
const FINISHING: u8 = 1;
const STOP: u8 = 2;

/// What the listener's thread ends with.
#[derive(Debug)]
struct Ended {
    behaviour: Behaviour,
    fault: Option<String>,
}

/// A seccomp listener for one runc container: listening, then serving the
/// notify descriptor on a thread of its own. Dropping it stops the thread
/// (the container's notified calls then fail with ENOSYS) and removes the
/// socket.
#[derive(Debug)]
pub struct SeccompTrace {
    socket_path: PathBuf,
    /// The path to give runc (the socket, or reached through `_folder`).
    endpoint: PathBuf,
    /// The socket's folder, held open when its path is too long for a
    /// Unix socket.
    _folder: Option<std::fs::File>,
    state: Arc<AtomicU8>,
    wake: Arc<OwnedFd>,
    ended: Option<oneshot::Receiver<Ended>>,
    /// The time the program's calls may have waited for the listener.
    hold: Arc<TracerHold>,
}

impl SeccompTrace {
    /// Binds `dir/seccomp.sock` and starts serving it on a thread. Reads of
    /// paths matching `sensitive` are recorded; writes always are. A path
    /// longer than a Unix socket allows is bound and named through the
    /// folder's descriptor (`/proc/PID/fd/N/seccomp.sock`), which runc, as
    /// root on this host, can follow.
    pub fn listen(dir: &Path, sensitive: Vec<PathPattern>) -> io::Result<SeccompTrace> {
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
        let listener = UnixListener::bind(&bind_path).map_err(|error| {
            io::Error::new(
                error.kind(),
                format!(
                    "binding the seccomp listener {}: {error}",
                    socket_path.display()
                ),
            )
        })?;
        // From here on, dropping `trace` removes the socket.
        let mut trace = SeccompTrace {
            socket_path,
            endpoint,
            _folder: folder,
            state: Arc::new(AtomicU8::new(RUNNING)),
            wake: Arc::new(eventfd()?),
            ended: None,
            hold: TracerHold::for_listener(&dir),
        };
        listener.set_nonblocking(true)?;
        let (sender, receiver) = oneshot::channel();
        let state = trace.state.clone();
        let wake = trace.wake.clone();
        let hold = trace.hold.clone();
        std::thread::Builder::new()
            .name("seccomp-trace".into())
            .spawn(move || {
                let ended = serve(&listener, &state, &wake, &sensitive, hold);
                let _ = sender.send(ended);
            })?;
        trace.ended = Some(receiver);
        Ok(trace)
    }

    /// The `listenerPath` to put in the container's seccomp profile.
    pub fn listener_path(&self) -> &Path {
        &self.endpoint
    }

    /// The time the program's calls may have waited for the listener: for
    /// the program's window.
    pub fn hold(&self) -> Arc<TracerHold> {
        self.hold.clone()
    }

    /// The behaviour traced, once the container is gone, and the listener's
    /// fault, if it failed while the program ran (or runc never connected):
    /// then the run's results are not the program's own. Waits up to
    /// `grace` for the last of the container's processes to leave the
    /// filter; a trace still served then is stopped and marked incomplete.
    pub async fn finish(mut self, grace: Duration) -> (Behaviour, Option<String>) {
        let Some(mut ended) = self.ended.take() else {
            let why = "the seccomp listener was not started";
            return (Behaviour::not_traced(why), Some(why.to_string()));
        };
        self.signal(FINISHING);
        let ended = match tokio::time::timeout(grace, &mut ended).await {
            Ok(ended) => ended,
            Err(_) => {
                self.signal(STOP);
                tokio::time::timeout(STOP_GRACE, ended)
                    .await
                    .unwrap_or_else(|_| {
                        Ok(Ended {
                            behaviour: Behaviour::not_traced("the seccomp listener did not stop"),
                            fault: Some("the seccomp listener did not stop".into()),
                        })
                    })
            }
        };
        match ended {
            Ok(ended) => (ended.behaviour, ended.fault),
            Err(_) => {
                let why = "the seccomp listener's thread failed (panicked)";
                (Behaviour::not_traced(why), Some(why.to_string()))
            }
        }
    }

    fn signal(&self, state: u8) {
        self.state.fetch_max(state, Ordering::SeqCst);
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd we own.
        unsafe {
            libc::write(
                self.wake.as_raw_fd(),
                (&raw const one).cast(),
                std::mem::size_of::<u64>(),
            );
        }
    }
}

impl Drop for SeccompTrace {
    fn drop(&mut self) {
        self.signal(STOP);
        match std::fs::remove_file(&self.socket_path) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => {
                let path = self.socket_path.display();
                tracing::warn!(%path, %error, "could not remove a seccomp listener's socket");
            }
        }
    }
}

fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the descriptor is owned from here on.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Empties the eventfd (it is non-blocking).
fn drain(wake: &OwnedFd) {
    let mut value: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64.
    unsafe {
        libc::read(
            wake.as_raw_fd(),
            (&raw mut value).cast(),
            std::mem::size_of::<u64>(),
        );
    }
}

/// Polls `fds` (with POLLIN) until one is ready; their `revents`.
fn poll(fds: &[RawFd], timeout_ms: i32) -> io::Result<Vec<i16>> {
    let mut polls: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: `polls` holds valid pollfds for the call.
        let ready =
            unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, timeout_ms) };
        if ready >= 0 {
            return Ok(polls.iter().map(|poll| poll.revents).collect());
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// The thread: runc's connection, its descriptor, the calls.
fn serve(
    listener: &UnixListener,
    state: &AtomicU8,
    wake: &OwnedFd,
    sensitive: &[PathPattern],
    hold: Arc<TracerHold>,
) -> Ended {
    let fail = |why: String| Ended {
        behaviour: Behaviour::not_traced(why.clone()),
        fault: Some(why),
    };
    let stream = match accept(listener, state, wake) {
        Ok(Some(stream)) => stream,
        Ok(None) => {
            return fail(
                "runc never connected to the seccomp listener: the filter the trace needs \
                 was not applied"
                    .into(),
            );
        }
        Err(why) => return fail(why),
    };
    let notify = match receive_notify_fd(&stream) {
        Ok(fd) => fd,
        Err(why) => return fail(why),
    };
    drop(stream);
    let mut trace = BehaviourTrace::new(ActionKind::ALL.to_vec());
    // Opens take the program's umask on this thread only; without a
    // thread-private umask, every open is left to the kernel.
    let performs_opens = match open::own_umask() {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(%error, "the seccomp listener leaves opens to the kernel");
            false
        }
    };
    let fault = Notifications {
        notify: &notify,
        trace: &mut trace,
        sensitive,
        program_start: None,
        performs_opens,
    }
    .serve(state, wake, ListenerClock::new(hold));
    if let Some(fault) = &fault {
        trace.mark_incomplete(format!("the seccomp listener failed: {fault}"));
    }
    Ended {
        behaviour: Behaviour::Traced(trace),
        fault,
    }
}

/// runc's one connection, or `None` when it made none by the time the
/// container was gone.
fn accept(
    listener: &UnixListener,
    state: &AtomicU8,
    wake: &OwnedFd,
) -> Result<Option<UnixStream>, String> {
    loop {
        if state.load(Ordering::SeqCst) == STOP {
            return Ok(None);
        }
        let finishing = state.load(Ordering::SeqCst) == FINISHING;
        match listener.accept() {
            Ok((stream, _)) => return Ok(Some(stream)),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                // runc connects before it lets the program run: once the
                // container is gone, a connection waits or was never made.
                if finishing {
                    return Ok(None);
                }
            }
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                ) => {}
            Err(error) => return Err(format!("accepting runc's connection failed: {error}")),
        }
        poll(&[listener.as_raw_fd(), wake.as_raw_fd()], -1)
            .map_err(|error| format!("waiting for runc's connection failed: {error}"))?;
        drain(wake);
    }
}

/// Reads runc's message (the container's state) and the notify descriptor
/// with it.
fn receive_notify_fd(stream: &UnixStream) -> Result<OwnedFd, String> {
    stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(STATE_TIMEOUT)))
        .map_err(|error| format!("configuring runc's connection failed: {error}"))?;
    let mut buffer = vec![0u8; 64 * 1024];
    // Room for a few descriptors: more than one is refused below.
    let mut control = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: buffer.as_mut_ptr().cast(),
        iov_len: buffer.len(),
    };
    // SAFETY: a zeroed msghdr is valid; its pointers are set below.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = std::mem::size_of_val(&control);
    let received = loop {
        // SAFETY: `message` points at live buffers of the lengths given.
        let received =
            unsafe { libc::recvmsg(stream.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC) };
        if received >= 0 {
            break received as usize;
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(format!("reading runc's seccomp message failed: {error}"));
        }
    };
    // Every descriptor received is owned, so that extras are closed.
    let mut fds: Vec<OwnedFd> = Vec::new();
    // SAFETY: the kernel filled `message`'s control buffer; the CMSG
    // macros walk it within msg_controllen.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&message);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(header).cast::<RawFd>();
                let count = ((*header).cmsg_len as usize - (data as usize - header as usize))
                    / std::mem::size_of::<RawFd>();
                for index in 0..count {
                    fds.push(OwnedFd::from_raw_fd(data.add(index).read_unaligned()));
                }
            }
            header = libc::CMSG_NXTHDR(&message, header);
        }
    }
    if message.msg_flags & libc::MSG_CTRUNC != 0 || fds.len() != 1 {
        return Err(format!(
            "runc's seccomp message carries {} descriptors, not its one notify descriptor",
            fds.len()
        ));
    }
    let state: serde_json::Value = serde_json::from_slice(&buffer[..received])
        .map_err(|error| format!("runc's seccomp message is not the container's state: {error}"))?;
    let names_seccomp_fd = state["fds"]
        .as_array()
        .is_some_and(|fds| fds.iter().any(|name| name == "seccompFd"));
    if !names_seccomp_fd {
        return Err("runc's seccomp message names no seccompFd".into());
    }
    let fd = fds.remove(0);
    let kind = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map(|link| link.to_string_lossy().into_owned())
        .unwrap_or_default();
    if kind != "anon_inode:seccomp notify" {
        return Err(format!(
            "the descriptor runc sent is not a seccomp notify descriptor ({kind})"
        ));
    }
    Ok(fd)
}

/// Serving the notify descriptor.
struct Notifications<'a> {
    notify: &'a OwnedFd,
    trace: &'a mut BehaviourTrace,
    sensitive: &'a [PathPattern],
    /// When runc executed the program: calls before it are runc's.
    program_start: Option<Instant>,
    /// Whether this thread can perform opens for the program.
    performs_opens: bool,
}

/// What became of an open the listener tried to perform.
enum Performed {
    /// Answered (and recorded), or the call is gone.
    Answered,
    /// Left to the kernel, for this reason.
    /// Why, and the path as the program spelled it once decoded.
    Kernel(String),
}

impl Notifications<'_> {
    /// Serves calls until every process of the filter is gone (or the stop);
    /// the fault, if the listener failed.
    /// `clock` bounds the time calls wait for this thread.
    fn serve(
        mut self,
        state: &AtomicU8,
        wake: &OwnedFd,
        mut clock: ListenerClock,
    ) -> Option<String> {
        loop {
            clock.waiting();
            let ready = poll(&[self.notify.as_raw_fd(), wake.as_raw_fd()], -1);
            clock.woke();
            let ready = match ready {
                Ok(ready) => ready,
                Err(error) => return Some(format!("polling the notify descriptor: {error}")),
            };
            if ready[1] != 0 {
                drain(wake);
                if state.load(Ordering::SeqCst) == STOP {
                    self.trace.mark_incomplete(
                        "processes of the container were still in its seccomp filter when the \
                         trace stopped",
                    );
                    return None;
                }
            }
            if ready[0] & libc::POLLIN != 0 {
                if let Err(fault) = self.one() {
                    return Some(fault);
                }
            } else if ready[0] & (libc::POLLHUP | libc::POLLERR) != 0 {
                // Every process of the filter is gone.
                return None;
            } else if ready[0] & libc::POLLNVAL != 0 {
                return Some("the notify descriptor is not valid".into());
            }
        }
    }

    /// Receives, decides, records and answers one call.
    fn one(&mut self) -> Result<(), String> {
        let fd = self.notify.as_raw_fd();
        // SAFETY: the kernel wants the request zeroed; all-zero is valid.
        let mut request: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: RECV fills a seccomp_notif we own.
        let received = unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut request) };
        if received < 0 {
            let error = io::Error::last_os_error();
            return match error.raw_os_error() {
                // The caller went (killed) before its call was received.
                Some(libc::ENOENT) | Some(libc::EINTR) => Ok(()),
                _ => Err(format!("receiving a notified call failed: {error}")),
            };
        }
        let data = request.data;
        let nr = i64::from(data.nr);
        // A call the listener cannot decode is refused as a kernel without
        // its ABI would: never run, so nothing to record, and no fault.
        let undecodable = policy::undecodable(data.arch, nr);
        let verdict = if undecodable {
            Some(Verdict::Errno(policy::ENOSYS))
        } else {
            policy::verdict(data.arch, nr, &data.args)
        };
        let mut left_to_kernel = None;
        if verdict == Some(Verdict::Continue)
            && !undecodable
            && self.performs_opens
            && let Some(start) = self.program_start
            && matches!(
                nr,
                libc::SYS_open | libc::SYS_openat | libc::SYS_openat2 | libc::SYS_creat
            )
        {
            match self.perform_open(&request, nr, start)? {
                Performed::Answered => return Ok(()),
                Performed::Kernel(why) => {
                    tracing::debug!(why = why.as_str(), "an open left to the kernel");
                    left_to_kernel = Some(why);
                }
            }
        }
        let action = match (verdict, self.program_start) {
            (Some(_), Some(_)) if !undecodable => {
                let target = Process {
                    pid: request.pid as i32,
                };
                events::action(nr, &data.args, &target, self.sensitive)
            }
            _ => None,
        };
        // The arguments were read: they are the call's only if it still waits.
        let mut id = request.id;
        // SAFETY: ID_VALID reads a u64 we own.
        let valid = unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) };
        if valid < 0 {
            // Interrupted (it is received again once restarted) or gone.
            return Ok(());
        }
        // A call the listener cannot decide is refused, and the run fails
        // (a notified call it does not know: the profile and it disagree).
        let answer = verdict.unwrap_or(Verdict::Errno(policy::EPERM));
        let mut response = libc::seccomp_notif_resp {
            id: request.id,
            val: 0,
            error: 0,
            flags: 0,
        };
        match answer {
            Verdict::Continue => response.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
            Verdict::Errno(errno) => response.error = -errno,
        }
        // SAFETY: SEND reads a seccomp_notif_resp we own.
        let sent = unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut response) };
        if sent < 0 {
            let error = io::Error::last_os_error();
            return match error.raw_os_error() {
                // Interrupted or gone after the check: not run.
                Some(libc::ENOENT) => Ok(()),
                _ => Err(format!("answering a notified call failed: {error}")),
            };
        }
        if verdict.is_none() {
            return Err(format!(
                "a call the listener cannot decide was notified (architecture {:#x}, number {nr})",
                data.arch
            ));
        }
        match self.program_start {
            None if matches!(nr, libc::SYS_execve | libc::SYS_execveat) => {
                // runc executing the program: its start.
                self.program_start = Some(Instant::now());
            }
            None => {}
            Some(start) => {
                if matches!(nr, libc::SYS_link | libc::SYS_linkat) {
                    self.trace.mark_paths_unresolved(
                        "the program made a hard link, a second name for an object that no \
                         path resolution tells from its first",
                    );
                }
                // What the kernel runs after "continue" it reads again: the
                // program may have changed it since the listener read it.
                let ran_on_memory = answer == Verdict::Continue && events::reads_memory(nr);
                if let Some(traced) = action {
                    let at_ms = start.elapsed().as_millis() as u64;
                    let result = match answer {
                        Verdict::Continue => None,
                        Verdict::Errno(errno) => Some(errno_name(i64::from(errno))),
                    };
                    let mut event = match &traced.path {
                        Some(path) => path_event(at_ms, traced.action, result, path),
                        None => {
                            let mut event = BehaviourEvent::new(at_ms, traced.action, result);
                            event.unresolved = traced.unresolved;
                            event
                        }
                    };
                    event.unverified = ran_on_memory;
                    self.trace.record(event);
                } else if ran_on_memory && let Some(kind) = events::event_decided_by_memory(nr) {
                    // Not an event by what the listener read (a read of a
                    // path that is not sensitive, a send naming no one):
                    // the kernel may have read another.
                    let reason = match left_to_kernel {
                        Some(why) => format!(
                            "an open was left to the kernel ({why}), which read its path \
                             after the listener did"
                        ),
                        None if kind == ActionKind::FsOpen => "an open was left to the kernel, \
                            which read its path after the listener did"
                            .to_string(),
                        None => "a sendmsg or sendmmsg, whose destination the kernel read \
                                 after the listener did"
                            .to_string(),
                    };
                    self.trace.stop_covering(kind, reason);
                }
            }
        }
        Ok(())
    }
}

impl Notifications<'_> {
    /// Performs open call `nr` for the program and answers it, or says why
    /// it is left to the kernel.
    fn perform_open(
        &mut self,
        request: &libc::seccomp_notif,
        nr: i64,
        start: Instant,
    ) -> Result<Performed, String> {
        let pid = request.pid as i32;
        let target = Process { pid };
        let call = match open::decode(nr, &request.data.args, &|address, len| {
            target.read(address, len)
        }) {
            Ok(call) => call,
            Err(why) => return Ok(Performed::Kernel(why.to_string())),
        };
        // Why, with the path the program gave (bounded): what a reader of
        // the trace needs to tell which open lost the kind its coverage.
        let spelled = |why: &str| {
            format!(
                "{why}: {}",
                progscore_sandbox::behaviour::bounded_text(&String::from_utf8_lossy(&call.path))
            )
        };
        let caller = match open::Caller::open(pid) {
            Ok(caller) => caller,
            Err(why) => return Ok(Performed::Kernel(spelled(why))),
        };
        // The thread id names the caller only while its call waits.
        if !self.still_waiting(request.id) {
            return Ok(Performed::Answered);
        }
        let (result, path, access, event) = match open::perform(&caller, &call, self.sensitive)? {
            open::Outcome::Kernel(why) => return Ok(Performed::Kernel(spelled(why))),
            open::Outcome::Done {
                result,
                path,
                access,
                event,
            } => (result, path, access, event),
        };
        let errno = match result {
            Ok(fd) => {
                match open::hand_back(
                    self.notify.as_raw_fd(),
                    request.id,
                    &fd,
                    open::cloexec(&call),
                ) {
                    Ok(_) => 0,
                    // Gone (killed, or interrupted: it is notified again).
                    Err(libc::ENOENT) => return Ok(Performed::Answered),
                    // Not installed (the program's descriptor limit): the
                    // call still waits, for this errno.
                    Err(errno @ libc::EMFILE) => {
                        if !self.answer(request.id, Verdict::Errno(errno))? {
                            return Ok(Performed::Answered);
                        }
                        errno
                    }
                    // Refused for another reason: the kernel's to run.
                    Err(_) => {
                        return Ok(Performed::Kernel(spelled(
                            "the descriptor could not be handed over",
                        )));
                    }
                }
            }
            Err(errno) => {
                if !self.answer(request.id, Verdict::Errno(errno))? {
                    return Ok(Performed::Answered);
                }
                errno
            }
        };
        if event {
            let at_ms = start.elapsed().as_millis() as u64;
            let action = open::action(&path, access);
            let result = Some(errno_name(i64::from(errno)));
            self.trace.record(path_event(at_ms, action, result, &path));
        }
        Ok(Performed::Answered)
    }

    /// Whether call `id` still waits for its answer.
    fn still_waiting(&self, id: u64) -> bool {
        let mut id = id;
        // SAFETY: ID_VALID reads a u64 we own.
        unsafe {
            libc::ioctl(
                self.notify.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &mut id,
            ) >= 0
        }
    }

    /// Sends `verdict` for call `id`; `false` when the call is gone.
    fn answer(&self, id: u64, verdict: Verdict) -> Result<bool, String> {
        let mut response = libc::seccomp_notif_resp {
            id,
            val: 0,
            error: 0,
            flags: 0,
        };
        match verdict {
            Verdict::Continue => response.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
            Verdict::Errno(errno) => response.error = -errno,
        }
        // SAFETY: SEND reads a seccomp_notif_resp we own.
        let sent = unsafe {
            libc::ioctl(
                self.notify.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND,
                &mut response,
            )
        };
        if sent < 0 {
            let error = io::Error::last_os_error();
            return match error.raw_os_error() {
                Some(libc::ENOENT) => Ok(false),
                _ => Err(format!("answering a notified call failed: {error}")),
            };
        }
        Ok(true)
    }
}

/// A process of the container, read through `process_vm_readv` and /proc.
struct Process {
    pid: i32,
}

impl Target for Process {
    fn read(&self, address: u64, len: usize) -> Option<Vec<u8>> {
        let mut buffer = vec![0u8; len];
        let mut done = 0;
        // Page by page: a read stops at the first page it cannot read.
        while done < len {
            let at = address.checked_add(done as u64)?;
            let page_left = 4096 - (at % 4096) as usize;
            let chunk = page_left.min(len - done);
            let local = libc::iovec {
                iov_base: buffer[done..].as_mut_ptr().cast(),
                iov_len: chunk,
            };
            let remote = libc::iovec {
                iov_base: at as *mut libc::c_void,
                iov_len: chunk,
            };
            // SAFETY: the local iovec is within `buffer`; the remote one is
            // the other process's, which the kernel checks.
            let read = unsafe { libc::process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
            if read <= 0 {
                break;
            }
            done += read as usize;
        }
        if done == 0 {
            return None;
        }
        buffer.truncate(done);
        Some(buffer)
    }

    fn cwd(&self) -> Option<String> {
        link(&format!("/proc/{}/cwd", self.pid))
    }

    fn fd_path(&self, fd: i32) -> Option<String> {
        link(&format!("/proc/{}/fd/{fd}", self.pid))
    }

    fn exe(&self) -> Option<String> {
        link(&format!("/proc/{}/exe", self.pid))
    }

    /// Read through the process's root (`/proc/PID/root`): the folders
    /// before the last name are resolved already, so the host follows no
    /// symlink of the program's on the way.
    fn read_link(&self, path: &str) -> Result<Option<String>, ()> {
        let on_host = format!("/proc/{}/root{path}", self.pid);
        match std::fs::symlink_metadata(&on_host) {
            Ok(metadata) if metadata.file_type().is_symlink() => std::fs::read_link(&on_host)
                .map(|target| Some(target.to_string_lossy().into_owned()))
                .map_err(|_| ()),
            Ok(_) => Ok(None),
            // A missing name, or a file where a folder was named: the
            // call fails, reaching no object but its name.
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ENAMETOOLONG)
                ) =>
            {
                Ok(None)
            }
            Err(_) => Err(()),
        }
    }
}

fn link(path: &str) -> Option<String> {
    std::fs::read_link(path)
        .ok()
        .map(|target| target.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests;
