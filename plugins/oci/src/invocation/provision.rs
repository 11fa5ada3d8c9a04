//! The invocation's cgroup and bundle: made before the runtime runs it
//! ([`prepare`]), removed after it on every path ([`remove`]), and the names
//! inside a bundle that the run, the removal and the sweep all rely on.

use std::path::Path;
use std::time::Duration;

use progscore_container::InvocationCgroup;
use progscore_trace::TracePlan;
use progscore_trace::seccomp_trace::SeccompTrace;

use super::context::InvocationContext;
use crate::bundle::{self, Placement};

/// The container's own cgroup, below the invocation's.
pub(super) const LEAF: &str = "ctr";
/// The folder in a bundle where runsc's processes write their logs: each
/// notes its own exit there, which is how a sandbox that ended on its own is
/// told from one killed from outside.
pub(super) const SANDBOX_LOGS: &str = "sandbox-logs";
/// The file in a bundle that names the runtime that ran it, `<name>\n<binary>`
/// (for the sweep).
pub(crate) const RUNTIME_MARKER: &str = "runtime";

/// What [`prepare`] made.
pub(super) struct Prepared {
    pub(super) argv: Vec<String>,
    /// The seccomp listener the container's profile names (runc, traced).
    pub(super) seccomp: Option<SeccompTrace>,
    /// Why a traced runc invocation runs without its listener.
    pub(super) seccomp_unavailable: Option<String>,
}

/// The cgroup with its memory limit, and the bundle: `config.json`, and the
/// runtime's name for a sweep after a crash; under [`TracePlan::Seccomp`],
/// the seccomp listener that `config.json` names.
pub(super) fn prepare(
    context: &InvocationContext<'_>,
    name: &str,
    cgroup: &InvocationCgroup,
    bundle_dir: &Path,
    args: &[String],
    plan: &TracePlan,
) -> Result<Prepared, String> {
    std::fs::create_dir(bundle_dir)
        .map_err(|e| format!("cannot create bundle {}: {e}", bundle_dir.display()))?;
    std::fs::write(
        bundle_dir.join(RUNTIME_MARKER),
        format!(
            "{}\n{}\n",
            context.runtime.name,
            context.runtime.binary.display()
        ),
    )
    .map_err(|e| format!("cannot write bundle {}: {e}", bundle_dir.display()))?;
    cgroup
        .create_with_memory_limit(context.limits().memory_bytes)
        .map_err(|e| e.to_string())?;
    let mut seccomp = None;
    let mut seccomp_unavailable = None;
    if let TracePlan::Seccomp(sensitive) = plan {
        match SeccompTrace::listen(bundle_dir, sensitive.clone()) {
            Ok(listener) => seccomp = Some(listener),
            Err(e) => seccomp_unavailable = Some(format!("the trace could not be set up: {e}")),
        }
    }
    let placement = Placement {
        rootfs: &context.image.rootfs,
        image_env: &context.image.env,
        program_on_host: context.program_on_host,
        program_target: context.program_target,
        build_on_host: context.build_on_host,
        cgroups_path: cgroup.runtime_path(LEAF),
        runtime: context.runtime.kind,
        home: context.image.home.clone(),
        seccomp_listener: seccomp.as_ref().map(SeccompTrace::listener_path),
    };
    let bundle = bundle::spec(context.profile, context.stage, &placement, args)
        .map_err(|e| format!("cannot build the container's spec for {name}: {e}"))?;
    bundle
        .spec
        .save(bundle_dir.join("config.json"))
        .map_err(|e| format!("cannot write {}/config.json: {e}", bundle_dir.display()))?;
    Ok(Prepared {
        argv: bundle.argv,
        seccomp,
        seccomp_unavailable,
    })
}

/// Removes the container if the runtime still holds it, the invocation's
/// cgroups, and the bundle.
pub(super) async fn remove(
    context: &InvocationContext<'_>,
    name: &str,
    cgroup: &InvocationCgroup,
    bundle_dir: &Path,
) -> Result<(), String> {
    let mut problems = Vec::new();
    if context.runtime.has_state(name)
        && let Err(e) = context
            .runtime
            .delete(name, context.options.runtime_timeout)
            .await
    {
        problems.push(format!("failed to remove container {name}: {e}"));
    }
    if let Err(e) = context.runtime.remove_stale_locks(name) {
        problems.push(format!("failed to remove container {name}: {e}"));
    }
    // What the runtime left running in the cgroup (an init whose `run` was
    // killed during its start): killed, and given a moment to exit.
    for _ in 0..100 {
        if cgroup.kill_remaining() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if let Err(e) = cgroup.remove_settled().await {
        problems.push(e.to_string());
    }
    match std::fs::remove_dir_all(bundle_dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => problems.push(format!(
            "failed to remove bundle {}: {e}",
            bundle_dir.display()
        )),
        _ => {}
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}
