//! What the cache fetches from the registry, and verifies before it is
//! used: the manifest (or index, then the platform's manifest), the config,
//! the layers; each blob taken from the cache while intact, fetched again
//! when missing or damaged.

use std::fs;
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::ImageCache;
use super::blocking;
use super::checks::{CONFIG_LIMIT, MANIFEST_LIMIT};
use super::install::unpack_and_install;
use crate::digest::Digest;
use crate::error::ImageError;
use crate::manifest::{
    Compression, Document, Manifest, parse_config, parse_document, pick_platform,
};
use crate::options::MountPoints;
use crate::reference::PinnedReference;
use crate::store::{
    BlobState, ImageRecord, LayerRecord, RECORD_FORMAT, check_blob, read_small_blob,
    store_small_blob,
};

impl ImageCache {
    /// Fetches what is missing, verifies everything, unpacks, records, and
    /// moves the tree into place.
    pub(super) async fn build(
        &self,
        pinned: &PinnedReference,
        mount_points: &MountPoints,
        name: &str,
        notes: &mut Vec<String>,
    ) -> Result<(ImageRecord, PathBuf), ImageError> {
        let started = Instant::now();
        let top = self.manifest_blob(pinned, &pinned.digest, notes).await?;
        let (index_digest, manifest_digest, manifest) =
            match parse_document(pinned, &pinned.digest, &top)? {
                Document::Manifest(manifest) => (None, pinned.digest.clone(), manifest),
                Document::Index(entries) => {
                    let chosen =
                        pick_platform(pinned, &pinned.digest, &entries, &self.architecture)?;
                    let bytes = self.manifest_blob(pinned, &chosen, notes).await?;
                    match parse_document(pinned, &chosen, &bytes)? {
                        Document::Manifest(manifest) => {
                            (Some(pinned.digest.clone()), chosen, manifest)
                        }
                        Document::Index(_) => {
                            return Err(ImageError::BadImage {
                                reference: pinned.text.clone(),
                                what: "manifest",
                                digest: chosen.to_string(),
                                reason: "is an index inside an index".into(),
                            });
                        }
                    }
                }
            };

        let config_digest = manifest.config.digest.clone();
        if manifest.config.size > CONFIG_LIMIT {
            return Err(ImageError::BadImage {
                reference: pinned.text.clone(),
                what: "config",
                digest: config_digest.to_string(),
                reason: format!(
                    "is {} bytes, more than a config can be",
                    manifest.config.size
                ),
            });
        }
        let config_path = self
            .blob_file(
                pinned,
                "config",
                &config_digest,
                manifest.config.size,
                notes,
            )
            .await?;
        let config_bytes =
            fs::read(&config_path).map_err(|e| ImageError::io("read", &config_path, e))?;
        let config = parse_config(pinned, &config_digest, &config_bytes)?;
        if !config.volumes.is_empty() {
            return Err(ImageError::Volumes {
                reference: pinned.text.clone(),
                volumes: config.volumes,
            });
        }
        let os_ok = config.os.is_empty() || config.os == "linux";
        let arch_ok = config.architecture.is_empty() || config.architecture == self.architecture;
        if !os_ok || !arch_ok {
            return Err(ImageError::BadImage {
                reference: pinned.text.clone(),
                what: "config",
                digest: config_digest.to_string(),
                reason: format!(
                    "is for {}/{}, and this host runs linux/{}",
                    config.os, config.architecture, self.architecture
                ),
            });
        }
        let layers = layer_records(pinned, &manifest, &config.diff_ids)?;

        for layer in &layers {
            let what = format!("layer {}", layer.digest);
            self.blob_file(pinned, &what, &layer.digest, layer.size, notes)
                .await?;
        }
        tracing::info!(
            reference = %pinned.text,
            elapsed = ?started.elapsed(),
            "image blobs fetched and verified"
        );

        let record = ImageRecord {
            format: RECORD_FORMAT,
            reference: pinned.text.clone(),
            pinned_digest: pinned.digest.clone(),
            index_digest,
            manifest_digest,
            config_digest,
            layers,
            facts: config.facts,
            mount_points: mount_points.clone(),
            // Filled in once the tree exists.
            tree_digest: Digest::of_bytes(b""),
            entries: 0,
            unpacked_bytes: 0,
            prepared_at_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        let unpacking = Instant::now();
        let (layout, name_owned, pinned_owned) =
            (self.layout.clone(), name.to_owned(), pinned.clone());
        let (record, generation) = blocking(pinned, "unpacking", move || {
            unpack_and_install(&layout, &name_owned, &pinned_owned, record)
        })
        .await?;
        tracing::info!(
            reference = %pinned.text,
            elapsed = ?unpacking.elapsed(),
            entries = record.entries,
            bytes = record.unpacked_bytes,
            "image unpacked"
        );
        Ok((record, generation))
    }

    /// A manifest or index by digest: from the cache if intact, else from
    /// the registry (then cached).
    async fn manifest_blob(
        &self,
        pinned: &PinnedReference,
        digest: &Digest,
        notes: &mut Vec<String>,
    ) -> Result<Vec<u8>, ImageError> {
        let path = self.layout.blob(digest);
        let (check_path, check_digest) = (path.clone(), digest.clone());
        let cached = blocking(pinned, "reading a cached manifest", move || {
            Ok(read_small_blob(&check_path, &check_digest, MANIFEST_LIMIT))
        })
        .await?;
        match cached {
            Ok(bytes) => return Ok(bytes),
            Err(BlobState::Damaged(why)) => {
                tracing::warn!(reference = %pinned.text, problem = %why, "fetching the manifest again");
                notes.push(format!("{why}; fetched manifest {digest} again"));
            }
            Err(_) => {}
        }
        let bytes = self.registry.manifest(pinned, digest).await?;
        store_small_blob(&self.layout, digest, &bytes)?;
        Ok(bytes)
    }

    /// The cached file of a blob, checked against its digest and size;
    /// fetched (again) when missing or damaged.
    pub(super) async fn blob_file(
        &self,
        pinned: &PinnedReference,
        what: &str,
        digest: &Digest,
        size: u64,
        notes: &mut Vec<String>,
    ) -> Result<PathBuf, ImageError> {
        let path = self.layout.blob(digest);
        let (check_path, check_digest) = (path.clone(), digest.clone());
        let state = blocking(pinned, "checking a cached blob", move || {
            Ok(check_blob(&check_path, &check_digest, Some(size)))
        })
        .await?;
        match state {
            BlobState::Intact => return Ok(path),
            BlobState::Missing => {}
            BlobState::Damaged(why) => {
                tracing::warn!(reference = %pinned.text, problem = %why, "fetching the {what} again");
                notes.push(format!("{why}; fetched {what} again"));
                if let Err(e) = fs::remove_file(&path)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    return Err(ImageError::io("remove", &path, e));
                }
            }
        }
        self.layout.remove_stale_downloads(digest);
        let download = self.layout.blob_download(digest);
        let fetched = self
            .registry
            .blob_to_file(pinned, what, digest, size, &download)
            .await;
        if let Err(e) = fetched {
            let _ = fs::remove_file(&download);
            return Err(e);
        }
        fs::rename(&download, &path).map_err(|e| {
            let _ = fs::remove_file(&download);
            ImageError::io("move into place", &path, e)
        })?;
        Ok(path)
    }
}

fn layer_records(
    pinned: &PinnedReference,
    manifest: &Manifest,
    diff_ids: &[Digest],
) -> Result<Vec<LayerRecord>, ImageError> {
    if diff_ids.len() != manifest.layers.len() {
        return Err(ImageError::BadImage {
            reference: pinned.text.clone(),
            what: "config",
            digest: manifest.config.digest.to_string(),
            reason: format!(
                "lists {} rootfs.diff_ids for the manifest's {} layers",
                diff_ids.len(),
                manifest.layers.len()
            ),
        });
    }
    manifest
        .layers
        .iter()
        .zip(diff_ids)
        .map(|(layer, diff_id)| {
            let compression = Compression::of_media_type(&layer.media_type).ok_or_else(|| {
                ImageError::UnsupportedLayer {
                    reference: pinned.text.clone(),
                    digest: layer.digest.to_string(),
                    media_type: layer.media_type.clone(),
                }
            })?;
            Ok(LayerRecord {
                digest: layer.digest.clone(),
                media_type: layer.media_type.clone(),
                compression,
                size: layer.size,
                diff_id: diff_id.clone(),
            })
        })
        .collect()
}
