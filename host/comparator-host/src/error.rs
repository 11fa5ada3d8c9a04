//! Errors of the comparator host. Problems of a guest *during a comparison*
//! are not errors: they are [`crate::ComparisonOutcome::Undetermined`].

use std::path::PathBuf;

/// Why the host could not be set up, a comparator not be loaded, or a call not
/// be made.
#[derive(Debug, thiserror::Error)]
pub enum ComparatorError {
    /// The wasmtime engine refused the configuration.
    #[error("cannot create the WebAssembly engine: {0}")]
    Engine(String),
    /// No comparator of that name is registered.
    #[error("unknown comparator \"{name}\" (known: {known})")]
    UnknownComparator {
        name: String,
        /// The registered names, comma separated.
        known: String,
    },
    /// A comparator of that name is already registered.
    #[error("comparator \"{0}\" is already registered")]
    Duplicate(String),
    /// A user comparator's file could not be read.
    #[error("comparator \"{name}\": cannot read {}: {cause}", path.display())]
    Read {
        name: String,
        path: PathBuf,
        cause: std::io::Error,
    },
    /// A user comparator's file is not the one pinned in the configuration.
    #[error(
        "comparator \"{name}\": {} has sha256 {actual}, but the configuration pins {expected}; \
         refusing to load it (rebuild it or update the pin)",
        path.display()
    )]
    PinMismatch {
        name: String,
        path: PathBuf,
        /// The sha256 in the configuration.
        expected: String,
        /// The sha256 of the file.
        actual: String,
    },
    /// The pin in the configuration is not a sha256 in hex.
    #[error("comparator \"{name}\": sha256 pin \"{pin}\" is not 64 hex digits")]
    BadPin {
        name: String,
        /// The pin as written.
        pin: String,
    },
    /// The file is not a comparator or checker component this host can run.
    #[error(
        "comparator \"{name}\" is not a usable progscore component (progscore:comparator@0.2.0, \
         progscore:comparator@0.1.0 or progscore:checker@0.1.0): {message}"
    )]
    NotAComparator {
        name: String,
        /// What is wrong (compile, link or export-check failure).
        message: String,
    },
    /// The name is registered in the other role: `compare` or `validate` on
    /// a checker, `check` or `validate_checker` on a comparator.
    #[error(
        "\"{name}\" is a {actual}, not a {wanted}: {}",
        match actual {
            crate::ComparatorRole::Checker => "call check (with the input and the answer), not compare",
            crate::ComparatorRole::Comparator => "call compare, not check",
        }
    )]
    WrongRole {
        name: String,
        /// What it is.
        actual: crate::ComparatorRole,
        /// What the call needs.
        wanted: crate::ComparatorRole,
    },
    /// The comparator refused its parameters.
    #[error("comparator \"{name}\": invalid parameters: {message}")]
    InvalidParams {
        name: String,
        /// The comparator's explanation.
        message: String,
    },
    /// `validate` itself failed (trap, deadline, memory), so the parameters
    /// could not be checked.
    #[error("comparator \"{name}\": validate failed: {message}")]
    ValidateFailed {
        name: String,
        /// What happened.
        message: String,
    },
    /// The compiled-comparator cache could not be used.
    #[error("comparator cache {}: {message}", path.display())]
    Cache {
        /// The cache path involved.
        path: PathBuf,
        message: String,
    },
}
