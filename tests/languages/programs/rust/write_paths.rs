// Probe: try to open for writing (append, create) argv[1], /build/probe and
// /etc/probe; print "denied" or "written" for each, in that order.
use std::ffi::OsString;
use std::fs::OpenOptions;

fn attempt(path: &OsString) {
    let ok = OpenOptions::new().append(true).create(true).open(path).is_ok();
    println!("{}", if ok { "written" } else { "denied" });
}

fn main() {
    let own = std::env::args_os().nth(1).unwrap_or_default();
    attempt(&own);
    attempt(&OsString::from("/build/probe"));
    attempt(&OsString::from("/etc/probe"));
}
