//! Pid 1 of a shellward session's sandbox, and the executor's watchdog.
//!
//! shellward-exec gives each session a PID and mount namespace (its *sandbox*) at the session's first command. Its
//! pid 1 is this crate in session mode ([`SESSION_ARG`], [`session`]): the `shellward-init-static` binary embedded in
//! the executor, or any binary whose `main` calls `shellward_exec::init_main_if_requested()` first. The executor's
//! child set-up has made the namespace's mounts before the exec (private mounts, a fresh `/proc`, the host's own
//! files read-only) and dropped the capabilities a command could escape with (shellward-exec's `child_setup`). The
//! session's commands are started straight into the namespace as the executor's own children; this process only
//! reaps what is re-parented to it and holds the namespace. Signals from inside do not reach it (pid 1 without a
//! handler), so `kill -9 -1`, `pkill` and `killall` (in any language) reach only the session's processes. When it
//! ends (the executor's `SIGTERM`, or the executor's death through the parent-death signal) the kernel kills every
//! process of the namespace, so nothing of the session outlives it.
//!
//! The same binary is the executor's watchdog when started with [`WATCHDOG_ARG`] (see [`watchdog`]).
//!
//! The crate is `no_std` and allocates nothing: every system call goes through `rustix`'s raw Linux backend, so the
//! static binary needs no C library. It starts in about a fifth of the time of a dynamically linked Rust program and is
//! small enough to copy into memory once per executor.

// Linux only: on other platforms the crate is empty (nothing there runs a PID namespace).
#![cfg(target_os = "linux")]
#![cfg_attr(not(test), no_std)]

use core::ffi::CStr;
use rustix::fd::BorrowedFd;

mod raw;
pub mod watchdog;

pub use watchdog::WATCHDOG_ARG;

/// The first argument that puts a binary into session mode (see [`session`]).
pub const SESSION_ARG: &str = "__shellward-session";

/// `SIGTERM`: the executor's request to end a session.
const SIGTERM: i32 = 15;

/// Exit code of a usage error (the init was not started by the executor).
const USAGE: i32 = 2;
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

/// Runs pid 1 of a session's PID namespace and returns the exit code to end with (0, when the executor asks it to
/// end with `SIGTERM`).
///
/// The executor starts it once per session (`clone3(CLONE_NEWPID | CLONE_NEWNS)`, its mounts already set), then
/// starts each command of the session straight into the namespace (`setns` of the namespace before the clone): the
/// commands are the executor's own children. This process only reaps what is re-parented to it — the orphans of
/// every command of the session — and holds the namespace. It forwards nothing: a signal from inside the namespace
/// does not reach it (pid 1 has no handler, so the kernel drops it), and one from the executor's side other than
/// `SIGTERM` is ignored. When it ends, the kernel kills every process of the namespace: nothing of the session
/// outlives it.
///
/// # Safety
/// The process must be a fresh, single-threaded one started by the executor for this purpose: [`session`] takes over
/// its signal mask and its children.
pub unsafe fn session() -> i32 {
    let _ = rustix::thread::set_name(c"shellward-init");
    raw::block_all_signals();
    loop {
        let Ok((signo, _)) = raw::wait_for_signal() else {
            continue;
        };
        if signo == SIGTERM {
            return 0;
        }
        if signo != raw::SIGCHLD {
            continue;
        }
        while let Ok(Some(_)) = rustix::process::wait(rustix::process::WaitOptions::NOHANG) {}
    }
}

/// Ends the process with `code` (`exit_group`), without running anything else: for the static binary, which has no
/// C library to exit through.
pub fn exit(code: i32) -> ! {
    raw::exit_group(code)
}
