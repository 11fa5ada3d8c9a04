//! The OCI runtime specification (`config.json`) of one invocation: the
//! Docker backend's hardening, item by item, written out for runc or runsc.

use std::collections::HashSet;
use std::path::Path;

use oci_spec::OciSpecError;
use oci_spec::runtime::{
    LinuxBuilder, LinuxCapabilitiesBuilder, LinuxCpuBuilder, LinuxDeviceCgroupBuilder,
    LinuxNamespaceBuilder, LinuxNamespaceType, LinuxPidsBuilder, LinuxResourcesBuilder, Mount,
    MountBuilder, PosixRlimitBuilder, PosixRlimitType, ProcessBuilder, RootBuilder, Spec,
    SpecBuilder, UserBuilder,
};
use progscore_sandbox::{BUILD_PATH, RuntimeProfile, Stage};

use crate::apparmor;
use crate::runtime::RuntimeKind;
use crate::seccomp;

/// Under gVisor a small cgroup pids limit kills the sandbox's own kernel, so
/// the process limit is RLIMIT_NPROC (enforced inside the sandbox) and the
/// cgroup gets a generous one; under runc, RLIMIT_NPROC would count every
/// process of the uid on the host, so the pids cgroup is the limit. (The
/// Docker backend does the same.)
const GVISOR_PIDS_CGROUP: i64 = 4096;

/// The size of `/dev` and `/dev/shm`, as Docker gives them.
const DEV_SIZE: &str = "size=65536k";

/// What Docker masks (`HostConfig.MaskedPaths`: moby's defaults, with
/// `/sys/devices/virtual/powercap` since Docker 25): each is hidden behind
/// `/dev/null` or an empty read-only tmpfs.
pub(crate) const MASKED_PATHS: [&str; 11] = [
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// What Docker makes read-only (`HostConfig.ReadonlyPaths`).
pub(crate) const READONLY_PATHS: [&str; 5] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// Where the bundle mounts something directly in the image's tree: they
/// must exist there beforehand, or the runtime would create them inside the
/// shared, read-only cache (`/dev/pts`, `/dev/shm`, `/dev/mqueue` are in
/// the `/dev` tmpfs).
const TREE_MOUNT_POINTS: [&str; 4] = ["/proc", "/dev", "/sys", "/tmp"];

/// What an invocation's container runs and where.
pub(crate) struct Placement<'a> {
    /// The image's unpacked root (read-only, shared by every container).
    pub rootfs: &'a Path,
    /// The image's configured environment (`Env`).
    pub image_env: &'a [String],
    /// The program's file on the host (or its folder, when it brings
    /// files), bind-mounted read-only.
    pub program_on_host: &'a Path,
    /// Where it is mounted: the program's path, or its folder.
    pub program_target: &'a str,
    /// The build folder on the host, for profiles that compile.
    pub build_on_host: Option<&'a Path>,
    /// `linux.cgroupsPath`: the container's cgroup below its invocation's.
    pub cgroups_path: String,
    /// Which runtime reads the spec.
    pub runtime: RuntimeKind,
    /// The user's home from the image's `/etc/passwd`, as Docker sets `HOME`.
    pub home: String,
    /// The seccomp listener's socket, for a traced runc invocation: the
    /// traced calls are notified to it (see [`seccomp::profile`]).
    pub seccomp_listener: Option<&'a Path>,
}

/// The spec and the argv it runs.
pub(crate) struct Bundle {
    pub spec: Spec,
    pub argv: Vec<String>,
}

pub(crate) fn spec(
    profile: &RuntimeProfile,
    stage: Stage,
    placement: &Placement<'_>,
    args: &[String],
) -> Result<Bundle, OciSpecError> {
    let limits = profile.limits_of(stage);
    // The profile's command replaces the image's ENTRYPOINT and CMD entirely.
    let argv = profile.argv(stage, args);
    let (uid, gid) = profile.user_ids();
    let gvisor = placement.runtime == RuntimeKind::Runsc;

    let mut env: Vec<String> = placement.image_env.to_vec();
    for (name, value) in [("HOSTNAME", "sandbox"), ("HOME", placement.home.as_str())] {
        if !env.iter().any(|e| e.starts_with(&format!("{name}="))) {
            env.push(format!("{name}={value}"));
        }
    }
    let mut rlimits = vec![
        rlimit(PosixRlimitType::RlimitCore, 0)?,
        rlimit(PosixRlimitType::RlimitNofile, 256)?,
    ];
    let pids = if gvisor {
        rlimits.push(rlimit(
            PosixRlimitType::RlimitNproc,
            u64::from(limits.pids),
        )?);
        GVISOR_PIDS_CGROUP.max(i64::from(limits.pids))
    } else {
        i64::from(limits.pids)
    };
    let none = HashSet::new();
    let apparmor = apparmor::host();
    let mut process = ProcessBuilder::default();
    if *apparmor == apparmor::Host::Confined {
        process = process.apparmor_profile(apparmor::PROFILE_NAME);
    }
    let process = process
        .terminal(false)
        .user(UserBuilder::default().uid(uid).gid(gid).build()?)
        .args(argv.clone())
        .env(env)
        // With files, the program starts in its folder (relative paths
        // find them, as where it came from).
        .cwd(
            if placement.program_target == progscore_sandbox::SANDBOX_DIR {
                progscore_sandbox::SANDBOX_DIR
            } else {
                "/tmp"
            },
        )
        .capabilities(
            LinuxCapabilitiesBuilder::default()
                .bounding(none.clone())
                .effective(none.clone())
                .inheritable(none.clone())
                .permitted(none.clone())
                .ambient(none)
                .build()?,
        )
        .rlimits(rlimits)
        .no_new_privileges(true)
        .build()?;

    let cpu_period: u64 = 100_000;
    let cpu_quota = ((limits.cpus * cpu_period as f64).round() as i64).max(1_000);
    // The memory limit sits on the invocation's cgroup, above this one (see
    // progscore_container::cgroup): an OOM kill is counted where it stays
    // readable after the runtime removed this one.
    let resources = LinuxResourcesBuilder::default()
        .devices(vec![
            LinuxDeviceCgroupBuilder::default()
                .allow(false)
                .access("rwm")
                .build()?,
        ])
        .cpu(
            LinuxCpuBuilder::default()
                .quota(cpu_quota)
                .period(cpu_period)
                .build()?,
        )
        .pids(LinuxPidsBuilder::default().limit(pids).build()?)
        .build()?;
    let namespaces = [
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Network,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Uts,
        LinuxNamespaceType::Mount,
        LinuxNamespaceType::Cgroup,
    ]
    .into_iter()
    .map(|typ| LinuxNamespaceBuilder::default().typ(typ).build())
    .collect::<Result<Vec<_>, _>>()?;
    let linux = LinuxBuilder::default()
        .namespaces(namespaces)
        .resources(resources)
        .cgroups_path(placement.cgroups_path.clone())
        .seccomp(seccomp::profile(placement.seccomp_listener))
        .masked_paths(strings(&MASKED_PATHS))
        .readonly_paths(strings(&READONLY_PATHS))
        .build()?;

    let spec = SpecBuilder::default()
        .version("1.0.2-dev")
        .process(process)
        .root(
            RootBuilder::default()
                .path(placement.rootfs)
                .readonly(true)
                .build()?,
        )
        .hostname("sandbox")
        // Which AppArmor profile confines the container, or why none does.
        .annotations(std::collections::HashMap::from([(
            apparmor::ANNOTATION.to_string(),
            apparmor.annotation(),
        )]))
        .mounts(mounts(profile, stage, placement)?)
        .linux(linux)
        .build()?;
    Ok(Bundle { spec, argv })
}

fn mounts(
    profile: &RuntimeProfile,
    stage: Stage,
    placement: &Placement<'_>,
) -> Result<Vec<Mount>, OciSpecError> {
    let mount = |destination: &str, typ: &str, source: &str, options: &[&str]| {
        MountBuilder::default()
            .destination(destination)
            .typ(typ)
            .source(source)
            .options(strings(options))
            .build()
    };
    let tmp_size = format!("size={}", profile.limits_of(stage).tmp_bytes);
    let mut mounts = vec![
        mount("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"])?,
        mount(
            "/dev",
            "tmpfs",
            "tmpfs",
            &["nosuid", "strictatime", "mode=755", DEV_SIZE],
        )?,
        mount(
            "/dev/pts",
            "devpts",
            "devpts",
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
                "gid=5",
            ],
        )?,
        mount(
            "/dev/shm",
            "tmpfs",
            "shm",
            &["nosuid", "noexec", "nodev", "mode=1777", DEV_SIZE],
        )?,
        mount(
            "/dev/mqueue",
            "mqueue",
            "mqueue",
            &["nosuid", "noexec", "nodev"],
        )?,
        mount(
            "/sys",
            "sysfs",
            "sysfs",
            &["nosuid", "noexec", "nodev", "ro"],
        )?,
        mount(
            "/tmp",
            "tmpfs",
            "tmpfs",
            &["nosuid", "nodev", "mode=1777", &tmp_size],
        )?,
        MountBuilder::default()
            .destination(placement.program_target)
            .typ("bind")
            .source(placement.program_on_host)
            .options(strings(&["rbind", "ro", "nosuid", "nodev", "rprivate"]))
            .build()?,
    ];
    if let (Some(writable), Some(build)) = (profile.build_writable(stage), placement.build_on_host)
    {
        let access = if writable { "rw" } else { "ro" };
        mounts.push(
            MountBuilder::default()
                .destination(BUILD_PATH)
                .typ("bind")
                .source(build)
                .options(strings(&["rbind", access, "nosuid", "nodev", "rprivate"]))
                .build()?,
        );
    }
    Ok(mounts)
}

/// Every mount point the bundles of `profile` need in the image's tree:
/// created when the tree is built (and covered by its digest), so that no
/// container ever writes into the shared tree.
pub(crate) fn mount_points(profile: &RuntimeProfile) -> progscore_oci_image::MountPoints {
    let mut points = progscore_oci_image::MountPoints::new().file(profile.program_path());
    for dir in TREE_MOUNT_POINTS {
        points = points.dir(dir);
    }
    if profile.compile.is_some() {
        points = points.dir(BUILD_PATH);
    }
    points
}

fn rlimit(
    typ: PosixRlimitType,
    value: u64,
) -> Result<oci_spec::runtime::PosixRlimit, OciSpecError> {
    PosixRlimitBuilder::default()
        .typ(typ)
        .soft(value)
        .hard(value)
        .build()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The home directory of `uid` in the image's `/etc/passwd`, as Docker
/// sets `HOME`; `/` when the image does not list the user.
pub(crate) fn home_of(rootfs: &Path, profile: &RuntimeProfile) -> String {
    let (uid, _) = profile.user_ids();
    std::fs::read_to_string(rootfs.join("etc/passwd"))
        .ok()
        .and_then(|passwd| {
            passwd.lines().find_map(|line| {
                let fields: Vec<&str> = line.split(':').collect();
                (fields.get(2) == Some(&uid.to_string().as_str()))
                    .then(|| fields.get(5).map(|home| home.to_string()))
                    .flatten()
            })
        })
        .unwrap_or_else(|| "/".into())
}

/// The `config.json` this backend writes for one invocation of `profile`:
/// for tools and benchmarks that run the very same container themselves.
/// `image_env` is the image's `Env`; the program file is bind-mounted
/// read-only at `/sandbox/program`; `cgroups_path` is given to the runtime.
pub fn container_config(
    profile: &RuntimeProfile,
    rootfs: &Path,
    image_env: &[String],
    program_on_host: &Path,
    cgroups_path: &str,
    args: &[String],
) -> Result<String, OciSpecError> {
    let program_target = profile.program_path();
    let placement = Placement {
        rootfs,
        image_env,
        program_on_host,
        program_target: &program_target,
        cgroups_path: cgroups_path.to_string(),
        runtime: RuntimeKind::of(profile.runtime.as_deref().unwrap_or("runc")),
        home: home_of(rootfs, profile),
        seccomp_listener: None,
        build_on_host: None,
    };
    // A case of a profile that compiles nothing: the bench's plain runs.
    let bundle = spec(profile, Stage::Case, &placement, args)?;
    serde_json::to_string(&bundle.spec).map_err(|e| OciSpecError::Other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::LinuxSeccompAction;

    fn profile(runtime: &str) -> RuntimeProfile {
        let text = format!(
            "backend = \"oci\"\nimage = \"127.0.0.1:5000/p@sha256:{}\"\ncommand = [\"python3\", \"-I\"]\nruntime = \"{runtime}\"\n[limits]\nmemory = \"256MiB\"\ncpus = 0.5\npids = 64\ntmp = \"8MiB\"\n",
            "a".repeat(64)
        );
        let spec: progscore_sandbox::ProfileSpec = toml::from_str(&text).unwrap();
        RuntimeProfile::from_spec("p", &spec, Path::new(".")).unwrap()
    }

    fn bundle(runtime: RuntimeKind, name: &str) -> Bundle {
        let placement = Placement {
            rootfs: Path::new("/cache/rootfs"),
            image_env: &["PATH=/usr/bin".to_string(), "HOME=/image-home".to_string()],
            program_on_host: Path::new("/private/workspace/program"),
            program_target: "/sandbox/program",
            build_on_host: None,
            cgroups_path: "/progscore/owner/invocation/ctr".into(),
            runtime,
            home: "/nonexistent".into(),
            seccomp_listener: None,
        };
        spec(&profile(name), Stage::Case, &placement, &["3".to_string()]).unwrap()
    }

    #[test]
    fn a_compiling_profile_builds_writable_then_runs_read_only() {
        let text = format!(
            "backend = \"oci\"\nimage = \"127.0.0.1:5000/cc@sha256:{}\"\nsource = \"main.c\"\n\
             compile = [\"gcc\", \"-o\", \"/build/main\", \"/sandbox/main.c\"]\n\
             command = [\"/build/main\"]\n[compile_limits]\ntmp = \"64MiB\"\n",
            "a".repeat(64)
        );
        let spec_text: progscore_sandbox::ProfileSpec = toml::from_str(&text).unwrap();
        let profile = RuntimeProfile::from_spec("c", &spec_text, Path::new(".")).unwrap();
        let placement = Placement {
            rootfs: Path::new("/cache/rootfs"),
            image_env: &[],
            program_on_host: Path::new("/ws/program"),
            program_target: "/sandbox/main.c",
            build_on_host: Some(Path::new("/ws/build")),
            cgroups_path: "/progscore/owner/invocation/ctr".into(),
            runtime: RuntimeKind::Runc,
            home: "/".into(),
            seccomp_listener: None,
        };
        let mount = |bundle: &Bundle, destination: &str| {
            bundle
                .spec
                .mounts()
                .as_ref()
                .unwrap()
                .iter()
                .find(|m| m.destination() == Path::new(destination))
                .cloned()
                .unwrap_or_else(|| panic!("no mount at {destination}"))
        };
        let options = |mount: &Mount| mount.options().clone().unwrap_or_default();

        let compile = spec(&profile, Stage::Compile, &placement, &[]).unwrap();
        assert_eq!(
            compile.argv,
            ["gcc", "-o", "/build/main", "/sandbox/main.c"]
        );
        assert!(options(&mount(&compile, "/build")).contains(&"rw".to_string()));
        assert!(options(&mount(&compile, "/sandbox/main.c")).contains(&"ro".to_string()));
        assert!(options(&mount(&compile, "/tmp")).contains(&format!("size={}", 64 << 20)));

        let case = spec(&profile, Stage::Case, &placement, &["3".to_string()]).unwrap();
        assert_eq!(case.argv, ["/build/main", "3"]);
        assert!(options(&mount(&case, "/build")).contains(&"ro".to_string()));
        assert!(options(&mount(&case, "/tmp")).contains(&format!("size={}", 16 << 20)));
    }

    #[test]
    fn every_hardening_item_is_in_the_spec() {
        let Bundle { spec, argv } = bundle(RuntimeKind::Runc, "runc");
        assert_eq!(argv, ["python3", "-I", "/sandbox/program", "3"]);
        let process = spec.process().as_ref().unwrap();
        let user = process.user();
        assert_eq!((user.uid(), user.gid()), (65534, 65534));
        assert_eq!(process.no_new_privileges(), Some(true));
        let caps = process.capabilities().as_ref().unwrap();
        for set in [
            caps.bounding(),
            caps.effective(),
            caps.permitted(),
            caps.inheritable(),
            caps.ambient(),
        ] {
            assert!(set.as_ref().is_some_and(|s| s.is_empty()), "{caps:?}");
        }
        // The image's own HOME wins, as under Docker; HOSTNAME is added.
        let env = process.env().as_ref().unwrap();
        assert!(env.contains(&"HOME=/image-home".to_string()), "{env:?}");
        assert!(env.contains(&"HOSTNAME=sandbox".to_string()), "{env:?}");
        assert_eq!(spec.root().as_ref().unwrap().readonly(), Some(true));

        let linux = spec.linux().as_ref().unwrap();
        let namespaces: Vec<LinuxNamespaceType> = linux
            .namespaces()
            .as_ref()
            .unwrap()
            .iter()
            .map(|n| n.typ())
            .collect();
        for wanted in [
            LinuxNamespaceType::Pid,
            LinuxNamespaceType::Network,
            LinuxNamespaceType::Ipc,
            LinuxNamespaceType::Uts,
            LinuxNamespaceType::Mount,
        ] {
            assert!(namespaces.contains(&wanted), "{wanted:?} missing");
        }
        // No user namespace: uid 65534 is the host's nobody, not a mapped root.
        assert!(!namespaces.contains(&LinuxNamespaceType::User));
        let seccomp = linux.seccomp().as_ref().expect("a seccomp profile");
        assert_eq!(seccomp.default_action(), LinuxSeccompAction::ScmpActErrno);
        assert_eq!(seccomp.listener_path(), &None, "untraced: no listener");
        let resources = linux.resources().as_ref().unwrap();
        assert_eq!(resources.pids().as_ref().unwrap().limit(), 64);
        let cpu = resources.cpu().as_ref().unwrap();
        assert_eq!((cpu.quota(), cpu.period()), (Some(50_000), Some(100_000)));
        assert!(
            linux
                .masked_paths()
                .as_ref()
                .unwrap()
                .contains(&"/proc/kcore".to_string())
        );

        let mounts = spec.mounts().as_ref().unwrap();
        let program = mounts
            .iter()
            .find(|m| m.destination() == Path::new("/sandbox/program"))
            .unwrap();
        assert_eq!(
            program.source().as_deref(),
            Some(Path::new("/private/workspace/program"))
        );
        assert!(
            program
                .options()
                .as_ref()
                .unwrap()
                .contains(&"ro".to_string())
        );
        let tmp = mounts
            .iter()
            .find(|m| m.destination() == Path::new("/tmp"))
            .unwrap();
        assert!(
            tmp.options()
                .as_ref()
                .unwrap()
                .contains(&format!("size={}", 8 * 1024 * 1024)),
            "{tmp:?}"
        );
    }

    /// Docker's `HostConfig.MaskedPaths` and `ReadonlyPaths` (of a running
    /// container), and the AppArmor choice: the profile where the host has
    /// AppArmor, otherwise a bundle that says none is applied and why.
    #[test]
    fn dockers_masked_paths_and_the_apparmor_choice_are_in_the_spec() {
        let Bundle { spec, .. } = bundle(RuntimeKind::Runc, "runc");
        let linux = spec.linux().as_ref().unwrap();
        let masked = linux.masked_paths().as_ref().unwrap();
        for path in [
            "/proc/asound",
            "/proc/acpi",
            "/proc/kcore",
            "/proc/keys",
            "/proc/latency_stats",
            "/proc/timer_list",
            "/proc/timer_stats",
            "/proc/sched_debug",
            "/proc/scsi",
            "/sys/firmware",
            "/sys/devices/virtual/powercap",
        ] {
            assert!(masked.contains(&path.to_string()), "{path} is not masked");
        }
        let readonly = linux.readonly_paths().as_ref().unwrap();
        for path in [
            "/proc/bus",
            "/proc/fs",
            "/proc/irq",
            "/proc/sys",
            "/proc/sysrq-trigger",
        ] {
            assert!(readonly.contains(&path.to_string()), "{path} is writable");
        }
        let annotation = spec
            .annotations()
            .as_ref()
            .and_then(|a| a.get(apparmor::ANNOTATION))
            .expect("the bundle says which AppArmor profile applies");
        let profile = spec.process().as_ref().unwrap().apparmor_profile();
        match apparmor::host() {
            apparmor::Host::Confined => {
                assert_eq!(profile.as_deref(), Some(apparmor::PROFILE_NAME));
                assert_eq!(annotation, apparmor::PROFILE_NAME);
            }
            other => {
                println!("this host applies no AppArmor profile: {other:?}");
                assert_eq!(profile, &None);
                assert!(annotation.starts_with("none: "), "{annotation}");
            }
        }
    }

    #[test]
    fn under_gvisor_the_process_limit_is_rlimit_nproc() {
        let runc = bundle(RuntimeKind::Runc, "runc").spec;
        let runsc = bundle(RuntimeKind::Runsc, "runsc").spec;
        let nproc = |spec: &Spec| {
            spec.process()
                .as_ref()
                .unwrap()
                .rlimits()
                .as_ref()
                .unwrap()
                .iter()
                .find(|r| r.typ() == PosixRlimitType::RlimitNproc)
                .map(|r| r.hard())
        };
        let pids = |spec: &Spec| {
            spec.linux()
                .as_ref()
                .unwrap()
                .resources()
                .as_ref()
                .unwrap()
                .pids()
                .as_ref()
                .unwrap()
                .limit()
        };
        assert_eq!((nproc(&runc), pids(&runc)), (None, 64));
        assert_eq!(
            (nproc(&runsc), pids(&runsc)),
            (Some(64), GVISOR_PIDS_CGROUP)
        );
    }
}
