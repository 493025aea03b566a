//! The executor's shared state ([`Inner`]), held by the [`crate::Executor`] handle and by its background tasks (the
//! reaper, the output readers, the leader waiters), and what happens when the last holder drops it without a clean
//! shutdown.

use crate::config::ExecutorConfig;
use crate::logdir::LogDir;
use crate::registry::Registry;
use crate::sys::{BaseEnv, Platform};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The executor's shared state.
pub(crate) struct Inner {
    pub(crate) config: ExecutorConfig,
    pub(crate) platform: Platform,
    pub(crate) log_dir: LogDir,
    /// What every command's environment starts from (see [`crate::env`]), read once at creation.
    pub(crate) base_env: Arc<BaseEnv>,
    pub(crate) registry: Registry,
    /// Wakes the reaper when a process starts (it sleeps while there is nothing to do).
    pub(crate) reaper_wake: Arc<tokio::sync::Notify>,
    /// Passes the reaper has made (each visits every retained process).
    pub(crate) reaper_passes: AtomicU64,
    pub(crate) next_id: AtomicU64,
    pub(crate) closing: AtomicBool,
    /// Each session's undo recorder (`executor/undo.rs`).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) recorders: crate::executor::Recorders,
    /// Who hears of each proxy's refusals, by session and allow-list (see [`Inner::proxy_audience`]).
    pub(crate) proxy_audiences: ProxyAudiences,
    pub(crate) shut_down: AtomicBool,
}

/// The proxied commands of each session and allow-list, told what their proxy refuses.
pub(crate) type ProxyAudiences = std::sync::Mutex<
    std::collections::HashMap<(Option<String>, Vec<String>), Arc<crate::proxy::Audience>>,
>;

/// At most this many audiences are kept (then they start again: a proxy serving on keeps its own).
const MAX_AUDIENCES: usize = 256;

impl Inner {
    /// The audience of the proxy serving `session`'s commands with the allow-list `allow`.
    pub(crate) fn proxy_audience(
        &self,
        session: Option<&str>,
        allow: &[String],
    ) -> Arc<crate::proxy::Audience> {
        let mut all = self
            .proxy_audiences
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if all.len() >= MAX_AUDIENCES {
            all.clear();
        }
        all.entry((session.map(str::to_string), allow.to_vec()))
            .or_default()
            .clone()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.shut_down.swap(true, Ordering::SeqCst) {
            // Not shut down cleanly: kill everything synchronously so nothing outlives the executor.
            for p in self.registry.all() {
                p.tree.kill();
            }
            self.platform.shutdown();
            self.log_dir.remove();
        }
    }
}
