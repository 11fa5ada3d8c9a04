//! Whether the engine answers, and waiting for it when it does not.
//!
//! A request that fails below HTTP (connection refused, reset, timed out) may
//! mean the engine is gone. The engine is then pinged; if it does not answer,
//! it is down: calls wait for it (probing with backoff) instead of failing one
//! program after another, and invocations it dropped run again once it is
//! back. Past the outage wait, counted from the first failure, every waiting
//! call gives up with one clear message.

use std::sync::Mutex;
use std::time::Duration;

use bollard::Docker;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::engine::cause;

/// First pause between probes of an engine that is down; doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long one probe may take.
const PING_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct EngineHealth {
    /// The engine, for messages (`at unix:///var/run/docker.sock`, or
    /// `second at unix:///run/docker-second.sock` in a pool).
    endpoint: String,
    outage_wait: Duration,
    down: Mutex<Option<Outage>>,
}

#[derive(Clone)]
struct Outage {
    since: Instant,
    cause: String,
}

/// Why a wait for the engine ended without it.
pub(crate) enum Unavailable {
    /// The outage wait ran out; the message says where and why.
    GaveUp(String),
    /// The call was cancelled meanwhile.
    Cancelled,
}

impl EngineHealth {
    pub(crate) fn new(endpoint: String, outage_wait: Duration) -> Self {
        EngineHealth {
            endpoint,
            outage_wait,
            down: Mutex::new(None),
        }
    }

    /// The engine as messages name it.
    pub(crate) fn described(&self) -> &str {
        &self.endpoint
    }

    /// Whether the engine is known to be down.
    pub(crate) fn is_down(&self) -> bool {
        self.lock().is_some()
    }

    /// Since when the engine is known to be down, and why.
    pub(crate) fn outage(&self) -> Option<(Instant, String)> {
        self.lock().as_ref().map(|o| (o.since, o.cause.clone()))
    }

    /// Marks the engine down without a ping (it could not be reached at all).
    pub(crate) fn mark_down(&self, cause: &str) {
        let mut down = self.lock();
        if down.is_none() {
            tracing::warn!(
                "the Docker engine {} is not answering ({cause}); its programs go to the \
                 other engines while it is probed",
                self.endpoint
            );
            *down = Some(Outage {
                since: Instant::now(),
                cause: cause.to_string(),
            });
        }
    }

    /// Marks the engine up again (it answered, and what this client left on
    /// it was swept).
    pub(crate) fn mark_up(&self) {
        if let Some(outage) = self.lock().take() {
            tracing::warn!(
                "the Docker engine {} answers again after {:.1?}",
                self.endpoint,
                outage.since.elapsed()
            );
        }
    }

    /// After a transport-level failure: pings the engine; if it does not
    /// answer, marks it down and returns `true`.
    pub(crate) async fn confirm_outage(&self, docker: &Docker, cause: &str) -> bool {
        if self.is_down() {
            return true;
        }
        match ping(docker).await {
            Ok(()) => false,
            Err(ping_error) => {
                let mut down = self.lock();
                if down.is_none() {
                    tracing::warn!(
                        "the Docker engine {} stopped answering ({cause}; ping: {ping_error}); \
                         waiting up to {:?} for it",
                        self.endpoint,
                        self.outage_wait
                    );
                    *down = Some(Outage {
                        since: Instant::now(),
                        cause: ping_error,
                    });
                }
                true
            }
        }
    }

    /// After the engine answered a request with a 5xx: a stopping engine
    /// still answers pings for a moment, so it is watched a little longer
    /// (a few pings over about two seconds). Down within that time: an
    /// outage, and the invocation runs again once the engine is back. Up
    /// throughout: a fault of the engine, which the invocation reports.
    pub(crate) async fn confirm_outage_after_server_error(
        &self,
        docker: &Docker,
        cause: &str,
    ) -> bool {
        for _ in 0..SERVER_ERROR_PINGS {
            if self.confirm_outage(docker, cause).await {
                return true;
            }
            tokio::time::sleep(SERVER_ERROR_PING_GAP).await;
        }
        false
    }

    /// Returns once the engine answers, or gives up when the outage has lasted
    /// the outage wait. Returns at once when the engine is not known to be down.
    pub(crate) async fn wait_until_up(
        &self,
        docker: &Docker,
        cancel: &CancellationToken,
    ) -> Result<(), Unavailable> {
        let mut backoff = FIRST_BACKOFF;
        loop {
            let Some(outage) = self.lock().clone() else {
                return Ok(());
            };
            match ping(docker).await {
                Ok(()) => {
                    let mut down = self.lock();
                    if down.is_some() {
                        tracing::warn!(
                            "the Docker engine {} answers again after {:.1?}",
                            self.endpoint,
                            outage.since.elapsed()
                        );
                        *down = None;
                    }
                    return Ok(());
                }
                Err(cause) => {
                    if let Some(current) = self.lock().as_mut() {
                        current.cause = cause;
                    }
                }
            }
            let give_up = outage.since + self.outage_wait;
            if Instant::now() >= give_up {
                let cause = self
                    .lock()
                    .as_ref()
                    .map(|o| o.cause.clone())
                    .unwrap_or(outage.cause);
                return Err(Unavailable::GaveUp(format!(
                    "cannot reach the Docker engine {}: {cause} (waited {:?} for it to come back)",
                    self.endpoint, self.outage_wait
                )));
            }
            let pause = backoff.min(give_up.saturating_duration_since(Instant::now()));
            tokio::select! {
                () = cancel.cancelled() => return Err(Unavailable::Cancelled),
                () = tokio::time::sleep(pause) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Outage>> {
        // A flag and a timestamp: consistent even if a holder panicked.
        self.down
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How an engine's 5xx answer is followed up (see
/// [`EngineHealth::confirm_outage_after_server_error`]).
const SERVER_ERROR_PINGS: usize = 5;
const SERVER_ERROR_PING_GAP: Duration = Duration::from_millis(400);

pub(crate) async fn ping(docker: &Docker) -> Result<(), String> {
    match tokio::time::timeout(PING_TIMEOUT, docker.ping()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(cause(&e)),
        Err(_) => Err(format!("no answer within {PING_TIMEOUT:?}")),
    }
}
