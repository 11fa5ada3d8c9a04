//! Hostile fixture: claims the comparator world's name but exports `compare`
//! with another signature. The host must refuse to register it.
wit_bindgen::generate!({
    path: "wit",
    world: "comparator",
});

struct Component;

impl Guest for Component {
    fn validate(_params: String) -> Result<(), String> {
        Ok(())
    }

    fn compare(params: u32) -> u32 {
        params.wrapping_mul(2)
    }
}

export!(Component);
