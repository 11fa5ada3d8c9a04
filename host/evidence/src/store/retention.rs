//! Retention: removing old evidence (by age, or the oldest until the store
//! fits a size), and the store's size and row counts.
//!
//! What a score still rests on stays unless the caller says otherwise: an
//! observation linked to the latest score of a named item (the verdict
//! `rescore`, `report` and `scores --item` answer with). Superseded scores
//! and the scores of anonymous requests (a server's dialects carry no item
//! id) are history: they go with the evidence they rest on. A score is
//! never kept without its evidence: removing an observation removes every
//! score linked to it, and a program goes once nothing refers to it.
//!
//! Deleting evidence is refused by the store's triggers except inside a
//! prune's own transaction (the `prune_permit` row, which no other
//! connection ever sees). A prune works in short transactions of a few
//! hundred observations, so other writers wait for one batch at most; a
//! dry run does the same work and rolls every batch back.

use std::collections::HashSet;

use super::*;

/// What to remove.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Remove observations (and finished submissions) older than this.
    pub max_age: Option<Duration>,
    /// Then remove the oldest observations until the bytes in use fit this.
    pub max_size: Option<u64>,
    /// Also remove what the latest score of a named item rests on (with
    /// that score).
    pub include_scored: bool,
}

impl RetentionPolicy {
    /// Whether it removes anything at all.
    pub fn is_active(&self) -> bool {
        self.max_age.is_some() || self.max_size.is_some()
    }
}

/// What a prune removed (or, in a dry run, would remove).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PruneSummary {
    /// Nothing was removed: this is what a prune would do.
    pub dry_run: bool,
    /// Observations removed.
    pub observations_removed: u64,
    /// Scores removed with them.
    pub scores_removed: u64,
    /// Programs nothing refers to any more, removed.
    pub programs_removed: u64,
    /// Finished submissions removed.
    pub submissions_removed: u64,
    /// Observations old enough to go, kept because a named item's latest
    /// score rests on them.
    pub observations_kept_for_scores: u64,
    /// Bytes in use in the file before.
    pub bytes_in_use_before: u64,
    /// Bytes in use after (the file keeps its size: freed pages are reused).
    pub bytes_in_use_after: u64,
    /// The first observations removed, oldest first.
    pub removed_ids: Vec<String>,
}

/// The store's size and rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreUsage {
    /// The database file's size.
    pub file_bytes: u64,
    /// The write-ahead log's size.
    pub wal_bytes: u64,
    /// Bytes of the file in use (pages not on the free list).
    pub in_use_bytes: u64,
    /// Stored programs.
    pub programs: u64,
    /// Stored observations.
    pub observations: u64,
    /// Stored scores.
    pub scores: u64,
    /// A server's submissions.
    pub submissions: u64,
    /// Leases held now.
    pub leases: u64,
}

/// Observations removed per transaction.
const BATCH: usize = 256;

/// How many removed ids a summary names.
const NAMED_REMOVED: usize = 20;

/// Bytes a row takes beyond its text columns (keys, times, page overhead).
const ROW_OVERHEAD: i64 = 256;

/// `o` is what a named item's latest score rests on.
const RESTS_A_STANDING_SCORE: &str = "EXISTS (
    SELECT 1 FROM score_observations l JOIN scores s ON s.id = l.score_id
    WHERE l.observation_id = o.id AND s.item_id IS NOT NULL
      AND s.id = (SELECT max(s2.id) FROM scores s2 WHERE s2.item_id = s.item_id))";

impl EvidenceStore {
    /// The store's size and row counts. Read on a connection of its own
    /// (WAL readers block no one), so a large count does not hold up the
    /// store's writers.
    pub fn usage(&self) -> Result<StoreUsage, StoreError> {
        let file_bytes = std::fs::metadata(&self.label).map_or(0, |m| m.len());
        let wal_bytes = std::fs::metadata(format!("{}-wal", self.label)).map_or(0, |m| m.len());
        let own;
        let guard;
        let conn: &Connection = if file_bytes > 0 {
            own = Connection::open_with_flags(
                &self.label,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                    | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .map_err(|cause| StoreError::Open {
                path: self.label.clone(),
                cause,
            })?;
            own.busy_timeout(BUSY_TIMEOUT)
                .map_err(StoreError::sqlite("reading the store's size"))?;
            &own
        } else {
            guard = self.lock()?;
            &guard
        };
        let count = |table: &str| -> Result<u64, StoreError> {
            conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
                row.get::<_, i64>(0)
            })
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(StoreError::sqlite("counting rows"))
        };
        Ok(StoreUsage {
            file_bytes,
            wal_bytes,
            in_use_bytes: in_use_bytes(conn)?,
            programs: count("programs")?,
            observations: count("observations")?,
            scores: count("scores")?,
            submissions: count("submissions")?,
            leases: count("leases")?,
        })
    }

    /// Removes what `policy` says (everything it would remove, then rolled
    /// back, when `dry_run`), and says what.
    pub fn prune(
        &self,
        policy: &RetentionPolicy,
        dry_run: bool,
    ) -> Result<PruneSummary, StoreError> {
        let cutoff = policy
            .max_age
            .map(|age| humantime::format_rfc3339_millis(SystemTime::now() - age).to_string());
        let mut summary = PruneSummary {
            dry_run,
            ..PruneSummary::default()
        };
        let candidates = {
            let conn = self.lock()?;
            summary.bytes_in_use_before = in_use_bytes(&conn)?;
            if let Some(cutoff) = &cutoff
                && !policy.include_scored
            {
                summary.observations_kept_for_scores = conn
                    .query_row(
                        &format!(
                            "SELECT count(*) FROM observations o
                             WHERE o.created_at < ?1 AND {RESTS_A_STANDING_SCORE}"
                        ),
                        [cutoff],
                        |row| row.get::<_, i64>(0),
                    )
                    .map(|n| u64::try_from(n).unwrap_or(0))
                    .map_err(StoreError::sqlite("counting evidence scores rest on"))?;
            }
            candidates(
                &conn,
                policy,
                cutoff.as_deref(),
                summary.bytes_in_use_before,
            )?
        };
        for batch in candidates.chunks(BATCH) {
            let removed = self.remove_batch(batch, policy.include_scored, dry_run)?;
            summary.observations_removed += removed.observations;
            summary.scores_removed += removed.scores;
            summary.programs_removed += removed.programs;
            for id in removed.ids {
                if summary.removed_ids.len() < NAMED_REMOVED {
                    summary.removed_ids.push(id);
                }
            }
        }
        let mut conn = self.lock()?;
        if let Some(cutoff) = &cutoff {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(StoreError::sqlite("starting a prune"))?;
            let removed = tx
                .execute(
                    "DELETE FROM submissions WHERE result IS NOT NULL AND finished_at < ?1",
                    [cutoff],
                )
                .map_err(StoreError::sqlite("removing old submissions"))?;
            summary.submissions_removed = removed as u64;
            // Programs stored for later use that no evidence ever used.
            take_permit(&tx)?;
            summary.programs_removed += tx
                .execute(
                    "DELETE FROM programs WHERE created_at < ?1
                       AND NOT EXISTS (SELECT 1 FROM observations o WHERE o.program_sha256 = programs.sha256)
                       AND NOT EXISTS (SELECT 1 FROM scores s WHERE s.program_sha256 = programs.sha256)",
                    [cutoff],
                )
                .map_err(StoreError::sqlite("removing unused programs"))?
                as u64;
            give_back_permit(&tx)?;
            if dry_run {
                tx.rollback()
                    .map_err(StoreError::sqlite("rolling a dry run back"))?;
            } else {
                tx.commit()
                    .map_err(StoreError::sqlite("committing a prune"))?;
            }
        }
        summary.bytes_in_use_after = in_use_bytes(&conn)?;
        Ok(summary)
    }

    /// Gives the space freed by prunes back to the file system (SQLite's
    /// `VACUUM`: rewrites the file, and waits for other writers).
    pub fn vacuum(&self) -> Result<(), StoreError> {
        let conn = self.lock()?;
        conn.execute_batch("VACUUM")
            .map_err(StoreError::sqlite("vacuuming the store"))
    }

    fn remove_batch(
        &self,
        ids: &[String],
        include_scored: bool,
        dry_run: bool,
    ) -> Result<Removed, StoreError> {
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(StoreError::sqlite("starting a prune"))?;
        take_permit(&tx)?;
        let mut removed = Removed::default();
        let mut programs = HashSet::new();
        let fail = StoreError::sqlite;
        for id in ids {
            // Asked again inside the transaction: a score may have come to
            // rest on it since the candidates were chosen.
            let (program, standing): (Option<String>, bool) = tx
                .query_row(
                    &format!(
                        "SELECT o.program_sha256, {RESTS_A_STANDING_SCORE}
                         FROM observations o WHERE o.id = ?1"
                    ),
                    [id],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()
                .map_err(fail("reading an observation to prune"))?
                .map_or((None, true), |(p, s)| (Some(p), s));
            let Some(program) = program else {
                continue;
            };
            if standing && !include_scored {
                continue;
            }
            let scores: Vec<(i64, String)> = tx
                .prepare_cached(
                    "SELECT s.id, s.program_sha256 FROM scores s
                     WHERE s.id IN (SELECT score_id FROM score_observations WHERE observation_id = ?1)",
                )
                .and_then(|mut statement| {
                    statement
                        .query_map([id], |row| Ok((row.get(0)?, row.get(1)?)))?
                        .collect()
                })
                .map_err(fail("reading the scores of an observation"))?;
            for (score_id, score_program) in scores {
                tx.execute(
                    "DELETE FROM score_observations WHERE score_id = ?1",
                    [score_id],
                )
                .map_err(fail("removing a score's links"))?;
                tx.execute("DELETE FROM scores WHERE id = ?1", [score_id])
                    .map_err(fail("removing a score"))?;
                removed.scores += 1;
                programs.insert(score_program);
            }
            tx.execute(
                "DELETE FROM observation_origins WHERE observation_id = ?1",
                [id],
            )
            .map_err(fail("removing an observation's origin"))?;
            tx.execute("DELETE FROM observations WHERE id = ?1", [id])
                .map_err(fail("removing an observation"))?;
            removed.observations += 1;
            removed.ids.push(id.clone());
            programs.insert(program);
        }
        for sha256 in programs {
            removed.programs += tx
                .execute(
                    "DELETE FROM programs WHERE sha256 = ?1
                       AND NOT EXISTS (SELECT 1 FROM observations WHERE program_sha256 = ?1)
                       AND NOT EXISTS (SELECT 1 FROM scores WHERE program_sha256 = ?1)",
                    [&sha256],
                )
                .map_err(fail("removing a program"))? as u64;
        }
        give_back_permit(&tx)?;
        if dry_run {
            tx.rollback()
                .map_err(StoreError::sqlite("rolling a dry run back"))?;
        } else {
            tx.commit()
                .map_err(StoreError::sqlite("committing a prune"))?;
        }
        Ok(removed)
    }
}

#[derive(Default)]
struct Removed {
    observations: u64,
    scores: u64,
    programs: u64,
    ids: Vec<String>,
}

/// Inserts the row that lets this transaction delete evidence; the
/// transaction deletes it again before it ends (a failed one is rolled back
/// with it), so no other connection ever sees it.
fn take_permit(conn: &Connection) -> Result<(), StoreError> {
    conn.execute("INSERT INTO prune_permit (singleton) VALUES (1)", [])
        .map(drop)
        .map_err(StoreError::sqlite("starting a prune"))
}

fn give_back_permit(conn: &Connection) -> Result<(), StoreError> {
    conn.execute("DELETE FROM prune_permit", [])
        .map(drop)
        .map_err(StoreError::sqlite("ending a prune"))
}

/// Bytes of the file in use: its pages minus those on the free list.
fn in_use_bytes(conn: &Connection) -> Result<u64, StoreError> {
    let value = |pragma: &str| -> Result<i64, StoreError> {
        conn.pragma_query_value(None, pragma, |row| row.get(0))
            .map_err(StoreError::sqlite("reading the store's size"))
    };
    let pages = value("page_count")? - value("freelist_count")?;
    Ok(u64::try_from(pages * value("page_size")?).unwrap_or(0))
}

/// The observations to remove, oldest first: those older than `cutoff`,
/// then the oldest others until about `in_use - max_size` bytes are freed.
fn candidates(
    conn: &Connection,
    policy: &RetentionPolicy,
    cutoff: Option<&str>,
    in_use: u64,
) -> Result<Vec<String>, StoreError> {
    let mut excess = policy.max_size.map_or(0, |max| {
        i64::try_from(in_use.saturating_sub(max)).unwrap_or(i64::MAX)
    });
    if cutoff.is_none() && excess == 0 {
        return Ok(Vec::new());
    }
    let protect = if policy.include_scored {
        String::new()
    } else {
        format!("WHERE NOT {RESTS_A_STANDING_SCORE}")
    };
    // An observation's bytes, with the scores that go with it.
    let sql = format!(
        "SELECT o.id, o.created_at < ?1,
                length(o.run) + length(o.invocations) + length(o.profile_fingerprint) + ?2
                + coalesce((SELECT sum(length(s.expectation) + length(s.cases)
                                       + length(s.rationale) + ?2)
                            FROM scores s JOIN score_observations l ON l.score_id = s.id
                            WHERE l.observation_id = o.id), 0)
         FROM observations o {protect} ORDER BY o.created_at, o.rowid"
    );
    let mut statement = conn
        .prepare(&sql)
        .map_err(StoreError::sqlite("choosing what to prune"))?;
    let mut rows = statement
        .query(params![cutoff.unwrap_or(""), ROW_OVERHEAD])
        .map_err(StoreError::sqlite("choosing what to prune"))?;
    let mut chosen = Vec::new();
    while let Some(row) = rows
        .next()
        .map_err(StoreError::sqlite("choosing what to prune"))?
    {
        let id: String = row
            .get(0)
            .map_err(StoreError::sqlite("choosing what to prune"))?;
        let old: bool = row
            .get(1)
            .map_err(StoreError::sqlite("choosing what to prune"))?;
        let bytes: i64 = row
            .get(2)
            .map_err(StoreError::sqlite("choosing what to prune"))?;
        if old || excess > 0 {
            chosen.push(id);
            excess -= bytes;
        } else {
            // Ordered by age: nothing after this one is older.
            break;
        }
    }
    Ok(chosen)
}
