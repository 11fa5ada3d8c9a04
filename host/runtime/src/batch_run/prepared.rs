//! A whole batch checked at once, as scoring would check it: its items with
//! their profiles' own names, and its refused lines in file order.

use progscore_scoring::{ProgramExecutionScorer, Replayer};

use crate::batch::{Batch, BatchItem, BatchLineError};

/// A batch's items checked as scoring would check them, and its refused lines.
#[derive(Debug, Default)]
pub struct PreparedBatch {
    /// Items to score, their language names made their profiles' own names.
    pub items: Vec<BatchItem>,
    /// Lines that could not be read or whose expectation is refused, in file order.
    pub bad_lines: Vec<BatchLineError>,
}

/// Checks every item of `batch` (read from `file`): a language name becomes
/// its profile's own name, so that the preflight and the summary name
/// profiles; an expectation the scorer refuses becomes a bad line naming its
/// field. Without a scorer (offline: rescore) the rescore itself validates.
pub fn prepare(
    batch: Batch,
    file: &str,
    replayer: &Replayer,
    scorer: Option<&ProgramExecutionScorer>,
) -> PreparedBatch {
    let Batch {
        items,
        errors: mut bad_lines,
    } = batch;
    let mut good = Vec::with_capacity(items.len());
    for mut item in items {
        item.expectation = replayer.canonical(item.expectation);
        match scorer.map_or(Ok(()), |scorer| scorer.validate(&item.expectation)) {
            Ok(()) => good.push(item),
            Err(err) => bad_lines.push(BatchLineError {
                file: file.to_string(),
                line: item.line,
                id: Some(item.id.clone()),
                field: Some(format!("expectation.{}", err.field_path())),
                message: err.to_string(),
            }),
        }
    }
    bad_lines.sort_by_key(|e| e.line);
    PreparedBatch {
        items: good,
        bad_lines,
    }
}
