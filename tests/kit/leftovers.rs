//! What a progscore process's sandbox clients left behind: Docker
//! containers with its owner label, OCI runtime state, cgroups of either
//! backend, and processes still in such a cgroup or started with such a
//! state root.
//!
//! Things carry their owner's tag, `progscore-<kind>-<pid>-<hex>`. A pid
//! alone does not name a process over time: tests that SIGKILL progscore on
//! purpose leave things for the next start to sweep, and a later process
//! may get the same pid. So a look is taken before a process starts
//! ([`OwnersPresent::now`]), and what belonged to owners already present
//! then is not counted as the new process's.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The owner kinds whose things are looked for.
const KINDS: [&str; 2] = ["progscore-docker-", "progscore-oci-"];

/// The owner tags that had things somewhere at one moment.
#[derive(Clone, Debug, Default)]
pub struct OwnersPresent(HashSet<String>);

impl OwnersPresent {
    /// Every owner tag with a thing anywhere now.
    pub fn now() -> OwnersPresent {
        OwnersPresent(
            owned_things()
                .iter()
                .flat_map(|(text, _)| owner_tags(text))
                .collect(),
        )
    }

    /// The process `pid`, started after this look.
    pub fn then_started(self, pid: u32) -> Started {
        Started { pid, before: self }
    }
}

/// A progscore process, and which owners had things before it started.
#[derive(Clone, Debug)]
pub struct Started {
    pub pid: u32,
    before: OwnersPresent,
}

impl Started {
    /// What this process's clients left: things with an owner tag of its
    /// pid that was not present before it started.
    pub fn leftovers(&self) -> Vec<String> {
        let kinds = KINDS.map(|kind| format!("{kind}{}-", self.pid));
        owned_things()
            .into_iter()
            .filter(|(text, _)| {
                owner_tags(text).any(|tag| {
                    kinds.iter().any(|kind| tag.starts_with(kind.as_str()))
                        && !self.before.0.contains(&tag)
                })
            })
            .map(|(_, description)| description)
            .collect()
    }

    /// [`Started::leftovers`], given up to `grace` to be gone (processes
    /// a kill reached still need a moment to exit).
    pub fn leftovers_after(&self, grace: Duration) -> Vec<String> {
        let deadline = std::time::Instant::now() + grace;
        loop {
            let left = self.leftovers();
            if left.is_empty() || std::time::Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The owner tags in `text`: each `progscore-<kind>-<digits>-<hex>`.
fn owner_tags(text: &str) -> impl Iterator<Item = String> + '_ {
    KINDS.iter().flat_map(move |kind| {
        text.match_indices(kind).filter_map(move |(start, _)| {
            let rest = &text[start + kind.len()..];
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            let after = rest[digits..].strip_prefix('-')?;
            let hex = after.bytes().take_while(u8::is_ascii_hexdigit).count();
            (digits > 0 && hex > 0)
                .then(|| text[start..start + kind.len() + digits + 1 + hex].to_string())
        })
    })
}

/// Every thing that may carry an owner tag: (text holding the tag, how it
/// is described to a reader).
fn owned_things() -> Vec<(String, String)> {
    let mut things = Vec::new();
    let output = std::process::Command::new("docker")
        .args([
            "ps",
            "-a",
            "--filter",
            "label=progscore.owner",
            "--format",
            "{{.Names}} {{.Label \"progscore.owner\"}}",
        ])
        .output()
        .expect("docker ps");
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        things.push((line.to_string(), format!("container {line}")));
    }
    let mut places = listed(Path::new("/run/progscore-oci"));
    for hierarchy in listed(Path::new("/sys/fs/cgroup")) {
        places.extend(listed(&hierarchy.join("progscore")));
    }
    for place in places {
        let text = place.display().to_string();
        things.push((text.clone(), text));
    }
    for process in listed(Path::new("/proc")) {
        let read = |file: &str| std::fs::read(process.join(file)).unwrap_or_default();
        // A zombie has ended; runc's half-started init, killed during its
        // start, is left for the host's init to reap.
        let status = String::from_utf8_lossy(&read("status")).to_string();
        if status.lines().any(|l| l.starts_with("State:\tZ")) {
            continue;
        }
        let cmdline = String::from_utf8_lossy(&read("cmdline")).replace('\0', " ");
        let cgroup = String::from_utf8_lossy(&read("cgroup")).to_string();
        things.push((
            format!("{cmdline}\n{cgroup}"),
            format!("process {}: {cmdline}", process.display()),
        ));
    }
    things
}

fn listed(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::owner_tags;

    #[test]
    fn tags_are_found_whole_and_only_when_well_formed() {
        let tags: Vec<String> = owner_tags(
            "/sys/fs/cgroup/cpu/progscore/progscore-oci-2346-39ba04 x progscore-docker-7-ff0 \
             progscore-oci-12- progscore-docker--ab",
        )
        .collect();
        assert_eq!(
            tags,
            ["progscore-docker-7-ff0", "progscore-oci-2346-39ba04"]
        );
    }
}
