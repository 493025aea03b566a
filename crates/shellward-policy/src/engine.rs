//! The policy engine: wasmtime configuration, the sandbox settings, the epoch ticker and policy loading.

use crate::cache::{Cache, CacheOutcome};
use crate::compat::{self, PolicyInfo};
use crate::embedded::{DEFAULT_POLICY_NAME, DEFAULT_POLICY_WASM};
pub(crate) use crate::engine_state::{EPOCH_TICK, EngineInner, Ticker};
pub use crate::engine_state::{FaultMode, InstanceMode, PolicyEngine, SandboxConfig};
use crate::error::PolicyError;
use crate::host;
use crate::policy::Policy;
use std::path::Path;
use std::sync::Arc;
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Set to `1` to write a perf map (`/tmp/perf-PID.map`) naming the compiled functions of every policy loaded, so
/// `perf report` or a callgrind run can attribute time to a policy's own functions (build the policy without
/// stripping its name section).
pub const PERFMAP_VAR: &str = "SHELLWARD_PERFMAP";

fn engine_config(pooling: Option<&SandboxConfig>) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .max_wasm_stack(512 << 10)
        .wasm_backtrace_max_frames(None);
    // Names compiled policy code for `perf` and callgrind (`/tmp/perf-PID.map`), to profile a policy's decisions.
    if std::env::var_os(PERFMAP_VAR).is_some_and(|v| v == "1") {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    if let Some(sandbox) = pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(256)
            .total_core_instances(2_048)
            .total_memories(256)
            .total_tables(1_024)
            .max_memory_size(sandbox.memory_limit.max(1 << 20))
            .max_memories_per_component(16)
            .max_tables_per_component(64)
            .max_core_instances_per_component(64)
            // Policies run synchronously (no `async_support`), so they never run on the pool's fiber stacks; its
            // default of 1,000 stacks cost a guard-page `mprotect` each at engine creation (~4 ms of the CLI's
            // start-up, 2,000 mappings) and their unmapping at exit.
            .total_stacks(0)
            // Reset reused slots with memset instead of madvise: no page faults on the next instantiation; with
            // PAGEMAP_SCAN (Linux 6.7+) only the pages the instance dirtied are reset, not the whole first MiB.
            .linear_memory_keep_resident(1 << 20)
            .table_keep_resident(64 << 10)
            .pagemap_scan(wasmtime::Enabled::Auto);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

impl PolicyEngine {
    /// Creates an engine with the given sandbox settings.
    pub fn new(config: SandboxConfig) -> Result<PolicyEngine, PolicyError> {
        if config.deadline.is_zero() {
            return Err(PolicyError::Engine(
                "the policy deadline must be greater than zero".into(),
            ));
        }
        if config.memory_limit < (1 << 20) {
            return Err(PolicyError::Engine(
                "the policy memory limit must be at least 1 MiB".into(),
            ));
        }
        let engine = if config.pooling {
            Engine::new(&engine_config(Some(&config))).or_else(|e| {
                tracing::warn!(
                    "pooling allocator unavailable ({e}); using on-demand instance allocation"
                );
                Engine::new(&engine_config(None))
            })
        } else {
            Engine::new(&engine_config(None))
        }
        .map_err(|e| PolicyError::Engine(e.to_string()))?;
        let mut linker = Linker::new(&engine);
        crate::bindings::add_to_linker(&mut linker)
            .and_then(|()| host::add_to_linker(&mut linker))
            .map_err(|e| PolicyError::Engine(e.to_string()))?;
        let ticker = Arc::new(Ticker::default());
        spawn_epoch_ticker(&engine, ticker.clone()).map_err(|e| {
            PolicyError::Engine(format!(
                "cannot start the policy deadline ticker thread: {e}"
            ))
        })?;
        let cache = config.cache_dir.clone().map(Cache::new);
        Ok(PolicyEngine {
            inner: Arc::new(EngineInner {
                engine,
                linker,
                config,
                cache,
                ticker,
            }),
        })
    }

    /// The sandbox settings.
    pub fn config(&self) -> &SandboxConfig {
        &self.inner.config
    }

    /// Compiles (or loads from the precompile cache) a component, after checking its header.
    pub fn compile(
        &self,
        name: &str,
        bytes: &[u8],
    ) -> Result<(Component, CacheOutcome), PolicyError> {
        compat::check_header(name, bytes)?;
        let result = match &self.inner.cache {
            Some(cache) => cache.load(&self.inner.engine, bytes),
            None => Component::new(&self.inner.engine, bytes).map(|c| (c, CacheOutcome::Disabled)),
        };
        result.map_err(|e| PolicyError::Compile {
            name: name.to_string(),
            message: format!("{e:#}"),
        })
    }

    /// What a component declares, and whether it is compatible (see [`PolicyInfo::check`]).
    pub fn inspect(&self, name: &str, bytes: &[u8]) -> Result<PolicyInfo, PolicyError> {
        let (component, _) = self.compile(name, bytes)?;
        Ok(PolicyInfo::of(&self.inner.engine, &component))
    }

    /// Loads a policy from a file and configures it with `settings` (JSON text; empty means `{}`). The file is read
    /// with [`read_component`]: bounded, and judged by its first bytes before the rest is read.
    pub fn load_file(&self, path: &Path, settings: &str) -> Result<Policy, PolicyError> {
        let bytes = read_component(path)?;
        self.load_bytes(&path.display().to_string(), &bytes, settings)
    }

    /// Loads a policy from bytes; `name` identifies it in errors and logs.
    pub fn load_bytes(
        &self,
        name: &str,
        bytes: &[u8],
        settings: &str,
    ) -> Result<Policy, PolicyError> {
        let (component, _) = self.compile(name, bytes)?;
        Policy::new(self.clone(), name, &component, settings)
    }

    /// Loads the embedded default policy.
    pub fn load_default(&self, settings: &str) -> Result<Policy, PolicyError> {
        self.load_bytes(DEFAULT_POLICY_NAME, DEFAULT_POLICY_WASM, settings)
    }

    /// Loads a built-in policy by name (`default`, `guard`); `None` for an unknown name.
    pub fn load_builtin(&self, name: &str, settings: &str) -> Option<Result<Policy, PolicyError>> {
        crate::embedded::builtin(name).map(|bytes| self.load_bytes(name, bytes, settings))
    }
}

/// Advances the engine's epoch every [`EPOCH_TICK`] while a guest call is in flight, until the engine is dropped.
/// An idle engine costs no wake-ups: the thread waits on a condition variable until a call starts.
fn spawn_epoch_ticker(engine: &Engine, ticker: Arc<Ticker>) -> std::io::Result<()> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("shellward-policy-epoch".into())
        .spawn(move || {
            while ticker.wait_for_work() {
                std::thread::sleep(EPOCH_TICK);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => return,
                }
            }
        })?;
    Ok(())
}

/// The largest policy component file read: 64 MiB (a Python policy built by componentize-py is about 19 MB).
pub const MAX_COMPONENT_BYTES: u64 = 64 << 20;

/// Reads a policy component file: a regular file of at most [`MAX_COMPONENT_BYTES`], whose first 8 bytes are a
/// component's header (checked before anything else is read, so a 4 GiB file of anything costs 8 bytes of memory).
pub fn read_component(path: &Path) -> Result<Vec<u8>, PolicyError> {
    use std::io::Read;
    let err = |io: std::io::Error| PolicyError::Read {
        path: path.to_path_buf(),
        io,
    };
    // Non-blocking: a FIFO would otherwise hold the open until something writes to it (regular files ignore it).
    let mut options = std::fs::File::options();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let mut file = options.open(path).map_err(err)?;
    let meta = file.metadata().map_err(err)?;
    if !meta.is_file() {
        return Err(err(std::io::Error::other(
            "it is not a regular file; give the path of a .wasm component",
        )));
    }
    let too_big = |len: u64| {
        err(std::io::Error::other(format!(
            "it is {len} bytes, over the limit of {} MiB for a policy component; is it the right file?",
            MAX_COMPONENT_BYTES >> 20
        )))
    };
    if meta.len() > MAX_COMPONENT_BYTES {
        return Err(too_big(meta.len()));
    }
    let mut head = [0u8; 8];
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..]).map_err(err)? {
            0 => break,
            n => got += n,
        }
    }
    crate::compat::check_header(&path.display().to_string(), &head[..got])?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    bytes.extend_from_slice(&head);
    file.take(MAX_COMPONENT_BYTES + 1 - head.len() as u64)
        .read_to_end(&mut bytes)
        .map_err(err)?;
    if bytes.len() as u64 > MAX_COMPONENT_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn mappings() -> usize {
        std::fs::read_to_string("/proc/self/maps")
            .expect("reading /proc/self/maps")
            .lines()
            .count()
    }

    /// The pooling allocator reserves its slots as a few large mappings; it must not cut thousands of small ones
    /// (its default pool of 1,000 fiber stacks, which synchronous policies never use, took a guard-page `mprotect`
    /// each: ~4 ms at every engine creation, 2,000 mappings to tear down at exit). Counted in a fresh process, where no
    /// other test creates mappings meanwhile.
    #[test]
    fn a_pooled_engine_maps_its_slots_in_a_few_regions() {
        const CHILD: &str = "SHELLWARD_TEST_POOLED_ENGINE_MAPPINGS";
        let name = "engine::tests::a_pooled_engine_maps_its_slots_in_a_few_regions";
        if shellward_test_support::in_fresh_process(CHILD) {
            let before = mappings();
            let engine = PolicyEngine::new(SandboxConfig::default()).unwrap();
            let added = mappings().saturating_sub(before);
            println!("added={added}");
            drop(engine);
            return;
        }
        let stdout = shellward_test_support::rerun_in_fresh_process(name, CHILD);
        let added: usize = stdout
            .lines()
            .find_map(|l| l.split_once("added=").map(|(_, n)| n))
            .and_then(|n| n.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("the child printed no count: {stdout}"));
        assert!(
            added < 100,
            "creating a pooled engine added {added} mappings"
        );
    }
}
