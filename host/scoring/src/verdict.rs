//! Verdict rules: from one run's events and the expected results to a value
//! (or none) and a stable rationale.
//!
//! A case fails on a proven difference (comparator mismatch, unexpected exit
//! code, timeout, memory kill); it is undetermined when the evidence cannot
//! decide (sandbox error, not run, a comparator that cannot answer); the
//! score is `false` as soon as one case fails, `true` only when all match,
//! and undetermined otherwise.

use std::collections::BTreeMap;

use progscore_evidence::ScoreStatus;
use progscore_sandbox::{InvocationEvent, Outcome, TimeLimit};
use serde::{Deserialize, Serialize};

use crate::behaviour::{self, BehaviourCondition, BehaviourFinding, BehaviourSummary};
use crate::checker::{Checker, CheckerVerdict, CheckerVerdicts};
use crate::comparator::{ComparatorVerdict, OutputComparator};
use crate::expectation::{ProgramBehaves, ProgramCase, TextCondition};
use crate::score_policy::{GroupScore, ScorePolicy};

/// The verdict on a set of cases.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Complete or undetermined.
    pub status: ScoreStatus,
    /// `Some` exactly when complete.
    pub value: Option<bool>,
    /// The stable sentence.
    pub rationale: String,
    /// For an undetermined verdict, why.
    pub reason: Option<String>,
    /// For an undetermined verdict, the kind of reason (for grouping).
    pub reason_kind: Option<ReasonKind>,
    /// The item's score in [0, 1] under its policy, when decided (`all_pass`:
    /// 1 or 0 with the value).
    pub score: Option<f64>,
    /// Per group, under the `groups` policy.
    pub groups: Vec<GroupScore>,
    /// One report per case.
    pub cases: Vec<CaseReport>,
}

/// Why a verdict is undetermined, as a stable word (reasons themselves name
/// containers, limits and figures; the kind groups them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonKind {
    /// The sandbox failed while a case ran.
    SandboxError,
    /// A case was not run (an earlier one hit a sandbox error, or the call was cancelled).
    NotRun,
    /// A case timed out while the machine was too busy to prove it.
    UnconfirmedTimeout,
    /// A comparator could not decide (output truncated before the point that decides, a comparator fault).
    ComparatorUndecided,
    /// Nothing was stored for the attempt (rescore).
    NoEvidence,
    /// A behaviour condition could not be decided (not traced, an
    /// incomplete trace, events not kept).
    BehaviourUnknown,
    /// The checker could not decide (it crashed, ran out of time or memory,
    /// said FAIL, answered outside its protocol, or its sandbox failed).
    CheckerUndecided,
}

impl ReasonKind {
    /// How the kind reads in a summary.
    pub fn describe(self) -> &'static str {
        match self {
            ReasonKind::SandboxError => "sandbox error",
            ReasonKind::NotRun => "case not run",
            ReasonKind::UnconfirmedTimeout => "timeout not proven (machine too busy)",
            ReasonKind::ComparatorUndecided => "comparator could not decide",
            ReasonKind::NoEvidence => "no stored evidence",
            ReasonKind::BehaviourUnknown => "behaviour not traced or trace incomplete",
            ReasonKind::CheckerUndecided => "checker could not decide",
        }
    }
}

/// What happened in one case, as reported in results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseReport {
    /// `exited`, `timed_out`, `memory_limit`, `compile_error`, `sandbox_error`, `not_run`.
    pub outcome: String,
    /// The exit code, when the program exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// `true` matched, `false` failed, `null` undetermined.
    pub matched: Option<bool>,
    /// The case's score in [0, 1] when a checker gave partial points
    /// (otherwise 1 when matched, 0 when failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// What the checker said of the output, when one judged it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checker: Option<String>,
    /// Wall time of the program, from its start.
    pub duration_ms: u64,
    /// CPU time of the program, where the backend measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<u64>,
    /// Peak memory of the program, where the backend measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    /// Why it failed or is undetermined (comparator reasons included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What the program tried, counted per kind, for a profile that traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behaviour: Option<BehaviourSummary>,
}

/// One case's result before it is folded into the verdict.
enum CaseResult {
    /// With the checker's message, when one judged the output.
    Matched(Option<String>),
    /// Partly right, by the checker: the score, the clause, its message.
    Partial(f64, String, String),
    /// The clause for the rationale, and the comparator's detail if any.
    Failed(String, Option<String>),
    Undetermined(ReasonKind, String),
}

/// Applies the verdict rules to `events` (one per case, in order).
///
/// The caller guarantees `events.len() == cases.len()` (replay and the
/// source check it); a missing event is treated as not run, never as a pass.
pub fn evaluate(
    behaves: &ProgramBehaves,
    events: &[InvocationEvent],
    comparators: &dyn OutputComparator,
) -> Verdict {
    evaluate_checked(behaves, events, comparators, &CheckerVerdicts::new())
}

/// [`evaluate`], with what a checker program said of each case it judged
/// (by case index; a case it should have judged and did not is
/// undetermined).
pub fn evaluate_checked(
    behaves: &ProgramBehaves,
    events: &[InvocationEvent],
    comparators: &dyn OutputComparator,
    checks: &CheckerVerdicts,
) -> Verdict {
    evaluate_judged(behaves, events, comparators, checks, &BTreeMap::new())
}

/// A case decided by the evidence before the program's own rules apply.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseDecision {
    /// Nothing can be decided (the kind of reason, and the reason).
    Undetermined(ReasonKind, String),
    /// False, whatever the program did after (the clause, and the judge's
    /// message).
    Failed(String, Option<String>),
}

/// [`evaluate_checked`], with cases the evidence decides before the
/// program's own rules are applied (an interactive case whose interactor
/// gave its verdict, or could not decide, before the program ended:
/// whatever the program did after does not count).
pub fn evaluate_judged(
    behaves: &ProgramBehaves,
    events: &[InvocationEvent],
    comparators: &dyn OutputComparator,
    checks: &CheckerVerdicts,
    decided: &BTreeMap<usize, CaseDecision>,
) -> Verdict {
    let profile = behaves.profile.as_str();
    let cases = behaves.cases.as_slice();
    let mut reports = Vec::with_capacity(cases.len());
    let mut first_failure = None;
    let mut first_undetermined = None;
    // Each case's score: 1 passed, 0 failed, none undetermined.
    let mut case_scores: Vec<Option<f64>> = Vec::with_capacity(cases.len());
    for (index, case) in cases.iter().enumerate() {
        let Some(event) = events.get(index) else {
            let clause = format!("case {index} was not run: no event was recorded for it");
            reports.push(CaseReport {
                outcome: "not_run".into(),
                exit_code: None,
                matched: None,
                score: None,
                checker: None,
                duration_ms: 0,
                cpu_ms: None,
                peak_memory_bytes: None,
                detail: Some(clause.clone()),
                behaviour: None,
            });
            first_undetermined.get_or_insert((ReasonKind::NotRun, clause));
            case_scores.push(None);
            continue;
        };
        let mut checker = None;
        let mut partial = None;
        let result = match decided.get(&index) {
            Some(CaseDecision::Undetermined(kind, clause)) => {
                CaseResult::Undetermined(*kind, clause.clone())
            }
            Some(CaseDecision::Failed(clause, detail)) => {
                CaseResult::Failed(clause.clone(), detail.clone())
            }
            None => evaluate_case(index, case, behaves, event, comparators, checks),
        };
        let (matched, detail) = match result {
            CaseResult::Matched(message) => {
                checker = message;
                (Some(true), None)
            }
            CaseResult::Failed(clause, detail) => {
                let shown = match &detail {
                    Some(detail) => format!("{clause}: {detail}"),
                    None => clause.clone(),
                };
                first_failure.get_or_insert(clause);
                (Some(false), Some(shown))
            }
            CaseResult::Partial(score, clause, message) => {
                partial = Some(score);
                checker = Some(message);
                let shown = clause.clone();
                first_failure.get_or_insert(clause);
                (Some(false), Some(shown))
            }
            CaseResult::Undetermined(kind, clause) => {
                first_undetermined.get_or_insert((kind, clause.clone()));
                (None, Some(clause))
            }
        };
        case_scores.push(partial.or(matched.map(|passed| if passed { 1.0 } else { 0.0 })));
        let usage = event.usage.as_ref();
        reports.push(CaseReport {
            outcome: event.outcome.kind().to_string(),
            exit_code: match event.outcome {
                Outcome::Exited { exit_code } => Some(exit_code),
                _ => None,
            },
            matched,
            score: partial,
            checker,
            duration_ms: event.duration_ms,
            cpu_ms: usage.and_then(|u| u.cpu_ms),
            peak_memory_bytes: usage.and_then(|u| u.peak_memory_bytes),
            detail,
            behaviour: event.behaviour.as_ref().map(BehaviourSummary::of),
        });
    }
    let policy = behaves
        .score
        .as_ref()
        .filter(|policy| !policy.is_all_pass());
    if let Some(policy) = policy {
        return scored_by_policy(
            profile,
            policy,
            &case_scores,
            first_failure,
            first_undetermined,
            reports,
        );
    }
    if let Some(clause) = first_failure {
        return Verdict {
            status: ScoreStatus::Complete,
            value: Some(false),
            score: Some(0.0),
            groups: Vec::new(),
            rationale: format!(
                "The program did not produce the expected result under {profile}: {clause}."
            ),
            reason: None,
            reason_kind: None,
            cases: reports,
        };
    }
    if let Some((kind, clause)) = first_undetermined {
        return Verdict {
            status: ScoreStatus::Undetermined,
            value: None,
            rationale: format!("The result under {profile} is undetermined: {clause}."),
            reason: Some(clause),
            reason_kind: Some(kind),
            score: None,
            groups: Vec::new(),
            cases: reports,
        };
    }
    Verdict {
        status: ScoreStatus::Complete,
        value: Some(true),
        score: Some(1.0),
        groups: Vec::new(),
        rationale: format!(
            "All {} case(s) produced the expected result under {profile}.",
            cases.len()
        ),
        reason: None,
        reason_kind: None,
        cases: reports,
    }
}

/// A verdict when there is no evidence at all (rescore of an unseen attempt).
pub fn no_evidence(profile: &str, cases: usize) -> Verdict {
    let clause = "no stored evidence".to_string();
    Verdict {
        status: ScoreStatus::Undetermined,
        value: None,
        rationale: format!("The result under {profile} is undetermined: {clause}."),
        reason: Some(clause.clone()),
        reason_kind: Some(ReasonKind::NoEvidence),
        score: None,
        groups: Vec::new(),
        cases: (0..cases)
            .map(|_| CaseReport {
                outcome: "not_run".into(),
                exit_code: None,
                matched: None,
                score: None,
                checker: None,
                duration_ms: 0,
                cpu_ms: None,
                peak_memory_bytes: None,
                detail: Some(clause.clone()),
                behaviour: None,
            })
            .collect(),
    }
}

/// The verdict under a policy other than `all_pass`: complete exactly when
/// the policy decides the score (`true` at full marks), else undetermined
/// by the first case that kept it from deciding.
fn scored_by_policy(
    profile: &str,
    policy: &ScorePolicy,
    case_scores: &[Option<f64>],
    first_failure: Option<String>,
    first_undetermined: Option<(ReasonKind, String)>,
    cases: Vec<CaseReport>,
) -> Verdict {
    let scored = policy.score(case_scores);
    let name = match policy {
        ScorePolicy::AllPass => "all_pass",
        ScorePolicy::Fraction => "fraction",
        ScorePolicy::Weighted { .. } => "weighted",
        ScorePolicy::Groups { .. } => "groups",
    };
    let passed = case_scores.iter().filter(|s| **s == Some(1.0)).count();
    match scored.score {
        Some(score) => {
            let failure = first_failure
                .map(|clause| format!("; first failure: {clause}"))
                .unwrap_or_default();
            Verdict {
                status: ScoreStatus::Complete,
                value: Some(score >= 1.0),
                rationale: format!(
                    "The program scored {score:.4} under {profile} ({name}): {passed} of {} \
                     case(s) passed{failure}.",
                    case_scores.len()
                ),
                reason: None,
                reason_kind: None,
                score: Some(score),
                groups: scored.groups,
                cases,
            }
        }
        None => {
            let (kind, clause) = first_undetermined.unwrap_or((
                ReasonKind::NotRun,
                "a case the score needs was not decided".to_string(),
            ));
            Verdict {
                status: ScoreStatus::Undetermined,
                value: None,
                rationale: format!("The score under {profile} ({name}) is undetermined: {clause}."),
                reason: Some(clause),
                reason_kind: Some(kind),
                score: None,
                groups: scored.groups,
                cases,
            }
        }
    }
}

fn evaluate_case(
    index: usize,
    case: &ProgramCase,
    behaves: &ProgramBehaves,
    event: &InvocationEvent,
    comparators: &dyn OutputComparator,
    checks: &CheckerVerdicts,
) -> CaseResult {
    let program_behaviour: Option<&BehaviourCondition> = behaves.behaviour.as_ref();
    let expected_code = case.expected.exit_code;
    match &event.outcome {
        Outcome::SandboxError { message } => {
            return CaseResult::Undetermined(
                ReasonKind::SandboxError,
                format!("case {index} hit a sandbox error: {message}"),
            );
        }
        Outcome::NotRun { reason } => {
            return CaseResult::Undetermined(
                ReasonKind::NotRun,
                format!("case {index} was not run: {reason}"),
            );
        }
        Outcome::TimedOut {
            unconfirmed: Some(why),
            ..
        } => {
            return CaseResult::Undetermined(
                ReasonKind::UnconfirmedTimeout,
                format!("case {index} timed out, but the timeout is not proven: {why}"),
            );
        }
        Outcome::TimedOut {
            limit: TimeLimit::Cpu,
            ..
        } => {
            return CaseResult::Failed(format!("case {index} exceeded its CPU time limit"), None);
        }
        Outcome::TimedOut { .. } => {
            return CaseResult::Failed(format!("case {index} timed out"), None);
        }
        Outcome::MemoryLimit => {
            return CaseResult::Failed(format!("case {index} exceeded its memory limit"), None);
        }
        Outcome::CompileError { reason } => {
            return CaseResult::Failed(format!("the program did not compile ({reason})"), None);
        }
        Outcome::Exited { exit_code } if *exit_code != expected_code => {
            return CaseResult::Failed(
                format!("case {index} exited with code {exit_code}, expected {expected_code}"),
                None,
            );
        }
        Outcome::Exited { .. } => {}
    }
    let mut undetermined = None;
    for condition in [program_behaviour, case.expected.behaviour.as_ref()]
        .into_iter()
        .flatten()
    {
        match behaviour::check(index, condition, event.behaviour.as_ref()) {
            BehaviourFinding::Holds => {}
            BehaviourFinding::Violated(clause) => return CaseResult::Failed(clause, None),
            BehaviourFinding::Undecided(clause) => {
                undetermined.get_or_insert((ReasonKind::BehaviourUnknown, clause));
            }
        }
    }
    let streams = [
        (&case.expected.stdout, &event.stdout, "output"),
        (&case.expected.stderr, &event.stderr, "error output"),
    ];
    for (condition, observed, name) in streams {
        let Some(TextCondition { comparator, params }) = condition else {
            continue;
        };
        match comparators.compare_with_behaviour(
            comparator,
            params,
            observed,
            event.behaviour.as_ref(),
        ) {
            ComparatorVerdict::Match => {}
            ComparatorVerdict::Mismatch(detail) => {
                return CaseResult::Failed(
                    format!("case {index} {name} did not match"),
                    Some(detail),
                );
            }
            ComparatorVerdict::Undetermined(reason) => {
                undetermined.get_or_insert((
                    ReasonKind::ComparatorUndecided,
                    format!("case {index} {name} could not be checked: {reason}"),
                ));
            }
        }
    }
    let mut accepted = None;
    let (judge, judged) = match (&behaves.checker, &behaves.interactor) {
        (Some(checker), _) => (
            "checker",
            Some(judge_case(index, case, checker, event, comparators, checks)),
        ),
        (None, Some(_)) => (
            "interactor",
            Some(match checks.get(&index) {
                Some(verdict) => (ReasonKind::CheckerUndecided, verdict.clone()),
                None => (
                    ReasonKind::NoEvidence,
                    CheckerVerdict::Undetermined(
                        "the run holds no verdict of the interactor for it".into(),
                    ),
                ),
            }),
        ),
        (None, None) => ("checker", None),
    };
    if let Some(judged) = judged {
        match judged {
            (_, CheckerVerdict::Accepted(message)) => accepted = Some(message),
            (_, CheckerVerdict::WrongAnswer(message)) => {
                return CaseResult::Failed(
                    format!("case {index} output was judged wrong by the {judge}"),
                    Some(message).filter(|m| !m.is_empty()),
                );
            }
            (_, CheckerVerdict::PresentationError(message)) => {
                return CaseResult::Failed(
                    format!("case {index} output was judged malformed by the {judge}"),
                    Some(message).filter(|m| !m.is_empty()),
                );
            }
            (_, CheckerVerdict::Points { score, message }) if undetermined.is_none() => {
                return CaseResult::Partial(
                    score,
                    format!("case {index} earned {score:.4} of its points from the {judge}"),
                    message,
                );
            }
            (_, CheckerVerdict::Points { .. }) => {}
            (kind, CheckerVerdict::Undetermined(reason)) => {
                undetermined.get_or_insert((
                    kind,
                    format!("case {index} output could not be judged: {reason}"),
                ));
            }
        }
    }
    match undetermined {
        Some((kind, clause)) => CaseResult::Undetermined(kind, clause),
        None => CaseResult::Matched(accepted.filter(|m| !m.is_empty())),
    }
}

/// What the item's checker says of one case (with the kind of reason an
/// undetermined answer has): a component is called here; a program's
/// answer was found before ([`CheckerVerdicts`]).
fn judge_case(
    index: usize,
    case: &ProgramCase,
    checker: &Checker,
    event: &InvocationEvent,
    comparators: &dyn OutputComparator,
    checks: &CheckerVerdicts,
) -> (ReasonKind, CheckerVerdict) {
    let answer = case
        .expected
        .answer
        .as_ref()
        .map_or(&[][..], |a| a.as_bytes());
    let input = case
        .invocation
        .stdin
        .as_ref()
        .map_or(&[][..], |stdin| stdin.as_bytes());
    match checker {
        Checker::Component { name, params } => (
            ReasonKind::CheckerUndecided,
            comparators.check(name, params, input, &event.stdout, answer),
        ),
        Checker::Program(_) => match checks.get(&index) {
            Some(verdict) => (ReasonKind::CheckerUndecided, verdict.clone()),
            None => (
                ReasonKind::NoEvidence,
                CheckerVerdict::Undetermined(
                    "no run of the checker on this output is stored (score the item again: \
                     the program's evidence is reused and only the checker runs)"
                        .into(),
                ),
            ),
        },
    }
}
