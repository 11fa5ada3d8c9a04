//! `progscore serve`: the HTTP face over the same runtime as the CLI and
//! the Python package. It has no policy of its own: the config, the
//! backends, the evidence store, the scorer and the batch policy are
//! `progscore-runtime`'s; this crate maps requests onto them.
//!
//! Each dialect is one module (`native` for `/v1`, `sandbox_fusion` for
//! `/run_code`, `judge0` for `/submissions`, `piston` for
//! `/api/v2/execute`), and every dialect runs programs through one shared path
//! ([`execute`]): a per-profile queue, then the scorer's evidence path
//! (stored evidence reused, in-flight runs joined, runs stored). Dialects
//! differ only in how they map requests and answers.
//!
//! # Decisions
//! - It listens on loopback unless told otherwise; any other address needs
//!   at least one token (`Authorization: Bearer`, or Judge0's
//!   `X-Auth-Token`), compared in constant time. `/healthz` and `/readyz`
//!   need none: they say nothing but "up" and "ready".
//! - Only the operator's clients: a request must name this server in its
//!   `Host` (DNS rebinding fails), a web page's request (`Origin`) is
//!   refused unless its origin is configured, and JSON routes take JSON
//!   only (a page can send `text/plain` or a form without asking)
//!   ([`exposure`], [`body`]). CORS answers go to configured origins only.
//! - Slow or many clients cannot hold the server: connections are capped,
//!   idle ones and slow heads let go ([`connections`]), bodies have a
//!   deadline and a memory budget over all requests ([`body_limits`]).
//! - Logs name the request id, route, status and time, never a body.
//! - A run belongs to the server, not to the connection: a client that
//!   goes away cancels its run, whose cleanup still finishes (and a drain
//!   waits for it).

mod dialects;
mod http;
mod jobs;
mod retention;
pub mod settings;
mod state;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use progscore_runtime::backends::WasiWorkers;
use progscore_runtime::config::Config;
use progscore_runtime::session::Session;
use tokio::net::TcpListener;

pub use http::error::{ApiError, ServeError};
pub use http::metrics::Metrics;
pub use settings::ServeSettings;
pub use state::AppState;

use dialects::{judge0, native, piston, sandbox_fusion};
use http::{auth, body_limits, connections, exposure, observe, openapi};

/// A server built from a config: its session opened and every served
/// profile's preflight passed.
pub struct Server {
    state: Arc<AppState>,
}

impl Server {
    /// Opens the session and runs the preflight of every profile served, as
    /// `progscore score` does before its first item; refuses an address
    /// other than loopback without a token, and a profile that cannot run.
    pub async fn build(
        config: Config,
        settings: ServeSettings,
        workers: WasiWorkers,
    ) -> Result<Server, ServeError> {
        if !settings.listen.ip().is_loopback() && !settings.requires_token() {
            return Err(ServeError::TokenRequired {
                config: config.path.display().to_string(),
                listen: settings.listen,
            });
        }
        let session = Session::open(&config, workers)?;
        let state = AppState::new(config, settings, session)?;
        state.preflight().await?;
        Ok(Server {
            state: Arc::new(state),
        })
    }

    /// The shared state (for tests and the metrics of a caller).
    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// The router with every route and layer.
    pub fn router(&self) -> Router {
        router(self.state.clone())
    }

    /// Serves on `listener` until `shutdown` resolves; then stops accepting,
    /// lets in-flight requests finish within the drain time, cancels what is
    /// left (each run cleans up), and returns once every run has ended.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let state = self.state.clone();
        // The Host check admits the address actually bound (port 0 asked).
        let app = router_on(state.clone(), listener.local_addr()?);
        let stop = tokio_util::sync::CancellationToken::new();
        let draining = {
            let stop = stop.clone();
            let state = state.clone();
            async move {
                shutdown.await;
                state.begin_drain();
                tracing::info!(
                    drain_s = state.settings().drain.as_secs_f64(),
                    in_flight = state.runs_in_flight(),
                    "draining"
                );
                stop.cancel();
            }
        };
        tokio::spawn(draining);
        let pruning = state.settings().retention.clone().map(|settings| {
            tokio::spawn(retention::prune_periodically(
                state.clone(),
                settings,
                stop.clone(),
            ))
        });
        let server = connections::serve(listener, state.settings().connections, app, {
            let stop = stop.clone();
            async move { stop.cancelled().await }
        });
        // Past the drain time, what still runs is cancelled: each run's
        // cleanup finishes inside its task, which the tracker waits for.
        let cancel_after_drain = tokio::spawn({
            let state = state.clone();
            async move {
                stop.cancelled().await;
                tokio::time::sleep(state.settings().drain).await;
                tracing::warn!(
                    in_flight = state.runs_in_flight(),
                    "drain time over: cancelling what is left"
                );
                state.cancel_runs();
            }
        });
        let served = server.await;
        cancel_after_drain.abort();
        if let Some(pruning) = pruning {
            // A prune under way finishes its batch on its blocking thread.
            pruning.abort();
        }
        state.cancel_runs();
        state.wait_for_runs().await;
        // Its runs are over: what it accepted and did not finish is failed
        // now, before its owner's lock goes with it.
        let failing = state.clone();
        let _ = tokio::task::spawn_blocking(move || judge0::fail_unfinished(&failing)).await;
        served.map_err(ServeError::Io)
    }
}

/// Every route, behind the request log, the checks of who calls, the body
/// deadline and limit, the token check and the body memory budget; the
/// Host check admits `[serve] listen`.
pub fn router(state: Arc<AppState>) -> Router {
    let listen = state.settings().listen;
    router_on(state, listen)
}

/// [`router`] for a server bound to `listen`.
fn router_on(state: Arc<AppState>, listen: SocketAddr) -> Router {
    use axum::middleware::{from_fn, from_fn_with_state};
    let settings = state.settings();
    let max_body = usize::try_from(settings.max_body).unwrap_or(usize::MAX);
    let exposure = Arc::new(exposure::Exposure::new(settings, listen));
    let budget = Arc::new(body_limits::BodyBudget::new(
        settings.max_bodies_in_memory,
        settings.max_body,
    ));
    // Layers run from the last added to the first: a request is marked on
    // its connection, logged, checked for who sends it, then its body is
    // bounded in time and size, its token checked, and its body's memory
    // taken from the budget just before the route reads it.
    let routes = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .route(
            "/openapi.json",
            get(|| async { axum::Json(openapi::document()) }),
        )
        .merge(native::routes())
        .merge(sandbox_fusion::routes())
        .merge(judge0::routes())
        .merge(piston::routes())
        .fallback(not_found)
        .layer(from_fn_with_state(budget, body_limits::hold_body_share))
        .layer(from_fn_with_state(state.clone(), auth::require_token))
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .layer(from_fn_with_state(
            settings.connections.body_timeout,
            body_limits::body_deadline,
        ));
    // Outside the token check: a browser's preflight carries none.
    let routes = match exposure::cors_for(settings) {
        Some(cors) => routes.layer(cors),
        None => routes,
    };
    routes
        .layer(from_fn_with_state(exposure, exposure::admit_callers))
        .layer(from_fn_with_state(state.clone(), observe::log_request))
        .layer(from_fn(connections::mark_request))
        .with_state(state)
}

/// Liveness: the process answers.
async fn healthz() -> &'static str {
    "ok\n"
}

/// Readiness: preflight passed and the server is not draining.
async fn readyz(
    axum::extract::State(state): axum::extract::State<Arc<AppState>>,
) -> (axum::http::StatusCode, &'static str) {
    if state.is_draining() {
        (axum::http::StatusCode::SERVICE_UNAVAILABLE, "draining\n")
    } else {
        (axum::http::StatusCode::OK, "ready\n")
    }
}

/// `GET /metrics`: the Prometheus text format. The store's size and rows
/// are read on a blocking thread (counting a large table takes a while).
async fn metrics_text(
    axum::extract::State(state): axum::extract::State<Arc<AppState>>,
) -> impl axum::response::IntoResponse {
    let store = state.session().store.clone();
    match tokio::task::spawn_blocking(move || store.usage()).await {
        Ok(Ok(usage)) => state.metrics().store_usage(&usage),
        Ok(Err(error)) => tracing::warn!(%error, "could not read the store's size for /metrics"),
        Err(error) => tracing::warn!(%error, "reading the store's size panicked"),
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics_text(),
    )
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no route {}", uri.path()))
}
