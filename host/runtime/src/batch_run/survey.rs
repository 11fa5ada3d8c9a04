//! A batch's first reading: its bad lines and the profiles its items use,
//! nothing of the items kept; and the batch read again as the survey read
//! it, for the run.

use std::collections::{BTreeMap, HashSet};

use super::item_scoring::ItemCheck;
use crate::batch::{BatchItem, BatchLineError, BatchReadError, BatchSource};

/// What a first reading of a batch found.
#[derive(Debug, Default)]
pub struct Survey {
    /// Lines that cannot be scored, in file order, each naming its field.
    pub bad_lines: Vec<BatchLineError>,
    /// The items to score, by profile.
    pub profiles: BTreeMap<String, usize>,
    /// The bad lines' numbers, skipped when the batch is read again.
    bad: HashSet<usize>,
}

impl Survey {
    /// Items to score (bad lines left out).
    pub fn items(&self) -> usize {
        self.profiles.values().sum()
    }

    /// The batch read again, as the survey read it: each good item checked,
    /// the lines the survey refused skipped. A line that became bad since
    /// (the file changed) comes as its error.
    pub fn read_again<'a>(
        &'a self,
        source: &BatchSource,
        check: &'a dyn ItemCheck,
    ) -> impl Iterator<Item = Result<BatchItem, BatchLineError>> + Send + 'a {
        let file = source.name();
        let lines: Box<dyn Iterator<Item = _> + Send> = match source.lines() {
            Ok(lines) => lines,
            // The survey read it: gone since, said as a bad line.
            Err(error) => Box::new(std::iter::once(Err(BatchLineError {
                file: file.clone(),
                line: 0,
                id: None,
                field: None,
                message: error.to_string(),
            }))),
        };
        lines.filter_map(move |line| match line {
            Err(error) if self.bad.contains(&error.line) => None,
            Err(error) => Some(Err(error)),
            Ok(item) if self.bad.contains(&item.line) => None,
            Ok(item) => Some(checked(check, &file, item)),
        })
    }
}

/// Reads `source` once, checking every line as scoring would: its bad
/// lines (each named by file, line and field) and the profiles its items
/// use. Nothing of the items is kept.
pub fn survey(source: &BatchSource, scoring: &dyn ItemCheck) -> Result<Survey, BatchReadError> {
    let file = source.name();
    let mut survey = Survey::default();
    for line in source.lines()? {
        match line.map(|item| checked(scoring, &file, item)) {
            Ok(Ok(item)) => {
                let profile = item.profile().unwrap_or_default().to_string();
                *survey.profiles.entry(profile).or_default() += 1;
            }
            Ok(Err(error)) | Err(error) => {
                survey.bad.insert(error.line);
                survey.bad_lines.push(error);
            }
        }
    }
    Ok(survey)
}

fn checked(
    scoring: &dyn ItemCheck,
    file: &str,
    item: BatchItem,
) -> Result<BatchItem, BatchLineError> {
    let (line, id) = (item.line, item.id.clone());
    scoring.check(item).map_err(|refusal| BatchLineError {
        file: file.to_string(),
        line,
        id: Some(id),
        field: refusal.field,
        message: refusal.message,
    })
}
