//! Who may call the server: only the operator's clients, never a web page.
//!
//! - The `Host` a request names (its `Host` header, or the authority of an
//!   absolute request target) must be the listen address, `localhost` /
//!   `127.0.0.1` / `[::1]` with its port when it listens on loopback, any
//!   address with its port when it listens on all of them, or a name in
//!   `[serve] hosts`; else 421. A page that rebinds its own DNS name to
//!   this server (DNS rebinding) still names itself, so it is refused. A
//!   request with no `Host` at all (HTTP/1.0 tools) is admitted: browsers
//!   always send one.
//! - A request carrying `Origin` (what browsers add to a page's requests
//!   other than plain `GET`s) is refused with 403 unless that origin is in
//!   `[serve] origins`; so is a browser request from another site that
//!   carries none (`Sec-Fetch-Site: cross-site` or `same-site`: a link, an
//!   image). Pages of a configured origin get CORS answers (see
//!   [`cors_for`]).
//!
//! Both apply to every route, `/healthz` and `/readyz` included: a
//! rebinding page must learn nothing, not even that the server is up.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::settings::{ServeSettings, split_host};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::http::error::ApiError;

/// The hosts and origins a server admits.
#[derive(Debug, Clone)]
pub(crate) struct Exposure {
    port: u16,
    /// Names admitted with the listen port (lower case, brackets kept).
    own_names: Vec<String>,
    /// Listening on every address: any IP address with the port.
    any_address: bool,
    /// `[serve] hosts`: `name` (any port) or `name:port`.
    configured: Vec<String>,
    /// `[serve] origins`.
    origins: Vec<String>,
}

/// Why a request was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Refusal {
    /// Its `Host` is not this server.
    ForeignHost(String),
    /// A page of an origin not configured.
    ForeignOrigin(String),
    /// A browser request from another site, without an `Origin`.
    CrossSite(String),
}

impl Exposure {
    /// What a server listening on `listen` (its bound address) with
    /// `settings` admits.
    pub(crate) fn new(settings: &ServeSettings, listen: SocketAddr) -> Exposure {
        let literal = |ip: IpAddr| match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        };
        let mut own_names = vec![literal(listen.ip())];
        if listen.ip().is_loopback() {
            for name in ["localhost", "127.0.0.1", "[::1]"] {
                if !own_names.iter().any(|own| own == name) {
                    own_names.push(name.to_string());
                }
            }
        }
        let any_address = listen.ip().is_unspecified();
        if any_address {
            own_names.push("localhost".into());
        }
        Exposure {
            port: listen.port(),
            own_names,
            any_address,
            configured: settings.hosts.clone(),
            origins: settings.origins.clone(),
        }
    }

    /// Whether the request `host` names (a `Host` header's value) is this
    /// server.
    fn admits_host(&self, host: &str) -> bool {
        let lower = host.to_ascii_lowercase();
        let Some((name, port)) = split_host(&lower) else {
            return false;
        };
        let name = name.trim_end_matches('.');
        let port = port.unwrap_or(80);
        if port == self.port {
            if self.own_names.iter().any(|own| own == name) {
                return true;
            }
            let unbracketed = name.trim_start_matches('[').trim_end_matches(']');
            if self.any_address && unbracketed.parse::<IpAddr>().is_ok() {
                return true;
            }
        }
        self.configured
            .iter()
            .any(|configured| configured == name || *configured == format!("{name}:{port}"))
    }

    /// `Ok` when `request` may be served.
    fn admit(&self, request: &Request) -> Result<(), Refusal> {
        let host = request
            .uri()
            .authority()
            .map(|authority| authority.as_str().to_string())
            .or_else(|| {
                request
                    .headers()
                    .get(header::HOST)
                    .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
            });
        if let Some(host) = host
            && !self.admits_host(&host)
        {
            return Err(Refusal::ForeignHost(host));
        }
        if let Some(origin) = request.headers().get(header::ORIGIN) {
            let origin = String::from_utf8_lossy(origin.as_bytes()).to_ascii_lowercase();
            if !self.origins.contains(&origin) {
                return Err(Refusal::ForeignOrigin(origin));
            }
            return Ok(());
        }
        let site = request
            .headers()
            .get("sec-fetch-site")
            .map(|value| String::from_utf8_lossy(value.as_bytes()).to_ascii_lowercase());
        match site.as_deref() {
            Some(site @ ("cross-site" | "same-site")) => Err(Refusal::CrossSite(site.into())),
            _ => Ok(()),
        }
    }

    /// The names this server answers to, for a refusal's message.
    fn answers_to(&self) -> String {
        let mut names: Vec<String> = self
            .own_names
            .iter()
            .map(|name| format!("{name}:{}", self.port))
            .collect();
        if self.any_address {
            names.push(format!("any of its addresses with port {}", self.port));
        }
        names.extend(self.configured.iter().cloned());
        names.join(", ")
    }
}

impl Refusal {
    fn into_api_error(self, exposure: &Exposure) -> ApiError {
        let shown = |text: &str| text.chars().take(100).collect::<String>();
        let (status, message) = match self {
            Refusal::ForeignHost(host) => (
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "this server is not {:?}: it answers to {} (other names must be listed in [serve] hosts)",
                    shown(&host),
                    exposure.answers_to()
                ),
            ),
            Refusal::ForeignOrigin(origin) => (
                StatusCode::FORBIDDEN,
                format!(
                    "requests from web pages are refused: origin {:?} is not in [serve] origins",
                    shown(&origin)
                ),
            ),
            Refusal::CrossSite(site) => (
                StatusCode::FORBIDDEN,
                format!(
                    "requests a browser makes for another site's page (Sec-Fetch-Site: {site}) are refused"
                ),
            ),
        };
        ApiError {
            status,
            message,
            field: None,
            retry_after: None,
        }
    }
}

/// Middleware: refuses a request that names another host (421) or comes
/// from a web page not configured (403), before anything else is done.
pub(crate) async fn admit_callers(
    State(exposure): State<Arc<Exposure>>,
    request: Request,
    next: Next,
) -> Response {
    match exposure.admit(&request) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            tracing::warn!(?refusal, "request refused: not from the operator's clients");
            refusal.into_api_error(&exposure).into_response()
        }
    }
}

/// CORS answers for the pages of `[serve] origins` (none when it is
/// empty): they may send JSON with a token and read the answers and the
/// evidence headers.
pub(crate) fn cors_for(settings: &ServeSettings) -> Option<tower_http::cors::CorsLayer> {
    if settings.origins.is_empty() {
        return None;
    }
    let origins: Vec<HeaderValue> = settings
        .origins
        .iter()
        .filter_map(|origin| HeaderValue::from_str(origin).ok())
        .collect();
    Some(
        tower_http::cors::CorsLayer::new()
            .allow_origin(origins)
            .allow_methods([Method::GET, Method::POST])
            .allow_headers([
                header::CONTENT_TYPE,
                header::AUTHORIZATION,
                HeaderName::from_static("x-auth-token"),
            ])
            .expose_headers([
                HeaderName::from_static("x-request-id"),
                HeaderName::from_static(crate::jobs::execute::OBSERVATION_HEADER),
                HeaderName::from_static(crate::jobs::execute::EVIDENCE_HEADER),
                header::RETRY_AFTER,
            ])
            .max_age(std::time::Duration::from_secs(600)),
    )
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::routing::{get, post};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    fn exposure(listen: &str, hosts: &[&str], origins: &[&str]) -> Exposure {
        let settings = ServeSettings {
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            origins: origins.iter().map(|o| o.to_string()).collect(),
            ..ServeSettings::default()
        };
        Exposure::new(&settings, listen.parse().unwrap())
    }

    #[test]
    fn on_loopback_the_listen_address_and_loopback_names_with_its_port_are_admitted() {
        let exposure = exposure("127.0.0.1:8080", &[], &[]);
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "localhost.:8080",
            "[::1]:8080",
        ] {
            assert!(exposure.admits_host(host), "{host}");
        }
        for host in [
            "evil.example:8080",
            "localhost:8081",
            "localhost",
            "127.0.0.1",
            "10.0.0.1:8080",
            "localhost.evil.example:8080",
            "127.0.0.1:8080@evil.example",
            "",
        ] {
            assert!(!exposure.admits_host(host), "{host}");
        }
    }

    #[test]
    fn configured_names_are_admitted_with_their_port_or_any() {
        let exposure = exposure(
            "10.1.2.3:9000",
            &["sandbox.internal", "judge.internal:443"],
            &[],
        );
        for host in [
            "10.1.2.3:9000",
            "sandbox.internal",
            "sandbox.internal:9000",
            "Sandbox.Internal:8443",
            "judge.internal:443",
        ] {
            assert!(exposure.admits_host(host), "{host}");
        }
        for host in [
            "localhost:9000",
            "judge.internal:9000",
            "judge.internal",
            "10.1.2.4:9000",
        ] {
            assert!(!exposure.admits_host(host), "{host}");
        }
        // Listening everywhere: an address with the port is this server (a
        // rebinding page names its own DNS name, never an address).
        let everywhere = super::tests::exposure("0.0.0.0:9000", &[], &[]);
        for host in ["10.1.2.3:9000", "[fd00::1]:9000", "localhost:9000"] {
            assert!(everywhere.admits_host(host), "{host}");
        }
        assert!(!everywhere.admits_host("rebound.evil.example:9000"));
        assert!(!everywhere.admits_host("10.1.2.3:9001"));
    }

    fn app(exposure: Exposure) -> Router {
        Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/run_code", post(|| async { "ran" }))
            .layer(axum::middleware::from_fn_with_state(
                Arc::new(exposure),
                admit_callers,
            ))
    }

    async fn ask(app: &Router, request: axum::http::request::Builder) -> (StatusCode, String) {
        let answer = app
            .clone()
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = answer.status();
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn a_foreign_host_is_refused_421_on_every_route_health_included() {
        let app = app(exposure("127.0.0.1:8080", &[], &[]));
        let own = Request::post("/run_code").header("host", "localhost:8080");
        assert_eq!(ask(&app, own).await.0, StatusCode::OK);
        for path in ["/healthz", "/run_code"] {
            let rebound = Request::get(path).header("host", "rebound.evil.example:8080");
            let (status, body) = ask(&app, rebound).await;
            assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{path}: {body}");
            assert!(
                body.contains("rebound.evil.example:8080")
                    && body.contains("localhost:8080")
                    && body.contains("[serve] hosts"),
                "{body}"
            );
        }
        // An absolute target names the host too.
        let absolute =
            Request::post("http://evil.example:8080/run_code").header("host", "localhost:8080");
        assert_eq!(ask(&app, absolute).await.0, StatusCode::MISDIRECTED_REQUEST);
        // No Host at all: not a browser.
        assert_eq!(ask(&app, Request::get("/healthz")).await.0, StatusCode::OK);
    }

    #[tokio::test]
    async fn a_page_is_refused_403_unless_its_origin_is_configured() {
        let app = app(exposure(
            "127.0.0.1:8080",
            &[],
            &["http://tools.example:3000"],
        ));
        let host = ("host", "127.0.0.1:8080");
        for origin in ["http://evil.example", "null", "http://127.0.0.1:8080"] {
            let page = Request::post("/run_code")
                .header(host.0, host.1)
                .header("origin", origin);
            let (status, body) = ask(&app, page).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{origin}: {body}");
            assert!(body.contains("[serve] origins"), "{body}");
        }
        let configured = Request::post("/run_code")
            .header(host.0, host.1)
            .header("origin", "http://Tools.example:3000");
        assert_eq!(ask(&app, configured).await.0, StatusCode::OK);
        // A cross-site navigation or image carries no Origin.
        let image = Request::get("/healthz")
            .header(host.0, host.1)
            .header("sec-fetch-site", "cross-site");
        let (status, body) = ask(&app, image).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(body.contains("Sec-Fetch-Site: cross-site"), "{body}");
        let typed = Request::get("/healthz")
            .header(host.0, host.1)
            .header("sec-fetch-site", "none");
        assert_eq!(ask(&app, typed).await.0, StatusCode::OK);
    }
}
