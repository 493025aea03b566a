//! What a policy instance may touch: the store state, the `host` import, and a WASI context that grants nothing.
//!
//! Policies built with a standard library (Rust's `wasm32-wasip2`, componentize-py, ...) import some WASI
//! interfaces even when they never use them. The host links the non-blocking ones with a context that grants
//! nothing: no arguments or environment, no preopened directories, a frozen clock, stdout discarded and stderr kept
//! (bounded) so a panic message can be reported, sockets and name lookups refused. Blocking waits
//! (`wasi:io/poll`) trap, so a policy cannot hold the host past its deadline from inside a host call.

use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{
    HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView,
};

/// Bytes of a policy's stderr kept per instance (for panic messages).
const STDERR_CAPACITY: usize = 8 * 1024;
/// Longest log message forwarded, in bytes.
const LOG_MESSAGE_MAX: usize = 2 * 1024;
/// Log messages forwarded per instance before the rest are dropped.
const LOG_MESSAGES_MAX: u32 = 1_000;

/// A host function refused what the policy asked of it (a blocking wait): the error the policy's call ends with, typed
/// so a fault is classified by what happened, not by reading the error's text.
#[derive(Debug)]
pub(crate) struct HostRefusal(pub(crate) String);

impl std::fmt::Display for HostRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HostRefusal {}

/// Per-instance state.
pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limits: Limits,
    policy: Arc<str>,
    stderr: MemoryOutputPipe,
    logged: u32,
}

/// wasmtime's store limits, and whether a memory growth past them was refused (so a fault is classified by what
/// happened, not by reading the error's text).
pub(crate) struct Limits {
    inner: StoreLimits,
    /// A `memory.grow` beyond the memory limit was refused (a trap follows).
    pub(crate) memory_refused: bool,
}

impl wasmtime::ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grown = self.inner.memory_growing(current, desired, maximum);
        if !matches!(grown, Ok(true)) {
            self.memory_refused = true;
        }
        grown
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.memory_refused = true;
        self.inner.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.inner.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}

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

impl HostState {
    pub(crate) fn new(policy: Arc<str>, memory_limit: usize) -> HostState {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let wasi = WasiCtxBuilder::new()
            .stderr(stderr.clone())
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let limits = Limits {
            inner: StoreLimitsBuilder::new()
                .memory_size(memory_limit)
                .table_elements(100_000)
                .instances(64)
                .tables(64)
                .memories(16)
                .trap_on_grow_failure(true)
                .build(),
            memory_refused: false,
        };
        HostState {
            wasi,
            table: ResourceTable::new(),
            limits,
            policy,
            stderr,
            logged: 0,
        }
    }

    /// What the policy wrote to stderr (e.g. a panic message), trimmed.
    pub(crate) fn stderr_text(&self) -> String {
        let bytes = self.stderr.contents();
        String::from_utf8_lossy(&bytes).trim().to_string()
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Severity of a policy's diagnostic message, whatever contract version it came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl HostState {
    /// A policy's `log` call (every contract version's `host` interface comes here): tagged with the policy's name,
    /// cut to a bounded length and count.
    pub(crate) fn log(&mut self, level: LogLevel, message: String) {
        use LogLevel as Level;
        self.logged += 1;
        if self.logged > LOG_MESSAGES_MAX {
            return;
        }
        let mut message = message;
        if message.len() > LOG_MESSAGE_MAX {
            let mut cut = LOG_MESSAGE_MAX;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push('…');
        }
        let policy = &*self.policy;
        match level {
            Level::Trace => tracing::trace!(target: "shellward::policy", policy, "{message}"),
            Level::Debug => tracing::debug!(target: "shellward::policy", policy, "{message}"),
            Level::Info => tracing::info!(target: "shellward::policy", policy, "{message}"),
            Level::Warn => tracing::warn!(target: "shellward::policy", policy, "{message}"),
            Level::Error => tracing::error!(target: "shellward::policy", policy, "{message}"),
        }
        if self.logged == LOG_MESSAGES_MAX {
            tracing::warn!(target: "shellward::policy", policy, "log limit reached; further messages are dropped");
        }
    }
}

/// Interface name prefixes a policy may import. Everything else is refused at load with a clear error.
pub(crate) const ALLOWED_IMPORTS: &[&str] = &[
    "shellward:policy/",
    "wasi:io/",
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:filesystem/",
    "wasi:sockets/",
];

/// The `wasi:io/poll` instance as named by the linked WASI implementation.
const POLL_INSTANCE: &str = "wasi:io/poll@0.2.12";

/// Adds the WASI interfaces (granting nothing, see the module docs) to `linker`.
/// (Every contract version's own `host` interface is linked by `bindings::add_to_linker`.)
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    // Blocking waits (sleep, poll) would run in host code, where the epoch deadline cannot interrupt them: make
    // them trap instead.
    linker.allow_shadowing(true);
    let mut poll = linker.instance(POLL_INSTANCE)?;
    for func in ["poll", "[method]pollable.block"] {
        poll.func_new(func, move |_, _, _, _| {
            Err(wasmtime::Error::new(HostRefusal(format!(
                "policies may not block: `{func}` is not available in the policy sandbox"
            ))))
        })?;
    }
    linker.allow_shadowing(false);
    Ok(())
}
