//! The scorer: validation, evidence, verdict, record.

use std::sync::Arc;

use progscore_evidence::{
    EvidenceStore, Observation, ObservationFilter, ScoreOrigin, ScoreRecord, ScoreStatus,
    StoreError, StoredScore,
};
use progscore_sandbox::{Invocation, Preflight, RuntimeProfile, SandboxError, sha256_hex};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::attempt::{Attempt, SOURCE_IDENTITY, attempt_key, belongs_to_attempt};
use crate::comparator::OutputComparator;
use crate::error::{ExpectationError, ReplayRefusal, ScoringError};
use crate::expectation::{Condition, ProgramBehaves, ScoringExpectation};
use crate::source::{EvidenceUse, ProgramExecutionSource, check_belongs};
use crate::verdict::{CaseReport, ReasonKind, Verdict, evaluate, no_evidence};

/// A program to score.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgramInput {
    /// The program's bytes, run verbatim (and stored with its evidence).
    Inline(Vec<u8>),
    /// A program already in the store, by its sha256.
    Stored {
        /// Its sha256 (the programs table's id).
        sha256: String,
    },
}

/// A request to score one program.
#[derive(Debug, Clone)]
pub struct ScoreRequest {
    /// The caller's id or label for the item (a batch line's `id`).
    pub item_id: Option<String>,
    /// The program.
    pub program: ProgramInput,
    /// What it must do.
    pub expectation: ScoringExpectation,
    /// Run again under a new observation id even if evidence is stored.
    pub fresh: bool,
    /// Cancels this caller's wait (and the run, if no other caller waits for it).
    pub cancel: CancellationToken,
}

impl ScoreRequest {
    /// A request with no item id, not fresh, never cancelled.
    pub fn new(program: ProgramInput, expectation: ScoringExpectation) -> Self {
        ScoreRequest {
            item_id: None,
            program,
            expectation,
            fresh: false,
            cancel: CancellationToken::new(),
        }
    }

    /// Sets the item id.
    pub fn item_id(mut self, item_id: impl Into<String>) -> Self {
        self.item_id = Some(item_id.into());
        self
    }

    /// Sets `fresh`.
    pub fn fresh(mut self, fresh: bool) -> Self {
        self.fresh = fresh;
        self
    }

    /// Sets the cancellation token.
    pub fn cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }
}

/// Which observation to replay.
#[derive(Debug, Clone, PartialEq)]
pub enum ObservationRef {
    /// The stored observation with this id.
    Id(String),
    /// This observation, which must be identical to the stored copy of its id.
    Given(Box<Observation>),
}

/// A request to score a stored observation against an expectation.
#[derive(Debug, Clone)]
pub struct ReplayRequest {
    /// The caller's id or label for the item.
    pub item_id: Option<String>,
    /// The observation.
    pub observation: ObservationRef,
    /// The expectation; its profile and invocations must be the observation's.
    pub expectation: ScoringExpectation,
}

/// A request to re-grade an item from stored evidence only.
#[derive(Debug, Clone)]
pub struct RescoreRequest {
    /// The item's id (its last score is returned for comparison).
    pub item_id: Option<String>,
    /// The program (only its sha256 is used; nothing runs).
    pub program: ProgramInput,
    /// The (possibly changed) expectation.
    pub expectation: ScoringExpectation,
}

/// One score, as returned and as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    /// The store's id for the score.
    pub score_id: i64,
    /// The caller's item id.
    pub item_id: Option<String>,
    /// Complete or undetermined.
    pub status: ScoreStatus,
    /// `Some(true|false)` exactly when complete.
    pub value: Option<bool>,
    /// The stable human sentence.
    pub rationale: String,
    /// Why it is undetermined.
    pub reason: Option<String>,
    /// The kind of that reason, for grouping (none when complete).
    pub reason_kind: Option<ReasonKind>,
    /// The observations used.
    pub observation_ids: Vec<String>,
    /// One report per case.
    pub cases: Vec<CaseReport>,
    /// The profile the expectation named.
    pub profile: String,
    /// The program scored.
    pub program_sha256: String,
    /// The expectation scored against.
    pub expectation: ScoringExpectation,
    /// sha256 of its canonical JSON.
    pub expectation_sha256: String,
    /// Where the evidence came from.
    pub evidence: EvidenceUse,
}

/// A rescore and the item's previous score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rescore {
    /// The new score.
    pub score: Score,
    /// The item's last score before this one, if the item had an id and a score.
    pub previous: Option<StoredScore>,
    /// Whether status or value differ from the previous score's.
    pub changed: bool,
}

/// Scores programs by running them (or reusing their attempt's evidence).
pub struct ProgramExecutionScorer {
    source: ProgramExecutionSource,
    replayer: Replayer,
    /// Each profile's preflight, once it passed.
    preflights: tokio::sync::Mutex<std::collections::HashMap<String, Preflight>>,
}

impl ProgramExecutionScorer {
    /// A scorer over a source, with these comparators.
    pub fn new(source: ProgramExecutionSource, comparators: Arc<dyn OutputComparator>) -> Self {
        let profiles = source.client().profiles().into_iter().cloned().collect();
        let replayer = Replayer::new(source.store().clone(), comparators, profiles);
        ProgramExecutionScorer {
            source,
            replayer,
            preflights: Default::default(),
        }
    }

    /// Checks that `profile` can run (see [`progscore_sandbox::SandboxClient::preflight`]);
    /// a passed check is kept, a failed one is asked again next time.
    /// [`Self::score`] calls it first; call it for every profile of a batch
    /// to refuse a batch before anything runs.
    pub async fn preflight(&self, profile: &str) -> Result<Preflight, SandboxError> {
        let mut preflights = self.preflights.lock().await;
        if let Some(found) = preflights.get(profile) {
            return Ok(found.clone());
        }
        let found = self.source.client().preflight(profile).await?;
        preflights.insert(profile.to_string(), found.clone());
        Ok(found)
    }

    /// The evidence source.
    pub fn source(&self) -> &ProgramExecutionSource {
        &self.source
    }

    /// The replayer (same store and comparators).
    pub fn replayer(&self) -> &Replayer {
        &self.replayer
    }

    /// Checks an expectation as [`Self::score`] would, without running anything.
    pub fn validate(&self, expectation: &ScoringExpectation) -> Result<(), ExpectationError> {
        self.replayer.validate(expectation).map(|_| ())
    }

    /// Scores one program (within a tokio runtime): validates, finds or makes the evidence, applies
    /// the verdict rules, and records the score (with the observation, if new,
    /// in the same transaction).
    pub async fn score(&self, request: ScoreRequest) -> Result<Score, ScoringError> {
        let (behaves, profile) = self.replayer.validate(&request.expectation)?;
        let expectation_sha256 = request.expectation.fingerprint()?;
        let store = self.source.store();
        let (program, inline): (Arc<[u8]>, bool) = match &request.program {
            ProgramInput::Inline(bytes) => (Arc::from(bytes.as_slice()), true),
            ProgramInput::Stored { sha256 } => match store.program(sha256)? {
                Some(bytes) => (Arc::from(bytes), false),
                None => {
                    return Err(ScoringError::ProgramNotStored {
                        sha256: sha256.clone(),
                    });
                }
            },
        };
        let program_sha256 = sha256_hex(&program);
        // The attempt is keyed by what will really run: the fingerprint with
        // what the backend resolved (the engine's default runtime...).
        let fingerprint = self
            .preflight(&profile.name)
            .await
            .map_err(ScoringError::Refused)?
            .fingerprint;
        let attempt = Attempt::from_parts(
            &profile.name,
            fingerprint,
            &program_sha256,
            invocations_of(behaves),
        )?;
        let evidence = self
            .source
            .observe(&attempt, &program, request.fresh, &request.cancel)
            .await?;
        let observation = &evidence.observation;
        // Comparators are synchronous CPU work (WebAssembly calls bounded by
        // their deadline); off the async workers, a slow one stalls no run.
        let verdict = {
            let comparators = self.replayer.comparators.clone();
            let profile = behaves.profile.clone();
            let cases = behaves.cases.clone();
            let observation = observation.clone();
            tokio::task::spawn_blocking(move || {
                evaluate(
                    &profile,
                    &cases,
                    &observation.run.events,
                    comparators.as_ref(),
                )
            })
            .await
            .map_err(|e| ScoringError::RunLost(format!("a comparator panicked: {e}")))?
        };
        let draft = self.replayer.draft(
            request.item_id.clone(),
            ScoreOrigin::Execute,
            &request.expectation,
            behaves,
            expectation_sha256.clone(),
            Some(observation),
            &program_sha256,
            Some(verdict),
        )?;
        if evidence.origin == EvidenceUse::Stored {
            let score_id = store.record_score(&draft.record)?;
            return Ok(draft.into_score(score_id, EvidenceUse::Stored));
        }
        let program_bytes = inline.then_some(&program[..]);
        match store.record_observation_with_score(program_bytes, observation, &draft.record) {
            Ok((score_id, _)) => Ok(draft.into_score(score_id, evidence.origin)),
            Err(StoreError::ObservationConflict { stored, .. }) => {
                // Another process stored its own run of this attempt first.
                // Its evidence stands; score against it instead.
                check_belongs(&stored, &attempt)?;
                let draft = self.replayer.draft(
                    request.item_id.clone(),
                    ScoreOrigin::Execute,
                    &request.expectation,
                    behaves,
                    expectation_sha256,
                    Some(&stored),
                    &program_sha256,
                    None,
                )?;
                let score_id = store.record_score(&draft.record)?;
                Ok(draft.into_score(score_id, EvidenceUse::Stored))
            }
            Err(error) => Err(error.into()),
        }
        // `evidence` (and with it this caller's place in the flight) is
        // dropped only now, after the write: a caller arriving meanwhile
        // joined the flight instead of running the attempt again.
    }

    /// Replays a stored observation; see [`Replayer::replay`].
    pub fn replay(&self, request: ReplayRequest) -> Result<Score, ScoringError> {
        self.replayer.replay(request)
    }

    /// Re-grades from stored evidence only; see [`Replayer::rescore`].
    pub fn rescore(&self, request: RescoreRequest) -> Result<Rescore, ScoringError> {
        self.replayer.rescore(request)
    }

    /// Re-grades many items in one transaction; see [`Replayer::rescore_batch`].
    pub fn rescore_batch(
        &self,
        requests: Vec<RescoreRequest>,
    ) -> Result<Vec<Result<Rescore, ScoringError>>, ScoringError> {
        self.replayer.rescore_batch(requests)
    }
}

/// Scores stored evidence without any sandbox: replay and rescore. Needs no
/// engine, so the CLI's `replay` and `rescore` work without one.
pub struct Replayer {
    store: Arc<EvidenceStore>,
    comparators: Arc<dyn OutputComparator>,
    profiles: Vec<RuntimeProfile>,
}

/// A score ready to be written.
struct Draft {
    record: ScoreRecord,
    cases: Vec<CaseReport>,
    reason_kind: Option<ReasonKind>,
    expectation: ScoringExpectation,
}

impl Draft {
    fn into_score(self, score_id: i64, evidence: EvidenceUse) -> Score {
        let record = self.record;
        Score {
            score_id,
            item_id: record.item_id,
            status: record.status,
            value: record.value,
            rationale: record.rationale,
            reason: record.reason,
            reason_kind: self.reason_kind,
            observation_ids: record.observation_ids,
            cases: self.cases,
            profile: record.profile,
            program_sha256: record.program_sha256,
            expectation: self.expectation,
            expectation_sha256: record.expectation_sha256,
            evidence,
        }
    }
}

impl Replayer {
    /// A replayer over a store, with these comparators; `profiles` are the
    /// configured ones (rescore derives attempt keys from them).
    pub fn new(
        store: Arc<EvidenceStore>,
        comparators: Arc<dyn OutputComparator>,
        profiles: Vec<RuntimeProfile>,
    ) -> Self {
        Replayer {
            store,
            comparators,
            profiles,
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<EvidenceStore> {
        &self.store
    }

    /// Scores a stored observation against `request.expectation` without
    /// running anything, and records a new score linked to it.
    ///
    /// Refused (nothing written) when the observation is not stored, differs
    /// from the stored copy, fails its integrity checks, or ran another
    /// profile or other invocations than the expectation's.
    pub fn replay(&self, request: ReplayRequest) -> Result<Score, ScoringError> {
        let draft = self.prepare_replay(request)?;
        let score_id = self.store.record_score(&draft.record)?;
        Ok(draft.into_score(score_id, EvidenceUse::Replayed))
    }

    /// Replays many observations and writes all their scores in one
    /// transaction (bulk rescoring). Per-request refusals are returned in
    /// place; only the scores of accepted requests are written. The outer
    /// error is a store failure, and then nothing was written.
    pub fn replay_batch(
        &self,
        requests: Vec<ReplayRequest>,
    ) -> Result<Vec<Result<Score, ScoringError>>, ScoringError> {
        let drafts = parallel_map(requests, |request| self.prepare_replay(request));
        let records: Vec<ScoreRecord> = drafts
            .iter()
            .filter_map(|draft| draft.as_ref().ok().map(|draft| draft.record.clone()))
            .collect();
        let mut ids = self.store.record_scores(&records)?.into_iter();
        Ok(drafts
            .into_iter()
            .map(|draft| {
                let draft = draft?;
                let score_id = ids.next().ok_or_else(missing_id)?;
                Ok(draft.into_score(score_id, EvidenceUse::Replayed))
            })
            .collect())
    }

    /// Re-grades an item from stored evidence only: the attempt's observation
    /// (by its derived id, else its newest clean one) is scored against the
    /// expectation. Without evidence the score is undetermined, "no stored
    /// evidence". Nothing runs. The item's previous score is returned beside
    /// the new one.
    pub fn rescore(&self, request: RescoreRequest) -> Result<Rescore, ScoringError> {
        let (draft, previous) = self.prepare_rescore(request)?;
        let score_id = self.store.record_score(&draft.record)?;
        Ok(finish_rescore(draft, previous, score_id))
    }

    /// [`Self::rescore`] for many items, writing all their scores in one
    /// transaction. Per-request errors are returned in place; the outer error
    /// is a store failure, and then nothing was written. Each item's
    /// `previous` is its last score from before the batch.
    pub fn rescore_batch(
        &self,
        requests: Vec<RescoreRequest>,
    ) -> Result<Vec<Result<Rescore, ScoringError>>, ScoringError> {
        let prepared = parallel_map(requests, |request| self.prepare_rescore(request));
        let records: Vec<ScoreRecord> = prepared
            .iter()
            .filter_map(|p| p.as_ref().ok().map(|(draft, _)| draft.record.clone()))
            .collect();
        let mut ids = self.store.record_scores(&records)?.into_iter();
        Ok(prepared
            .into_iter()
            .map(|prepared| {
                let (draft, previous) = prepared?;
                let score_id = ids.next().ok_or_else(missing_id)?;
                Ok(finish_rescore(draft, previous, score_id))
            })
            .collect())
    }

    fn prepare_rescore(
        &self,
        request: RescoreRequest,
    ) -> Result<(Draft, Option<StoredScore>), ScoringError> {
        let (behaves, profile) = self.validate(&request.expectation)?;
        let expectation_sha256 = request.expectation.fingerprint()?;
        let program_sha256 = match &request.program {
            ProgramInput::Inline(bytes) => sha256_hex(bytes),
            ProgramInput::Stored { sha256 } => sha256.clone(),
        };
        let attempt = Attempt::new(profile, &program_sha256, invocations_of(behaves))?;
        let previous = match &request.item_id {
            Some(item_id) => self.store.latest_score_for_item(item_id)?,
            None => None,
        };
        let observation = self.attempt_evidence(profile, &attempt)?;
        let draft = self.draft(
            request.item_id,
            ScoreOrigin::Rescore,
            &request.expectation,
            behaves,
            expectation_sha256,
            observation.as_ref(),
            &program_sha256,
            None,
        )?;
        Ok((draft, previous))
    }

    /// Checks an expectation: exactly one `program_behaves` with cases, a
    /// configured profile, every comparator known with valid params.
    fn validate<'e>(
        &self,
        expectation: &'e ScoringExpectation,
    ) -> Result<(&'e ProgramBehaves, &RuntimeProfile), ExpectationError> {
        let behaves = self.validate_conditions(expectation)?;
        let profile = self
            .profiles
            .iter()
            .find(|profile| profile.name == behaves.profile)
            .ok_or_else(|| ExpectationError::UnknownProfile {
                name: behaves.profile.clone(),
                known: self
                    .profiles
                    .iter()
                    .map(|profile| profile.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        // An invocation the program cannot be given is the line's fault,
        // found before anything runs.
        profile
            .check_invocations(&invocations_of(behaves))
            .map_err(|refusal| match refusal {
                SandboxError::InvalidInvocation { index, error } => ExpectationError::Invocation {
                    case: index,
                    field: error.field,
                    message: error.message,
                },
                other => ExpectationError::Invocation {
                    case: 0,
                    field: "args".into(),
                    message: other.to_string(),
                },
            })?;
        Ok((behaves, profile))
    }

    /// The checks that do not need the profile to be configured (replay:
    /// the observation says what ran).
    fn validate_conditions<'e>(
        &self,
        expectation: &'e ScoringExpectation,
    ) -> Result<&'e ProgramBehaves, ExpectationError> {
        let [Condition::ProgramBehaves(behaves)] = expectation.conditions.as_slice() else {
            return Err(ExpectationError::ConditionCount {
                found: expectation.conditions.len(),
            });
        };
        if behaves.cases.is_empty() {
            return Err(ExpectationError::NoCases);
        }
        for (case, program_case) in behaves.cases.iter().enumerate() {
            let streams = [
                ("stdout", &program_case.expected.stdout),
                ("stderr", &program_case.expected.stderr),
            ];
            for (stream, condition) in streams {
                if let Some(condition) = condition {
                    self.comparators
                        .validate(&condition.comparator, &condition.params)
                        .map_err(|refusal| ExpectationError::Comparator {
                            case,
                            stream,
                            refusal,
                        })?;
                }
            }
        }
        Ok(behaves)
    }

    fn prepare_replay(&self, request: ReplayRequest) -> Result<Draft, ScoringError> {
        let behaves = self.validate_conditions(&request.expectation)?;
        let expectation_sha256 = request.expectation.fingerprint()?;
        let id = match &request.observation {
            ObservationRef::Id(id) => id.clone(),
            ObservationRef::Given(observation) => observation.id.clone(),
        };
        let stored = match self.store.observation(&id) {
            Ok(Some(stored)) => stored,
            Ok(None) => return Err(ReplayRefusal::NotStored { id }.into()),
            Err(StoreError::Tampered { detail, .. }) => {
                return Err(ReplayRefusal::Tampered { id, detail }.into());
            }
            Err(error) => return Err(error.into()),
        };
        if let ObservationRef::Given(given) = &request.observation
            && given.canonical_json()? != stored.canonical_json()?
        {
            return Err(ReplayRefusal::Differs { id }.into());
        }
        let recomputed = attempt_key(
            &stored.source,
            &stored.profile,
            &stored.profile_fingerprint,
            &stored.program_sha256,
            &stored.invocations,
        )?;
        if recomputed != stored.attempt_key || !belongs_to_attempt(&stored.id, &recomputed) {
            return Err(ReplayRefusal::Tampered {
                id,
                detail: "its attempt key or id does not derive from its contents".into(),
            }
            .into());
        }
        if behaves.profile != stored.profile {
            return Err(ReplayRefusal::OtherProfile {
                id,
                stored: stored.profile.clone(),
                expected: behaves.profile.clone(),
            }
            .into());
        }
        let invocations = invocations_of(behaves);
        if invocations != stored.invocations {
            let detail = if invocations.len() != stored.invocations.len() {
                format!(
                    "{} case(s) against {} stored invocation(s)",
                    invocations.len(),
                    stored.invocations.len()
                )
            } else {
                let index = invocations
                    .iter()
                    .zip(&stored.invocations)
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                format!("case {index}'s arguments or stdin differ")
            };
            return Err(ReplayRefusal::OtherInvocations { id, detail }.into());
        }
        let program_sha256 = stored.program_sha256.clone();
        self.draft(
            request.item_id,
            ScoreOrigin::Replay,
            &request.expectation,
            behaves,
            expectation_sha256,
            Some(&stored),
            &program_sha256,
            None,
        )
    }

    /// The stored evidence of an attempt: its derived id, else the newest
    /// proven observation of the program under this profile whose
    /// fingerprint the profile resolves to (a runtime left to the engine is
    /// filled in by the backend) and whose invocations are the attempt's.
    fn attempt_evidence(
        &self,
        profile: &RuntimeProfile,
        attempt: &Attempt,
    ) -> Result<Option<Observation>, ScoringError> {
        if let Some(observation) = self.store.observation(&attempt.observation_id())? {
            check_belongs(&observation, attempt)?;
            return Ok(Some(observation));
        }
        let candidates = self.store.list_observations(&ObservationFilter {
            profile: Some(profile.name.clone()),
            program_sha256: Some(attempt.program_sha256.clone()),
            ..ObservationFilter::default()
        })?;
        for summary in candidates.iter().filter(|summary| !summary.unproven) {
            let Some(observation) = self.store.observation(&summary.id)? else {
                continue;
            };
            let fits = observation.source == SOURCE_IDENTITY
                && observation.invocations == attempt.invocations
                && profile.resolves_to(&observation.profile_fingerprint);
            if !fits {
                continue;
            }
            let key = attempt_key(
                &observation.source,
                &observation.profile,
                &observation.profile_fingerprint,
                &observation.program_sha256,
                &observation.invocations,
            )?;
            if key != observation.attempt_key || !belongs_to_attempt(&observation.id, &key) {
                return Err(ScoringError::Store(StoreError::Tampered {
                    what: "observation",
                    id: observation.id.clone(),
                    detail: "its attempt key or id does not derive from its contents".into(),
                }));
            }
            return Ok(Some(observation));
        }
        Ok(None)
    }

    #[allow(clippy::too_many_arguments)]
    fn draft(
        &self,
        item_id: Option<String>,
        origin: ScoreOrigin,
        expectation: &ScoringExpectation,
        behaves: &ProgramBehaves,
        expectation_sha256: String,
        observation: Option<&Observation>,
        program_sha256: &str,
        verdict: Option<Verdict>,
    ) -> Result<Draft, ScoringError> {
        let verdict: Verdict = match (verdict, observation) {
            (Some(verdict), _) => verdict,
            (None, Some(observation)) => evaluate(
                &behaves.profile,
                &behaves.cases,
                &observation.run.events,
                self.comparators.as_ref(),
            ),
            (None, None) => no_evidence(&behaves.profile, behaves.cases.len()),
        };
        let record = ScoreRecord {
            item_id,
            origin,
            program_sha256: program_sha256.to_string(),
            profile: behaves.profile.clone(),
            expectation: serde_json::to_value(expectation)?,
            expectation_sha256,
            status: verdict.status,
            value: verdict.value,
            rationale: verdict.rationale,
            reason: verdict.reason,
            cases: serde_json::to_value(&verdict.cases)?,
            observation_ids: observation.map(|o| vec![o.id.clone()]).unwrap_or_default(),
        };
        Ok(Draft {
            record,
            cases: verdict.cases,
            reason_kind: verdict.reason_kind,
            expectation: expectation.clone(),
        })
    }
}

/// Maps `items` in order on up to one thread per core. Comparisons (a
/// WebAssembly call each) dominate a replay, and they run in parallel; the
/// store's reads are short and serialised by its connection lock.
fn parallel_map<T, R, F>(items: Vec<T>, map: F) -> Vec<R>
where
    T: Send,
    R: Send,
    F: Fn(T) -> R + Sync,
{
    let threads = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(1)
        .min(8);
    if threads < 2 || items.len() < 2 {
        return items.into_iter().map(map).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let mut chunks: Vec<Vec<T>> = Vec::with_capacity(threads);
    let mut items = items.into_iter();
    loop {
        let next: Vec<T> = items.by_ref().take(chunk).collect();
        if next.is_empty() {
            break;
        }
        chunks.push(next);
    }
    let map = &map;
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| scope.spawn(move || chunk.into_iter().map(map).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| match handle.join() {
                Ok(results) => results,
                // A panic in a comparator adapter is a bug; carry it to the caller.
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    })
}

fn finish_rescore(draft: Draft, previous: Option<StoredScore>, score_id: i64) -> Rescore {
    let score = draft.into_score(score_id, EvidenceUse::Stored);
    let changed = previous.as_ref().is_some_and(|previous| {
        (previous.record.status, previous.record.value) != (score.status, score.value)
    });
    Rescore {
        score,
        previous,
        changed,
    }
}

fn missing_id() -> ScoringError {
    ScoringError::Store(StoreError::InvalidRecord(
        "the store returned fewer score ids than scores".into(),
    ))
}

fn invocations_of(behaves: &ProgramBehaves) -> Vec<Invocation> {
    behaves
        .cases
        .iter()
        .map(|case| case.invocation.clone())
        .collect()
}
