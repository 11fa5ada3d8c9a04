//! What an invocation is given by its call (the image, the context), what it
//! gives back (the event, warnings, what to do next), and what its window
//! showed: the types every step of an invocation shares, kept apart so that
//! each step reads them from here rather than from the others.

use std::path::{Path, PathBuf};
use std::time::Duration;

use progscore_container::{Cgroups, Load};
use progscore_sandbox::{
    ConversationSide, InvocationEvent, Limits, Outcome, ResourceUsage, RuntimeProfile, Stage,
};
use tokio_util::sync::CancellationToken;

use crate::options::OciOptions;
use crate::runtime::OciRuntime;

/// The image an invocation runs, as the cache prepared it.
pub(crate) struct ImageInUse {
    pub rootfs: PathBuf,
    pub env: Vec<String>,
    pub home: String,
    pub manifest_digest: String,
    pub config_digest: String,
}

/// Everything an invocation needs from its call.
pub(crate) struct InvocationContext<'a> {
    pub runtime: &'a OciRuntime,
    pub image: &'a ImageInUse,
    pub profile: &'a RuntimeProfile,
    pub options: &'a OciOptions,
    pub owner: &'a str,
    pub owner_dir: &'a Path,
    pub cgroups: &'a Cgroups,
    pub load: &'a Load,
    pub cpus: usize,
    pub program_on_host: &'a Path,
    /// Where `program_on_host` is mounted: the program's path, or its
    /// folder when it brings files.
    pub program_target: &'a str,
    /// The compile (writable build folder) or a case (read-only).
    pub stage: Stage,
    pub build_on_host: Option<&'a Path>,
    /// The side of a conversation this run is (its cases are live).
    pub conversation: Option<&'a ConversationSide>,
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
    /// What of the invocation could not be removed (for the next sweep).
    pub warnings: Vec<String>,
    pub next: Next,
}

/// What the call does after an invocation.
pub(crate) enum Next {
    Continue,
    /// Run this invocation again with nothing else beside it.
    ConfirmAlone(String),
    /// Run nothing more in this call (the text says why).
    Stop(String),
}

/// What the window showed.
pub(super) struct Observed {
    pub(super) outcome: Outcome,
    pub(super) duration: Duration,
    pub(super) usage: Option<ResourceUsage>,
    pub(super) confirm: Option<String>,
}

pub(super) fn not_run() -> Observed {
    Observed {
        outcome: Outcome::NotRun {
            reason: "the call was cancelled".into(),
        },
        duration: Duration::ZERO,
        usage: None,
        confirm: None,
    }
}
