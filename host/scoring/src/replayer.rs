//! The replayer: scores stored evidence without any sandbox (replay,
//! rescore), one or many at a time.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use progscore_evidence::{
    EvidenceStore, Observation, ObservationFilter, ScoreOrigin, ScoreRecord, StoreError,
    StoredScore,
};
use progscore_sandbox::{
    Invocation, InvocationEvent, Limits, PartialLimitsSpec, ProgramFiles, ProgramRun,
    RuntimeProfile, sha256_hex,
};
use rayon::prelude::*;

use crate::attempt::{
    Attempt, SOURCE_IDENTITY, attempt_key, belongs_to_attempt, keyed_with_interactor,
};
use crate::checker::{Checker, CheckerProgram, CheckerVerdicts};
use crate::checker_runs::{self, CheckerPlan};
use crate::comparator::OutputComparator;
use crate::error::{ExpectationError, ReplayRefusal, ScoringError};
use crate::expectation::{Condition, ProgramBehaves, ScoringExpectation};
use crate::interactive::{self, InteractorAttempt};
use crate::request::{ObservationRef, ProgramInput, ReplayRequest, Rescore, RescoreRequest, Score};
use crate::score_policy::GroupScore;
use crate::source::{EvidenceUse, check_belongs};
use crate::verdict::{CaseDecision, CaseReport, ReasonKind, Verdict, evaluate_judged, no_evidence};

/// Cases decided before the program's own rules, by index.
pub(crate) type Decided = std::collections::BTreeMap<usize, CaseDecision>;

/// Scores stored evidence without any sandbox: replay and rescore. Needs no
/// engine, so the CLI's `replay` and `rescore` work without one.
pub struct Replayer {
    store: Arc<EvidenceStore>,
    pub(crate) comparators: Arc<dyn OutputComparator>,
    profiles: Vec<RuntimeProfile>,
    /// Other names for profiles (`cs` -> `csharp`): an expectation may name
    /// either; it is scored and stored under the profile's own name.
    languages: BTreeMap<String, String>,
}

/// A score ready to be written.
pub(crate) struct Draft {
    pub(crate) record: ScoreRecord,
    cases: Vec<CaseReport>,
    reason_kind: Option<ReasonKind>,
    groups: Vec<GroupScore>,
    expectation: ScoringExpectation,
}

impl Draft {
    pub(crate) fn into_score(self, score_id: i64, evidence: EvidenceUse) -> Score {
        let record = self.record;
        Score {
            score_id,
            item_id: record.item_id,
            status: record.status,
            value: record.value,
            rationale: record.rationale,
            reason: record.reason,
            reason_kind: self.reason_kind,
            score: record.score,
            groups: self.groups,
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
            languages: BTreeMap::new(),
        }
    }

    /// The same replayer, also taking these language names for profiles
    /// (name -> profile name; a profile's own name always works).
    pub fn with_languages(mut self, languages: BTreeMap<String, String>) -> Self {
        self.languages = languages;
        self
    }

    /// `expectation` with a language name replaced by its profile's own name,
    /// so that the same check is fingerprinted, keyed and stored the same way
    /// whichever name the caller used. Anything else is left for validation.
    pub fn canonical(&self, mut expectation: ScoringExpectation) -> ScoringExpectation {
        if let [Condition::ProgramBehaves(behaves)] = expectation.conditions.as_mut_slice()
            && !self.profiles.iter().any(|p| p.name == behaves.profile)
            && let Some(profile) = self.languages.get(&behaves.profile)
        {
            behaves.profile = profile.clone();
        }
        expectation
    }

    /// The profile `name` stands for: a profile's own name, or the profile
    /// a language name maps to; anything else as given (for the sandbox to
    /// refuse).
    pub fn profile_name<'a>(&'a self, name: &'a str) -> &'a str {
        if self.profiles.iter().any(|p| p.name == name) {
            return name;
        }
        self.languages.get(name).map_or(name, String::as_str)
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
        // Comparisons (a WebAssembly call each) dominate a replay, and run in
        // parallel; the store's reads are short and serialised by its lock.
        let drafts: Vec<_> = requests
            .into_par_iter()
            .map(|request| self.prepare_replay(request))
            .collect();
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
        let prepared: Vec<_> = requests
            .into_par_iter()
            .map(|request| self.prepare_rescore(request))
            .collect();
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
        let mut request = request;
        request.expectation = self.canonical(request.expectation);
        let (behaves, profile) = self.validate(&request.expectation)?;
        let expectation_sha256 = request.expectation.fingerprint()?;
        let program_sha256 = match &request.program {
            ProgramInput::Inline(bytes) => sha256_hex(bytes),
            ProgramInput::Stored { sha256 } => sha256.clone(),
        };
        let interactor = self.interactor_attempt(behaves)?;
        let attempt = Attempt::from_parts(
            &profile.name,
            keyed_with_interactor(
                behaves.files.keyed(profile.fingerprint_json()),
                interactor.as_ref(),
            ),
            &program_sha256,
            invocations_of(behaves),
        )?
        .with_files(behaves.files.clone())
        .with_interactor(interactor);
        let previous =
            self.previous_of_same_program(request.item_id.as_deref(), &program_sha256)?;
        let observation = self.attempt_evidence(&profile, &attempt)?;
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

    /// The latest score of `item_id`, which must be of `program_sha256` (or
    /// none): a replay or rescore re-grades an item's own program, never
    /// puts another program's verdict at the top of its history.
    fn previous_of_same_program(
        &self,
        item_id: Option<&str>,
        program_sha256: &str,
    ) -> Result<Option<StoredScore>, ScoringError> {
        let Some(item_id) = item_id else {
            return Ok(None);
        };
        if item_id.trim().is_empty() {
            return Err(ScoringError::EmptyItemId);
        }
        let previous = self.store.latest_score_for_item(item_id)?;
        match &previous {
            Some(scored) if scored.record.program_sha256 != program_sha256 => {
                Err(ScoringError::ItemOfAnotherProgram {
                    item_id: item_id.to_string(),
                    scored: scored.record.program_sha256.clone(),
                    given: program_sha256.to_string(),
                })
            }
            _ => Ok(previous),
        }
    }

    /// Checks an expectation: exactly one `program_behaves` with cases, a
    /// configured profile, every comparator known with valid params.
    pub(crate) fn validate<'e>(
        &self,
        expectation: &'e ScoringExpectation,
    ) -> Result<(&'e ProgramBehaves, Cow<'_, RuntimeProfile>), ExpectationError> {
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
                    .chain(self.languages.keys().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        // The program's own limits make a variant of the profile (checked
        // as the profile's own are).
        let profile = match (&behaves.limits, &behaves.compile_limits) {
            (None, None) => Cow::Borrowed(profile),
            (limits, compile_limits) => Cow::Owned(
                profile
                    .with_limits(limits.as_ref(), compile_limits.as_ref())
                    .map_err(ExpectationError::limits)?,
            ),
        };
        behaves.files.check_for(&profile)?;
        if let Some(Checker::Program(checker)) = &behaves.checker {
            self.checker_profile(checker)?;
        }
        self.interactor_attempt(behaves)?;
        if profile.trace.is_none() {
            let case_asking = behaves
                .cases
                .iter()
                .position(|case| case.expected.behaviour.is_some());
            if behaves.behaviour.is_some() || case_asking.is_some() {
                return Err(ExpectationError::Untraced {
                    profile: profile.name.clone(),
                    case: behaves.behaviour.is_none().then_some(case_asking).flatten(),
                });
            }
        }
        // An invocation the program cannot be given is the line's fault,
        // found before anything runs.
        profile
            .check_invocations(&invocations_of(behaves))
            .map_err(|refused| ExpectationError::Invocation {
                case: refused.index,
                field: refused.error.field,
                message: refused.error.message,
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
        if let Some(policy) = &behaves.score {
            policy
                .validate(behaves.cases.len())
                .map_err(ExpectationError::ScorePolicy)?;
        }
        self.validate_checker(behaves)?;
        for (case, program_case) in behaves.cases.iter().enumerate() {
            let value = program_case.expected.exit_code;
            if !crate::expectation::EXIT_CODES.contains(&value) {
                return Err(ExpectationError::ExitCode { case, value });
            }
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

    /// The checker and the cases' answers: every case has an answer when
    /// there is a checker, none when there is not; a component must accept
    /// its parameters.
    fn validate_checker(&self, behaves: &ProgramBehaves) -> Result<(), ExpectationError> {
        let refused = |field: String, message: String| ExpectationError::Checker { field, message };
        if let Some(interactor) = &behaves.interactor {
            // Its cases' answers are the interactor's, each optional.
            return interactive::validate(behaves, interactor);
        }
        let Some(checker) = &behaves.checker else {
            if let Some(case) = behaves
                .cases
                .iter()
                .position(|c| c.expected.answer.is_some())
            {
                return Err(refused(
                    format!("cases[{case}].expected.answer"),
                    "an answer is given, but the item has no `checker` to judge the output with it"
                        .into(),
                ));
            }
            return Ok(());
        };
        if let Some(case) = behaves
            .cases
            .iter()
            .position(|c| c.expected.answer.is_none())
        {
            return Err(refused(
                format!("cases[{case}].expected.answer"),
                "missing: the item's checker judges every case's output against its answer".into(),
            ));
        }
        match checker {
            Checker::Component { name, params } => self
                .comparators
                .validate_checker(name, params)
                .map_err(|refusal| refused("checker".into(), refusal.to_string())),
            Checker::Program(program) => match program.max_points {
                Some(points) if !(points.is_finite() && points > 0.0) => Err(refused(
                    "checker.program.max_points".into(),
                    format!("{points} is not a positive number of points"),
                )),
                _ => Ok(()),
            },
        }
    }

    /// The configured profile a checker program runs under (a language
    /// name is taken for its profile), with its own limits, and its files
    /// checked against it.
    pub(crate) fn checker_profile(
        &self,
        checker: &CheckerProgram,
    ) -> Result<RuntimeProfile, ExpectationError> {
        self.judge_profile(checker, "checker.program")
    }

    /// [`Self::checker_profile`] for a judge program written at `at`
    /// (`checker.program`, `interactor`).
    fn judge_profile(
        &self,
        checker: &CheckerProgram,
        at: &str,
    ) -> Result<RuntimeProfile, ExpectationError> {
        let refused = |field: &str, message: String| ExpectationError::Checker {
            field: format!("{at}.{field}"),
            message,
        };
        let name = self.profile_name(&checker.profile);
        let profile = self
            .profiles
            .iter()
            .find(|profile| profile.name == name)
            .ok_or_else(|| {
                refused(
                    "profile",
                    format!(
                        "unknown profile `{}`; configured profiles and languages: {}",
                        checker.profile,
                        self.profiles
                            .iter()
                            .map(|profile| profile.name.as_str())
                            .chain(self.languages.keys().map(String::as_str))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })?;
        let profile = match &checker.limits {
            Some(limits) => profile
                .with_limits(Some(limits), None)
                .map_err(|e| refused("limits", e.to_string()))?,
            None => profile.clone(),
        };
        checker
            .files
            .check_for(&profile)
            .map_err(|e| refused("files", e.to_string()))?;
        Ok(profile)
    }

    /// An interactive item's interactor side of the attempt (`None` for an
    /// item without an interactor).
    pub(crate) fn interactor_attempt(
        &self,
        behaves: &ProgramBehaves,
    ) -> Result<Option<InteractorAttempt>, ExpectationError> {
        let Some(interactor) = &behaves.interactor else {
            return Ok(None);
        };
        let profile = self.judge_profile(interactor, "interactor")?;
        interactive::attempt(behaves, interactor, profile).map(Some)
    }

    /// What the stored evidence of `run` decides, for an item with a
    /// checker program or an interactor: the judges' verdicts, the cases
    /// left undetermined before the program's rules, and the ids of the
    /// checker's runs.
    pub(crate) fn stored_judgement(
        &self,
        behaves: &ProgramBehaves,
        run: &ProgramRun,
    ) -> Result<(CheckerVerdicts, Decided, Vec<String>), ScoringError> {
        if let Some(interactor) = &behaves.interactor {
            let judged = interactive::judged(behaves, interactor, run);
            return Ok((judged.checks, judged.decided, Vec::new()));
        }
        let (checks, ids) = self.stored_checks(behaves, &run.events)?;
        Ok((checks, Decided::new(), ids))
    }

    /// The item's checker program and its runs for the program's
    /// `events`; or, when no checker program is to run (none is asked, or
    /// its runs cannot be planned), what is decided without one.
    pub(crate) fn checker_plan<'b>(
        &self,
        behaves: &'b ProgramBehaves,
        events: &[InvocationEvent],
    ) -> Result<Result<(&'b CheckerProgram, CheckerPlan), CheckerVerdicts>, ScoringError> {
        let Some(Checker::Program(checker)) = &behaves.checker else {
            return Ok(Err(CheckerVerdicts::new()));
        };
        let profile = self.checker_profile(checker)?;
        Ok(
            match checker_runs::plan(behaves, checker, &profile, events) {
                Ok(plan) => Ok((checker, plan)),
                Err(reason) => Err(checker_runs::all_undetermined(behaves, events, &reason)),
            },
        )
    }

    /// What a checker program said of the cases of `events`, from its runs
    /// stored (nothing runs): the verdicts and the runs' observation ids. A
    /// run not stored leaves its cases unjudged (undetermined, no evidence).
    pub(crate) fn stored_checks(
        &self,
        behaves: &ProgramBehaves,
        events: &[InvocationEvent],
    ) -> Result<(CheckerVerdicts, Vec<String>), ScoringError> {
        let (checker, plan) = match self.checker_plan(behaves, events)? {
            Ok(planned) => planned,
            Err(decided) => return Ok((decided, Vec::new())),
        };
        let mut verdicts = plan.decided;
        let mut ids = Vec::new();
        for run in &plan.runs {
            let Some(observation) = self.store.observation(&run.attempt.observation_id())? else {
                continue;
            };
            check_belongs(&observation, &run.attempt)?;
            ids.push(observation.id.clone());
            verdicts.extend(checker_runs::judged(checker, run, &observation.run.events));
        }
        Ok((verdicts, ids))
    }

    fn prepare_replay(&self, request: ReplayRequest) -> Result<Draft, ScoringError> {
        let mut request = request;
        request.expectation = self.canonical(request.expectation);
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
        check_limits(behaves, &stored)?;
        if !behaves.files.are_keyed_in(&stored.profile_fingerprint) {
            return Err(ReplayRefusal::OtherFiles { id }.into());
        }
        let interactor = self.interactor_attempt(behaves)?;
        if stored.profile_fingerprint.get("interactor") != interactor.as_ref().map(|i| &i.key) {
            return Err(ReplayRefusal::OtherInteractor { id }.into());
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
        self.previous_of_same_program(request.item_id.as_deref(), &program_sha256)?;
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
                && attempt.files.are_keyed_in(&observation.profile_fingerprint)
                && attempt.interactor_is_keyed_in(&observation.profile_fingerprint)
                && profile.resolves_to(&ProgramFiles::unkeyed(&observation.profile_fingerprint));
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
    pub(crate) fn draft(
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
        let mut observation_ids: Vec<String> =
            observation.map(|o| vec![o.id.clone()]).unwrap_or_default();
        let verdict: Verdict = match (verdict, observation) {
            (Some(verdict), _) => verdict,
            (None, Some(observation)) => {
                let (checks, decided, checker_ids) =
                    self.stored_judgement(behaves, &observation.run)?;
                observation_ids.extend(checker_ids);
                evaluate_judged(
                    behaves,
                    &observation.run.events,
                    self.comparators.as_ref(),
                    &checks,
                    &decided,
                )
            }
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
            observation_ids,
            score: verdict.score,
            score_groups: if verdict.groups.is_empty() {
                None
            } else {
                Some(serde_json::to_value(&verdict.groups)?)
            },
        };
        Ok(Draft {
            record,
            cases: verdict.cases,
            reason_kind: verdict.reason_kind,
            groups: verdict.groups,
            expectation: expectation.clone(),
        })
    }
}

fn finish_rescore(draft: Draft, previous: Option<StoredScore>, score_id: i64) -> Rescore {
    let score = draft.into_score(score_id, EvidenceUse::Stored);
    let changed = previous.as_ref().is_some_and(|previous| {
        (previous.record.status, previous.record.value) != (score.status, score.value)
            || (previous.record.score.is_some() && previous.record.score != score.score)
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

pub(crate) fn invocations_of(behaves: &ProgramBehaves) -> Vec<Invocation> {
    behaves
        .cases
        .iter()
        .map(|case| case.invocation.clone())
        .collect()
}

/// Refuses a replay whose expectation writes a limit (its own `limits` or
/// `compile_limits`) other than the one the observation ran under: a
/// verdict under other limits could differ. Limits the expectation leaves
/// to the profile are not compared (the configured profile may have changed
/// since; the observation says what ran).
fn check_limits(behaves: &ProgramBehaves, stored: &Observation) -> Result<(), ScoringError> {
    let sections: [(
        &'static str,
        &Option<PartialLimitsSpec>,
        Option<&serde_json::Value>,
    ); 2] = [
        (
            "limits",
            &behaves.limits,
            stored.profile_fingerprint.get("limits"),
        ),
        (
            "compile_limits",
            &behaves.compile_limits,
            stored
                .profile_fingerprint
                .get("compile")
                .and_then(|compile| compile.get("limits")),
        ),
    ];
    for (section, asked, ran) in sections {
        let Some(asked) = asked else { continue };
        let differs = |detail: String| ReplayRefusal::OtherLimits {
            id: stored.id.clone(),
            detail,
        };
        let Some(ran) = ran.and_then(|ran| serde_json::from_value::<Limits>(ran.clone()).ok())
        else {
            return Err(differs(format!("it ran with no {section}")).into());
        };
        let mut changed = ran
            .changed(&stored.profile, section, asked)
            .map_err(ExpectationError::limits)?;
        // The profile scaled the program's own time limits as it ran.
        if section == "limits"
            && let Some(factor) = stored.profile_fingerprint.get("time_factor").and_then(|f| {
                serde_json::from_value::<progscore_sandbox::TimeFactor>(f.clone()).ok()
            })
        {
            if asked.timeout.is_some() {
                changed.timeout_ms = factor.apply(changed.timeout_ms);
            }
            if asked.cpu_time.is_some() {
                changed.cpu_time_ms = changed.cpu_time_ms.map(|ms| factor.apply(ms));
            }
        }
        if changed != ran {
            return Err(differs(format!(
                "{section} asked {}, ran under {}",
                serde_json::to_string(asked)?,
                serde_json::to_string(&ran.to_spec())?
            ))
            .into());
        }
    }
    Ok(())
}
