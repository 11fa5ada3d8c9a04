//! Errors of the evidence store.

use thiserror::Error;

use crate::record::Observation;

/// Why a store operation failed.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The database file could not be opened or configured.
    #[error("evidence store {path}: cannot open: {cause}")]
    Open {
        /// The file (or `:memory:`).
        path: String,
        cause: rusqlite::Error,
    },
    /// The file was written by a newer progscore; reading it could misread
    /// evidence, so it is refused.
    #[error(
        "evidence store {path} has schema version {found}, but this progscore knows versions up to {supported}; use a newer progscore or another database file"
    )]
    SchemaTooNew {
        path: String,
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// A migration step failed; the file is left at the previous version.
    #[error("evidence store {path}: migration to schema version {version} failed: {cause}")]
    Migration {
        path: String,
        version: i64,
        cause: rusqlite::Error,
    },
    /// Any other SQLite failure (busy beyond the timeout, disk full, ...).
    #[error("evidence store: {context}: {cause}")]
    Sqlite {
        context: &'static str,
        cause: rusqlite::Error,
    },
    /// An observation with this id is stored with other content. The stored
    /// one stands; it is returned so the caller can use it instead.
    #[error("observation {id} is already stored with different content; the stored copy stands")]
    ObservationConflict {
        id: String,
        /// The stored observation.
        stored: Box<Observation>,
    },
    /// A stored row does not match its own record hash, or is otherwise
    /// inconsistent: it was changed outside progscore.
    #[error(
        "{what} {id} in the evidence store fails its integrity check ({detail}); it was changed outside progscore and is not used"
    )]
    Tampered {
        /// `observation` or `program`.
        what: &'static str,
        /// Its id.
        id: String,
        /// What did not match.
        detail: String,
    },
    /// A row could not be decoded (bad JSON, unknown status, ...).
    #[error("{what} {id} in the evidence store cannot be read: {detail}")]
    Corrupt {
        /// What kind of row.
        what: &'static str,
        /// Its id.
        id: String,
        detail: String,
    },
    /// A store to merge holds observations that are stored here with other
    /// content under the same ids; nothing was merged.
    #[error(
        "cannot merge {other}: {count} observation(s) in it are stored here with different content under the same id ({}{}); nothing was merged",
        ids.join(", "),
        if *count > ids.len() { ", ..." } else { "" }
    )]
    MergeConflict {
        /// The store to merge.
        other: String,
        /// How many conflict.
        count: usize,
        /// The first of them.
        ids: Vec<String>,
    },
    /// The store to merge could not be read as evidence; nothing was merged.
    #[error("cannot merge {path}: {cause}; nothing was merged")]
    MergeSource {
        /// The store to merge.
        path: String,
        cause: Box<StoreError>,
    },
    /// A score names an observation that is not stored.
    #[error("observation {id} is not stored")]
    ObservationNotStored { id: String },
    /// A record given to the store is inconsistent in itself.
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    /// A record could not be turned into JSON.
    #[error("cannot serialize a record: {0}")]
    Json(serde_json::Error),
    /// Another thread panicked while holding the connection.
    #[error("the evidence store's connection lock was poisoned by a panic in another thread")]
    Poisoned,
}

impl StoreError {
    /// Whether the store itself failed (cannot open, damaged file, disk
    /// full, busy, poisoned), as opposed to one record being wrong: such a
    /// fault is no item's fault and the same for every item, so a batch
    /// says it once and stops.
    pub fn is_store_fault(&self) -> bool {
        matches!(
            self,
            StoreError::Open { .. }
                | StoreError::SchemaTooNew { .. }
                | StoreError::Migration { .. }
                | StoreError::Sqlite { .. }
                | StoreError::Poisoned
        )
    }

    pub(crate) fn sqlite(context: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError {
        move |source| StoreError::Sqlite {
            context,
            cause: source,
        }
    }
}

// The message quotes the cause, so it is not also this error's source
// (a caller printing the chain would say it twice).
impl From<serde_json::Error> for StoreError {
    fn from(error: serde_json::Error) -> Self {
        StoreError::Json(error)
    }
}
