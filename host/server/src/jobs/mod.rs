//! The one run path every dialect uses: a request becomes a job
//! ([`job`]), limits checked ([`limits`]), a turn in its profile's bounded
//! queue ([`queue`]) within the memory budget ([`budget`]), then run alone
//! ([`run`]) or gathered with other cases of the same build ([`gather`],
//! [`gatherings`]), with reruns of unproven runs ([`execute`]).

pub(crate) mod budget;
pub(crate) mod execute;
pub(crate) mod gather;
pub(crate) mod gatherings;
pub(crate) mod job;
pub(crate) mod limits;
pub(crate) mod queue;
pub(crate) mod run;
