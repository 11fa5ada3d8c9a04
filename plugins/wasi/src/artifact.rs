//! The pinned runtime files: checked by sha256, compiled once, cached on disk.
//!
//! The module and the stdlib are read once per client and profile; a file whose
//! sha256 differs from the profile's pin is refused, naming both hashes. The
//! compiled module (≈ 290 MB of native code, ≈ 48 s to produce) is cached under
//! a name made of the module's sha256, the wasmtime version and a hash of the
//! engine settings, so it is compiled once per machine and deserialized in
//! milliseconds afterwards. The stdlib is copied from the verified bytes into
//! the cache as `stdlib-<sha256>/python315.zip`, a folder that holds nothing
//! else, so the guest's read-only preopen exposes only that archive.

use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use progscore_sandbox::{Artifact, PinnedFile, RuntimeProfile, SandboxError};
use sha2::{Digest, Sha256};
use wasmtime::Engine;

use crate::guest::{GUEST_STDLIB_NAME, engine_config};

/// The wasmtime version this crate is built against (pinned `=48.0.8` in the
/// workspace); recorded in provenance and in cache file names.
pub const WASMTIME_VERSION: &str = "48.0.8";

/// How to provide a missing artifact.
const SETUP_HINT: &str = "run scripts/setup-wasi.sh (or scripts/setup.sh), which downloads and unpacks the pinned CPython WASI build; progscore never downloads anything";

/// A profile's runtime, checked and ready: what a guest request points at.
#[derive(Debug, Clone)]
pub(crate) struct PreparedRuntime {
    /// The compiled module in the cache.
    pub compiled: PathBuf,
    /// Whether it was compiled with fuel metering.
    pub fuel_engine: bool,
    /// Folder holding only the verified stdlib archive.
    pub stdlib_dir: Option<PathBuf>,
    /// The module's pinned sha256.
    pub module_sha256: String,
}

/// Checks the profile's files against their pins and makes sure the compiled
/// module and the stdlib copy are in `cache_dir`. Blocking; may take a minute
/// the first time (compilation).
pub(crate) fn prepare(
    profile: &RuntimeProfile,
    cache_dir: &Path,
) -> Result<PreparedRuntime, SandboxError> {
    let Artifact::WasmModule { module, stdlib } = &profile.artifact else {
        return Err(SandboxError::WrongBackend {
            profile: profile.name.clone(),
            backend: profile.backend.to_string(),
        });
    };
    let fuel_engine = profile.limits.fuel.is_some();
    create_private_dir(cache_dir)
        .map_err(|e| setup_error(cache_dir, "create the cache folder", &e))?;

    let stdlib_dir = match stdlib {
        Some(stdlib) => Some(stage_stdlib(profile, stdlib, cache_dir)?),
        None => None,
    };

    let engine = Engine::new(&engine_config(fuel_engine)).map_err(|e| SandboxError::Setup {
        message: format!("could not configure wasmtime: {e:#}"),
    })?;
    let compiled = cache_dir.join(compiled_name(&module.sha256, &engine));
    // The module is read and hashed even when the compiled copy exists: the pin
    // is checked on every client's first use, so a wrong file is always refused.
    let bytes = read_verified(profile, "module", module)?;
    if !compiled.is_file() {
        tracing::info!(profile = %profile.name, "compiling the WASI runtime module (about a minute, once per machine)");
        let native =
            engine
                .precompile_module(&bytes)
                .map_err(|e| SandboxError::ArtifactRefused {
                    profile: profile.name.clone(),
                    artifact: module.path.display().to_string(),
                    reason: format!("wasmtime could not compile it: {e:#}"),
                })?;
        write_atomically(&compiled, &native, 0o600)
            .map_err(|e| setup_error(&compiled, "write the compiled module", &e))?;
    }
    Ok(PreparedRuntime {
        compiled,
        fuel_engine,
        stdlib_dir,
        module_sha256: module.sha256.clone(),
    })
}

/// `<module sha256>-wasmtime-<version>-<engine settings hash>.cwasm`.
fn compiled_name(module_sha256: &str, engine: &Engine) -> String {
    // DefaultHasher::new() has fixed keys, so the name is stable across runs of
    // one build; a different build that hashes differently only recompiles.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!(
        "{module_sha256}-wasmtime-{WASMTIME_VERSION}-{:016x}.cwasm",
        hasher.finish()
    )
}

/// Copies the verified stdlib bytes to `cache_dir/stdlib-<sha>/python315.zip`.
fn stage_stdlib(
    profile: &RuntimeProfile,
    stdlib: &PinnedFile,
    cache_dir: &Path,
) -> Result<PathBuf, SandboxError> {
    let bytes = read_verified(profile, "stdlib", stdlib)?;
    let dir = cache_dir.join(format!("stdlib-{}", stdlib.sha256));
    let target = dir.join(GUEST_STDLIB_NAME);
    let present = fs::metadata(&target).is_ok_and(|m| m.is_file() && m.len() == bytes.len() as u64);
    if !present {
        create_private_dir(&dir).map_err(|e| setup_error(&dir, "create the stdlib folder", &e))?;
        write_atomically(&target, &bytes, 0o400)
            .map_err(|e| setup_error(&target, "write the stdlib copy", &e))?;
    }
    Ok(dir)
}

/// Reads a pinned file and checks its sha256.
fn read_verified(
    profile: &RuntimeProfile,
    field: &str,
    pinned: &PinnedFile,
) -> Result<Vec<u8>, SandboxError> {
    let artifact = format!("{field} {}", pinned.path.display());
    let mut file = match fs::File::open(&pinned.path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(SandboxError::ArtifactMissing {
                profile: profile.name.clone(),
                artifact,
                hint: SETUP_HINT.into(),
            });
        }
        Err(e) => return Err(setup_error(&pinned.path, "open", &e)),
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| setup_error(&pinned.path, "read", &e))?;
    let actual = hex::encode(Sha256::digest(&bytes));
    if actual != pinned.sha256 {
        return Err(SandboxError::ArtifactRefused {
            profile: profile.name.clone(),
            artifact,
            reason: format!(
                "its sha256 is {actual} but the profile pins {}; re-run scripts/setup-wasi.sh or fix the pin",
                pinned.sha256
            ),
        });
    }
    Ok(bytes)
}

/// Writes through a temporary file and renames, so a reader (another process
/// preparing the same cache) never sees half a file.
fn write_atomically(target: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = target
        .parent()
        .ok_or_else(|| io::Error::other("target has no parent folder"))?;
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.as_file()
        .set_permissions(fs::Permissions::from_mode(mode))?;
    temp.persist(target).map_err(|e| e.error)?;
    Ok(())
}

/// Creates a folder (and parents) readable by this user only.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

fn setup_error(path: &Path, what: &str, error: &io::Error) -> SandboxError {
    SandboxError::Setup {
        message: format!("could not {what} {}: {error}", path.display()),
    }
}
