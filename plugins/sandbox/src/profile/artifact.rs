//! What a profile runs, pinned so that it cannot move: an image by digest or
//! id, or files by sha256.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{PinnedFileSpec, ProfileError};

/// The pinned thing a profile runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Artifact {
    /// A Docker image, by repo digest or image id.
    DockerImage {
        /// The reference.
        image: ImageRef,
    },
    /// A WASM runtime module and its standard library.
    WasmModule {
        /// The module.
        module: PinnedFile,
        /// The standard library archive, if the runtime needs one.
        stdlib: Option<PinnedFile>,
    },
}

/// A Docker image reference that cannot move: a repo digest or an image id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ImageRef {
    /// `repo@sha256:<64 hex>` (the repository may carry a registry host and a tag).
    Digest {
        /// Everything before `@`.
        repository: String,
        /// `sha256:<64 hex>`.
        digest: String,
    },
    /// `sha256:<64 hex>`: a local image id.
    Id(String),
}

impl ImageRef {
    /// Parses a pinned reference; `None` for anything that could move (a tag).
    pub fn parse_pinned(reference: &str) -> Option<ImageRef> {
        if let Some(hex) = reference.strip_prefix("sha256:") {
            return is_sha256_hex(hex).then(|| ImageRef::Id(reference.to_string()));
        }
        let (repository, digest) = reference.rsplit_once('@')?;
        let hex = digest.strip_prefix("sha256:")?;
        if repository.is_empty() || !is_sha256_hex(hex) {
            return None;
        }
        Some(ImageRef::Digest {
            repository: repository.to_string(),
            digest: digest.to_string(),
        })
    }
}

impl std::fmt::Display for ImageRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImageRef::Digest { repository, digest } => write!(f, "{repository}@{digest}"),
            ImageRef::Id(id) => f.write_str(id),
        }
    }
}

impl Serialize for ImageRef {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A resolved file path with the sha256 it must have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinnedFile {
    /// Absolute (or config-relative, resolved) path.
    pub path: PathBuf,
    /// Expected lower-case hex sha256.
    pub sha256: String,
}

/// Whether `hex` is a sha256 as progscore pins them: 64 lower-case hex digits.
pub fn is_sha256_hex(hex: &str) -> bool {
    hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub(super) fn resolve_pinned(
    profile: &str,
    field: &'static str,
    spec: &PinnedFileSpec,
    base_dir: &Path,
) -> Result<PinnedFile, ProfileError> {
    if !is_sha256_hex(&spec.sha256) {
        return Err(ProfileError::BadSha256 {
            profile: profile.to_string(),
            field,
            value: spec.sha256.clone(),
        });
    }
    let path = if spec.path.is_absolute() {
        spec.path.clone()
    } else {
        base_dir.join(&spec.path)
    };
    Ok(PinnedFile {
        path,
        sha256: spec.sha256.clone(),
    })
}
