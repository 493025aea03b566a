//! The process table as macOS's code reads it, from Linux's `/proc`: built for the POSIX platform's tests, so the
//! walk that finds a tree's processes beyond its group runs in the suite.

use super::lineage::Seen;
use crate::sys::linux::procfs;

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
