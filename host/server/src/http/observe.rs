//! The request log: one line per request with its id, method, route,
//! status and time. Never a body, a program or an output: what clients
//! send and what programs print stay out of the logs. The id is also the
//! response's `X-Request-Id`, so a client can quote it. Each request is
//! counted in the metrics by route pattern and status.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

use crate::state::AppState;

/// Request ids: this process's start time and a counter, unique across
/// restarts without a random source.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn request_id() -> String {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let prefix = PREFIX.get_or_init(|| {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        format!("{started:x}-{:x}", std::process::id())
    });
    format!("{prefix}-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed))
}

/// Middleware: logs the request when its response is ready.
pub(crate) async fn log_request(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let id = request_id();
    let started = Instant::now();
    let method = request.method().clone();
    // The route's pattern (`/v1/observations/{id}`), not the path: ids and
    // query strings stay out of the log.
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let mut response = next.run(request).await;
    let status = response.status().as_u16();
    state.metrics().request(&route, status);
    tracing::info!(
        request_id = %id,
        %method,
        route = %route,
        status,
        ms = started.elapsed().as_millis() as u64,
        "request"
    );
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}
