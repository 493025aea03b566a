//! Pseudo-terminals for interactive commands: a master/slave pair sized for the caller, and the child-side step that
//! makes the slave the command's controlling terminal.
//!
//! Shared by Linux and, through `sys/bsd`, macOS and FreeBSD (which open the pair with `openpty`).
//!
//! Written on `libc` directly (`/dev/ptmx`, `unlockpt`, `TIOCGPTPEER`) rather than a pty crate: the pair must be
//! close-on-exec (so no other command inherits it), the slave is opened through the master without a path lookup,
//! and the child step must be async-signal-safe — three details the crates leave to the caller anyway.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Opens a pseudo-terminal of `rows` × `cols`: (master, slave), both close-on-exec.
#[cfg(target_os = "linux")]
pub(crate) fn open(rows: u16, cols: u16) -> io::Result<(OwnedFd, OwnedFd)> {
    // SAFETY: plain syscalls on descriptors this function owns; each result is checked before use.
    unsafe {
        let m = libc::open(
            c"/dev/ptmx".as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if m < 0 {
            return Err(with_context(
                io::Error::last_os_error(),
                "cannot open /dev/ptmx for a terminal",
            ));
        }
        let master = OwnedFd::from_raw_fd(m);
        if libc::unlockpt(m) != 0 {
            return Err(with_context(
                io::Error::last_os_error(),
                "cannot unlock the terminal",
            ));
        }
        let s = libc::ioctl(
            m,
            libc::TIOCGPTPEER,
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if s < 0 {
            return Err(with_context(
                io::Error::last_os_error(),
                "cannot open the terminal's slave side",
            ));
        }
        let slave = OwnedFd::from_raw_fd(s);
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        if libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size) != 0 {
            return Err(with_context(
                io::Error::last_os_error(),
                "cannot set the terminal size",
            ));
        }
        Ok((master, slave))
    }
}

/// Opens a pseudo-terminal of `rows` × `cols` with `openpty`: (master, slave), both made close-on-exec before
/// anything can be spawned (spawns happen on the executor's spawner, after this returns).
#[cfg(not(target_os = "linux"))]
pub(crate) fn open(rows: u16, cols: u16) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let (mut m, mut s) = (-1, -1);
    // SAFETY: openpty writes the two descriptors it opens; no name buffer, default termios, a valid window size.
    let r = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &raw mut size as _,
        )
    };
    if r != 0 {
        return Err(with_context(
            io::Error::last_os_error(),
            "cannot open a terminal (openpty)",
        ));
    }
    // SAFETY: both descriptors were just opened by openpty and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)) };
    for fd in [&master, &slave] {
        // SAFETY: fcntl on a descriptor owned here.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(with_context(
                io::Error::last_os_error(),
                "cannot make the terminal close-on-exec",
            ));
        }
    }
    Ok((master, slave))
}

fn with_context(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// In the child, after fds 0–2 are the slave: start a session (which also makes the child a process-group leader, as
/// the tree needs) and take fd 0 as the controlling terminal. Async-signal-safe.
pub(crate) fn become_controlled() -> io::Result<()> {
    // SAFETY: setsid and ioctl are async-signal-safe syscalls on the child's own descriptors.
    unsafe {
        if libc::setsid() < 0 {
            return Err(io::Error::last_os_error());
        }
        // The request's type differs between systems (`c_ulong` on macOS, `c_int`-sized elsewhere).
        if libc::ioctl(0, libc::TIOCSCTTY as _, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_terminal_has_the_size_asked_for() {
        use std::os::fd::AsRawFd;
        let (master, slave) = super::open(40, 132).unwrap();
        let mut size = libc::winsize {
            ws_row: 0,
            ws_col: 0,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: reading the size of a terminal we own into a local.
        let got = unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCGWINSZ, &mut size) };
        assert_eq!(got, 0);
        assert_eq!((size.ws_row, size.ws_col), (40, 132));
        // SAFETY: querying a descriptor flag.
        let flags = unsafe { libc::fcntl(master.as_raw_fd(), libc::F_GETFD) };
        assert!(flags & libc::FD_CLOEXEC != 0);
    }
}
