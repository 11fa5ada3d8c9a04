//! Whether a program was still writing when a limit fired: one of the signs
//! that it was alive and working, not stuck (see `progscore_sandbox::timing`).

use std::time::Duration;

use tokio::time::Instant;

/// Output seen this close to a limit (or within a tenth of the window)
/// counts as "still writing".
const OUTPUT_ACTIVE: Duration = Duration::from_millis(100);

/// Whether the last output (when any) was recent at the end of a window of
/// length `window`.
pub fn output_was_active(
    last_output: &std::sync::Mutex<Option<Instant>>,
    window: Duration,
) -> bool {
    let recent = OUTPUT_ACTIVE.max(window / 10);
    last_output
        .lock()
        .ok()
        .and_then(|last| *last)
        .is_some_and(|last| last.elapsed() <= recent)
}
