//! Judge0 CE's dialect: `/submissions` (single and batch, `wait`,
//! `base64_encoded`, `fields`), `/languages`, `/statuses`, `/about`,
//! `/config_info`, in the shapes the `judge0` Python SDK and Judge0's other
//! clients read, so that they work by a change of URL.
//!
//! Status mapping (the three-valued verdict kept):
//! - anything that proves nothing about the program (a sandbox error, a
//!   case not run, a timeout the machine was too busy to prove, the sandbox
//!   refusing the run, a stdout cut short that matches the expected output
//!   so far) is 13 Internal Error, never Wrong Answer or a runtime error;
//! - a proven timeout is 5; a build that failed is 6 with the compiler's
//!   output; a memory kill is 12 with signal 9;
//! - exit 0 is 3 Accepted, or 4 Wrong Answer when `expected_output` is
//!   given and differs (compared as Judge0 does: each line's trailing
//!   whitespace and the text's surrounding blank space ignored);
//! - any other exit is 11 (NZEC), or, for 128 + a signal, the signal's own
//!   status (7 SIGSEGV, 8 SIGXFSZ, 9 SIGFPE, 10 SIGABRT, 12 others).
//!
//! Limits: `cpu_time_limit` and `wall_time_limit` (seconds), `memory_limit`
//! (KB) and `max_processes_and_or_threads` are the program's own limits,
//! each within `[serve]`'s maxima, else 422 naming the field (nothing is
//! stored); `cpu_extra_time`, `stack_limit` and `max_file_size` are checked
//! and ignored; per-process limits and the network are refused.
//!
//! Tokens and results live in the evidence store's `submissions` table, so
//! `GET /submissions/{token}` answers after a restart. A submission whose
//! server died before it ran is answered 13, saying so. Beyond Judge0:
//! `wait=true` also on batches, and no batch-size cap of 20 (the
//! `[serve] max_batch_items` bound applies).

mod accept;
mod info;
mod judge;
mod model;
mod render;
mod submissions;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

use crate::state::AppState;
use info::{about, config_info, language, languages, statuses};
use submissions::{create, create_batch, get_batch, get_one};

pub(crate) use submissions::fail_unfinished;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/submissions", post(create))
        .route("/submissions/batch", post(create_batch).get(get_batch))
        .route("/submissions/{token}", get(get_one))
        .route("/languages", get(languages))
        .route("/languages/{id}", get(language))
        .route("/statuses", get(statuses))
        .route("/about", get(about))
        .route("/config_info", get(config_info))
}
