//! Example user comparator: the output's lines are in ascending order.
//!
//! Parameters (all optional): `numeric` (compare lines as numbers instead of
//! bytes) and `min_lines` (at least this many non-empty lines). Empty lines are
//! ignored.
//!
//! Truncation rule: two complete lines out of order prove a mismatch;
//! otherwise a truncated output is undetermined (the cut part may be unsorted).

// Generates the `Guest` trait and the WIT types from the comparator world.
// Point `path` at your copy of progscore's `wit/comparator@0.1.0` folder.
// The world `use`s `observed-stream` and `verdict`, so they are generated at
// the crate root next to the `Guest` trait.
wit_bindgen::generate!({
    path: "../../../wit/comparator@0.1.0",
    world: "comparator",
});

struct SortedLines;

struct Options {
    numeric: bool,
    min_lines: usize,
}

/// Parameters arrive as JSON text. Refuse names you do not know, so that a
/// typo in an expectation is caught before any program runs.
fn parse(params: &str) -> Result<Options, String> {
    let value: serde_json::Value =
        serde_json::from_str(params).map_err(|e| format!("params are not JSON: {e}"))?;
    let object = value.as_object().ok_or("params must be a JSON object")?;
    let mut options = Options {
        numeric: false,
        min_lines: 0,
    };
    for (name, value) in object {
        match name.as_str() {
            "numeric" => {
                options.numeric = value.as_bool().ok_or("\"numeric\" must be a boolean")?
            }
            "min_lines" => {
                options.min_lines = value
                    .as_u64()
                    .ok_or("\"min_lines\" must be a non-negative integer")?
                    as usize
            }
            other => return Err(format!("unknown parameter \"{other}\"")),
        }
    }
    Ok(options)
}

impl Guest for SortedLines {
    fn validate(params: String) -> Result<(), String> {
        parse(&params).map(|_| ())
    }

    fn compare(params: String, observed: ObservedStream) -> Result<Verdict, String> {
        let options = parse(&params)?;
        // Only lines ended by a newline are known for sure when truncated.
        let text = String::from_utf8_lossy(&observed.bytes);
        let mut lines: Vec<&str> = text.split('\n').map(str::trim_end).collect();
        if observed.truncated {
            lines.pop();
        }
        lines.retain(|l| !l.is_empty());

        for pair in lines.windows(2) {
            let in_order = if options.numeric {
                match (pair[0].trim().parse::<f64>(), pair[1].trim().parse::<f64>()) {
                    (Ok(a), Ok(b)) => a <= b,
                    _ => return Ok(Verdict::Mismatch(format!("not numbers: {pair:?}"))),
                }
            } else {
                pair[0] <= pair[1]
            };
            if !in_order {
                return Ok(Verdict::Mismatch(format!(
                    "{:?} comes before {:?}",
                    pair[0], pair[1]
                )));
            }
        }
        if observed.truncated {
            return Ok(Verdict::Undetermined(format!(
                "{} complete lines are sorted, but the output was truncated",
                lines.len()
            )));
        }
        if lines.len() < options.min_lines {
            return Ok(Verdict::Mismatch(format!(
                "expected at least {} lines, got {}",
                options.min_lines,
                lines.len()
            )));
        }
        Ok(Verdict::Match)
    }
}

export!(SortedLines);
