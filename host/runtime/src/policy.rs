//! The batch policy every face applies the same way.

/// Programs in flight per core by default: the fastest level the load
/// benchmarks found on a 2-core machine; any higher level gives the same
/// verdicts (timeouts are proven from what was measured, not from the count).
pub const JOBS_PER_CORE: usize = 3;

/// How many programs a batch keeps in flight when the caller does not say:
/// [`JOBS_PER_CORE`] per core of this machine, or what the configured
/// engines take together when that is more (`engines_take`, 0 when unknown).
pub fn default_jobs(engines_take: usize) -> usize {
    jobs_for_cores(
        std::thread::available_parallelism().map_or(2, |n| n.get()),
        engines_take,
    )
}

/// [`default_jobs`] for what `backends` (the configured engines) take,
/// once their preflight reached them; `None`: this machine's cores alone.
pub fn default_jobs_for(backends: Option<&crate::backends::Backends>) -> usize {
    default_jobs(
        backends
            .and_then(crate::backends::Backends::docker_capacity)
            .unwrap_or(0),
    )
}

/// The same policy for a machine of `cores` cores (a cluster node as its
/// scheduler counts them).
pub fn jobs_for_cores(cores: usize, engines_take: usize) -> usize {
    (JOBS_PER_CORE * cores).max(engines_take).max(1)
}

/// Exit statuses, the same from every command-line face.
pub mod exit {
    /// Everything done.
    pub const OK: u8 = 0;
    /// The work ran but something failed (a failing verdict with `--fail-on`).
    pub const FAILED: u8 = 1;
    /// Usage or configuration error, a bad batch line, an item that failed,
    /// or the evidence store failed.
    pub const ERROR: u8 = 2;
    /// The sandbox could not run some items (a profile refused at
    /// preflight, an engine that stopped answering); nothing was stored
    /// for them.
    pub const UNAVAILABLE: u8 = 3;
}

/// How a batch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchEnd {
    /// A signal stopped it; the process exits with the signal's status.
    Interrupted {
        /// 128 + the signal's number.
        exit_code: u8,
    },
    /// The evidence store failed; the results written before stand.
    StoreFailed,
    /// The engine stopped answering; the items left were not scored.
    EngineGone,
    /// Some items were not scored (their profile cannot run here, or the
    /// sandbox refused them).
    NotScored,
    /// Every item was tried.
    Finished,
}

impl BatchEnd {
    /// The end of a batch that no store or engine fault stopped.
    pub fn of(summary: &crate::results::Summary, signal_exit: Option<u8>) -> BatchEnd {
        match signal_exit {
            Some(exit_code) => BatchEnd::Interrupted { exit_code },
            None if summary.not_scored > 0 => BatchEnd::NotScored,
            None => BatchEnd::Finished,
        }
    }
}

/// The verdicts that make a finished batch fail (`--fail-on`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailOn {
    /// Any item false.
    pub falses: bool,
    /// Any item undetermined.
    pub undetermined: bool,
}

/// The exit status of a batch that ended as `end`, with `bad_lines` refused lines.
pub fn exit_status(
    end: BatchEnd,
    summary: &crate::results::Summary,
    fail_on: FailOn,
    bad_lines: usize,
) -> u8 {
    match end {
        BatchEnd::Interrupted { exit_code } => exit_code,
        BatchEnd::StoreFailed => exit::ERROR,
        BatchEnd::EngineGone | BatchEnd::NotScored => exit::UNAVAILABLE,
        BatchEnd::Finished if bad_lines > 0 || summary.errors > 0 => exit::ERROR,
        BatchEnd::Finished
            if (fail_on.falses && summary.falses > 0)
                || (fail_on.undetermined && summary.undetermined > 0) =>
        {
            exit::FAILED
        }
        BatchEnd::Finished => exit::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Summary;

    #[test]
    fn a_batch_fails_only_on_what_the_caller_named() {
        let summary = Summary {
            trues: 3,
            undetermined: 1,
            ..Summary::default()
        };
        let end = BatchEnd::of(&summary, None);
        assert_eq!(end, BatchEnd::Finished);
        assert_eq!(exit_status(end, &summary, FailOn::default(), 0), exit::OK);
        let on_false = FailOn {
            falses: true,
            undetermined: false,
        };
        assert_eq!(exit_status(end, &summary, on_false, 0), exit::OK);
        let on_undetermined = FailOn {
            falses: false,
            undetermined: true,
        };
        assert_eq!(exit_status(end, &summary, on_undetermined, 0), exit::FAILED);
        assert_eq!(exit_status(end, &summary, on_undetermined, 1), exit::ERROR);
    }

    #[test]
    fn items_not_scored_make_the_batch_unavailable_and_a_signal_wins() {
        let summary = Summary {
            trues: 1,
            not_scored: 2,
            ..Summary::default()
        };
        let end = BatchEnd::of(&summary, None);
        assert_eq!(end, BatchEnd::NotScored);
        assert_eq!(
            exit_status(end, &summary, FailOn::default(), 0),
            exit::UNAVAILABLE
        );
        let end = BatchEnd::of(&summary, Some(143));
        assert_eq!(exit_status(end, &summary, FailOn::default(), 3), 143);
    }

    #[test]
    fn jobs_follow_the_cores_unless_the_engines_take_more() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        assert_eq!(default_jobs(0), JOBS_PER_CORE * cores);
        assert_eq!(default_jobs(1000), 1000);
    }
}
