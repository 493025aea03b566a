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
