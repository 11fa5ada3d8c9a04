//! Where each observation came from: this store's own runs, or another
//! store merged in, and whether the operator trusted that store when
//! merging it. `score` reuses only evidence this store ran or trusted; the
//! rest serves replay, rescore and reports (it can be read by id, never
//! found for an attempt in its place).
//!
//! What a merged file says of itself (its identity, its own origins) is
//! unkeyed: whoever wrote it could have written anything. So trust is never
//! read from the file: it is the operator's word, given at the merge
//! (`progscore store merge --trust`), and it only narrows what the file
//! says (evidence the other store had merged untrusted stays untrusted).

use super::observations::load_observation;
use super::*;

/// Where an observation came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "origin", rename_all = "snake_case")]
pub enum ObservationOrigin {
    /// This store ran it (or it was stored before origins were kept).
    ThisStore,
    /// Merged from another store.
    Merged {
        /// The file it was merged from.
        from: String,
        /// That store's identity, as its file claims (none for a store
        /// older than identities).
        store_id: Option<String>,
        /// Whether the operator trusted that store when merging it.
        trusted: bool,
        /// When it was merged (RFC 3339).
        merged_at: String,
    },
}

impl ObservationOrigin {
    /// Whether `score` may reuse it for an attempt instead of running.
    pub fn is_reusable(&self) -> bool {
        match self {
            ObservationOrigin::ThisStore => true,
            ObservationOrigin::Merged { trusted, .. } => *trusted,
        }
    }
}

/// How many of an attempt's other observations are looked at for a
/// reusable one when its derived id holds evidence that is not.
const OTHER_OBSERVATIONS_LOOKED_AT: i64 = 16;

impl EvidenceStore {
    /// This store's identity (made when the store was created, or when it
    /// was migrated to a schema that keeps origins).
    pub fn store_id(&self) -> Result<String, StoreError> {
        let conn = self.lock()?;
        read_store_id(&conn)
    }

    /// Where observation `id` came from ([`ObservationOrigin::ThisStore`]
    /// also when no such observation is stored).
    pub fn observation_origin(&self, id: &str) -> Result<ObservationOrigin, StoreError> {
        let conn = self.lock()?;
        read_origin(&conn, id)
    }

    /// The observation `score` may reuse for the attempt `attempt_key`:
    /// the one under its derived id `derived_id` when this store ran it or
    /// trusted its source; else the newest such observation of the attempt
    /// under another id (this store's own run, stored under a fresh id
    /// because the derived id held merged evidence it does not trust) that
    /// proves something. `None`: the attempt must run.
    pub fn reusable_observation(
        &self,
        attempt_key: &str,
        derived_id: &str,
    ) -> Result<Option<Observation>, StoreError> {
        let conn = self.lock()?;
        let Some(derived) = load_observation(&conn, derived_id)? else {
            return Ok(None);
        };
        if read_origin(&conn, derived_id)?.is_reusable() {
            return Ok(Some(derived));
        }
        let others: Vec<String> = conn
            .prepare_cached(
                "SELECT o.id FROM observations o
                 WHERE o.attempt_key = ?1 AND o.id != ?2
                   AND NOT EXISTS (SELECT 1 FROM observation_origins g
                                   WHERE g.observation_id = o.id AND g.trusted = 0)
                 ORDER BY o.rowid DESC LIMIT ?3",
            )
            .and_then(|mut statement| {
                statement
                    .query_map(
                        params![attempt_key, derived_id, OTHER_OBSERVATIONS_LOOKED_AT],
                        |row| row.get::<_, String>(0),
                    )?
                    .collect()
            })
            .map_err(StoreError::sqlite("looking for an attempt's observations"))?;
        for id in others {
            if let Some(observation) = load_observation(&conn, &id)?
                && !observation.run.rests_on_unproven_conditions()
            {
                return Ok(Some(observation));
            }
        }
        Ok(None)
    }
}

pub(super) fn read_store_id(conn: &Connection) -> Result<String, StoreError> {
    conn.query_row(
        "SELECT id FROM store_identity WHERE singleton = 1",
        [],
        |row| row.get(0),
    )
    .map_err(StoreError::sqlite("reading the store's identity"))
}

pub(super) fn read_origin(conn: &Connection, id: &str) -> Result<ObservationOrigin, StoreError> {
    conn.prepare_cached(
        "SELECT merged_from, merged_store, trusted, merged_at
         FROM observation_origins WHERE observation_id = ?1",
    )
    .and_then(|mut statement| {
        statement
            .query_row([id], |row| {
                Ok(ObservationOrigin::Merged {
                    from: row.get(0)?,
                    store_id: row.get(1)?,
                    trusted: row.get::<_, i64>(2)? == 1,
                    merged_at: row.get(3)?,
                })
            })
            .optional()
    })
    .map(|origin| origin.unwrap_or(ObservationOrigin::ThisStore))
    .map_err(StoreError::sqlite("reading an observation's origin"))
}

/// Records that observation `id` was merged from `origin` (replacing a
/// less trusted record of it).
pub(super) fn record_origin(
    conn: &Connection,
    id: &str,
    origin: &ObservationOrigin,
) -> Result<(), StoreError> {
    let ObservationOrigin::Merged {
        from,
        store_id,
        trusted,
        merged_at,
    } = origin
    else {
        return Ok(());
    };
    conn.execute(
        "DELETE FROM observation_origins WHERE observation_id = ?1",
        [id],
    )
    .map_err(StoreError::sqlite("recording an observation's origin"))?;
    conn.execute(
        "INSERT INTO observation_origins (observation_id, merged_from, merged_store, trusted, merged_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![id, from, store_id, i64::from(*trusted), merged_at],
    )
    .map_err(StoreError::sqlite("recording an observation's origin"))?;
    Ok(())
}
