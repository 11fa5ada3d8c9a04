//! What progscore's Linux container backends share.
//!
//! The Docker backend (`progscore-docker`, through the engine's API) and the
//! daemonless OCI backend (`progscore-oci`, runc or runsc run directly) both
//! give each invocation its own cgroup and read CPU time, peak memory, CPU
//! waits and OOM kills from it ([`cgroup`]); both hold the program in a
//! private host folder bind-mounted read-only ([`workspace`]); both run their
//! calls on a runtime of their own so that a dropped call can wait for its
//! cleanup ([`guard`]); and both keep a schedule in which a timeout is
//! confirmed with nothing else running ([`schedule`]).

pub mod cgroup;
pub mod guard;
pub mod output;
pub mod schedule;
pub mod workspace;

pub use cgroup::{Cgroups, EndedTasks, InvocationCgroup, OomWatch, WaitSample, cpu_limit_reached};
pub use guard::{shut_down, spawn_guarded};
pub use output::output_was_active;
pub use schedule::{Load, Running, Slot};
pub use workspace::{
    BUILD_ENTRY_BYTES, BuildDisk, Workspace, build_size, compile_event, tree_sha256,
};
