//! One command's process tree on macOS and FreeBSD: its process group, and what left it. The leader starts a group of
//! its own (a session of its own on a terminal), everything it starts inherits it, and signals go to the whole group
//! at once (`killpg`). A process that moves itself to another group or session is followed through the system's
//! process table ([`lineage`]): on FreeBSD always (the executor is a reaper and kills a subtree in one call), on
//! macOS while an ancestor of it in the tree lives (the platform documentation says so).

use super::lineage::{self, Seen};
use super::reaper;
use crate::sys::leader_reap::LeaderReap;
use nix::sys::signal::{Signal, kill, killpg};
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

    /// The leader's reap state (clone it for a thread that waits for the leader).
    pub(crate) fn leader(&self) -> &Arc<LeaderReap> {
        &self.leader
    }

    /// The tree's living processes: its group's and those that left it (see [`lineage`]).
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

    /// The ids of the tree's living processes; the leader's alone where the system's table is not read.
    pub(crate) fn member_pids(&self) -> Vec<i32> {
        let found: Vec<i32> = self.processes().iter().map(|p| p.pid).collect();
        if found.is_empty() && self.group_alive() {
            return vec![self.pgid];
        }
        found
    }

    /// The tree's living processes as the system lists them.
    fn processes(&self) -> Vec<Seen> {
        lineage::processes(self.pgid, self.pgid, self.leader.is_reaped())
    }

    /// Nothing to hold while a foreground command is waited for.
    pub(crate) fn prepare_end_check(&self) -> EndCheck {
        EndCheck
    }

    /// The tree's processes, for the orphan reaper (FreeBSD: the exited ones re-parented to the executor are reaped
    /// if they were seen here). Start times are not compared: the reaper checks each is a zombie of this executor's.
    /// Without a reaper nothing is re-parented here, and the tree is not listed (this runs on every upkeep pass).
    pub(crate) fn known(&self) -> HashMap<i32, u64> {
        if !reaper::active() {
            return HashMap::new();
        }
        self.processes().iter().map(|p| (p.pid, 0)).collect()
    }

    /// Whether any process of the tree is alive: its group (a null signal; a group whose leader was reaped and whose
    /// other members are gone answers `ESRCH`), or a process that left it.
    pub(crate) fn alive(&self) -> bool {
        self.group_alive() || !self.processes().is_empty()
    }

    /// Whether any process of the group is alive.
    fn group_alive(&self) -> bool {
        killpg(Pid::from_raw(self.pgid), None).is_ok()
    }

    /// Whether nothing of the tree can be alive.
    pub(crate) fn certainly_gone(&self) -> bool {
        !self.alive()
    }

    /// SIGTERM to the whole group and every process that left it.
    pub(crate) fn terminate(&self) {
        self.signal(Signal::SIGTERM);
    }

    /// SIGKILL to the whole group and every process that left it (stopped first: see `signal`).
    pub(crate) fn kill(&self) {
        self.signal(Signal::SIGKILL);
    }

    /// Sends `signal` to the tree. While the leader is unreaped its pid pins the group's id (and, on FreeBSD, its
    /// subtree's), so the signal reaches the tree alone — on FreeBSD the whole subtree in one call, regrouped or
    /// orphaned. Elsewhere the processes that left the group are listed *before* the group is signalled (a member
    /// killed first would take its escaped children's lineage with it), and for a kill the group and they are
    /// stopped first, so none forks a process unseen; each is re-read just before it is signalled (same pid, same
    /// start time).
    fn signal(&self, signal: Signal) {
        if self.pgid <= 1 {
            return;
        }
        let mut whole = false;
        self.leader.while_unreaped(|| {
            if reaper::kill_subtree(self.pgid, signal as i32).is_some() {
                whole = true;
                let _ = killpg(Pid::from_raw(self.pgid), signal);
            }
        });
        if whole {
            return;
        }
        let kill_all = signal == Signal::SIGKILL;
        if kill_all {
            self.signal_group(Signal::SIGSTOP);
        }
        let escaped = self.escaped_settled(kill_all);
        self.signal_group(signal);
        for p in escaped {
            if p.still() {
                let _ = kill(Pid::from_raw(p.pid), signal);
            }
        }
    }

    /// Sends `signal` to the group. Once the leader is reaped, what is left of the group (a command's leftovers) is
    /// signalled only if a null signal finds it alive just before — without a pidfd that is the narrowest these
    /// systems allow, and a group emptied and its id reused in between would be reached (the platform documentation
    /// says so).
    fn signal_group(&self, signal: Signal) {
        let group = Pid::from_raw(self.pgid);
        let sent = self.leader.while_unreaped(|| {
            let _ = killpg(group, signal);
        });
        if !sent && killpg(group, None).is_ok() {
            let _ = killpg(group, signal);
        }
    }

    /// The processes outside the group; with `stop`, each is stopped (SIGSTOP) and the tree listed again until no
    /// new one appears (a few rounds at most), so none is left that forked between a listing and the kill.
    fn escaped_settled(&self, stop: bool) -> Vec<Seen> {
        let mut found = self.escaped();
        if !stop {
            return found;
        }
        for _round in 0..4 {
            for p in &found {
                if p.still() {
                    let _ = kill(Pid::from_raw(p.pid), Signal::SIGSTOP);
                }
            }
            let new: Vec<Seen> = self
                .escaped()
                .into_iter()
                .filter(|p| !found.contains(p))
                .collect();
            if new.is_empty() {
                break;
            }
            found.extend(new);
        }
        found
    }

    /// The tree's living processes outside its group.
    fn escaped(&self) -> Vec<Seen> {
        self.processes()
            .into_iter()
            .filter(|p| p.pgid != self.pgid)
            .collect()
    }

    /// The tree's living processes that left its group (another group or session).
    pub(crate) fn escapees(&self) -> Vec<u32> {
        self.escaped().iter().map(|p| p.pid as u32).collect()
    }

    /// SIGKILLs the tree's processes that left its group (stopped first, see `signal`); how many.
    pub(crate) fn kill_escapees(&self) -> usize {
        self.escaped_settled(true)
            .into_iter()
            .filter(|p| p.still() && kill(Pid::from_raw(p.pid), Signal::SIGKILL).is_ok())
            .count()
    }

    /// Nothing to release.
    pub(crate) fn cleanup(&self) {}

    /// Nothing to release: done.
    pub(crate) fn try_cleanup(&self) -> bool {
        true
    }
}
