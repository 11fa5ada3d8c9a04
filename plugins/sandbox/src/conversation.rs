//! Interactive runs: a program and an interactor, each in fresh sandboxes of
//! its own profile, case by case, the program's stdout the interactor's
//! stdin and the interactor's stdout the program's stdin.
//!
//! The composition is the contract's, once for every backend
//! ([`crate::converse::converse`]): the request is split into two runs, one per side, joined
//! by a [`Conversation`]. A backend that can run a side
//! ([`RunRequest::conversation`]) does three things only: it tells when it
//! has a place for the run ([`ConversationSide::placed`]: the interactor is
//! started only then, so a pair never waits on capacity the other holds),
//! it starts each case only once the other side reached the same case
//! ([`ConversationSide::begin`]), and it feeds the case's stdin from
//! [`LiveCase::stdin`] and copies its stdout to [`LiveCase::stdout`]. It
//! never runs a case of a conversation twice (no confirmation alone, no
//! rerun after an outage): the other side's case has ended by then.
//!
//! Each side's stdout goes straight into the other side's stdin through
//! an [`Outlet`]: one bounded pipe per direction, so a slow reader on one
//! side never holds the other direction up, and each write recorded in the
//! case's [`Transcript`] as it crosses (who wrote how many bytes when, and
//! when each side's output ended). The bytes themselves are each side's
//! stdout, kept in its event (bounded by its output limit: a cut side says
//! so there).

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::run::{MAX_TURNS, Side, Transcript, Turn};

/// One side's live ends of a case, from [`ConversationSide::begin`].
#[derive(Debug)]
pub struct LiveCase {
    /// This side's stdin, written by the other side as it writes: give it
    /// the container's stdin once that is open ([`Inlet::attach`]); drop it
    /// once this side's output ended (it reads no more).
    pub stdin: Inlet,
    /// Where this side's stdout goes, chunk by chunk as it is read; close
    /// it once the output ended ([`Outlet::close`]: the other side sees its
    /// end of file).
    pub stdout: Outlet,
}

/// A stdin as the conversation holds it: the container's writer, once
/// given, or closed.
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

enum PipeEnd {
    /// Not given yet: a write waits for it.
    Waiting,
    Open(Writer),
    Closed,
}

/// One direction: the reading side's stdin, written straight from the
/// writing side's output as it is read (no task between them: a pipe's
/// latency), bounded by the stdin's own buffer (a write waits while the
/// reader does not read, as a pipe's would).
struct Pipe {
    end: tokio::sync::Mutex<PipeEnd>,
    given: Notify,
    /// The reading side ended: nothing is delivered any more (a write into
    /// an ended container's stdin may neither fail nor finish).
    gone: CancellationToken,
}

impl std::fmt::Debug for Pipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pipe")
    }
}

impl Pipe {
    fn new() -> Arc<Pipe> {
        Arc::new(Pipe {
            end: tokio::sync::Mutex::new(PipeEnd::Waiting),
            given: Notify::new(),
            gone: CancellationToken::new(),
        })
    }
}

/// This side's stdin (see [`LiveCase::stdin`]).
#[derive(Debug)]
pub struct Inlet {
    pipe: Arc<Pipe>,
}

impl Inlet {
    /// Gives the container's stdin: the other side's writes go to it from
    /// now on. Closed at once when the other side's output already ended.
    pub async fn attach(&self, mut writer: Writer) {
        let mut end = self.pipe.end.lock().await;
        match *end {
            PipeEnd::Waiting => *end = PipeEnd::Open(writer),
            PipeEnd::Open(_) | PipeEnd::Closed => {
                drop(end);
                let _eof = writer.shutdown().await;
                return;
            }
        }
        drop(end);
        self.pipe.given.notify_waiters();
    }
}

impl Drop for Inlet {
    /// This side reads no more: the other side's writes are undelivered.
    fn drop(&mut self) {
        self.pipe.gone.cancel();
        self.pipe.given.notify_waiters();
    }
}

/// One side's stdout, straight into the other side's stdin, each write
/// recorded in the case's transcript as it crosses.
#[derive(Debug)]
pub struct Outlet {
    from: Side,
    pipe: Arc<Pipe>,
    line: Arc<Line>,
    undelivered: u64,
    closed: bool,
}

/// A case's transcript as both sides write it.
#[derive(Debug)]
struct Line {
    started: Instant,
    transcript: Mutex<Transcript>,
}

impl Line {
    fn record(&self, from: Side, bytes: usize) {
        let mut transcript = lock(&self.transcript);
        if transcript.turns.len() < MAX_TURNS {
            transcript.turns.push(Turn {
                from,
                at_us: micros_since(self.started),
                bytes: bytes as u64,
            });
        } else {
            transcript.turns_dropped += 1;
        }
    }

    fn ended(&self, side: Side, undelivered: u64) {
        let at = Some(micros_since(self.started));
        let mut transcript = lock(&self.transcript);
        match side {
            Side::Program => {
                transcript.program_ended_us = at;
                transcript.program_bytes_undelivered = undelivered;
            }
            Side::Interactor => {
                transcript.interactor_ended_us = at;
                transcript.interactor_bytes_undelivered = undelivered;
            }
        }
    }
}

impl Outlet {
    /// Sends one chunk of this side's output on: recorded, then written
    /// into the other side's stdin (waiting while it is not given yet, or
    /// full), or counted as undelivered once the other side stopped
    /// reading. Never fails: the caller keeps draining either way.
    pub async fn send(&mut self, chunk: &[u8]) -> Result<(), std::convert::Infallible> {
        self.line.record(self.from, chunk.len());
        let pipe = self.pipe.clone();
        let delivered = tokio::select! {
            biased;
            () = pipe.gone.cancelled() => false,
            delivered = write(&pipe, chunk) => delivered,
        };
        if !delivered {
            // What follows is kept in the writer's stdout only.
            self.undelivered += chunk.len() as u64;
        }
        Ok(())
    }

    /// This side's output ended: the other side sees its end of file, and
    /// the transcript when it ended.
    pub async fn close(mut self) {
        self.closed = true;
        self.line.ended(self.from, self.undelivered);
        let pipe = self.pipe.clone();
        let shut = async {
            let mut end = pipe.end.lock().await;
            if let PipeEnd::Open(mut writer) = std::mem::replace(&mut *end, PipeEnd::Closed) {
                let _eof = writer.shutdown().await;
            }
        };
        tokio::select! {
            biased;
            () = pipe.gone.cancelled() => {}
            () = shut => {}
        }
    }
}

/// Writes `chunk` into the pipe's stdin once it is given; `false` once it
/// cannot be delivered.
async fn write(pipe: &Pipe, chunk: &[u8]) -> bool {
    loop {
        let given = pipe.given.notified();
        tokio::pin!(given);
        given.as_mut().enable();
        let mut end = pipe.end.lock().await;
        match &mut *end {
            PipeEnd::Open(writer) => {
                let written = writer.write_all(chunk).await.is_ok() && writer.flush().await.is_ok();
                if !written {
                    *end = PipeEnd::Closed;
                }
                return written;
            }
            PipeEnd::Closed => return false,
            PipeEnd::Waiting => {
                drop(end);
                given.await;
            }
        }
    }
}

impl Drop for Outlet {
    /// An output that ended without [`Outlet::close`] (its reading
    /// failed): ended in the transcript, and the other side's stdin closed
    /// where it can be now.
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        self.line.ended(self.from, self.undelivered);
        if let Ok(mut end) = self.pipe.end.try_lock() {
            *end = PipeEnd::Closed;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Default)]
struct State {
    /// Per side: whether the backend has a place for its run.
    placed: [bool; 2],
    /// Per side: its run ended (it begins nothing more).
    finished: [bool; 2],
    /// Per side: the highest case it began.
    begun: [Option<usize>; 2],
    /// Per side: the live ends waiting for it, by case.
    live: [Vec<Option<LiveCase>>; 2],
    /// The transcripts of the cases both sides began.
    lines: Vec<Option<Arc<Line>>>,
}

/// Two runs joined case by case.
pub(crate) struct Conversation {
    cases: usize,
    state: Mutex<State>,
    changed: Notify,
}

impl Conversation {
    pub(crate) fn new(cases: usize) -> Arc<Conversation> {
        let mut state = State::default();
        for live in &mut state.live {
            live.resize_with(cases, || None);
        }
        state.lines.resize_with(cases, || None);
        Arc::new(Conversation {
            cases,
            state: Mutex::new(state),
            changed: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn finish(&self, side: Side) {
        self.lock().finished[side.slot()] = true;
        self.changed.notify_waiters();
    }

    /// Whether `side` got a place, or finished without one.
    pub(crate) async fn placed_or_finished(&self, side: Side) -> bool {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let state = self.lock();
                if state.placed[side.slot()] {
                    return true;
                }
                if state.finished[side.slot()] {
                    return false;
                }
            }
            changed.await;
        }
    }

    /// Each case's transcript, once both runs ended (empty for a case
    /// that never began).
    pub(crate) fn transcripts(&self) -> Vec<Transcript> {
        self.lock()
            .lines
            .iter()
            .map(|line| {
                line.as_ref()
                    .map(|line| lock(&line.transcript).clone())
                    .unwrap_or_default()
            })
            .collect()
    }
}

/// A backend's handle on its side of a conversation (see the module's
/// documentation).
#[derive(Clone)]
pub struct ConversationSide {
    conversation: Arc<Conversation>,
    side: Side,
}

impl std::fmt::Debug for ConversationSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConversationSide({})", self.side)
    }
}

impl ConversationSide {
    pub(crate) fn new(conversation: Arc<Conversation>, side: Side) -> ConversationSide {
        ConversationSide { conversation, side }
    }

    /// Which side this run is.
    pub fn side(&self) -> Side {
        self.side
    }

    /// The backend has a place for this side's run: the other side may
    /// start. Idempotent.
    pub fn placed(&self) {
        self.conversation.lock().placed[self.side.slot()] = true;
        self.conversation.changed.notify_waiters();
    }

    /// Waits until the other side begins case `index` too, and gives this
    /// side's live ends. `Err` (why) when the other side never will (its
    /// run ended, or it is past this case), or this side began it already
    /// (a case of a conversation runs once): the case is not run.
    pub async fn begin(&self, index: usize) -> Result<LiveCase, String> {
        let conversation = &self.conversation;
        let (me, other) = (self.side.slot(), self.side.other().slot());
        {
            let mut state = conversation.lock();
            if index >= conversation.cases {
                return Err(format!(
                    "case {index} is not in this conversation of {} cases",
                    conversation.cases
                ));
            }
            if state.begun[me].is_some_and(|begun| begun >= index) {
                return Err(format!(
                    "case {index} of the {} already began once: a case of a conversation runs once",
                    self.side
                ));
            }
            state.begun[me] = Some(index);
            if state.begun[other] == Some(index) {
                // Both are here: one pipe each way, the case's
                // transcript, and the other side's ends wait for it.
                let (to_program, to_interactor) = (Pipe::new(), Pipe::new());
                let line = Arc::new(Line {
                    started: Instant::now(),
                    transcript: Mutex::new(Transcript::default()),
                });
                state.lines[index] = Some(line.clone());
                let outlet = |from: Side, pipe: &Arc<Pipe>| Outlet {
                    from,
                    pipe: pipe.clone(),
                    line: line.clone(),
                    undelivered: 0,
                    closed: false,
                };
                let program = LiveCase {
                    stdin: Inlet {
                        pipe: to_program.clone(),
                    },
                    stdout: outlet(Side::Program, &to_interactor),
                };
                let interactor = LiveCase {
                    stdin: Inlet {
                        pipe: to_interactor.clone(),
                    },
                    stdout: outlet(Side::Interactor, &to_program),
                };
                let (mine, theirs) = match self.side {
                    Side::Program => (program, interactor),
                    Side::Interactor => (interactor, program),
                };
                state.live[other][index] = Some(theirs);
                drop(state);
                conversation.changed.notify_waiters();
                return Ok(mine);
            }
        }
        conversation.changed.notify_waiters();
        loop {
            let changed = conversation.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut state = conversation.lock();
                if let Some(live) = state.live[me][index].take() {
                    return Ok(live);
                }
                if state.finished[other] {
                    return Err(format!(
                        "the {}'s run ended before case {index}",
                        self.side.other()
                    ));
                }
                if state.begun[other].is_some_and(|begun| begun > index) {
                    return Err(format!(
                        "the {} did not run case {index}",
                        self.side.other()
                    ));
                }
            }
            changed.await;
        }
    }
}

fn micros_since(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)
}
