//! The runs being gathered now (see [`crate::jobs::gather`]): for each profile,
//! program and limits, the cases so far and where the run's result will be. Held
//! by the server's state; filled and emptied by the gathering requests.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use progscore_sandbox::Invocation;
use tokio::sync::watch;

use progscore_scoring::EvidenceUse;
use progscore_scoring::evidence::Observation;

use crate::jobs::job::JobError;

/// The requests gathering for one run: the profile, the program's hash and
/// the requests' own limits ([`crate::jobs::limits::RequestLimits::gather_key`]).
pub(crate) type GatherKey = (String, String, String);

/// What a gathered run gives its requests when it ends: where its evidence
/// came from, and each case as an observation of its own, in the cases'
/// order.
pub(crate) type Gathered = Arc<Result<(EvidenceUse, Vec<Observation>), JobError>>;

/// Where a gathered run stands for its requests: each case's own
/// observation as soon as its event is proven (stored, before the run
/// ends), and the run's end.
#[derive(Clone, Default)]
pub(crate) struct GatheredSoFar {
    /// Per case, once the run has started.
    pub(crate) early: Vec<Option<Observation>>,
    pub(crate) end: Option<Gathered>,
}

impl GatheredSoFar {
    /// Whether case `case` can be answered now.
    pub(crate) fn answers(&self, case: usize) -> bool {
        self.end.is_some() || self.early.get(case).is_some_and(Option::is_some)
    }
}

/// One run being gathered: its cases so far, and where its result will be.
pub(crate) struct Gathering {
    pub(crate) invocations: Vec<Invocation>,
    pub(crate) result: watch::Receiver<GatheredSoFar>,
}

/// The runs being gathered now.
#[derive(Default)]
pub(crate) struct Gatherings {
    pub(crate) open: Mutex<HashMap<GatherKey, Gathering>>,
}
