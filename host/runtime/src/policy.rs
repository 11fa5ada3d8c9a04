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

/// The same policy for a machine of `cores` cores (a cluster node as its
/// scheduler counts them).
pub fn jobs_for_cores(cores: usize, engines_take: usize) -> usize {
    (JOBS_PER_CORE * cores).max(engines_take).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_follow_the_cores_unless_the_engines_take_more() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        assert_eq!(default_jobs(0), JOBS_PER_CORE * cores);
        assert_eq!(default_jobs(1000), 1000);
    }
}
