//! The scores table and its links to observations: append-only verdicts.

use super::sql::{limit_clause, where_clause};
use super::*;

impl EvidenceStore {
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
}

pub(super) fn insert_score(conn: &Connection, score: &ScoreRecord) -> Result<i64, StoreError> {
    insert_score_at(conn, score, &now_rfc3339())
}

/// Writes a score made at `created_at` (a merged score keeps its time).
pub(super) fn insert_score_at(
    conn: &Connection,
    score: &ScoreRecord,
    created_at: &str,
) -> Result<i64, StoreError> {
    score
        .check_consistent()
        .map_err(StoreError::InvalidRecord)?;
    let expectation = canonical_json(&score.expectation)?;
    let cases = canonical_json(&score.cases)?;
    let score_groups = score
        .score_groups
        .as_ref()
        .map(canonical_json)
        .transpose()?;
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
             expectation_sha256, status, value, rationale, reason, cases, created_at, score,
             score_groups)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
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
            created_at,
            score.score,
            score_groups,
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

pub(super) const SCORE_SELECT: &str =
    "SELECT s.id, s.item_id, s.origin, s.program_sha256, s.profile,
        s.expectation, s.expectation_sha256, s.status, s.value, s.rationale, s.reason, s.cases,
        s.created_at, s.score, s.score_groups
    FROM scores s";

/// A score row before its JSON columns are decoded.
pub(super) struct RawScore {
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
    score: Option<f64>,
    score_groups: Option<String>,
}

impl RawScore {
    pub(super) fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawScore> {
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
            score: row.get(13)?,
            score_groups: row.get(14)?,
        })
    }

    pub(super) fn decode(self, conn: &Connection) -> Result<StoredScore, StoreError> {
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
        let score_groups = self
            .score_groups
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| corrupt(format!("score_groups: {e}")))?;
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
                score: self.score,
                score_groups,
            },
        })
    }
}
