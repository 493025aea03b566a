//! A command's processes beyond what its process group shows: every process descending from its leader, found
//! through the system's process table ([`ps`], one file per system) or its reaper ([`reaper`]), so a member that moved itself to another group
//! or session (`setsid`, a daemon) is still found, signalled and counted.
//!
//! How far that reaches depends on the system: on FreeBSD the executor is a reaper (`procctl(PROC_REAP_ACQUIRE)`)
//! and the kernel keeps each process's subtree, orphans included; on macOS descendants are walked from the group's
//! living members through their children (`proc_listpids`), so a process whose every ancestor in the tree has exited
//! (re-parented to launchd) is lost. Each process found is named by its id *and* start time, and re-read just
//! before it is signalled: a pid handed to another process meanwhile is left alone.

use super::{ps, reaper};
use std::collections::{HashSet, VecDeque};

/// The most processes one tree's walk visits: a fork bomb cannot make a walk unbounded.
pub(crate) const MOST: usize = 4096;

/// One living (not zombie) process as the system lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    /// Its id.
    pub(crate) pid: i32,
    /// Its process group.
    pub(crate) pgid: i32,
    /// When it started, in the system's own unit: with the pid, it names one process.
    pub(crate) start: u64,
}

impl Seen {
    /// Whether `pid` still names this very process (alive, same start time).
    pub(crate) fn still(&self) -> bool {
        ps::seen(self.pid).is_some_and(|now| now.start == self.start)
    }
}

/// Every process reachable from `roots` through `children` (the roots included), each once, at most [`MOST`].
pub(crate) fn walk(
    roots: impl IntoIterator<Item = i32>,
    mut children: impl FnMut(i32) -> Vec<i32>,
) -> Vec<i32> {
    let mut seen = HashSet::new();
    let mut order = Vec::new();
    let mut queue: VecDeque<i32> = roots.into_iter().filter(|p| *p > 1).collect();
    while let Some(pid) = queue.pop_front() {
        if order.len() >= MOST {
            break;
        }
        if !seen.insert(pid) {
            continue;
        }
        order.push(pid);
        queue.extend(children(pid).into_iter().filter(|p| *p > 1));
    }
    order
}

/// The living processes of the tree whose leader is `leader` and whose group is `pgid`. `leader_reaped`: the leader's
/// pid may name another process by now, so it is no longer a root of the walk (and, on FreeBSD, its subtree is read
/// only while no new child of the executor holds that pid).
pub(crate) fn processes(leader: i32, pgid: i32, leader_reaped: bool) -> Vec<Seen> {
    let pids = match reaper::subtree(leader, leader_reaped) {
        Some(pids) => pids,
        None => {
            let mut roots = ps::group(pgid);
            if !leader_reaped {
                roots.insert(0, leader);
            }
            walk(roots, ps::children)
        }
    };
    pids.into_iter().filter_map(ps::seen).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn table(edges: &[(i32, i32)]) -> impl FnMut(i32) -> Vec<i32> + use<> {
        let mut map: HashMap<i32, Vec<i32>> = HashMap::new();
        for (parent, child) in edges {
            map.entry(*parent).or_default().push(*child);
        }
        move |p| map.get(&p).cloned().unwrap_or_default()
    }

    #[test]
    fn a_walk_finds_every_descendant_once_in_breadth_order() {
        let found = walk([10, 12], table(&[(10, 11), (10, 12), (11, 13), (12, 14)]));
        assert_eq!(found, [10, 12, 11, 14, 13]);
    }

    #[test]
    fn a_walk_survives_a_cycle_and_never_visits_init_or_the_kernel() {
        // A table read while pids are reused can show a cycle; pid 1 and 0 are never the tree's.
        let found = walk([20], table(&[(20, 21), (21, 20), (21, 1), (21, 0)]));
        assert_eq!(found, [20, 21]);
        assert!(walk([1, 0], table(&[(1, 5)])).is_empty());
    }

    #[test]
    fn a_walk_is_bounded() {
        // A chain longer than the cap (a fork bomb's shape) stops at the cap.
        let found = walk([2], |p| vec![p + 1]);
        assert_eq!(found.len(), MOST);
    }
}
