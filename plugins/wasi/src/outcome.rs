//! How a guest's end becomes an outcome.

use progscore_sandbox::{Outcome, TimeLimit, TimeoutProof};
use wasmtime::Trap;
use wasmtime_wasi::I32Exit;

use crate::clock::Stop;

/// Exit status recorded for a guest that trapped on stack exhaustion, as a
/// native process killed by SIGSEGV would report it.
pub(crate) const EXIT_STACK_OVERFLOW: i64 = 128 + 11;
/// Exit status recorded for any other trap (`abort()`, `unreachable`), as a
/// native process killed by SIGABRT would report it.
pub(crate) const EXIT_TRAP: i64 = 128 + 6;

/// Maps how the guest ended to an outcome.
///
/// - `run()` returned or `sys.exit(n)` (an [`I32Exit`] trap): `exited(n)`;
/// - the deadline (epoch callback or the host-side timer) or fuel ran out:
///   `timed_out`, unconfirmed when `proof` says the guest was starved; the
///   CPU-time limit: `timed_out` with `limit: cpu`;
/// - the memory cap refused a growth and the program then failed (an uncaught
///   `MemoryError`: exit 1 with CPython's traceback ending in `MemoryError` as
///   the last line on stderr; or a trap): `memory_limit`. A program that
///   caught the `MemoryError` and exited on its own keeps its exit, 1
///   included (a `sys.exit(1)` returns from `run()` just as an uncaught
///   exception does: only what CPython printed tells them apart);
/// - any other trap: `exited(134)` (or 139 for stack exhaustion), like a native
///   crash, with the trap kept as a note;
/// - anything else (instantiation failed, a host error): `sandbox_error`.
pub(crate) fn classify(
    result: Option<wasmtime::Result<i32>>,
    stop: Option<Stop>,
    memory_hit: bool,
    stderr_last_line: &[u8],
    proof: Option<TimeoutProof>,
) -> (Outcome, Option<String>) {
    let uncaught_memory_error =
        stderr_last_line == b"MemoryError" || stderr_last_line.starts_with(b"MemoryError: ");
    let exited = |code: i64| {
        if memory_hit && code == 1 && uncaught_memory_error {
            Outcome::MemoryLimit
        } else {
            Outcome::Exited { exit_code: code }
        }
    };
    let wall_timeout = || Outcome::TimedOut {
        limit: TimeLimit::Wall,
        unconfirmed: match &proof {
            Some(TimeoutProof::Confirm(why) | TimeoutProof::Unconfirmed(why)) => Some(why.clone()),
            Some(TimeoutProof::Proven) | None => None,
        },
    };
    let error = match result {
        None => return (wall_timeout(), None),
        Some(Ok(code)) => return (exited(i64::from(code)), None),
        Some(Err(error)) => error,
    };
    if let Some(I32Exit(code)) = error.downcast_ref::<I32Exit>() {
        return (exited(i64::from(*code)), None);
    }
    match stop {
        Some(Stop::Deadline) => return (wall_timeout(), None),
        Some(Stop::CpuLimit) => {
            let limit = TimeLimit::Cpu;
            return (
                Outcome::TimedOut {
                    limit,
                    unconfirmed: None,
                },
                None,
            );
        }
        Some(Stop::Cancelled) => {
            let message = "cancelled".to_string();
            return (Outcome::SandboxError { message }, None);
        }
        None => {}
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => (
            Outcome::timed_out(),
            Some("the guest ran out of fuel".into()),
        ),
        Some(_) if memory_hit => (Outcome::MemoryLimit, Some(format!("{error:#}"))),
        Some(trap) => {
            let code = if *trap == Trap::StackOverflow {
                EXIT_STACK_OVERFLOW
            } else {
                EXIT_TRAP
            };
            (
                Outcome::Exited { exit_code: code },
                Some(format!("the guest trapped: {error:#}")),
            )
        }
        None if memory_hit => (Outcome::MemoryLimit, Some(format!("{error:#}"))),
        None => (
            Outcome::SandboxError {
                message: format!("the WASI runtime failed: {error:#}"),
            },
            None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_and_memory() {
        assert_eq!(
            classify(Some(Ok(3)), None, false, b"", None).0,
            Outcome::Exited { exit_code: 3 }
        );
        assert_eq!(
            classify(Some(Ok(1)), None, true, b"MemoryError", None).0,
            Outcome::MemoryLimit
        );
        // A program that caught MemoryError and exited is its own business,
        // whatever its code.
        assert_eq!(
            classify(Some(Ok(1)), None, true, b"out of memory", None).0,
            Outcome::Exited { exit_code: 1 }
        );
        assert_eq!(
            classify(Some(Ok(1)), None, true, b"MemoryError: big", None).0,
            Outcome::MemoryLimit
        );
        assert_eq!(
            classify(Some(Ok(0)), None, true, b"MemoryError", None).0,
            Outcome::Exited { exit_code: 0 }
        );
        assert_eq!(
            classify(None, None, false, b"", Some(TimeoutProof::Proven)).0,
            Outcome::timed_out()
        );
        let exit = wasmtime::Error::new(I32Exit(3));
        assert_eq!(
            classify(Some(Err(exit)), None, false, b"", None).0,
            Outcome::Exited { exit_code: 3 }
        );
        let interrupted = wasmtime::Error::new(Trap::Interrupt);
        assert_eq!(
            classify(
                Some(Err(interrupted)),
                Some(Stop::Deadline),
                false,
                b"",
                Some(TimeoutProof::Confirm("busy".into()))
            )
            .0,
            Outcome::TimedOut {
                limit: TimeLimit::Wall,
                unconfirmed: Some("busy".into())
            }
        );
        let interrupted = wasmtime::Error::new(Trap::Interrupt);
        assert_eq!(
            classify(
                Some(Err(interrupted)),
                Some(Stop::CpuLimit),
                false,
                b"",
                None
            )
            .0,
            Outcome::TimedOut {
                limit: TimeLimit::Cpu,
                unconfirmed: None
            }
        );
    }
}
