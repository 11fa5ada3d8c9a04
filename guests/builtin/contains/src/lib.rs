//! `contains`: the output contains `value` somewhere.
//!
//! Parameters: `value` (string, required, may not be empty), `ignore_case`
//! (default false: Unicode lower-casing of valid UTF-8, invalid bytes kept).
//! The search is over bytes, so output that is not UTF-8 is searched as is.
//!
//! Truncation rule: finding `value` in the kept prefix is a match (whatever
//! follows cannot undo it). Not finding it in a truncated output is
//! undetermined (it may be in the part that was cut); in a complete output it
//! is a mismatch.

use guest_support::{
    Observed, Params, Verdict, fold_case, preview, truncation_note, without_cut_char,
};

struct Options {
    value: Vec<u8>,
    ignore_case: bool,
}

fn parse(json: &str) -> Result<Options, String> {
    let p = Params::parse(json, &["value", "ignore_case"])?;
    let value = p.required_str("value")?;
    if value.is_empty() {
        return Err("parameter \"value\" may not be empty (it would match anything)".into());
    }
    Ok(Options {
        value: value.into_bytes(),
        ignore_case: p.bool_or("ignore_case", false)?,
    })
}

fn compare(options: &Options, observed: &Observed<'_>) -> Verdict {
    let (needle, haystack) = if options.ignore_case {
        // A cut character could fold differently once complete; leave it out.
        (
            fold_case(&options.value),
            fold_case(without_cut_char(observed.bytes)),
        )
    } else {
        (options.value.clone(), observed.bytes.to_vec())
    };
    if haystack
        .windows(needle.len())
        .any(|w| w == needle.as_slice())
    {
        Verdict::Match
    } else if observed.truncated {
        Verdict::Undetermined(format!(
            "{} is not in the kept part ({})",
            preview(&needle),
            truncation_note(observed)
        ))
    } else {
        Verdict::Mismatch(format!(
            "{} not found in the output {}",
            preview(&needle),
            preview(observed.bytes)
        ))
    }
}

guest_support::export_comparator!(parse, compare);
