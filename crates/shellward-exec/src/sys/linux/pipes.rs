//! Output pipes for a command and blocking waits for a child process.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;

/// A close-on-exec pipe (read end, write end), enlarged to 1 MiB where the system allows.
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    // A larger pipe halves the wakeups for chatty commands; failure is harmless.
    // SAFETY: fcntl on a valid fd we own.
    unsafe {
        libc::fcntl(r.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20);
    }
    Ok((r, w))
}

/// Blocks until `pid` (a child of this process) exits and reaps it.
pub(crate) fn waitpid_blocking(pid: i32) -> io::Result<std::process::ExitStatus> {
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid on our own child with a valid status pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(std::process::ExitStatus::from_raw(status));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
