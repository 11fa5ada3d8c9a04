//! What every comparator call runs under: one wasmtime engine (pooled
//! instances, epoch deadlines), a linker that offers only WASI and refuses
//! waiting, the epoch ticker, and the slots that bound calls in flight.

use std::future::Future;
use std::pin::pin;
use std::sync::{Condvar, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Linker, Resource};
use wasmtime::{
    Config, Engine, EngineWeak, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig,
};
use wasmtime_wasi::p2::DynPollable;

use crate::ComparatorError;
use crate::guest::GuestState;
use crate::options::HostOptions;

/// How often the deadline clock ticks; a call's deadline is met within one tick.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Bytes of each pooled linear memory kept resident between calls.
pub(crate) const KEEP_RESIDENT: usize = 2 << 20;

/// Longest reason kept from a guest; a comparator's reason is for a human.
pub(crate) const MAX_REASON_BYTES: usize = 4096;

/// The WASI clock interface whose waiting functions are replaced (see
/// [`deny_waiting`]). Tied to the WASI version of the pinned wasmtime-wasi.
pub(crate) const MONOTONIC_CLOCK: &str = "wasi:clocks/monotonic-clock@0.2.12";

pub(crate) fn new_engine(options: &HostOptions) -> Result<Engine, ComparatorError> {
    let slots = options.max_concurrent_calls.max(1);
    let mut pool = PoolingAllocationConfig::new();
    // Per call: one component instance of a handful of core instances, one
    // memory and a few tables, plus one fiber stack (calls are async inside).
    pool.total_component_instances(slots)
        .total_core_instances(slots.saturating_mul(10))
        .total_memories(slots.saturating_mul(2))
        .total_tables(slots.saturating_mul(4))
        .total_stacks(slots)
        .max_memory_size(options.memory_limit)
        // Reset the first pages of a slot by zeroing rather than handing them
        // back to the kernel: a call then reuses warm pages instead of taking
        // a page fault per page it touches (most of a small call's cost).
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(64 << 10)
        .async_stack_keep_resident(64 << 10);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .cranelift_opt_level(OptLevel::Speed)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config).map_err(|e| ComparatorError::Engine(format!("{e:#}")))
}

pub(crate) fn new_linker(engine: &Engine) -> Result<Linker<GuestState>, ComparatorError> {
    let mut linker = Linker::new(engine);
    let fail = |e: wasmtime::Error| ComparatorError::Engine(format!("cannot link WASI: {e:#}"));
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(fail)?;
    deny_waiting(&mut linker).map_err(fail)?;
    Ok(linker)
}

/// Replaces the clock functions that create timers with ones that trap. A
/// timer is the only thing a guest here could wait on, and waiting would
/// block the calling thread beyond the reach of the epoch deadline (which only
/// interrupts running WebAssembly).
fn deny_waiting(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut clock = linker.instance(MONOTONIC_CLOCK)?;
    clock.func_wrap(
        "subscribe-duration",
        |_, (_,): (u64,)| -> wasmtime::Result<(Resource<DynPollable>,)> {
            Err(wasmtime::format_err!(
                "comparators may not sleep or set timers"
            ))
        },
    )?;
    clock.func_wrap(
        "subscribe-instant",
        |_, (_,): (u64,)| -> wasmtime::Result<(Resource<DynPollable>,)> {
            Err(wasmtime::format_err!(
                "comparators may not sleep or set timers"
            ))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until the engine is gone
/// (the thread then ends within a tick).
pub(crate) fn start_ticker(engine: EngineWeak) -> Result<(), ComparatorError> {
    std::thread::Builder::new()
        .name("progscore-comparator-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                match engine.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        })
        .map(drop)
        .map_err(|e| ComparatorError::Engine(format!("cannot start the deadline thread: {e}")))
}

/// Polls `future` once. Every host function a comparator can reach answers
/// immediately, so a call that does not finish in one poll is waiting on
/// something it should not: `None`, and the call is abandoned.
pub(crate) fn run_now<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Cuts `reason` to [`MAX_REASON_BYTES`] at a character boundary.
pub(crate) fn cap_reason(mut reason: String) -> String {
    if reason.len() > MAX_REASON_BYTES {
        let total = reason.len();
        let mut cut = MAX_REASON_BYTES;
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        reason.truncate(cut);
        reason.push_str(&format!("… ({total} bytes, cut)"));
    }
    reason
}

/// A counting semaphore: calls beyond the pool's capacity wait here instead of
/// failing to allocate an instance.
pub(crate) struct Slots {
    free: Mutex<u32>,
    freed: Condvar,
}

impl Slots {
    pub(crate) fn new(count: u32) -> Self {
        Slots {
            free: Mutex::new(count),
            freed: Condvar::new(),
        }
    }

    pub(crate) fn acquire(&self) -> SlotGuard<'_> {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        while *free == 0 {
            free = self
                .freed
                .wait(free)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *free -= 1;
        SlotGuard(self)
    }
}

pub(crate) struct SlotGuard<'a>(&'a Slots);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        let mut free = self.0.free.lock().unwrap_or_else(PoisonError::into_inner);
        *free += 1;
        self.0.freed.notify_one();
    }
}
