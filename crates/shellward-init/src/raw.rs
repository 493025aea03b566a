//! The system calls `rustix` keeps out of its public API (fork, exec, the signal mask and waits, exit, `kill(-1)`),
//! made through the `syscalls` crate: the init runs without a C library, so nothing else provides them.
//!
//! The structures passed are the kernel's own (not libc's): a signal set is one 64-bit word on every architecture
//! this crate builds for (x86_64, aarch64), and a `siginfo` starts with `si_signo`, `si_errno`, `si_code` there.

use rustix::io::Errno;
use syscalls::{Sysno, syscall};

/// `SIGCHLD`.
pub(crate) const SIGCHLD: i32 = 17;
/// `SIG_SETMASK` for `rt_sigprocmask`.
const SIG_SETMASK: usize = 2;
/// Bytes of the kernel's signal set.
const SIGSET_SIZE: usize = 8;

fn errno(e: syscalls::Errno) -> Errno {
    Errno::from_raw_os_error(e.into_raw())
}

fn set_mask(mask: u64) {
    // SAFETY: rt_sigprocmask reads one kernel signal set from a live local and writes nothing (no old set asked).
    let _ = unsafe {
        syscall!(
            Sysno::rt_sigprocmask,
            SIG_SETMASK,
            &mask as *const u64,
            0usize,
            SIGSET_SIZE
        )
    };
}

/// Blocks every signal (the kernel ignores the bits of `SIGKILL` and `SIGSTOP`).
pub(crate) fn block_all_signals() {
    set_mask(u64::MAX);
}

/// Waits for one of the blocked signals; returns its number and `si_code`.
pub(crate) fn wait_for_signal() -> Result<(i32, i32), Errno> {
    let all = u64::MAX;
    // The kernel's siginfo is 128 bytes; i32 words keep the header fields aligned.
    let mut info = [0i32; 32];
    // SAFETY: rt_sigtimedwait reads the set from a live local and writes at most 128 bytes into `info`; no timeout.
    unsafe {
        syscall!(
            Sysno::rt_sigtimedwait,
            &all as *const u64,
            info.as_mut_ptr(),
            0usize,
            SIGSET_SIZE
        )
    }
    .map_err(errno)?;
    // si_signo, si_errno, si_code.
    Ok((info[0], info[2]))
}

/// Ends the process (every thread) with `code`.
pub(crate) fn exit_group(code: i32) -> ! {
    // SAFETY: exit_group takes a plain integer and does not return.
    let _ = unsafe { syscall!(Sysno::exit_group, code) };
    // The kernel does not return from exit_group; should it, spin rather than run on.
    loop {
        core::hint::spin_loop();
    }
}
