//! What a guest sees: the store state of one call, with a WASI context that
//! grants nothing, a memory cap that remembers being hit, and a bounded
//! capture of stderr (where a Rust guest writes its panic message).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView};

/// How much of a guest's stderr is kept for the reason of an undetermined
/// outcome; the rest is dropped (the guest is not told).
pub(crate) const STDERR_KEPT: usize = 2048;

/// Table elements a guest may grow to; far beyond what a comparator needs.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// The store data of one call.
pub(crate) struct GuestState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) memory: MemoryCap,
    pub(crate) stderr: CapturedOutput,
}

impl GuestState {
    /// A state granting nothing: no args, env, preopens, network; stdin
    /// closed; stdout discarded; stderr kept up to [`STDERR_KEPT`] bytes; clocks
    /// frozen at zero; randomness fixed (so comparators are deterministic).
    pub(crate) fn new(memory_limit: usize) -> GuestState {
        let stderr = CapturedOutput::new(STDERR_KEPT);
        let mut builder = WasiCtx::builder();
        builder
            .stderr(stderr.clone())
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .secure_random(wasmtime_wasi::Deterministic::new(vec![0x5a]))
            .insecure_random(wasmtime_wasi::Deterministic::new(vec![0xa5]))
            .insecure_random_seed(0)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        GuestState {
            wasi: builder.build(),
            table: ResourceTable::new(),
            memory: MemoryCap {
                limit: memory_limit,
                denied: None,
            },
            stderr,
        }
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Caps linear memory and records the first refused request, so that the
/// trap which usually follows (an allocation failure aborts) can be reported
/// as "memory limit" rather than as an opaque `unreachable`.
pub(crate) struct MemoryCap {
    limit: usize,
    /// The size in bytes a refused growth asked for.
    pub(crate) denied: Option<usize>,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.denied.get_or_insert(desired);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// A clock stuck at zero: a comparator has no business knowing the time, and a
/// frozen clock keeps its answers reproducible.
struct FrozenClock;

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }

    fn now(&self) -> u64 {
        0
    }
}

/// An output stream that keeps its first `capacity` bytes and silently drops
/// the rest. Never blocks, never fails: a guest flooding it only wastes its
/// own time budget.
#[derive(Clone)]
pub(crate) struct CapturedOutput {
    capacity: usize,
    kept: Arc<Mutex<Vec<u8>>>,
}

impl CapturedOutput {
    fn new(capacity: usize) -> Self {
        CapturedOutput {
            capacity,
            kept: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// What was kept, as text for a reason.
    pub(crate) fn text(&self) -> String {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&kept).trim().to_string()
    }

    fn keep(&self, bytes: &[u8]) {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let room = self.capacity.saturating_sub(kept.len());
        kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

impl IsTerminal for CapturedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        // Only used by WASIp3, which the host does not link.
        Box::new(tokio::io::sink())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for CapturedOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.keep(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CapturedOutput {
    async fn ready(&mut self) {}
}
