//! The JSON documents of an image: index (manifest list), manifest, config.
//! Only the fields this crate uses are read; both the OCI and the Docker
//! spellings are accepted, since a registry serves whichever was pushed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::error::ImageError;
use crate::reference::PinnedReference;

pub(crate) const MANIFEST_MEDIA_TYPES: &[&str] = &[
    OCI_MANIFEST,
    DOCKER_MANIFEST,
    OCI_INDEX,
    DOCKER_MANIFEST_LIST,
];
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// How a layer's bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Compression {
    None,
    Gzip,
}

impl Compression {
    /// Tar and gzip-compressed tar, in the OCI and Docker spellings. zstd and
    /// foreign (non-distributable) layers are refused.
    pub(crate) fn of_media_type(media_type: &str) -> Option<Compression> {
        match media_type {
            "application/vnd.oci.image.layer.v1.tar"
            | "application/vnd.docker.image.rootfs.diff.tar" => Some(Compression::None),
            "application/vnd.oci.image.layer.v1.tar+gzip"
            | "application/vnd.docker.image.rootfs.diff.tar.gzip" => Some(Compression::Gzip),
            _ => None,
        }
    }
}

/// A content descriptor: a blob's media type, digest and size.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Descriptor {
    #[serde(default)]
    pub(crate) media_type: String,
    pub(crate) digest: Digest,
    pub(crate) size: u64,
    #[serde(default)]
    pub(crate) platform: Option<PlatformDoc>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PlatformDoc {
    #[serde(default)]
    pub(crate) architecture: String,
    #[serde(default)]
    pub(crate) os: String,
}

/// A manifest or an index, told apart by their fields (`mediaType` is
/// optional in OCI).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManifestDoc {
    schema_version: u32,
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Option<Vec<Descriptor>>,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
}

pub(crate) enum Document {
    Index(Vec<Descriptor>),
    Manifest(Manifest),
}

/// An image manifest: its config and its layers, bottom first.
#[derive(Debug, Clone)]
pub(crate) struct Manifest {
    pub(crate) config: Descriptor,
    pub(crate) layers: Vec<Descriptor>,
}

pub(crate) fn parse_document(
    reference: &PinnedReference,
    digest: &Digest,
    bytes: &[u8],
) -> Result<Document, ImageError> {
    let bad = |reason: String| ImageError::BadImage {
        reference: reference.text.clone(),
        what: "manifest",
        digest: digest.to_string(),
        reason,
    };
    let doc: ManifestDoc =
        serde_json::from_slice(bytes).map_err(|e| bad(format!("is not a manifest: {e}")))?;
    if doc.schema_version != 2 {
        return Err(bad(format!(
            "has schemaVersion {} (only 2 is supported)",
            doc.schema_version
        )));
    }
    if let Some(media_type) = &doc.media_type
        && !MANIFEST_MEDIA_TYPES.contains(&media_type.as_str())
    {
        return Err(bad(format!("has unsupported media type `{media_type}`")));
    }
    match (doc.manifests, doc.config, doc.layers) {
        (Some(manifests), None, None) => Ok(Document::Index(manifests)),
        (None, Some(config), Some(layers)) => Ok(Document::Manifest(Manifest { config, layers })),
        _ => Err(bad(
            "is neither an image manifest (config and layers) nor an index (manifests)".into(),
        )),
    }
}

/// The entry of an index for `linux/<architecture>`.
pub(crate) fn pick_platform(
    reference: &PinnedReference,
    index_digest: &Digest,
    entries: &[Descriptor],
    architecture: &str,
) -> Result<Digest, ImageError> {
    entries
        .iter()
        .find(|entry| {
            entry
                .platform
                .as_ref()
                .is_some_and(|p| p.os == "linux" && p.architecture == architecture)
        })
        .map(|entry| entry.digest.clone())
        .ok_or_else(|| {
            let available: Vec<String> = entries
                .iter()
                .filter_map(|e| e.platform.as_ref())
                .map(|p| format!("{}/{}", p.os, p.architecture))
                .collect();
            ImageError::NoPlatform {
                reference: reference.text.clone(),
                digest: index_digest.to_string(),
                wanted: format!("linux/{architecture}"),
                available: if available.is_empty() {
                    "no platforms".into()
                } else {
                    available.join(", ")
                },
            }
        })
}

/// What the runtime needs from the image config to run a container the way
/// Docker would: these are read from the verified config blob, never from
/// anything else.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageFacts {
    /// `Env`: `NAME=value` strings, in the image's order.
    pub env: Vec<String>,
    /// `WorkingDir`, when the image sets one.
    pub working_dir: Option<String>,
    /// `User`, when the image sets one.
    pub user: Option<String>,
    /// `Entrypoint`, when the image sets one.
    pub entrypoint: Option<Vec<String>>,
    /// `Cmd`, when the image sets one.
    pub cmd: Option<Vec<String>>,
}

/// The image config, as far as this crate reads it.
#[derive(Debug, Clone)]
pub(crate) struct ImageConfig {
    pub(crate) facts: ImageFacts,
    pub(crate) volumes: Vec<String>,
    pub(crate) diff_ids: Vec<Digest>,
    pub(crate) os: String,
    pub(crate) architecture: String,
}

#[derive(Deserialize)]
struct ConfigDoc {
    #[serde(default)]
    architecture: String,
    #[serde(default)]
    os: String,
    #[serde(default)]
    config: Option<RunConfigDoc>,
    rootfs: RootfsDoc,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RunConfigDoc {
    #[serde(default)]
    env: Option<Vec<String>>,
    #[serde(default)]
    working_dir: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    entrypoint: Option<Vec<String>>,
    #[serde(default)]
    cmd: Option<Vec<String>>,
    #[serde(default)]
    volumes: Option<BTreeMap<String, serde_json::Value>>,
}

#[derive(Deserialize)]
struct RootfsDoc {
    #[serde(rename = "type")]
    kind: String,
    diff_ids: Vec<Digest>,
}

pub(crate) fn parse_config(
    reference: &PinnedReference,
    digest: &Digest,
    bytes: &[u8],
) -> Result<ImageConfig, ImageError> {
    let bad = |reason: String| ImageError::BadImage {
        reference: reference.text.clone(),
        what: "config",
        digest: digest.to_string(),
        reason,
    };
    let doc: ConfigDoc =
        serde_json::from_slice(bytes).map_err(|e| bad(format!("is not an image config: {e}")))?;
    if doc.rootfs.kind != "layers" {
        return Err(bad(format!(
            "has rootfs.type `{}` (only `layers` exists)",
            doc.rootfs.kind
        )));
    }
    let run = doc.config.unwrap_or(RunConfigDoc {
        env: None,
        working_dir: None,
        user: None,
        entrypoint: None,
        cmd: None,
        volumes: None,
    });
    let non_empty = |s: Option<String>| s.filter(|s| !s.is_empty());
    Ok(ImageConfig {
        facts: ImageFacts {
            env: run.env.unwrap_or_default(),
            working_dir: non_empty(run.working_dir),
            user: non_empty(run.user),
            entrypoint: run.entrypoint,
            cmd: run.cmd,
        },
        volumes: run.volumes.unwrap_or_default().into_keys().collect(),
        diff_ids: doc.rootfs.diff_ids,
        os: doc.os,
        architecture: doc.architecture,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference() -> PinnedReference {
        PinnedReference::parse(&format!("r:5000/x@sha256:{}", "0".repeat(64))).expect("ref")
    }

    #[test]
    fn reads_a_docker_config_with_nulls() {
        let config = br#"{"architecture":"amd64","os":"linux",
            "config":{"Env":["PATH=/bin"],"Cmd":null,"Entrypoint":["python3"],
                      "WorkingDir":"","User":"","Volumes":{"/data":{}}},
            "rootfs":{"type":"layers","diff_ids":["sha256:1c12cdf0d911461deb3a42a73747fd98cb2e424a4ff6d9993e8df912d4132dd0"]}}"#;
        let parsed = parse_config(&reference(), &Digest::of_bytes(config), config).expect("parsed");
        assert_eq!(parsed.facts.env, ["PATH=/bin"]);
        assert_eq!(parsed.facts.cmd, None);
        assert_eq!(parsed.facts.entrypoint, Some(vec!["python3".to_owned()]));
        assert_eq!(parsed.facts.working_dir, None);
        assert_eq!(parsed.volumes, ["/data"]);
        assert_eq!(parsed.diff_ids.len(), 1);
    }

    #[test]
    fn tells_an_index_from_a_manifest() {
        let d = format!("sha256:{}", "a".repeat(64));
        let index = format!(
            r#"{{"schemaVersion":2,"manifests":[
              {{"mediaType":"{OCI_MANIFEST}","digest":"{d}","size":1,"platform":{{"architecture":"arm64","os":"linux"}}}}]}}"#
        );
        let r = reference();
        let parsed = parse_document(&r, &r.digest, index.as_bytes()).expect("index");
        let Document::Index(entries) = parsed else {
            panic!("not an index")
        };
        let err = pick_platform(&r, &r.digest, &entries, "amd64").expect_err("no amd64");
        assert!(err.to_string().contains("linux/arm64"), "{err}");
        assert_eq!(
            pick_platform(&r, &r.digest, &entries, "arm64").expect("arm64"),
            Digest::parse(&d).expect("digest")
        );
    }
}
