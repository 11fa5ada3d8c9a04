//! What can stop a report.

use progscore_scoring::evidence::StoreError;

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A results file could not be read.
    #[error("cannot read {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
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
    #[error("evidence store {location}: {cause}")]
    Store { location: String, cause: StoreError },
    /// The template failed to render.
    #[error("cannot render the page: {0}")]
    Render(askama::Error),
    /// The data could not be serialised.
    #[error("cannot serialise the page's data: {0}")]
    Data(serde_json::Error),
}

// The message quotes the cause, so it is not also this error's source
// (a caller printing the chain would say it twice).
impl From<askama::Error> for ReportError {
    fn from(error: askama::Error) -> Self {
        ReportError::Render(error)
    }
}

// The message quotes the cause, so it is not also this error's source
// (a caller printing the chain would say it twice).
impl From<serde_json::Error> for ReportError {
    fn from(error: serde_json::Error) -> Self {
        ReportError::Data(error)
    }
}
