//! What can stop a report.

use progscore_scoring::evidence::StoreError;

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A results file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A result line is not what `progscore score` writes.
    #[error("{path}:{line}: {message}")]
    Line {
        path: String,
        line: usize,
        message: String,
    },
    /// The results hold no line at all.
    #[error("{path}: no result lines")]
    Empty { path: String },
    /// The evidence store failed (not a fault of any line).
    #[error("evidence store {location}: {source}")]
    Store {
        location: String,
        #[source]
        source: StoreError,
    },
    /// The template failed to render.
    #[error("cannot render the page: {0}")]
    Render(#[from] askama::Error),
    /// The data could not be serialised.
    #[error("cannot serialise the page's data: {0}")]
    Data(#[from] serde_json::Error),
}
