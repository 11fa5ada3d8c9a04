//! How a face has a batch's items checked ([`ItemCheck`]) and scored
//! ([`ItemScoring`]): items re-graded from stored evidence, and the
//! session's scorer as a batch's scoring.

use progscore_sandbox::{BoxFuture, SandboxError};
use progscore_scoring::{ProgramExecutionScorer, ProgramInput, Replayer, Score, ScoreRequest};
use tokio_util::sync::CancellationToken;

use super::tally::ItemFailure;
use crate::batch::BatchItem;

/// An item refused before anything ran: the field at fault and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemRefusal {
    /// The field's path in the batch line (`expectation.conditions[0]...`).
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// How a batch's items are checked before anything runs.
pub trait ItemCheck: Send + Sync {
    /// The item as it will be scored (language names made profile names),
    /// or why it cannot be: checked before anything of the batch runs.
    fn check(&self, item: BatchItem) -> Result<BatchItem, ItemRefusal>;
}

/// Items re-graded from stored evidence: language names made profile
/// names; the rescore checks the rest itself.
pub struct ReplayItems<'a>(pub &'a Replayer);

impl ItemCheck for ReplayItems<'_> {
    fn check(&self, mut item: BatchItem) -> Result<BatchItem, ItemRefusal> {
        item.expectation = self.0.canonical(item.expectation);
        Ok(item)
    }
}

/// How a face has a batch's items scored: the session's scorer
/// ([`ScorerItems`]), or a face's own path to it (the server's queues).
pub trait ItemScoring: ItemCheck {
    /// Whether `profile` can run here; checked for every profile of the
    /// batch before anything runs.
    fn preflight<'a>(&'a self, profile: &'a str) -> BoxFuture<'a, Result<(), SandboxError>>;

    /// Scores one checked item.
    fn score(
        &self,
        item: BatchItem,
        fresh: bool,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Score, ItemFailure>>;

    /// Programs in flight when the caller does not say, asked once the
    /// preflight is done (configured engines say then what they take).
    fn default_jobs(&self) -> usize;
}

/// The session's scorer as a batch's [`ItemScoring`]: what `progscore
/// score`, the Python package and Ray's driver run.
pub struct ScorerItems<'a> {
    /// The scorer.
    pub scorer: &'a ProgramExecutionScorer,
    /// The configured backends, whose engines say how many programs they
    /// take once their preflight reached them.
    pub backends: Option<std::sync::Arc<crate::backends::Backends>>,
}

impl<'a> ScorerItems<'a> {
    /// `scorer`'s items; default jobs follow what `backends`' engines take
    /// (none: this machine's cores alone).
    pub fn new(
        scorer: &'a ProgramExecutionScorer,
        backends: Option<std::sync::Arc<crate::backends::Backends>>,
    ) -> ScorerItems<'a> {
        ScorerItems { scorer, backends }
    }
}

impl ItemCheck for ScorerItems<'_> {
    fn check(&self, mut item: BatchItem) -> Result<BatchItem, ItemRefusal> {
        item.expectation = self.scorer.replayer().canonical(item.expectation);
        match self.scorer.validate(&item.expectation) {
            Ok(()) => Ok(item),
            Err(err) => Err(ItemRefusal {
                field: Some(format!("expectation.{}", err.field_path())),
                message: err.to_string(),
            }),
        }
    }
}

impl ItemScoring for ScorerItems<'_> {
    fn preflight<'a>(&'a self, profile: &'a str) -> BoxFuture<'a, Result<(), SandboxError>> {
        Box::pin(async move { self.scorer.preflight(profile).await.map(|_| ()) })
    }

    fn score(
        &self,
        item: BatchItem,
        fresh: bool,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Score, ItemFailure>> {
        let request = ScoreRequest::new(ProgramInput::Inline(item.program), item.expectation)
            .item_id(item.id)
            .fresh(fresh)
            .cancel(cancel);
        Box::pin(async move { Ok(self.scorer.score(request).await?) })
    }

    fn default_jobs(&self) -> usize {
        crate::policy::default_jobs_for(self.backends.as_deref())
    }
}
