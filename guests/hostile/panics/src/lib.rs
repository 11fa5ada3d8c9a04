//! Hostile fixture: `compare` panics. The host must answer undetermined and
//! keep going.
wit_bindgen::generate!({
    path: "../../../wit/comparator@0.1.0",
    world: "comparator",
});

struct Component;

impl Guest for Component {
    fn validate(_params: String) -> Result<(), String> {
        Ok(())
    }

    fn compare(_params: String, observed: ObservedStream) -> Result<Verdict, String> {
        panic!(
            "comparator exploded on purpose after {} bytes",
            observed.bytes.len()
        );
    }
}

export!(Component);
