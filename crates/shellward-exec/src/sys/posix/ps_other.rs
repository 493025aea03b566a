//! The process table on Unix systems other than Linux, macOS and FreeBSD: not read (nothing here has been built
//! for one); a tree is its process group alone.

use super::lineage::Seen;

/// Not listed here.
pub(crate) fn children(_pid: i32) -> Vec<i32> {
    Vec::new()
}

/// Not listed here.
pub(crate) fn group(_pgid: i32) -> Vec<i32> {
    Vec::new()
}

/// Not read here.
pub(crate) fn seen(_pid: i32) -> Option<Seen> {
    None
}

/// No reaper here.
pub(crate) fn subtree(_leader: i32, _leader_reaped: bool) -> Option<Vec<i32>> {
    None
}

/// No reaper here.
pub(crate) fn kill_subtree(_leader: i32, _signal: i32) -> Option<usize> {
    None
}

/// No reaper here.
pub(crate) fn become_reaper() -> bool {
    false
}

/// No reaper here: nothing to reap.
pub(crate) fn reap_orphans(_known: &std::collections::HashMap<i32, u64>) {}
