//! Synthetic images pushed to the local registry: how layers are applied,
//! and hostile layers that try to write outside the root filesystem.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use progscore_oci_image::{CacheOptions, ImageCache, ImageError, MountPoints, UnpackError};
use serde_json::json;

use crate::common::{Layer, MTIME, Media, all_paths, cache, push_image, push_index};

fn env() -> serde_json::Value {
    json!({"Env": ["PATH=/bin"], "Cmd": ["/bin/true"], "WorkingDir": "/work", "User": "1000:1000"})
}

#[tokio::test(flavor = "multi_thread")]
async fn layers_are_applied_with_whiteouts_links_devices_and_owners() {
    let lower = Layer::new()
        .dir("./", 0o755)
        .dir("etc/", 0o755)
        .file("etc/kept", 0o644, b"kept")
        .file("etc/gone", 0o644, b"gone")
        .symlink("etc/link", "kept")
        .hard_link("etc/hard", "etc/kept")
        .owned_file("home/user/setuid", 0o4755, (1000, 1001), b"#!/bin/true\n")
        .dir("opaque/", 0o700)
        .file("opaque/old", 0o644, b"old")
        .dir("opaque/sub/", 0o755)
        .file("opaque/sub/deep", 0o644, b"deep")
        .dir("gonedir/", 0o755)
        .file("gonedir/x", 0o644, b"x")
        .file("swap", 0o644, b"a file, then a directory")
        .fifo("run/fifo")
        .char_device("dev/null2", 1, 3)
        .finish();
    let upper = Layer::new()
        .file("etc/.wh.gone", 0o644, b"")
        .file(".wh.gonedir", 0o644, b"")
        .dir("opaque/", 0o750)
        .file("opaque/new", 0o600, b"new")
        .file("opaque/.wh..wh..opq", 0o644, b"")
        .dir("swap/", 0o755)
        .file("swap/inner", 0o644, b"inner")
        .finish();
    let reference = push_image(
        "layers",
        vec![(lower, Media::Gzip), (upper, Media::Tar)],
        env(),
        "amd64",
        None,
    )
    .await;
    let (_dir, cache) = cache();
    let image = cache
        .prepare(&reference, &MountPoints::new().file("/sandbox/program"))
        .await
        .expect("prepare");
    let root = &image.rootfs;
    let read = |p: &str| fs::read(root.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
    let meta = |p: &str| fs::symlink_metadata(root.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));

    assert_eq!(read("etc/kept"), b"kept");
    assert_eq!(meta("etc/kept").mtime(), MTIME as i64);
    assert!(!root.join("etc/gone").exists(), "a whiteout left etc/gone");
    assert!(!root.join("gonedir").exists(), "a whiteout left gonedir");
    assert_eq!(
        fs::read_link(root.join("etc/link")).expect("link"),
        Path::new("kept")
    );
    assert_eq!(meta("etc/hard").ino(), meta("etc/kept").ino());
    let setuid = meta("home/user/setuid");
    assert_eq!(
        (setuid.mode() & 0o7777, setuid.uid(), setuid.gid()),
        (0o4755, 1000, 1001)
    );
    let mut opaque: Vec<_> = fs::read_dir(root.join("opaque"))
        .expect("opaque")
        .flatten()
        .map(|e| e.file_name().into_string().expect("utf-8"))
        .collect();
    opaque.sort();
    assert_eq!(opaque, ["new"], "an opaque directory kept the layer below");
    assert_eq!(meta("opaque").mode() & 0o7777, 0o750);
    assert_eq!(read("swap/inner"), b"inner");
    assert!(meta("run/fifo").file_type().is_fifo());
    let null = meta("dev/null2");
    assert!(null.file_type().is_char_device());
    assert_eq!(null.rdev(), libc_makedev(1, 3));
    assert!(meta("sandbox/program").is_file());

    assert_eq!(image.facts.env, ["PATH=/bin"]);
    assert_eq!(image.facts.working_dir.as_deref(), Some("/work"));
    assert_eq!(image.facts.user.as_deref(), Some("1000:1000"));
    assert_eq!(image.facts.cmd, Some(vec!["/bin/true".to_owned()]));
    cache.verify(&image).expect("verify");
}

fn libc_makedev(major: u64, minor: u64) -> u64 {
    // glibc's encoding of dev_t.
    ((major & 0xfffff000) << 32)
        | ((major & 0xfff) << 8)
        | ((minor & 0xffffff00) << 12)
        | (minor & 0xff)
}

/// Asserts that preparing `layers` is refused for an unsafe entry `entry`,
/// and that nothing was installed or left behind.
async fn assert_refused(tag: &str, layers: Vec<Vec<u8>>, entry: &str) {
    let reference = push_image(
        tag,
        layers.into_iter().map(|l| (l, Media::Gzip)).collect(),
        env(),
        "amd64",
        None,
    )
    .await;
    let (dir, cache) = cache();
    let err = cache
        .prepare(&reference, &MountPoints::new())
        .await
        .expect_err(tag);
    assert!(
        matches!(
            &err,
            ImageError::Layer {
                cause: UnpackError::Unsafe { .. },
                ..
            }
        ),
        "{tag}: {err}"
    );
    assert!(err.to_string().contains(entry), "{tag}: {err}");
    let images = all_paths(&cache.root().join("trees"));
    assert!(images.is_empty(), "{tag}: left {images:?}");
    let escaped: Vec<_> = all_paths(dir.path())
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains("escape"))
        })
        .collect();
    assert!(escaped.is_empty(), "{tag}: {escaped:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_layers_never_write_outside_the_rootfs() {
    let outside = tempfile::tempdir().expect("outside");
    let out = outside.path().to_str().expect("utf-8").to_owned();
    fs::write(outside.path().join("victim"), b"victim").expect("victim");
    let up = "../".repeat(16);
    let absolute = "/progscore-escape-test".to_owned();

    assert_refused(
        "hostile-dotdot",
        vec![Layer::new().file("../escape", 0o644, b"x").finish()],
        "../escape",
    )
    .await;
    assert_refused(
        "hostile-deep-dotdot",
        vec![
            Layer::new()
                .dir("a/", 0o755)
                .file("a/../../escape", 0o644, b"x")
                .finish(),
        ],
        "a/../../escape",
    )
    .await;
    assert_refused(
        "hostile-absolute",
        vec![Layer::new().file(&absolute, 0o644, b"x").finish()],
        &absolute,
    )
    .await;
    assert!(!Path::new(&absolute).exists());
    assert_refused(
        "hostile-symlink-absolute",
        vec![
            Layer::new()
                .symlink("a", &out)
                .file("a/pwned", 0o644, b"x")
                .finish(),
        ],
        "a/pwned",
    )
    .await;
    assert_refused(
        "hostile-symlink-relative",
        vec![
            Layer::new()
                .symlink("b", &format!("{up}{}", out.trim_start_matches('/')))
                .file("b/pwned", 0o644, b"x")
                .finish(),
        ],
        "b/pwned",
    )
    .await;
    assert_refused(
        "hostile-symlink-across-layers",
        vec![
            Layer::new().symlink("c", &out).finish(),
            Layer::new().file("c/pwned", 0o644, b"x").finish(),
        ],
        "c/pwned",
    )
    .await;
    assert_refused(
        "hostile-symlink-dir-entry",
        vec![
            Layer::new()
                .symlink("d", &out)
                .dir("d/sub/", 0o755)
                .finish(),
        ],
        "d/sub",
    )
    .await;
    assert_refused(
        "hostile-hardlink-dotdot",
        vec![
            Layer::new()
                .hard_link("h", &format!("{up}etc/passwd"))
                .finish(),
        ],
        "`h`",
    )
    .await;
    assert_refused(
        "hostile-hardlink-through-symlink",
        vec![
            Layer::new()
                .symlink("l", &out)
                .hard_link("h", "l/victim")
                .finish(),
        ],
        "`h`",
    )
    .await;
    assert_refused(
        "hostile-whiteout-through-symlink",
        vec![
            Layer::new().symlink("w", &out).finish(),
            Layer::new().file("w/sub/.wh.victim", 0o644, b"").finish(),
        ],
        "w/sub/.wh.victim",
    )
    .await;

    // A whiteout naming a symbolic link's target directory hides nothing
    // outside: the image prepares, the host's file stays.
    let reference = push_image(
        "whiteout-symlink",
        vec![
            (Layer::new().symlink("w", &out).finish(), Media::Gzip),
            (
                Layer::new()
                    .file("w/.wh.victim", 0o644, b"")
                    .file("w/.wh..wh..opq", 0o644, b"")
                    .finish(),
                Media::Gzip,
            ),
        ],
        env(),
        "amd64",
        None,
    )
    .await;
    let (_dir, cache) = cache();
    let image = cache
        .prepare(&reference, &MountPoints::new())
        .await
        .expect("whiteouts under a symlink are ignored");
    assert!(fs::symlink_metadata(image.rootfs.join("w")).is_ok());
    let mut left: Vec<_> = fs::read_dir(outside.path())
        .expect("outside")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["victim"], "something was written or removed outside");
    assert_eq!(
        fs::read(outside.path().join("victim")).expect("victim"),
        b"victim"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_layer_that_does_not_match_its_diff_id_is_refused() {
    let layer = Layer::new().file("f", 0o644, b"content").finish();
    let wrong = format!("sha256:{}", "1".repeat(64));
    let reference = push_image(
        "wrong-diff-id",
        vec![(layer, Media::Gzip)],
        env(),
        "amd64",
        Some(vec![wrong.clone()]),
    )
    .await;
    let (_dir, cache) = cache();
    let err = cache
        .prepare(&reference, &MountPoints::new())
        .await
        .expect_err("wrong diff_id");
    assert!(matches!(err, ImageError::DiffIdMismatch { .. }), "{err}");
    assert!(err.to_string().contains(&wrong), "{err}");
    assert!(all_paths(&cache.root().join("trees")).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zstd_layer_is_refused_by_its_media_type() {
    let layer = Layer::new().file("f", 0o644, b"content").finish();
    let reference = push_image(
        "zstd",
        vec![(
            layer,
            Media::Other("application/vnd.oci.image.layer.v1.tar+zstd"),
        )],
        env(),
        "amd64",
        None,
    )
    .await;
    let (_dir, cache) = cache();
    let err = cache
        .prepare(&reference, &MountPoints::new())
        .await
        .expect_err("zstd");
    assert!(matches!(err, ImageError::UnsupportedLayer { .. }), "{err}");
    assert!(err.to_string().contains("tar+zstd"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_index_resolves_to_this_hosts_platform() {
    let amd64 = push_image(
        "index-amd64",
        vec![(
            Layer::new().file("arch", 0o644, b"amd64").finish(),
            Media::Gzip,
        )],
        env(),
        "amd64",
        None,
    )
    .await;
    let arm64 = push_image(
        "index-arm64",
        vec![(
            Layer::new().file("arch", 0o644, b"arm64").finish(),
            Media::Gzip,
        )],
        env(),
        "arm64",
        None,
    )
    .await;
    let index = push_index("index", &[(&arm64, "arm64"), (&amd64, "amd64")]).await;

    let (_dir, cache) = cache();
    let image = cache
        .prepare(&index, &MountPoints::new())
        .await
        .expect("prepare the index");
    assert_eq!(fs::read(image.rootfs.join("arch")).expect("arch"), b"amd64");
    assert_eq!(
        image.pinned_digest,
        index.rsplit_once('@').expect("pinned").1
    );
    assert_eq!(
        image.manifest_digest,
        amd64.rsplit_once('@').expect("pinned").1
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let s390x = ImageCache::new(
        dir.path(),
        CacheOptions {
            architecture: "s390x".into(),
            ..CacheOptions::default()
        },
    )
    .expect("cache");
    let err = s390x
        .prepare(&index, &MountPoints::new())
        .await
        .expect_err("no s390x");
    assert!(matches!(err, ImageError::NoPlatform { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("linux/s390x") && message.contains("linux/amd64"),
        "{message}"
    );
}
