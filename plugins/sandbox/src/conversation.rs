//! Interactive runs: a program and an interactor, each in fresh sandboxes of
//! its own profile, case by case, the program's stdout the interactor's
//! stdin and the interactor's stdout the program's stdin.
//!
//! The composition is the contract's, once for every backend
//! ([`converse`]): the request is split into two runs, one per side, joined
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
//! Between the two, the pump copies each direction on its own (a slow
//! reader on one side never holds the other direction up) and records
//! the [`Transcript`]: who wrote how many bytes when, and when each side's
//! output ended. The bytes themselves are each side's stdout, kept in its
//! event (bounded by its output limit: a cut side says so there).

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use crate::client::{RunProfile, RunRequest, SandboxClient, SandboxError};
use crate::files::ProgramFiles;
use crate::invocation::Invocation;
use crate::run::{InvocationEvent, ProgramRun};

/// Chunks in flight per direction before its writer waits: the pipe's
/// capacity, bounded like a kernel pipe's.
const CHUNKS_IN_FLIGHT: usize = 16;

/// Turns a transcript lists; beyond them, only counted (the bytes are in
/// each side's stdout).
pub const MAX_TURNS: usize = 4096;

/// Which side of a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The program being judged.
    Program,
    /// The judge's interactor.
    Interactor,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::Program => Side::Interactor,
            Side::Interactor => Side::Program,
        }
    }

    fn slot(self) -> usize {
        match self {
            Side::Program => 0,
            Side::Interactor => 1,
        }
    }
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Program => "program",
            Side::Interactor => "interactor",
        })
    }
}

/// The other side of an interactive request: the interactor, its profile
/// (or a variant with its own limits), the files beside it, and one
/// invocation per invocation of the program (its arguments; its stdin is
/// the program's stdout).
#[derive(Debug, Clone, Copy)]
pub struct InteractorRequest<'a> {
    pub program: &'a [u8],
    pub profile: RunProfile<'a>,
    pub files: &'a ProgramFiles,
    pub invocations: &'a [Invocation],
}

/// What the interactor did, stored with the program's run: its own run
/// (compile and one event per case) and each case's transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interaction {
    /// The interactor's run.
    pub interactor: ProgramRun,
    /// One per case, in order (empty for a case that never began).
    pub transcripts: Vec<Transcript>,
}

/// One case's conversation: every write as it crossed, and when each
/// side's output ended, in microseconds from the case's start (both sides
/// had begun it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transcript {
    /// The writes, in the order they crossed (up to [`MAX_TURNS`]).
    pub turns: Vec<Turn>,
    /// Writes beyond [`MAX_TURNS`], counted only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub turns_dropped: u64,
    /// When the program's output ended (it exited or was killed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_ended_us: Option<u64>,
    /// When the interactor's output ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interactor_ended_us: Option<u64>,
    /// Bytes the program wrote that the interactor never took (it had
    /// stopped reading or ended).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub program_bytes_undelivered: u64,
    /// Bytes the interactor wrote that the program never took.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub interactor_bytes_undelivered: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One write that crossed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// Who wrote it.
    pub from: Side,
    /// When it crossed, in microseconds from the case's start.
    pub at_us: u64,
    /// How many bytes.
    pub bytes: u64,
}

impl Transcript {
    /// Whether the interactor's output ended before the program's: its
    /// verdict was given on a conversation the program had not left (and
    /// progscore had not cut by ending the program).
    pub fn interactor_ended_first(&self) -> bool {
        match (self.interactor_ended_us, self.program_ended_us) {
            (Some(interactor), Some(program)) => interactor < program,
            (Some(_), None) => true,
            _ => false,
        }
    }

    /// How many bytes `side` wrote, by the turns listed.
    pub fn bytes_from(&self, side: Side) -> u64 {
        self.turns
            .iter()
            .filter(|turn| turn.from == side)
            .map(|turn| turn.bytes)
            .sum()
    }
}

/// One side's live ends of a case, from [`ConversationSide::begin`].
#[derive(Debug)]
pub struct LiveCase {
    /// What the other side wrote, in order; closed once it stopped (feed
    /// it to this side's stdin, then close that).
    pub stdin: mpsc::Receiver<Vec<u8>>,
    /// Where this side's stdout goes, chunk by chunk as it is read (drop it
    /// once the output ended). A send that fails means the other side
    /// stopped reading: keep draining.
    pub stdout: mpsc::Sender<Vec<u8>>,
}

/// A case both sides began: the pump's ends.
struct PumpEnds {
    from_program: mpsc::Receiver<Vec<u8>>,
    to_interactor: mpsc::Sender<Vec<u8>>,
    from_interactor: mpsc::Receiver<Vec<u8>>,
    to_program: mpsc::Sender<Vec<u8>>,
    started: Instant,
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
    /// Cases both sides began, for the pump.
    ready: Vec<Option<PumpEnds>>,
}

/// Two runs joined case by case.
pub struct Conversation {
    cases: usize,
    state: Mutex<State>,
    changed: Notify,
}

impl Conversation {
    fn new(cases: usize) -> Arc<Conversation> {
        let mut state = State::default();
        for live in &mut state.live {
            live.resize_with(cases, || None);
        }
        state.ready.resize_with(cases, || None);
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

    fn finish(&self, side: Side) {
        self.lock().finished[side.slot()] = true;
        self.changed.notify_waiters();
    }

    /// Whether `side` got a place, or finished without one.
    async fn placed_or_finished(&self, side: Side) -> bool {
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

    /// The pump's ends of case `index`, once both sides began it; `None`
    /// once it never will.
    async fn ready(&self, index: usize) -> Option<PumpEnds> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut state = self.lock();
                if let Some(ends) = state.ready[index].take() {
                    return Some(ends);
                }
                let gone = |side: Side| {
                    state.finished[side.slot()]
                        || state.begun[side.slot()].is_some_and(|begun| begun > index)
                };
                if gone(Side::Program) || gone(Side::Interactor) {
                    return None;
                }
            }
            changed.await;
        }
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
                // Both are here: the lines, the pump's ends, and the
                // other side's ends wait for it.
                let (to_program, program_stdin) = mpsc::channel(CHUNKS_IN_FLIGHT);
                let (program_stdout, from_program) = mpsc::channel(CHUNKS_IN_FLIGHT);
                let (to_interactor, interactor_stdin) = mpsc::channel(CHUNKS_IN_FLIGHT);
                let (interactor_stdout, from_interactor) = mpsc::channel(CHUNKS_IN_FLIGHT);
                state.ready[index] = Some(PumpEnds {
                    from_program,
                    to_interactor,
                    from_interactor,
                    to_program,
                    started: Instant::now(),
                });
                let program = LiveCase {
                    stdin: program_stdin,
                    stdout: program_stdout,
                };
                let interactor = LiveCase {
                    stdin: interactor_stdin,
                    stdout: interactor_stdout,
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

/// Runs an interactive request (`request.interactor` set): the program and
/// the interactor as two runs of `client` joined case by case; the
/// program's run with the interactor's run and the transcripts in its
/// [`ProgramRun::interaction`]. `Err` when either side was refused.
pub async fn converse<C: SandboxClient + ?Sized>(
    client: &C,
    request: RunRequest<'_>,
) -> Result<ProgramRun, SandboxError> {
    let Some(interactor) = request.interactor else {
        return client.run(request).await;
    };
    let cases = request.invocations.len();
    if interactor.invocations.len() != cases {
        return Err(SandboxError::Setup {
            message: format!(
                "an interactive run needs one interactor invocation per case: {} cases, {} interactor invocations",
                cases,
                interactor.invocations.len()
            ),
        });
    }
    let conversation = Conversation::new(cases);
    let interactor_profile = match interactor.profile {
        RunProfile::Named(name) => name.to_string(),
        RunProfile::Variant(variant) => variant.name.clone(),
    };
    let program_request = RunRequest {
        interactor: None,
        // A case's event alone decides nothing in a conversation.
        on_case: None,
        conversation: Some(ConversationSide {
            conversation: conversation.clone(),
            side: Side::Program,
        }),
        ..request
    };
    let interactor_request = RunRequest {
        program: interactor.program,
        profile: interactor.profile,
        files: interactor.files,
        invocations: interactor.invocations,
        on_case: None,
        interactor: None,
        conversation: Some(ConversationSide {
            conversation: conversation.clone(),
            side: Side::Interactor,
        }),
    };
    let program_side = async {
        let run = client.run(program_request).await;
        conversation.finish(Side::Program);
        run
    };
    let interactor_side = async {
        // Started once the program has its place: never a pair holding
        // the capacity its other half waits for.
        let run = if conversation.placed_or_finished(Side::Program).await {
            Some(client.run(interactor_request).await)
        } else {
            None
        };
        conversation.finish(Side::Interactor);
        run
    };
    let pump = async {
        let mut transcripts = Vec::with_capacity(cases);
        for index in 0..cases {
            match conversation.ready(index).await {
                Some(ends) => transcripts.push(pump_case(ends).await),
                None => transcripts.push(Transcript::default()),
            }
        }
        transcripts
    };
    let (program_run, interactor_run, transcripts) =
        tokio::join!(program_side, interactor_side, pump);
    let mut run = program_run?;
    let interactor_run = match interactor_run {
        Some(run) => run?,
        // The program never had a place: its run says why.
        None => ProgramRun {
            profile: interactor_profile,
            program_sha256: crate::canonical::sha256_hex(interactor.program),
            events: interactor
                .invocations
                .iter()
                .map(|_| InvocationEvent::not_run("the program's run never had a place"))
                .collect(),
            sandbox_warnings: Vec::new(),
            compile: None,
            interaction: None,
        },
    };
    run.interaction = Some(Box::new(Interaction {
        interactor: interactor_run,
        transcripts,
    }));
    Ok(run)
}

/// Copies both directions of one case, each on its own, and records them.
async fn pump_case(ends: PumpEnds) -> Transcript {
    let transcript = Mutex::new(Transcript::default());
    let started = ends.started;
    let record = |from: Side, bytes: usize| {
        let mut transcript = transcript
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if transcript.turns.len() < MAX_TURNS {
            transcript.turns.push(Turn {
                from,
                at_us: micros_since(started),
                bytes: bytes as u64,
            });
        } else {
            transcript.turns_dropped += 1;
        }
    };
    let ended = |side: Side, undelivered: u64| {
        let mut transcript = transcript
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = Some(micros_since(started));
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
    };
    let direction =
        |from: Side, mut source: mpsc::Receiver<Vec<u8>>, sink: mpsc::Sender<Vec<u8>>| {
            let record = &record;
            let ended = &ended;
            async move {
                let mut sink = Some(sink);
                let mut undelivered = 0u64;
                while let Some(chunk) = source.recv().await {
                    record(from, chunk.len());
                    let len = chunk.len() as u64;
                    let delivered = match &sink {
                        Some(open) => open.send(chunk).await.is_ok(),
                        None => false,
                    };
                    if !delivered {
                        // The reader is gone: what follows is kept in the
                        // writer's stdout only.
                        sink = None;
                        undelivered += len;
                    }
                }
                // The writer's output ended: the reader sees its end of file.
                drop(sink);
                ended(from, undelivered);
            }
        };
    tokio::join!(
        direction(Side::Program, ends.from_program, ends.to_interactor),
        direction(Side::Interactor, ends.from_interactor, ends.to_program),
    );
    transcript
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn micros_since(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)
}
