//! The object a traced call's path reached, as the kernel resolves it: a
//! relative path against the task's working folder or a folder
//! descriptor, `.` and `..`, symlinks, and the magic links of `/proc`
//! (`/proc/self/root`, `/proc/<pid>/root`, `/proc/self/cwd`,
//! `/proc/self/fd/N`, `/proc/thread-self/...`, `/dev/fd/N`, `/dev/stdin`).
//! What a tracer cannot know of the task (a descriptor it was not told
//! of, another process's working folder, a symlink it cannot read) leaves
//! the path unresolved: the event then says so, and no path filter is
//! proven absent over it.

/// The longest chain of symlinks followed, as Linux has it (`ELOOP` after).
const MAX_SYMLINKS: usize = 40;

/// What a tracer can tell of the task that made a call. Every answer is an
/// absolute path in the task's own view of the filesystem.
pub(crate) trait TaskView {
    /// The task's working folder.
    fn cwd(&self) -> Option<String>;
    /// The object descriptor `fd` of the task names (`None` when unknown,
    /// or not a path: a pipe, a socket, a memfd, a deleted file).
    fn fd_path(&self, fd: i64) -> Option<String>;
    /// The task's executable.
    fn exe(&self) -> Option<String>;
    /// Whether `path` (absolute, its folders resolved already) is a
    /// symlink, and where to: `Ok(None)` for anything else (a missing name
    /// included), `Err(())` when the tracer cannot tell.
    fn read_link(&self, path: &str) -> Result<Option<String>, ()>;
}

/// A path as the call reached it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolvedPath {
    /// The object reached (absolute), or the spelled path when unresolved.
    pub path: String,
    /// The path as the program spelled it.
    pub spelled: String,
    /// Whether `path` is the object the call reached.
    pub resolved: bool,
    /// The other absolute names the walk reached the object through (the
    /// spelled path made absolute, each symlink's): a filter naming any of
    /// them names this object.
    pub via: Vec<String>,
    /// Whether the walk went through `/proc/<pid>` or `/dev/fd` (magic
    /// links, or names whose object depends on who looks): a tracer that
    /// repeats the call must not look them up in its own view.
    pub through_proc: bool,
}

impl ResolvedPath {
    /// The spelled path, when it differs from the object's.
    pub fn spelled_if_different(&self) -> Option<String> {
        (self.spelled != self.path).then(|| self.spelled.clone())
    }

    fn unresolved(spelled: &str) -> ResolvedPath {
        ResolvedPath {
            path: spelled.to_string(),
            spelled: spelled.to_string(),
            resolved: false,
            via: Vec::new(),
            through_proc: false,
        }
    }
}

/// `AT_FDCWD`: a path relative to the working folder.
pub(crate) const AT_FDCWD: i64 = -100;

/// Resolves `spelled`, relative to descriptor `dirfd` (or the working
/// folder, for [`AT_FDCWD`]), through `task`. `follow_last`: whether a
/// symlink in the last component is followed (not for `O_NOFOLLOW`).
/// An empty path names nothing (the call fails): it stays empty, resolved.
pub(crate) fn resolve_path(
    task: &dyn TaskView,
    dirfd: i64,
    spelled: &str,
    follow_last: bool,
) -> ResolvedPath {
    if spelled.is_empty() {
        return ResolvedPath {
            path: String::new(),
            spelled: String::new(),
            resolved: true,
            via: Vec::new(),
            through_proc: false,
        };
    }
    let base = if spelled.starts_with('/') {
        Some("/".to_string())
    } else if dirfd == AT_FDCWD {
        task.cwd()
    } else if dirfd >= 0 {
        task.fd_path(dirfd)
    } else {
        None
    };
    let Some(base) = base.filter(|base| names_a_path(base)) else {
        return ResolvedPath::unresolved(spelled);
    };
    let mut via = Vec::new();
    let mut through_proc = false;
    match walk(
        task,
        &base,
        spelled,
        follow_last,
        &mut via,
        &mut through_proc,
    ) {
        Some(path) => {
            via.retain(|name| *name != path);
            via.dedup();
            ResolvedPath {
                path,
                spelled: spelled.to_string(),
                resolved: true,
                via,
                through_proc,
            }
        }
        None => ResolvedPath::unresolved(spelled),
    }
}

/// The object a descriptor names, for `execveat(fd, "", AT_EMPTY_PATH)`.
pub(crate) fn resolve_fd(task: &dyn TaskView, fd: i64) -> ResolvedPath {
    let spelled = format!("/proc/self/fd/{fd}");
    match task.fd_path(fd).filter(|path| names_a_path(path)) {
        Some(path) => ResolvedPath {
            path,
            spelled,
            resolved: true,
            via: Vec::new(),
            through_proc: true,
        },
        None => ResolvedPath::unresolved(&spelled),
    }
}

/// Whether a descriptor's link names a path (not `pipe:[..]`, a socket,
/// an anonymous inode, a memfd or a deleted file, which no path reaches).
pub(crate) fn names_a_path(link: &str) -> bool {
    link.starts_with('/') && !link.ends_with(" (deleted)") && !link.starts_with("/memfd:")
}

/// Walks `spelled` from `base`, name by name; `None` when some step cannot
/// be known.
fn walk(
    task: &dyn TaskView,
    base: &str,
    spelled: &str,
    follow_last: bool,
    via: &mut Vec<String>,
    through_proc: &mut bool,
) -> Option<String> {
    // The names still to walk, last first (so that a symlink's target is
    // pushed in front of what follows it).
    let mut pending: Vec<String> = names(spelled).rev().collect();
    let mut at: Vec<String> = names(base).collect();
    let mut links = 0;
    // The whole name at this point of the walk, when it holds no `..`
    // (which a symlink before it would send elsewhere).
    let alias = |at: &[String], pending: &[String]| {
        let rest = pending.iter().rev().filter(|name| name.as_str() != ".");
        let names: Vec<&String> = at.iter().chain(rest).collect();
        (!names.iter().any(|name| name.as_str() == "..")).then(|| {
            format!(
                "/{}",
                names
                    .iter()
                    .map(|name| name.as_str())
                    .collect::<Vec<_>>()
                    .join("/")
            )
        })
    };
    via.extend(alias(&at, &pending));
    while let Some(name) = pending.pop() {
        let last = pending.is_empty();
        match name.as_str() {
            "." => continue,
            ".." => {
                at.pop();
                continue;
            }
            _ => at.push(name),
        }
        if !follow_last && last {
            break;
        }
        let magic = magic(task, &at);
        *through_proc |= !matches!(magic, Magic::None);
        match magic {
            Magic::None => {}
            Magic::Unknown => return None,
            Magic::Replace(path) => {
                via.extend(alias(&at, &pending));
                at = names(&path).collect();
                via.extend(alias(&at, &pending));
                continue;
            }
            Magic::Keep => continue,
        }
        let path = join(&at);
        if let Some(target) = task.read_link(&path).ok()? {
            links += 1;
            if links > MAX_SYMLINKS {
                return None;
            }
            via.extend(alias(&at, &pending));
            at.pop();
            if target.starts_with('/') {
                at.clear();
            }
            pending.extend(names(&target).rev());
            via.extend(alias(&at, &pending));
        }
    }
    Some(join(&at))
}

/// What a name under `/proc` or `/dev` is, as the task sees it.
enum Magic {
    /// An ordinary name: ask whether it is a symlink.
    None,
    /// A name whose target the tracer cannot know.
    Unknown,
    /// A magic link: its target.
    Replace(String),
    /// A name under `/proc/<pid>` that is no link (a file, a folder).
    Keep,
}

fn magic(task: &dyn TaskView, at: &[String]) -> Magic {
    let at: Vec<&str> = at.iter().map(String::as_str).collect();
    match at.as_slice() {
        ["dev", "fd"] => Magic::Replace("/proc/self/fd".into()),
        ["dev", "stdin"] => Magic::Replace("/proc/self/fd/0".into()),
        ["dev", "stdout"] => Magic::Replace("/proc/self/fd/1".into()),
        ["dev", "stderr"] => Magic::Replace("/proc/self/fd/2".into()),
        // `self` and `thread-self` are symlinks to the task's own entries,
        // kept by name (sensitive patterns such as `/proc/*/environ` name
        // them so).
        ["proc", process] | ["proc", process, "task"] if is_process(process) => Magic::Keep,
        ["proc", process, rest @ ..] if is_process(process) => {
            // A thread's entries are its process's, as far as these links go
            // (threads share their folders and descriptors).
            let rest = match rest {
                ["task", thread, rest @ ..] if is_process(thread) => rest,
                rest => rest,
            };
            let own = matches!(*process, "self" | "thread-self");
            match rest {
                [] => Magic::Keep,
                // No process of a sandbox can change its root (chroot and
                // pivot_root need capabilities it does not have; a tracer
                // that sees one marks its paths unresolved), so every
                // process's root is the sandbox's.
                ["root"] => Magic::Replace("/".into()),
                ["cwd"] if own => task.cwd().map_or(Magic::Unknown, Magic::Replace),
                ["exe"] if own => task.exe().map_or(Magic::Unknown, Magic::Replace),
                ["fd", fd] if own => fd
                    .parse::<i64>()
                    .ok()
                    .and_then(|fd| task.fd_path(fd))
                    .filter(|path| names_a_path(path))
                    .map_or(Magic::Unknown, Magic::Replace),
                ["fd"] if own => Magic::Keep,
                ["cwd" | "exe" | "fd" | "map_files" | "ns"]
                | ["fd" | "map_files" | "ns", _]
                | ["cwd" | "exe", ..] => Magic::Unknown,
                // `fdinfo`, `environ`, `mem` and the rest are no links.
                _ => Magic::Keep,
            }
        }
        _ => Magic::None,
    }
}

/// `self`, `thread-self`, or a process or thread number.
fn is_process(name: &str) -> bool {
    name == "self"
        || name == "thread-self"
        || (!name.is_empty() && name.bytes().all(|byte| byte.is_ascii_digit()))
}

fn names(path: &str) -> impl DoubleEndedIterator<Item = String> + '_ {
    path.split('/')
        .filter(|name| !name.is_empty())
        .map(String::from)
}

fn join(names: &[String]) -> String {
    format!("/{}", names.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A task with a working folder, a few descriptors and symlinks.
    #[derive(Default)]
    struct Task {
        cwd: Option<String>,
        fds: HashMap<i64, String>,
        links: HashMap<String, String>,
        unknown_links: bool,
    }

    impl TaskView for Task {
        fn cwd(&self) -> Option<String> {
            self.cwd.clone()
        }
        fn fd_path(&self, fd: i64) -> Option<String> {
            self.fds.get(&fd).cloned()
        }
        fn exe(&self) -> Option<String> {
            Some("/usr/bin/python3".into())
        }
        fn read_link(&self, path: &str) -> Result<Option<String>, ()> {
            if self.unknown_links {
                return Err(());
            }
            Ok(self.links.get(path).cloned())
        }
    }

    fn task() -> Task {
        let mut task = Task {
            cwd: Some("/sandbox".into()),
            ..Task::default()
        };
        task.fds.insert(3, "/etc".into());
        task.fds.insert(4, "pipe:[123]".into());
        task.fds.insert(5, "/memfd:x (deleted)".into());
        task.links.insert("/tmp/e".into(), "/etc".into());
        task.links.insert("/tmp/s".into(), "../etc/shadow".into());
        task.links.insert("/tmp/sh".into(), "/bin/sh".into());
        task.links.insert("/bin".into(), "usr/bin".into());
        task.links.insert("/tmp/loop".into(), "/tmp/loop".into());
        task.links.insert("/tmp/r".into(), "/proc/self/root".into());
        task
    }

    fn object(task: &Task, dirfd: i64, spelled: &str) -> Option<String> {
        let resolved = resolve_path(task, dirfd, spelled, true);
        resolved.resolved.then_some(resolved.path)
    }

    #[test]
    fn every_alias_of_a_path_reaches_its_object() {
        let task = task();
        let shadow = Some("/etc/shadow".to_string());
        for spelled in [
            "/etc/shadow",
            "/proc/self/root/etc/shadow",
            "/proc/1/root/etc/shadow",
            "/proc/thread-self/root/etc/shadow",
            "/proc/self/task/7/root/etc/shadow",
            "/tmp/../etc/./shadow",
            "//etc//shadow",
            "/tmp/e/shadow",
            "/tmp/s",
            "/proc/self/fd/3/shadow",
            "/dev/fd/3/shadow",
            "/proc/self/cwd/../etc/shadow",
            "/tmp/r/etc/shadow",
            "../etc/shadow",
        ] {
            assert_eq!(object(&task, AT_FDCWD, spelled), shadow, "{spelled}");
        }
        assert_eq!(object(&task, 3, "shadow"), shadow);
        assert_eq!(object(&task, 3, "../etc/shadow"), shadow);
        assert_eq!(
            object(&task, AT_FDCWD, "/tmp/sh"),
            Some("/usr/bin/sh".into())
        );
        // The names the walk passed are kept: a filter on `/bin/sh` names it.
        let sh = resolve_path(&task, AT_FDCWD, "/tmp/sh", true);
        assert_eq!(sh.via, ["/tmp/sh", "/bin/sh"]);
        let root = resolve_path(&task, AT_FDCWD, "/proc/self/root/bin/sh", true);
        assert_eq!(root.path, "/usr/bin/sh");
        assert!(root.via.contains(&"/bin/sh".to_string()), "{root:?}");
        assert_eq!(
            object(&task, AT_FDCWD, "/bin/sh"),
            Some("/usr/bin/sh".into())
        );
        assert_eq!(
            object(&task, AT_FDCWD, "/proc/self/exe"),
            Some("/usr/bin/python3".into())
        );
        // Not magic: kept by name.
        assert_eq!(
            object(&task, AT_FDCWD, "/proc/self/environ"),
            Some("/proc/self/environ".into())
        );
        // The spelled path is kept beside the object.
        let resolved = resolve_path(&task, AT_FDCWD, "/tmp/e/shadow", true);
        assert_eq!(
            resolved.spelled_if_different().as_deref(),
            Some("/tmp/e/shadow")
        );
        // O_NOFOLLOW: the last symlink is the object.
        assert_eq!(
            resolve_path(&task, AT_FDCWD, "/tmp/s", false).path,
            "/tmp/s"
        );
    }

    #[test]
    fn what_the_tracer_cannot_know_is_unresolved() {
        let task = task();
        for spelled in [
            "/proc/self/fd/9/shadow",
            "/proc/self/fd/4",
            "/proc/self/fd/5",
            "/proc/12/fd/3/shadow",
            "/proc/12/cwd/x",
            "/tmp/loop",
        ] {
            let resolved = resolve_path(&task, AT_FDCWD, spelled, true);
            assert!(!resolved.resolved, "{spelled}: {resolved:?}");
            assert_eq!(resolved.path, spelled);
        }
        assert_eq!(object(&task, 9, "shadow"), None);
        assert_eq!(object(&task, 4, "shadow"), None);
        assert_eq!(object(&task, -5, "shadow"), None);
        let no_cwd = Task::default();
        assert_eq!(object(&no_cwd, AT_FDCWD, "x"), None);
        let blind = Task {
            unknown_links: true,
            ..task
        };
        assert_eq!(object(&blind, AT_FDCWD, "/etc/shadow"), None);
        assert!(!resolve_fd(&blind, 5).resolved);
        assert_eq!(resolve_fd(&blind, 3).path, "/etc");
        assert!(resolve_path(&blind, AT_FDCWD, "", true).resolved);
    }
}
