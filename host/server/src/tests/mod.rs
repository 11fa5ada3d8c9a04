//! The server's routes tested in process: the real router, state, scorer
//! and SQLite store, with programs "run" by a scripted sandbox client (the
//! contract's fake), so what is tested is how each dialect maps requests,
//! runs and faults onto answers. What only a real engine shows is tested
//! in `tests/serve` against a running `progscore serve`.

mod answers;
mod batches;
mod judge0;
mod overload;
mod piston;
mod regrade;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use progscore_runtime::config::Config;
use progscore_runtime::session::Session;
use progscore_sandbox::fake::{FakeRequest, ScriptedClient};
use progscore_sandbox::{InvocationEvent, SandboxError};
use serde_json::Value;
use tower::ServiceExt as _;

use crate::state::AppState;

/// A profile that compiles (so single-case requests of one program are
/// gathered into one build) and one that does not.
const CONFIG: &str = r#"
[store]
path = "progscore.db"

[serve]


[profiles.cpp]
backend = "docker"
image = "127.0.0.1:5000/cc-sandbox@sha256:0000000000000000000000000000000000000000000000000000000000000000"
source = "main.cpp"
compile = ["g++", "-o", "/build/main", "/sandbox/main.cpp"]
command = ["/build/main"]

[profiles.python]
backend = "docker"
image = "127.0.0.1:5000/python-sandbox@sha256:0000000000000000000000000000000000000000000000000000000000000000"
command = ["python3", "-I"]
"#;

/// A responder whose every case prints `ok` (exit 0).
fn prints_ok(request: &FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError> {
    Ok(request
        .invocations
        .iter()
        .map(|_| progscore_sandbox::fake::exited_event(0, b"ok\n", b""))
        .collect())
}

/// A server's state over a scripted sandbox, its store in a folder of its own.
struct Served {
    state: Arc<AppState>,
    /// The scripted client the runs go to (its counters say how many ran).
    client: ScriptedClient,
    _folder: tempfile::TempDir,
}

impl Served {
    /// The state for `CONFIG` with `serve` (lines of its `[serve]` table;
    /// `concurrency` defaults to 2) its runs scripted by `responder`.
    async fn new(
        serve: &str,
        responder: impl Fn(&FakeRequest) -> Result<Vec<InvocationEvent>, SandboxError>
        + Send
        + Sync
        + 'static,
        delay: std::time::Duration,
    ) -> Served {
        Served::with_client(serve, |client| {
            client.with_responder(responder).with_delay(delay)
        })
        .await
    }

    /// The state for `CONFIG` with `serve`, its scripted client as
    /// `configure` makes it.
    async fn with_client(
        serve: &str,
        configure: impl FnOnce(ScriptedClient) -> ScriptedClient,
    ) -> Served {
        let folder = tempfile::tempdir().expect("a temporary folder");
        let path = folder.path().join("progscore.toml");
        // Defaults for the tests: two in flight, a gathering window wide
        // enough for requests sent together to meet in it.
        let mut serve = serve.to_string();
        for (key, line) in [
            ("concurrency", "concurrency = 2"),
            ("gather", "gather = \"300ms\""),
        ] {
            if !serve.contains(key) {
                serve = format!("{line}\n{serve}");
            }
        }
        let text = CONFIG.replace("[serve]\n", &format!("[serve]\n{serve}\n"));
        std::fs::write(&path, &text).expect("the config written");
        let config = Config::parse(&path, &text).expect("the test config parses");
        let client = configure(ScriptedClient::new(config.profiles.clone()));
        let session = Session::with_sandbox(&config, Arc::new(client.clone())).expect("a session");
        let settings = crate::ServeSettings::from_config(&config).expect("the [serve] table");
        let state = AppState::new(config, settings, session).expect("the state");
        state
            .preflight()
            .await
            .expect("the scripted preflight passes");
        Served {
            state: Arc::new(state),
            client,
            _folder: folder,
        }
    }

    /// Sends `request` through the whole router; the status, the headers
    /// and the body as JSON (`Value::Null` when it is not JSON).
    async fn send(&self, request: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Value) {
        let response = crate::router(self.state.clone())
            .oneshot(request)
            .await
            .expect("the router answers");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("the body");
        (
            status,
            headers,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// `POST path` with a JSON body.
    async fn post(&self, path: &str, body: Value) -> (StatusCode, axum::http::HeaderMap, Value) {
        self.send(
            Request::post(path)
                .header("content-type", "application/json")
                .header("host", "127.0.0.1:8080")
                .body(Body::from(body.to_string()))
                .expect("a request"),
        )
        .await
    }

    /// `GET path`.
    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let (status, _, body) = self
            .send(
                Request::get(path)
                    .header("host", "127.0.0.1:8080")
                    .body(Body::empty())
                    .expect("a request"),
            )
            .await;
        (status, body)
    }

    /// How many runs the sandbox was asked for.
    fn runs(&self) -> usize {
        self.client
            .counters()
            .started
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The metrics page as text.
    fn metrics(&self) -> String {
        self.state.metrics_text()
    }
}

/// `POST path` with NDJSON lines; the answer's lines (a line that is not
/// JSON as a string).
async fn post_lines(served: &Served, path: &str, lines: &[Value]) -> (StatusCode, Vec<Value>) {
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    post_ndjson(served, path, body).await
}

/// `POST path` with an NDJSON body as given; the answer's lines.
async fn post_ndjson(served: &Served, path: &str, body: String) -> (StatusCode, Vec<Value>) {
    let response = crate::router(served.state.clone())
        .oneshot(
            Request::post(path)
                .header("content-type", "application/x-ndjson")
                .header("host", "127.0.0.1:8080")
                .body(Body::from(body))
                .expect("a request"),
        )
        .await
        .expect("the router answers");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("the body");
    let lines = String::from_utf8_lossy(&bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| Value::String(l.to_string())))
        .collect();
    (status, lines)
}
