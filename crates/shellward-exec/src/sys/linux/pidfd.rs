//! Process handles that cannot go stale: pidfds, and signals sent only to a process whose identity was just proven.
//!
//! A pid number names a process only until that process is reaped; after that the kernel may hand it to anybody
//! (`pid_max` is small and pids wrap). So nothing here signals a number. [`signal_verified`] opens a pidfd for the
//! pid (which pins *the process that has the pid now*), then proves that this process is the one meant — its start
//! time matches the one recorded when it was found to be a member, and the caller's own membership check (cgroup,
//! tree marker) holds — and only then signals through the pidfd (`pidfd_send_signal`). If the pid was reused between
//! the check and the open, the start time differs; if it was reused after the open, the pidfd still refers to the
//! old, dead process and the signal goes nowhere.

use nix::sys::signal::Signal;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Opens a pidfd for `pid` (Linux ≥ 5.3).
pub(crate) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: raw syscall with valid arguments; the returned fd is owned by us.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new, valid file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Sends `signal` to the process a pidfd refers to.
pub(crate) fn pidfd_send_signal(fd: &OwnedFd, signal: Signal) -> io::Result<()> {
    // SAFETY: raw syscall on a pidfd we own, a valid signal number, no siginfo, no flags.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal as libc::c_int,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What a caller knows about a process it wants to signal: its pid and the start time it had when it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Identity {
    /// Process id.
    pub(crate) pid: i32,
    /// Start time in clock ticks after boot (`/proc/<pid>/stat` field 22).
    pub(crate) start: u64,
}

/// Signals `who` if, with a pidfd held, it is still the process that was found (same start time) and `belongs`
/// still holds for it. Returns whether the signal was sent.
pub(crate) fn signal_verified(
    who: Identity,
    signal: Signal,
    belongs: impl Fn(i32) -> bool,
) -> bool {
    let Ok(fd) = pidfd_open(who.pid) else {
        return false;
    };
    let same = super::procfs::stat(who.pid).is_some_and(|e| e.start == who.start);
    same && belongs(who.pid) && pidfd_send_signal(&fd, signal).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start_of(pid: i32) -> u64 {
        super::super::procfs::stat(pid).unwrap().start
    }

    #[test]
    fn a_process_with_another_start_time_is_not_signalled() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let real = start_of(pid);
        let stale = Identity {
            pid,
            start: real.wrapping_sub(1),
        };
        assert!(!signal_verified(stale, Signal::SIGKILL, |_| true));
        assert!(child.try_wait().unwrap().is_none(), "the process survives");
        // A failing membership check stops the signal too.
        let who = Identity { pid, start: real };
        assert!(!signal_verified(who, Signal::SIGKILL, |_| false));
        assert!(child.try_wait().unwrap().is_none());
        assert!(signal_verified(who, Signal::SIGKILL, |_| true));
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        // Reaped: the pid names nothing of ours any more, so nothing is sent.
        assert!(!signal_verified(who, Signal::SIGKILL, |_| true));
    }
}
