//! What the caller chooses: which registries speak plain HTTP, the platform,
//! and the mount points the runtime will need in the root filesystem.

use std::collections::BTreeSet;
use std::path::{Component, Path};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::error::ImageError;

/// Where the OCI backend keeps its image cache unless told otherwise.
pub const DEFAULT_CACHE_ROOT: &str = "/var/cache/progscore/oci";

/// The registries contacted over plain HTTP unless told otherwise: the local
/// registry that scripts/setup.sh runs.
pub const DEFAULT_HTTP_REGISTRIES: [&str; 2] = ["127.0.0.1:5000", "localhost:5000"];

/// How an [`ImageCache`](crate::ImageCache) reaches registries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheOptions {
    /// Registries (`host:port`, as written in references) spoken to over
    /// plain HTTP; every other registry is HTTPS. Digests make plain HTTP
    /// safe for content, not for confidentiality.
    pub http_registries: Vec<String>,
    /// The architecture picked from an index (manifest list), and required of
    /// a single image, in OCI's spelling (`amd64`, `arm64`). The OS is always
    /// `linux`.
    pub architecture: String,
    /// How long connecting to a registry may take.
    pub connect_timeout: Duration,
    /// How long a preparation waits for another one of the same image (in
    /// this process or another) to release the image's lock.
    pub lock_wait: Duration,
    /// How long a registry may stay silent in the middle of an answer.
    pub read_timeout: Duration,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            http_registries: DEFAULT_HTTP_REGISTRIES.map(String::from).to_vec(),
            architecture: host_architecture().to_owned(),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
            // A first preparation fetches and unpacks the image: minutes on
            // a slow link, never hours.
            lock_wait: Duration::from_secs(30 * 60),
        }
    }
}

/// This machine's architecture in OCI's spelling.
pub fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// Absolute paths that must exist in the root filesystem because the runtime
/// mounts something there (runc would otherwise create them itself, inside
/// the shared read-only cache, at run time).
///
/// They are created after the layers are applied and before the tree digest
/// is computed: missing parents as directories 0755 root:root, files empty
/// 0644, directories 0755. A path that already exists with the right type is
/// left as it is. This is the only change made to the image's files (Docker
/// creates mount points in each container's own layer instead).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MountPoints {
    files: BTreeSet<String>,
    dirs: BTreeSet<String>,
}

impl MountPoints {
    /// No mount points.
    pub fn new() -> MountPoints {
        MountPoints::default()
    }

    /// Adds a file mount point (a program bind-mounted as one file).
    pub fn file(mut self, path: impl Into<String>) -> MountPoints {
        self.files.insert(path.into());
        self
    }

    /// Adds a directory mount point (a workspace, a tmpfs).
    pub fn dir(mut self, path: impl Into<String>) -> MountPoints {
        self.dirs.insert(path.into());
        self
    }

    /// The file mount points, sorted.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.files.iter().map(String::as_str)
    }

    /// The directory mount points, sorted.
    pub fn dirs(&self) -> impl Iterator<Item = &str> {
        self.dirs.iter().map(String::as_str)
    }

    /// Each path is absolute and plain (no `.`, `..`, or `//`), not `/`
    /// itself, named once, and no file is the parent of another mount point.
    pub(crate) fn validate(&self) -> Result<(), ImageError> {
        let invalid = |path: &str, reason: &str| ImageError::InvalidMountPoint {
            path: path.to_owned(),
            reason: reason.to_owned(),
        };
        for path in self.files.iter().chain(&self.dirs) {
            if !path.starts_with('/') {
                return Err(invalid(path, "must be an absolute path"));
            }
            if path == "/" {
                return Err(invalid(path, "cannot be the root itself"));
            }
            let plain = path[1..]
                .split('/')
                .all(|part| !part.is_empty() && part != "." && part != "..")
                && !path.contains('\0');
            if !plain {
                return Err(invalid(
                    path,
                    "must be a plain path (no `.`, `..`, empty parts or a trailing `/`)",
                ));
            }
        }
        if let Some(both) = self.files.intersection(&self.dirs).next() {
            return Err(invalid(both, "is named both as a file and as a directory"));
        }
        for file in &self.files {
            let prefix = format!("{file}/");
            if let Some(below) = self
                .files
                .iter()
                .chain(&self.dirs)
                .find(|p| p.starts_with(&prefix))
            {
                return Err(invalid(
                    below,
                    &format!("lies below the file mount point `{file}`"),
                ));
            }
        }
        Ok(())
    }

    /// The components of each path below `/`, with whether it is a file.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&Path, bool)> {
        let files = self.files.iter().map(|p| (Path::new(p), true));
        let dirs = self.dirs.iter().map(|p| (Path::new(p), false));
        files.chain(dirs)
    }

    /// A short name for this set, part of the cached image's directory name:
    /// the same image with other mount points is another tree.
    pub fn key(&self) -> String {
        let mut text = String::new();
        for (path, is_file) in self.entries() {
            text.push(if is_file { 'f' } else { 'd' });
            text.push(' ');
            text.push_str(&path.to_string_lossy());
            text.push('\n');
        }
        Digest::of_bytes(text.as_bytes()).hex()[..12].to_owned()
    }
}

/// The relative components of a validated mount point.
pub(crate) fn relative_components(path: &Path) -> impl Iterator<Item = &std::ffi::OsStr> {
    path.components().filter_map(|c| match c {
        Component::Normal(part) => Some(part),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_mount_points() {
        let good = MountPoints::new()
            .file("/sandbox/program")
            .dir("/sandbox/work")
            .dir("/tmp");
        assert!(good.validate().is_ok());
        for bad in ["relative", "/", "/a/../b", "/a//b", "/a/", "/./a"] {
            assert!(
                MountPoints::new().dir(bad).validate().is_err(),
                "{bad} accepted"
            );
        }
        assert!(MountPoints::new().file("/a").dir("/a").validate().is_err());
        assert!(
            MountPoints::new()
                .file("/a")
                .dir("/a/b")
                .validate()
                .is_err()
        );
    }

    #[test]
    fn the_key_depends_on_the_set_only() {
        let a = MountPoints::new().file("/p").dir("/w");
        let b = MountPoints::new().dir("/w").file("/p");
        assert_eq!(a.key(), b.key());
        assert_ne!(a.key(), MountPoints::new().dir("/p").dir("/w").key());
        assert_ne!(a.key(), MountPoints::new().key());
    }
}
