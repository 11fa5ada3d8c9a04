//! The SQLite store itself.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use progscore_sandbox::{Invocation, ProgramRun, canonical_json, sha256_hex};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params, params_from_iter};

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
            source,
        })?;
        EvidenceStore::init(conn, label)
    }

    /// A private store in memory, gone when dropped (tests, one-off runs).
    pub fn open_in_memory() -> Result<EvidenceStore, StoreError> {
        let label = ":memory:".to_string();
        let conn = Connection::open_in_memory().map_err(|source| StoreError::Open {
            path: label.clone(),
            source,
        })?;
        EvidenceStore::init(conn, label)
    }

    fn init(mut conn: Connection, label: String) -> Result<EvidenceStore, StoreError> {
        let open_err = |source| StoreError::Open {
            path: label.clone(),
            source,
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

    /// Stores a program's content (once per content) and returns its sha256,
    /// which is its id.
    pub fn put_program(&self, content: &[u8]) -> Result<String, StoreError> {
        let sha256 = sha256_hex(content);
        let conn = self.lock()?;
        insert_program(&conn, &sha256, content)?;
        Ok(sha256)
    }

    /// A stored program's content by sha256, checked against its id.
    pub fn program(&self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let conn = self.lock()?;
        let content: Option<Vec<u8>> = conn
            .query_row(
                "SELECT content FROM programs WHERE sha256 = ?1",
                [sha256],
                |row| row.get(0),
            )
            .optional()
            .map_err(StoreError::sqlite("reading a program"))?;
        match content {
            Some(content) if sha256_hex(&content) != sha256 => Err(StoreError::Tampered {
                what: "program",
                id: sha256.to_string(),
                detail: "content does not hash to its id".into(),
            }),
            other => Ok(other),
        }
    }

    /// An observation by id, checked against its record hash.
    pub fn observation(&self, id: &str) -> Result<Option<Observation>, StoreError> {
        let conn = self.lock()?;
        load_observation(&conn, id)
    }

    /// Writes an observation and the first score that used it in one
    /// `BEGIN IMMEDIATE` transaction (with the program's content, when
    /// given). An identical observation already stored under the id is
    /// linked instead ([`RecordOutcome::Linked`]); a different one is refused
    /// with [`StoreError::ObservationConflict`] carrying the stored copy, and
    /// nothing is written.
    pub fn record_observation_with_score(
        &self,
        program: Option<&[u8]>,
        observation: &Observation,
        score: &ScoreRecord,
    ) -> Result<(i64, RecordOutcome), StoreError> {
        observation
            .check_consistent()
            .map_err(StoreError::InvalidRecord)?;
        if !score.observation_ids.contains(&observation.id) {
            return Err(StoreError::InvalidRecord(format!(
                "the score does not name observation {}",
                observation.id
            )));
        }
        if let Some(program) = program
            && sha256_hex(program) != observation.program_sha256
        {
            return Err(StoreError::InvalidRecord(
                "the program's content does not match the observation's program sha256".into(),
            ));
        }
        let row = ObservationRow::from_observation(observation)?;
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(StoreError::sqlite("starting a write"))?;
        if let Some(program) = program {
            insert_program(&tx, &observation.program_sha256, program)?;
        }
        let outcome = match load_observation(&tx, &observation.id)? {
            Some(stored) => {
                if stored.canonical_json()? != row.record {
                    // Dropping the transaction rolls it back: nothing written.
                    return Err(StoreError::ObservationConflict {
                        id: observation.id.clone(),
                        stored: Box::new(stored),
                    });
                }
                RecordOutcome::Linked
            }
            None => {
                row.insert(&tx)?;
                RecordOutcome::Inserted
            }
        };
        let score_id = insert_score(&tx, score)?;
        tx.commit().map_err(StoreError::sqlite(
            "committing an observation and its score",
        ))?;
        Ok((score_id, outcome))
    }

    /// Writes a score that uses observations already stored (a reuse, a
    /// replay, a rescore).
    pub fn record_score(&self, score: &ScoreRecord) -> Result<i64, StoreError> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(StoreError::sqlite("starting a write"))?;
        let score_id = insert_score(&tx, score)?;
        tx.commit()
            .map_err(StoreError::sqlite("committing a score"))?;
        Ok(score_id)
    }

    /// Writes many scores that use stored observations in one transaction
    /// (bulk rescoring); all or none are written.
    pub fn record_scores(&self, scores: &[ScoreRecord]) -> Result<Vec<i64>, StoreError> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(StoreError::sqlite("starting a write"))?;
        let mut ids = Vec::with_capacity(scores.len());
        for score in scores {
            ids.push(insert_score(&tx, score)?);
        }
        tx.commit()
            .map_err(StoreError::sqlite("committing scores"))?;
        Ok(ids)
    }

    /// A score by id.
    pub fn score(&self, id: i64) -> Result<Option<StoredScore>, StoreError> {
        let conn = self.lock()?;
        let sql = format!("{SCORE_SELECT} WHERE s.id = ?1");
        let raw = conn
            .query_row(&sql, [id], RawScore::from_row)
            .optional()
            .map_err(StoreError::sqlite("reading a score"))?;
        raw.map(|raw| raw.decode(&conn)).transpose()
    }

    /// The most recent score recorded for an item id (to report verdicts that
    /// changed on a rescore).
    pub fn latest_score_for_item(&self, item_id: &str) -> Result<Option<StoredScore>, StoreError> {
        let conn = self.lock()?;
        let sql = format!("{SCORE_SELECT} WHERE s.item_id = ?1 ORDER BY s.id DESC LIMIT 1");
        let raw = conn
            .prepare_cached(&sql)
            .and_then(|mut statement| {
                statement
                    .query_row([item_id], RawScore::from_row)
                    .optional()
            })
            .map_err(StoreError::sqlite("reading the latest score of an item"))?;
        raw.map(|raw| raw.decode(&conn)).transpose()
    }

    /// Scores, newest first.
    pub fn list_scores(&self, filter: &ScoreFilter) -> Result<Vec<StoredScore>, StoreError> {
        let mut clauses = Vec::new();
        let mut values = Vec::new();
        if let Some(item_id) = &filter.item_id {
            values.push(SqlValue::Text(item_id.clone()));
            clauses.push(format!("s.item_id = ?{}", values.len()));
        }
        if let Some(observation_id) = &filter.observation_id {
            values.push(SqlValue::Text(observation_id.clone()));
            clauses.push(format!(
                "s.id IN (SELECT score_id FROM score_observations WHERE observation_id = ?{})",
                values.len()
            ));
        }
        if let Some(status) = filter.status {
            values.push(SqlValue::Text(status.as_str().into()));
            clauses.push(format!("s.status = ?{}", values.len()));
        }
        let sql = format!(
            "{SCORE_SELECT}{} ORDER BY s.id DESC{}",
            where_clause(&clauses),
            limit_clause(filter.limit, filter.offset)
        );
        let conn = self.lock()?;
        let mut statement = conn
            .prepare(&sql)
            .map_err(StoreError::sqlite("listing scores"))?;
        let raws = statement
            .query_map(params_from_iter(values), RawScore::from_row)
            .map_err(StoreError::sqlite("listing scores"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(StoreError::sqlite("listing scores"))?;
        raws.into_iter().map(|raw| raw.decode(&conn)).collect()
    }

    /// Observations, newest first, without their output.
    pub fn list_observations(
        &self,
        filter: &ObservationFilter,
    ) -> Result<Vec<ObservationSummary>, StoreError> {
        let mut clauses = Vec::new();
        let mut values = Vec::new();
        for (column, value) in [
            ("profile", &filter.profile),
            ("program_sha256", &filter.program_sha256),
            ("attempt_key", &filter.attempt_key),
        ] {
            if let Some(value) = value {
                values.push(SqlValue::Text(value.clone()));
                clauses.push(format!("o.{column} = ?{}", values.len()));
            }
        }
        let sql = format!(
            "SELECT o.id, o.attempt_key, o.profile, o.program_sha256, o.run, o.created_at,
                    (SELECT count(*) FROM score_observations l WHERE l.observation_id = o.id)
             FROM observations o{} ORDER BY o.rowid DESC{}",
            where_clause(&clauses),
            limit_clause(filter.limit, filter.offset)
        );
        let conn = self.lock()?;
        let mut statement = conn
            .prepare(&sql)
            .map_err(StoreError::sqlite("listing observations"))?;
        let rows = statement
            .query_map(params_from_iter(values), |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, String>(4)?,
                    row.get::<_, String>(5)?,
                    row.get::<_, i64>(6)?,
                ))
            })
            .map_err(StoreError::sqlite("listing observations"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(StoreError::sqlite("listing observations"))?;
        rows.into_iter()
            .map(
                |(id, attempt_key, profile, program_sha256, run, created_at, scores)| {
                    let run: ProgramRun =
                        serde_json::from_str(&run).map_err(|e| StoreError::Corrupt {
                            what: "observation",
                            id: id.clone(),
                            detail: format!("run: {e}"),
                        })?;
                    Ok(ObservationSummary {
                        invocations: run.events.len(),
                        outcomes: run
                            .events
                            .iter()
                            .map(|event| event.outcome.kind().to_string())
                            .collect(),
                        unproven: run.rests_on_unproven_conditions(),
                        id,
                        attempt_key,
                        profile,
                        program_sha256,
                        created_at,
                        scores: u64::try_from(scores).unwrap_or(0),
                    })
                },
            )
            .collect()
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
            source,
        };
        tx.execute_batch(step).map_err(failed)?;
        tx.pragma_update(None, "user_version", target)
            .map_err(failed)?;
    }
    tx.commit()
        .map_err(StoreError::sqlite("committing a migration"))
}

fn insert_program(conn: &Connection, sha256: &str, content: &[u8]) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO programs (sha256, content, size, created_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (sha256) DO NOTHING",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            sha256,
            content,
            content.len() as i64,
            now_rfc3339()
        ])
    })
    .map_err(StoreError::sqlite("storing a program"))?;
    Ok(())
}

/// An observation in the form of its row: every JSON column canonical.
struct ObservationRow<'a> {
    observation: &'a Observation,
    profile_fingerprint: String,
    profile_fingerprint_sha256: String,
    invocations: String,
    run: String,
    record: String,
    record_sha256: String,
}

impl<'a> ObservationRow<'a> {
    fn from_observation(observation: &'a Observation) -> Result<Self, StoreError> {
        let record = observation.canonical_json()?;
        Ok(ObservationRow {
            observation,
            profile_fingerprint: canonical_json(&observation.profile_fingerprint)?,
            profile_fingerprint_sha256: observation.profile_fingerprint_sha256()?,
            invocations: canonical_json(&observation.invocations)?,
            run: canonical_json(&observation.run)?,
            record_sha256: sha256_hex(record.as_bytes()),
            record,
        })
    }

    fn insert(&self, conn: &Connection) -> Result<(), StoreError> {
        let o = self.observation;
        let mut statement = conn
            .prepare_cached(
                "INSERT INTO observations (id, attempt_key, source, profile, profile_fingerprint,
                     profile_fingerprint_sha256, program_sha256, invocations, run, created_at,
                     record_sha256)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )
            .map_err(StoreError::sqlite("storing an observation"))?;
        statement
            .execute(params![
                o.id,
                o.attempt_key,
                o.source,
                o.profile,
                self.profile_fingerprint,
                self.profile_fingerprint_sha256,
                o.program_sha256,
                self.invocations,
                self.run,
                o.created_at,
                self.record_sha256,
            ])
            .map_err(StoreError::sqlite("storing an observation"))?;
        Ok(())
    }
}

fn load_observation(conn: &Connection, id: &str) -> Result<Option<Observation>, StoreError> {
    // Cached: replay and rescore read thousands of observations in a row,
    // and preparing the statement costs as much as running it.
    let mut statement = conn
        .prepare_cached(
            "SELECT id, attempt_key, source, profile, profile_fingerprint,
                    profile_fingerprint_sha256, program_sha256, invocations, run, created_at,
                    record_sha256
             FROM observations WHERE id = ?1",
        )
        .map_err(StoreError::sqlite("reading an observation"))?;
    let raw = statement
        .query_row([id], |row| {
            Ok((
                Observation {
                    id: row.get(0)?,
                    attempt_key: row.get(1)?,
                    source: row.get(2)?,
                    profile: row.get(3)?,
                    profile_fingerprint: serde_json::Value::Null,
                    program_sha256: row.get(6)?,
                    invocations: Vec::new(),
                    run: ProgramRun {
                        profile: String::new(),
                        program_sha256: String::new(),
                        events: Vec::new(),
                        sandbox_warnings: Vec::new(),
                    },
                    created_at: row.get(9)?,
                },
                [
                    row.get::<_, String>(4)?,
                    row.get::<_, String>(5)?,
                    row.get::<_, String>(7)?,
                    row.get::<_, String>(8)?,
                    row.get::<_, String>(10)?,
                ],
            ))
        })
        .optional()
        .map_err(StoreError::sqlite("reading an observation"))?;
    let Some((
        mut observation,
        [
            fingerprint,
            fingerprint_sha256,
            invocations,
            run,
            record_sha256,
        ],
    )) = raw
    else {
        return Ok(None);
    };
    let corrupt = |field: &str, e: serde_json::Error| StoreError::Corrupt {
        what: "observation",
        id: id.to_string(),
        detail: format!("{field}: {e}"),
    };
    observation.profile_fingerprint =
        serde_json::from_str(&fingerprint).map_err(|e| corrupt("profile_fingerprint", e))?;
    observation.invocations = serde_json::from_str::<Vec<Invocation>>(&invocations)
        .map_err(|e| corrupt("invocations", e))?;
    observation.run = serde_json::from_str(&run).map_err(|e| corrupt("run", e))?;
    let tampered = |detail: &str| StoreError::Tampered {
        what: "observation",
        id: id.to_string(),
        detail: detail.to_string(),
    };
    if observation.record_sha256()? != record_sha256 {
        return Err(tampered(
            "the record does not hash to its stored record_sha256",
        ));
    }
    if observation.profile_fingerprint_sha256()? != fingerprint_sha256 {
        return Err(tampered(
            "profile_fingerprint_sha256 does not match the fingerprint",
        ));
    }
    observation
        .check_consistent()
        .map_err(|detail| tampered(&detail))?;
    Ok(Some(observation))
}

fn insert_score(conn: &Connection, score: &ScoreRecord) -> Result<i64, StoreError> {
    score
        .check_consistent()
        .map_err(StoreError::InvalidRecord)?;
    let expectation = canonical_json(&score.expectation)?;
    let cases = canonical_json(&score.cases)?;
    for id in &score.observation_ids {
        let exists: bool = conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM observations WHERE id = ?1)")
            .and_then(|mut statement| statement.query_row([id], |row| row.get(0)))
            .map_err(StoreError::sqlite("checking an observation"))?;
        if !exists {
            return Err(StoreError::ObservationNotStored { id: id.clone() });
        }
    }
    conn.prepare_cached(
        "INSERT INTO scores (item_id, origin, program_sha256, profile, expectation,
             expectation_sha256, status, value, rationale, reason, cases, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )
    .and_then(|mut statement| {
        statement.execute(params![
            score.item_id,
            score.origin.as_str(),
            score.program_sha256,
            score.profile,
            expectation,
            score.expectation_sha256,
            score.status.as_str(),
            score.value,
            score.rationale,
            score.reason,
            cases,
            now_rfc3339(),
        ])
    })
    .map_err(StoreError::sqlite("storing a score"))?;
    let score_id = conn.last_insert_rowid();
    let mut link = conn
        .prepare_cached(
            "INSERT INTO score_observations (score_id, position, observation_id)
             VALUES (?1, ?2, ?3)",
        )
        .map_err(StoreError::sqlite("linking a score"))?;
    for (position, id) in score.observation_ids.iter().enumerate() {
        link.execute(params![score_id, position as i64, id])
            .map_err(StoreError::sqlite("linking a score"))?;
    }
    Ok(score_id)
}

const SCORE_SELECT: &str = "SELECT s.id, s.item_id, s.origin, s.program_sha256, s.profile,
        s.expectation, s.expectation_sha256, s.status, s.value, s.rationale, s.reason, s.cases,
        s.created_at
    FROM scores s";

/// A score row before its JSON columns are decoded.
struct RawScore {
    id: i64,
    item_id: Option<String>,
    origin: String,
    program_sha256: String,
    profile: String,
    expectation: String,
    expectation_sha256: String,
    status: String,
    value: Option<bool>,
    rationale: String,
    reason: Option<String>,
    cases: String,
    created_at: String,
}

impl RawScore {
    fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawScore> {
        Ok(RawScore {
            id: row.get(0)?,
            item_id: row.get(1)?,
            origin: row.get(2)?,
            program_sha256: row.get(3)?,
            profile: row.get(4)?,
            expectation: row.get(5)?,
            expectation_sha256: row.get(6)?,
            status: row.get(7)?,
            value: row.get(8)?,
            rationale: row.get(9)?,
            reason: row.get(10)?,
            cases: row.get(11)?,
            created_at: row.get(12)?,
        })
    }

    fn decode(self, conn: &Connection) -> Result<StoredScore, StoreError> {
        let corrupt = |detail: String| StoreError::Corrupt {
            what: "score",
            id: self.id.to_string(),
            detail,
        };
        let origin = match self.origin.as_str() {
            "execute" => ScoreOrigin::Execute,
            "replay" => ScoreOrigin::Replay,
            "rescore" => ScoreOrigin::Rescore,
            other => return Err(corrupt(format!("unknown origin {other:?}"))),
        };
        let status = match self.status.as_str() {
            "complete" => ScoreStatus::Complete,
            "undetermined" => ScoreStatus::Undetermined,
            other => return Err(corrupt(format!("unknown status {other:?}"))),
        };
        let expectation = serde_json::from_str(&self.expectation)
            .map_err(|e| corrupt(format!("expectation: {e}")))?;
        let cases =
            serde_json::from_str(&self.cases).map_err(|e| corrupt(format!("cases: {e}")))?;
        let mut statement = conn
            .prepare_cached(
                "SELECT observation_id FROM score_observations WHERE score_id = ?1
                 ORDER BY position",
            )
            .map_err(StoreError::sqlite("reading a score's links"))?;
        let observation_ids = statement
            .query_map([self.id], |row| row.get::<_, String>(0))
            .map_err(StoreError::sqlite("reading a score's links"))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(StoreError::sqlite("reading a score's links"))?;
        Ok(StoredScore {
            id: self.id,
            created_at: self.created_at,
            record: ScoreRecord {
                item_id: self.item_id,
                origin,
                program_sha256: self.program_sha256,
                profile: self.profile,
                expectation,
                expectation_sha256: self.expectation_sha256,
                status,
                value: self.value,
                rationale: self.rationale,
                reason: self.reason,
                cases,
                observation_ids,
            },
        })
    }
}

fn where_clause(clauses: &[String]) -> String {
    if clauses.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", clauses.join(" AND "))
    }
}

fn limit_clause(limit: Option<u64>, offset: u64) -> String {
    // Numbers, not user text, so formatting them in is safe. SQLite needs a
    // LIMIT before an OFFSET; -1 means none.
    match (limit, offset) {
        (None, 0) => String::new(),
        (None, offset) => format!(" LIMIT -1 OFFSET {offset}"),
        (Some(limit), offset) => format!(" LIMIT {limit} OFFSET {offset}"),
    }
}
