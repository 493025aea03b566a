//! The init of a shellward command's PID namespace: a minimal `tini` that forwards signals to the tree and reaps it.
//!
//! shellward-exec starts a command's leader with `clone3(CLONE_NEWPID | CLONE_NEWNS)` running an *init program* with
//! the arguments `__shellward-init REPORT_FD PROGRAM_PATH -- ARGV0 ARGS…` ([`INIT_ARG`] first). That program is this
//! crate's `shellward-init-static` binary (embedded in the executor), or any binary whose `main` calls
//! `shellward_exec::init_main_if_requested()` first; either way it ends up in [`run`]. As pid 1 of the new namespace
//! it:
//!
//! 1. finds its mounts already made private by the executor before the exec, with a fresh `/proc` (so `ps` inside
//!    shows the namespace only), the host's own files read-only and the capabilities a command could escape with
//!    dropped (shellward-exec's `child_setup`: that needs privileges the init no longer holds);
//! 2. blocks every signal, forks, and execs the command (signals unblocked, `SIGPIPE` back to default) in the
//!    init's process group, which is the tree's;
//! 3. waits for signals: `SIGCHLD` reaps every exited process (orphans are reparented to it); every other catchable
//!    signal (`TERM`, `INT`, `HUP`, …) is forwarded to all processes of the namespace with `kill(-1, sig)`, so
//!    terminate still means TERM, grace, then KILL — pid 1 of a namespace would otherwise ignore signals it has no
//!    handler for;
//! 4. when the command exits, writes its wait status (4 bytes, little endian) to `REPORT_FD`: that is the command's
//!    end for the host, which reports it as it would a leader's. Processes the command left behind (`sleep 300 &`)
//!    live on as before — reported as leftovers, stoppable with the tree — and the init keeps forwarding and reaping;
//!    when it has no child left (the namespace is empty) it exits with the command's status (128 + n for a signal).
//!    The kernel kills every process of a namespace whose init dies, so nothing can outlive it.
//!
//! Inside, `kill -9 -1`, `pkill` and `killall` (in any language) reach only the namespace: the command's own tree.
//!
//! The same binary is the executor's watchdog when started with [`WATCHDOG_ARG`] (see [`watchdog`]).
//!
//! The crate is `no_std` and allocates nothing: every system call goes through `rustix`'s raw Linux backend, so the
//! static binary needs no C library. It starts in about a fifth of the time of a dynamically linked Rust program and is
//! small enough to copy into memory once per executor.

#![cfg_attr(not(test), no_std)]

use core::ffi::CStr;
use rustix::fd::BorrowedFd;
use rustix::io::Errno;

mod raw;
pub mod watchdog;

pub use watchdog::WATCHDOG_ARG;

/// The first argument that puts a binary into init mode.
pub const INIT_ARG: &str = "__shellward-init";

/// Exit code of a usage error (the init was not started by the executor).
const USAGE: i32 = 2;
/// Exit code when the command cannot be started.
const CANNOT_RUN: i32 = 127;

/// Writes `parts` and a newline to stderr, prefixed with `shellward-init: ` (the init has no allocator or logger).
fn say(parts: &[&[u8]]) {
    // SAFETY: fd 2 stays open for the init's whole life (it is replaced by /dev/null only after the last message).
    let stderr = unsafe { BorrowedFd::borrow_raw(2) };
    let _ = rustix::io::write(stderr, b"shellward-init: ");
    for part in parts {
        let _ = rustix::io::write(stderr, part);
    }
    let _ = rustix::io::write(stderr, b"\n");
}

/// `n` in decimal, into `buf`; returns the digits.
fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// Parses a small non-negative decimal (the report descriptor).
fn parse_fd(s: &CStr) -> Option<i32> {
    let bytes = s.to_bytes();
    if bytes.is_empty() || bytes.len() > 9 {
        return None;
    }
    bytes.iter().try_fold(0i32, |n, &b| {
        b.is_ascii_digit().then(|| n * 10 + i32::from(b - b'0'))
    })
}

/// The `i`th entry of a NULL-terminated pointer array, if the array is that long.
///
/// # Safety
/// `array` must point to a NULL-terminated array of NUL-terminated strings, and `i` must not pass its NULL.
unsafe fn arg<'a>(array: *const *const u8, i: usize) -> Option<&'a CStr> {
    // SAFETY: upheld by the caller.
    unsafe {
        let p = *array.add(i);
        (!p.is_null()).then(|| CStr::from_ptr(p.cast()))
    }
}

/// Runs the init and returns the exit code to end with: the command's status once the namespace is empty, 2 on a
/// usage error, 127 when the command cannot be started.
///
/// `args` are the arguments after [`INIT_ARG`] (`REPORT_FD PROGRAM_PATH -- ARGV0 ARGS…`) and `envp` the command's
/// environment, both NULL-terminated arrays of NUL-terminated strings.
///
/// # Safety
/// `args` and `envp` must be valid NULL-terminated arrays of NUL-terminated strings that live as long as the call,
/// and the process must be a fresh, single-threaded one started by the executor for this purpose: [`run`] takes over
/// its signal mask, its standard descriptors and its children.
pub unsafe fn run(args: *const *const u8, envp: *const *const u8) -> i32 {
    // SAFETY: `args` is NULL-terminated (caller); each index is read only after the previous one was not NULL.
    let (report, path, sep) = unsafe {
        let report = arg(args, 0);
        let path = report.and_then(|_| arg(args, 1));
        let sep = path.and_then(|_| arg(args, 2));
        (report, path, sep)
    };
    let Some(report) = report.and_then(parse_fd) else {
        say(&[
            b"usage: __shellward-init REPORT_FD PROGRAM_PATH -- ARGV0 [ARGS...] (started by shellward only)",
        ]);
        return USAGE;
    };
    let (Some(path), Some(sep)) = (path, sep) else {
        say(&[b"missing PROGRAM_PATH -- ARGV0"]);
        return USAGE;
    };
    // SAFETY: `sep` was not NULL, so index 3 is inside the array.
    if sep.to_bytes() != b"--" || unsafe { arg(args, 3) }.is_none() {
        say(&[b"missing -- ARGV0 after PROGRAM_PATH"]);
        return USAGE;
    }
    // SAFETY: index 3 exists (checked above): the command's NULL-terminated argv.
    let argv = unsafe { args.add(3) };

    // Started from an in-memory file, the kernel names this process after the descriptor ("5"): name it.
    let _ = rustix::thread::set_name(c"shellward-init");
    // SAFETY: `report` is the pipe the executor put on that number for this process.
    let report = unsafe { BorrowedFd::borrow_raw(report) };
    let _ = rustix::io::fcntl_setfd(report, rustix::io::FdFlags::CLOEXEC);
    // This process is single-threaded and installs no handlers: blocking every signal only defers them to the
    // `sigwaitinfo` loop below.
    raw::block_all_signals();
    // SAFETY: single-threaded (caller), so the child may run anything until it execs.
    let child = match unsafe { raw::fork() } {
        Ok(None) => {
            // SAFETY: the child of a single-threaded process; it only resets its own signal state, then execs the
            // command with NULL-terminated arrays that live until then.
            unsafe {
                raw::default_disposition(raw::SIGPIPE);
                raw::unblock_all_signals();
                let e = raw::execve(path, argv, envp);
                let mut digits = [0u8; 10];
                say(&[
                    b"cannot run ",
                    path.to_bytes(),
                    b": ",
                    errno_name(e),
                    b" (os error ",
                    decimal(e.raw_os_error() as u32, &mut digits),
                    b")",
                ]);
                raw::exit_group(CANNOT_RUN)
            }
        }
        Ok(Some(child)) => child,
        Err(e) => {
            let mut digits = [0u8; 10];
            say(&[
                b"cannot fork the command: ",
                errno_name(e),
                b" (os error ",
                decimal(e.raw_os_error() as u32, &mut digits),
                b")",
            ]);
            return CANNOT_RUN;
        }
    };

    // The init never writes to the command's streams again: closing its copies lets the command's output end when
    // the command's own last process closes it, not when the namespace is torn down after the init exits.
    if let Ok(null) = rustix::fs::open(
        c"/dev/null",
        rustix::fs::OFlags::RDWR,
        rustix::fs::Mode::empty(),
    ) {
        let _ = rustix::stdio::dup2_stdin(&null);
        let _ = rustix::stdio::dup2_stdout(&null);
        let _ = rustix::stdio::dup2_stderr(&null);
        // Opened on 0-2 (one of them was closed): it is one of the three now, so it must stay open.
        if rustix::fd::AsRawFd::as_raw_fd(&null) <= 2 {
            core::mem::forget(null);
        }
    }
    let mut status: Option<i32> = None;
    loop {
        let Ok((signo, code)) = raw::wait_for_signal() else {
            continue;
        };
        if signo != raw::SIGCHLD {
            // A signal the terminal generated (Ctrl-C, a resize, a hang-up) was delivered by the kernel to the
            // terminal's foreground group already — possibly a job the command's shell put there; forwarding it to
            // everything would interrupt the shell too. Others (the host's TERM, INT, HUP) are forwarded to every
            // process of the namespace (never to this init).
            const SI_KERNEL: i32 = 0x80;
            if code != SI_KERNEL {
                raw::signal_everyone(signo);
            }
            continue;
        }
        let mut empty = false;
        loop {
            match rustix::process::wait(rustix::process::WaitOptions::NOHANG) {
                Ok(Some((pid, st))) => {
                    if pid.as_raw_nonzero().get() == child {
                        let raw = st.as_raw();
                        status = Some(raw);
                        // The command's end is the host's to know now, even if processes it left live on.
                        let _ = rustix::io::write(report, &raw.to_le_bytes());
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    empty = e == Errno::CHILD;
                    break;
                }
            }
        }
        // No child left: every process of the namespace descends from this init, so it is empty.
        if empty && let Some(st) = status {
            return exit_code(st);
        }
    }
}

/// Ends the process with `code` (`exit_group`), without running anything else: for the static binary, which has no
/// C library to exit through.
pub fn exit(code: i32) -> ! {
    raw::exit_group(code)
}

/// The exit code that passes a wait status on: the code, or 128 + the signal.
fn exit_code(status: i32) -> i32 {
    let signal = status & 0x7f;
    if signal == 0 {
        (status >> 8) & 0xff
    } else if signal != 0x7f {
        128 + signal
    } else {
        1
    }
}

/// A short name for the errors a start can fail with.
fn errno_name(e: Errno) -> &'static [u8] {
    match e {
        Errno::NOENT => b"No such file or directory",
        Errno::ACCESS => b"Permission denied",
        Errno::NOEXEC => b"Exec format error",
        Errno::NOTDIR => b"Not a directory",
        Errno::TXTBSY => b"Text file busy",
        Errno::NOMEM => b"Cannot allocate memory",
        Errno::AGAIN => b"Resource temporarily unavailable",
        Errno::TOOBIG => b"Argument list too long",
        Errno::LOOP => b"Too many levels of symbolic links",
        _ => b"error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_descriptors_parse_as_small_decimals_only() {
        assert_eq!(parse_fd(c"3"), Some(3));
        assert_eq!(parse_fd(c"12"), Some(12));
        assert_eq!(parse_fd(c""), None);
        assert_eq!(parse_fd(c"-1"), None);
        assert_eq!(parse_fd(c"3x"), None);
        assert_eq!(parse_fd(c"9999999999"), None);
    }

    #[test]
    fn wait_statuses_become_exit_codes() {
        assert_eq!(exit_code(0), 0);
        assert_eq!(exit_code(3 << 8), 3);
        assert_eq!(exit_code(9), 137);
        assert_eq!(
            exit_code(15 | 0x80),
            143,
            "a core dump flag does not change the signal"
        );
    }

    #[test]
    fn decimals_are_written_without_allocating() {
        let mut buf = [0u8; 10];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(2, &mut buf), b"2");
        assert_eq!(decimal(4_294_967_295, &mut buf), b"4294967295");
    }
}
