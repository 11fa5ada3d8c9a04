// Probe: allocate and touch memory without bound until the container's
// memory cap kills the process (expected: SIGKILL, exit 137, OOMKilled).
const CHUNK: usize = 16 << 20;

fn main() {
    let mut keep: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut chunk = vec![0u8; CHUNK];
        for i in (0..CHUNK).step_by(4096) {
            unsafe { std::ptr::write_volatile(&mut chunk[i], 1) };
        }
        keep.push(chunk);
    }
}
