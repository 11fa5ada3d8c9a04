//! What a request's body may take of the server: time and memory.
//!
//! - Time: the whole body must arrive within `[serve] body_timeout` of the
//!   request's head, however it trickles (a deadline, not a gap between
//!   reads); past it the request is answered 408 ([`BodyDeadline`]).
//! - Memory: every body held at once, waiting for a turn or in flight,
//!   counts against `[serve] max_bodies_in_memory` by its declared length
//!   (`Content-Length`; `max_body` for a chunked one, whose length is not
//!   known before it is read). A request that would pass the budget is
//!   answered 503 with `Retry-After` before its body is read; its share is
//!   given back when its answer has been sent, or, for a Judge0 submission
//!   run in the background, when that run ends ([`BodyShare`]).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Body as _, Frame, SizeHint};
use thiserror::Error;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

use crate::http::error::ApiError;
use crate::http::hold::hold_until_sent;

/// The budget is counted in KiB: a semaphore's permits are `u32`.
const UNIT: u64 = 1024;

/// The memory all request bodies held at once may take.
pub(crate) struct BodyBudget {
    units: Arc<Semaphore>,
    total: u64,
    max_body: u64,
}

/// A request's share of the budget, given back when the last clone is
/// dropped. In a request's extensions, for work that outlives the answer
/// and for what a body decodes into ([`BodyShare::more`]).
#[derive(Clone)]
pub(crate) struct BodyShare {
    _units: Arc<OwnedSemaphorePermit>,
    budget: Arc<BodyBudget>,
}

impl BodyShare {
    /// A further share of the same budget for `bytes` the body decodes
    /// into (a Judge0 archive's files); 503 when the budget is spent now,
    /// 413 when it could never hold them.
    pub(crate) fn more(&self, bytes: u64) -> Result<BodyShare, ApiError> {
        if bytes > self.budget.total {
            return Err(ApiError::too_large(
                "additional_files",
                bytes,
                self.budget.total,
            ));
        }
        BodyBudget::take_exact(&self.budget, bytes).ok_or_else(|| self.budget.spent())
    }
}

impl BodyBudget {
    /// `total` bytes for all bodies; `max_body`, the most one request
    /// sends (what a body of unknown length is counted as).
    pub(crate) fn new(total: u64, max_body: u64) -> BodyBudget {
        let units = usize::try_from(total.div_ceil(UNIT))
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        BodyBudget {
            units: Arc::new(Semaphore::new(units)),
            total,
            max_body,
        }
    }

    /// A share for a body of at most `bytes` (`None`: of unknown length),
    /// or `None` when the budget is spent now.
    fn take(budget: &Arc<BodyBudget>, bytes: Option<u64>) -> Option<BodyShare> {
        let bytes = bytes.unwrap_or(budget.max_body).min(budget.max_body);
        BodyBudget::take_exact(budget, bytes)
    }

    /// A share of `bytes`, or `None` when the budget is spent now.
    fn take_exact(budget: &Arc<BodyBudget>, bytes: u64) -> Option<BodyShare> {
        let units = u32::try_from(bytes.div_ceil(UNIT)).unwrap_or(u32::MAX);
        budget
            .units
            .clone()
            .try_acquire_many_owned(units)
            .ok()
            .map(|permit| BodyShare {
                _units: Arc::new(permit),
                budget: budget.clone(),
            })
    }

    /// The 503 a request is answered when the budget is spent.
    fn spent(&self) -> ApiError {
        tracing::warn!(
            max_bodies_in_memory = self.total,
            "request refused: the request bodies held now fill [serve] max_bodies_in_memory"
        );
        ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: format!(
                "the server holds as many request bodies as it keeps in memory ([serve] max_bodies_in_memory, {} bytes); try again shortly",
                self.total
            ),
            field: None,
            retry_after: Some(Duration::from_secs(1)),
        }
    }

    /// KiB free now (for tests).
    #[cfg(test)]
    fn free(&self) -> usize {
        self.units.available_permits()
    }
}

/// Middleware: a share of the budget for the request's body before it is
/// read (none for a request without a body), held until the answer has
/// been sent; 503 with `Retry-After` when the budget is spent.
pub(crate) async fn hold_body_share(
    State(budget): State<Arc<BodyBudget>>,
    mut request: Request,
    next: Next,
) -> Response {
    let declared = request.body().size_hint();
    if declared.upper() == Some(0) {
        return next.run(request).await;
    }
    match BodyBudget::take(&budget, declared.upper()) {
        Some(share) => {
            request.extensions_mut().insert(share.clone());
            hold_until_sent(next.run(request).await, share)
        }
        // SandboxFusion's clients (verl) retry a 504 only: its shape, with
        // a status that says nothing of the program. (Written here, not
        // through the dialect's module, which reads its bodies through this
        // one.)
        None if request.uri().path() == "/run_code" => (
            StatusCode::GATEWAY_TIMEOUT,
            axum::Json(serde_json::json!({
                "status": "SandboxError",
                "message": budget.spent().message,
                "compile_result": null,
                "run_result": null,
                "executor_pod_name": null,
                "files": {},
            })),
        )
            .into_response(),
        None => budget.spent().into_response(),
    }
}

/// A request's body deadline: whether it passed (in the request's
/// extensions, so that the extractor answers 408, not 400).
#[derive(Clone, Default)]
pub(crate) struct BodyDeadline {
    passed: Arc<AtomicBool>,
    after: Duration,
}

impl BodyDeadline {
    /// Whether the body stopped at the deadline.
    pub(crate) fn passed(&self) -> bool {
        self.passed.load(Ordering::SeqCst)
    }

    /// The 408 a request whose body missed its deadline is answered.
    pub(crate) fn refusal(&self) -> ApiError {
        ApiError {
            status: StatusCode::REQUEST_TIMEOUT,
            message: format!(
                "the request body did not arrive within {} of its head ([serve] body_timeout)",
                humantime::format_duration(self.after)
            ),
            field: Some("body".into()),
            retry_after: None,
        }
    }
}

/// The body's deadline passed.
#[derive(Debug, Error)]
#[error("the request body did not arrive before its deadline ([serve] body_timeout)")]
struct BodyTimedOut;

/// Middleware: the request's body ends with an error once `after` has
/// passed since its head arrived.
pub(crate) async fn body_deadline(
    State(after): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    if request.body().size_hint().upper() == Some(0) {
        return next.run(request).await;
    }
    let deadline = BodyDeadline {
        passed: Arc::new(AtomicBool::new(false)),
        after,
    };
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(deadline.clone());
    let body = Body::new(DeadlineBody {
        body,
        sleep: Box::pin(tokio::time::sleep_until(Instant::now() + after)),
        deadline,
    });
    next.run(Request::from_parts(parts, body)).await
}

/// A body that fails once its deadline has passed.
struct DeadlineBody {
    body: Body,
    sleep: Pin<Box<Sleep>>,
    deadline: BodyDeadline,
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if this.sleep.as_mut().poll(cx).is_ready() {
            this.deadline.passed.store(true, Ordering::SeqCst);
            return Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut))));
        }
        Poll::Pending
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
    use axum::Router;
    use axum::routing::post;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    #[test]
    fn a_share_is_taken_by_the_declared_length_and_given_back_when_dropped() {
        let budget = Arc::new(BodyBudget::new(10 * UNIT, 4 * UNIT));
        let first = BodyBudget::take(&budget, Some(3 * UNIT)).unwrap();
        assert_eq!(budget.free(), 7);
        // Of unknown length: counted as max_body.
        let second = BodyBudget::take(&budget, None).unwrap();
        assert_eq!(budget.free(), 3);
        assert!(BodyBudget::take(&budget, Some(4 * UNIT)).is_none());
        let kept = second.clone();
        drop(second);
        assert_eq!(budget.free(), 3, "a clone still holds the share");
        // What a body decodes into takes more of the same budget.
        let decoded = first.more(2 * UNIT).unwrap();
        assert_eq!(budget.free(), 1);
        assert_eq!(
            first.more(2 * UNIT).map(drop).unwrap_err().status,
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            first.more(11 * UNIT).map(drop).unwrap_err().status,
            StatusCode::PAYLOAD_TOO_LARGE
        );
        drop((kept, decoded, first));
        assert_eq!(budget.free(), 10);
    }

    /// A router whose one route reads its body and answers its length.
    fn reading(budget: Arc<BodyBudget>) -> Router {
        Router::new()
            .route(
                "/",
                post(|body: Bytes| async move { body.len().to_string() }),
            )
            .layer(axum::middleware::from_fn_with_state(
                budget,
                hold_body_share,
            ))
    }

    fn post_of(bytes: usize) -> Request {
        Request::post("/")
            .header("content-length", bytes)
            .body(Body::from(vec![b'x'; bytes]))
            .unwrap()
    }

    #[tokio::test]
    async fn past_the_budget_a_request_is_answered_503_with_retry_after_until_a_share_is_back() {
        let budget = Arc::new(BodyBudget::new(8 * UNIT, 8 * UNIT));
        let app = reading(budget.clone());
        // An answer not yet sent still holds its request's share.
        let held = app.clone().oneshot(post_of(6 * 1024)).await.unwrap();
        assert_eq!(held.status(), StatusCode::OK);
        let refused = app.clone().oneshot(post_of(4 * 1024)).await.unwrap();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()["retry-after"], "1");
        let message = refused.into_body().collect().await.unwrap().to_bytes();
        assert!(
            String::from_utf8_lossy(&message).contains("max_bodies_in_memory"),
            "{message:?}"
        );
        // A request without a body takes nothing.
        let empty = Request::post("/").body(Body::empty()).unwrap();
        assert_eq!(
            app.clone().oneshot(empty).await.unwrap().status(),
            StatusCode::OK
        );
        drop(held);
        let admitted = app.oneshot(post_of(4 * 1024)).await.unwrap();
        assert_eq!(admitted.status(), StatusCode::OK);
        drop(admitted);
        assert_eq!(budget.free(), 8);
    }

    #[tokio::test]
    async fn a_body_that_trickles_past_its_deadline_ends_and_says_so() {
        let app = Router::new()
            .route(
                "/",
                post(|request: Request| async move {
                    let deadline = request.extensions().get::<BodyDeadline>().cloned().unwrap();
                    match request.into_body().collect().await {
                        Ok(body) => (StatusCode::OK, body.to_bytes().len().to_string()),
                        Err(_) if deadline.passed() => {
                            (StatusCode::REQUEST_TIMEOUT, deadline.refusal().message)
                        }
                        Err(error) => (StatusCode::BAD_REQUEST, error.to_string()),
                    }
                }),
            )
            .layer(axum::middleware::from_fn_with_state(
                Duration::from_secs(1),
                body_deadline,
            ));
        // A byte every 100 ms: each read is quick, the whole is not.
        let trickle = futures_util::stream::unfold(0, |sent| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            (sent < 600).then(|| (Ok::<_, std::io::Error>(Bytes::from_static(b"x")), sent + 1))
        });
        let request = Request::post("/").body(Body::from_stream(trickle)).unwrap();
        let answer = app.clone().oneshot(request).await.unwrap();
        assert_eq!(answer.status(), StatusCode::REQUEST_TIMEOUT);
        let message = answer.into_body().collect().await.unwrap().to_bytes();
        assert!(
            String::from_utf8_lossy(&message).contains("within 1s"),
            "{message:?}"
        );
        // A body within its deadline is read whole.
        let request = Request::post("/").body(Body::from("whole")).unwrap();
        let answer = app.oneshot(request).await.unwrap();
        assert_eq!(answer.status(), StatusCode::OK);
    }
}
