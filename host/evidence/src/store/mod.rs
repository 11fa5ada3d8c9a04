//! The SQLite store itself: opening, migrations and the connection; one
//! module per table family.

mod leases;
mod merge;
mod observations;
mod origins;
mod programs;
mod retention;
mod scores;
mod sql;
mod submissions;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use progscore_sandbox::{Invocation, ProgramRun, canonical_json, sha256_hex};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params, params_from_iter};

pub use leases::{Lease, now_unix_ms};
pub use merge::{MergeSummary, MergeTrust, OnConflict};
pub use origins::ObservationOrigin;
pub use retention::{PruneSummary, RetentionPolicy, StoreUsage};
pub use submissions::StoredSubmission;

use crate::error::StoreError;
use crate::record::{
    Observation, ObservationSummary, ScoreOrigin, ScoreRecord, ScoreStatus, StoredScore,
};
use crate::schema::{MIGRATIONS, SCHEMA_VERSION};

/// How long a writer waits for another process's write lock before failing.
/// Generous: a batch in another process holds it only for one short
/// transaction at a time, so waiting beats failing a score.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// The evidence store: one SQLite connection, shared by the threads of one
/// process behind a mutex. Several processes may open the same file; SQLite's
/// locks (WAL mode, busy timeout) keep their writes apart.
///
/// Calls block the calling thread for one short statement or transaction.
pub struct EvidenceStore {
    conn: Mutex<Connection>,
    label: String,
}

/// What happened to the observation given to
/// [`EvidenceStore::record_observation_with_score`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordOutcome {
    /// It was new and is now stored.
    Inserted,
    /// An identical copy was already stored; the score links to it.
    Linked,
}

/// Which observations to list (newest first).
#[derive(Debug, Clone, Default)]
pub struct ObservationFilter {
    /// Only this profile.
    pub profile: Option<String>,
    /// Only this program.
    pub program_sha256: Option<String>,
    /// Only this attempt.
    pub attempt_key: Option<String>,
    /// At most this many (all when `None`).
    pub limit: Option<u64>,
    /// Skip this many first.
    pub offset: u64,
}

/// Which scores to list (newest first).
#[derive(Debug, Clone, Default)]
pub struct ScoreFilter {
    /// Only scores of this item.
    pub item_id: Option<String>,
    /// Only scores linked to this observation.
    pub observation_id: Option<String>,
    /// Only scores with this status.
    pub status: Option<ScoreStatus>,
    /// At most this many (all when `None`).
    pub limit: Option<u64>,
    /// Skip this many first.
    pub offset: u64,
}

/// Row counts, for summaries and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreCounts {
    /// Stored programs.
    pub programs: u64,
    /// Stored observations.
    pub observations: u64,
    /// Stored scores.
    pub scores: u64,
    /// Score-to-observation links.
    pub links: u64,
}

impl EvidenceStore {
    /// Opens (creating if needed) the store in this file and migrates it to
    /// the current schema. A file from a newer progscore is refused.
    pub fn open(path: impl AsRef<Path>) -> Result<EvidenceStore, StoreError> {
        let path = path.as_ref();
        let label = path.display().to_string();
        let conn = Connection::open(path).map_err(|source| StoreError::Open {
            path: label.clone(),
            cause: source,
        })?;
        EvidenceStore::init(conn, label)
    }

    /// A private store in memory, gone when dropped (tests, one-off runs).
    pub fn open_in_memory() -> Result<EvidenceStore, StoreError> {
        let label = ":memory:".to_string();
        let conn = Connection::open_in_memory().map_err(|source| StoreError::Open {
            path: label.clone(),
            cause: source,
        })?;
        EvidenceStore::init(conn, label)
    }

    fn init(mut conn: Connection, label: String) -> Result<EvidenceStore, StoreError> {
        let open_err = |source| StoreError::Open {
            path: label.clone(),
            cause: source,
        };
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        // WAL: readers never block the writer, and several processes can share
        // the file. An in-memory database answers "memory", which is fine.
        let _mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(open_err)?;
        // In WAL mode NORMAL cannot corrupt the file; at worst the last commits
        // before a power cut are lost, never half-written.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        migrate(&mut conn, &label)?;
        // Leases its holders could not release (killed, or the store busy
        // when they tried) go at the next open, not only when some later
        // run takes a lease. A store too busy for it now is not refused.
        let _ = leases::sweep_expired(&conn);
        Ok(EvidenceStore {
            conn: Mutex::new(conn),
            label,
        })
    }

    /// The file this store is in (or `:memory:`).
    pub fn location(&self) -> &str {
        &self.label
    }

    /// The schema version of the open file.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        let conn = self.lock()?;
        read_version(&conn).map_err(StoreError::sqlite("reading the schema version"))
    }

    /// Row counts of every table.
    pub fn counts(&self) -> Result<StoreCounts, StoreError> {
        let conn = self.lock()?;
        let count = |table: &str| -> Result<u64, StoreError> {
            let n: i64 = conn
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
                    row.get(0)
                })
                .map_err(StoreError::sqlite("counting rows"))?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        Ok(StoreCounts {
            programs: count("programs")?,
            observations: count("observations")?,
            scores: count("scores")?,
            links: count("score_observations")?,
        })
    }

    fn lock(&self) -> Result<MutexGuard<'_, Connection>, StoreError> {
        self.conn.lock().map_err(|_| StoreError::Poisoned)
    }
}

/// The current time as RFC 3339 UTC with milliseconds, as the store writes it.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

fn read_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

fn migrate(conn: &mut Connection, label: &str) -> Result<(), StoreError> {
    let too_new = |found| StoreError::SchemaTooNew {
        path: label.to_string(),
        found,
        supported: SCHEMA_VERSION,
    };
    let version = read_version(conn).map_err(StoreError::sqlite("reading the schema version"))?;
    if version > SCHEMA_VERSION {
        return Err(too_new(version));
    }
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    // Immediate, and the version read again inside: two processes opening a
    // new file at once must not both run the same step.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(StoreError::sqlite("starting a migration"))?;
    let version = read_version(&tx).map_err(StoreError::sqlite("reading the schema version"))?;
    if version > SCHEMA_VERSION {
        return Err(too_new(version));
    }
    let start = usize::try_from(version).unwrap_or(0);
    for (index, step) in MIGRATIONS.iter().enumerate().skip(start) {
        let target = index as i64 + 1;
        let failed = |source| StoreError::Migration {
            path: label.to_string(),
            version: target,
            cause: source,
        };
        tx.execute_batch(step).map_err(failed)?;
        tx.pragma_update(None, "user_version", target)
            .map_err(failed)?;
    }
    tx.commit()
        .map_err(StoreError::sqlite("committing a migration"))
}
