//! The machine's memory, shared by the runs in flight: each run holds as
//! much of `[serve] memory_budget` as its memory limit while it runs (the
//! larger of its compile's and its cases', which run one after another),
//! so the limits in flight never add up to more than the machine can give.
//! A request that may ask for 4 GiB in every slot would otherwise let the
//! host's OOM killer choose among the programs, and a program killed that
//! way proves nothing.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget is counted in these units (semaphore permits are `u32`).
const UNIT: u64 = 1 << 20;

/// The runs' share of the machine's memory.
pub(crate) struct MemoryBudget {
    units: Arc<Semaphore>,
    total: u64,
}

/// A run's share, held while it runs.
pub(crate) struct MemoryShare {
    _units: Option<OwnedSemaphorePermit>,
}

impl MemoryBudget {
    /// A budget of `bytes` (at least one unit).
    pub(crate) fn new(bytes: u64) -> MemoryBudget {
        let units = (bytes / UNIT).clamp(1, u64::from(u32::MAX)) as usize;
        MemoryBudget {
            units: Arc::new(Semaphore::new(units)),
            total: units as u64 * UNIT,
        }
    }

    /// Three quarters of this machine's memory (`MemTotal`), the rest left to
    /// the host, the engine and the server; 4 GiB where it cannot be read.
    pub(crate) fn of_this_machine() -> MemoryBudget {
        let total = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|line| line.strip_prefix("MemTotal:"))
                    .and_then(|rest| {
                        rest.trim()
                            .trim_end_matches("kB")
                            .trim()
                            .parse::<u64>()
                            .ok()
                    })
            })
            .map_or(4 << 30, |kib| kib * 1024);
        MemoryBudget::new(total / 4 * 3)
    }

    /// The whole budget, in bytes.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Bytes not held by a run now.
    #[cfg(test)]
    pub(crate) fn free(&self) -> u64 {
        self.units.available_permits() as u64 * UNIT
    }

    /// A share of `bytes` (a run asking for more than the whole budget gets
    /// the whole of it: it runs alone), waiting at most `wait`; `None` when
    /// the wait ended first.
    pub(crate) async fn share(&self, bytes: u64, wait: Duration) -> Option<MemoryShare> {
        let units = bytes.div_ceil(UNIT).clamp(1, self.total / UNIT) as u32;
        let acquire = self.units.clone().acquire_many_owned(units);
        match tokio::time::timeout(wait, acquire).await {
            Ok(Ok(permit)) => Some(MemoryShare {
                _units: Some(permit),
            }),
            // The semaphore is never closed; a wait that ended.
            Ok(Err(_)) | Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn limits_in_flight_never_add_up_past_the_budget() {
        let budget = MemoryBudget::new(1 << 30);
        let first = budget.share(600 << 20, Duration::ZERO).await;
        assert!(first.is_some());
        assert_eq!(budget.free(), 424 << 20);
        // 600 MiB more would pass the budget: it waits, and its wait ends.
        assert!(
            budget
                .share(600 << 20, Duration::from_millis(20))
                .await
                .is_none()
        );
        // A small one still fits beside the first.
        let small = budget.share(256 << 20, Duration::ZERO).await;
        assert!(small.is_some());
        drop(first);
        let again = budget.share(600 << 20, Duration::ZERO).await;
        assert!(again.is_some());
        // More than the whole budget runs alone, not never.
        drop((small, again));
        let alone = budget.share(8 << 30, Duration::ZERO).await;
        assert!(alone.is_some());
        assert_eq!(budget.free(), 0);
    }
}
