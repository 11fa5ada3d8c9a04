//! The AppArmor profile of the OCI backend's containers, as Docker applies
//! `docker-default` to its own: where the host's kernel has AppArmor
//! enabled, every container runs confined by [`PROFILE_NAME`] (loaded with
//! `apparmor_parser` if the kernel does not have it yet); where it has none,
//! the bundle says so (see [`Host::annotation`]) and nothing is applied.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The profile's name, as `/proc/<pid>/attr/current` shows it.
pub(crate) const PROFILE_NAME: &str = "progscore-oci-default";

/// The bundle annotation that says which profile confines the container,
/// or why none does.
pub(crate) const ANNOTATION: &str = "org.progscore.apparmor";

/// Where the kernel says whether AppArmor is enabled.
const ENABLED: &str = "/sys/module/apparmor/parameters/enabled";
/// The profiles the kernel has loaded, one `name (mode)` a line.
const LOADED: &str = "/sys/kernel/security/apparmor/profiles";

/// Docker's `docker-default` (moby's profiles/apparmor template), under this
/// backend's name and with no includes (a host may lack /etc/apparmor.d).
const PROFILE: &str = r#"@{PROC}=/proc/
profile progscore-oci-default flags=(attach_disconnected,mediate_deleted) {
  network,
  capability,
  file,
  umount,
  signal (receive) peer=unconfined,
  signal (send,receive) peer=progscore-oci-default,

  deny @{PROC}/* w,
  deny @{PROC}/{[^1-9],[^1-9][^0-9],[^1-9s][^0-9y][^0-9s],[^1-9][^0-9][^0-9][^0-9/]*}/** w,
  deny @{PROC}/sys/[^k]** w,
  deny @{PROC}/sys/kernel/{?,??,[^s][^h][^m]**} w,
  deny @{PROC}/sysrq-trigger rwklx,
  deny @{PROC}/kcore rwklx,

  deny mount,

  deny /sys/[^f]*/** wklx,
  deny /sys/f[^s]*/** wklx,
  deny /sys/fs/[^c]*/** wklx,
  deny /sys/fs/c[^g]*/** wklx,
  deny /sys/fs/cg[^r]*/** wklx,
  deny /sys/firmware/** rwklx,
  deny /sys/devices/virtual/powercap/** rwklx,
  deny /sys/kernel/security/** rwklx,

  ptrace (trace,read,tracedby,readby) peer=progscore-oci-default,
}
"#;

/// What this host offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Host {
    /// The profile is loaded: every container gets it.
    Confined,
    /// The kernel has no AppArmor (or it is disabled): nothing is applied,
    /// as Docker applies nothing there.
    Absent(String),
    /// AppArmor is enabled but the profile cannot be loaded: containers
    /// would run less confined than under Docker, so none is run.
    Unavailable(String),
}

impl Host {
    /// The bundle annotation's value: the profile, or why there is none.
    pub(crate) fn annotation(&self) -> String {
        match self {
            Host::Confined => PROFILE_NAME.to_string(),
            Host::Absent(why) | Host::Unavailable(why) => format!("none: {why}"),
        }
    }
}

/// This host's AppArmor, found (and the profile loaded) once per process.
pub(crate) fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| detect(Path::new(ENABLED), Path::new(LOADED)))
}

fn detect(enabled: &Path, loaded: &Path) -> Host {
    match std::fs::read_to_string(enabled) {
        Ok(text) if text.trim() == "Y" => {}
        Ok(text) => {
            return Host::Absent(format!(
                "AppArmor is disabled on this host ({} reads {:?})",
                enabled.display(),
                text.trim()
            ));
        }
        Err(_) => {
            return Host::Absent(format!(
                "this host's kernel has no AppArmor ({} does not exist)",
                enabled.display()
            ));
        }
    }
    if is_loaded(loaded) {
        return Host::Confined;
    }
    let Some(parser) = find_parser() else {
        return Host::Unavailable(format!(
            "AppArmor is enabled on this host, but the profile {PROFILE_NAME} is not loaded and \
             apparmor_parser is not installed to load it (install the apparmor package, as \
             Docker needs it too)"
        ));
    };
    match load(&parser) {
        Ok(()) if is_loaded(loaded) => Host::Confined,
        Ok(()) => Host::Unavailable(format!(
            "{} loaded {PROFILE_NAME}, but {} does not list it",
            parser.display(),
            loaded.display()
        )),
        Err(why) => Host::Unavailable(why),
    }
}

fn is_loaded(loaded: &Path) -> bool {
    std::fs::read_to_string(loaded).is_ok_and(|profiles| {
        profiles
            .lines()
            .any(|line| line.split(" (").next() == Some(PROFILE_NAME))
    })
}

fn find_parser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join("apparmor_parser"))
        .find(|candidate| candidate.is_file())
}

/// `apparmor_parser -Kr` with the profile on its standard input (`-K`: no
/// cache written on the host).
fn load(parser: &Path) -> Result<(), String> {
    parse(parser, &["-Kr"])
}

fn parse(parser: &Path, args: &[&str]) -> Result<(), String> {
    let mut child = Command::new(parser)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", parser.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(PROFILE.as_bytes())
            .map_err(|e| format!("cannot give {} the profile: {e}", parser.display()))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| format!("{} did not finish: {e}", parser.display()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} {} refused the profile {PROFILE_NAME} ({}): {}",
            parser.display(),
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_without_apparmor_applies_none_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("enabled");
        let host = detect(&missing, &dir.path().join("profiles"));
        assert!(matches!(host, Host::Absent(_)), "{host:?}");
        assert!(host.annotation().starts_with("none: "), "{host:?}");
        std::fs::write(&missing, "N\n").unwrap();
        let host = detect(&missing, &dir.path().join("profiles"));
        assert!(host.annotation().contains("disabled"), "{host:?}");
    }

    #[test]
    fn a_loaded_profile_confines() {
        let dir = tempfile::tempdir().unwrap();
        let enabled = dir.path().join("enabled");
        let loaded = dir.path().join("profiles");
        std::fs::write(&enabled, "Y\n").unwrap();
        std::fs::write(
            &loaded,
            format!("docker-default (enforce)\n{PROFILE_NAME} (enforce)\n"),
        )
        .unwrap();
        assert_eq!(detect(&enabled, &loaded), Host::Confined);
        assert_eq!(Host::Confined.annotation(), PROFILE_NAME);
    }

    /// The profile is valid AppArmor, checked by the real parser without
    /// loading it into the kernel (`-Q`), wherever the parser is installed.
    #[test]
    fn the_profile_parses() {
        let Some(parser) = find_parser() else {
            println!("skipped: apparmor_parser is not installed on this host");
            return;
        };
        parse(&parser, &["-Q", "-K"]).unwrap();
    }
}
