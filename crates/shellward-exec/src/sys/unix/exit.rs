//! A leader's exit on Unix: an exit notification the runtime watches (Linux's pidfd, the BSDs' kqueue; no thread
//! held, no polling), else a blocking wait on a thread; either way the leader is reaped while no group signal is in
//! flight, and turned into an [`ExitState`].

use super::streams::exit_state;
use crate::results::ExitState;
use crate::sys::leader_reap::LeaderReap;
use std::io;
use std::os::fd::OwnedFd;
use std::process::ExitStatus;
use std::sync::Arc;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Waits for the leader's exit through `watch` (readable once it has exited), then reaps it with `wait` under
/// `reap`; without a watch (`Err`, said at debug level), `wait` runs on a blocking thread. `exited` runs once it has
/// exited and, when there is a watch, before it is reaped (its pid is still its own then).
pub(crate) async fn reap_on_exit(
    watch: io::Result<OwnedFd>,
    reap: &Arc<LeaderReap>,
    exited: impl FnOnce(),
    wait: impl FnOnce() -> io::Result<ExitStatus> + Send + 'static,
) -> io::Result<ExitState> {
    let registered = watch.and_then(|fd| {
        // SAFETY: the descriptor is an `OwnedFd` moved into the `AsyncFd`, which keeps it open for its whole lifetime.
        unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(io::Error::from)
    });
    let status = match registered {
        Ok(fd) => {
            let _ = fd.readable().await;
            // Exited, not yet reaped: its pid is still its own.
            exited();
            // The process has exited: this reaps it without blocking (and without a group signal in flight).
            reap.reap(wait)
        }
        Err(e) => {
            tracing::debug!(
                "no exit notification for the leader ({e}); waiting on a blocking thread"
            );
            let reap = reap.clone();
            let status = tokio::task::spawn_blocking(move || reap.reap(wait))
                .await
                .unwrap_or_else(|e| Err(io::Error::other(e)));
            exited();
            status
        }
    };
    status.map(exit_state)
}
