//! The project's python image and the fixtures built on it.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use progscore_oci_image::{ImageCache, ImageError, MountPoints};

use crate::common::{
    all_paths, cache, fixture_reference, offline_options, python_reference, require_registry,
    sha256,
};

fn mounts() -> MountPoints {
    MountPoints::new()
        .file("/sandbox/program")
        .dir("/sandbox/work")
        .dir("/tmp")
}

fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// `usr/bin/python3` inside the tree, its symbolic links resolved inside the
/// tree (never on the host).
fn python_binary(rootfs: &Path) -> PathBuf {
    let mut path = rootfs.join("usr/bin/python3");
    for _ in 0..8 {
        let meta = fs::symlink_metadata(&path).expect("usr/bin/python3 exists");
        if !meta.file_type().is_symlink() {
            return path;
        }
        let target = fs::read_link(&path).expect("link");
        path = if target.is_absolute() {
            rootfs.join(target.strip_prefix("/").expect("absolute"))
        } else {
            path.parent().expect("parent").join(target)
        };
    }
    panic!("usr/bin/python3 is a chain of links");
}

fn min_time(mut run: impl FnMut(), times: usize) -> Duration {
    (0..times)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .min()
        .expect("at least one run")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_image_prepares_once_and_then_needs_no_network() {
    require_registry().await;
    let reference = python_reference();
    let (dir, cache) = cache();

    let started = Instant::now();
    let image = cache.prepare(&reference, &mounts()).await.expect("prepare");
    let first = started.elapsed();

    // What a user of the rootfs notices: python is there, the config's
    // environment is known, the mount points exist.
    let rootfs = &image.rootfs;
    assert!(
        fs::symlink_metadata(rootfs.join("usr/bin/python3")).is_ok(),
        "no usr/bin/python3 in {}",
        rootfs.display()
    );
    assert!(fs::metadata(python_binary(rootfs)).expect("python").len() > 1_000_000);
    assert!(
        image.facts.env.iter().any(|e| e.starts_with("PATH=")),
        "no PATH in {:?}",
        image.facts.env
    );
    assert_eq!(image.facts.cmd, Some(vec!["python3".to_owned()]));
    assert_eq!(image.facts.entrypoint, None);
    let program = fs::metadata(rootfs.join("sandbox/program")).expect("file mount point");
    assert!(program.is_file() && program.len() == 0);
    assert_eq!(program.mode() & 0o7777, 0o644);
    assert!(
        fs::metadata(rootfs.join("sandbox/work"))
            .expect("dir")
            .is_dir()
    );
    assert!(fs::metadata(rootfs.join("tmp")).expect("tmp").is_dir());
    assert_eq!(image.repaired, None);
    assert_eq!(
        image.manifest_digest,
        reference.rsplit_once('@').expect("pinned").1
    );
    assert_eq!(image.layer_digests.len(), 1);
    assert!(image.unpacked_bytes > 50_000_000);

    // The layout: verified blobs kept, one image directory with its record.
    let root = cache.root();
    for digest in image
        .layer_digests
        .iter()
        .chain([&image.config_digest, &image.manifest_digest])
    {
        let blob = root
            .join("blobs/sha256")
            .join(digest.trim_start_matches("sha256:"));
        assert_eq!(sha256(&fs::read(&blob).expect("blob")), *digest);
    }
    assert!(
        rootfs
            .parent()
            .expect("image dir")
            .join("image.json")
            .is_file()
    );

    // The same cache, with every registry unreachable: served from the cache.
    let offline = ImageCache::new(root, offline_options()).expect("offline cache");
    let started = Instant::now();
    let again = offline
        .prepare(&reference, &mounts())
        .await
        .expect("cached prepare");
    let cached = started.elapsed();
    assert_eq!(again, image);

    let verify = min_time(|| cache.verify(&image).expect("verify"), 3);
    println!(
        "timing ({}): first prepare {first:.2?}, cached prepare {cached:.2?}, verify {verify:.2?} \
         ({} bytes unpacked)",
        profile(),
        image.unpacked_bytes
    );

    // Other mount points are another tree, built from the cached blobs alone.
    let other = offline
        .prepare(&reference, &MountPoints::new().dir("/sandbox"))
        .await
        .expect("other mount points, offline");
    assert_ne!(other.rootfs, image.rootfs);
    assert_ne!(other.tree_digest, image.tree_digest);

    // And something never fetched really needs the registry: offline fails.
    let entrypoint = fixture_reference("progscore-fixture-entrypoint").await;
    let err = offline
        .prepare(&entrypoint, &MountPoints::new())
        .await
        .expect_err("offline fetch");
    assert!(matches!(err, ImageError::Registry { .. }), "{err}");

    let listed = cache.list();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.iter().all(|l| l.is_intact()), "{listed:?}");
    drop(dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_tree_or_blob_is_detected_and_repaired() {
    require_registry().await;
    let reference = python_reference();
    let (_dir, cache) = cache();
    let offline = ImageCache::new(cache.root(), offline_options()).expect("offline cache");
    let image = cache.prepare(&reference, &mounts()).await.expect("prepare");
    let python = python_binary(&image.rootfs);
    let python_bytes = fs::read(&python).expect("python");

    // A byte appended to python: verify notices, and prepare rebuilds the
    // tree from the cached blobs, without the network, byte for byte.
    let mut changed = python_bytes.clone();
    changed.extend_from_slice(b"#");
    fs::write(&python, &changed).expect("tamper");
    let err = cache
        .verify(&image)
        .expect_err("tampered tree passes verify");
    assert!(matches!(err, ImageError::Tampered { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&image.rootfs.display().to_string()),
        "{err}"
    );
    let listed = cache.list();
    assert!(
        !listed[0].is_intact() && listed[0].problems[0].contains("changed"),
        "{listed:?}"
    );

    let repaired = offline
        .prepare(&reference, &mounts())
        .await
        .expect("repair offline");
    let note = repaired.repaired.clone().expect("the repair is reported");
    assert!(note.contains("changed"), "{note}");
    assert_eq!(repaired.tree_digest, image.tree_digest);
    assert_eq!(
        fs::read(python_binary(&repaired.rootfs)).expect("python"),
        python_bytes
    );
    cache.verify(&repaired).expect("verify after repair");

    // The changed tree was not repaired in place: it is kept, as it is,
    // while `image` (its lease) may still run containers on it.
    assert_ne!(repaired.rootfs, image.rootfs);
    assert_eq!(fs::read(&python).expect("python"), changed);
    let old_tree = image.rootfs.clone();
    drop(image);

    // A changed mode is a change too; the tree no longer in use is gone.
    let passwd = repaired.rootfs.join("etc/passwd");
    fs::set_permissions(&passwd, fs::Permissions::from_mode(0o666)).expect("chmod");
    assert!(cache.verify(&repaired).is_err());
    let image = cache.prepare(&reference, &mounts()).await.expect("repair");
    assert!(image.repaired.is_some());
    assert_eq!(
        fs::metadata(image.rootfs.join("etc/passwd"))
            .expect("passwd")
            .mode()
            & 0o7777,
        0o644
    );
    assert!(!old_tree.exists(), "an unused tree was kept");
    drop(repaired);
    let python = python_binary(&image.rootfs);

    // A damaged layer blob (the tree intact): found on the next prepare and
    // fetched again.
    let layer_blob = cache
        .root()
        .join("blobs/sha256")
        .join(image.layer_digests[0].trim_start_matches("sha256:"));
    let mut blob = fs::read(&layer_blob).expect("blob");
    blob[1000] ^= 0xff;
    fs::write(&layer_blob, &blob).expect("damage the blob");
    let listed = cache.list();
    assert!(
        listed[0]
            .problems
            .iter()
            .any(|p| p.contains(&layer_blob.display().to_string())),
        "{listed:?}"
    );
    let again = cache.prepare(&reference, &mounts()).await.expect("prepare");
    let note = again.repaired.expect("the blob repair is reported");
    assert!(
        note.contains("fetched") && note.contains(&image.layer_digests[0]),
        "{note}"
    );
    assert_eq!(
        sha256(&fs::read(&layer_blob).expect("blob")),
        image.layer_digests[0]
    );

    // A damaged blob and a changed tree, offline: the tree cannot be rebuilt
    // and is not handed out.
    fs::write(&layer_blob, &blob).expect("damage the blob");
    fs::write(&python, &changed).expect("tamper");
    let err = offline
        .prepare(&reference, &mounts())
        .await
        .expect_err("a changed tree was handed out");
    assert!(matches!(err, ImageError::Registry { .. }), "{err}");
    // Online, both are repaired (the offline attempt already removed the
    // damaged blob, which is now fetched as a missing one).
    let repaired = cache.prepare(&reference, &mounts()).await.expect("repair");
    let note = repaired.repaired.expect("reported");
    assert!(note.contains("changed"), "{note}");
    assert_eq!(repaired.tree_digest, image.tree_digest);
    assert_eq!(
        sha256(&fs::read(&layer_blob).expect("blob")),
        image.layer_digests[0]
    );
    assert!(cache.list().iter().all(|l| l.is_intact()));

    // Nothing half-built is left beside the image.
    let leftovers: Vec<_> = all_paths(&cache.root().join("trees"))
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".t"))
        })
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_entrypoint_fixture_keeps_its_own_facts_and_concurrent_prepares_agree() {
    let reference = fixture_reference("progscore-fixture-entrypoint").await;
    let (_dir, cache) = cache();
    let mounts = MountPoints::new().file("/sandbox/program");
    let (a, b) = tokio::join!(
        cache.prepare(&reference, &mounts),
        cache.prepare(&reference, &mounts)
    );
    let (a, b) = (a.expect("first"), b.expect("second"));
    assert_eq!(a, b);
    assert_eq!(
        a.facts.entrypoint,
        Some(vec![
            "python3".to_owned(),
            "-c".to_owned(),
            "print(\"image entrypoint ran\")".to_owned()
        ])
    );
    assert_eq!(a.facts.cmd, None);
    let images: Vec<_> = fs::read_dir(cache.root().join("trees"))
        .expect("images")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(images.len(), 1, "{images:?}");
}
