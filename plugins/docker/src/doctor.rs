//! What `progscore doctor` shows for the Docker backend: per engine, whether
//! it is reached and enforces every limit, what is measured of a program's
//! time there, and whether each profile that may run on it can.

use std::sync::Arc;

use progscore_sandbox::{Backend, RuntimeProfile, SandboxError, Stage};
use progscore_trace::TracePlan;

use crate::engine::EngineFacts;
use crate::options::Endpoint;
use crate::pool::{Pool, PooledEngine};

/// What `doctor` prints for one engine: the engine and the readiness of
/// every profile that may run on it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EngineReport {
    /// Its name (`[engines.NAME]`, or `default`).
    pub name: String,
    /// Its address (`unix:///var/run/docker.sock`).
    pub endpoint: String,
    /// Programs it runs at once (`None`: bounded by the caller only).
    pub capacity: Option<usize>,
    /// The engine and its version, or why it could not be reached.
    pub engine: String,
    /// Whether the engine itself is usable (reachable and enforces every limit).
    pub engine_ok: bool,
    /// Problems with the engine itself.
    pub problems: Vec<String>,
    /// Runtimes the engine lists.
    pub runtimes: Vec<String>,
    /// What is measured of a program's time there, and what that costs
    /// (`None` when the engine was not reached).
    pub timing: Option<String>,
    /// One entry per profile.
    pub profiles: Vec<ProfileCheck>,
}

/// Whether one profile can run, and why not.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProfileCheck {
    /// Profile name.
    pub profile: String,
    /// Whether it can run.
    pub ok: bool,
    /// The resolved image and runtime when ok, the problem otherwise.
    pub detail: String,
}

/// Checks every engine and every Docker profile on it: one report per
/// engine.
pub(crate) async fn diagnose(pool: &Arc<Pool>, profiles: &[RuntimeProfile]) -> Vec<EngineReport> {
    let contact = pool.contact().await;
    let mut reports = Vec::new();
    for (index, pooled) in pool.engines.iter().enumerate() {
        let reached = match (&contact, pooled.connected()) {
            (_, Some(engine)) => Ok(engine.facts.clone()),
            (Err(err), None) => Err(err.clone()),
            (Ok(()), None) => Err(SandboxError::EngineUnavailable {
                message: pooled
                    .health
                    .outage()
                    .map(|(_, cause)| cause)
                    .unwrap_or_else(|| "not reached".into()),
            }),
        };
        let mut checks = Vec::new();
        for profile in profiles.iter().filter(|p| {
            p.backend == Backend::Docker
                && (p.engines.is_empty() || p.engines.iter().any(|e| e == pooled.name()))
        }) {
            let check = match &reached {
                Err(err) => Err(err.clone()),
                Ok(facts) => pool.check(index, profile).await.map(|(runtime, image)| {
                    let mut detail = format!(
                        "image {} (id {}), runtime {runtime}",
                        profile.image().map(|i| i.to_string()).unwrap_or_default(),
                        image.image_id
                    );
                    // The plan a run of its cases makes, in its words.
                    let plan = TracePlan::of(
                        profile,
                        Stage::Case,
                        &runtime,
                        facts.can_trace(&runtime, pooled.options.endpoint.is_local()),
                    );
                    if let Some(tracing) = plan.describe() {
                        detail.push_str(", ");
                        detail.push_str(&tracing);
                    }
                    detail
                }),
            };
            checks.push(ProfileCheck {
                profile: profile.name.clone(),
                ok: check.is_ok(),
                detail: check.unwrap_or_else(|err| err.to_string()),
            });
        }
        reports.push(report(pooled, reached.as_ref(), checks));
    }
    reports
}

/// Builds one engine's doctor report from whatever could be learnt.
pub(crate) fn report(
    pooled: &PooledEngine,
    facts: Result<&EngineFacts, &SandboxError>,
    profiles: Vec<ProfileCheck>,
) -> EngineReport {
    let name = pooled.name().to_string();
    let endpoint = pooled.options.endpoint.url();
    match facts {
        Ok(facts) => EngineReport {
            name,
            endpoint,
            capacity: pooled.options.capacity_for(facts.cpus),
            engine: facts.description.clone(),
            engine_ok: facts.unsupported.is_empty(),
            problems: facts
                .require_limits()
                .err()
                .map(|e| vec![e.to_string()])
                .unwrap_or_default(),
            runtimes: facts.runtimes.clone(),
            timing: Some(timing_note(
                &pooled.options.endpoint,
                facts,
                pooled.connected().and_then(|e| e.cgroups.as_ref()),
            )),
            profiles,
        },
        Err(err) => EngineReport {
            name,
            endpoint,
            capacity: None,
            engine: "unreachable".into(),
            engine_ok: false,
            problems: vec![err.to_string()],
            runtimes: Vec::new(),
            timing: None,
            profiles,
        },
    }
}

/// What `doctor` says of an engine's clock: whether a program's CPU time and
/// CPU waits are measured there, and what it costs when not.
pub(crate) fn timing_note(
    endpoint: &Endpoint,
    facts: &EngineFacts,
    cgroups: Option<&progscore_container::Cgroups>,
) -> String {
    match cgroups {
        Some(_) => {
            let disk = if progscore_container::delay_accounting_on() {
                "block-I/O stalls measured too (kernel.task_delayacct on) and given back likewise"
            } else {
                "block-I/O stalls NOT measured (kernel.task_delayacct off: `sysctl -w \
                 kernel.task_delayacct=1` turns it on): a timeout of a program that used little \
                 CPU beside others is confirmed alone"
            };
            format!(
                "CPU time, CPU waits and peak memory measured: a wall-clock timeout under load is \
                 given back the time the program waited for a CPU, and proven or confirmed alone; \
                 {disk}; a program whose processes or threads exited during its window has their \
                 waits unknown, so its wall-clock timeout is proven only by the CPU it used, else \
                 undetermined (`unconfirmed_timeout`), never `false`"
            )
        }
        None => {
            let why = match endpoint {
                Endpoint::Unix(_) => match facts.cgroup_driver.as_deref() {
                    Some("cgroupfs") => "this process does not see the engine's cgroup \
                        hierarchies (another cgroup namespace?)"
                        .to_string(),
                    driver => format!(
                        "the engine uses the {} cgroup driver; progscore reads cgroupfs ones",
                        driver.unwrap_or("unknown")
                    ),
                },
                _ => "the engine is not on this host".into(),
            };
            format!(
                "CPU time and CPU waits NOT measured ({why}): a wall-clock timeout there is \
                 never proven, whatever else runs, so it is undetermined (`unconfirmed_timeout`), \
                 never `false`; limits.cpu_time needs the cgroups too. Prove timeouts on an \
                 engine beside progscore with the cgroupfs driver"
            )
        }
    }
}
