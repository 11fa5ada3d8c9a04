//! Hostile fixture: `compare` tries to hold 4 GiB of memory, 64 MiB at a
//! time, touching every page. The host's memory cap must refuse it.
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
        const CHUNK: usize = 64 << 20;
        let mut held: Vec<Vec<u8>> = Vec::new();
        for i in 0..64u8 {
            held.push(vec![i.wrapping_add(1); CHUNK]);
        }
        let total: usize = held.iter().map(Vec::len).sum();
        Ok(Verdict::Mismatch(format!("allocated {total} bytes")))
    }
}

export!(Component);
