//! The scorer: validation, preflight, evidence, verdict, record.

use std::borrow::Cow;
use std::sync::Arc;

use progscore_evidence::{ScoreOrigin, StoreError};
use progscore_sandbox::{InvocationEvent, Preflight, RuntimeProfile, SandboxError, sha256_hex};
use tokio_util::sync::CancellationToken;

use crate::attempt::{Attempt, keyed_with_interactor};
use crate::checker::{Checker, CheckerVerdict, CheckerVerdicts};
use crate::checker_runs;
use crate::comparator::OutputComparator;
use crate::error::{ExpectationError, ScoringError};
use crate::expectation::{Condition, ProgramBehaves, ScoringExpectation};
use crate::replayer::{Replayer, invocations_of};
use crate::request::{ObservationRef, ProgramInput, ReplayRequest, Score, ScoreRequest, Scored};
use crate::source::{EvidenceUse, ProgramExecutionSource, check_belongs};
use crate::store_call::store_call;
use crate::verdict::evaluate_judged;

/// Scores programs by running them (or reusing their attempt's evidence),
/// and runs their checker program on what they wrote (or reuses its run).
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

    /// The same scorer, also taking these language names for profiles
    /// (see [`Replayer::with_languages`]).
    pub fn with_languages(mut self, languages: std::collections::BTreeMap<String, String>) -> Self {
        self.replayer = self.replayer.with_languages(languages);
        self
    }

    /// Checks that `profile` can run (see [`progscore_sandbox::SandboxClient::preflight`]);
    /// a passed check is kept, a failed one is asked again next time.
    /// [`Self::score`] calls it first; call it for every profile of a batch
    /// to refuse a batch before anything runs.
    /// A language name is checked as the profile it stands for.
    pub async fn preflight(&self, profile: &str) -> Result<Preflight, SandboxError> {
        let profile = self.replayer.profile_name(profile);
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
        let expectation = self.replayer.canonical(expectation.clone());
        self.replayer.validate(&expectation).map(|_| ())
    }

    /// The attempt `request` runs or reuses: its profile as the backend
    /// resolves it (its variant, when the program brings its own limits),
    /// its files, its program and invocations. Nothing runs; the profile's
    /// preflight runs once.
    pub async fn attempt_of(&self, request: &ScoreRequest) -> Result<Attempt, ScoringError> {
        let expectation = self.replayer.canonical(request.expectation.clone());
        let (behaves, profile) = self.replayer.validate(&expectation)?;
        let program_sha256 = match &request.program {
            ProgramInput::Inline(bytes) => sha256_hex(bytes),
            ProgramInput::Stored { sha256 } => sha256.clone(),
        };
        self.attempt(behaves, profile, &program_sha256).await
    }

    async fn attempt(
        &self,
        behaves: &ProgramBehaves,
        profile: Cow<'_, RuntimeProfile>,
        program_sha256: &str,
    ) -> Result<Attempt, ScoringError> {
        // The attempt is keyed by what will really run: the fingerprint with
        // what the backend resolved (the engine's default runtime...).
        // A variant (the program's own limits) is keyed by its own
        // fingerprint with what the backend resolved for its profile.
        let resolved = self
            .preflight(&profile.name)
            .await
            .map_err(ScoringError::Refused)?
            .fingerprint;
        // Files beside the program key the attempt too; they go to the
        // backend with the profile it runs as.
        let (fingerprint, variant) = match profile {
            Cow::Borrowed(_) if behaves.files.is_empty() => (resolved, None),
            Cow::Borrowed(profile) => (resolved, Some(profile.clone())),
            Cow::Owned(variant) => (variant.fingerprint_resolved_as(&resolved), Some(variant)),
        };
        // An interactor talks to the program: it keys the attempt too.
        let interactor = self.replayer.interactor_attempt(behaves)?;
        Ok(Attempt::from_parts(
            &behaves.profile,
            keyed_with_interactor(behaves.files.keyed(fingerprint), interactor.as_ref()),
            program_sha256,
            invocations_of(behaves),
        )?
        .with_variant(variant)
        .with_files(behaves.files.clone())
        .with_interactor(interactor))
    }

    /// Runs the item's checker program on the program's outputs (`events`),
    /// or reuses its stored runs: what it said of each case it judged, and
    /// the observation ids of its runs. A checker that cannot run leaves its
    /// cases undetermined; the program's evidence is kept either way.
    async fn run_checker(
        &self,
        behaves: &ProgramBehaves,
        events: &[InvocationEvent],
        cancel: &CancellationToken,
    ) -> Result<(CheckerVerdicts, Vec<String>), ScoringError> {
        let (checker, plan) = match self.replayer.checker_plan(behaves, events)? {
            Ok(planned) => planned,
            Err(decided) => return Ok((decided, Vec::new())),
        };
        let mut verdicts = plan.decided;
        let mut ids = Vec::new();
        if plan.runs.is_empty() {
            return Ok((verdicts, ids));
        }
        let unrun =
            |verdicts: &mut CheckerVerdicts, run: &checker_runs::CheckerRun, reason: &str| {
                verdicts.extend(
                    run.cases
                        .iter()
                        .map(|&index| (index, CheckerVerdict::Undetermined(reason.to_string()))),
                );
            };
        // Every run is of the checker's one profile.
        let profile = plan.runs[0].attempt.profile.clone();
        if let Err(refusal) = self.preflight(&profile).await {
            let reason = format!("the checker's profile `{profile}` cannot run: {refusal}");
            for run in &plan.runs {
                unrun(&mut verdicts, run, &reason);
            }
            return Ok((verdicts, ids));
        }
        let source: Arc<[u8]> = Arc::from(checker.source.as_bytes());
        let store = self.source.store();
        store_call(|| store.put_program(&source))?;
        for run in &plan.runs {
            let evidence = match self
                .source
                .observe(&run.attempt, &source, false, cancel, None)
                .await
            {
                Ok(evidence) => evidence,
                Err(ScoringError::Refused(refusal)) => {
                    let reason = format!("the checker's sandbox refused the run: {refusal}");
                    unrun(&mut verdicts, run, &reason);
                    continue;
                }
                Err(error) => return Err(error),
            };
            let mut observation = Arc::clone(&evidence.observation);
            if evidence.origin != EvidenceUse::Stored {
                match store_call(|| store.record_observation(&observation)) {
                    Ok(_) => {}
                    Err(StoreError::ObservationConflict { stored, .. }) => {
                        // Another process stored its run of this checker
                        // attempt first: its evidence stands.
                        check_belongs(&stored, &run.attempt)?;
                        observation = Arc::from(stored);
                    }
                    Err(error) => return Err(error.into()),
                }
            }
            ids.push(observation.id.clone());
            verdicts.extend(checker_runs::judged(checker, run, &observation.run.events));
        }
        Ok((verdicts, ids))
    }

    /// Scores a stored observation against `request.expectation` as
    /// [`Replayer::replay`] does, after running the expectation's checker
    /// program on the observation's outputs (or finding its run stored).
    /// Nothing of the program runs.
    pub async fn replay_checked(
        &self,
        request: ReplayRequest,
        cancel: &CancellationToken,
    ) -> Result<Score, ScoringError> {
        let expectation = self.replayer.canonical(request.expectation.clone());
        if let [Condition::ProgramBehaves(behaves)] = expectation.conditions.as_slice()
            && matches!(behaves.checker, Some(Checker::Program(_)))
        {
            let id = match &request.observation {
                ObservationRef::Id(id) => id.clone(),
                ObservationRef::Given(observation) => observation.id.clone(),
            };
            let store = self.source.store();
            if let Some(observation) = store_call(|| store.observation(&id))? {
                self.replayer.validate(&expectation)?;
                self.run_checker(behaves, &observation.run.events, cancel)
                    .await?;
            }
        }
        self.replayer.replay(request)
    }

    /// Scores one program (within a tokio runtime): validates, finds or makes the evidence, applies
    /// the verdict rules, and records the score (with the observation, if new,
    /// in the same transaction).
    pub async fn score(&self, request: ScoreRequest) -> Result<Score, ScoringError> {
        self.score_observed(request)
            .await
            .map(|scored| scored.score)
    }

    /// [`Self::score`], handing back the observation the score rests on as
    /// it was stored (a caller that shows the run needs no read-back).
    pub async fn score_observed(&self, request: ScoreRequest) -> Result<Scored, ScoringError> {
        let mut request = request;
        request.expectation = self.replayer.canonical(request.expectation);
        let (behaves, profile) = self.replayer.validate(&request.expectation)?;
        let expectation_sha256 = request.expectation.fingerprint()?;
        let store = self.source.store();
        let (program, inline): (Arc<[u8]>, bool) = match &request.program {
            ProgramInput::Inline(bytes) => (Arc::from(bytes.as_slice()), true),
            ProgramInput::Stored { sha256 } => match store_call(|| store.program(sha256))? {
                Some(bytes) => (Arc::from(bytes), false),
                None => {
                    return Err(ScoringError::ProgramNotStored {
                        sha256: sha256.clone(),
                    });
                }
            },
        };
        let program_sha256 = sha256_hex(&program);
        let attempt = self.attempt(behaves, profile, &program_sha256).await?;
        let evidence = self
            .source
            .observe(
                &attempt,
                &program,
                request.fresh,
                &request.cancel,
                request.on_case.as_ref(),
            )
            .await?;
        let observation = &evidence.observation;
        let (checks, decided, checker_ids) = match &behaves.interactor {
            // The interactor already judged, in the same run.
            Some(_) => self.replayer.stored_judgement(behaves, &observation.run)?,
            None => {
                let (checks, ids) = self
                    .run_checker(behaves, &observation.run.events, &request.cancel)
                    .await?;
                (checks, Default::default(), ids)
            }
        };
        // Comparators are synchronous CPU work (WebAssembly calls bounded by
        // their deadline); off the async workers, a slow one stalls no run.
        let verdict = {
            let comparators = self.replayer.comparators.clone();
            let behaves = behaves.clone();
            let observation = observation.clone();
            tokio::task::spawn_blocking(move || {
                evaluate_judged(
                    &behaves,
                    &observation.run.events,
                    comparators.as_ref(),
                    &checks,
                    &decided,
                )
            })
            .await
            .map_err(|e| ScoringError::RunLost(format!("a comparator panicked: {e}")))?
        };
        let mut draft = self.replayer.draft(
            request.item_id.clone(),
            ScoreOrigin::Execute,
            &request.expectation,
            behaves,
            expectation_sha256.clone(),
            Some(observation),
            &program_sha256,
            Some(verdict),
        )?;
        draft.record.observation_ids.extend(checker_ids);
        if evidence.origin == EvidenceUse::Stored {
            let score_id = store_call(|| store.record_score(&draft.record))?;
            return Ok(Scored {
                score: draft.into_score(score_id, EvidenceUse::Stored),
                observation: Arc::clone(observation),
            });
        }
        let program_bytes = inline.then_some(&program[..]);
        match store_call(|| {
            store.record_observation_with_score(program_bytes, observation, &draft.record)
        }) {
            Ok((score_id, _)) => Ok(Scored {
                score: draft.into_score(score_id, evidence.origin),
                observation: Arc::clone(observation),
            }),
            Err(StoreError::ObservationConflict { stored, .. })
                if !store.observation_origin(&stored.id)?.is_reusable() =>
            {
                // The attempt's id holds merged evidence this store does not
                // trust: this run is the evidence, kept under a fresh id of
                // the attempt (where the next score finds it).
                let mut own = (**observation).clone();
                own.id = attempt.fresh_observation_id();
                let mut draft = draft;
                for id in &mut draft.record.observation_ids {
                    if *id == observation.id {
                        id.clone_from(&own.id);
                    }
                }
                let (score_id, _) =
                    store.record_observation_with_score(program_bytes, &own, &draft.record)?;
                Ok(Scored {
                    score: draft.into_score(score_id, evidence.origin),
                    observation: Arc::new(own),
                })
            }
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
                let score_id = store_call(|| store.record_score(&draft.record))?;
                Ok(Scored {
                    score: draft.into_score(score_id, EvidenceUse::Stored),
                    observation: Arc::from(stored),
                })
            }
            Err(error) => Err(error.into()),
        }
        // `evidence` (and with it this caller's place in the flight) is
        // dropped only now, after the write: a caller arriving meanwhile
        // joined the flight instead of running the attempt again.
    }
}
