//! Where a [`crate::WasiClient`] runs guests and keeps its files.

use std::path::PathBuf;

use crate::worker::WorkerCommand;

/// Where guests run.
#[derive(Debug, Clone, PartialEq)]
pub enum Execution {
    /// Each invocation on its own thread of this process, at most `parallelism`
    /// at once. Simplest; slower in parallel (see the crate docs).
    InProcess {
        /// Invocations running at once.
        parallelism: usize,
    },
    /// Each invocation in one of `workers` single-threaded worker processes.
    Workers {
        /// How to start a worker.
        command: WorkerCommand,
        /// Worker processes (and so invocations running at once).
        workers: usize,
    },
}

impl Execution {
    /// Worker processes, one per available core.
    pub fn workers(command: WorkerCommand) -> Self {
        Execution::Workers {
            command,
            workers: available_cores(),
        }
    }

    pub(crate) fn parallelism(&self) -> usize {
        match self {
            Execution::InProcess { parallelism } => *parallelism,
            Execution::Workers { workers, .. } => *workers,
        }
        .max(1)
    }
}

/// How a [`WasiClient`] runs guests and where it keeps files.
#[derive(Debug, Clone, PartialEq)]
pub struct WasiOptions {
    /// Compiled modules and verified stdlib copies (created 0700). Compiling
    /// takes about a minute per module; everything after reuses this folder.
    pub cache_dir: PathBuf,
    /// The private folder (0700, created or checked) under which the client
    /// registers its owner folder, where per-run workspaces (the program,
    /// scratch folders) are created. Folders of progscore processes that
    /// died are removed when a client starts.
    pub owner_root: PathBuf,
    /// In-process threads or worker processes.
    pub execution: Execution,
}

impl WasiOptions {
    /// Worker processes started by `command`, one per core; the cache in
    /// `$XDG_CACHE_HOME/progscore/wasi` (or `~/.cache/progscore/wasi`);
    /// workspaces under [`progscore_sandbox::default_owner_root`].
    pub fn with_workers(command: WorkerCommand) -> Self {
        WasiOptions {
            cache_dir: default_cache_dir(),
            owner_root: progscore_sandbox::default_owner_root(),
            execution: Execution::workers(command),
        }
    }

    /// Guests on threads of this process, one at a time per core.
    pub fn in_process() -> Self {
        WasiOptions {
            cache_dir: default_cache_dir(),
            owner_root: progscore_sandbox::default_owner_root(),
            execution: Execution::InProcess {
                parallelism: available_cores(),
            },
        }
    }
}

pub(crate) fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub(crate) fn default_cache_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("progscore").join("wasi")
}
