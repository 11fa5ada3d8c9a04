//! The image cache: `prepare`, `verify`, `list`.

use std::fs::{self, DirBuilder, File};
use std::io::{BufReader, Read};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use flate2::read::MultiGzDecoder;

use crate::digest::{Digest, HashingReader};
use crate::error::{ImageError, UnpackError};
use crate::manifest::{
    Compression, Document, ImageFacts, Manifest, parse_config, parse_document, pick_platform,
};
use crate::options::{CacheOptions, MountPoints};
use crate::reference::PinnedReference;
use crate::registry::Registry;
use crate::store::{
    BlobState, ImageRecord, LayerRecord, Layout, RECORD_FORMAT, ROOTFS_DIR, TreeLease, check_blob,
    read_record, read_small_blob, store_small_blob, write_record,
};
use crate::tree::tree_digest;
use crate::unpack::Rootfs;

/// A manifest or index larger than this is refused (Docker's limit).
const MANIFEST_LIMIT: u64 = 4 << 20;
/// An image config larger than this is refused (real ones are a few KiB).
const CONFIG_LIMIT: u64 = 16 << 20;

/// Pinned images, fetched once, verified, and unpacked into read-only root
/// filesystems shared by every container that runs them. See the crate
/// documentation for the layout and the checks.
pub struct ImageCache {
    layout: Layout,
    registry: Registry,
    architecture: String,
}

/// A root filesystem ready to run, and what the runtime needs to know of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedImage {
    /// The reference as the caller wrote it.
    pub reference: String,
    /// The unpacked tree (`<cache>/trees/<name>/<generation>/rootfs`):
    /// mount it read-only, never write to it (every mount point a
    /// container needs must be among the `mount_points`).
    pub rootfs: PathBuf,
    /// The digest the reference pins (the image manifest's, or an index's).
    pub pinned_digest: String,
    /// The digest of the image manifest that was unpacked (the pinned one,
    /// or the index's entry for this platform).
    pub manifest_digest: String,
    /// The digest of the image config the facts come from.
    pub config_digest: String,
    /// The layers' (compressed) digests, bottom first.
    pub layer_digests: Vec<String>,
    /// `Env`, `WorkingDir`, `User`, `Entrypoint`, `Cmd` of the config.
    pub facts: ImageFacts,
    /// The digest of the whole tree, mount points included.
    pub tree_digest: String,
    /// The sum of the tree's regular files' sizes.
    pub unpacked_bytes: u64,
    /// The mount points created in the tree.
    pub mount_points: MountPoints,
    /// Set when the cached tree (or a cached blob) was found damaged and was
    /// rebuilt (or fetched again) during this call: what was wrong.
    pub repaired: Option<String>,
    /// Keeps the tree from being deleted: hold it (or a clone) for as long
    /// as containers may run on `rootfs`. A tree judged damaged later is
    /// rebuilt beside it, and it is deleted only once no one holds it.
    pub lease: TreeLease,
}

/// One cached image, as `list` found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedImage {
    /// The image's current generation (`<cache>/trees/<name>/<generation>`).
    pub dir: PathBuf,
    /// The reference it was first prepared for, when its record is readable.
    pub reference: Option<String>,
    /// The unpacked image manifest's digest, when its record is readable.
    pub manifest_digest: Option<String>,
    /// The recorded tree digest, when its record is readable.
    pub tree_digest: Option<String>,
    /// The sum of the tree's regular files' sizes (0 when unreadable).
    pub unpacked_bytes: u64,
    /// What is wrong with it (a changed tree, a damaged blob, an unreadable
    /// record); empty when it is intact. `prepare` repairs any of these.
    pub problems: Vec<String>,
}

impl CachedImage {
    /// Whether every check passed.
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty()
    }
}

/// What was found under the image's name.
enum Cached {
    Missing,
    /// The tree (in this generation) and its record are intact; the layer
    /// blobs are not checked yet.
    Intact(Box<ImageRecord>, PathBuf),
    Damaged(String),
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

    /// Fetches what is missing, verifies everything, unpacks, records, and
    /// moves the tree into place.
    async fn build(
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
    async fn blob_file(
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

/// Runs blocking work (hashing, unpacking, waiting for a lock) off the async
/// runtime's threads.
async fn blocking<T: Send + 'static>(
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

/// Unpacks the (verified) layer blobs into a fresh directory in the
/// image's folder, creates the mount points, records the tree, and renames
/// the directory into place as the newest generation. A failure leaves
/// nothing behind.
fn unpack_and_install(
    layout: &Layout,
    name: &str,
    pinned: &PinnedReference,
    mut record: ImageRecord,
) -> Result<(ImageRecord, PathBuf), ImageError> {
    let build = layout.image_build(name)?;
    let result = build_tree(layout, &build, pinned, &mut record);
    if let Err(e) = result {
        if let Err(cleanup) = fs::remove_dir_all(&build) {
            tracing::warn!(path = %build.display(), error = %cleanup, "cannot remove a failed image build");
        }
        // The image's folder, when nothing else is in it (a first build).
        let _ = fs::remove_dir(layout.image(name));
        return Err(e);
    }
    let generation = layout.install(name, &build)?;
    Ok((record, generation))
}

fn build_tree(
    layout: &Layout,
    build: &Path,
    pinned: &PinnedReference,
    record: &mut ImageRecord,
) -> Result<(), ImageError> {
    let rootfs_path = build.join(ROOTFS_DIR);
    for dir in [build, rootfs_path.as_path()] {
        DirBuilder::new()
            .mode(0o755)
            .create(dir)
            .map_err(|e| ImageError::io("create", dir, e))?;
    }
    let mut rootfs = Rootfs::new(&rootfs_path);
    for layer in &record.layers {
        let layer_error = |source: UnpackError| ImageError::Layer {
            reference: pinned.text.clone(),
            layer: layer.digest.to_string(),
            cause: source,
        };
        let path = layout.blob(&layer.digest);
        let file = File::open(&path).map_err(|e| ImageError::io("open", &path, e))?;
        let reader: Box<dyn Read> = match layer.compression {
            Compression::Gzip => Box::new(MultiGzDecoder::new(BufReader::with_capacity(
                256 * 1024,
                file,
            ))),
            Compression::None => Box::new(BufReader::with_capacity(256 * 1024, file)),
        };
        let mut hashing = HashingReader::new(reader);
        rootfs.apply_layer(&mut hashing).map_err(layer_error)?;
        let (diff_id, _) = hashing
            .finish()
            .map_err(|source| layer_error(UnpackError::Archive { cause: source }))?;
        if diff_id != layer.diff_id {
            return Err(ImageError::DiffIdMismatch {
                reference: pinned.text.clone(),
                layer: layer.digest.to_string(),
                expected: layer.diff_id.to_string(),
                actual: diff_id.to_string(),
            });
        }
    }
    for (path, is_file) in record.mount_points.entries() {
        rootfs.create_mount_point(path, is_file).map_err(|reason| {
            ImageError::InvalidMountPoint {
                path: path.display().to_string(),
                reason,
            }
        })?;
    }
    rootfs.finish().map_err(|source| ImageError::Layer {
        reference: pinned.text.clone(),
        layer: "(directory times)".into(),
        cause: source,
    })?;
    let tree = tree_digest(&rootfs_path)?;
    record.tree_digest = tree.digest;
    record.entries = tree.entries;
    record.unpacked_bytes = tree.bytes;
    write_record(build, record)
}

/// The newest generation of cached image `name`, checked without the
/// network: its record, the manifest and config blobs it names, and its tree.
fn check_cached(
    layout: &Layout,
    name: &str,
    pinned: &PinnedReference,
    mount_points: &MountPoints,
) -> Cached {
    let Some(dir) = layout.generations(name).pop() else {
        return Cached::Missing;
    };
    let record = match read_record(&dir) {
        Ok(record) => record,
        Err(why) => return Cached::Damaged(why),
    };
    if record.pinned_digest != pinned.digest || &record.mount_points != mount_points {
        return Cached::Damaged(format!(
            "{} records another image or other mount points",
            dir.display()
        ));
    }
    if let Err(why) = check_chain(layout, pinned, &record, false) {
        return Cached::Damaged(why);
    }
    let rootfs = dir.join(ROOTFS_DIR);
    match tree_digest(&rootfs) {
        Ok(tree) if tree.digest == record.tree_digest => Cached::Intact(Box::new(record), dir),
        Ok(tree) => Cached::Damaged(format!(
            "the cached root filesystem {} changed since it was prepared (tree digest {}, {} \
             was recorded)",
            rootfs.display(),
            tree.digest,
            record.tree_digest
        )),
        Err(e) => Cached::Damaged(e.to_string()),
    }
}

/// Checks that the record agrees with the cached blobs it names: manifest
/// (and index), config (the facts are those of the config), and, if asked,
/// the layers.
fn check_chain(
    layout: &Layout,
    pinned: &PinnedReference,
    record: &ImageRecord,
    layers: bool,
) -> Result<(), String> {
    let read = |digest: &Digest, limit: u64| {
        read_small_blob(&layout.blob(digest), digest, limit).map_err(|s| blob_problem(digest, s))
    };
    let top = read(&record.pinned_digest, MANIFEST_LIMIT)?;
    let manifest =
        match parse_document(pinned, &record.pinned_digest, &top).map_err(|e| e.to_string())? {
            Document::Manifest(manifest) => {
                if record.index_digest.is_some() || record.manifest_digest != record.pinned_digest {
                    return Err("image.json does not match the cached manifest".into());
                }
                manifest
            }
            Document::Index(entries) => {
                let listed = entries.iter().any(|e| e.digest == record.manifest_digest);
                if record.index_digest.as_ref() != Some(&record.pinned_digest) || !listed {
                    return Err("image.json does not match the cached index".into());
                }
                let bytes = read(&record.manifest_digest, MANIFEST_LIMIT)?;
                match parse_document(pinned, &record.manifest_digest, &bytes)
                    .map_err(|e| e.to_string())?
                {
                    Document::Manifest(manifest) => manifest,
                    Document::Index(_) => return Err("the cached manifest is an index".into()),
                }
            }
        };
    let layer_digests: Vec<&Digest> = manifest.layers.iter().map(|l| &l.digest).collect();
    let recorded: Vec<&Digest> = record.layers.iter().map(|l| &l.digest).collect();
    if manifest.config.digest != record.config_digest || layer_digests != recorded {
        return Err("image.json does not match the cached manifest's config and layers".into());
    }
    let config_bytes = read(&record.config_digest, CONFIG_LIMIT)?;
    let config =
        parse_config(pinned, &record.config_digest, &config_bytes).map_err(|e| e.to_string())?;
    let diff_ids: Vec<&Digest> = record.layers.iter().map(|l| &l.diff_id).collect();
    if config.facts != record.facts || config.diff_ids.iter().collect::<Vec<_>>() != diff_ids {
        return Err("image.json does not match the cached image config".into());
    }
    if layers {
        for layer in &record.layers {
            let state = check_blob(&layout.blob(&layer.digest), &layer.digest, Some(layer.size));
            if state != BlobState::Intact {
                return Err(blob_problem(&layer.digest, state));
            }
        }
    }
    Ok(())
}

fn blob_problem(digest: &Digest, state: BlobState) -> String {
    match state {
        BlobState::Missing => format!("the cached blob {digest} is missing"),
        BlobState::Damaged(why) => why,
        BlobState::Intact => format!("the cached blob {digest} is intact"),
    }
}

fn check_listed(layout: &Layout, dir: PathBuf) -> CachedImage {
    let mut listed = CachedImage {
        dir: dir.clone(),
        reference: None,
        manifest_digest: None,
        tree_digest: None,
        unpacked_bytes: 0,
        problems: Vec::new(),
    };
    let record = match read_record(&dir) {
        Ok(record) => record,
        Err(why) => {
            listed.problems.push(why);
            return listed;
        }
    };
    listed.reference = Some(record.reference.clone());
    listed.manifest_digest = Some(record.manifest_digest.to_string());
    listed.tree_digest = Some(record.tree_digest.to_string());
    listed.unpacked_bytes = record.unpacked_bytes;
    match PinnedReference::parse(&record.reference) {
        Ok(pinned) => {
            if let Err(why) = check_chain(layout, &pinned, &record, true) {
                listed.problems.push(why);
            }
        }
        Err(e) => listed.problems.push(e.to_string()),
    }
    let rootfs = dir.join(ROOTFS_DIR);
    match tree_digest(&rootfs) {
        Ok(tree) if tree.digest == record.tree_digest => {}
        Ok(tree) => listed.problems.push(format!(
            "the root filesystem {} changed since it was prepared (tree digest {}, {} was \
             recorded)",
            rootfs.display(),
            tree.digest,
            record.tree_digest
        )),
        Err(e) => listed.problems.push(e.to_string()),
    }
    listed
}

fn prepared(record: &ImageRecord, reference: &str, lease: TreeLease) -> PreparedImage {
    PreparedImage {
        reference: reference.to_owned(),
        rootfs: lease.generation().join(ROOTFS_DIR),
        pinned_digest: record.pinned_digest.to_string(),
        manifest_digest: record.manifest_digest.to_string(),
        config_digest: record.config_digest.to_string(),
        layer_digests: record.layers.iter().map(|l| l.digest.to_string()).collect(),
        facts: record.facts.clone(),
        tree_digest: record.tree_digest.to_string(),
        unpacked_bytes: record.unpacked_bytes,
        mount_points: record.mount_points.clone(),
        repaired: None,
        lease,
    }
}
