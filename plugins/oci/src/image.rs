//! The images a client's profiles run: prepared once per image per client
//! (fetched by digest if missing, unpacked, their tree verified), then
//! shared by every invocation.

use std::collections::HashMap;
use std::sync::Arc;

use progscore_oci_image::{CacheOptions, CachedImage, ImageCache, TreeLease};
use progscore_sandbox::{RuntimeProfile, SandboxError};
use tokio::sync::Mutex;

use crate::bundle;
use crate::invocation::ImageInUse;
use crate::options::OciOptions;

pub(crate) struct Images {
    cache: ImageCache,
    /// By image reference. The lock is held while an image is prepared, so
    /// concurrent first calls prepare it once. Each tree's lease is held as
    /// long as the client (its containers may run on the tree until then):
    /// another process that finds the tree damaged rebuilds it beside this
    /// one and never deletes it under a running program.
    prepared: Mutex<HashMap<String, (Arc<ImageInUse>, TreeLease)>>,
}

impl Images {
    pub(crate) fn new(options: &OciOptions) -> Result<Images, SandboxError> {
        let cache = ImageCache::new(
            &options.image_cache,
            CacheOptions {
                http_registries: options.http_registries.clone(),
                ..CacheOptions::default()
            },
        )
        .map_err(|e| SandboxError::Setup {
            message: format!("the image cache: {e}"),
        })?;
        Ok(Images {
            cache,
            prepared: Mutex::new(HashMap::new()),
        })
    }

    /// Every image in the cache, each checked against its recorded tree.
    pub(crate) fn cached(&self) -> Vec<CachedImage> {
        self.cache.list()
    }

    /// The profile's image, ready to run.
    pub(crate) async fn prepare(
        &self,
        profile: &RuntimeProfile,
    ) -> Result<Arc<ImageInUse>, SandboxError> {
        let reference = profile
            .image()
            .map(|image| image.to_string())
            .unwrap_or_default();
        // Every mount point the bundle names exists in the shared tree, so
        // the runtime never creates one in it (see bundle::mount_points).
        let mount_points = bundle::mount_points(profile);
        let key = format!("{reference} {}", mount_points.key());
        let mut prepared = self.prepared.lock().await;
        if let Some((image, _)) = prepared.get(&key) {
            return Ok(image.clone());
        }
        let image = self
            .cache
            .prepare(&reference, &mount_points)
            .await
            .map_err(|e| image_error(profile, &reference, e))?;
        if let Some(note) = &image.repaired {
            tracing::warn!("image {reference}: {note}");
        }
        let in_use = Arc::new(ImageInUse {
            home: bundle::home_of(&image.rootfs, profile),
            env: image.facts.env.clone(),
            manifest_digest: image.manifest_digest.to_string(),
            config_digest: image.config_digest.to_string(),
            rootfs: image.rootfs.clone(),
        });
        prepared.insert(key, (in_use.clone(), image.lease));
        Ok(in_use)
    }
}

fn image_error(
    profile: &RuntimeProfile,
    reference: &str,
    error: progscore_oci_image::ImageError,
) -> SandboxError {
    use progscore_oci_image::ImageError;
    match error {
        // The registry did not answer, or another preparation of the image
        // held its lock past the bound: nothing is known, worth retrying.
        ImageError::Registry { .. } | ImageError::LockTimeout { .. } => {
            SandboxError::EngineUnavailable {
                message: error.to_string(),
            }
        }
        ImageError::NotFound { .. } => SandboxError::ArtifactMissing {
            profile: profile.name.clone(),
            artifact: reference.to_string(),
            hint: error.to_string(),
        },
        other => SandboxError::ArtifactRefused {
            profile: profile.name.clone(),
            artifact: reference.to_string(),
            reason: other.to_string(),
        },
    }
}
