//! Capacity: a program's place on the freest engine that can run it, and
//! the wait while every such engine is full or down.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use progscore_sandbox::{RuntimeProfile, SandboxError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::engines::{Pool, PooledEngine};
use crate::health::Unavailable;

/// A program's place on one engine; dropping it frees the place.
pub(crate) struct Lease<'a> {
    pool: &'a Pool,
    pub index: usize,
}

impl Lease<'_> {
    pub(crate) fn engine(&self) -> &PooledEngine {
        &self.pool.engines[self.index]
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        self.engine().in_flight.fetch_sub(1, Ordering::SeqCst);
        self.pool.freed.notify_waiters();
    }
}

/// Why no engine took a program.
pub(crate) enum NoEngine {
    /// Every engine that could run it refused it, or is gone past the
    /// outage wait.
    Error(SandboxError),
    /// The call was cancelled while it waited.
    Cancelled,
}

impl Pool {
    /// A place for one program of `profile` on the freest engine that can
    /// run it; waits while every such engine is full, or down (up to the
    /// outage wait). `beside`: the other side of a conversation whose
    /// program already has its place; it takes one even on a full engine
    /// (the pair is one program's load), so a pair never waits for the
    /// capacity its other half holds.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        profile: &RuntimeProfile,
        beside: bool,
        token: &CancellationToken,
    ) -> Result<Lease<'_>, NoEngine> {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();

            let mut ready = Vec::new();
            let mut refused = Vec::new();
            let mut down = Vec::new();
            for index in self.candidates(profile) {
                let engine = &self.engines[index];
                if engine.health.is_down() || engine.connected().is_none() {
                    down.push(index);
                    continue;
                }
                match self.check(index, profile).await {
                    Ok(_) => ready.push(index),
                    Err(err) => refused.push(err),
                }
            }
            if let Some(lease) = self.take_freest(&ready, beside) {
                return Ok(lease);
            }
            if ready.is_empty() && down.is_empty() {
                // Refused everywhere: the first engine's reason.
                return Err(NoEngine::Error(refused.into_iter().next().unwrap_or_else(
                    || SandboxError::EngineUnsupported {
                        missing: format!("an engine for profile `{}`", profile.name),
                        hint: "the profile's `engines` names none that is configured".into(),
                    },
                )));
            }
            if ready.is_empty() {
                // Only engines that are down could run it.
                if !self.is_pool() {
                    let engine = &self.engines[down[0]];
                    let Some(connected) = engine.connected() else {
                        return Err(NoEngine::Error(SandboxError::EngineUnavailable {
                            message: format!(
                                "the Docker engine {} was not reached",
                                engine.health.described()
                            ),
                        }));
                    };
                    match engine.health.wait_until_up(&connected.docker, token).await {
                        Ok(()) => continue,
                        Err(Unavailable::GaveUp(message)) => {
                            return Err(NoEngine::Error(SandboxError::EngineUnavailable {
                                message,
                            }));
                        }
                        Err(Unavailable::Cancelled) => return Err(NoEngine::Cancelled),
                    }
                }
                for &index in &down {
                    self.probe(index);
                }
                let since = down
                    .iter()
                    .filter_map(|&i| self.engines[i].health.outage().map(|(since, _)| since))
                    .min()
                    .unwrap_or_else(Instant::now);
                let give_up = since + self.outage_wait;
                if Instant::now() >= give_up {
                    let causes: Vec<String> = down
                        .iter()
                        .map(|&i| {
                            let engine = &self.engines[i];
                            let cause = engine
                                .health
                                .outage()
                                .map(|(_, cause)| cause)
                                .unwrap_or_else(|| "not reached".into());
                            format!("{}: {cause}", engine.health.described())
                        })
                        .collect();
                    return Err(NoEngine::Error(SandboxError::EngineUnavailable {
                        message: format!(
                            "no Docker engine for profile `{}` answers (waited {:?}): {}",
                            profile.name,
                            self.outage_wait,
                            causes.join("; ")
                        ),
                    }));
                }
                tokio::select! {
                    () = token.cancelled() => return Err(NoEngine::Cancelled),
                    () = &mut freed => {}
                    () = tokio::time::sleep_until(give_up) => {}
                }
                continue;
            }
            // Every engine that can run it is full.
            tokio::select! {
                () = token.cancelled() => return Err(NoEngine::Cancelled),
                () = &mut freed => {}
            }
        }
    }

    /// Takes a place on the engine among `ready` with the most room left
    /// (in proportion to its capacity; the first configured when equal).
    fn take_freest(&self, ready: &[usize], beside: bool) -> Option<Lease<'_>> {
        let _choosing = self
            .choosing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let load = |index: usize| -> Option<f64> {
            let engine = &self.engines[index];
            let used = engine.in_flight();
            match engine.capacity() {
                None => Some(used as f64 / 1e9),
                Some(capacity) if used < capacity || beside => {
                    Some(used as f64 / capacity.max(1) as f64)
                }
                Some(_) => None,
            }
        };
        let mut best: Option<(usize, f64)> = None;
        for &index in ready {
            if let Some(load) = load(index)
                && best.is_none_or(|(_, least)| load < least)
            {
                best = Some((index, load));
            }
        }
        let (index, _) = best?;
        self.engines[index].in_flight.fetch_add(1, Ordering::SeqCst);
        Some(Lease { pool: self, index })
    }

    /// The bound on programs in flight across the engines, when every
    /// engine is bounded.
    pub(crate) fn capacity(&self) -> Option<usize> {
        self.engines
            .iter()
            .map(PooledEngine::capacity)
            .sum::<Option<usize>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Capacity;
    use crate::options::{DockerOptions, EngineOptions};
    use progscore_sandbox::Owner;
    use std::os::unix::fs::PermissionsExt;

    fn pool_of(capacities: &[usize]) -> (Pool, tempfile::TempDir) {
        let root = tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .expect("owner root");
        let options = DockerOptions {
            engines: capacities
                .iter()
                .enumerate()
                .map(|(i, &n)| EngineOptions {
                    capacity: Capacity::Fixed(n),
                    ..EngineOptions::unix(format!("e{i}"), "/nonexistent.sock")
                })
                .collect(),
            owner_root: root.path().to_path_buf(),
            ..DockerOptions::default()
        };
        let owner = Owner::register(root.path(), "docker").expect("owner");
        (Pool::new(&options, owner), root)
    }

    #[test]
    fn programs_go_to_the_freest_engine_in_proportion_and_none_past_capacity() {
        let (pool, _root) = pool_of(&[2, 4]);
        let both = [0, 1];
        let mut taken = Vec::new();
        // Free room in proportion to capacity; the first configured when equal.
        for expected in [0, 1, 1, 0, 1, 1] {
            let lease = pool.take_freest(&both, false).expect("room left");
            assert_eq!(lease.index, expected);
            taken.push(lease);
        }
        assert!(
            pool.take_freest(&both, false).is_none(),
            "both engines are full"
        );
        // An interactor beside its program's place still gets one.
        let beside = pool.take_freest(&both, true).expect("a place beside");
        drop(beside);
        assert_eq!(pool.engines[0].in_flight(), 2);
        assert_eq!(pool.engines[1].in_flight(), 4);
        // A program leaving frees its place on its engine.
        let on_first = taken.iter().position(|l| l.index == 0).unwrap();
        taken.remove(on_first);
        assert_eq!(pool.take_freest(&both, false).map(|l| l.index), Some(0));
        // Only the engines given are considered.
        drop(taken);
        assert_eq!(pool.take_freest(&[1], false).map(|l| l.index), Some(1));
    }

    #[test]
    fn an_unbounded_engine_always_has_room() {
        let (mut pool, _root) = pool_of(&[1]);
        pool.engines[0].options.capacity = Capacity::Unbounded;
        let leases: Vec<_> = (0..100)
            .map(|_| pool.take_freest(&[0], false).expect("room"))
            .collect();
        assert_eq!(pool.engines[0].in_flight(), 100);
        assert_eq!(pool.capacity(), None);
        drop(leases);
        assert_eq!(pool.engines[0].in_flight(), 0);
    }

    #[test]
    fn a_profile_naming_engines_may_use_those_only() {
        let (pool, _root) = pool_of(&[1, 1, 1]);
        let mut profile = RuntimeProfile::from_spec("p", &docker_spec(), std::path::Path::new("."))
            .expect("profile");
        assert_eq!(pool.candidates(&profile), [0, 1, 2]);
        profile.engines = vec!["e2".into(), "e0".into()];
        assert_eq!(pool.candidates(&profile), [0, 2]);
        assert_eq!(pool.capacity(), Some(3));
    }

    fn docker_spec() -> progscore_sandbox::ProfileSpec {
        serde_json::from_value(serde_json::json!({
            "backend": "docker",
            "image": format!("sha256:{}", "a".repeat(64)),
            "command": ["python3"],
        }))
        .expect("spec")
    }
}
