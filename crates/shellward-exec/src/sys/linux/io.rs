//! The leader's exit on Linux, turned into an [`ExitState`]: through its pidfd, else on a blocking thread.

use super::Leader;
use super::pidfd::pidfd_open;
use super::pipes::waitpid_blocking;
use super::streams::exit_state;
use super::tree::Tree;
use crate::results::ExitState;
use std::io;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Waits for the leader to exit and reaps it: through its pidfd when there is one (no thread held), else on a
/// blocking thread. `exited` runs once it has exited and before it is reaped (its pid is still its own then).
pub(crate) async fn wait_leader(
    leader: Leader,
    tree: &Tree,
    id: &str,
    exited: impl FnOnce(),
) -> io::Result<ExitState> {
    let pid = leader.pid();
    let (pidfd, child) = match leader {
        Leader::Raw { pidfd, .. } => (Ok(pidfd), None),
        Leader::Std(child) => (pidfd_open(pid), Some(child)),
    };
    let registered = pidfd.and_then(|fd| {
        // SAFETY: the pidfd is an `OwnedFd` moved into the `AsyncFd`, which keeps it open for its whole lifetime.
        unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(io::Error::from)
    });
    let wait = move || match child {
        Some(mut c) => c.wait(),
        None => waitpid_blocking(pid),
    };
    let status = match registered {
        Ok(fd) => {
            let _ = fd.readable().await;
            // Exited, not yet reaped: its pid is still its own.
            exited();
            // The process has exited: this reaps it without blocking (and without a group signal in flight).
            tree.leader().reap(wait)
        }
        Err(e) => {
            tracing::debug!(id, "pidfd unavailable ({e}); waiting on a blocking thread");
            let reap = tree.leader().clone();
            let status = tokio::task::spawn_blocking(move || reap.reap(wait))
                .await
                .unwrap_or_else(|e| Err(io::Error::other(e)));
            exited();
            status
        }
    };
    status.map(exit_state)
}
