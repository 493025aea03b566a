//! What goes on beside a started process's run: the filtering proxy its allow-list network is served, and the stop
//! (or, by the operator's choice, the keeping) of a foreground run whose caller went away.

use super::{Executor, Inner, Proc};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Serves the filtering proxy of `proc`'s allow-list network on its listener `fd`, on the host's network: until the
/// command's output ends (its tree is done), or, when its network became its session's (`shared`), until the
/// session's sandbox ends (which shuts the listener down). The destinations it refuses are told to `audience` (the
/// commands running on it: `ExecResult::refused_network`).
pub(super) fn serve_proxy(
    proc: &Proc,
    fd: impl Into<std::net::TcpListener>,
    shared: bool,
    rules: Arc<crate::proxy::ProxyRules>,
    audience: Arc<crate::proxy::Audience>,
) {
    let listener: std::net::TcpListener = fd.into();
    match listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
    {
        Ok(listener) => {
            let mut done = proc.readers_done.subscribe();
            tokio::spawn(async move {
                if shared {
                    return crate::proxy::serve(listener, rules, Some(audience)).await;
                }
                tokio::select! {
                    () = crate::proxy::serve(listener, rules, Some(audience)) => {}
                    _ = done.wait_for(|d| *d) => {}
                }
            });
        }
        Err(e) => tracing::warn!(id = %proc.id, "cannot serve the command's proxy: {e}"),
    }
}

/// Stops a foreground command whose caller stopped waiting for it — its [`Executor::execute`] future dropped: an MCP
/// client's `notifications/cancelled`, an HTTP client gone — with the timeout's path (terminate, grace, kill) on a
/// task of its own, then forgets it: nobody is left to read its result; or, with
/// [`crate::ExecutorConfig::keep_abandoned`], keeps it as a background process. Disarmed when the run ends normally.
pub(super) struct StopIfAbandoned {
    pub(super) inner: std::sync::Weak<Inner>,
    pub(super) proc: Option<Arc<Proc>>,
}

impl StopIfAbandoned {
    pub(super) fn disarm(mut self) {
        self.proc = None;
    }
}

impl Drop for StopIfAbandoned {
    fn drop(&mut self) {
        let (Some(proc), Some(inner)) = (self.proc.take(), self.inner.upgrade()) else {
            return;
        };
        if inner.config.keep_abandoned {
            // The operator keeps such runs: tracked in the background from now on, as a timeout that keeps it.
            tracing::info!(id = %proc.id, "the caller stopped waiting: the command keeps running in the background");
            proc.background.store(true, Ordering::Relaxed);
            return;
        }
        tracing::info!(id = %proc.id, "the caller stopped waiting: terminating the foreground command's tree");
        // At once, whatever follows: the tree is told to stop before this returns.
        proc.tree.terminate();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let executor = Executor { inner };
                    executor.terminate(&proc).await;
                    proc.wait_exit().await;
                    let _ = executor.settle(&proc).await;
                    executor.forget(&proc);
                });
            }
            // Dropped outside a runtime (the host is going away): nothing can wait out the grace period.
            Err(_) => proc.tree.kill(),
        }
    }
}
