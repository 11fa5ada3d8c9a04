//! Cross-engine preflight: whether a profile can run on one engine, and
//! that every engine of the profile runs it alike (same runtime, same
//! image), so that an attempt's fingerprint does not depend on the engine.

use progscore_sandbox::{RuntimeProfile, SandboxError};

use super::engines::{Agreement, Pool, PooledEngine};
use crate::engine::{self, ImageFacts};
use crate::held::Engine;

impl PooledEngine {
    /// Everything a run of `profile` needs from this engine, checked: the
    /// limits, the runtime, CPU time measurable when limited, the image by
    /// its pin (never pulled).
    pub(crate) async fn ready(
        &self,
        profile: &RuntimeProfile,
    ) -> Result<(&Engine, ImageFacts), SandboxError> {
        let Some(engine) = self.connected() else {
            return Err(SandboxError::EngineUnavailable {
                message: format!(
                    "the Docker engine {} was not reached",
                    self.health.described()
                ),
            });
        };
        engine.facts.require_limits()?;
        engine.facts.require_runtime(profile)?;
        engine.facts.require_build_owner(profile)?;
        if profile.limits.cpu_time_ms.is_some() && engine.cgroups.is_none() {
            return Err(SandboxError::EngineUnsupported {
                missing: format!("profile `{}`'s limits.cpu_time", profile.name),
                hint: "progscore reads CPU time from the engine's cgroups, which it cannot find \
                       from this process (the engine must be local, use the cgroupfs driver, \
                       and share this process's cgroup view); remove limits.cpu_time or run \
                       progscore beside the engine"
                    .into(),
            });
        }
        if let Some(facts) = self.images.lock().await.get(&profile.name) {
            return Ok((engine, facts.clone()));
        }
        let facts = engine::check_image(&engine.docker, profile).await?;
        self.images
            .lock()
            .await
            .insert(profile.name.clone(), facts.clone());
        Ok((engine, facts))
    }
}

impl Pool {
    /// Checks `profile` on one engine, and that it resolves what the other
    /// engines of the profile resolve.
    pub(crate) async fn check(
        &self,
        index: usize,
        profile: &RuntimeProfile,
    ) -> Result<(String, ImageFacts), SandboxError> {
        let pooled = &self.engines[index];
        let (engine, image) = pooled.ready(profile).await?;
        let runtime = engine.facts.runtime_for(profile);
        let mut agreements = self
            .agreements
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let agreed = agreements
            .entry(profile.name.clone())
            .or_insert_with(|| Agreement {
                runtime: runtime.clone(),
                image_id: image.image_id.clone(),
                engine: pooled.name().to_string(),
            });
        if agreed.runtime != runtime {
            return Err(SandboxError::EngineUnsupported {
                missing: format!(
                    "profile `{}` on engine `{}`: it would run under `{runtime}`, engine `{}` \
                     under `{}`",
                    profile.name,
                    pooled.name(),
                    agreed.engine,
                    agreed.runtime
                ),
                hint: "name the runtime in the profile (`runtime = \"runc\"`), so every engine \
                       runs it the same way and its evidence means the same"
                    .into(),
            });
        }
        if agreed.image_id != image.image_id {
            return Err(SandboxError::ArtifactRefused {
                profile: profile.name.clone(),
                artifact: format!("image on engine `{}`", pooled.name()),
                reason: format!(
                    "its id is {}, on engine `{}` {}: pin the image by its digest \
                     (repo@sha256:...) and load that same image into every engine",
                    image.image_id, agreed.engine, agreed.image_id
                ),
            });
        }
        Ok((runtime, image))
    }
}
