//! A response whose body holds something until the answer has been sent
//! (or dropped, when the client went away): a connection's mark that a
//! request is on it, a request's share of the memory for bodies. A
//! streamed answer (`/v1/batches`) still needs what its request brought.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::response::Response;
use http_body::{Frame, SizeHint};

/// `response` with `held` dropped only when its body is.
pub(crate) fn hold_until_sent<T: Send + Unpin + 'static>(response: Response, held: T) -> Response {
    response.map(|body| Body::new(Holding { body, _held: held }))
}

/// A body and what it holds; its frames, length and end are the body's own
/// (so an answer keeps its `Content-Length`).
struct Holding<T> {
    body: Body,
    _held: T,
}

impl<T: Unpin> http_body::Body for Holding<T> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::response::IntoResponse;
    use http_body::Body as _;
    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test]
    async fn what_is_held_is_let_go_with_the_body_and_the_length_is_kept() {
        let held = Arc::new(());
        let response = hold_until_sent("twelve bytes".into_response(), held.clone());
        assert_eq!(Arc::strong_count(&held), 2);
        assert_eq!(response.body().size_hint().exact(), Some(12));
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"twelve bytes");
        assert_eq!(Arc::strong_count(&held), 1);
    }
}
