//! Health of the pool: the first contact with every engine, and the return
//! of one that stopped answering (probed with backoff; what this client
//! left on it is removed before it takes programs again).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use progscore_sandbox::SandboxError;

use super::engines::Pool;
use crate::health::ping;

/// First pause between probes of an engine that is down; doubled up to [`MAX_PROBE_PAUSE`].
const FIRST_PROBE_PAUSE: Duration = Duration::from_millis(250);
const MAX_PROBE_PAUSE: Duration = Duration::from_secs(5);

impl Pool {
    /// The first contact with every engine, at once: each is connected and
    /// what dead progscore processes left is swept from all of them. With
    /// one engine, its failure is the caller's (and tried again next call);
    /// in a pool, an engine that does not answer is marked down and probed.
    pub(crate) async fn contact(self: &Arc<Self>) -> Result<(), SandboxError> {
        if !self.is_pool() {
            let engine = &self.engines[0];
            let newly = engine.connected().is_none();
            engine.connect(self.engine_timeout).await?;
            if newly {
                self.sweep_dead_owners().await;
            }
            return Ok(());
        }
        self.first_contact
            .get_or_init(|| async {
                let connecting = self
                    .engines
                    .iter()
                    .map(|engine| engine.connect(self.engine_timeout));
                let results = futures_util::future::join_all(connecting).await;
                for (index, result) in results.into_iter().enumerate() {
                    if let Err(err) = result {
                        self.engines[index].health.mark_down(&err.to_string());
                        self.probe(index);
                    }
                }
                self.sweep_dead_owners().await;
            })
            .await;
        Ok(())
    }

    /// Starts probing an engine that is down, unless a probe already runs.
    /// Once it answers, what this client left on it is removed, then it
    /// takes programs again.
    pub(crate) fn probe(self: &Arc<Self>, index: usize) {
        if !self.is_pool() || self.engines[index].probing.swap(true, Ordering::SeqCst) {
            return;
        }
        let pool = Arc::clone(self);
        tokio::spawn(async move {
            pool.bring_back(index).await;
            pool.engines[index].probing.store(false, Ordering::SeqCst);
            pool.freed.notify_waiters();
        });
    }

    async fn bring_back(&self, index: usize) {
        let engine = &self.engines[index];
        let mut pause = FIRST_PROBE_PAUSE;
        loop {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PROBE_PAUSE);
            let newly = engine.connected().is_none();
            let connected = match engine.connect(self.engine_timeout).await {
                Ok(connected) => connected,
                Err(_) => continue,
            };
            if ping(&connected.docker).await.is_err() {
                continue;
            }
            if newly {
                self.sweep_dead_owners().await;
            }
            match self.sweep_own(index).await {
                Ok(()) => break,
                Err(warning) => tracing::warn!("{warning}"),
            }
        }
        engine.health.mark_up();
    }
}
