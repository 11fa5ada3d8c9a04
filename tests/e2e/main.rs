//! The progscore binary, end to end, against the real engine.

/// Profiles, programs and expectation builders shared with the scorer's own tests.
#[path = "../../host/scoring/tests/common/mod.rs"]
mod scoring_common;

mod architecture;
mod contest;
mod engines;
mod interactive;
mod kills;
mod languages;
mod leases;
mod merge;
mod pipes;
mod report;
mod run;
mod score;
mod scorer;
mod signals;
mod unmeasured;
