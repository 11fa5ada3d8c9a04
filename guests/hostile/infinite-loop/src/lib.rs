//! Hostile fixture: `compare` never returns. The host must stop it at its
//! deadline and answer undetermined.
wit_bindgen::generate!({
    path: "../../../wit/comparator@0.1.0",
    world: "comparator",
});

struct Component;

impl Guest for Component {
    fn validate(_params: String) -> Result<(), String> {
        Ok(())
    }

    fn compare(_params: String, _observed: ObservedStream) -> Result<Verdict, String> {
        let mut n: u64 = 0;
        loop {
            // black_box keeps the optimiser from proving the loop useless.
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
}

export!(Component);
