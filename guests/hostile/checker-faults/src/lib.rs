//! Hostile fixture: a checker whose fault is its params, the JSON text
//! `{"fault": "<fault>"}` read loosely (the text only has to contain the word):
//!
//! - `panic`: traps (a Rust panic);
//! - `loop`: never returns (the deadline must stop it);
//! - `alloc`: allocates without end (the memory cap must stop it);
//! - `fail`: judges `fail` (the jury's data is wrong);
//! - `points-1.5`, `points-nan`, `points-negative`: a score outside [0, 1];
//! - `points-half`: a valid score of 0.5;
//! - `bad-params`: refuses its params;
//! - anything else: accepts.
//!
//! The host must answer undetermined for every fault, never a verdict.

// The generated export of `check` takes the flattened test (10 arguments).
#![allow(clippy::too_many_arguments)]
wit_bindgen::generate!({
    path: "../../../wit/checker@0.1.0",
    world: "checker",
});

use progscore::checker::types::Points;

struct Component;

impl Guest for Component {
    fn validate(params: String) -> Result<(), String> {
        if params.contains("bad-params") {
            return Err("these params are refused on purpose".to_string());
        }
        Ok(())
    }

    fn check(params: String, test: Test) -> Result<Judgement, String> {
        let points = |score: f64| {
            Ok(Judgement::Points(Points {
                score,
                message: format!("{score} on purpose"),
            }))
        };
        if params.contains("bad-params") {
            Err("these params are refused on purpose".to_string())
        } else if params.contains("panic") {
            panic!(
                "checker exploded on purpose after {} bytes",
                test.output.bytes.len()
            );
        } else if params.contains("loop") {
            let mut n: u64 = test.input.len() as u64;
            loop {
                n = std::hint::black_box(n.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        } else if params.contains("alloc") {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        } else if params.contains("fail") {
            Ok(Judgement::Fail(
                "the answer does not fit the input".to_string(),
            ))
        } else if params.contains("points-1.5") {
            points(1.5)
        } else if params.contains("points-nan") {
            points(f64::NAN)
        } else if params.contains("points-negative") {
            points(-0.25)
        } else if params.contains("points-half") {
            points(0.5)
        } else {
            Ok(Judgement::Accepted("accepted on purpose".to_string()))
        }
    }
}

export!(Component);
