//! What an invocation is given by its call (the context), what it gives
//! back (the event, warnings, what to do next, a leftover container), and
//! what its window and the container's state showed: the types every step
//! of an invocation shares, kept apart so that each step reads them from
//! here rather than from the others.

use std::time::Duration;

use bollard::Docker;
use progscore_container::{Cgroups, Load, OomReading};
use progscore_sandbox::{
    ConversationSide, InvocationEvent, Limits, Outcome, ResourceUsage, RuntimeProfile, Stage,
};
use tokio_util::sync::CancellationToken;

use crate::delivery::Files;
use crate::engine::{EngineFacts, ImageFacts};
use crate::health::EngineHealth;
use crate::held::{ActiveContainers, Leftover};
use crate::options::DockerOptions;

/// Everything an invocation needs from its call.
pub(crate) struct InvocationContext<'a> {
    pub docker: &'a Docker,
    pub engine: &'a EngineFacts,
    /// The engine's name in a pool (`None` with one engine).
    pub engine_name: Option<&'a str>,
    /// The containers in use on this engine: the sweep after an outage
    /// leaves them alone.
    pub active: &'a ActiveContainers,
    pub health: &'a EngineHealth,
    pub image: &'a ImageFacts,
    pub profile: &'a RuntimeProfile,
    /// The OCI runtime, resolved.
    pub runtime: &'a str,
    pub options: &'a DockerOptions,
    pub owner: &'a str,
    pub cgroups: Option<&'a Cgroups>,
    pub load: &'a Load,
    /// Where the program and the build folder come from.
    pub files: &'a Files<'a>,
    /// The compile (writable build folder) or a case (read-only).
    pub stage: Stage,
    /// The side of a conversation these cases are (never the compile's).
    pub conversation: Option<&'a ConversationSide>,
    /// The interactor's side of a conversation: its slots are taken
    /// beside its program's (see `progscore_container::Place::Beside`).
    pub beside: bool,
    pub token: &'a CancellationToken,
}

impl InvocationContext<'_> {
    /// The limits of this context's stage.
    pub(super) fn limits(&self) -> &Limits {
        self.profile.limits_of(self.stage)
    }
}

/// The event, any sandbox warnings, and what the caller must do next.
pub(crate) struct InvocationResult {
    pub event: InvocationEvent,
    pub warnings: Vec<String>,
    pub next: Next,
    /// A container the engine would not remove: the client keeps it and
    /// tries again (and the next start's sweep, if this process ends first).
    pub leftover: Option<Leftover>,
}

/// What the call does after an invocation.
pub(crate) enum Next {
    /// Go on with the next invocation.
    Continue,
    /// Run this invocation again with nothing else beside it: its timeout is
    /// not proven yet (the text says why).
    ConfirmAlone(String),
    /// The engine stopped answering: wait for it, remove what is left, and
    /// run the invocation again.
    EngineLost(Leftover),
    /// Run nothing more in this call (the text says why).
    Stop(String),
}

/// What the window and the state showed.
pub(super) struct Observed {
    pub(super) outcome: Outcome,
    pub(super) duration: Duration,
    pub(super) usage: Option<ResourceUsage>,
    pub(super) confirm: Option<String>,
    /// Exit code 137 that progscore did not cause: a SIGKILL from outside,
    /// the program's own (gVisor), or `exit(137)`; the engine's events
    /// decide which.
    pub(super) unexplained_sigkill: bool,
    /// A proven wall-clock timeout that rests on fair time alone (not on
    /// the CPU the program used): a pause the window did not see undoes it.
    pub(super) by_fair_time: bool,
    /// The engine's state says the container was OOM-killed (whose OOM
    /// killer, the cgroups tell).
    pub(super) engine_oom: bool,
    /// progscore killed it at a limit.
    pub(super) killed_at_limit: bool,
    /// What the OOM watch saw, read once the program ended and before its
    /// cgroup goes (`None`: not watched, or the container's cgroup is not
    /// where the watch looks).
    pub(super) oom: Option<OomReading>,
}

pub(super) fn not_run() -> Observed {
    Observed {
        outcome: Outcome::NotRun {
            reason: "the call was cancelled".into(),
        },
        duration: Duration::ZERO,
        usage: None,
        confirm: None,
        unexplained_sigkill: false,
        by_fair_time: false,
        engine_oom: false,
        killed_at_limit: false,
        oom: None,
    }
}
