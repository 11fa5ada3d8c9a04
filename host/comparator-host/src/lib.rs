//! progscore's comparator host: runs comparators (WebAssembly components that
//! export the `comparator` world of `wit/comparator@0.1.0`, or of
//! `wit/comparator@0.2.0`, which also sees the invocation's traced behaviour)
//! in a sandbox and hands callers a plain, synchronous
//! [`ComparatorHost::compare`] ([`ComparatorHost::compare_in_context`] with
//! the behaviour). It runs checkers too: components that export the `checker`
//! world of `wit/checker@0.1.0` (the competitive-programming "special judge")
//! and judge a test's output given its input and the jury's answer
//! ([`ComparatorHost::check`]), under the same limits. Comparators and
//! checkers share one namespace of names.
//!
//! The host owns the wasmtime engine, an on-disk cache of compiled comparators
//! (keyed by the component's sha256 and the engine's compatibility hash), the
//! pooling allocator, pre-instantiation, and the limits every call runs under
//! (a wall-clock deadline via epoch interruption and a memory cap). Guests get
//! no files, environment, arguments, network, randomness or real clocks; a guest
//! that traps, runs out of time or memory, or returns garbage yields
//! [`ComparisonOutcome::Undetermined`] (a checker [`CheckOutcome::Undetermined`]),
//! never a failure of the host.
//!
//! ```no_run
//! use progscore_comparator_host::{ComparatorHost, HostOptions, ObservedStream};
//!
//! let mut host = ComparatorHost::new(HostOptions::default())?;
//! host.register_builtins()?;
//! host.validate("equals", r#"{"value": "9"}"#)?;
//! let outcome = host.compare("equals", r#"{"value": "9"}"#, &ObservedStream::complete(b"9\n".to_vec()))?;
//! assert!(outcome.is_match());
//!
//! let answer = b"1.0 2\n";
//! let output = ObservedStream::complete(b"1.0000001 2\n".to_vec());
//! let judged = host.check("floats", "{}", b"", &output, answer)?;
//! assert!(judged.is_accepted());
//! # Ok::<(), progscore_comparator_host::ComparatorError>(())
//! ```

mod cache;
mod error;
mod guest;
mod host;
mod options;
mod runtime;

pub use error::ComparatorError;
pub use host::{ComparatorHost, ComparatorInfo, ComparatorRole, ComparatorSource};
pub use options::HostOptions;

/// The newest WIT package version this host implements.
pub const WIT_VERSION: &str = "0.2.0";

/// Every WIT package version this host runs (components of an older version
/// keep working).
pub const WIT_VERSIONS: &[&str] = &["0.1.0", "0.2.0"];

/// The version of the checker WIT package (`progscore:checker`) this host
/// implements.
pub const CHECKER_WIT_VERSION: &str = "0.1.0";

/// Names of the built-in comparators, as users write them.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    guests::BUILTINS.iter().map(|(name, _)| *name)
}

/// Names of the built-in checkers, as users write them.
pub fn builtin_checker_names() -> impl Iterator<Item = &'static str> {
    guests::BUILTIN_CHECKER_NAMES.iter().map(|(name, _)| *name)
}

/// Components built from `guests/` by the build script.
mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

/// Paths of the hostile fixtures and examples in `guests/`, built with this
/// crate. For progscore's own tests and benchmarks; not a stable API.
#[doc(hidden)]
pub mod test_guests {
    pub use crate::guests::{EXAMPLES, HOSTILE};

    /// The path of the hostile fixture `name` (e.g. `"infinite-loop"`).
    pub fn hostile(name: &str) -> Option<&'static str> {
        HOSTILE.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
    }

    /// The path of the example comparator or checker `name` (e.g.
    /// `"sorted-lines"`).
    pub fn example(name: &str) -> Option<&'static str> {
        EXAMPLES.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
    }
}

/// The behaviour the sandbox traced during the invocation that wrote a
/// stream: what a `progscore:comparator@0.2.0` comparator is given beside it
/// (a 0.1.0 comparator never sees it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ObservedBehaviour {
    /// The profile does not trace (or the evidence predates tracing).
    #[default]
    Absent,
    /// Nothing is known of what the program tried; why.
    NotTraced(String),
    /// What the sandbox traced.
    Traced(ObservedTrace),
}

/// A trace as a comparator sees it (see `wit/comparator@0.2.0`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObservedTrace {
    /// The kinds the trace covers.
    pub traced_kinds: Vec<String>,
    /// The first events, in order.
    pub events: Vec<ObservedEvent>,
    /// Every event seen, per kind.
    pub counts: Vec<(String, u64)>,
    /// Events seen but not kept.
    pub dropped: u64,
    /// Why the trace may lack events, when it may.
    pub incomplete: Option<String>,
    /// Why the events' arguments are not proven, when they are not.
    pub arguments_unverified: Option<String>,
}

/// One traced event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObservedEvent {
    /// `net.connect`, `fs.open`, ...
    pub kind: String,
    /// Milliseconds from the program's start.
    pub at_ms: u64,
    /// `ok`, an error's name, or none.
    pub result: Option<String>,
    /// The event as stored (JSON text).
    pub json: String,
}

/// One output stream as the sandbox kept it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObservedStream {
    /// The bytes kept, from the start of the stream (not necessarily UTF-8).
    pub bytes: Vec<u8>,
    /// Whether bytes were dropped after `bytes`.
    pub truncated: bool,
    /// How many bytes the program wrote in total, kept or not.
    pub total_bytes: u64,
}

impl ObservedStream {
    /// A stream kept whole.
    pub fn complete(bytes: Vec<u8>) -> Self {
        let total_bytes = bytes.len() as u64;
        ObservedStream {
            bytes,
            truncated: false,
            total_bytes,
        }
    }

    /// A stream of which only `bytes` were kept out of `total_bytes`.
    pub fn truncated(bytes: Vec<u8>, total_bytes: u64) -> Self {
        ObservedStream {
            bytes,
            truncated: true,
            total_bytes,
        }
    }
}

/// What a comparison decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComparisonOutcome {
    /// The output meets the expectation.
    Match,
    /// The output does not meet the expectation; the reason is for a human.
    Mismatch(String),
    /// Nothing could be decided: the comparator said so (e.g. truncated
    /// output), or it trapped, ran out of time or memory, or misbehaved.
    Undetermined(String),
}

impl ComparisonOutcome {
    /// Whether this is [`ComparisonOutcome::Match`].
    pub fn is_match(&self) -> bool {
        matches!(self, ComparisonOutcome::Match)
    }

    /// The reason, for a mismatch or an undetermined outcome.
    pub fn reason(&self) -> Option<&str> {
        match self {
            ComparisonOutcome::Match => None,
            ComparisonOutcome::Mismatch(r) | ComparisonOutcome::Undetermined(r) => Some(r),
        }
    }
}

/// What a checker judged.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckOutcome {
    /// The output is correct; the checker's message.
    Accepted(String),
    /// The output is wrong; why, for a human.
    WrongAnswer(String),
    /// The output is unreadable as the task's format; why.
    PresentationError(String),
    /// The output earns part of the test's value.
    Points {
        /// The share earned, in [0, 1] (the host turns any other score into
        /// [`CheckOutcome::Undetermined`]).
        score: f64,
        /// Why, for a human.
        message: String,
    },
    /// Nothing could be decided: the checker said so (e.g. truncated
    /// output), said the jury's data is wrong (`fail`), returned a score
    /// outside [0, 1], or trapped, ran out of time or memory, or misbehaved.
    Undetermined(String),
}

impl CheckOutcome {
    /// Whether this is [`CheckOutcome::Accepted`].
    pub fn is_accepted(&self) -> bool {
        matches!(self, CheckOutcome::Accepted(_))
    }

    /// The checker's message, or the reason of an undetermined outcome.
    pub fn message(&self) -> &str {
        match self {
            CheckOutcome::Accepted(m)
            | CheckOutcome::WrongAnswer(m)
            | CheckOutcome::PresentationError(m)
            | CheckOutcome::Undetermined(m)
            | CheckOutcome::Points { message: m, .. } => m,
        }
    }
}
