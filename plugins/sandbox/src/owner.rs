//! Who owns a sandbox's leftovers, and proof that the owner is gone.
//!
//! Every client registers an [`Owner`] under a private root folder: a lock
//! file it holds locked (`flock`) for as long as it lives, and a folder for
//! its workspaces. Containers and other things a backend creates carry the
//! owner's name. The kernel releases the lock when the process dies, however
//! it dies (SIGKILL included), so a lock that can be taken proves its owner
//! gone: that holds across PID namespaces and containers sharing the root,
//! where a pid proves nothing. An owner whose lock file is not in this root
//! (another machine, another root) is never judged dead, so its things are
//! never touched.
//!
//! Layout under the root: `<name>.lock` (created under a temporary name,
//! locked, then renamed, so a lock file is never seen unlocked while its
//! owner lives) and `<name>/` (created after the lock, removed before it).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use thiserror::Error;

/// Files of an owner that crashed between creating its lock file and naming
/// it are swept only when this old (a live owner names it at once).
const STALE_PARTIAL: Duration = Duration::from_secs(60);

const LOCK_SUFFIX: &str = ".lock";
const PARTIAL_SUFFIX: &str = ".lock.partial";

/// One live owner: its name, its private folder, and the lock that proves it alive.
#[derive(Debug)]
pub struct Owner {
    name: String,
    dir: PathBuf,
    lock_path: PathBuf,
    _lock: File,
    /// Set when things of this owner could not be removed (a container on an
    /// engine that went away): its files then stay for the next sweep.
    keep_for_sweep: std::sync::atomic::AtomicBool,
    /// Set for good when a call's cleanup was abandoned before it ended (its
    /// bound overran, then the client's runtime stopped): what it had not
    /// removed yet is findable only through this owner's record.
    cleanup_abandoned: std::sync::atomic::AtomicBool,
}

/// A call of an [`Owner`] whose cleanup has not ended yet. Ended with
/// [`CleanupPending::done`]; dropped without it (the call's task dropped
/// mid-cleanup), it keeps the owner's record for the next sweep.
#[derive(Debug)]
#[must_use = "a pending cleanup must be marked done when the call has cleaned up"]
pub struct CleanupPending<'a> {
    owner: &'a Owner,
    done: bool,
}

impl CleanupPending<'_> {
    /// The call has removed everything it created (or recorded what it
    /// could not remove with [`Owner::keep_for_sweep`]).
    pub fn done(mut self) {
        self.done = true;
    }
}

impl Drop for CleanupPending<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.owner
                .cleanup_abandoned
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// An owner that is provably gone, held locked while its leftovers are removed.
#[derive(Debug)]
pub struct DeadOwner {
    name: String,
    dir: PathBuf,
    lock_path: PathBuf,
    lock: File,
}

/// Why the owner root cannot be used.
#[derive(Debug, Error)]
pub enum OwnerError {
    /// The root exists but others could read or change it.
    #[error(
        "{path} {problem}; sandbox workspaces must be private to this user: remove it, or make it \
         a folder of yours with mode 0700"
    )]
    NotPrivate {
        /// The root.
        path: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A filesystem operation failed.
    #[error("{what} {path}: {cause}")]
    Io {
        what: &'static str,
        path: String,
        /// Why.
        cause: io::Error,
    },
}

impl OwnerError {
    fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> OwnerError + 'a {
        move |source| OwnerError::Io {
            what,
            path: path.display().to_string(),
            cause: source,
        }
    }
}

/// The default root: private to this user, in the system's temporary folder.
pub fn default_owner_root() -> PathBuf {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("progscore-{uid}"))
}

/// Creates `root` (mode 0700) if missing, and refuses one that is not a
/// plain folder owned by this user and closed to everyone else.
pub fn ensure_private_root(root: &Path) -> Result<(), OwnerError> {
    match fs::DirBuilder::new().mode(0o700).create(root) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(OwnerError::io("cannot create", root)(e)),
    }
    let meta = fs::symlink_metadata(root).map_err(OwnerError::io("cannot inspect", root))?;
    let not_private = |problem: String| OwnerError::NotPrivate {
        path: root.display().to_string(),
        problem,
    };
    if !meta.file_type().is_dir() {
        return Err(not_private("is not a folder (a symlink or a file)".into()));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        return Err(not_private(format!(
            "belongs to uid {} (this process runs as uid {uid})",
            meta.uid()
        )));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(not_private(format!("has mode {mode:04o}")));
    }
    Ok(())
}

impl Owner {
    /// Registers a new owner of `kind` (`docker`, `wasi`...) under `root`,
    /// which is created private or checked to be. Its name is
    /// `progscore-<kind>-<pid>-<random hex>`.
    pub fn register(root: &Path, kind: &str) -> Result<Owner, OwnerError> {
        ensure_private_root(root)?;
        let name = format!("progscore-{kind}-{}-{}", std::process::id(), random_hex());
        let partial = root.join(format!("{name}{PARTIAL_SUFFIX}"));
        let lock = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)
            .map_err(OwnerError::io("cannot create", &partial))?;
        lock.try_lock()
            .map_err(|e| OwnerError::io("cannot lock", &partial)(io::Error::other(e)))?;
        let lock_path = root.join(format!("{name}{LOCK_SUFFIX}"));
        fs::rename(&partial, &lock_path).map_err(OwnerError::io("cannot name", &lock_path))?;
        let dir = root.join(&name);
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(OwnerError::io("cannot create", &dir))?;
        Ok(Owner {
            name,
            dir,
            lock_path,
            _lock: lock,
            keep_for_sweep: std::sync::atomic::AtomicBool::new(false),
            cleanup_abandoned: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The owner's name, as labels carry it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The owner's private folder, for its workspaces.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The owner's lock file: whoever records this owner elsewhere (a row
    /// in a store) can later ask [`lock_proves_owner_gone`] of it.
    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }

    /// Something of this owner could not be removed: when it is dropped, its
    /// lock is released but its files stay, so that the next client's sweep
    /// (which judges it dead by them) removes what it left.
    pub fn keep_for_sweep(&self) {
        self.keep_for_sweep
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// What [`Self::keep_for_sweep`] was for has been removed after all:
    /// the owner's files go when it is dropped again.
    pub fn keep_for_sweep_no_more(&self) {
        self.keep_for_sweep
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Marks the start of a call that creates things of this owner; the
    /// owner's record outlives the client unless the call's cleanup ends.
    pub fn cleanup_pending(&self) -> CleanupPending<'_> {
        CleanupPending {
            owner: self,
            done: false,
        }
    }

    /// Owners of `kind` under `root` that are provably gone, each held
    /// locked until it is [`DeadOwner::forget`]-ed or dropped. Files of
    /// owners that crashed while registering are removed on the way.
    pub fn dead_owners(root: &Path, kind: &str) -> Vec<DeadOwner> {
        let prefix = format!("progscore-{kind}-");
        let Ok(entries) = fs::read_dir(root) else {
            return Vec::new();
        };
        let mut dead = Vec::new();
        for entry in entries.flatten() {
            let file_name = entry.file_name();
            let Some(file_name) = file_name.to_str() else {
                continue;
            };
            if !file_name.starts_with(&prefix) {
                continue;
            }
            let path = entry.path();
            if file_name.ends_with(PARTIAL_SUFFIX) {
                remove_stale_partial(&path);
                continue;
            }
            let Some(name) = file_name.strip_suffix(LOCK_SUFFIX) else {
                continue;
            };
            let Ok(lock) = OpenOptions::new().write(true).open(&path) else {
                continue;
            };
            // Taken only if no process holds it: its owner is gone.
            if lock.try_lock().is_err() {
                continue;
            }
            dead.push(DeadOwner {
                name: name.to_string(),
                dir: root.join(name),
                lock_path: path,
                lock,
            });
        }
        dead
    }
}

#[cfg(test)]
impl Owner {
    /// What a SIGKILL does: the lock is released, every file stays.
    fn die_without_cleanup(self) {
        let owner = std::mem::ManuallyDrop::new(self);
        owner._lock.unlock().unwrap();
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let keep = self
            .keep_for_sweep
            .load(std::sync::atomic::Ordering::SeqCst)
            || self
                .cleanup_abandoned
                .load(std::sync::atomic::Ordering::SeqCst);
        if keep {
            return;
        }
        // Everything in the folder belongs to calls that are over by now;
        // failing to remove it only leaves work for the next sweep.
        if let Err(e) = fs::remove_dir_all(&self.dir)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!("cannot remove {}: {e}", self.dir.display());
        }
        let _ = fs::remove_file(&self.lock_path);
    }
}

impl DeadOwner {
    /// The dead owner's name, as its labels carry it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Removes the owner's folder (its workspaces) and then its lock file:
    /// call once its other leftovers (containers...) are gone.
    pub fn forget(self) -> Result<(), OwnerError> {
        match fs::remove_dir_all(&self.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(OwnerError::Io {
                    what: "cannot remove a dead owner's workspaces",
                    path: self.dir.display().to_string(),
                    cause: source,
                });
            }
        }
        let removed = fs::remove_file(&self.lock_path);
        drop(self.lock);
        match removed {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(OwnerError::Io {
                what: "cannot remove a dead owner's lock",
                path: self.lock_path.display().to_string(),
                cause: source,
            }),
        }
    }
}

/// Whether the owner whose lock file is `lock_path` is provably gone: the
/// file exists and no process holds its lock (the kernel released it,
/// however its owner died). A missing file proves nothing (another machine,
/// another root, or an owner that ended cleanly and removed it), and
/// neither does a lock held by anyone. The lock is let go at once.
pub fn lock_proves_owner_gone(lock_path: &Path) -> bool {
    OpenOptions::new()
        .write(true)
        .open(lock_path)
        .is_ok_and(|lock| lock.try_lock().is_ok())
}

fn remove_stale_partial(path: &Path) {
    let old = fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|modified| SystemTime::now().duration_since(modified).ok())
        .is_some_and(|age| age > STALE_PARTIAL);
    if !old {
        return;
    }
    if let Ok(file) = OpenOptions::new().write(true).open(path)
        && file.try_lock().is_ok()
    {
        let _ = fs::remove_file(path);
    }
}

/// 64 random bits as hex, from the standard library's randomly seeded hasher.
pub fn random_hex() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    format!("{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_owner_is_never_dead_and_a_dropped_one_leaves_nothing() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().join("owners");
        let owner = Owner::register(&root, "docker").unwrap();
        assert!(owner.name().starts_with("progscore-docker-"));
        assert!(owner.dir().is_dir());
        assert!(Owner::dead_owners(&root, "docker").is_empty());
        drop(owner);
        assert_eq!(fs::read_dir(&root).unwrap().count(), 0);
    }

    #[test]
    fn an_owner_whose_lock_is_free_is_dead_and_forgotten() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().join("owners");
        let owner = Owner::register(&root, "wasi").unwrap();
        let name = owner.name().to_string();
        fs::write(owner.dir().join("leftover"), b"program").unwrap();
        // A SIGKILLed process: its lock is released, its files stay.
        let dir = owner.dir().to_path_buf();
        owner.die_without_cleanup();
        assert!(
            Owner::dead_owners(&root, "docker").is_empty(),
            "other kinds are left alone"
        );
        let dead = Owner::dead_owners(&root, "wasi");
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].name(), name);
        // While one sweeper holds it, another does not see it dead.
        assert!(Owner::dead_owners(&root, "wasi").is_empty());
        for owner in dead {
            owner.forget().unwrap();
        }
        assert!(!dir.exists());
        assert_eq!(fs::read_dir(&root).unwrap().count(), 0);
    }

    #[test]
    fn a_lock_proves_its_owner_gone_only_once_released() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().join("owners");
        let owner = Owner::register(&root, "serve").unwrap();
        let lock = owner.lock_path().to_path_buf();
        assert!(!lock_proves_owner_gone(&lock), "alive");
        owner.die_without_cleanup();
        assert!(lock_proves_owner_gone(&lock), "killed: its lock is free");
        assert!(!lock_proves_owner_gone(&root.join("elsewhere.lock")));
    }

    #[test]
    fn an_owner_that_left_something_is_swept_after_it_ends() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().join("owners");
        let owner = Owner::register(&root, "docker").unwrap();
        let name = owner.name().to_string();
        owner.keep_for_sweep();
        drop(owner);
        let dead = Owner::dead_owners(&root, "docker");
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].name(), name);
    }

    #[test]
    fn a_call_whose_cleanup_was_abandoned_keeps_the_record_for_the_sweep() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().join("owners");
        let owner = Owner::register(&root, "docker").unwrap();
        let name = owner.name().to_string();
        owner.cleanup_pending().done();
        let abandoned = owner.cleanup_pending();
        // What a runtime's shutdown does to a task still cleaning up.
        drop(abandoned);
        // Even once the leftovers it knew of are gone.
        owner.keep_for_sweep_no_more();
        drop(owner);
        let dead = Owner::dead_owners(&root, "docker");
        assert_eq!(dead.len(), 1, "the record stays for the sweep");
        assert_eq!(dead[0].name(), name);
    }

    #[test]
    fn calls_that_cleaned_up_leave_nothing() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().join("owners");
        let owner = Owner::register(&root, "docker").unwrap();
        for _ in 0..3 {
            owner.cleanup_pending().done();
        }
        drop(owner);
        assert_eq!(fs::read_dir(&root).unwrap().count(), 0);
    }

    #[test]
    fn a_root_that_others_can_reach_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("open");
        fs::create_dir(&root).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o777)).unwrap();
        let err = Owner::register(&root, "docker").unwrap_err();
        assert!(err.to_string().contains("mode 0777"), "{err}");
        fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).unwrap();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&root, Some(1000), None).unwrap();
            let err = Owner::register(&root, "docker").unwrap_err();
            assert!(err.to_string().contains("belongs to uid 1000"), "{err}");
        }
        let link = base.path().join("link");
        let target = base.path().join("target");
        fs::create_dir(&target).unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = Owner::register(&link, "docker").unwrap_err();
        assert!(err.to_string().contains("not a folder"), "{err}");
    }
}
