//! Example user checker: the output is one integer, the sum of the integers
//! of the test's input. A checker sees the input, which a comparator cannot:
//! here the jury's answer is not needed at all (any answer is ignored).
//!
//! Parameters: none (`{}`).
//!
//! Judgements: `accepted` when the output's only token is the sum;
//! `wrong-answer` for another number; `presentation-error` for no token, a
//! token that is not an integer, or more than one token; `fail` when the
//! input holds something other than integers (the jury's data is wrong).
//!
//! Truncation rule: a complete token (ended by whitespace before the cut)
//! proves the answer when it is wrong or not an integer, or when a second
//! token follows it; otherwise a truncated output is undetermined.

// The generated export of `check` takes the flattened test (10 arguments).
#![allow(clippy::too_many_arguments)]

// Generates the `Guest` trait and the WIT types from the checker world.
// Point `path` at your copy of progscore's `wit/checker@0.1.0` folder.
wit_bindgen::generate!({
    path: "../../../wit/checker@0.1.0",
    world: "checker",
});

struct CheckerSum;

fn parse(params: &str) -> Result<(), String> {
    match params.trim() {
        "{}" | "" => Ok(()),
        other => Err(format!("this checker takes no parameters, got {other}")),
    }
}

fn is_space(b: &u8) -> bool {
    b.is_ascii_whitespace() || *b == 0x0b
}

fn words(bytes: &[u8]) -> Vec<&[u8]> {
    bytes.split(is_space).filter(|w| !w.is_empty()).collect()
}

fn integer(word: &[u8]) -> Option<i128> {
    std::str::from_utf8(word).ok()?.parse().ok()
}

impl Guest for CheckerSum {
    fn validate(params: String) -> Result<(), String> {
        parse(&params)
    }

    fn check(params: String, test: Test) -> Result<Judgement, String> {
        parse(&params)?;
        let mut sum: i128 = 0;
        for word in words(&test.input) {
            let Some(n) = integer(word) else {
                return Ok(Judgement::Fail(format!(
                    "the input holds {:?}, not an integer",
                    String::from_utf8_lossy(word)
                )));
            };
            let Some(next) = sum.checked_add(n) else {
                return Ok(Judgement::Fail("the input's sum overflows".to_string()));
            };
            sum = next;
        }

        let output = &test.output;
        let mut found = words(&output.bytes);
        // The last word of a truncated output may be cut: not evidence.
        if output.truncated && output.bytes.last().is_some_and(|b| !is_space(b)) {
            found.pop();
            if found.len() == 1 {
                return Ok(Judgement::PresentationError(
                    "expected one integer, found more than one".to_string(),
                ));
            }
        }
        let judgement = match found.as_slice() {
            [] if output.truncated => Judgement::Undetermined(format!(
                "the output was truncated after {} bytes, before its first complete token",
                output.bytes.len()
            )),
            [] => Judgement::PresentationError("expected one integer, found none".to_string()),
            [word, ..] => match integer(word) {
                None => Judgement::PresentationError(format!(
                    "expected an integer, found {:?}",
                    String::from_utf8_lossy(word)
                )),
                Some(n) if n != sum => Judgement::WrongAnswer(format!("expected {sum}, found {n}")),
                Some(_) if found.len() > 1 => Judgement::PresentationError(format!(
                    "expected one integer, found {}",
                    found.len()
                )),
                Some(_) if output.truncated => Judgement::Undetermined(
                    "the sum is right, but the output was truncated after it".to_string(),
                ),
                Some(n) => Judgement::Accepted(format!("the sum is {n}")),
            },
        };
        Ok(judgement)
    }
}

export!(CheckerSum);
