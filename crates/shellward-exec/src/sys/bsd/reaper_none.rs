//! No reaper (every Unix but FreeBSD here: macOS, and Linux's build of this code for its tests, whose own platform is
//! a child subreaper of its own kind): orphans go to init or launchd, and a tree is found by walking it
//! ([`super::lineage`]).

/// Not a reaper.
pub(crate) fn become_reaper() -> bool {
    false
}

/// Not a reaper: no orphan is ever re-parented here.
pub(crate) fn active() -> bool {
    false
}

/// No subtree: the tree is walked.
pub(crate) fn subtree(_leader: i32, _leader_reaped: bool) -> Option<Vec<i32>> {
    None
}

/// No subtree to kill in one call: the tree's processes are signalled one by one.
pub(crate) fn kill_subtree(_leader: i32, _signal: i32) -> Option<usize> {
    None
}

/// Nothing re-parented here: nothing to reap.
pub(crate) fn reap_orphans(_known: &std::collections::HashMap<i32, u64>) {}
