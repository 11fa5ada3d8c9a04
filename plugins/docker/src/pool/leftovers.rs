//! Sweeping: what dead progscore processes left on the engines, and what
//! this client could not remove while an engine was gone (kept, then removed
//! at the next call, the engine's return, or the client's drop).

use std::sync::atomic::Ordering;
use std::time::Duration;

use progscore_sandbox::{Owner, SandboxError};

use super::engines::{Pool, PooledEngine};
use crate::held::{Engine, Leftover, remove_leftover};
use crate::sweep::{list_owned, remove_owned_except, sweep_dead_owners};

impl PooledEngine {
    /// Keeps a container it could not remove, for the next call or its
    /// return; meanwhile the owner's files stay for the next start's sweep.
    pub(crate) fn keep_leftover(&self, owner: &Owner, leftover: Leftover) {
        owner.keep_for_sweep();
        self.lock_leftovers().push(leftover);
    }

    /// Removes the containers it could not remove before; what still fails
    /// stays. Returns the warnings, and whether none is left.
    pub(crate) async fn remove_leftovers(
        &self,
        owner: &Owner,
        engine_timeout: Duration,
    ) -> (Vec<String>, bool) {
        let pending: Vec<Leftover> = std::mem::take(&mut *self.lock_leftovers());
        let Some(engine) = self.connected() else {
            self.lock_leftovers().extend(pending);
            return (Vec::new(), false);
        };
        let mut warnings = Vec::new();
        for leftover in pending {
            if let Err(e) = remove_leftover(&engine.docker, engine_timeout, &leftover).await {
                warnings.push(e);
                self.keep_leftover(owner, leftover);
            }
        }
        if self.unswept.swap(false, Ordering::SeqCst)
            && let Err(e) = remove_owned_except(&engine.docker, owner.name(), &self.active).await
        {
            warnings.push(e);
            self.unswept.store(true, Ordering::SeqCst);
        }
        let none_left = !self.has_leftovers();
        (warnings, none_left)
    }

    pub(crate) fn has_leftovers(&self) -> bool {
        !self.lock_leftovers().is_empty() || self.unswept.load(Ordering::SeqCst)
    }

    /// Notes that this client left something on the engine that its sweep
    /// by label must remove (at the next call, its return, or the next
    /// start's sweep of this owner).
    pub(crate) fn must_be_swept(&self, owner: &Owner) {
        owner.keep_for_sweep();
        self.unswept.store(true, Ordering::SeqCst);
    }

    fn lock_leftovers(&self) -> std::sync::MutexGuard<'_, Vec<Leftover>> {
        self.leftovers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Pool {
    /// Removes what dead progscore processes left on every connected
    /// engine; a dead owner is forgotten only once every engine was reached.
    pub(super) async fn sweep_dead_owners(&self) {
        let connected: Vec<&Engine> = self
            .engines
            .iter()
            .filter_map(PooledEngine::connected)
            .collect();
        let every_engine = connected.len() == self.engines.len();
        sweep_dead_owners(&self.owner_root, &connected, every_engine).await;
    }

    /// Removes this client's containers on one engine that no call is
    /// using: those it could not remove while the engine was gone, and any
    /// the engine created for a request whose answer was lost.
    pub(super) async fn sweep_own(&self, index: usize) -> Result<(), String> {
        let engine = &self.engines[index];
        let (warnings, _) = engine
            .remove_leftovers(&self.owner, self.engine_timeout)
            .await;
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        let Some(connected) = engine.connected() else {
            return Err(format!(
                "the Docker engine {} is not connected",
                engine.health.described()
            ));
        };
        let removed =
            remove_owned_except(&connected.docker, self.owner.name(), &engine.active).await?;
        if removed > 0 {
            tracing::warn!(
                "removed {removed} container(s) this process left on the Docker engine {} \
                 while it was gone",
                engine.health.described()
            );
        }
        self.forget_leftovers_if_none();
        Ok(())
    }

    /// Once no engine holds a container this client could not remove, its
    /// files go with it again.
    pub(crate) fn forget_leftovers_if_none(&self) {
        if !self.engines.iter().any(PooledEngine::has_leftovers) {
            self.owner.keep_for_sweep_no_more();
        }
    }

    /// This owner's containers on every connected engine, by engine name.
    pub(crate) async fn owned(&self, owner: &str) -> Result<Vec<String>, SandboxError> {
        let mut names = Vec::new();
        for engine in &self.engines {
            if let Some(connected) = engine.connected() {
                for (_, name) in list_owned(&connected.docker, owner).await? {
                    names.push(name);
                }
            }
        }
        Ok(names)
    }
}
