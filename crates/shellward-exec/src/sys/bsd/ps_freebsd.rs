//! The process table on FreeBSD: a process's group and start time (`kern.proc.pid`). The tree itself is the reaper's
//! subtree ([`super::reaper`]): no children are walked here.

use super::lineage::Seen;
use std::ffi::{c_uint, c_void};
use std::mem::size_of;

/// Not walked here: the subtree is the kernel's ([`super::reaper`]).
pub(crate) fn children(_pid: i32) -> Vec<i32> {
    Vec::new()
}

/// Not listed here: the subtree holds the group's members ([`super::reaper`]).
pub(crate) fn group(_pgid: i32) -> Vec<i32> {
    Vec::new()
}

/// `pid`'s group and start time (`kern.proc.pid`), if it is alive (not a zombie).
pub(crate) fn seen(pid: i32) -> Option<Seen> {
    let mib = [libc::CTL_KERN, libc::KERN_PROC, libc::KERN_PROC_PID, pid];
    // SAFETY: `kinfo_proc` is plain data: all zeroes is a valid value.
    let mut info: libc::kinfo_proc = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::kinfo_proc>();
    // SAFETY: `info` has room for `len` bytes, which is all the call writes; `mib` names 4 integers.
    let r = unsafe {
        libc::sysctl(
            mib.as_ptr(),
            mib.len() as c_uint,
            (&raw mut info).cast::<c_void>(),
            &mut len,
            std::ptr::null(),
            0,
        )
    };
    if r != 0 || len != size_of::<libc::kinfo_proc>() || info.ki_stat == libc::SZOMB {
        return None;
    }
    Some(Seen {
        pid,
        pgid: info.ki_pgid,
        start: (info.ki_start.tv_sec as u64) * 1_000_000 + info.ki_start.tv_usec as u64,
    })
}
