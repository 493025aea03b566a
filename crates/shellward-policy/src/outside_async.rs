//! Running guest code safely from inside an async runtime.
//!
//! wasmtime-wasi's synchronous WASI bindings (used when a policy writes to stderr, e.g. a panic message) drive their
//! I/O with `Handle::block_on` on the ambient Tokio runtime, which panics when the calling thread is already inside
//! that runtime. Hosts call policies from async code (the facade, the servers), so every guest call made here first
//! leaves the runtime context: `block_in_place` on a multi-threaded runtime, a scoped helper thread on a
//! current-thread runtime, nothing at all outside a runtime (the `policy check` and bench path).

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `f` where a nested `block_on` is allowed.
pub(crate) fn outside_async_runtime<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match Handle::try_current() {
        Err(_) => f(),
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        Ok(_) => std::thread::scope(|s| {
            s.spawn(f)
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested_block_on() -> u32 {
        // What wasmtime-wasi does: block on the ambient runtime.
        match Handle::try_current() {
            Ok(h) => h.block_on(async { 7 }),
            Err(_) => 7,
        }
    }

    #[test]
    fn works_outside_a_runtime() {
        assert_eq!(outside_async_runtime(nested_block_on), 7);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn works_on_a_multi_thread_runtime() {
        assert_eq!(outside_async_runtime(nested_block_on), 7);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn works_on_a_current_thread_runtime() {
        assert_eq!(outside_async_runtime(nested_block_on), 7);
    }
}
