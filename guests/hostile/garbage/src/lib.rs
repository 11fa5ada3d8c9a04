//! Hostile fixture: answers that are malformed or abusive, chosen by the
//! params text (not JSON, on purpose): `huge-reason` (a 16 MiB reason),
//! `bad-utf8` (a reason that is not UTF-8, which the canonical ABI refuses),
//! `compare-refuses` (validate accepts, compare then calls the params bad),
//! `exit` (calls `std::process::exit(3)`, which WASI 0.2 reports as status 1), anything else: match.
wit_bindgen::generate!({
    path: "../../../wit/comparator@0.1.0",
    world: "comparator",
});

struct Component;

impl Guest for Component {
    fn validate(_params: String) -> Result<(), String> {
        Ok(())
    }

    fn compare(params: String, _observed: ObservedStream) -> Result<Verdict, String> {
        match params.as_str() {
            "huge-reason" => Ok(Verdict::Mismatch("z".repeat(16 << 20))),
            "bad-utf8" => {
                // SAFETY: deliberately not. The bytes are not UTF-8; the point
                // is to see the host refuse them when lifting the string.
                let reason = unsafe { String::from_utf8_unchecked(vec![0xff, 0xfe, 0xfd]) };
                Ok(Verdict::Mismatch(reason))
            }
            "compare-refuses" => Err("these parameters were fine a moment ago".into()),
            "exit" => std::process::exit(3),
            _ => Ok(Verdict::Match),
        }
    }
}

export!(Component);
