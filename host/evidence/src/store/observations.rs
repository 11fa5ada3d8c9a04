//! The observations table: immutable evidence, checked when read.

use super::programs::insert_program;
use super::scores::insert_score;
use super::sql::{limit_clause, where_clause};
use super::*;

impl EvidenceStore {
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
        if !score.observation_ids.contains(&observation.id) {
            return Err(StoreError::InvalidRecord(format!(
                "the score does not name observation {}",
                observation.id
            )));
        }
        let (score_id, outcome) = self.record(program, observation, Some(score))?;
        Ok((score_id.unwrap_or_default(), outcome))
    }

    /// Writes an observation that no score rests on yet (a request's own
    /// view of a run it shared, scored afterwards by replay), as
    /// [`Self::record_observation_with_score`] does: an identical copy is
    /// linked, a different one refused with
    /// [`StoreError::ObservationConflict`].
    pub fn record_observation(
        &self,
        observation: &Observation,
    ) -> Result<RecordOutcome, StoreError> {
        Ok(self.record(None, observation, None)?.1)
    }

    fn record(
        &self,
        program: Option<&[u8]>,
        observation: &Observation,
        score: Option<&ScoreRecord>,
    ) -> Result<(Option<i64>, RecordOutcome), StoreError> {
        observation
            .check_consistent()
            .map_err(StoreError::InvalidRecord)?;
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
        let score_id = score.map(|score| insert_score(&tx, score)).transpose()?;
        tx.commit().map_err(StoreError::sqlite(
            "committing an observation and its score",
        ))?;
        Ok((score_id, outcome))
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
}

/// An observation in the form of its row: every JSON column canonical.
pub(super) struct ObservationRow<'a> {
    observation: &'a Observation,
    profile_fingerprint: String,
    profile_fingerprint_sha256: String,
    invocations: String,
    run: String,
    pub(super) record: String,
    record_sha256: String,
}

impl<'a> ObservationRow<'a> {
    pub(super) fn from_observation(observation: &'a Observation) -> Result<Self, StoreError> {
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

    pub(super) fn insert(&self, conn: &Connection) -> Result<(), StoreError> {
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

pub(super) fn load_observation(
    conn: &Connection,
    id: &str,
) -> Result<Option<Observation>, StoreError> {
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
                        interaction: None,
                        profile: String::new(),
                        program_sha256: String::new(),
                        events: Vec::new(),
                        sandbox_warnings: Vec::new(),
                        compile: None,
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
