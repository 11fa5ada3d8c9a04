//! The server's retention: `[serve] retention` prunes the store at start
//! and then every `every`, each prune on a blocking thread (it reads and
//! deletes in batches of a few hundred rows), never on the async workers.
//! What each prune removed is logged and counted in `/metrics`.

use std::sync::Arc;

use progscore_runtime::config::retention::RetentionSettings;
use tokio_util::sync::CancellationToken;

use crate::state::AppState;

/// Prunes by `settings` until `stop` is cancelled. A prune that fails is
/// logged and tried again at the next tick: the server serves on.
pub(crate) async fn prune_periodically(
    state: Arc<AppState>,
    settings: RetentionSettings,
    stop: CancellationToken,
) {
    let mut ticks = tokio::time::interval(settings.every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let store = state.session().store.clone();
        let policy = settings.policy.clone();
        let pruned = tokio::task::spawn_blocking(move || store.prune(&policy, false)).await;
        match pruned {
            Ok(Ok(summary)) => {
                state.metrics().pruned(&summary);
                tracing::info!(
                    observations = summary.observations_removed,
                    scores = summary.scores_removed,
                    programs = summary.programs_removed,
                    submissions = summary.submissions_removed,
                    kept_for_scores = summary.observations_kept_for_scores,
                    bytes_in_use = summary.bytes_in_use_after,
                    "pruned the store"
                );
            }
            Ok(Err(error)) => tracing::error!(%error, "could not prune the store"),
            Err(error) => tracing::error!(%error, "the prune panicked"),
        }
    }
}
