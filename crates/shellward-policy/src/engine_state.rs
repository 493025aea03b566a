//! The policy engine's state and settings: the sandbox configuration ([`SandboxConfig`], [`InstanceMode`],
//! [`FaultMode`]), the shared engine ([`PolicyEngine`]: wasmtime's engine and linker, the precompile cache, the epoch
//! ticker). Loading policies with it is `engine`'s business; a loaded [`crate::Policy`] holds a [`PolicyEngine`].

use crate::cache::Cache;
use crate::host::HostState;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wasmtime::Engine;
use wasmtime::component::Linker;

/// How often the epoch ticker advances the engine's epoch; deadlines are enforced with this granularity.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(2);

/// Whether evaluations reuse one instance per policy or get a fresh one each time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum InstanceMode {
    /// Keep one configured instance per policy and reuse it (fast: well under a microsecond of overhead). A trap
    /// discards it; the next evaluation gets a new one.
    #[default]
    Reuse,
    /// Instantiate and configure a fresh instance for every evaluation (strict isolation: no state survives between
    /// evaluations; tens of microseconds).
    Fresh,
}

/// What the chain does when a policy faults (deadline, memory cap, trap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FaultMode {
    /// Deny the command (fail closed).
    #[default]
    Deny,
    /// Skip the faulting policy and carry on with the next one (fail open).
    Skip,
}

/// Limits every policy evaluation runs under.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SandboxConfig {
    /// Wall-clock budget for one `configure` or `evaluate` call.
    pub deadline: Duration,
    /// Cap on a policy instance's linear memory, in bytes.
    pub memory_limit: usize,
    /// Reuse or fresh instances.
    pub instance_mode: InstanceMode,
    /// What a chain does when a policy faults.
    pub on_fault: FaultMode,
    /// Precompile cache directory; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Use wasmtime's pooling allocator (faster instantiation). Falls back to on-demand allocation when the pool
    /// cannot be reserved.
    pub pooling: bool,
    /// Bounds on what a policy may return (sizes of the command, notes, reason; a valid plan).
    pub outcome_limits: crate::limits::OutcomeLimits,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            deadline: Duration::from_millis(100),
            memory_limit: 64 << 20,
            instance_mode: InstanceMode::Reuse,
            on_fault: FaultMode::Deny,
            cache_dir: crate::cache::default_dir(),
            pooling: true,
            outcome_limits: crate::limits::OutcomeLimits::default(),
        }
    }
}

impl SandboxConfig {
    /// Sets the wall-clock budget for one `configure` or `evaluate` call.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Sets the cap on a policy instance's linear memory, in bytes.
    pub fn memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit = bytes;
        self
    }

    /// Sets whether evaluations reuse an instance or get a fresh one.
    pub fn instance_mode(mut self, mode: InstanceMode) -> Self {
        self.instance_mode = mode;
        self
    }

    /// Sets what a chain does when a policy faults.
    pub fn on_fault(mut self, mode: FaultMode) -> Self {
        self.on_fault = mode;
        self
    }

    /// Sets the precompile cache directory (`None` disables the cache).
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir;
        self
    }

    /// Sets whether wasmtime's pooling allocator is used.
    pub fn pooling(mut self, pooling: bool) -> Self {
        self.pooling = pooling;
        self
    }

    /// Sets the bounds on what a policy may return.
    pub fn outcome_limits(mut self, limits: crate::limits::OutcomeLimits) -> Self {
        self.outcome_limits = limits;
        self
    }
}

pub(crate) struct EngineInner {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<HostState>,
    pub(crate) config: SandboxConfig,
    pub(crate) cache: Option<Cache>,
    pub(crate) ticker: Arc<Ticker>,
}

impl Drop for EngineInner {
    fn drop(&mut self) {
        self.ticker.stop();
    }
}

/// The epoch ticker's schedule: it advances the epoch only while a guest call is in flight, and sleeps (no wake-ups
/// at all) while the host is idle.
#[derive(Default)]
pub(crate) struct Ticker {
    state: std::sync::Mutex<TickerState>,
    wake: std::sync::Condvar,
}

#[derive(Default)]
struct TickerState {
    in_flight: usize,
    stopped: bool,
    /// The thread waits for work (a call must wake it); while it ticks, a new call needs no wake-up syscall.
    parked: bool,
}

/// Keeps the ticker running while a guest call is in flight; created by [`Ticker::enter`].
pub(crate) struct InFlight<'a>(&'a Ticker);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut s = self.0.state.lock().unwrap_or_else(|p| p.into_inner());
        s.in_flight -= 1;
    }
}

impl Ticker {
    /// Marks a guest call in flight until the returned guard is dropped.
    pub(crate) fn enter(&self) -> InFlight<'_> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.in_flight += 1;
        if s.parked {
            self.wake.notify_one();
        }
        InFlight(self)
    }

    fn stop(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).stopped = true;
        self.wake.notify_one();
    }

    /// Blocks while nothing is in flight; returns false once stopped.
    pub(crate) fn wait_for_work(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while s.in_flight == 0 && !s.stopped {
            s.parked = true;
            s = self.wake.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.parked = false;
        !s.stopped
    }
}

impl EngineInner {
    /// The deadline in epoch ticks (at least one).
    pub(crate) fn deadline_ticks(&self) -> u64 {
        (self
            .config
            .deadline
            .as_micros()
            .div_ceil(EPOCH_TICK.as_micros()) as u64)
            .max(1)
            + 1
    }
}

/// Loads and sandboxes policies. Cheap to clone (shared).
#[derive(Clone)]
pub struct PolicyEngine {
    pub(crate) inner: Arc<EngineInner>,
}

impl std::fmt::Debug for PolicyEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyEngine")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}
