//! The reaper on FreeBSD: the executor becomes one (`procctl(PROC_REAP_ACQUIRE)`, the counterpart of
//! Linux's child subreaper), so every process a command starts stays its descendant — orphans are re-parented to
//! the executor, not to init — and the kernel keeps, for each, which of the executor's children it descends from
//! (its *subtree*: the command's leader). A tree is then listed (`PROC_REAP_GETPIDS`) and killed
//! (`PROC_REAP_KILL`, the whole subtree in one call) however its processes regrouped, and orphans that exit are
//! reaped here. A command that makes itself a reaper hides its own descendants (the kernel lists a reaper, not
//! what is under it). No crate wraps these calls; the structures below are `<sys/procctl.h>`'s.

use super::lineage::MOST;
use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

const REAPER_STATUS_OWNED: c_uint = 0x1;
const REAPER_PIDINFO_VALID: c_uint = 0x1;
const REAPER_PIDINFO_CHILD: c_uint = 0x2;
const REAPER_PIDINFO_ZOMBIE: c_uint = 0x8;
const REAPER_KILL_SUBTREE: c_uint = 0x2;

/// `struct procctl_reaper_status`.
#[repr(C)]
struct ReaperStatus {
    rs_flags: c_uint,
    rs_children: c_uint,
    rs_descendants: c_uint,
    rs_reaper: libc::pid_t,
    rs_pid: libc::pid_t,
    rs_pad0: [c_uint; 15],
}

/// `struct procctl_reaper_pidinfo`.
#[repr(C)]
#[derive(Clone, Copy)]
struct PidInfo {
    pi_pid: libc::pid_t,
    pi_subtree: libc::pid_t,
    pi_flags: c_uint,
    pi_pad0: [c_uint; 15],
}

/// `struct procctl_reaper_pids`.
#[repr(C)]
struct ReaperPids {
    rp_count: c_uint,
    rp_pad0: [c_uint; 15],
    rp_pids: *mut PidInfo,
}

/// `struct procctl_reaper_kill`.
#[repr(C)]
struct ReaperKill {
    rk_sig: c_int,
    rk_flags: c_uint,
    rk_subtree: libc::pid_t,
    rk_killed: c_uint,
    rk_fpid: libc::pid_t,
    rk_pad0: [c_uint; 15],
}

/// Whether this process is a reaper (set once by [`become_reaper`]).
static REAPER: AtomicBool = AtomicBool::new(false);

/// `procctl(P_PID, getpid(), cmd, data)`.
fn procctl<T>(cmd: c_int, data: &mut T) -> std::io::Result<()> {
    // SAFETY: `data` is the structure `cmd` reads and writes (the callers pair them as `<sys/procctl.h>` says).
    let r = unsafe {
        libc::procctl(
            libc::P_PID,
            libc::getpid() as libc::id_t,
            cmd,
            (data as *mut T).cast::<c_void>(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Makes this process a reaper; whether it is one now (a process that already was stays one).
pub(crate) fn become_reaper() -> bool {
    // SAFETY: PROC_REAP_ACQUIRE takes no data.
    let r = unsafe {
        libc::procctl(
            libc::P_PID,
            libc::getpid() as libc::id_t,
            libc::PROC_REAP_ACQUIRE,
            std::ptr::null_mut(),
        )
    };
    // SAFETY: `ReaperStatus` is plain integers: all zeroes is a valid value.
    let mut status: ReaperStatus = unsafe { std::mem::zeroed() };
    let owned = r == 0
        || (procctl(libc::PROC_REAP_STATUS, &mut status).is_ok()
            && status.rs_flags & REAPER_STATUS_OWNED != 0);
    if !owned {
        tracing::warn!(
            error = %std::io::Error::last_os_error(),
            "cannot become a reaper: a command's orphans go to init and are not followed"
        );
    }
    REAPER.store(owned, Ordering::Relaxed);
    owned
}

/// Whether this process is a reaper (orphans of the commands are re-parented to it and reaped here).
pub(crate) fn active() -> bool {
    REAPER.load(Ordering::Relaxed)
}

/// Every descendant of this reaper (at most [`MOST`]), as the kernel lists them.
fn descendants() -> Vec<PidInfo> {
    if !REAPER.load(Ordering::Relaxed) {
        return Vec::new();
    }
    // SAFETY: `ReaperStatus` is plain integers: all zeroes is a valid value.
    let mut status: ReaperStatus = unsafe { std::mem::zeroed() };
    if procctl(libc::PROC_REAP_STATUS, &mut status).is_err() {
        return Vec::new();
    }
    // Room for the descendants counted and some started since.
    let room = (status.rs_descendants as usize + 16).min(MOST);
    // SAFETY: `PidInfo` is plain integers: all zeroes is a valid value.
    let mut infos = vec![unsafe { std::mem::zeroed::<PidInfo>() }; room];
    let mut pids = ReaperPids {
        rp_count: room as c_uint,
        rp_pad0: [0; 15],
        rp_pids: infos.as_mut_ptr(),
    };
    if procctl(libc::PROC_REAP_GETPIDS, &mut pids).is_err() {
        return Vec::new();
    }
    infos.retain(|i| i.pi_flags & REAPER_PIDINFO_VALID != 0);
    infos
}

/// The living processes of `leader`'s subtree (the leader among them while it lives). Once the leader is reaped its
/// pid may be a new child's: then nothing is listed rather than another command's processes.
pub(crate) fn subtree(leader: i32, leader_reaped: bool) -> Option<Vec<i32>> {
    if !REAPER.load(Ordering::Relaxed) {
        return None;
    }
    let all = descendants();
    if leader_reaped
        && all
            .iter()
            .any(|i| i.pi_pid == leader && i.pi_flags & REAPER_PIDINFO_CHILD != 0)
    {
        return Some(Vec::new());
    }
    Some(
        all.iter()
            .filter(|i| i.pi_subtree == leader && i.pi_flags & REAPER_PIDINFO_ZOMBIE == 0)
            .map(|i| i.pi_pid)
            .collect(),
    )
}

/// Sends `signal` to every process of `leader`'s subtree in one call; how many it reached (`None`: not a reaper, or
/// the call failed, and the caller signals what it lists). The caller holds the leader unreaped, so the subtree is
/// this command's.
pub(crate) fn kill_subtree(leader: i32, signal: i32) -> Option<usize> {
    if !REAPER.load(Ordering::Relaxed) {
        return None;
    }
    let mut kill = ReaperKill {
        rk_sig: signal,
        rk_flags: REAPER_KILL_SUBTREE,
        rk_subtree: leader,
        rk_killed: 0,
        rk_fpid: -1,
        rk_pad0: [0; 15],
    };
    match procctl(libc::PROC_REAP_KILL, &mut kill) {
        Ok(()) => Some(kill.rk_killed as usize),
        // Nothing was left to signal.
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Some(0),
        // Signalled one by one instead.
        Err(e) => {
            tracing::debug!(leader, "PROC_REAP_KILL failed: {e}");
            None
        }
    }
}

/// Reaps the exited orphans of the executor's trees: zombies re-parented to it (direct children) that descend from a
/// leader (their subtree is not their own pid) and were seen as a tree's members (`known`). A host's own children
/// are never reaped here.
pub(crate) fn reap_orphans(known: &HashMap<i32, u64>) {
    for info in descendants() {
        let orphan = info.pi_flags & REAPER_PIDINFO_CHILD != 0
            && info.pi_flags & REAPER_PIDINFO_ZOMBIE != 0
            && info.pi_subtree != info.pi_pid;
        if orphan && known.contains_key(&info.pi_pid) {
            let _ = nix::sys::wait::waitpid(
                nix::unistd::Pid::from_raw(info.pi_pid),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
        }
    }
}
