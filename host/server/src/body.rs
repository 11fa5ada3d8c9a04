//! Request bodies as JSON, refused with the field's path when malformed
//! (`400 {"error": {"field": "invocations[0].stdin", ...}}`) and with 413
//! naming the body when it is over `[serve] max_body`.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body of type `T`.
pub(crate) struct JsonBody<T>(pub T);

impl<T, S> FromRequest<S> for JsonBody<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(body_rejection)?;
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

/// A request body's bytes (NDJSON, or JSON parsed by the runtime), with
/// the same 413 as [`JsonBody`] past `[serve] max_body`.
pub(crate) struct RawBody(pub Bytes);

impl<S> FromRequest<S> for RawBody
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        Bytes::from_request(request, state)
            .await
            .map(RawBody)
            .map_err(body_rejection)
    }
}
