//! `equals`: the output equals `value`.
//!
//! Parameters: `value` (string, required), `trim` (default true: ASCII
//! whitespace around the whole output and `value` is ignored), `ignore_case`
//! (default false: Unicode lower-casing of valid UTF-8, invalid bytes kept),
//! `normalize_newlines` (default false: CR LF counts as LF).
//!
//! Bytes are compared, not characters: output that is not UTF-8 never equals a
//! `value` (which is a JSON string, hence UTF-8) unless the bytes agree.
//!
//! Truncation rule: a truncated output never matches (the missing part is
//! unknown). It mismatches when the kept prefix (after the same normalisation)
//! already departs from `value`, or, with no normalisation at all, when the
//! total byte count differs from the length of `value`. Otherwise undetermined.

use guest_support::{
    Observed, Params, Verdict, fold_case, normalize_newlines, preview, trim_end, trim_start,
    truncation_note, without_cut_char,
};

struct Options {
    value: Vec<u8>,
    trim: bool,
    ignore_case: bool,
    normalize_newlines: bool,
}

fn parse(json: &str) -> Result<Options, String> {
    let p = Params::parse(
        json,
        &["value", "trim", "ignore_case", "normalize_newlines"],
    )?;
    Ok(Options {
        value: p.required_str("value")?.into_bytes(),
        trim: p.bool_or("trim", true)?,
        ignore_case: p.bool_or("ignore_case", false)?,
        normalize_newlines: p.bool_or("normalize_newlines", false)?,
    })
}

impl Options {
    /// Newline and case normalisation, shared by both sides.
    fn normalize(&self, bytes: &[u8]) -> Vec<u8> {
        let bytes = if self.normalize_newlines {
            normalize_newlines(bytes)
        } else {
            bytes.to_vec()
        };
        if self.ignore_case {
            fold_case(&bytes)
        } else {
            bytes
        }
    }

    fn expected(&self) -> Vec<u8> {
        let value = self.normalize(&self.value);
        if self.trim {
            trim_end(trim_start(&value)).to_vec()
        } else {
            value
        }
    }

    fn is_plain(&self) -> bool {
        !self.trim && !self.ignore_case && !self.normalize_newlines
    }
}

fn compare(options: &Options, observed: &Observed<'_>) -> Verdict {
    let expected = options.expected();
    if !observed.truncated {
        let mut got = options.normalize(observed.bytes);
        if options.trim {
            got = trim_end(trim_start(&got)).to_vec();
        }
        return if got == expected {
            Verdict::Match
        } else {
            Verdict::Mismatch(format!(
                "expected {}, got {}",
                preview(&expected),
                preview(&got)
            ))
        };
    }

    if options.is_plain() && observed.total_bytes != expected.len() as u64 {
        return Verdict::Mismatch(format!(
            "expected {} bytes ({}), the output has {} bytes ({})",
            expected.len(),
            preview(&expected),
            observed.total_bytes,
            truncation_note(observed)
        ));
    }
    // What the kept prefix says about the start of the normalised output. A
    // trailing CR may pair with an LF that was cut off, so it proves nothing.
    let mut kept = without_cut_char(observed.bytes);
    if options.normalize_newlines && kept.last() == Some(&b'\r') {
        kept = &kept[..kept.len() - 1];
    }
    let mut prefix = options.normalize(kept);
    if options.trim {
        prefix = trim_start(&prefix).to_vec();
    }
    let still_possible = expected.starts_with(&prefix)
        // With trim, whitespace after the expected text may be the trailing
        // whitespace that trimming removes.
        || (options.trim
            && prefix.starts_with(&expected)
            && trim_start(&prefix[expected.len()..]).is_empty());
    if still_possible {
        Verdict::Undetermined(format!(
            "the kept part agrees with {} so far ({})",
            preview(&expected),
            truncation_note(observed)
        ))
    } else {
        Verdict::Mismatch(format!(
            "expected {}, the output starts {} ({})",
            preview(&expected),
            preview(&prefix),
            truncation_note(observed)
        ))
    }
}

guest_support::export_comparator!(parse, compare);
