//! Score policies: how an item's score in [0, 1] comes from its cases'.
//!
//! A case scores 1 when it produced the expected result, 0 when it is
//! proven not to, a checker's points in between, and nothing when it is
//! undetermined. A policy folds those into the item's score, and decides it
//! only when the evidence does: an undetermined case leaves the score
//! undetermined unless the policy proves it without that case (a group
//! scored by its minimum, or its product, is 0 once one of its cases is
//! proven 0, whatever its other cases would have scored).
//!
//! JSON, in `program_behaves.score`:
//! - `{"policy": "all_pass"}` (the default): 1 when every case passes, else 0;
//! - `{"policy": "fraction"}`: the mean of the cases' scores (a reward's
//!   "fraction of tests passed");
//! - `{"policy": "weighted", "weights": [1, 2, ...]}`: one weight per case;
//! - `{"policy": "groups", "groups": [{"name": "subtask 1", "cases": [0, 1],
//!   "points": 30, "aggregate": "min"}, ...]}`: IOI's subtasks. A group's
//!   fraction is the minimum (`min`, the default), the mean (`sum`: its
//!   cases' scores summed over its case count) or the product (`product`)
//!   of its cases' scores; it earns that fraction of its points, and the
//!   item scores the points earned over all points.

use serde::{Deserialize, Serialize};

/// How an item's score comes from its cases' scores.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "snake_case", deny_unknown_fields)]
pub enum ScorePolicy {
    /// 1 when every case passes, else 0: the boolean verdict as a number.
    #[default]
    AllPass,
    /// The mean of the cases' scores.
    Fraction,
    /// The cases' scores weighted: one non-negative weight per case.
    Weighted {
        /// One per case, in order; their sum must be positive.
        weights: Vec<f64>,
    },
    /// Points per group of cases (IOI's subtasks).
    Groups {
        /// The groups; a case may belong to several, or to none.
        groups: Vec<ScoreGroup>,
    },
}

/// A group of cases and the points it is worth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoreGroup {
    /// A name for reports (`subtask 2`); its index otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The cases' indices (from 0).
    pub cases: Vec<usize>,
    /// What the group is worth; positive.
    pub points: f64,
    /// How its cases' scores make its fraction.
    #[serde(default)]
    pub aggregate: Aggregate,
}

/// How a group's cases' scores make its fraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregate {
    /// The lowest case score (IOI: a subtask needs every test).
    #[default]
    Min,
    /// The case scores summed, over the group's case count.
    Sum,
    /// The case scores multiplied.
    Product,
}

/// One group's result, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupScore {
    /// The group's name, or `group N`.
    pub name: String,
    /// The points it is worth.
    pub points: f64,
    /// The points earned; `None` while undetermined.
    pub earned: Option<f64>,
}

/// What a policy made of the cases' scores.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyScore {
    /// The item's score in [0, 1]; `None` when the evidence cannot decide it.
    pub score: Option<f64>,
    /// Per group, for the groups policy; empty otherwise.
    pub groups: Vec<GroupScore>,
}

impl ScorePolicy {
    /// Whether this is the default policy, which changes nothing stored.
    pub fn is_all_pass(&self) -> bool {
        matches!(self, ScorePolicy::AllPass)
    }

    /// Checks the policy against an item of `cases` cases; says what is
    /// wrong and where (the field's path below `score`).
    pub fn validate(&self, cases: usize) -> Result<(), String> {
        match self {
            ScorePolicy::AllPass | ScorePolicy::Fraction => Ok(()),
            ScorePolicy::Weighted { weights } => {
                if weights.len() != cases {
                    return Err(format!(
                        "weights: {} weight(s) for {cases} case(s) (one per case)",
                        weights.len()
                    ));
                }
                if let Some((index, weight)) = weights
                    .iter()
                    .enumerate()
                    .find(|(_, w)| !w.is_finite() || **w < 0.0)
                {
                    return Err(format!(
                        "weights[{index}]: {weight} is not a finite non-negative number"
                    ));
                }
                if weights.iter().sum::<f64>() <= 0.0 {
                    return Err("weights: their sum must be positive".into());
                }
                Ok(())
            }
            ScorePolicy::Groups { groups } => {
                if groups.is_empty() {
                    return Err("groups: at least one group is needed".into());
                }
                for (index, group) in groups.iter().enumerate() {
                    if !group.points.is_finite() || group.points <= 0.0 {
                        return Err(format!(
                            "groups[{index}].points: {} is not a positive number",
                            group.points
                        ));
                    }
                    if group.cases.is_empty() {
                        return Err(format!("groups[{index}].cases: a group needs a case"));
                    }
                    if let Some(case) = group.cases.iter().find(|case| **case >= cases) {
                        return Err(format!(
                            "groups[{index}].cases: case {case} does not exist (the item has \
                             {cases} case(s), numbered from 0)"
                        ));
                    }
                }
                Ok(())
            }
        }
    }

    /// The item's score from its cases' scores (`None`: undetermined).
    pub fn score(&self, cases: &[Option<f64>]) -> PolicyScore {
        let plain = |score| PolicyScore {
            score,
            groups: Vec::new(),
        };
        match self {
            ScorePolicy::AllPass => {
                // Proven 0 by one failed case, 1 by every case passing.
                if cases.iter().any(|case| matches!(case, Some(s) if *s < 1.0)) {
                    plain(Some(0.0))
                } else if cases.iter().all(Option::is_some) {
                    plain(Some(1.0))
                } else {
                    plain(None)
                }
            }
            ScorePolicy::Fraction => {
                let weights = vec![1.0; cases.len()];
                plain(weighted(cases, &weights))
            }
            ScorePolicy::Weighted { weights } => plain(weighted(cases, weights)),
            ScorePolicy::Groups { groups } => {
                let scored: Vec<GroupScore> = groups
                    .iter()
                    .enumerate()
                    .map(|(index, group)| GroupScore {
                        name: group
                            .name
                            .clone()
                            .unwrap_or_else(|| format!("group {index}")),
                        points: group.points,
                        earned: group_fraction(group, cases).map(|f| f * group.points),
                    })
                    .collect();
                let total: f64 = scored.iter().map(|group| group.points).sum();
                let earned: Option<f64> = scored.iter().map(|group| group.earned).sum();
                PolicyScore {
                    score: earned.map(|earned| clamp(earned / total)),
                    groups: scored,
                }
            }
        }
    }
}

/// The weighted mean; undetermined while a weighted case is.
fn weighted(cases: &[Option<f64>], weights: &[f64]) -> Option<f64> {
    let total: f64 = weights.iter().sum();
    if cases.is_empty() || total <= 0.0 {
        return None;
    }
    let mut sum = 0.0;
    for (case, weight) in cases.iter().zip(weights) {
        if *weight == 0.0 {
            continue;
        }
        sum += (*case)? * weight;
    }
    Some(clamp(sum / total))
}

/// A group's fraction of its points; decided early only by a proven 0
/// under `min` or `product`.
fn group_fraction(group: &ScoreGroup, cases: &[Option<f64>]) -> Option<f64> {
    let scores: Vec<Option<f64>> = group
        .cases
        .iter()
        .map(|index| cases.get(*index).copied().flatten())
        .collect();
    let proven_zero = scores.contains(&Some(0.0));
    match group.aggregate {
        Aggregate::Min | Aggregate::Product if proven_zero => Some(0.0),
        Aggregate::Min => scores
            .into_iter()
            .try_fold(1.0f64, |low, s| Some(low.min(s?))),
        Aggregate::Product => scores.into_iter().try_fold(1.0f64, |acc, s| Some(acc * s?)),
        Aggregate::Sum => {
            let count = scores.len() as f64;
            let sum = scores
                .into_iter()
                .try_fold(0.0f64, |acc, s| Some(acc + s?))?;
            Some(clamp(sum / count))
        }
    }
}

fn clamp(score: f64) -> f64 {
    score.clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(json: serde_json::Value) -> ScorePolicy {
        serde_json::from_value(json).expect("a policy")
    }

    #[test]
    fn all_pass_is_the_boolean_verdict_as_a_number() {
        let policy = ScorePolicy::AllPass;
        assert_eq!(policy.score(&[Some(1.0), Some(1.0)]).score, Some(1.0));
        assert_eq!(policy.score(&[Some(1.0), Some(0.5)]).score, Some(0.0));
        assert_eq!(policy.score(&[None, Some(0.0)]).score, Some(0.0));
        assert_eq!(policy.score(&[None, Some(1.0)]).score, None);
    }

    #[test]
    fn a_fraction_waits_for_every_case_and_weights_skip_weightless_ones() {
        let fraction = ScorePolicy::Fraction;
        assert_eq!(
            fraction
                .score(&[Some(1.0), Some(0.0), Some(1.0), Some(0.0)])
                .score,
            Some(0.5)
        );
        assert_eq!(fraction.score(&[Some(1.0), None]).score, None);
        let weighted = ScorePolicy::Weighted {
            weights: vec![3.0, 1.0, 0.0],
        };
        assert_eq!(
            weighted.score(&[Some(1.0), Some(0.0), None]).score,
            Some(0.75)
        );
        assert_eq!(weighted.score(&[None, Some(0.0), Some(1.0)]).score, None);
    }

    #[test]
    fn subtasks_earn_their_points_and_a_proven_zero_decides_a_min_group() {
        let policy = groups(serde_json::json!({"policy": "groups", "groups": [
            {"name": "samples", "cases": [0], "points": 0.0001},
            {"cases": [1, 2], "points": 40},
            {"cases": [2, 3], "points": 60, "aggregate": "sum"},
        ]}));
        let scored = policy.score(&[Some(1.0), Some(1.0), Some(1.0), Some(0.0)]);
        let earned: Vec<Option<f64>> = scored.groups.iter().map(|g| g.earned).collect();
        assert_eq!(earned, vec![Some(0.0001), Some(40.0), Some(30.0)]);
        assert!((scored.score.unwrap() - 70.0001 / 100.0001).abs() < 1e-12);
        // Case 1 undetermined, case 2 proven 0: both groups with case 2 are
        // decided without case 1.
        let scored = policy.score(&[Some(1.0), None, Some(0.0), Some(0.0)]);
        assert_eq!(scored.groups[1].earned, Some(0.0));
        assert_eq!(scored.groups[2].earned, Some(0.0));
        assert!(scored.score.is_some());
        // A mean is never decided early.
        let scored = policy.score(&[Some(1.0), Some(1.0), Some(1.0), None]);
        assert_eq!(scored.groups[2].earned, None);
        assert_eq!(scored.score, None);
        let product = groups(serde_json::json!({"policy": "groups", "groups": [
            {"cases": [0, 1], "points": 10, "aggregate": "product"}]}));
        assert_eq!(product.score(&[Some(0.5), Some(0.5)]).score, Some(0.25));
    }

    #[test]
    fn a_policy_that_does_not_fit_its_cases_is_refused_naming_the_field() {
        let weighted = ScorePolicy::Weighted { weights: vec![1.0] };
        assert!(weighted.validate(2).unwrap_err().starts_with("weights:"));
        let negative = ScorePolicy::Weighted {
            weights: vec![1.0, -1.0],
        };
        assert!(negative.validate(2).unwrap_err().starts_with("weights[1]"));
        let policy = groups(serde_json::json!({"policy": "groups", "groups": [
            {"cases": [0, 5], "points": 10}]}));
        let error = policy.validate(3).unwrap_err();
        assert!(error.contains("groups[0].cases: case 5"), "{error}");
        let policy = groups(serde_json::json!({"policy": "groups", "groups": [
            {"cases": [0], "points": 0}]}));
        assert!(
            policy
                .validate(1)
                .unwrap_err()
                .starts_with("groups[0].points")
        );
        let unknown: Result<ScorePolicy, _> =
            serde_json::from_value(serde_json::json!({"policy": "best_of"}));
        assert!(unknown.is_err());
    }
}
