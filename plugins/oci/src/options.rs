//! Where an [`crate::OciClient`] keeps its state, and how long it gives the runtime.

use std::path::PathBuf;
use std::time::Duration;

/// The owner kind of OCI clients: their owners are named `progscore-oci-…`.
pub(crate) const OWNER_KIND: &str = "oci";

/// Default bound on each runtime command (starting a container, kill,
/// delete) and on the output's end after the program exited. Generous: on a
/// busy machine a start can take seconds, and its expiry costs a run.
pub const DEFAULT_RUNTIME_TIMEOUT: Duration = Duration::from_secs(120);

/// Where the backend keeps things and how long it waits for the runtime.
#[derive(Debug, Clone)]
pub struct OciOptions {
    /// The private folder (0700) under which each client registers its owner
    /// folder and keeps its workspaces and bundles.
    pub owner_root: PathBuf,
    /// Where each client's runtime state lives (`--root` of runc and runsc,
    /// one folder per owner): a killed progscore's containers are found
    /// there, and no other container ever is.
    pub state_root: PathBuf,
    /// The image cache (content-addressed; see `progscore_oci_image`).
    pub image_cache: PathBuf,
    /// Registries reached over plain HTTP (the loopback registry).
    pub http_registries: Vec<String>,
    /// Bound on each runtime command; its expiry is a sandbox error, never
    /// the program's time.
    pub runtime_timeout: Duration,
}

impl Default for OciOptions {
    fn default() -> Self {
        OciOptions {
            owner_root: progscore_sandbox::default_owner_root(),
            state_root: PathBuf::from("/run/progscore-oci"),
            image_cache: PathBuf::from("/var/cache/progscore/oci"),
            http_registries: vec!["127.0.0.1:5000".into(), "localhost:5000".into()],
            runtime_timeout: DEFAULT_RUNTIME_TIMEOUT,
        }
    }
}
