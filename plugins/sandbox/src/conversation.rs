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

use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use crate::run::{MAX_TURNS, Side, Transcript, Turn};

/// Chunks in flight per direction before its writer waits: the pipe's
/// capacity, bounded like a kernel pipe's.
const CHUNKS_IN_FLIGHT: usize = 16;

/// One side's live ends of a case, from [`ConversationSide::begin`].
#[derive(Debug)]
pub struct LiveCase {
    /// What the other side wrote, in order; closed once it stopped (feed
    /// it to this side's stdin, then close that).
    pub stdin: mpsc::Receiver<Vec<u8>>,
    /// Where this side's stdout goes, chunk by chunk as it is read (drop it
    /// once the output ended: the other side sees its end of file).
    pub stdout: Outlet,
}

/// One side's stdout, straight into the other side's stdin (bounded like a
/// pipe: a send waits while the other side's pipe is full), each write
/// recorded in the case's transcript as it crosses.
#[derive(Debug)]
pub struct Outlet {
    from: Side,
    sink: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    line: Arc<Line>,
    undelivered: std::sync::atomic::AtomicU64,
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
}

impl Outlet {
    /// Sends one chunk of this side's output on: recorded, then delivered
    /// (waiting while the other side's pipe is full), or counted as
    /// undelivered once the other side stopped reading. Never fails: the
    /// caller keeps draining either way.
    pub async fn send(&self, chunk: Vec<u8>) -> Result<(), std::convert::Infallible> {
        self.line.record(self.from, chunk.len());
        let len = chunk.len() as u64;
        let sink = lock(&self.sink).clone();
        let delivered = match sink {
            Some(open) => open.send(chunk).await.is_ok(),
            None => false,
        };
        if !delivered {
            // The reader is gone: what follows is kept in the writer's
            // stdout only.
            *lock(&self.sink) = None;
            self.undelivered
                .fetch_add(len, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }
}

impl Drop for Outlet {
    /// The output ended: the other side sees its end of file, and the
    /// transcript when it ended.
    fn drop(&mut self) {
        lock(&self.sink).take();
        let undelivered = *self.undelivered.get_mut();
        let at = Some(micros_since(self.line.started));
        let mut transcript = lock(&self.line.transcript);
        match self.from {
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
                let (to_program, program_stdin) = mpsc::channel(CHUNKS_IN_FLIGHT);
                let (to_interactor, interactor_stdin) = mpsc::channel(CHUNKS_IN_FLIGHT);
                let line = Arc::new(Line {
                    started: Instant::now(),
                    transcript: Mutex::new(Transcript::default()),
                });
                state.lines[index] = Some(line.clone());
                let outlet = |from: Side, sink: mpsc::Sender<Vec<u8>>| Outlet {
                    from,
                    sink: Mutex::new(Some(sink)),
                    line: line.clone(),
                    undelivered: std::sync::atomic::AtomicU64::new(0),
                };
                let program = LiveCase {
                    stdin: program_stdin,
                    stdout: outlet(Side::Program, to_interactor),
                };
                let interactor = LiveCase {
                    stdin: interactor_stdin,
                    stdout: outlet(Side::Interactor, to_program),
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
