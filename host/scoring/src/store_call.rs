//! Store calls from async code. SQLite waits up to its busy timeout while
//! another process writes (a `store merge` against a served store, a second
//! `score`), and such a wait must not hold a runtime worker that other
//! tasks are queued on: on a 2-core machine two waits would stall every
//! run and even `/healthz`.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `call`, a blocking store call, having the runtime hand this
/// worker's other tasks to another thread meanwhile
/// ([`tokio::task::block_in_place`]) where it can: on a multi-threaded
/// runtime. Elsewhere (no runtime, a current-thread one, a blocking
/// thread) it just runs.
pub fn store_call<T>(call: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(call)
        }
        _ => call(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_everywhere_a_store_is_called_from() {
        assert_eq!(store_call(|| 1), 1);
        let current = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert_eq!(current.block_on(async { store_call(|| 2) }), 2);
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        assert_eq!(
            multi.block_on(async { tokio::spawn(async { store_call(|| 3) }).await.unwrap() }),
            3
        );
        assert_eq!(
            multi.block_on(async {
                tokio::task::spawn_blocking(|| store_call(|| 4))
                    .await
                    .unwrap()
            }),
            4
        );
    }

    #[test]
    fn a_blocked_store_call_leaves_the_other_tasks_running() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (release, released) = std::sync::mpsc::channel::<()>();
            // One worker: the store call holds it until the other task ran.
            let blocked = tokio::spawn(async move {
                store_call(|| released.recv().unwrap());
            });
            let other = tokio::spawn(async move { release.send(()).unwrap() });
            other.await.unwrap();
            blocked.await.unwrap();
        });
    }
}
