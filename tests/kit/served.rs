//! A running `progscore serve` driven over real HTTP/1.1: started on a
//! loopback port, asked with a plain client, its metrics read, stopped with
//! SIGTERM; shared by the serve and outage suites and the serve benchmark.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::leftovers::{OwnersPresent, Started};

/// A running `progscore serve`, stopped (SIGTERM, then waited for) when dropped.
pub struct Served {
    pub child: Child,
    /// Which process it is, for what it leaves behind.
    pub started: Started,
    pub address: SocketAddr,
    /// Everything it wrote to stderr so far.
    pub log: Arc<Mutex<String>>,
}

impl Served {
    /// Spawns `command` (a `progscore serve` command line, its stderr
    /// piped here) and waits until it says where it listens; `Err` with its
    /// exit status and stderr if it exits before serving.
    pub fn spawn(mut command: Command) -> Result<Served, (Option<i32>, String)> {
        let before = OwnersPresent::now();
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start progscore serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let (found, address) = std::sync::mpsc::channel();
        std::thread::spawn({
            let log = log.clone();
            move || {
                let mut found = Some(found);
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    log.lock().unwrap().push_str(&format!("{line}\n"));
                    if let Some((_, address)) = line.split_once(" on http://")
                        && let Some(sender) = found.take()
                    {
                        let _ = sender.send(address.trim().to_string());
                    }
                }
            }
        });
        match address.recv_timeout(Duration::from_secs(120)) {
            Ok(address) => Ok(Served {
                started: before.then_started(child.id()),
                child,
                address: address.parse().expect("an address"),
                log,
            }),
            Err(_) => {
                let status = child.wait().expect("wait");
                // The reader thread has the last lines once the pipe closes.
                std::thread::sleep(Duration::from_millis(100));
                Err((status.code(), log.lock().unwrap().clone()))
            }
        }
    }

    /// The base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> (Option<i32>, String) {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().expect("wait");
        std::thread::sleep(Duration::from_millis(100));
        (status.code(), self.log.lock().unwrap().clone())
    }

    /// A request; see [`request`].
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        request(self.address, method, path, headers, body)
    }

    /// A metric's value from `/metrics` (the first sample whose name and
    /// labels are `series`, e.g. `progscore_queue_waiting{profile="python"}`).
    pub fn metric(&self, series: &str) -> f64 {
        let text = String::from_utf8(self.request("GET", "/metrics", &[], b"").body).unwrap();
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// A JSON POST.
    pub fn post_json(&self, path: &str, body: &serde_json::Value) -> Reply {
        self.request(
            "POST",
            path,
            &[("content-type", "application/json")],
            body.to_string().as_bytes(),
        )
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let _ = self.child.wait();
        }
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// One HTTP/1.1 request on its own connection (`Connection: close`), the
/// answer read to its end.
pub fn request(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    try_request(address, method, path, headers, body).expect("an HTTP answer")
}

/// A JSON POST on its own connection, or the I/O error that ended it.
pub fn try_post_json(
    address: SocketAddr,
    path: &str,
    body: &serde_json::Value,
) -> std::io::Result<Reply> {
    try_request(
        address,
        "POST",
        path,
        &[("content-type", "application/json")],
        body.to_string().as_bytes(),
    )
}

/// [`request`], or the I/O error (refused, reset) that ended it.
pub fn try_request(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect(address)?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {address}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    // A server may answer (413) before reading all of a large body.
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no header block in the answer"))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status line in the answer"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    Ok(Reply {
        status,
        headers,
        body,
    })
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = raw.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&raw[..end]).trim(), 16).unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[end + 2..end + 2 + size]);
        raw = &raw[end + 2 + size + 2..];
    }
}
