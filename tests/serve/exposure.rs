//! Only the operator's clients: JSON routes take JSON only, a request must
//! name this server in its `Host`, a web page's request is refused unless
//! its origin is configured (a real browser's page included), slow and
//! surplus connections are let go, and a Judge0 zip bomb is refused before
//! it is inflated. Nothing refused runs or is stored.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;

use crate::ServeIn;
use crate::{Served, serving_dir};

/// The outer bound on waiting for an event from the server (an answer, a
/// closed connection): generous, so only a server that never acts fails.
const PATIENCE: Duration = Duration::from_secs(120);

/// How many rows `table` of the served store holds.
fn rows(dir: &progscore_e2e::Dir, table: &str) -> i64 {
    let store = rusqlite::Connection::open(dir.path().join("evidence.db")).expect("the store");
    store
        .query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
            row.get(0)
        })
        .expect("count rows")
}

/// A client connection whose reads give up after [`PATIENCE`].
fn connect(address: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(address).expect("connect");
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream
}

/// Everything the server sends until it closes the connection (a reset
/// after what it sent is a close too: the client may still be writing).
fn read_to_close(mut stream: TcpStream) -> String {
    let mut received = Vec::new();
    match stream.read_to_end(&mut received) {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(error) => panic!("the server did not answer and close the connection: {error}"),
    }
    String::from_utf8_lossy(&received).into_owned()
}

/// The status of a raw answer (0 when there is none).
fn status_of(answer: &str) -> u16 {
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

/// `method path` sent as written: `Host: host` and `headers`, then `body`;
/// the raw answer.
fn send(
    address: SocketAddr,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> String {
    let mut stream = connect(address);
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let _ = stream.write_all(body);
    read_to_close(stream)
}

const JSON: (&str, &str) = ("content-type", "application/json");

fn program() -> String {
    json!({"code": "print('ran')", "language": "python"}).to_string()
}

#[test]
fn json_routes_refuse_other_bodies_and_foreign_hosts_and_pages_before_anything_runs() {
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let address = served.address;
    let own = address.to_string();
    let judge0 = json!({"source_code": "print('ran')", "language_id": 71}).to_string();
    let piston =
        json!({"language": "python", "version": "*", "files": [{"content": "print('ran')"}]})
            .to_string();
    let line = json!({"id": "a", "program": "print('ran')", "profile": "python",
                      "expect": {"program_behaves": {"invocations": [{"args": []}]}}})
    .to_string();
    // What a page sends without asking first: fetch(no-cors) with a text
    // body, a form; and a body with no type at all.
    for (path, body, content_type, said) in [
        (
            "/run_code",
            program(),
            Some("text/plain;charset=UTF-8"),
            "text/plain;charset=UTF-8",
        ),
        (
            "/run_code",
            format!("{}=", program()),
            Some("application/x-www-form-urlencoded"),
            "application/x-www-form-urlencoded",
        ),
        ("/submissions", judge0, Some("text/plain"), "text/plain"),
        ("/api/v2/execute", piston, None, "has no Content-Type"),
        (
            "/v1/run",
            json!({"program": "print('ran')", "profile": "python", "invocations": [{}]})
                .to_string(),
            Some("multipart/form-data; boundary=x"),
            "multipart/form-data",
        ),
        ("/v1/batches", line, Some("text/plain"), "text/plain"),
    ] {
        let headers: Vec<(&str, &str)> = content_type
            .map(|value| ("content-type", value))
            .into_iter()
            .collect();
        let answer = send(address, "POST", path, &own, &headers, body.as_bytes());
        assert_eq!(status_of(&answer), 415, "{path}: {answer}");
        assert!(
            answer.contains(&format!("POST {path} takes")) && answer.contains(said),
            "{path}: {answer}"
        );
    }
    // A name that is not this server's (DNS rebinding), on every route.
    let port = address.port();
    for host in [
        format!("rebound.evil.example:{port}"),
        "evil.example".into(),
    ] {
        for (method, path) in [("POST", "/run_code"), ("GET", "/healthz")] {
            let answer = send(address, method, path, &host, &[JSON], program().as_bytes());
            assert_eq!(status_of(&answer), 421, "{host} {path}: {answer}");
            assert!(
                answer.contains(&format!("localhost:{port}")) && answer.contains("[serve] hosts"),
                "{answer}"
            );
        }
    }
    // A page's request, JSON and all.
    let answer = send(
        address,
        "POST",
        "/run_code",
        &own,
        &[JSON, ("origin", "http://evil.example")],
        program().as_bytes(),
    );
    assert_eq!(status_of(&answer), 403, "{answer}");
    assert!(answer.contains("[serve] origins"), "{answer}");
    assert_eq!(rows(&dir, "observations"), 0, "a refused request ran");
    assert_eq!(rows(&dir, "submissions"), 0, "a refused request was stored");

    // The operator's client, naming the server as localhost, runs.
    let answer = send(
        address,
        "POST",
        "/run_code",
        &format!("localhost:{port}"),
        &[("content-type", "application/json; charset=utf-8")],
        program().as_bytes(),
    );
    assert_eq!(status_of(&answer), 200, "{answer}");
    assert!(answer.contains("ran\\n"), "{answer}");
    assert_eq!(rows(&dir, "observations"), 1);
    let (code, log) = served.terminate();
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains("route=/run_code") && log.contains("status=421"),
        "{log}"
    );
}

#[test]
fn configured_hosts_and_origins_are_admitted_and_their_pages_get_cors_answers() {
    let dir =
        serving_dir("hosts = [\"sandbox.internal\"]\norigins = [\"http://tools.example:3000\"]");
    let served = Served::start(&dir);
    let address = served.address;
    let own = address.to_string();
    let profiles = send(address, "GET", "/v1/profiles", "sandbox.internal", &[], b"");
    assert_eq!(status_of(&profiles), 200, "{profiles}");
    // The browser's preflight, then its request.
    let preflight = send(
        address,
        "OPTIONS",
        "/run_code",
        &own,
        &[
            ("origin", "http://tools.example:3000"),
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "content-type"),
        ],
        b"",
    );
    assert_eq!(status_of(&preflight), 200, "{preflight}");
    assert!(
        preflight.contains("access-control-allow-origin: http://tools.example:3000"),
        "{preflight}"
    );
    let ran = send(
        address,
        "POST",
        "/run_code",
        &own,
        &[JSON, ("origin", "http://tools.example:3000")],
        program().as_bytes(),
    );
    assert_eq!(status_of(&ran), 200, "{ran}");
    assert!(
        ran.contains("access-control-allow-origin: http://tools.example:3000")
            && ran.contains("ran\\n"),
        "{ran}"
    );
    let other = send(
        address,
        "POST",
        "/run_code",
        &own,
        &[JSON, ("origin", "http://other.example:3000")],
        program().as_bytes(),
    );
    assert_eq!(status_of(&other), 403, "{other}");
    let (code, log) = served.terminate();
    assert_eq!(code, Some(0), "{log}");
}

/// Writes `bytes` one a second on `stream` until they are sent or the
/// server closes it.
fn trickle(mut stream: TcpStream, bytes: Vec<u8>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for byte in bytes {
            if stream.write_all(&[byte]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}

#[test]
fn idle_trickling_and_slow_body_clients_are_let_go_while_ordinary_requests_are_answered() {
    let dir = serving_dir("header_timeout = \"2s\"\nidle_timeout = \"2s\"\nbody_timeout = \"2s\"");
    let served = Served::start(&dir);
    let address = served.address;
    let own = address.to_string();
    // Connects and sends nothing.
    let idle = std::thread::spawn(move || read_to_close(connect(address)));
    // A head a byte a second.
    let slow_head = {
        let stream = connect(address);
        let head = format!(
            "POST /run_code HTTP/1.1\r\nhost: {own}\r\nx-slow: {}",
            "x".repeat(200)
        );
        let writer = trickle(stream.try_clone().unwrap(), head.into_bytes());
        std::thread::spawn(move || {
            let answer = read_to_close(stream);
            let _ = writer.join();
            answer
        })
    };
    // A whole head, then its body a byte a second.
    let slow_body = {
        let mut stream = connect(address);
        let body = program();
        let head = format!(
            "POST /run_code HTTP/1.1\r\nhost: {own}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        let writer = trickle(stream.try_clone().unwrap(), body.into_bytes());
        std::thread::spawn(move || {
            let answer = read_to_close(stream);
            let _ = writer.join();
            answer
        })
    };
    // Meanwhile the operator's client is answered.
    let ordinary = send(
        address,
        "POST",
        "/run_code",
        &own,
        &[JSON],
        program().as_bytes(),
    );
    assert_eq!(status_of(&ordinary), 200, "{ordinary}");

    assert_eq!(
        idle.join().unwrap(),
        "",
        "an idle connection is closed unanswered"
    );
    let answer = slow_head.join().unwrap();
    assert_eq!(status_of(&answer), 408, "{answer}");
    assert!(answer.contains("[serve] header_timeout"), "{answer}");
    let answer = slow_body.join().unwrap();
    assert_eq!(status_of(&answer), 408, "{answer}");
    assert!(answer.contains("[serve] body_timeout"), "{answer}");
    assert_eq!(
        rows(&dir, "observations"),
        1,
        "only the ordinary request ran"
    );
    let (code, log) = served.terminate();
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains("request head did not arrive within [serve] header_timeout")
            && log.contains("status=408"),
        "{log}"
    );
}

#[test]
fn past_max_connections_a_connection_is_answered_503_and_the_rest_are_served() {
    let dir = serving_dir("max_connections = 2");
    let served = Served::start(&dir);
    let address = served.address;
    let own = address.to_string();
    let holding = [connect(address), connect(address)];
    let refused = send(address, "GET", "/healthz", &own, &[], b"");
    assert_eq!(status_of(&refused), 503, "{refused}");
    assert!(
        refused.contains("retry-after: 1") && refused.contains("max_connections = 2"),
        "{refused}"
    );
    drop(holding);
    // Once they are closed (the server sees it soon), connections are served.
    let served_again = (0..1200).find_map(|_| {
        let answer = send(address, "GET", "/healthz", &own, &[], b"");
        if status_of(&answer) == 200 {
            return Some(answer);
        }
        std::thread::sleep(Duration::from_millis(100));
        None
    });
    assert!(served_again.is_some(), "no connection was served again");
    let (code, log) = served.terminate();
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("max_connections"), "{log}");
}

/// A zip archive of `entries` (name, contents), each deflated when
/// `deflate`, else stored, written by hand as the format says.
fn zip_archive(entries: &[(String, Vec<u8>)], deflate: bool) -> Vec<u8> {
    let mut archive = Vec::new();
    let mut directory = Vec::new();
    for (name, contents) in entries {
        let mut crc = flate2::Crc::new();
        crc.update(contents);
        let data = if deflate {
            let mut encoder =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(contents).unwrap();
            encoder.finish().unwrap()
        } else {
            contents.clone()
        };
        let method: u16 = if deflate { 8 } else { 0 };
        let offset = archive.len() as u32;
        let sizes = |out: &mut Vec<u8>| {
            out.extend_from_slice(&crc.sum().to_le_bytes());
            out.extend_from_slice(&(data.len() as u32).to_le_bytes());
            out.extend_from_slice(&(contents.len() as u32).to_le_bytes());
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        };
        // Local header: version 20, no flags, the method, a 1980 date.
        archive.extend_from_slice(b"PK\x03\x04\x14\x00\x00\x00");
        archive.extend_from_slice(&method.to_le_bytes());
        archive.extend_from_slice(&[0, 0, 0x21, 0]);
        sizes(&mut archive);
        archive.extend_from_slice(&[0, 0]);
        archive.extend_from_slice(name.as_bytes());
        archive.extend_from_slice(&data);
        // Its central directory record.
        directory.extend_from_slice(b"PK\x01\x02\x14\x00\x14\x00\x00\x00");
        directory.extend_from_slice(&method.to_le_bytes());
        directory.extend_from_slice(&[0, 0, 0x21, 0]);
        sizes(&mut directory);
        directory.extend_from_slice(&[0; 12]);
        directory.extend_from_slice(&offset.to_le_bytes());
        directory.extend_from_slice(name.as_bytes());
    }
    let start = archive.len() as u32;
    archive.extend_from_slice(&directory);
    archive.extend_from_slice(b"PK\x05\x06\x00\x00\x00\x00");
    let count = (entries.len() as u16).to_le_bytes();
    archive.extend_from_slice(&count);
    archive.extend_from_slice(&count);
    archive.extend_from_slice(&(directory.len() as u32).to_le_bytes());
    archive.extend_from_slice(&start.to_le_bytes());
    archive.extend_from_slice(&[0, 0]);
    archive
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn judge0_zip_bombs_are_refused_naming_additional_files_before_they_are_inflated() {
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let many_empty: Vec<(String, Vec<u8>)> =
        (0..20_000).map(|i| (format!("e{i}"), Vec::new())).collect();
    let zeros = |name: &str, bytes: usize| vec![(name.to_string(), vec![0u8; bytes])];
    for (bomb, said) in [
        (zip_archive(&many_empty, false), "lists 20000 entries"),
        // 64 MiB in about 64 KiB: past what files may hold.
        (
            zip_archive(&zeros("zeros", 64 << 20), true),
            "declare more than",
        ),
        // 8 MiB in about 8 KiB: within the bytes, past the ratio.
        (
            zip_archive(&zeros("zeros", 8 << 20), true),
            "more than 100 times its compressed size",
        ),
    ] {
        let reply = served.post_json(
            "/submissions?wait=true",
            &json!({"source_code": "print('ran')", "language_id": 71,
                    "additional_files": base64(&bomb)}),
        );
        assert_eq!(
            reply.status,
            422,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        let refusal = reply.json()["additional_files"][0]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(refusal.contains(said), "{refusal}");
    }
    // A small archive is taken.
    let small = zip_archive(&[("data.txt".to_string(), b"42\n".to_vec())], true);
    let reply = served.post_json(
        "/submissions?wait=true",
        &json!({"source_code": "print(open('data.txt').read().strip())", "language_id": 71,
                "additional_files": base64(&small)}),
    );
    assert_eq!(
        reply.status,
        201,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(reply.json()["stdout"], "42\n", "{}", reply.json());
    assert_eq!(
        rows(&dir, "submissions"),
        1,
        "a refused submission was stored"
    );
    let (code, log) = served.terminate();
    assert_eq!(code, Some(0), "{log}");
}

/// A page server on another loopback port: `GET /` answers `page`; the
/// body of `POST /report` is sent on the returned channel.
fn page_server(page: String) -> (SocketAddr, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let address = listener.local_addr().unwrap();
    let (reports, received) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut raw = Vec::new();
            let mut buffer = [0u8; 4096];
            // The head, then as much body as it declares.
            let (head, mut body) = loop {
                match stream.read(&mut buffer) {
                    Ok(0) | Err(_) => break (String::new(), Vec::new()),
                    Ok(n) => raw.extend_from_slice(&buffer[..n]),
                }
                if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                    break (
                        String::from_utf8_lossy(&raw[..end]).into_owned(),
                        raw[end + 4..].to_vec(),
                    );
                }
            };
            let length = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            while body.len() < length {
                match stream.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => body.extend_from_slice(&buffer[..n]),
                }
            }
            let (status, content) = if head.starts_with("GET / ") {
                ("200 OK", page.clone())
            } else if head.starts_with("POST /report ") {
                let _ = reports.send(String::from_utf8_lossy(&body).into_owned());
                ("200 OK", String::new())
            } else {
                ("404 Not Found", String::new())
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{content}",
                content.len()
            );
        }
    });
    (address, received)
}

/// The page: from another origin, it tries every way a page has to make
/// the server run a program (fetch with and without CORS, a beacon, form
/// posts, a DNS-rebound name), then reports what it saw.
fn attacking_page(server: SocketAddr) -> String {
    let port = server.port();
    let target = format!("http://127.0.0.1:{port}");
    let rebound = format!("http://rebound.evil.example:{port}");
    let program = program().replace('\'', "\\'");
    format!(
        r#"<!doctype html><html><body>
<iframe name="sink"></iframe><iframe name="sink2"></iframe>
<form id="text" method="POST" action="{target}/run_code" enctype="text/plain" target="sink">
<input name='{{"code": "print(1)", "language": "python", "x": "' value='"}}'></form>
<form id="urlencoded" method="POST" action="{target}/v1/run" target="sink2">
<input name="program" value="print(1)"></form>
<script>
const body = '{program}';
const judge0 = JSON.stringify({{source_code: "print(1)", language_id: 71}});
const results = {{}};
async function attempt(name, request) {{
  try {{
    const response = await request();
    results[name] = response.type + ":" + response.status;
  }} catch (error) {{
    results[name] = "error:" + error.name;
  }}
}}
function posted(form, frame) {{
  return new Promise(resolve => {{
    const sink = document.getElementsByName(frame)[0];
    sink.addEventListener("load", () => resolve("loaded"), {{once: true}});
    setTimeout(() => resolve("timeout"), 10000);
    document.getElementById(form).submit();
  }});
}}
(async () => {{
  await attempt("cors_json", () => fetch("{target}/run_code",
    {{method: "POST", headers: {{"content-type": "application/json"}}, body}}));
  await attempt("no_cors_text", () => fetch("{target}/run_code",
    {{method: "POST", mode: "no-cors", headers: {{"content-type": "text/plain"}}, body}}));
  await attempt("no_cors_judge0", () => fetch("{target}/submissions?wait=true",
    {{method: "POST", mode: "no-cors", body: judge0}}));
  await attempt("cors_health", () => fetch("{target}/healthz"));
  await attempt("rebound_text", () => fetch("{rebound}/run_code",
    {{method: "POST", mode: "no-cors", headers: {{"content-type": "text/plain"}}, body}}));
  await attempt("rebound_health", () => fetch("{rebound}/healthz"));
  results.beacon = navigator.sendBeacon("{target}/run_code",
    new Blob([body], {{type: "text/plain"}})) ? "queued" : "refused";
  results.form_text = await posted("text", "sink");
  results.form_urlencoded = await posted("urlencoded", "sink2");
  // Give the beacon its time, then report.
  await new Promise(resolve => setTimeout(resolve, 1000));
  await fetch("/report", {{method: "POST", body: JSON.stringify(results)}});
}})();
</script></body></html>"#
    )
}

/// The sum of `/metrics`' `progscore_http_requests_total` samples whose
/// status is `status`, and the routes they name.
fn requests_answered(served: &Served, status: u16) -> (f64, Vec<String>) {
    let text = String::from_utf8(served.request("GET", "/metrics", &[], b"").body).unwrap();
    let mut total = 0.0;
    let mut routes = Vec::new();
    for line in text.lines() {
        let Some(labels) = line.strip_prefix("progscore_http_requests_total{") else {
            continue;
        };
        if !labels.contains(&format!("status=\"{status}\"")) {
            continue;
        }
        let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        total += value;
        routes.push(labels.split('"').nth(1).unwrap_or_default().to_string());
    }
    (total, routes)
}

#[test]
fn a_web_page_elsewhere_cannot_make_the_server_run_anything_in_a_real_browser() {
    let Some(chromium) = ["chromium", "chromium-browser"].into_iter().find(|name| {
        std::process::Command::new("which")
            .arg(name)
            .output()
            .is_ok_and(|output| output.status.success())
    }) else {
        eprintln!("SKIPPED: no chromium on PATH (scripts/setup.sh installs Debian's `chromium`)");
        return;
    };
    let dir = serving_dir("");
    let served = Served::start(&dir);
    let (page, reports) = page_server(attacking_page(served.address));
    let profile = tempfile::tempdir().expect("a browser profile folder");
    let mut browser = std::process::Command::new(chromium);
    browser
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-proxy-server",
            // The rebinding page's name resolves to this machine.
            "--host-resolver-rules=MAP rebound.evil.example 127.0.0.1",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("http://{page}/"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    // Its own process group, so that the browser's helpers end with it.
    std::os::unix::process::CommandExt::process_group(&mut browser, 0);
    let mut browser = browser.spawn().expect("start chromium");
    let report = reports.recv_timeout(PATIENCE);
    // SAFETY: kill has no memory preconditions; the group is the browser's.
    unsafe { libc::kill(-(browser.id() as i32), libc::SIGKILL) };
    let _ = browser.wait();
    let report = report.unwrap_or_else(|_| {
        let mut stderr = String::new();
        let _ = browser.stderr.take().unwrap().read_to_string(&mut stderr);
        panic!("the page never reported what it saw; chromium said:\n{stderr}")
    });
    let seen: serde_json::Value = serde_json::from_str(&report).expect("the page's report");
    // A page may send without asking; it reads nothing, and nothing runs.
    for name in ["cors_json", "cors_health", "rebound_health"] {
        assert_eq!(seen[name], "error:TypeError", "{name}: {seen}");
    }
    for name in ["no_cors_text", "no_cors_judge0", "rebound_text"] {
        assert_eq!(seen[name], "opaque:0", "{name}: {seen}");
    }
    assert_eq!(
        rows(&dir, "observations"),
        0,
        "a page's request ran: {seen}"
    );
    assert_eq!(
        rows(&dir, "submissions"),
        0,
        "a page's request was stored: {seen}"
    );
    // The server was reached and refused each attempt.
    let (forbidden, routes) = requests_answered(&served, 403);
    assert!(
        forbidden >= 5.0,
        "{forbidden} refused (403) on {routes:?}; the page saw {seen}"
    );
    for route in ["/run_code", "/submissions", "/healthz", "/v1/run"] {
        assert!(
            routes.iter().any(|r| r == route),
            "{route} not refused: {routes:?}"
        );
    }
    let (misdirected, _) = requests_answered(&served, 421);
    assert!(
        misdirected >= 2.0,
        "the rebound name was not refused: {seen}"
    );
    assert_eq!(requests_answered(&served, 200).1, ["/metrics"], "{seen}");
    let (code, log) = served.terminate();
    assert_eq!(code, Some(0), "{log}");
}
