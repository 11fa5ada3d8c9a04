//! The on-disk cache of compiled comparators.
//!
//! An entry is named by the component's sha256 and a hash of the engine's
//! compatibility (wasmtime version, target, and every setting that changes the
//! generated code), so a new progscore or a changed engine simply misses.
//!
//! Loading an entry maps native code into the process, so the cache directory
//! must be writable only by its owner: it is created 0700, and a directory
//! that others can write to is not used.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::ComparatorError;

/// Where compiled comparators are kept, if anywhere.
pub(crate) struct ComponentCache {
    dir: Option<PathBuf>,
    engine_key: String,
}

impl ComponentCache {
    /// A cache in `dir` (created if missing). `None` compiles every time.
    pub(crate) fn new(engine: &Engine, dir: Option<PathBuf>) -> Result<Self, ComparatorError> {
        if let Some(dir) = &dir {
            create_private_dir(dir)?;
        }
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = hex::encode(&hasher.0.finalize()[..8]);
        Ok(ComponentCache { dir, engine_key })
    }

    /// The compiled component for `bytes` (whose sha256 is `sha256`), from the
    /// cache or freshly compiled (and then stored). Failing to store is not
    /// fatal: the warning is returned next to the component.
    pub(crate) fn load(
        &self,
        engine: &Engine,
        name: &str,
        bytes: &[u8],
        sha256: &str,
    ) -> Result<(Component, Option<String>), ComparatorError> {
        let entry = self
            .dir
            .as_ref()
            .map(|dir| dir.join(format!("{sha256}-{}.cwasm", self.engine_key)));
        if let Some(entry) = &entry
            && entry.is_file()
        {
            // SAFETY: the entry was written by `Component::serialize` of an
            // engine with the same compatibility hash (it is in the name), into a
            // directory only this user can write (checked when the cache was
            // opened). wasmtime still checks the header and version; if it
            // refuses the file we recompile and overwrite it.
            if let Ok(component) = unsafe { Component::deserialize_file(engine, entry) } {
                return Ok((component, None));
            }
        }
        let component =
            Component::new(engine, bytes).map_err(|e| ComparatorError::NotAComparator {
                name: name.to_string(),
                message: format!("cannot compile it: {e:#}"),
            })?;
        let warning = entry.and_then(|entry| {
            store(&component, &entry).err().map(|e| {
                format!(
                    "comparator \"{name}\": not cached at {}: {e}",
                    entry.display()
                )
            })
        });
        Ok((component, warning))
    }
}

/// Writes the entry atomically (temporary file, then rename), so concurrent
/// progscore processes never read half an entry.
fn store(component: &Component, entry: &Path) -> Result<(), String> {
    let bytes = component.serialize().map_err(|e| e.to_string())?;
    let dir = entry.parent().ok_or("cache entry has no directory")?;
    let mut tmp = tempfile_in(dir).map_err(|e| e.to_string())?;
    tmp.1.write_all(&bytes).map_err(|e| e.to_string())?;
    tmp.1.sync_all().map_err(|e| e.to_string())?;
    fs::rename(&tmp.0, entry).map_err(|e| {
        // The temporary file is useless now; a failure to remove it is
        // reported along with the rename error.
        match fs::remove_file(&tmp.0) {
            Ok(()) => e.to_string(),
            Err(e2) => format!("{e} (and removing {} failed: {e2})", tmp.0.display()),
        }
    })
}

fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, fs::File)> {
    let path = dir.join(format!(
        ".tmp-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let file = fs::File::create(&path)?;
    Ok((path, file))
}

fn create_private_dir(dir: &Path) -> Result<(), ComparatorError> {
    let err = |message: String| ComparatorError::Cache {
        path: dir.to_path_buf(),
        message,
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| err(format!("cannot create it: {e}")))?;
        let mode = fs::metadata(dir)
            .map_err(|e| err(format!("cannot inspect it: {e}")))?
            .permissions()
            .mode();
        if mode & 0o022 != 0 {
            return Err(err(format!(
                "it is writable by other users (mode {:o}); compiled code loaded from it \
                 could be replaced, so it is not used. Run `chmod go-w` on it or choose \
                 another cache directory",
                mode & 0o777
            )));
        }
    }
    #[cfg(not(unix))]
    fs::create_dir_all(dir).map_err(|e| err(format!("cannot create it: {e}")))?;
    Ok(())
}

/// Feeds `Hash` output into sha256, which (unlike `DefaultHasher`) is stable
/// across Rust releases.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        // Only the digest of the whole input is used.
        0
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}
