//! The image cache: `prepare`, `verify`, `list`.
//!
//! This file holds the cache and its public calls; what it fetches and
//! verifies from the registry is in `fetch`, how a tree is unpacked and put
//! in place in `install`, the checks of what is already cached in `checks`,
//! and the types it hands out in `images`.

mod checks;
mod fetch;
mod images;
mod install;

pub use images::{CachedImage, PreparedImage};

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use self::checks::{Cached, check_cached, check_listed};
use self::images::prepared;
use crate::error::ImageError;
use crate::options::{CacheOptions, MountPoints};
use crate::reference::PinnedReference;
use crate::registry::Registry;
use crate::store::Layout;
use crate::tree::tree_digest;

/// Pinned images, fetched once, verified, and unpacked into read-only root
/// filesystems shared by every container that runs them. See the crate
/// documentation for the layout and the checks.
pub struct ImageCache {
    layout: Layout,
    registry: Registry,
    architecture: String,
}

impl ImageCache {
    /// A cache rooted at `root` (created if missing). Nothing is contacted.
    pub fn new(root: impl Into<PathBuf>, options: CacheOptions) -> Result<ImageCache, ImageError> {
        Ok(ImageCache {
            layout: Layout::create(root.into(), options.lock_wait)?,
            registry: Registry::new(&options),
            architecture: options.architecture,
        })
    }

    /// The cache's root directory.
    pub fn root(&self) -> &Path {
        self.layout.root()
    }

    /// Returns the root filesystem of `reference` with `mount_points` in it.
    ///
    /// A cached image is used after its tree digest and the blobs it was
    /// made from are checked again, without contacting the registry (a
    /// damaged layer blob of an intact tree is fetched again, and the tree is
    /// handed out even if that fails). A missing image is fetched, verified
    /// and unpacked; a damaged one is rebuilt from the cached blobs (each
    /// verified again, and fetched again if missing or damaged), and
    /// `repaired` says why.
    /// A reference that is not pinned by a sha256 digest is refused before
    /// any network access.
    ///
    /// Concurrent calls for the same image, in this process or others, wait
    /// for one another (a lock file per image), up to the cache's
    /// `lock_wait`. A damaged tree is never deleted while someone holds a
    /// [`TreeLease`] on it: the rebuilt one is a new generation beside it.
    pub async fn prepare(
        &self,
        reference: &str,
        mount_points: &MountPoints,
    ) -> Result<PreparedImage, ImageError> {
        let pinned = PinnedReference::parse(reference)?;
        mount_points.validate()?;
        let name = format!("{}-{}", pinned.digest.hex(), mount_points.key());

        let layout = self.layout.clone();
        let lock_name = name.clone();
        let _lock = blocking(&pinned, "waiting for the image's lock", move || {
            layout.lock(&lock_name)
        })
        .await?;

        {
            let (layout, name) = (self.layout.clone(), name.clone());
            blocking(&pinned, "removing an interrupted build", move || {
                layout.remove_leftovers(&name)
            })
            .await?;
        }

        let started = Instant::now();
        let state = {
            let (layout, name, mounts) = (self.layout.clone(), name.clone(), mount_points.clone());
            let checked = pinned.clone();
            blocking(&pinned, "checking the cached image", move || {
                Ok(check_cached(&layout, &name, &checked, &mounts))
            })
            .await?
        };
        let mut notes = Vec::new();
        let (record, generation) = match state {
            Cached::Intact(record, generation) => {
                // The tree is intact, so it is handed out whatever happens
                // here; a layer blob that is damaged or missing is fetched
                // again so that the tree can still be rebuilt offline later.
                for layer in &record.layers {
                    let what = format!("layer {}", layer.digest);
                    let fetched = self
                        .blob_file(&pinned, &what, &layer.digest, layer.size, &mut notes)
                        .await;
                    if let Err(e) = fetched {
                        tracing::warn!(
                            reference,
                            error = %e,
                            "a cached layer blob is damaged or missing and could not be fetched again; \
                             the verified tree is used all the same"
                        );
                    }
                }
                tracing::debug!(
                    reference,
                    elapsed = ?started.elapsed(),
                    "cached image verified"
                );
                (*record, generation)
            }
            Cached::Missing => self.build(&pinned, mount_points, &name, &mut notes).await?,
            Cached::Damaged(why) => {
                tracing::warn!(reference, problem = %why, "cached image damaged; rebuilding it");
                notes.push(why);
                self.build(&pinned, mount_points, &name, &mut notes).await?
            }
        };
        let lease = {
            let (layout, name, current) = (self.layout.clone(), name.clone(), generation.clone());
            blocking(&pinned, "taking the tree's lease", move || {
                let lease = layout.lease(&current)?;
                layout.remove_unused_generations(&name, &current);
                Ok(lease)
            })
            .await?
        };
        let mut prepared = prepared(&record, &pinned.text, lease);
        if !notes.is_empty() {
            prepared.repaired = Some(notes.join("; "));
        }
        Ok(prepared)
    }

    /// Recomputes the tree digest of a prepared image and compares it with
    /// the one recorded when it was prepared. Blocking (it reads every
    /// file); call it from `spawn_blocking` in async code.
    pub fn verify(&self, image: &PreparedImage) -> Result<(), ImageError> {
        let tree = tree_digest(&image.rootfs)?;
        if tree.digest.to_string() != image.tree_digest {
            return Err(ImageError::Tampered {
                rootfs: image.rootfs.clone(),
                expected: image.tree_digest.clone(),
                actual: tree.digest.to_string(),
            });
        }
        Ok(())
    }

    /// Every cached image, each checked: its record, the blobs it was made
    /// from (layers included), and its tree. For `progscore doctor`.
    /// Blocking; it takes no locks, so an image being replaced at that
    /// moment may show a problem that `prepare` would not have.
    pub fn list(&self) -> Vec<CachedImage> {
        let trees = self.layout.trees();
        let names: Vec<String> = match fs::read_dir(&trees) {
            Ok(entries) => entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|name| !name.starts_with('.'))
                .collect(),
            Err(e) => {
                return vec![CachedImage {
                    dir: trees.clone(),
                    reference: None,
                    manifest_digest: None,
                    tree_digest: None,
                    unpacked_bytes: 0,
                    problems: vec![format!("cannot read {}: {e}", trees.display())],
                }];
            }
        };
        // The current generation of each image (older ones are only kept
        // while in use, and go once they are not).
        let mut dirs: Vec<PathBuf> = names
            .iter()
            .filter_map(|name| self.layout.generations(name).pop())
            .collect();
        dirs.sort();
        // Each check reads every byte of the image: one image per CPU at a
        // time, listed in order.
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, dirs.len().max(1));
        let layout = &self.layout;
        let mut checked: Vec<(usize, CachedImage)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|worker| {
                    let mine: Vec<(usize, PathBuf)> = dirs
                        .iter()
                        .enumerate()
                        .filter(|(index, _)| index % workers == worker)
                        .map(|(index, dir)| (index, dir.clone()))
                        .collect();
                    scope.spawn(move || {
                        mine.into_iter()
                            .map(|(index, dir)| (index, check_listed(layout, dir)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|handle| handle.join().expect("an image check panicked"))
                .collect()
        });
        checked.sort_by_key(|(index, _)| *index);
        checked.into_iter().map(|(_, image)| image).collect()
    }
}

/// Runs blocking work (hashing, unpacking, waiting for a lock) off the async
/// runtime's threads.
pub(super) async fn blocking<T: Send + 'static>(
    pinned: &PinnedReference,
    what: &'static str,
    work: impl FnOnce() -> Result<T, ImageError> + Send + 'static,
) -> Result<T, ImageError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|source| ImageError::Task {
            reference: pinned.text.clone(),
            what,
            cause: source,
        })?
}
