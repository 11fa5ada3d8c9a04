//! What progscore's Linux container backends share.
//!
//! The Docker backend (`progscore-docker`, through the engine's API) and the
//! daemonless OCI backend (`progscore-oci`, runc or runsc run directly) both
//! give each invocation its own cgroup and read CPU time, peak memory, CPU
//! waits and OOM kills from it ([`cgroup`]), and name a host path they could
//! not make or remove with one error ([`PathError`]); both hold the program in a
//! private host folder bind-mounted read-only ([`workspace`]); both run their
//! calls on a runtime of their own so that a dropped call can wait for its
//! cleanup ([`guard`]), behind one `SandboxClient` face ([`facade`]); both
//! keep a schedule in which a timeout is confirmed with nothing else running
//! ([`schedule`]); and both watch the program's window, where the timing
//! rule is applied, through one [`window`] given what differs between them
//! as a [`Program`]. Both run a program's cases alike ([`cases`]). A traced
//! program's waits for its tracer are bounded by `progscore-trace`'s
//! `TracerHold` and given back by the window.

pub mod cases;
pub mod cgroup;
pub mod facade;
pub mod guard;
pub mod output;
pub mod path_error;
pub mod schedule;
pub mod window;
pub mod workspace;

pub use cases::Cases;
pub use cgroup::{
    Cgroups, EndedTasks, InvocationCgroup, MemoryKill, OomReading, OomWatch, WaitSample,
    cpu_limit_reached, delay_accounting_on, host_oom_kills,
};
pub use facade::{Backend, Guarded};
pub use guard::{shut_down, spawn_guarded};
pub use output::output_was_active;
pub use path_error::PathError;
pub use schedule::{Load, Place, Running, Schedule, Slot};
pub use window::{Killed, Measured, Program, Watched, Window, millis};
pub use workspace::{
    BUILD_ENTRY_BYTES, BuildDisk, Workspace, build_size, compile_event, tree_sha256,
};
