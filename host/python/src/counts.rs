//! A batch's counts and `--fail-on` as Python gives and reads them, shared
//! by the summary Python counts and the runtime driver's batch.

use std::collections::BTreeMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A summary's counts as Python reads them.
pub(crate) fn counts_of(s: &progscore_runtime::results::Summary) -> BTreeMap<&'static str, usize> {
    BTreeMap::from([
        ("true", s.trues),
        ("false", s.falses),
        ("undetermined", s.undetermined),
        ("errors", s.errors),
        ("not_scored", s.not_scored),
        ("cancelled", s.cancelled),
    ])
}

/// `--fail-on`'s verdicts (`"false"`, `"undetermined"`) as the policy takes them.
pub(crate) fn parse_fail_on(verdicts: &[String]) -> PyResult<progscore_runtime::policy::FailOn> {
    let mut fail = progscore_runtime::policy::FailOn::default();
    for verdict in verdicts {
        match verdict.as_str() {
            "false" => fail.falses = true,
            "undetermined" => fail.undetermined = true,
            other => {
                return Err(PyValueError::new_err(format!(
                    "fail_on: `{other}` is not a verdict (false, undetermined)"
                )));
            }
        }
    }
    Ok(fail)
}
