//! Merging another store's evidence into this one: stores written on
//! different machines (a cluster's nodes, several CI runners) become one.
//!
//! Observations are immutable and content-addressed by attempt, so a union
//! is well defined: an identical copy is already here, a new one is added,
//! and a copy that differs under the same id is a conflict (two runs claim
//! the same attempt) that is refused and named, never resolved by choosing.
//! Programs are content-addressed too. Scores are append-only facts with no
//! id outside their store: one is added unless an identical score (same
//! record, same time, same observations) is here already, so merging the
//! same file twice adds nothing. Leases and a server's submissions are not
//! evidence and stay where they are.
//!
//! Every observation added is recorded as merged (`origins`): from which
//! file, which store the file says it is, and whether the operator trusted
//! it ([`MergeTrust`]). Nothing in the file can make its evidence trusted:
//! its digests are unkeyed, so whoever wrote it could have computed them.

use std::collections::HashSet;

use rusqlite::OpenFlags;

use super::observations::{ObservationRow, load_observation};
use super::origins::{ObservationOrigin, read_origin, read_store_id, record_origin};
use super::programs::insert_program;
use super::scores::{RawScore, SCORE_SELECT, insert_score_at};
use super::*;

/// What a merge brought in.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct MergeSummary {
    /// Programs added (their content was not here).
    pub programs_added: u64,
    /// Observations added.
    pub observations_added: u64,
    /// Observations whose identical copy was here already.
    pub observations_present: u64,
    /// Scores added, with their links.
    pub scores_added: u64,
    /// Scores an identical copy of which was here already.
    pub scores_present: u64,
    /// Observations stored here with other content under the same id, kept
    /// as they are here ([`OnConflict::KeepThisStore`]).
    pub observations_conflicting: u64,
    /// Scores not merged because they rest on such an observation's other
    /// copy.
    pub scores_skipped: u64,
    /// The first conflicting ids.
    pub conflicting_ids: Vec<String>,
    /// The merged store's identity, as its file claims (none for a store
    /// older than identities).
    pub merged_store: Option<String>,
    /// Whether its evidence was merged as trusted: `score` may reuse it.
    pub trusted: bool,
}

/// Whether `score` may reuse the merged evidence instead of running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MergeTrust {
    /// The merged evidence serves replay, rescore and reports; `score`
    /// runs the attempt here rather than believe it.
    #[default]
    Untrusted,
    /// The operator vouches for the file (their own machine wrote it):
    /// `score` reuses its evidence as this store's own, except what that
    /// store had itself merged untrusted.
    Trusted,
}

/// What to do when the other store holds an observation stored here with
/// other content (the same attempt run twice, apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnConflict {
    /// Merge nothing and name the conflicts.
    #[default]
    Refuse,
    /// Keep this store's copy, merge the rest, and skip the other store's
    /// scores that rest on its copy (they judged evidence not kept here).
    KeepThisStore,
}

/// How many conflicting ids an error names before it counts the rest.
const NAMED_CONFLICTS: usize = 10;

impl EvidenceStore {
    /// Adds the evidence of the store in `other` (programs, observations,
    /// scores and their links) to this one, in one transaction: all of it
    /// or, on any conflict or damaged row, none. `other` is only read (its
    /// file is not migrated or changed), and every row read from it is
    /// checked as this store checks its own. `on_conflict` says what an
    /// observation stored here with other content under the same id does;
    /// `trust` whether `score` may reuse what is merged.
    pub fn merge_from(
        &self,
        other: &Path,
        on_conflict: OnConflict,
        trust: MergeTrust,
    ) -> Result<MergeSummary, StoreError> {
        let label = other.display().to_string();
        let source = |cause: StoreError| StoreError::MergeSource {
            path: label.clone(),
            cause: Box::new(cause),
        };
        let invalid = |detail: String| StoreError::MergeSource {
            path: label.clone(),
            cause: Box::new(StoreError::InvalidRecord(detail)),
        };
        if !other.is_file() {
            return Err(invalid("no such file".into()));
        }
        if let (Ok(this), Ok(that)) = (
            std::fs::canonicalize(&self.label),
            std::fs::canonicalize(other),
        ) && this == that
        {
            return Err(invalid("it is this store itself".into()));
        }
        let from = Connection::open_with_flags(
            other,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|cause| StoreError::Open {
            path: label.clone(),
            cause,
        })?;
        from.busy_timeout(BUSY_TIMEOUT)
            .map_err(|cause| StoreError::Open {
                path: label.clone(),
                cause,
            })?;
        let version = read_version(&from).map_err(|cause| StoreError::Open {
            path: label.clone(),
            cause,
        })?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                path: label,
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if version < 1 {
            return Err(invalid("it is not a progscore evidence store".into()));
        }
        // Every schema version has had these tables unchanged since the first;
        // identities and origins came with version 5.
        let keeps_origins = version >= 5;
        let merged_store = if keeps_origins {
            Some(read_store_id(&from).map_err(source)?)
        } else {
            None
        };
        let merged_from = std::fs::canonicalize(other)
            .unwrap_or_else(|_| other.to_path_buf())
            .display()
            .to_string();
        let merged_at = now_rfc3339();
        let mut summary = MergeSummary {
            merged_store: merged_store.clone(),
            trusted: trust == MergeTrust::Trusted,
            ..MergeSummary::default()
        };
        let mut conn = self.lock()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(StoreError::sqlite("starting a merge"))?;

        let sha256s =
            column(&from, "SELECT sha256 FROM programs ORDER BY rowid").map_err(source)?;
        for sha256 in sha256s {
            let content: Vec<u8> = from
                .query_row(
                    "SELECT content FROM programs WHERE sha256 = ?1",
                    [&sha256],
                    |row| row.get(0),
                )
                .map_err(StoreError::sqlite("reading a program"))
                .map_err(source)?;
            if sha256_hex(&content) != sha256 {
                return Err(source(StoreError::Tampered {
                    what: "program",
                    id: sha256,
                    detail: "content does not hash to its id".into(),
                }));
            }
            let here: bool = tx
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM programs WHERE sha256 = ?1)",
                    [&sha256],
                    |row| row.get(0),
                )
                .map_err(StoreError::sqlite("checking a program"))?;
            if !here {
                insert_program(&tx, &sha256, &content)?;
                summary.programs_added += 1;
            }
        }

        let ids = column(&from, "SELECT id FROM observations ORDER BY rowid").map_err(source)?;
        let mut conflicts = Vec::new();
        for id in ids {
            let Some(observation) = load_observation(&from, &id).map_err(source)? else {
                continue;
            };
            let row = ObservationRow::from_observation(&observation)?;
            // Trusted only if the operator said so and the other store ran
            // it or trusted it itself.
            let trusted = trust == MergeTrust::Trusted
                && (!keeps_origins || read_origin(&from, &id).map_err(source)?.is_reusable());
            let origin = ObservationOrigin::Merged {
                from: merged_from.clone(),
                store_id: merged_store.clone(),
                trusted,
                merged_at: merged_at.clone(),
            };
            match load_observation(&tx, &id)? {
                Some(stored) if stored.canonical_json()? == row.record => {
                    // A copy here that is not reusable becomes so when a
                    // trusted store holds it too; this store's own stays so.
                    if trusted && !read_origin(&tx, &id)?.is_reusable() {
                        record_origin(&tx, &id, &origin)?;
                    }
                    summary.observations_present += 1;
                }
                Some(_) => conflicts.push(id),
                None => {
                    row.insert(&tx)?;
                    record_origin(&tx, &id, &origin)?;
                    summary.observations_added += 1;
                }
            }
        }
        if !conflicts.is_empty() && on_conflict == OnConflict::Refuse {
            // Dropping the transaction rolls it back: nothing merged.
            let count = conflicts.len();
            conflicts.truncate(NAMED_CONFLICTS);
            return Err(StoreError::MergeConflict {
                other: label,
                count,
                ids: conflicts,
            });
        }
        let conflicting: HashSet<String> = conflicts.iter().cloned().collect();
        summary.observations_conflicting = conflicts.len() as u64;
        conflicts.truncate(NAMED_CONFLICTS);
        summary.conflicting_ids = conflicts;

        let mut present = score_keys(&tx)?;
        let raws = read_raw_scores(&from).map_err(source)?;
        for raw in raws {
            let stored = raw.decode(&from).map_err(source)?;
            if stored
                .record
                .observation_ids
                .iter()
                .any(|id| conflicting.contains(id))
            {
                summary.scores_skipped += 1;
                continue;
            }
            let key = score_key(&stored)?;
            if present.contains(&key) {
                summary.scores_present += 1;
                continue;
            }
            insert_score_at(&tx, &stored.record, &stored.created_at)?;
            present.insert(key);
            summary.scores_added += 1;
        }
        tx.commit()
            .map_err(StoreError::sqlite("committing a merge"))?;
        Ok(summary)
    }
}

/// The first column of every row of `sql`.
fn column(conn: &Connection, sql: &str) -> Result<Vec<String>, StoreError> {
    let mut statement = conn
        .prepare(sql)
        .map_err(StoreError::sqlite("reading the store to merge"))?;
    statement
        .query_map([], |row| row.get::<_, String>(0))
        .map_err(StoreError::sqlite("reading the store to merge"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(StoreError::sqlite("reading the store to merge"))
}

fn read_raw_scores(conn: &Connection) -> Result<Vec<RawScore>, StoreError> {
    let mut statement = conn
        .prepare(&format!("{SCORE_SELECT} ORDER BY s.id"))
        .map_err(StoreError::sqlite("reading scores"))?;
    statement
        .query_map([], RawScore::from_row)
        .map_err(StoreError::sqlite("reading scores"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(StoreError::sqlite("reading scores"))
}

/// What makes two scores the same fact: the record, its observations in
/// order, and when it was made (its id is only its place in one store).
fn score_key(score: &StoredScore) -> Result<String, StoreError> {
    let key = serde_json::json!({"record": score.record, "created_at": score.created_at});
    Ok(sha256_hex(canonical_json(&key)?.as_bytes()))
}

fn score_keys(conn: &Connection) -> Result<HashSet<String>, StoreError> {
    read_raw_scores(conn)?
        .into_iter()
        .map(|raw| score_key(&raw.decode(conn)?))
        .collect()
}
