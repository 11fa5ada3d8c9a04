//! Helpers: the project's images, a cache per test, and synthetic images
//! (built here as tar layers) pushed to the local registry.

use std::path::{Path, PathBuf};
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{ImageIndexEntry, OciImageIndex, Platform};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use progscore_oci_image::{CacheOptions, ImageCache};
use sha2::{Digest as _, Sha256};
use tempfile::TempDir;

pub const REGISTRY: &str = "127.0.0.1:5000";
/// Where this crate's tests push their synthetic images.
pub const TEST_REPOSITORY: &str = "progscore-test-oci-image";

/// A fresh cache in its own temporary directory, speaking HTTP to the local
/// registry.
pub fn cache() -> (TempDir, ImageCache) {
    // `RUST_LOG=progscore_oci_image=info` shows what the cache does, with times.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir().expect("temporary directory");
    let cache = ImageCache::new(dir.path().join("cache"), CacheOptions::default()).expect("cache");
    (dir, cache)
}

/// Options under which any registry access fails: no registry is spoken to
/// over plain HTTP, so the local one (plain HTTP) cannot answer.
pub fn offline_options() -> CacheOptions {
    CacheOptions {
        http_registries: Vec::new(),
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(2),
        ..CacheOptions::default()
    }
}

/// The `image` of `[profiles.python]` in the project's configuration
/// (`PROGSCORE_CONFIG`, or progscore.toml at the workspace's root).
pub fn python_reference() -> String {
    progscore_test_kit::generated_image("python")
}

fn registry_client() -> Client {
    // The build has one TLS provider and oci-client none of its own.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::new(ClientConfig {
        protocol: ClientProtocol::HttpsExcept(vec![REGISTRY.to_owned()]),
        ..ClientConfig::default()
    })
}

/// Fails the test with what to do when the local registry is down.
pub async fn require_registry() {
    let client = registry_client();
    let probe = Reference::with_tag(REGISTRY.into(), "python-sandbox".into(), "probe".into());
    if let Err(e) = client
        .list_tags(&probe, &RegistryAuth::Anonymous, Some(1), None)
        .await
    {
        panic!("the registry at {REGISTRY} is not answering ({e}); run `bash scripts/setup.sh`");
    }
}

/// `127.0.0.1:5000/<repository>@sha256:...` for the tag `latest` of a
/// fixture pushed by scripts/setup.sh (what `docker image inspect` lists as
/// its RepoDigest).
pub async fn fixture_reference(repository: &str) -> String {
    require_registry().await;
    let tagged = Reference::with_tag(REGISTRY.into(), repository.into(), "latest".into());
    let digest = registry_client()
        .fetch_manifest_digest(&tagged, &RegistryAuth::Anonymous)
        .await
        .unwrap_or_else(|e| {
            panic!("fixture {repository}:latest is not in the registry ({e}); run `bash scripts/setup.sh`")
        });
    format!("{REGISTRY}/{repository}@{digest}")
}

pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// One layer of a synthetic image, as a tar archive written entry by entry.
/// Names are written as given (no checks), so hostile entries can be made.
pub struct Layer {
    builder: tar::Builder<Vec<u8>>,
}

pub const MTIME: u64 = 1_600_000_000;

impl Layer {
    pub fn new() -> Layer {
        Layer {
            builder: tar::Builder::new(Vec::new()),
        }
    }

    fn entry(
        mut self,
        name: &str,
        kind: tar::EntryType,
        mode: u32,
        owner: (u64, u64),
        link: Option<&str>,
        contents: &[u8],
    ) -> Layer {
        let mut header = tar::Header::new_gnu();
        let field = &mut header.as_old_mut().name;
        assert!(name.len() < field.len(), "test names are short");
        field[..name.len()].copy_from_slice(name.as_bytes());
        header.set_entry_type(kind);
        header.set_mode(mode);
        header.set_uid(owner.0);
        header.set_gid(owner.1);
        header.set_mtime(MTIME);
        header.set_size(contents.len() as u64);
        if let Some(link) = link {
            header.set_link_name_literal(link).expect("link name");
        }
        header.set_cksum();
        self.builder.append(&header, contents).expect("append");
        self
    }

    pub fn dir(self, name: &str, mode: u32) -> Layer {
        self.entry(name, tar::EntryType::Directory, mode, (0, 0), None, b"")
    }

    pub fn file(self, name: &str, mode: u32, contents: &[u8]) -> Layer {
        self.entry(name, tar::EntryType::Regular, mode, (0, 0), None, contents)
    }

    pub fn owned_file(self, name: &str, mode: u32, owner: (u64, u64), contents: &[u8]) -> Layer {
        self.entry(name, tar::EntryType::Regular, mode, owner, None, contents)
    }

    pub fn symlink(self, name: &str, target: &str) -> Layer {
        self.entry(
            name,
            tar::EntryType::Symlink,
            0o777,
            (0, 0),
            Some(target),
            b"",
        )
    }

    pub fn hard_link(self, name: &str, target: &str) -> Layer {
        self.entry(name, tar::EntryType::Link, 0o644, (0, 0), Some(target), b"")
    }

    pub fn fifo(self, name: &str) -> Layer {
        self.entry(name, tar::EntryType::Fifo, 0o640, (0, 0), None, b"")
    }

    pub fn char_device(mut self, name: &str, major: u32, minor: u32) -> Layer {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Char);
        header.set_path(name).expect("path");
        header.set_mode(0o666);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(MTIME);
        header.set_device_major(major).expect("major");
        header.set_device_minor(minor).expect("minor");
        header.set_size(0);
        header.set_cksum();
        self.builder.append(&header, &b""[..]).expect("append");
        self
    }

    pub fn finish(self) -> Vec<u8> {
        self.builder.into_inner().expect("tar")
    }
}

/// How a synthetic layer is pushed.
pub enum Media {
    Tar,
    Gzip,
    Other(&'static str),
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

/// Pushes an image made of `layers` (uncompressed tars) to
/// `127.0.0.1:5000/progscore-test-oci-image:<tag>` and returns its pinned
/// reference. `diff_ids` may be given to lie about the layers.
pub async fn push_image(
    tag: &str,
    layers: Vec<(Vec<u8>, Media)>,
    run_config: serde_json::Value,
    architecture: &str,
    diff_ids: Option<Vec<String>>,
) -> String {
    require_registry().await;
    let real_diff_ids: Vec<String> = layers.iter().map(|(tar, _)| sha256(tar)).collect();
    let image_layers: Vec<ImageLayer> = layers
        .into_iter()
        .map(|(tar, media)| match media {
            Media::Tar => ImageLayer::oci_v1(tar, None),
            Media::Gzip => ImageLayer::oci_v1_gzip(gzip(&tar), None),
            Media::Other(media_type) => ImageLayer::new(tar, media_type.to_owned(), None),
        })
        .collect();
    let config = serde_json::json!({
        "architecture": architecture,
        "os": "linux",
        "config": run_config,
        "rootfs": {"type": "layers", "diff_ids": diff_ids.unwrap_or(real_diff_ids)},
    });
    let config = Config::oci_v1(serde_json::to_vec(&config).expect("json"), None);
    let reference = Reference::with_tag(REGISTRY.into(), TEST_REPOSITORY.into(), tag.into());
    let client = registry_client();
    client
        .push(
            &reference,
            &image_layers,
            config,
            &RegistryAuth::Anonymous,
            None,
        )
        .await
        .expect("push the synthetic image");
    let digest = client
        .fetch_manifest_digest(&reference, &RegistryAuth::Anonymous)
        .await
        .expect("digest of the pushed image");
    format!("{REGISTRY}/{TEST_REPOSITORY}@{digest}")
}

/// Pushes an index of pinned references (each with its platform) under
/// `tag`, and returns the index's pinned reference.
pub async fn push_index(tag: &str, entries: &[(&str, &str)]) -> String {
    let client = registry_client();
    let mut manifests = Vec::new();
    for (reference, architecture) in entries {
        let digest = reference.rsplit_once('@').expect("pinned").1;
        let parsed: Reference = reference.parse().expect("reference");
        let (bytes, _) = client
            .pull_manifest_raw(
                &parsed,
                &RegistryAuth::Anonymous,
                &["application/vnd.oci.image.manifest.v1+json"],
            )
            .await
            .expect("manifest");
        manifests.push(ImageIndexEntry {
            media_type: "application/vnd.oci.image.manifest.v1+json".into(),
            digest: digest.into(),
            size: bytes.len() as i64,
            platform: Some(Platform {
                architecture: (*architecture).into(),
                os: "linux".into(),
                os_version: None,
                os_features: None,
                variant: None,
                features: None,
            }),
            annotations: None,
            artifact_type: None,
        });
    }
    let index = OciImageIndex {
        schema_version: 2,
        media_type: Some("application/vnd.oci.image.index.v1+json".into()),
        manifests,
        artifact_type: None,
        annotations: None,
    };
    let reference = Reference::with_tag(REGISTRY.into(), TEST_REPOSITORY.into(), tag.into());
    client
        .push_manifest_list(&reference, &RegistryAuth::Anonymous, index)
        .await
        .expect("push the index");
    let digest = client
        .fetch_manifest_digest(&reference, &RegistryAuth::Anonymous)
        .await
        .expect("digest of the pushed index");
    format!("{REGISTRY}/{TEST_REPOSITORY}@{digest}")
}

/// Every path under `dir`, for "nothing was left behind" checks.
pub fn all_paths(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path.clone());
            }
            out.push(path);
        }
    }
    out
}
