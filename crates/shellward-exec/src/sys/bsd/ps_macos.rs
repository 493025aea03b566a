//! The process table on macOS (libproc): a process's children, a group's members, a process's group and start
//! time. The executor is no reaper here: the tree's processes are found by walking from its living members.

use super::lineage::{MOST, Seen};
use std::ffi::c_void;
use std::mem::size_of;

/// `proc_listpids` types (`<libproc.h>`, not in the `libc` crate).
const PROC_PGRP_ONLY: u32 = 2;
const PROC_PPID_ONLY: u32 = 6;

/// The pids `proc_listpids(kind, arg)` lists, the buffer grown until they fit (at most [`MOST`]).
fn list(kind: u32, arg: i32) -> Vec<i32> {
    let mut room = 64usize;
    loop {
        let mut buf = vec![0 as libc::pid_t; room];
        let bytes = (room * size_of::<libc::pid_t>()) as libc::c_int;
        // SAFETY: `buf` has room for `bytes` bytes of pids, which is all the call writes.
        let n = unsafe {
            libc::proc_listpids(kind, arg as u32, buf.as_mut_ptr().cast::<c_void>(), bytes)
        };
        if n <= 0 {
            return Vec::new();
        }
        let count = (n as usize / size_of::<libc::pid_t>()).min(room);
        if count < room || room >= MOST {
            buf.truncate(count);
            buf.retain(|p| *p > 0);
            return buf;
        }
        room *= 4;
    }
}

/// The direct children of `pid`.
pub(crate) fn children(pid: i32) -> Vec<i32> {
    list(PROC_PPID_ONLY, pid)
}

/// The members of the process group `pgid`.
pub(crate) fn group(pgid: i32) -> Vec<i32> {
    list(PROC_PGRP_ONLY, pgid)
}

/// `pid`'s group and start time, if it is alive (not a zombie).
pub(crate) fn seen(pid: i32) -> Option<Seen> {
    // SAFETY: `proc_bsdinfo` is plain integers: all zeroes is a valid value.
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = size_of::<libc::proc_bsdinfo>() as libc::c_int;
    // SAFETY: `info` is a `proc_bsdinfo` of `size` bytes, which is all PROC_PIDTBSDINFO writes.
    let n = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTBSDINFO,
            0,
            (&raw mut info).cast::<c_void>(),
            size,
        )
    };
    if n != size || info.pbi_status == libc::SZOMB {
        return None;
    }
    Some(Seen {
        pid,
        pgid: info.pbi_pgid as i32,
        start: info.pbi_start_tvsec * 1_000_000 + info.pbi_start_tvusec,
    })
}
