//! What a program tried, read while it runs, for the container backends.
//!
//! Under gVisor (Docker's `runsc` runtime or the OCI backend's), runsc
//! streams its runtime-monitoring points to a socket progscore listens on
//! ([`gvisor_trace`]); under runc, the container's seccomp profile sends the
//! calls that matter to progscore's listener, which decides them on
//! arguments the program can no longer change where it can
//! ([`seccomp_trace`]). Both name a call's path as the kernel resolved it
//! (`resolve`), follow the profile's tracing plan ([`tracing_plan`]) and
//! bound the time the program's calls waited for them ([`tracer_hold`]),
//! which the backends' window gives back to the program.

pub mod gvisor_trace;
pub(crate) mod resolve;
pub mod seccomp_trace;
pub mod tracer_hold;
pub mod tracing_plan;

pub use gvisor_trace::GvisorTrace;
pub use tracer_hold::TracerHold;
pub use tracing_plan::TracePlan;
