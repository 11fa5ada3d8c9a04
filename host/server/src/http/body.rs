//! Request bodies as JSON, refused with the field's path when malformed
//! (`400 {"error": {"field": "invocations[0].stdin", ...}}`), with 413
//! naming the body when it is over `[serve] max_body`, with 408 when it did
//! not arrive within `[serve] body_timeout`, and with 415 when it was not
//! sent as JSON: a web page can send `text/plain` or a form to any address
//! without asking first (no CORS preflight), but not `application/json`.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use serde::de::DeserializeOwned;

use crate::http::body_limits::BodyDeadline;
use crate::http::error::ApiError;

/// The media types a route's body may be sent as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Accepted {
    /// `application/json` (any parameters, such as `charset=utf-8`) and
    /// `application/*+json`.
    Json,
    /// JSON lines: `application/x-ndjson`, `application/jsonl`, and
    /// `application/json` (what generic clients send).
    JsonLines,
}

impl Accepted {
    /// Whether a body whose media type's essence (no parameters, lower
    /// case) is `essence` is taken.
    fn admits(self, essence: &str) -> bool {
        let json = essence == "application/json"
            || essence
                .strip_prefix("application/")
                .is_some_and(|subtype| subtype.len() > "+json".len() && subtype.ends_with("+json"));
        match self {
            Accepted::Json => json,
            Accepted::JsonLines => {
                essence == "application/json"
                    || essence == "application/x-ndjson"
                    || essence == "application/jsonl"
            }
        }
    }

    fn expected(self) -> &'static str {
        match self {
            Accepted::Json => "a JSON body sent as `Content-Type: application/json`",
            Accepted::JsonLines => {
                "JSON lines sent as `Content-Type: application/x-ndjson` (or application/jsonl, application/json)"
            }
        }
    }
}

/// 415 unless `request` declares a body of a type `accepted` takes.
fn check_content_type(request: &Request, accepted: Accepted) -> Result<(), ApiError> {
    let declared = request.headers().get(header::CONTENT_TYPE);
    let essence = declared.and_then(|value| value.to_str().ok()).map(|value| {
        value
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    });
    if essence
        .as_deref()
        .is_some_and(|essence| accepted.admits(essence))
    {
        return Ok(());
    }
    let received = match declared {
        None => "has no Content-Type".to_string(),
        Some(value) => {
            let shown = String::from_utf8_lossy(value.as_bytes());
            let shown: String = shown.chars().take(100).collect();
            format!("is sent as {shown:?}")
        }
    };
    Err(ApiError {
        status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
        message: format!(
            "{} {} takes {}; this request {received}",
            request.method(),
            request.uri().path(),
            accepted.expected()
        ),
        field: None,
        retry_after: None,
    })
}

/// The body's bytes once its type was checked: 415, 413, 408 or 400 when
/// it is refused.
async fn read<S: Send + Sync>(
    request: Request,
    state: &S,
    accepted: Accepted,
) -> Result<Bytes, ApiError> {
    check_content_type(&request, accepted)?;
    let deadline = request.extensions().get::<BodyDeadline>().cloned();
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection| match deadline {
            Some(deadline) if deadline.passed() => deadline.refusal(),
            _ => body_rejection(rejection),
        })
}

/// A JSON body of type `T`.
pub(crate) struct JsonBody<T>(pub T);

impl<T, S> FromRequest<S> for JsonBody<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read(request, state, Accepted::Json).await?;
        parse(&bytes).map(JsonBody)
    }
}

/// A body that could not be read: 413 naming the body when it is too
/// large, else the extractor's own status.
fn body_rejection(rejection: axum::extract::rejection::BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: "the request body is larger than this server accepts ([serve] max_body)"
                .into(),
            field: Some("body".into()),
            retry_after: None,
        }
    } else {
        ApiError::bad_field("body", rejection.body_text()).with_status(rejection.status())
    }
}

/// `bytes` as a `T`, or a 400 naming the JSON path at fault.
pub(crate) fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let deserializer = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        let field = if path == "." {
            "body".to_string()
        } else {
            path
        };
        ApiError::bad_field(field, inner.to_string())
    })
}

/// A JSON body's bytes, parsed by the runtime (`/v1/score`), refused as
/// [`JsonBody`] is.
pub(crate) struct JsonBytes(pub Bytes);

impl<S> FromRequest<S> for JsonBytes
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        read(request, state, Accepted::Json).await.map(JsonBytes)
    }
}

/// A body of JSON lines (`/v1/batches`, `/v1/rescore`), refused as
/// [`JsonBody`] is but for the types it takes.
pub(crate) struct JsonLinesBody(pub Bytes);

impl<S> FromRequest<S> for JsonLinesBody
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        read(request, state, Accepted::JsonLines)
            .await
            .map(JsonLinesBody)
    }
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::routing::post;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    fn app() -> Router {
        Router::new()
            .route(
                "/run_code",
                post(
                    |JsonBody(value): JsonBody<serde_json::Value>| async move { value.to_string() },
                ),
            )
            .route(
                "/v1/batches",
                post(|JsonLinesBody(lines): JsonLinesBody| async move { lines.len().to_string() }),
            )
    }

    async fn post_as(path: &str, content_type: Option<&str>) -> (StatusCode, String) {
        let mut request = Request::post(path);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let answer = app()
            .oneshot(request.body(Body::from("{\"a\": 1}")).unwrap())
            .await
            .unwrap();
        let status = answer.status();
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn json_routes_take_json_only_and_say_what_they_received() {
        for admitted in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON;charset=UTF-8",
            "application/vnd.api+json",
        ] {
            let (status, body) = post_as("/run_code", Some(admitted)).await;
            assert_eq!(status, StatusCode::OK, "{admitted}: {body}");
        }
        // What a page sends without asking (fetch no-cors, a form), and none.
        for (refused, said) in [
            (
                Some("text/plain;charset=UTF-8"),
                "is sent as \\\"text/plain;charset=UTF-8\\\"",
            ),
            (
                Some("application/x-www-form-urlencoded"),
                "application/x-www-form-urlencoded",
            ),
            (
                Some("multipart/form-data; boundary=x"),
                "multipart/form-data",
            ),
            (Some("application/x-ndjson"), "application/x-ndjson"),
            (Some("application/+json"), "application/+json"),
            (None, "has no Content-Type"),
        ] {
            let (status, body) = post_as("/run_code", refused).await;
            assert_eq!(
                status,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{refused:?}: {body}"
            );
            assert!(
                body.contains("POST /run_code takes a JSON body") && body.contains(said),
                "{body}"
            );
        }
    }

    #[tokio::test]
    async fn json_lines_routes_take_ndjson_jsonl_and_json_only() {
        for admitted in [
            "application/x-ndjson",
            "application/jsonl",
            "application/json",
        ] {
            let (status, body) = post_as("/v1/batches", Some(admitted)).await;
            assert_eq!(status, StatusCode::OK, "{admitted}: {body}");
        }
        for refused in [
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            None,
        ] {
            let (status, body) = post_as("/v1/batches", refused).await;
            assert_eq!(
                status,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{refused:?}: {body}"
            );
            assert!(body.contains("POST /v1/batches takes JSON lines"), "{body}");
        }
    }
}
