//! The submissions table: requests a server accepted to run later (Judge0's
//! `wait=false`), by token, so that their results can be fetched, also after
//! the server restarted.
//!
//! A row is coordination, not evidence: it is written when the submission is
//! accepted, and completed once with its result (which names the observation
//! the result rests on). The request and result are the dialect's own JSON;
//! the store does not read them.

use super::*;

/// A submission as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSubmission {
    /// Its token.
    pub token: String,
    /// The dialect that accepted it (`judge0`).
    pub dialect: String,
    /// The server process that runs it (its owner name).
    pub owner: String,
    /// That owner's lock file (`None`: a row from before owners' locks
    /// were recorded).
    pub owner_lock: Option<String>,
    /// The request, as the dialect stored it.
    pub request: String,
    /// The result, once it is known.
    pub result: Option<String>,
    /// When it was accepted (RFC 3339).
    pub created_at: String,
    /// When its result was stored (RFC 3339).
    pub finished_at: Option<String>,
}

impl EvidenceStore {
    /// Stores a newly accepted submission (no result yet), run by `owner`
    /// whose lock file is `owner_lock`. A token already stored is an
    /// error: tokens are never reused.
    pub fn insert_submission(
        &self,
        token: &str,
        dialect: &str,
        owner: &str,
        owner_lock: Option<&str>,
        request: &str,
    ) -> Result<(), StoreError> {
        let conn = self.lock()?;
        conn.execute(
            "INSERT INTO submissions (token, dialect, owner, owner_lock, request, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![token, dialect, owner, owner_lock, request, now_rfc3339()],
        )
        .map_err(StoreError::sqlite("storing a submission"))?;
        Ok(())
    }

    /// Stores the result of `token`; `false` when it has one already (the
    /// first result stands) or no such submission is stored.
    pub fn finish_submission(&self, token: &str, result: &str) -> Result<bool, StoreError> {
        let conn = self.lock()?;
        let changed = conn
            .execute(
                "UPDATE submissions SET result = ?2, finished_at = ?3
                 WHERE token = ?1 AND result IS NULL",
                params![token, result, now_rfc3339()],
            )
            .map_err(StoreError::sqlite("storing a submission's result"))?;
        Ok(changed == 1)
    }

    /// Stores `result` for every unfinished submission of `owner` (a server
    /// that stops fails what it did not finish); how many.
    pub fn finish_unfinished_submissions_of(
        &self,
        owner: &str,
        result: &str,
    ) -> Result<usize, StoreError> {
        let conn = self.lock()?;
        conn.execute(
            "UPDATE submissions SET result = ?2, finished_at = ?3
             WHERE owner = ?1 AND result IS NULL",
            params![owner, result, now_rfc3339()],
        )
        .map_err(StoreError::sqlite(
            "storing unfinished submissions' results",
        ))
    }

    /// The submission stored under `token`, if any.
    pub fn submission(&self, token: &str) -> Result<Option<StoredSubmission>, StoreError> {
        let conn = self.lock()?;
        conn.prepare_cached(
            "SELECT token, dialect, owner, owner_lock, request, result, created_at, finished_at
             FROM submissions WHERE token = ?1",
        )
        .and_then(|mut statement| {
            statement
                .query_row([token], |row| {
                    Ok(StoredSubmission {
                        token: row.get(0)?,
                        dialect: row.get(1)?,
                        owner: row.get(2)?,
                        owner_lock: row.get(3)?,
                        request: row.get(4)?,
                        result: row.get(5)?,
                        created_at: row.get(6)?,
                        finished_at: row.get(7)?,
                    })
                })
                .optional()
        })
        .map_err(StoreError::sqlite("reading a submission"))
    }
}
