//! The progscore evidence store.
//!
//! One SQLite file (or `:memory:`) holds what progscore saw and what it
//! concluded:
//! - **programs**, content-addressed by sha256;
//! - **observations**: one [`Observation`] per sandbox run, immutable (triggers
//!   refuse `UPDATE` and `DELETE`), each carrying a hash of its own record so
//!   a row changed behind progscore's back is detected when read;
//! - **scores**: one [`ScoreRecord`] per verdict, append-only;
//! - **links** from each score to the observations it used;
//! - **leases**: which process runs an attempt right now (taken, renewed,
//!   released, or taken over once expired), so that processes sharing the
//!   store run each attempt once. Not evidence: rows come and go.
//!
//! An observation and its first score are written in one `BEGIN IMMEDIATE`
//! transaction ([`EvidenceStore::record_observation_with_score`]), so a score
//! never points at evidence that was not kept, and evidence is never kept
//! without the score that caused it. The schema is versioned through
//! `PRAGMA user_version` and migrated forward on open; a file from a newer
//! progscore is refused rather than guessed at.

mod error;
mod record;
mod schema;
mod store;

pub use error::StoreError;
pub use record::{
    Observation, ObservationSummary, ScoreOrigin, ScoreRecord, ScoreStatus, StoredScore,
};
pub use schema::{MIGRATIONS, SCHEMA_VERSION};
pub use store::{
    EvidenceStore, Lease, MergeSummary, MergeTrust, ObservationFilter, ObservationOrigin,
    OnConflict, PruneSummary, RecordOutcome, RetentionPolicy, ScoreFilter, StoreCounts, StoreUsage,
    StoredSubmission, now_rfc3339, now_unix_ms,
};
