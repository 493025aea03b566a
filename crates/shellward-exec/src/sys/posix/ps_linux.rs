//! The process table as macOS's code reads it, from Linux's `/proc`: built for the POSIX platform's tests, so the
//! walk that finds a tree's processes beyond its group runs in the suite.

use super::lineage::Seen;
use crate::sys::unix::procfs;

/// The direct children of `pid`.
pub(crate) fn children(pid: i32) -> Vec<i32> {
    procfs::scan()
        .into_iter()
        .filter(|p| p.ppid == pid)
        .map(|p| p.pid)
        .collect()
}

/// The members of the process group `pgid`.
pub(crate) fn group(pgid: i32) -> Vec<i32> {
    procfs::scan()
        .into_iter()
        .filter(|p| p.pgrp == pgid)
        .map(|p| p.pid)
        .collect()
}

/// `pid`'s group and start time, if it is alive (not a zombie).
pub(crate) fn seen(pid: i32) -> Option<Seen> {
    procfs::stat(pid).filter(|p| p.alive()).map(|p| Seen {
        pid,
        pgid: p.pgrp,
        start: p.start,
    })
}

/// No reaper in these tests (macOS has none): the tree is walked.
pub(crate) fn subtree(_leader: i32, _leader_reaped: bool) -> Option<Vec<i32>> {
    None
}

/// No reaper in these tests.
pub(crate) fn kill_subtree(_leader: i32, _signal: i32) -> Option<usize> {
    None
}

/// No reaper in these tests.
pub(crate) fn become_reaper() -> bool {
    false
}

/// No reaper in these tests: nothing to reap.
pub(crate) fn reap_orphans(_known: &std::collections::HashMap<i32, u64>) {}
