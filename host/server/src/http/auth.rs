//! The token check: when `[serve] tokens` is set, every route but the
//! health checks needs one of them, as `Authorization: Bearer TOKEN` or
//! Judge0's `X-Auth-Token: TOKEN`. Tokens are compared by their sha256 in
//! constant time, so neither the bytes nor the length leak through timing.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::http::error::ApiError;
use crate::state::AppState;

/// Routes anyone may ask: they tell only that the server is up and ready.
const OPEN_ROUTES: [&str; 2] = ["/healthz", "/readyz"];

/// Middleware: refuses a request without a configured token (401).
pub(crate) async fn require_token(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let tokens = &state.settings().tokens;
    if tokens.is_empty() || OPEN_ROUTES.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    match presented(request.headers()) {
        Some(given) if admits(tokens, given) => next.run(request).await,
        _ => ApiError::unauthorized().into_response(),
    }
}

/// The token a request carries, if any.
fn presented(headers: &HeaderMap) -> Option<&[u8]> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let value = value.as_bytes();
        let scheme = b"bearer ";
        if value.len() > scheme.len() && value[..scheme.len()].eq_ignore_ascii_case(scheme) {
            return Some(value[scheme.len()..].trim_ascii());
        }
        return None;
    }
    headers
        .get("x-auth-token")
        .map(|v| v.as_bytes().trim_ascii())
}

/// Whether `given` is one of `tokens`; every token is compared, whichever matches.
fn admits(tokens: &[String], given: &[u8]) -> bool {
    let given = Sha256::digest(given);
    tokens.iter().fold(false, |found, token| {
        let token = Sha256::digest(token.as_bytes());
        found | bool::from(token.ct_eq(&given))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_and_judge0_headers_carry_a_token() {
        let tokens = vec!["s3cret-s3cret-s3cret".to_string()];
        let mut headers = HeaderMap::new();
        assert_eq!(presented(&headers), None);
        headers.insert("x-auth-token", "s3cret-s3cret-s3cret".parse().unwrap());
        assert!(admits(&tokens, presented(&headers).unwrap()));
        headers.insert(header::AUTHORIZATION, "Bearer wrong".parse().unwrap());
        assert!(!admits(&tokens, presented(&headers).unwrap()));
        headers.insert(
            header::AUTHORIZATION,
            "bearer s3cret-s3cret-s3cret".parse().unwrap(),
        );
        assert!(admits(&tokens, presented(&headers).unwrap()));
        headers.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(presented(&headers), None);
    }
}
