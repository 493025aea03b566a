//! The leader's exit on Linux, turned into an [`ExitState`]: through its pidfd, else on a blocking thread.

use super::Leader;
use super::pidfd::pidfd_open;
use super::pipes::waitpid_blocking;
use super::tree::Tree;
use crate::results::ExitState;
use crate::sys::unix::exit::reap_on_exit;
use std::io;

/// Waits for the leader to exit and reaps it: through its pidfd when there is one (no thread held), else on a
/// blocking thread. `exited` runs once it has exited and before it is reaped (its pid is still its own then).
pub(crate) async fn wait_leader(
    leader: Leader,
    tree: &Tree,
    exited: impl FnOnce(),
) -> io::Result<ExitState> {
    let pid = leader.pid();
    let (pidfd, child) = match leader {
        Leader::Raw { pidfd, .. } => (Ok(pidfd), None),
        Leader::Std(child) => (pidfd_open(pid), Some(child)),
    };
    let wait = move || match child {
        Some(mut c) => c.wait(),
        None => waitpid_blocking(pid),
    };
    reap_on_exit(pidfd, tree.leader(), exited, wait).await
}
