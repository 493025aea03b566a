//! One command's process tree: who belongs to it, whether anything of it is alive, and signalling it without ever
//! reaching a process outside it.
//!
//! Membership is proven each time it is used, never remembered by pid number alone:
//!
//! - **cgroup path**: the kernel's cgroup membership (`cgroup.procs`, `cgroup.kill`); a pid read from `cgroup.procs`
//!   is signalled only after a pidfd is held and `/proc/<pid>/cgroup` still names this cgroup.
//! - **process-group path**: one `/proc` snapshot gives the processes carrying the tree's inherited marker
//!   (`SHELLWARD_TREE=<token>/<id>`), the members remembered from earlier snapshots *with their start times*, the
//!   process group when it is provably the tree's (its leader is not yet reaped, so the group id cannot have been
//!   reused; or a proven member is in it), and every descendant of those. Each member is then signalled through a
//!   pidfd after its start time is checked again ([`super::pidfd::signal_verified`]).
//!
//! `killpg` is used only while the leader is unreaped ([`LeaderReap`]): until it is reaped its pid — the group id —
//! cannot be handed to another process.

use super::cgroup::Cgroup;
use super::limits::PidsGroup;
use super::pidfd::{Identity, signal_verified};
use super::{WATCHDOG_VAR, procfs};
use crate::sys::leader_reap::LeaderReap;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

/// A contained process tree.
#[derive(Debug)]
pub(crate) struct Tree {
    /// The process group (the leader's pid).
    pgid: i32,
    /// `SHELLWARD_TREE=<token>/<id>`, inherited by every process of the tree (on both paths).
    marker: String,
    /// Whether the leader has been reaped.
    leader: Arc<LeaderReap>,
    kind: Kind,
    /// The tree's process-count group, when processes are limited.
    pids: Option<PidsGroup>,
}

#[derive(Debug)]
enum Kind {
    /// In its own cgroup (and process group).
    Cgroup(Cgroup),
    /// In its own process group, found in `/proc`.
    Group {
        /// `SHELLWARD_TREE=<token>/`: the marker of every tree of this executor.
        token_prefix: String,
        /// Members seen in earlier snapshots, with their start times; an entry is dropped once no process with that
        /// pid and start time exists (zombies stay until reaped).
        known: Mutex<HashMap<i32, u64>>,
        /// The executor's account of its own children, shared by its trees.
        children: Arc<Children>,
        /// Pid 1 of the session's sandbox the tree was started in: the reaper of its orphans (instead of this
        /// subreaper).
        sandbox_init: Option<i32>,
    },
}

/// How a direct child of the executor bears on "is this tree gone?".
enum Settled {
    /// Not a living member of this tree.
    Yes,
    /// Exited (a zombie, or gone): not a member, but its children may have just been handed to the executor.
    Exited,
    /// Maybe a member: the caller must scan.
    No,
}

/// Releases what [`Tree::prepare_end_check`] holds when dropped.
pub(crate) struct EndCheck<'a>(&'a Tree);

impl Drop for EndCheck<'_> {
    fn drop(&mut self) {
        if let Kind::Cgroup(cgroup) = &self.0.kind {
            cgroup.release_events();
        }
    }
}

/// Fallback mode: the executor's own direct children that are accounted for, and where to list them.
#[derive(Debug)]
pub(crate) struct Children {
    /// The threads whose children lists hold every child that matters: the main thread (orphans re-parented to this
    /// subreaper go to the first living thread of the process, which is the main thread while the process runs) and
    /// the spawner thread (the parent of every leader and of the watchdog).
    pub(crate) tids: [i32; 2],
    /// Leaders that have not been reaped, with their tree's marker (the pid of an unreaped process cannot be
    /// reused, so a child with such a pid is that leader).
    pub(crate) leaders: Mutex<HashMap<i32, String>>,
    /// This executor's watchdog.
    pub(crate) watchdog: AtomicI32,
}

impl Tree {
    /// A tree in its own cgroup.
    pub(crate) fn in_cgroup(
        cgroup: Cgroup,
        pgid: i32,
        marker: String,
        pids: Option<PidsGroup>,
    ) -> Tree {
        Tree {
            pgid,
            marker,
            leader: Arc::default(),
            kind: Kind::Cgroup(cgroup),
            pids,
        }
    }

    /// A tree contained by its process group and marker.
    pub(crate) fn in_group(
        pgid: i32,
        marker: String,
        token_prefix: String,
        children: Arc<Children>,
        pids: Option<PidsGroup>,
        sandbox_init: Option<i32>,
    ) -> Tree {
        Tree {
            pgid,
            marker,
            leader: Arc::default(),
            kind: Kind::Group {
                token_prefix,
                known: Mutex::new(HashMap::new()),
                children,
                sandbox_init,
            },
            pids,
        }
    }

    /// Whether the tree hit its process limit (a fork was refused).
    pub(crate) fn process_limit_hit(&self) -> bool {
        self.pids.as_ref().is_some_and(|p| p.limit_hit())
    }

    /// The process group id (the leader's pid).
    pub(crate) fn pgid(&self) -> i32 {
        self.pgid
    }

    /// The leader's reap state (clone it for a thread that waits for the leader).
    pub(crate) fn leader(&self) -> &Arc<LeaderReap> {
        &self.leader
    }

    /// The living members now, with their start times.
    pub(crate) fn members(&self) -> Vec<Identity> {
        match &self.kind {
            // `cgroup.events` is one small read; only a populated cgroup needs its pids checked.
            Kind::Cgroup(cgroup) if !cgroup.populated() => Vec::new(),
            Kind::Cgroup(cgroup) => cgroup
                .pids()
                .into_iter()
                .filter_map(procfs::stat)
                .filter(|e| e.alive())
                .map(|e| Identity {
                    pid: e.pid,
                    start: e.start,
                })
                .collect(),
            Kind::Group { known, .. } => {
                let table = procfs::scan();
                let mut known = known.lock().unwrap_or_else(|p| p.into_inner());
                let mut roots = known.clone();
                roots.extend(
                    procfs::with_env(&table, &self.marker)
                        .into_iter()
                        .map(|e| (e.pid, e.start)),
                );
                let members =
                    procfs::tree_members(&table, self.pgid, !self.leader.is_reaped(), &roots);
                // Remember members (zombies too, so the reaper can reap them) while the same process still holds
                // the pid; forget the rest.
                let present: HashMap<i32, u64> = table.iter().map(|e| (e.pid, e.start)).collect();
                known.extend(members.iter().map(|(&pid, &start)| (pid, start)));
                known.retain(|pid, start| present.get(pid) == Some(start));
                members
                    .into_iter()
                    .map(|(pid, start)| Identity { pid, start })
                    .collect()
            }
        }
    }

    /// Whether the tree waits for input on `stdin` (`(device, inode)`, see [`procfs::input_identity`]): one of its
    /// processes is blocked reading a standard input that is that file, and none is running.
    pub(crate) fn waiting_for_input(&self, stdin: (u64, u64)) -> bool {
        let mut reader = false;
        for pid in self.member_pids() {
            match procfs::stat(pid) {
                Some(e) if e.state == 'R' => return false,
                Some(e) if !e.alive() => continue,
                None => continue,
                Some(_) => {}
            }
            if !reader
                && procfs::blocked_reading_stdin(pid)
                && procfs::stdin_identity(pid) == Some(stdin)
            {
                reader = true;
            }
        }
        reader
    }

    /// What the tree listens on now (`tcp 127.0.0.1:5173`, `udp …`, `unix /path`), read from its processes'
    /// descriptors and their network namespace's `/proc/net` tables.
    pub(crate) fn listening(&self) -> Vec<String> {
        let pids = self.member_pids();
        let mut inodes = std::collections::HashSet::new();
        for &pid in &pids {
            procfs::socket_inodes(pid, &mut inodes);
        }
        match pids.first() {
            Some(&pid) if !inodes.is_empty() => procfs::listening(pid, &inodes),
            _ => Vec::new(),
        }
    }

    /// The pids of the living members now.
    pub(crate) fn member_pids(&self) -> Vec<i32> {
        self.members().into_iter().map(|m| m.pid).collect()
    }

    /// Prepares a cheap end-of-run check while the command runs (cgroup: keeps `cgroup.events` open). The returned
    /// guard undoes it.
    pub(crate) fn prepare_end_check(&self) -> EndCheck<'_> {
        if let Kind::Cgroup(cgroup) = &self.kind {
            cgroup.hold_events();
        }
        EndCheck(self)
    }

    /// Members seen by snapshots whose process still exists (fallback mode), with their start times: the reaper
    /// reaps a zombie child only if it is one of these (a host's own children are not ours to reap).
    pub(crate) fn known(&self) -> HashMap<i32, u64> {
        match &self.kind {
            Kind::Cgroup(_) => HashMap::new(),
            Kind::Group { known, .. } => known.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }

    /// Whether anything of the tree is alive.
    pub(crate) fn alive(&self) -> bool {
        if self.certainly_gone() {
            return false;
        }
        !self.members().is_empty()
    }

    /// Fallback mode's quick answer to "is the tree gone?", without scanning every process on the machine.
    ///
    /// The executor is a child subreaper, so when a tree's processes die their orphaned descendants are re-parented
    /// to it: once the process group is empty, any survivor of the tree is a direct child of the executor or a
    /// descendant of one. The tree is certainly gone when the group is empty and every direct child is a zombie, a
    /// member of *another* tree of this executor (by its marker) or a watchdog (by `SHELLWARD_WATCHDOG`; a process
    /// hosting several executors has several). Anything else (a child carrying this tree's marker, an unmarked or
    /// unreadable child, no `/proc/self/task/*/children`) answers "maybe", and the caller scans. With cgroups the
    /// answer is always "maybe": `cgroup.events` is already one small read. In a session's sandbox orphans are
    /// re-parented to the sandbox's pid 1, not to the executor: there its children are the list judged.
    ///
    /// A child that exits while the list is judged hands its own children to the executor first (the kernel
    /// re-parents before the exiting process becomes a zombie), so when a listed child has exited the list is read
    /// again and must hold nothing new: otherwise a daemon's grandchild, re-parented in between, would be missed.
    pub(crate) fn certainly_gone(&self) -> bool {
        let Kind::Group {
            token_prefix,
            children: book,
            sandbox_init,
            ..
        } = &self.kind
        else {
            return false;
        };
        // In a session's sandbox orphans go to the sandbox's pid 1, not to this subreaper: its children are the ones
        // to judge.
        let list = || match sandbox_init {
            Some(init) => procfs::children_of_process(*init),
            None => procfs::children_of(&book.tids),
        };
        // A group with any process left (a zombie included) needs the full answer. A probe sends nothing.
        if killpg(Pid::from_raw(self.pgid), None) != Err(nix::errno::Errno::ESRCH) {
            return false;
        }
        let Some(mut listed) = list() else {
            return false;
        };
        for _ in 0..3 {
            let mut exited = false;
            for &child in &listed {
                match self.settled_child(child, token_prefix, book) {
                    Settled::No => return false,
                    Settled::Exited => exited = true,
                    Settled::Yes => {}
                }
            }
            // Only a child that exited can have handed children of its own to the executor meanwhile.
            if !exited {
                return true;
            }
            let Some(again) = list() else {
                return false;
            };
            let before: HashSet<i32> = listed.iter().copied().collect();
            if again.iter().all(|c| before.contains(c)) {
                return true;
            }
            listed = again;
        }
        false
    }

    /// Whether a direct child of the executor is certainly not a living member of this tree.
    fn settled_child(&self, child: i32, token_prefix: &str, book: &Children) -> Settled {
        let yes = |b: bool| if b { Settled::Yes } else { Settled::No };
        if child == book.watchdog.load(Ordering::Relaxed) {
            return Settled::Yes;
        }
        if let Some(m) = book
            .leaders
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&child)
        {
            // The leader of a tree of this executor that has not been reaped: fine unless it is this tree's.
            return yes(*m != self.marker);
        }
        if procfs::stat(child).is_some_and(|e| !e.alive()) {
            return Settled::Exited;
        }
        let Some(env) = procfs::environ(child) else {
            // Gone since the listing (fine, but it exited) or unreadable (not fine): tell them apart.
            return if procfs::stat(child).is_none() {
                Settled::Exited
            } else {
                Settled::No
            };
        };
        let mine = self.marker.as_bytes();
        let prefix = token_prefix.as_bytes();
        match env.iter().find(|kv| kv.starts_with(prefix)) {
            // A member of another tree of this executor, or (with no marker of ours) some executor's watchdog.
            Some(kv) => yes(kv.as_slice() != mine),
            None => yes(env
                .iter()
                .any(|kv| kv.strip_prefix(WATCHDOG_VAR.as_bytes()) == Some(b"=1"))),
        }
    }

    /// Whether `pid` (held by a pidfd) is a member by this tree's own rule: in its cgroup, or (process-group path,
    /// where the start time recorded by the membership snapshot is the proof) always.
    fn belongs(&self, pid: i32) -> bool {
        match &self.kind {
            Kind::Cgroup(cgroup) => cgroup.contains(pid),
            Kind::Group { .. } => true,
        }
    }

    /// Sends `signal` to every member: the process group while its leader is unreaped, then each member found now,
    /// verified through a pidfd. Returns how many members were signalled individually.
    pub(crate) fn signal(&self, signal: Signal) -> usize {
        self.leader.while_unreaped(|| {
            let _ = killpg(Pid::from_raw(self.pgid), signal);
        });
        self.members()
            .into_iter()
            .filter(|&m| signal_verified(m, signal, |pid| self.belongs(pid)))
            .count()
    }

    /// Asks the whole tree to end (SIGTERM); [`Tree::kill`] follows after the grace period if it does not.
    pub(crate) fn terminate(&self) {
        self.signal(Signal::SIGTERM);
    }

    /// SIGKILLs the whole tree at once.
    pub(crate) fn kill(&self) {
        match &self.kind {
            Kind::Cgroup(cgroup) => {
                let killed = cgroup.kill().is_ok();
                // Members that left the cgroup but kept the process group die with the group.
                self.leader.while_unreaped(|| {
                    let _ = killpg(Pid::from_raw(self.pgid), Signal::SIGKILL);
                });
                if !killed {
                    self.signal(Signal::SIGKILL);
                }
            }
            Kind::Group { .. } => {
                // Repeat until nothing new appears: a member may fork while we signal.
                for _ in 0..10 {
                    if self.members().is_empty() {
                        break;
                    }
                    self.signal(Signal::SIGKILL);
                }
            }
        }
    }

    /// Processes that carry this tree's marker but are outside its containment (cgroup path: a member that moved
    /// itself to another cgroup, as root can). Process-group path: none, the marker is part of membership.
    pub(crate) fn escapees(&self) -> Vec<Identity> {
        let Kind::Cgroup(cgroup) = &self.kind else {
            return Vec::new();
        };
        procfs::with_env(&procfs::scan(), &self.marker)
            .into_iter()
            .filter(|e| !cgroup.contains(e.pid))
            .map(|e| Identity {
                pid: e.pid,
                start: e.start,
            })
            .collect()
    }

    /// SIGKILLs processes found by [`Tree::escapees`], each verified by its marker through a pidfd. Returns how many
    /// were signalled.
    pub(crate) fn kill_escapees(&self) -> usize {
        self.escapees()
            .into_iter()
            .filter(|&m| {
                signal_verified(m, Signal::SIGKILL, |pid| {
                    procfs::has_env(pid, self.marker.as_bytes())
                })
            })
            .count()
    }

    /// Releases the tree's resources (its cgroup) once it is empty, waiting briefly if the kernel still counts a
    /// dying member (for shutdown paths).
    pub(crate) fn cleanup(&self) {
        if let Kind::Cgroup(cgroup) = &self.kind {
            cgroup.remove();
        }
        if let Some(pids) = &self.pids {
            for _ in 0..50 {
                if pids.try_release() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }

    /// Tries once to release the tree's resources without blocking; returns whether they are released.
    pub(crate) fn try_cleanup(&self) -> bool {
        let groups = match &self.kind {
            Kind::Cgroup(cgroup) => cgroup.try_release(),
            Kind::Group { .. } => true,
        };
        groups && self.pids.as_ref().is_none_or(|p| p.try_release())
    }
}
