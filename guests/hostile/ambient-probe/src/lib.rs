//! Hostile fixture: looks for ambient authority and reports what it found, as
//! JSON in a mismatch reason. The params text picks the probe: `env`, `file`,
//! `clock`, `random` or `sleep` (which blocks for 10 s: the host must refuse).
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
        let report = match params.as_str() {
            "env" => serde_json::json!({
                "vars": std::env::vars().collect::<Vec<_>>(),
                "args": std::env::args().collect::<Vec<_>>(),
                "cwd": std::env::current_dir().map(|p| p.display().to_string()).ok(),
            }),
            "file" => serde_json::json!({
                "passwd": format!("{:?}", std::fs::read_to_string("/etc/passwd")),
                "root": format!("{:?}", std::fs::read_dir("/").map(|d| d.count())),
                "dot": format!("{:?}", std::fs::read_dir(".").map(|d| d.count())),
                "write": format!("{:?}", std::fs::write("/tmp/progscore-probe", b"x")),
            }),
            "clock" => {
                let wall = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(u64::MAX);
                let start = std::time::Instant::now();
                let mut n: u64 = 0;
                for i in 0..10_000_000u64 {
                    n = std::hint::black_box(n ^ i);
                }
                serde_json::json!({
                    "wall_unix_nanos": wall,
                    "monotonic_elapsed_nanos": start.elapsed().as_nanos() as u64,
                    "work": n,
                })
            }
            "random" => {
                use std::hash::{BuildHasher, RandomState};
                let a = RandomState::new().hash_one(1u8);
                serde_json::json!({ "hash_of_1": a })
            }
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(10));
                serde_json::json!({ "slept": true })
            }
            other => serde_json::json!({ "unknown_probe": other }),
        };
        Ok(Verdict::Mismatch(report.to_string()))
    }
}

export!(Component);
