//! The hardened container specification for one invocation.

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig, ResourcesUlimits};
use progscore_sandbox::{RuntimeProfile, Stage};

use crate::delivery::Files;

/// The gVisor runtime's name as it is usually registered.
pub(crate) const GVISOR_RUNTIME: &str = "runsc";

/// Under gVisor, a cgroup pids limit small enough to matter kills the
/// sandbox's own kernel (the container exits 2 with no output, which looks
/// like the program exiting 2), while RLIMIT_NPROC is enforced inside the
/// sandbox per sandbox. So gVisor gets the profile's process limit as
/// RLIMIT_NPROC and a generous cgroup limit beside it. Under runc the
/// opposite holds: RLIMIT_NPROC counts every process of the uid on the host,
/// shared by parallel containers, so the pids cgroup is the limit there.
const GVISOR_PIDS_CGROUP: i64 = 4096;

/// What the container runs and with which limits.
pub(crate) struct ContainerSpec {
    /// The body sent to the engine.
    pub body: ContainerCreateBody,
    /// The argv that runs inside: entrypoint followed by cmd.
    pub argv: Vec<String>,
}

/// Where the container runs and who owns it.
pub(crate) struct Placement<'a> {
    /// The image reference to create from (the profile's pin).
    pub image: &'a str,
    /// The OCI runtime, resolved (the engine's default when the profile names none).
    pub runtime: &'a str,
    /// Where the program (and the build folder) come from.
    pub files: &'a Files<'a>,
    /// Labels, the owner's among them.
    pub labels: HashMap<String, String>,
    /// The invocation's own parent cgroup, when progscore measures it.
    pub cgroup_parent: Option<String>,
}

pub(crate) fn container_spec(
    profile: &RuntimeProfile,
    stage: Stage,
    placement: Placement<'_>,
    args: &[String],
    with_stdin: bool,
) -> ContainerSpec {
    let limits = profile.limits_of(stage);
    // The profile's command replaces the image's ENTRYPOINT and CMD entirely,
    // so what is recorded is what ran.
    let argv = profile.argv(stage, args);
    let entrypoint = vec![argv[0].clone()];
    let cmd: Vec<String> = argv[1..].to_vec();

    let gvisor = placement.runtime == GVISOR_RUNTIME;
    let memory = i64::try_from(limits.memory_bytes).unwrap_or(i64::MAX);
    let cpu_period: i64 = 100_000;
    let cpu_quota = ((limits.cpus * cpu_period as f64).round() as i64).max(1_000);
    let mut ulimits = vec![
        ResourcesUlimits {
            name: Some("core".into()),
            soft: Some(0),
            hard: Some(0),
        },
        ResourcesUlimits {
            name: Some("nofile".into()),
            soft: Some(256),
            hard: Some(256),
        },
    ];
    let pids_limit = if gvisor {
        ulimits.push(ResourcesUlimits {
            name: Some("nproc".into()),
            soft: Some(i64::from(limits.pids)),
            hard: Some(i64::from(limits.pids)),
        });
        GVISOR_PIDS_CGROUP.max(i64::from(limits.pids))
    } else {
        i64::from(limits.pids)
    };
    let tmpfs = HashMap::from([(
        "/tmp".to_string(),
        format!("rw,nosuid,nodev,size={},mode=1777", limits.tmp_bytes),
    )]);

    let mounts = placement.files.mounts(profile.build_writable(stage));
    let host_config = HostConfig {
        network_mode: Some("none".into()),
        log_config: Some(HostConfigLogConfig {
            typ: Some("none".into()),
            config: None,
        }),
        cap_drop: Some(vec!["ALL".into()]),
        security_opt: Some(vec!["no-new-privileges".into()]),
        readonly_rootfs: Some(true),
        tmpfs: Some(tmpfs),
        mounts: Some(mounts),
        memory: Some(memory),
        // Swap equal to memory: no swap, so the cap is a real cap.
        memory_swap: Some(memory),
        cpu_period: Some(cpu_period),
        cpu_quota: Some(cpu_quota),
        pids_limit: Some(pids_limit),
        ulimits: Some(ulimits),
        // Always explicit, so what ran is what the attempt's fingerprint says
        // even if the engine's default changes.
        runtime: Some(placement.runtime.to_string()),
        auto_remove: Some(false),
        ipc_mode: Some("private".into()),
        cgroup_parent: placement.cgroup_parent,
        ..Default::default()
    };

    let body = ContainerCreateBody {
        image: Some(placement.image.to_string()),
        entrypoint: Some(entrypoint),
        cmd: Some(cmd),
        user: Some(
            profile
                .user
                .clone()
                .unwrap_or_else(|| progscore_sandbox::profile::DEFAULT_DOCKER_USER.to_string()),
        ),
        working_dir: Some(placement.files.working_dir().into()),
        hostname: Some("sandbox".into()),
        network_disabled: Some(true),
        attach_stdin: Some(with_stdin),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        open_stdin: Some(with_stdin),
        // The container's stdin closes when we close ours: EOF after the bytes.
        stdin_once: Some(with_stdin),
        tty: Some(false),
        labels: Some(placement.labels),
        host_config: Some(host_config),
        ..Default::default()
    };
    ContainerSpec { body, argv }
}
