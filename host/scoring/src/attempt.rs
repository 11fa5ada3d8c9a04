//! Attempt keys and the observation ids derived from them.
//!
//! An attempt is everything that decides what a run can show: which source
//! made the evidence, the program's bytes, the profile (name and full
//! fingerprint: artifact, command, runtime, limits) and the ordered
//! invocations. Expected results are not part of it, so changing an
//! expectation reuses the evidence, while changing anything that could change
//! the program's behaviour does not.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use progscore_sandbox::{Invocation, ProgramFiles, RuntimeProfile, canonical_json, sha256_hex};
use serde::Serialize;

use crate::interactive::InteractorAttempt;

/// The identity of the program-execution evidence source, part of every
/// attempt key; bump the version if what a run records changes meaning.
///
/// v2: time limits run from the program's start, and a `timed_out` event is
/// proven (v1 evidence could hold timeouts caused by a busy machine, so it
/// is never reused; it can still be replayed by id).
pub const SOURCE_IDENTITY: &str = "program_execution/v2";

/// One attempt: what will run, and its key.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    /// sha256 of the canonical attempt.
    pub key: String,
    /// The profile's name.
    pub profile: String,
    /// The profile's full fingerprint.
    pub profile_fingerprint: serde_json::Value,
    /// sha256 of the program's bytes.
    pub program_sha256: String,
    /// The invocations, in order.
    pub invocations: Vec<Invocation>,
    /// The profile with the program's own limits, when it brings any: the
    /// run goes to the backend as this variant (its limits are in the
    /// fingerprint, so in the key).
    pub variant: Option<RuntimeProfile>,
    /// The files placed beside the program (their digests are in the
    /// fingerprint, so in the key); with files, `variant` is always set.
    pub files: ProgramFiles,
    /// An interactive item's interactor, run beside the program (its
    /// identity is in the fingerprint under `"interactor"`, so in the key).
    pub interactor: Option<InteractorAttempt>,
}

#[derive(Serialize)]
struct AttemptIdentity<'a> {
    source: &'a str,
    program_sha256: &'a str,
    profile: ProfileIdentity<'a>,
    invocations: &'a [Invocation],
}

#[derive(Serialize)]
struct ProfileIdentity<'a> {
    name: &'a str,
    fingerprint: &'a serde_json::Value,
}

impl Attempt {
    /// The attempt of running `program_sha256` under `profile` for `invocations`.
    pub fn new(
        profile: &RuntimeProfile,
        program_sha256: &str,
        invocations: Vec<Invocation>,
    ) -> Result<Attempt, serde_json::Error> {
        Attempt::from_parts(
            &profile.name,
            profile.fingerprint_json(),
            program_sha256,
            invocations,
        )
    }

    /// The attempt from its parts (as an observation records them).
    pub fn from_parts(
        profile: &str,
        profile_fingerprint: serde_json::Value,
        program_sha256: &str,
        invocations: Vec<Invocation>,
    ) -> Result<Attempt, serde_json::Error> {
        let key = attempt_key(
            SOURCE_IDENTITY,
            profile,
            &profile_fingerprint,
            program_sha256,
            &invocations,
        )?;
        Ok(Attempt {
            key,
            profile: profile.to_string(),
            profile_fingerprint,
            program_sha256: program_sha256.to_string(),
            invocations,
            variant: None,
            files: ProgramFiles::default(),
            interactor: None,
        })
    }

    /// The same attempt, run as `variant` (see [`Attempt::variant`]).
    pub fn with_variant(mut self, variant: Option<RuntimeProfile>) -> Self {
        self.variant = variant;
        self
    }

    /// The same attempt, with `files` beside the program (their digests
    /// must already be in the fingerprint: [`ProgramFiles::keyed`]).
    pub fn with_files(mut self, files: ProgramFiles) -> Self {
        self.files = files;
        self
    }

    /// The same attempt, its cases talking to `interactor` (its key must
    /// already be in the fingerprint: [`keyed_with_interactor`]).
    pub fn with_interactor(mut self, interactor: Option<InteractorAttempt>) -> Self {
        self.interactor = interactor;
        self
    }

    /// Whether `fingerprint` (an observation's) records exactly this
    /// attempt's interactor (or none, for an attempt without one).
    pub fn interactor_is_keyed_in(&self, fingerprint: &serde_json::Value) -> bool {
        fingerprint.get("interactor") == self.interactor.as_ref().map(|i| &i.key)
    }

    /// The id a clean run of this attempt is stored under.
    pub fn observation_id(&self) -> String {
        observation_id(&self.key)
    }

    /// A new id for a run of this attempt that must not be reused as its
    /// evidence (a sandbox fault, a forced fresh run).
    pub fn fresh_observation_id(&self) -> String {
        fresh_observation_id(&self.key)
    }
}

/// `fingerprint` with `interactor`'s key under `"interactor"`; unchanged
/// without one, so nothing stored changes meaning.
pub fn keyed_with_interactor(
    fingerprint: serde_json::Value,
    interactor: Option<&InteractorAttempt>,
) -> serde_json::Value {
    let mut fingerprint = fingerprint;
    if let Some(interactor) = interactor {
        fingerprint["interactor"] = interactor.key.clone();
    }
    fingerprint
}

/// sha256 of the canonical JSON of (source, program, profile name and
/// fingerprint, ordered invocations). `source` is [`SOURCE_IDENTITY`] for new
/// attempts, and what an observation recorded when its key is checked.
pub fn attempt_key(
    source: &str,
    profile: &str,
    profile_fingerprint: &serde_json::Value,
    program_sha256: &str,
    invocations: &[Invocation],
) -> Result<String, serde_json::Error> {
    let identity = AttemptIdentity {
        source,
        program_sha256,
        profile: ProfileIdentity {
            name: profile,
            fingerprint: profile_fingerprint,
        },
        invocations,
    };
    Ok(sha256_hex(canonical_json(&identity)?.as_bytes()))
}

/// `obs-` and the first 128 bits of the attempt key.
pub fn observation_id(attempt_key: &str) -> String {
    format!("obs-{}", &attempt_key[..attempt_key.len().min(32)])
}

/// The attempt's id with a unique suffix. Uniqueness (not secrecy) is what
/// matters: time, process and a counter are hashed, and the store refuses
/// a clash anyway.
pub fn fresh_observation_id(attempt_key: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nonce =
        sha256_hex(format!("{attempt_key}/{nanos}/{}/{count}", std::process::id()).as_bytes());
    format!("{}-{}", observation_id(attempt_key), &nonce[..16])
}

/// Whether `id` is an id of the attempt `attempt_key` (derived or fresh).
pub fn belongs_to_attempt(id: &str, attempt_key: &str) -> bool {
    let derived = observation_id(attempt_key);
    id == derived
        || id
            .strip_prefix(&derived)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|suffix| {
                suffix.len() == 16 && suffix.bytes().all(|b| b.is_ascii_hexdigit())
            })
}
