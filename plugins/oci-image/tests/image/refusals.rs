//! What is refused, and what the messages say.

use std::time::{Duration, Instant};

use progscore_oci_image::{CacheOptions, ImageCache, ImageError, MountPoints};

use crate::common::{all_paths, cache, fixture_reference, require_registry};

const DIGEST: &str = "sha256:379e71d9d251ff242a9853a958646f7cc3a7145a80bba34276c56903d0865e42";

#[tokio::test]
async fn unpinned_references_are_refused_before_any_network_access() {
    // Port 1 answers nothing: any attempt to reach it would be a Registry
    // error, slow or not, instead of the refusals below.
    let dir = tempfile::tempdir().expect("tempdir");
    let options = CacheOptions {
        http_registries: vec!["127.0.0.1:1".into()],
        ..CacheOptions::default()
    };
    let cache = ImageCache::new(dir.path(), options).expect("cache");
    let cases = [
        ("127.0.0.1:1/python-sandbox:bookworm", "not pinned"),
        ("127.0.0.1:1/python-sandbox", "not pinned"),
        ("127.0.0.1:1/python-sandbox@sha256:1234", "64 hex digits"),
        (
            "127.0.0.1:1/python-sandbox@sha512:1234",
            "not a sha256 digest",
        ),
        (
            "127.0.0.1:1/python-sandbox@sha256:379E71D9D251FF242A9853A958646F7CC3A7145A80BBA34276C56903D0865E42",
            "lower-case",
        ),
    ];
    for (reference, says) in cases {
        let started = Instant::now();
        let err = cache
            .prepare(reference, &MountPoints::new())
            .await
            .expect_err(reference);
        assert!(
            matches!(
                err,
                ImageError::NotPinned { .. } | ImageError::InvalidDigest { .. }
            ),
            "{reference}: {err}"
        );
        let message = err.to_string();
        assert!(
            message.contains(reference) && message.contains(says),
            "{message}"
        );
        assert!(started.elapsed() < Duration::from_millis(500));
    }
    let err = cache
        .prepare(
            &format!("127.0.0.1:1/x@{DIGEST}"),
            &MountPoints::new().file("relative"),
        )
        .await
        .expect_err("relative mount point");
    assert!(matches!(err, ImageError::InvalidMountPoint { .. }), "{err}");
    assert!(all_paths(&dir.path().join("trees")).is_empty());
}

#[tokio::test]
async fn an_unknown_digest_is_named_in_the_error() {
    require_registry().await;
    let (_dir, cache) = cache();
    let missing = format!("sha256:{}", "0".repeat(64));
    let reference = format!("127.0.0.1:5000/python-sandbox@{missing}");
    let err = cache
        .prepare(&reference, &MountPoints::new())
        .await
        .expect_err("unknown digest");
    assert!(matches!(err, ImageError::NotFound { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&missing) && message.contains(&reference),
        "{message}"
    );
}

#[tokio::test]
async fn an_unreachable_registry_says_what_to_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = CacheOptions {
        http_registries: vec!["127.0.0.1:1".into()],
        ..CacheOptions::default()
    };
    let cache = ImageCache::new(dir.path(), options).expect("cache");
    let reference = format!("127.0.0.1:1/python-sandbox@{DIGEST}");
    let err = cache
        .prepare(&reference, &MountPoints::new())
        .await
        .expect_err("unreachable");
    assert!(matches!(err, ImageError::Registry { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("127.0.0.1:1") && message.contains("scripts/setup.sh"),
        "{message}"
    );
}

#[tokio::test]
async fn an_image_declaring_a_volume_is_refused() {
    let reference = fixture_reference("progscore-fixture-volume").await;
    let (_dir, cache) = cache();
    let err = cache
        .prepare(&reference, &MountPoints::new())
        .await
        .expect_err("volume image");
    assert!(matches!(err, ImageError::Volumes { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&reference) && message.contains("/data"),
        "{message}"
    );
    // Refused from its config: no layer was fetched, nothing was unpacked.
    assert!(all_paths(&cache.root().join("trees")).is_empty());
    assert_eq!(
        std::fs::read_dir(cache.root().join("blobs/sha256"))
            .expect("blobs")
            .count(),
        2,
        "only the manifest and the config are fetched"
    );
}

/// The backend runs `prepare` in spawned tasks: its future must be `Send`,
/// and the cache shareable between threads.
#[test]
fn the_cache_and_its_futures_can_move_between_threads() {
    fn send<T: Send>(_: &T) {}
    fn shared<T: Send + Sync>() {}
    shared::<ImageCache>();
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = ImageCache::new(dir.path(), CacheOptions::default()).expect("cache");
    let mounts = MountPoints::new();
    let future = cache.prepare("x@sha256:00", &mounts);
    send(&future);
}
