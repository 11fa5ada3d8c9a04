//! `progscore report`: one self-contained HTML page of a scored batch.
//!
//! The page is built from a batch's result lines (what `progscore score` or
//! `rescore` printed) and the evidence store they point into: each line's
//! score, its observations (every case's invocation, output, outcome and
//! provenance) and the program's bytes. It holds an overview with inline SVG
//! charts, every item (filterable, searchable, sortable, paginated, opened
//! on demand), and, given a baseline grading of the same batch, the verdicts
//! that changed.
//!
//! Program output is hostile input. Everything a program wrote reaches the
//! page only as JSON data (never parsed as HTML) and is put on screen as
//! text; a Content-Security-Policy allows exactly the page's own script and
//! style (by hash) and no request of any kind, so even markup that escaped
//! could neither run nor call out.

mod charts;
mod diff;
mod error;
mod gather;
mod model;
mod page;

pub use error::ReportError;
pub use gather::{ResultLines, gather};
pub use model::{Limits, Report};
pub use page::render;
