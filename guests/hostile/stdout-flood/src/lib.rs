//! Hostile fixture: `compare` writes 256 MiB to stdout and 256 MiB to stderr,
//! then answers match. The host must not keep (or grow with) that output.
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
        use std::io::Write;
        let chunk = vec![b'x'; 64 << 10];
        for _ in 0..4096 {
            // Write errors are ignored: the point is the attempt.
            let _ = std::io::stdout().write_all(&chunk);
            let _ = std::io::stderr().write_all(&chunk);
        }
        Ok(Verdict::Match)
    }
}

export!(Component);
