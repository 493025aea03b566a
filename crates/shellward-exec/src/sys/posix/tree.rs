//! One command's process tree on macOS and FreeBSD: its process group. The leader starts a group of its own (a
//! session of its own on a terminal), everything it starts inherits it, and signals go to the whole group at once
//! (`killpg`). A process that moves itself to another group or session is not followed (Linux follows it through
//! cgroups or its tree marker); the platform documentation says so.

use crate::sys::leader_reap::LeaderReap;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::sync::Arc;

/// What the portable core holds while a foreground command is waited for (nothing to hold here).
pub(crate) struct EndCheck;

/// A contained process tree: the command's process group.
#[derive(Debug)]
pub(crate) struct Tree {
    pgid: i32,
    leader: Arc<LeaderReap>,
}

impl Tree {
    /// The tree of the group `pgid` (its leader's pid).
    pub(crate) fn new(pgid: i32) -> Tree {
        Tree {
            pgid,
            leader: Arc::default(),
        }
    }

    /// No per-tree process limit here: never hit.
    pub(crate) fn process_limit_hit(&self) -> bool {
        false
    }

    /// The process group's id (the leader's pid).
    pub(crate) fn pgid(&self) -> i32 {
        self.pgid
    }

    /// The leader's reap state.
    pub(crate) fn leader(&self) -> &LeaderReap {
        &self.leader
    }

    /// The leader's reap state, shared (for a waiting thread).
    pub(crate) fn leader_shared(&self) -> Arc<LeaderReap> {
        self.leader.clone()
    }

    /// The group's processes are not listed here (no `/proc`): the leader while the group lives.
    pub(crate) fn members(&self) -> Vec<u32> {
        self.member_pids().into_iter().map(|p| p as u32).collect()
    }

    /// Whether the tree waits for input is not known here.
    pub(crate) fn waiting_for_input(&self, _stdin: (u64, u64)) -> bool {
        false
    }

    /// Listening sockets are not looked up here.
    pub(crate) fn listening(&self) -> Vec<String> {
        Vec::new()
    }

    /// The leader's pid while the group lives.
    pub(crate) fn member_pids(&self) -> Vec<i32> {
        if self.alive() {
            vec![self.pgid]
        } else {
            Vec::new()
        }
    }

    /// Nothing to hold while a foreground command is waited for.
    pub(crate) fn prepare_end_check(&self) -> EndCheck {
        EndCheck
    }

    /// No process of the tree is tracked beyond its group: none to keep from the orphan reaper.
    pub(crate) fn known(&self) -> HashMap<i32, u64> {
        HashMap::new()
    }

    /// Whether any process of the group is alive (a null signal to the group; a group whose leader was reaped and
    /// whose other members are gone answers `ESRCH`).
    pub(crate) fn alive(&self) -> bool {
        killpg(Pid::from_raw(self.pgid), None).is_ok()
    }

    /// Whether nothing of the tree can be alive.
    pub(crate) fn certainly_gone(&self) -> bool {
        !self.alive()
    }

    /// SIGTERM to the whole group.
    pub(crate) fn terminate(&self) {
        self.signal(Signal::SIGTERM);
    }

    /// SIGKILL to the whole group.
    pub(crate) fn kill(&self) {
        self.signal(Signal::SIGKILL);
    }

    /// Sends `signal` to the group. While the leader is unreaped its pid pins the group's id, so the signal reaches
    /// the tree alone; once it is reaped, what is left of the group (a command's leftovers) is signalled only if a
    /// null signal finds it alive just before — without a pidfd that is the narrowest these systems allow, and a
    /// group emptied and its id reused in between would be reached (the platform documentation says so).
    fn signal(&self, signal: Signal) {
        if self.pgid <= 1 {
            return;
        }
        let group = Pid::from_raw(self.pgid);
        let sent = self.leader.while_unreaped(|| {
            let _ = killpg(group, signal);
        });
        if !sent && killpg(group, None).is_ok() {
            let _ = killpg(group, signal);
        }
    }

    /// Processes that left the group are not followed here: none known.
    pub(crate) fn escapees(&self) -> Vec<u32> {
        Vec::new()
    }

    /// None known (see [`Tree::escapees`]).
    pub(crate) fn kill_escapees(&self) -> usize {
        0
    }

    /// Nothing to release.
    pub(crate) fn cleanup(&self) {}

    /// Nothing to release: done.
    pub(crate) fn try_cleanup(&self) -> bool {
        true
    }
}
