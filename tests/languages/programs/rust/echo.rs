// Probe: copy stdin to stdout unchanged, then print each argument on its own
// line to stderr.
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;

fn main() {
    let mut input = Vec::new();
    io::stdin().read_to_end(&mut input).unwrap();
    let mut out = io::stdout();
    out.write_all(&input).unwrap();
    out.flush().unwrap();
    let mut err = io::stderr();
    for arg in std::env::args_os().skip(1) {
        err.write_all(arg.as_bytes()).unwrap();
        err.write_all(b"\n").unwrap();
    }
}
