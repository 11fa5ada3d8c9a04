//! How a [`crate::ComparatorHost`] is set up: its cache and its limits.

use std::path::PathBuf;
use std::time::Duration;

/// Settings of a [`ComparatorHost`].
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// Where compiled comparators are cached; `None` compiles at every start.
    pub cache_dir: Option<PathBuf>,
    /// Wall-clock budget of one `validate` or `compare` call.
    pub call_timeout: Duration,
    /// Linear-memory cap of one call, in bytes.
    pub memory_limit: usize,
    /// Calls running at once; more wait for a free slot. Also sizes the
    /// pooling allocator.
    pub max_concurrent_calls: u32,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            cache_dir: HostOptions::default_cache_dir(),
            call_timeout: Duration::from_secs(2),
            memory_limit: 64 << 20,
            max_concurrent_calls: 16,
        }
    }
}

impl HostOptions {
    /// `$XDG_CACHE_HOME/progscore/comparators`, else
    /// `$HOME/.cache/progscore/comparators`; `None` when neither is set.
    pub fn default_cache_dir() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|home| PathBuf::from(home).join(".cache"))
            })?;
        Some(base.join("progscore").join("comparators"))
    }
}
