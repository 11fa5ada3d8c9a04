//! The cache is private to the user running progscore, and its lock wait
//! is bounded.

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use progscore_oci_image::{CacheOptions, ImageCache, ImageError, MountPoints};

use crate::common::{Layer, Media, push_image};

/// A tiny image with a set-id binary, a device node and a 1777 folder, as
/// real images have.
async fn small_image() -> String {
    let layer = Layer::new()
        .dir("bin/", 0o755)
        .file("bin/su", 0o4755, b"#!/bin/sh\n")
        .dir("tmp/", 0o1777)
        .dir("dev/", 0o755)
        .char_device("dev/null", 1, 3)
        .finish();
    push_image(
        "private",
        vec![(layer, Media::Gzip)],
        serde_json::json!({"Env": ["PATH=/bin"]}),
        "amd64",
        None,
    )
    .await
}

/// Runs `command` as the unprivileged `nobody` (uid and gid 65534, no
/// supplementary groups); whether it succeeded.
fn as_nobody(command: &str) -> bool {
    Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
        ])
        .arg(command)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("setpriv")
        .success()
}

fn lock_files(root: &Path) -> Vec<PathBuf> {
    fs::read_dir(root.join("locks"))
        .expect("locks")
        .flatten()
        .map(|e| e.path())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cache_is_private_to_root_and_its_lock_to_this_user() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "run the tests as root");
    let reference = small_image().await;
    // A parent every user can traverse, as /var/cache is.
    let dir = tempfile::tempdir().expect("tempdir");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    let root = dir.path().join("cache");
    let cache = ImageCache::new(&root, CacheOptions::default()).expect("cache");
    let image = cache
        .prepare(&reference, &MountPoints::new().file("/sandbox/program"))
        .await
        .expect("prepare");
    assert_eq!(fs::metadata(&root).expect("root").mode() & 0o777, 0o700);
    let locks = lock_files(&root);
    assert_eq!(locks.len(), 1, "{locks:?}");
    let lock = locks[0].display().to_string();
    let su = image.rootfs.join("bin/su").display().to_string();
    // What the tree holds is reachable by root only.
    assert!(as_nobody("true"), "setpriv cannot run as nobody here");
    assert!(!as_nobody(&format!("ls {}", root.display())));
    assert!(!as_nobody(&format!("test -e {su}")));
    // No other user can take (and keep) the image's lock.
    assert!(!as_nobody(&format!("flock -n {lock} true")));

    // A cache made by an older progscore (0755) is made private again.
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).expect("chmod");
    drop(ImageCache::new(&root, CacheOptions::default()).expect("cache"));
    assert_eq!(fs::metadata(&root).expect("root").mode() & 0o777, 0o700);
}

/// `flock LOCK cat`, holding the lock until its stdin closes.
struct Holder(Child);

impl Holder {
    fn new(lock: &Path) -> Holder {
        let mut child = Command::new("flock")
            .arg(lock)
            .args(["-c", "echo held; exec cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("flock(1)");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().expect("stdout"))
            .read_line(&mut line)
            .expect("flock's line");
        assert_eq!(line, "held\n");
        Holder(child)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_held_lock_is_waited_for_within_a_bound_and_named() {
    let reference = small_image().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("cache");
    let mounts = MountPoints::new().file("/sandbox/program");
    ImageCache::new(&root, CacheOptions::default())
        .expect("cache")
        .prepare(&reference, &mounts)
        .await
        .expect("prepare");
    let lock = lock_files(&root).pop().expect("a lock file");

    let holder = Holder::new(&lock);
    let bounded = ImageCache::new(
        &root,
        CacheOptions {
            lock_wait: Duration::from_millis(500),
            ..CacheOptions::default()
        },
    )
    .expect("cache");
    let err = bounded
        .prepare(&reference, &mounts)
        .await
        .expect_err("prepared while another process held the lock");
    assert!(matches!(err, ImageError::LockTimeout { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&lock.display().to_string()),
        "the lock file is not named: {message}"
    );
    assert!(
        message.contains(&format!("process {} (flock)", holder.0.id())),
        "the holder is not named: {message}"
    );
    drop(holder);
    bounded
        .prepare(&reference, &mounts)
        .await
        .expect("prepare once the lock is free");
}
