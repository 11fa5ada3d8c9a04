//! Pinned OCI images without a daemon: fetched straight from a registry,
//! verified link by link, and unpacked once into a content-addressed cache of
//! root filesystems that runc or runsc mount read-only, shared by every
//! container that runs the image.
//!
//! ```no_run
//! # async fn example() -> Result<(), progscore_oci_image::ImageError> {
//! use progscore_oci_image::{CacheOptions, DEFAULT_CACHE_ROOT, ImageCache, MountPoints};
//!
//! let cache = ImageCache::new(DEFAULT_CACHE_ROOT, CacheOptions::default())?;
//! let mounts = MountPoints::new().file("/sandbox/program").dir("/tmp");
//! let image = cache
//!     .prepare("127.0.0.1:5000/python-sandbox@sha256:379e71d9d251ff242a9853a958646f7cc3a7145a80bba34276c56903d0865e42", &mounts)
//!     .await?;
//! println!("{} {:?}", image.rootfs.display(), image.facts.env);
//! # Ok(()) }
//! ```
//!
//! # The cache
//!
//! ```text
//! <root>/                           default /var/cache/progscore/oci; 0700
//!   blobs/sha256/<hex>              verified blobs: manifests, indexes, configs,
//!                                   layers as fetched (compressed); shared by
//!                                   every image, kept so that a damaged tree is
//!                                   rebuilt without the network
//!   trees/<pinned-hex>-<mounts>/    one prepared image: the pinned digest, and
//!                                   12 hex digits naming its set of mount points
//!     <generation>/                 1, 2, ...: the highest is current
//!       rootfs/                     the unpacked tree (never written after)
//!       image.json                  what it was made from, its facts, its tree digest
//!     .tmp-*                        a build in progress (renamed into place when done)
//!     .trash-*                      an unused generation being removed
//!   locks/<name>.lock               one preparation of an image at a time
//! ```
//!
//! The top is private to the user running progscore (0700): the trees hold
//! set-id binaries, device nodes and world-writable folders of image layers,
//! and no other local user may take (and hold forever) an image's lock. A
//! preparation waits for that lock up to [`CacheOptions::lock_wait`], then
//! fails naming the lock file and its holder.
//!
//! A build happens in a directory beside the final one and is renamed into
//! place, so a crash leaves no half image (its leftovers are removed by the
//! next preparation). Processes preparing the same image at once wait on its
//! lock file; blobs are written beside their final name and renamed, so two
//! images sharing a layer can be prepared at once.
//!
//! Every user of a tree holds a shared lock on its generation
//! ([`TreeLease`], in [`PreparedImage::lease`]) while containers may run on
//! it. A tree found damaged is never repaired in place nor deleted: the
//! rebuilt tree is a new generation, and an older one is deleted by a later
//! preparation once no one holds it (an exclusive lock on it can be taken).
//!
//! # The verification chain
//!
//! 1. The reference must pin a digest: `registry/repository@sha256:<hex>`.
//!    A tag, or a malformed digest, is refused before any network access.
//! 2. The manifest's raw bytes must hash to the pinned digest. An index
//!    (manifest list) is accepted the same way; its entry for
//!    `linux/<this architecture>` is fetched and checked against the digest
//!    the index gives.
//! 3. The config and every layer are streamed into files while hashed, and
//!    must match the digests and sizes of the manifest's descriptors.
//! 4. Each layer, uncompressed while it is unpacked, must hash to the
//!    config's `rootfs.diff_ids` entry.
//! 5. The unpacked tree (mount points included) gets a tree digest (see
//!    below) recorded in `image.json`. Each `prepare` of a cached image
//!    recomputes it, and checks again that the cached manifest and config
//!    hash to their digests and agree with the record, so the facts handed
//!    out (`Env`, `WorkingDir`, `User`, `Entrypoint`, `Cmd`) always come from
//!    the verified config. A mismatch is never handed out: the tree is rebuilt
//!    from the cached blobs (each verified again; a damaged or missing one is
//!    fetched again) and [`PreparedImage::repaired`] says what was wrong.
//!
//! The tree digest covers each entry's path, type, permission bits, owner,
//! size, content sha256, symbolic link target and device number, walked in
//! sorted order; times and inode numbers are left out. It detects a cached
//! file changed by accident or by a careless hand; someone able to rewrite
//! both the tree and its `image.json` is not detected (such a user can
//! replace the progscore binary too).
//!
//! # What is refused
//!
//! - references not pinned by a sha256 digest;
//! - images declaring `Volumes` (as the Docker backend refuses them);
//! - images for another OS or architecture;
//! - layers that are not tar or gzip-compressed tar (zstd, foreign layers);
//! - layer entries with an absolute path or `..`, entries under a symbolic
//!   link of the tree (nothing is ever written through a link: `a -> /etc`
//!   then `a/passwd` is refused), hard links to what does not exist in the
//!   tree, unknown entry types.
//!
//! Layers are applied as an engine would: modes, owners, set-id bits,
//! symbolic and hard links, devices and FIFOs, modification times, and OCI
//! whiteouts (`.wh.<name>`, `.wh..wh..opq`). Extended attributes are not
//! applied (file capabilities among them; the sandbox grants none). Besides
//! the layers, the only change made to the tree is the creation of the
//! caller's [`MountPoints`] (Docker creates them in each container's own
//! layer; here they must exist beforehand because the tree is read-only and
//! shared).

mod cache;
mod digest;
mod error;
mod manifest;
mod options;
mod reference;
mod registry;
mod store;
mod tree;
mod unpack;

pub use cache::{CachedImage, ImageCache, PreparedImage};
pub use error::{ImageError, UnpackError};
pub use manifest::ImageFacts;
pub use options::{
    CacheOptions, DEFAULT_CACHE_ROOT, DEFAULT_HTTP_REGISTRIES, MountPoints, host_architecture,
};
pub use store::TreeLease;
