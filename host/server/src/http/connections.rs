//! The server's connections: how many may be open at once, and how long a
//! client may hold one without a request on it.
//!
//! - `[serve] max_connections`: one connection more is answered 503 with
//!   `Retry-After` and closed at once (what it sent is read and dropped for
//!   a moment, so that the answer is not lost to a reset); the refusals are
//!   logged at most once a second, with their count.
//! - `[serve] idle_timeout`: a connection with no request on it (a new one
//!   before its first byte, a kept-alive one between requests) is closed
//!   once it has been idle that long. Nothing was asked, so nothing is
//!   answered.
//! - `[serve] header_timeout`: from a request's first byte, its head must
//!   arrive within this time, however it trickles; else the client is
//!   answered 408 and the connection closed.
//!
//! hyper's own `header_read_timeout` counts from when the server is ready
//! for a request, so it cannot tell an idle kept-alive connection from a
//! slow head, and it closes without an answer; hence the clock here, which
//! sees both the bytes that arrive ([`GuardedStream`]) and the requests
//! being served ([`mark_request`]). A request being served (its body read,
//! its program run, its answer streamed) is never cut by these; its body
//! has its own deadline (`body_timeout`, [`crate::http::body_limits`]).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::settings::ConnectionLimits;
use axum::Router;
use axum::extract::Request;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

use crate::http::hold::hold_until_sent;

/// How long a connection past the cap is given to read its 503.
const TURN_AWAY_TIME: Duration = Duration::from_secs(1);

/// Connections past the cap being answered at once; past these, one is
/// closed without an answer (a flood must not grow tasks without end).
const MAX_TURNING_AWAY: usize = 64;

/// Serves `app` on `listener` within `limits` until `shutdown` resolves;
/// then stops accepting, lets the requests on each connection finish, and
/// returns once every connection has closed.
pub(crate) async fn serve(
    listener: TcpListener,
    limits: ConnectionLimits,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let listener = GuardedListener::new(listener, limits);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<ClientConnection>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

/// A listener that admits at most `max_connections` open connections and
/// gives each the idle and header clocks.
pub(crate) struct GuardedListener {
    listener: TcpListener,
    limits: ConnectionLimits,
    open: Arc<Semaphore>,
    turning_away: Arc<Semaphore>,
    refusals: RefusalLog,
}

impl GuardedListener {
    pub(crate) fn new(listener: TcpListener, limits: ConnectionLimits) -> GuardedListener {
        GuardedListener {
            listener,
            limits,
            open: Arc::new(Semaphore::new(limits.max_connections)),
            turning_away: Arc::new(Semaphore::new(MAX_TURNING_AWAY)),
            refusals: RefusalLog::default(),
        }
    }

    /// Answers a connection past the cap 503 and closes it, in a task of
    /// its own bounded in time; past [`MAX_TURNING_AWAY`] of those, closes
    /// it at once.
    fn turn_away(&mut self, stream: TcpStream, peer: SocketAddr) {
        let max = self.limits.max_connections;
        self.refusals.note(peer, max);
        let Ok(slot) = self.turning_away.clone().try_acquire_owned() else {
            return;
        };
        let answer = raw_answer(
            "503 Service Unavailable",
            &[("retry-after", "1")],
            &format!(
                "the server has as many connections open as it accepts ([serve] max_connections = {max}); try again shortly"
            ),
        );
        tokio::spawn(async move {
            let _slot = slot;
            let _ = tokio::time::timeout(TURN_AWAY_TIME, answer_and_close(stream, answer)).await;
        });
    }
}

impl Listener for GuardedListener {
    type Io = GuardedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (GuardedStream, SocketAddr) {
        loop {
            // axum's accept logs and retries what fails (out of file
            // descriptors...).
            let (stream, peer) = Listener::accept(&mut self.listener).await;
            match self.open.clone().try_acquire_owned() {
                Ok(slot) => {
                    return (
                        GuardedStream::new(stream, peer, Some(slot), &self.limits),
                        peer,
                    );
                }
                Err(_) => self.turn_away(stream, peer),
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// Writes `answer`, closes the writing side, and reads what the client
/// sent until it closes too.
async fn answer_and_close(mut stream: TcpStream, answer: Vec<u8>) -> io::Result<()> {
    stream.write_all(&answer).await?;
    stream.shutdown().await?;
    let mut sink = [0u8; 4096];
    while stream.read(&mut sink).await? > 0 {}
    Ok(())
}

/// An HTTP/1.1 answer written by hand (where hyper has no request to
/// answer): `status`, `headers`, a JSON error saying `message`, and
/// `Connection: close`.
fn raw_answer(status: &str, headers: &[(&str, &str)], message: &str) -> Vec<u8> {
    let body = serde_json::json!({"error": {"message": message}}).to_string();
    let mut answer = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        answer.push_str(&format!("{name}: {value}\r\n"));
    }
    answer.push_str("\r\n");
    answer.push_str(&body);
    answer.into_bytes()
}

/// Connections refused at the cap: logged at most once a second, with how
/// many were refused since.
#[derive(Default)]
struct RefusalLog {
    unlogged: u64,
    logged_at: Option<Instant>,
}

impl RefusalLog {
    fn note(&mut self, peer: SocketAddr, max: usize) {
        self.unlogged += 1;
        if self
            .logged_at
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1))
        {
            tracing::warn!(
                %peer,
                refused = self.unlogged,
                max_connections = max,
                "connections refused (answered 503): [serve] max_connections are open"
            );
            self.unlogged = 0;
            self.logged_at = Some(Instant::now());
        }
    }
}

/// What a connection is waiting for, seen from its bytes and requests.
#[derive(Debug)]
pub(crate) struct ConnectionClock {
    state: Mutex<ClockState>,
}

#[derive(Debug)]
struct ClockState {
    /// Requests being served (their answer not yet sent).
    requests: usize,
    /// Since when no request has been served.
    idle_since: Instant,
    /// When the first byte of a request not yet being served arrived.
    head_since: Option<Instant>,
    /// Who reads the connection, woken when it goes idle (so that its
    /// clock starts).
    reader: Option<Waker>,
}

/// What a connection with nothing to read is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    /// A request is being served: no clock runs.
    Busy,
    /// A request, with nothing of it sent yet, since then.
    Idle(Instant),
    /// The rest of a request's head, whose first byte came then.
    Head(Instant),
}

impl ConnectionClock {
    fn new() -> Arc<ConnectionClock> {
        Arc::new(ConnectionClock {
            state: Mutex::new(ClockState {
                requests: 0,
                idle_since: Instant::now(),
                head_since: None,
                reader: None,
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes arrived: when no request is being served, a head has begun.
    fn arrived(&self) {
        let mut state = self.state();
        if state.requests == 0 && state.head_since.is_none() {
            state.head_since = Some(Instant::now());
        }
    }

    /// What the connection waits for; `reader` is woken when it changes to
    /// idle.
    fn waiting(&self, reader: &Waker) -> Waiting {
        let mut state = self.state();
        if !state.reader.as_ref().is_some_and(|w| w.will_wake(reader)) {
            state.reader = Some(reader.clone());
        }
        match (state.requests, state.head_since) {
            (0, Some(since)) => Waiting::Head(since),
            (0, None) => Waiting::Idle(state.idle_since),
            _ => Waiting::Busy,
        }
    }

    /// A request is being served until the mark is dropped.
    fn begin_request(self: &Arc<Self>) -> RequestOnConnection {
        let mut state = self.state();
        state.requests += 1;
        state.head_since = None;
        RequestOnConnection(self.clone())
    }
}

/// A request being served on a connection; dropped when its answer has
/// been sent (or dropped).
struct RequestOnConnection(Arc<ConnectionClock>);

impl Drop for RequestOnConnection {
    fn drop(&mut self) {
        let reader = {
            let mut state = self.0.state();
            state.requests = state.requests.saturating_sub(1);
            if state.requests > 0 {
                return;
            }
            state.idle_since = Instant::now();
            state.head_since = None;
            state.reader.take()
        };
        if let Some(reader) = reader {
            reader.wake();
        }
    }
}

/// A connection's information for its requests: the peer and the clock.
#[derive(Debug, Clone)]
pub(crate) struct ClientConnection {
    #[allow(dead_code)]
    pub(crate) peer: SocketAddr,
    clock: Arc<ConnectionClock>,
}

impl Connected<IncomingStream<'_, GuardedListener>> for ClientConnection {
    fn connect_info(stream: IncomingStream<'_, GuardedListener>) -> Self {
        ClientConnection {
            peer: *stream.remote_addr(),
            clock: stream.io().clock.clone(),
        }
    }
}

/// Middleware: marks the request's connection busy until its answer has
/// been sent (nothing for a request that came otherwise, as in tests).
pub(crate) async fn mark_request(request: Request, next: Next) -> Response {
    let on = request
        .extensions()
        .get::<ConnectInfo<ClientConnection>>()
        .map(|ConnectInfo(connection)| connection.clock.begin_request());
    let response = next.run(request).await;
    match on {
        Some(on) => hold_until_sent(response, on),
        None => response,
    }
}

/// An accepted connection under the idle and header clocks, holding its
/// place among `max_connections` until it is closed.
pub(crate) struct GuardedStream<S = TcpStream> {
    io: S,
    peer: SocketAddr,
    clock: Arc<ConnectionClock>,
    idle_timeout: Duration,
    header_timeout: Duration,
    timer: Pin<Box<Sleep>>,
    /// The last write could not go out: the client is not reading, and
    /// hyper may still hold an answer's bytes.
    write_blocked: bool,
    _slot: Option<OwnedSemaphorePermit>,
}

impl<S> GuardedStream<S> {
    fn new(
        io: S,
        peer: SocketAddr,
        slot: Option<OwnedSemaphorePermit>,
        limits: &ConnectionLimits,
    ) -> GuardedStream<S> {
        GuardedStream {
            io,
            peer,
            clock: ConnectionClock::new(),
            idle_timeout: limits.idle_timeout,
            header_timeout: limits.header_timeout,
            timer: Box::pin(tokio::time::sleep(limits.idle_timeout)),
            write_blocked: false,
            _slot: slot,
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for GuardedStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.clock.arrived();
                }
                return Poll::Ready(Ok(()));
            }
            Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
            Poll::Pending => {}
        }
        let (deadline, head) = match this.clock.waiting(cx.waker()) {
            Waiting::Busy => return Poll::Pending,
            Waiting::Idle(since) => (since + this.idle_timeout, false),
            Waiting::Head(since) => (since + this.header_timeout, true),
        };
        if this.timer.deadline() != deadline {
            this.timer.as_mut().reset(deadline);
        }
        if this.timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        if !head {
            tracing::debug!(
                peer = %this.peer,
                idle_timeout_s = this.idle_timeout.as_secs_f64(),
                "closed a connection idle for [serve] idle_timeout"
            );
            // The end of the stream: hyper closes an idle connection quietly.
            return Poll::Ready(Ok(()));
        }
        let message = format!(
            "the request head did not arrive within {} of its first byte ([serve] header_timeout)",
            humantime::format_duration(this.header_timeout)
        );
        // Best effort, never blocking: a client that does not read gets none.
        let answered = !this.write_blocked
            && matches!(
                Pin::new(&mut this.io)
                    .poll_write(cx, &raw_answer("408 Request Timeout", &[], &message)),
                Poll::Ready(Ok(_))
            );
        if answered {
            // What the client sent meanwhile is read and dropped: closing a
            // socket with unread bytes resets it, and the reset may reach
            // the client before the answer is read.
            let mut scratch = [0u8; 1024];
            for _ in 0..64 {
                let mut unread = ReadBuf::new(&mut scratch);
                match Pin::new(&mut this.io).poll_read(cx, &mut unread) {
                    Poll::Ready(Ok(())) if !unread.filled().is_empty() => continue,
                    _ => break,
                }
            }
        }
        tracing::info!(
            peer = %this.peer,
            header_timeout_s = this.header_timeout.as_secs_f64(),
            answered_408 = answered,
            "closed a connection: its request head did not arrive within [serve] header_timeout"
        );
        Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, message)))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for GuardedStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.io).poll_write(cx, buf);
        this.write_blocked = written.is_pending();
        written
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.write_blocked = written.is_pending();
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use axum::routing::get;

    use super::*;

    /// A server of one route (`GET /` answers "ok") within `limits`, on a
    /// loopback port; stopped when the returned sender is dropped.
    async fn start(limits: ConnectionLimits) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(axum::middleware::from_fn(mark_request));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(listener, limits, app, async move {
            let _ = stopped.await;
        }));
        (address, stop)
    }

    fn limits(header: u64, idle: u64, max_connections: usize) -> ConnectionLimits {
        ConnectionLimits {
            header_timeout: Duration::from_secs(header),
            idle_timeout: Duration::from_secs(idle),
            body_timeout: Duration::from_secs(30),
            max_connections,
        }
    }

    /// A blocking client connection whose reads give up after a generous
    /// bound (the events are waited on; this only keeps a broken server
    /// from hanging the test).
    fn connect(address: SocketAddr) -> std::net::TcpStream {
        let stream = std::net::TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        stream
    }

    /// Everything the server sends until it closes the connection (a
    /// reset after what it sent is a close too: the client may still be
    /// writing).
    fn read_to_close(mut stream: std::net::TcpStream) -> String {
        let mut received = Vec::new();
        match stream.read_to_end(&mut received) {
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(error) => panic!("the server did not close the connection: {error}"),
        }
        String::from_utf8_lossy(&received).into_owned()
    }

    fn ask(address: SocketAddr) -> String {
        let mut stream = connect(address);
        stream
            .write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .unwrap();
        read_to_close(stream)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_and_trickling_connections_are_let_go_while_others_are_answered() {
        let (address, _stop) = start(limits(2, 2, 64)).await;
        tokio::task::spawn_blocking(move || {
            // Sends nothing: closed, nothing answered.
            let idle = std::thread::spawn(move || read_to_close(connect(address)));
            // A head a byte at a time, a byte every 300 ms: answered 408.
            let trickling = std::thread::spawn(move || {
                let stream = connect(address);
                let writer = stream.try_clone().unwrap();
                let trickle = std::thread::spawn(move || {
                    let mut writer = writer;
                    for byte in b"GET / HTTP/1.1\r\nhost: x\r\nx-slow: "
                        .iter()
                        .cycle()
                        .take(400)
                    {
                        if writer.write_all(&[*byte]).is_err() {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(300));
                    }
                });
                let answer = read_to_close(stream);
                drop(trickle);
                answer
            });
            // A kept-alive connection, answered, then idle: closed.
            let kept_alive = std::thread::spawn(move || {
                let mut stream = connect(address);
                stream
                    .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
                    .unwrap();
                read_to_close(stream)
            });
            // Meanwhile an ordinary request is answered.
            assert!(ask(address).starts_with("HTTP/1.1 200"));
            assert_eq!(idle.join().unwrap(), "");
            let trickled = trickling.join().unwrap();
            assert!(
                trickled.starts_with("HTTP/1.1 408") && trickled.contains("header_timeout"),
                "{trickled:?}"
            );
            let kept = kept_alive.join().unwrap();
            assert!(
                kept.starts_with("HTTP/1.1 200") && kept.ends_with("ok"),
                "{kept:?}"
            );
            assert!(ask(address).starts_with("HTTP/1.1 200"));
        })
        .await
        .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn past_max_connections_a_connection_is_answered_503_and_closed() {
        let (address, _stop) = start(limits(30, 30, 1)).await;
        tokio::task::spawn_blocking(move || {
            let mut holding = connect(address);
            holding
                .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
                .unwrap();
            let mut answer = [0u8; 12];
            holding.read_exact(&mut answer).unwrap();
            assert_eq!(&answer, b"HTTP/1.1 200");
            // The one connection allowed is open: the next is turned away.
            let refused = ask(address);
            assert!(
                refused.starts_with("HTTP/1.1 503")
                    && refused.contains("retry-after: 1")
                    && refused.contains("max_connections = 1"),
                "{refused:?}"
            );
            drop(holding);
            // Once it is closed, a connection is served again.
            let served = (0..600)
                .map(|_| {
                    std::thread::sleep(Duration::from_millis(50));
                    ask(address)
                })
                .find(|answer| answer.starts_with("HTTP/1.1 200"));
            assert!(served.is_some(), "no connection was served again");
        })
        .await
        .unwrap();
    }
}
