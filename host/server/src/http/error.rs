//! Errors: why the server would not start, and what a request is answered
//! when it cannot be served (a status and a JSON body naming the field).

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use progscore_sandbox::SandboxError;
use thiserror::Error;

/// Why `progscore serve` did not start (the CLI exits 2 for each).
#[derive(Debug, Error)]
pub enum ServeError {
    /// Listening beyond loopback without a token.
    #[error(
        "{config}: [serve] listen = \"{listen}\" is not a loopback address, and no token is configured: anyone who reaches it could run programs here. Add `tokens = [\"...\"]` to [serve] (make one with: openssl rand -hex 32), or listen on 127.0.0.1"
    )]
    TokenRequired {
        /// The config file.
        config: String,
        /// The address asked for.
        listen: SocketAddr,
    },
    /// A served profile failed its preflight.
    #[error(
        "profile `{profile}` cannot run here: {cause}\n  Fix it (`progscore doctor` says what is wrong), or serve the others only: [serve] profiles = [{others}]"
    )]
    Preflight {
        /// The profile.
        profile: String,
        /// The other served profiles, quoted, for the suggested fix.
        others: String,
        /// Why.
        cause: Box<SandboxError>,
    },
    /// The session (store, comparators, backends) could not be opened.
    #[error(transparent)]
    Session(#[from] progscore_runtime::session::SessionError),
    /// Listening or serving failed.
    #[error("{0}")]
    Io(std::io::Error),
}

/// A request's refusal or failure: a status, a message, and the field at
/// fault when one is (`code`, `invocations[2].stdin`, `body`).
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What is wrong, for a person.
    pub message: String,
    /// The JSON path of the field at fault.
    pub field: Option<String>,
    /// For 429/503: when to try again.
    pub retry_after: Option<Duration>,
}

impl ApiError {
    /// 400 naming `field`.
    pub fn bad_field(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            field: Some(field.into()),
            retry_after: None,
        }
    }

    /// 413 naming `field` and its maximum.
    pub fn too_large(field: impl Into<String>, size: u64, max: u64) -> ApiError {
        let field = field.into();
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!(
                "`{field}` is {size} bytes; this server accepts at most {max} ([serve] max_* in its config)"
            ),
            field: Some(field),
            retry_after: None,
        }
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
            field: None,
            retry_after: None,
        }
    }

    /// 401: no token, or not one of the configured ones.
    pub fn unauthorized() -> ApiError {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            message:
                "a token is required: `Authorization: Bearer TOKEN` (or `X-Auth-Token: TOKEN`)"
                    .into(),
            field: None,
            retry_after: None,
        }
    }

    /// 503 while the server drains.
    pub fn draining() -> ApiError {
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "the server is shutting down".into(),
            field: None,
            retry_after: Some(Duration::from_secs(5)),
        }
    }

    /// 500 for a fault of the server itself (the store failed...).
    ///
    /// `detail` may name this host's files and ids (a store's path, an
    /// engine's endpoint): it goes to the log under an incident id, and the
    /// client is told only that id.
    pub fn internal(detail: impl std::fmt::Display) -> ApiError {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: logged_incident(&detail),
            field: None,
            retry_after: None,
        }
    }

    /// The same error with another status.
    pub fn with_status(mut self, status: StatusCode) -> ApiError {
        self.status = status;
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = serde_json::json!({"error": {"message": self.message}});
        if let Some(field) = &self.field {
            body["error"]["field"] = serde_json::Value::String(field.clone());
        }
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(after) = self.retry_after {
            let seconds = after.as_secs().max(1).to_string();
            if let Ok(value) = HeaderValue::from_str(&seconds) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        response
    }
}

// The message quotes the cause, so it is not also this error's source
// (a caller printing the chain would say it twice).
impl From<std::io::Error> for ServeError {
    fn from(error: std::io::Error) -> Self {
        ServeError::Io(error)
    }
}

/// Logs `detail` of a fault inside the server under a new incident id; what
/// the client is told instead.
pub(crate) fn logged_incident(detail: &dyn std::fmt::Display) -> String {
    let incident = uuid::Uuid::new_v4().simple().to_string();
    let incident = &incident[..12];
    tracing::error!(%incident, %detail, "a request failed inside the server");
    format!("an internal fault of the server (incident {incident}: its log has the details)")
}
