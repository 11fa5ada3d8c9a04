// Probe: try TCP connections to 1.1.1.1:53 and 127.0.0.1:9 (2 s timeout
// each); print "unreachable" if both fail, else "reachable".
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

fn try_connect(addr: &str) -> bool {
    let addr: SocketAddr = addr.parse().unwrap();
    TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok()
}

fn main() {
    let a = try_connect("1.1.1.1:53");
    let b = try_connect("127.0.0.1:9");
    println!("{}", if a || b { "reachable" } else { "unreachable" });
}
