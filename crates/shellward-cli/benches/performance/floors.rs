//! The floors the throughput row is measured against: spawn rates of `sh -c true` spawned as barely as the kernel
//! allows, plain and in a fresh PID and mount namespace (directly and under a minimal init).

use super::window;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Spawns of `spawn` per second on as many threads as cores, twice over, for one window.
pub(crate) fn spawn_rate(spawn: fn()) -> f64 {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let stop = Arc::new(AtomicBool::new(false));
    let spawners: Vec<_> = (0..cores * 2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    spawn();
                    n += 1;
                }
                n
            })
        })
        .collect();
    let w = window();
    std::thread::sleep(w);
    stop.store(true, Ordering::Relaxed);
    let total: u64 = spawners.into_iter().map(|h| h.join().unwrap()).sum();
    total as f64 / w.as_secs_f64()
}

/// `sh -c true`, spawned and waited for.
pub(crate) fn raw_sh() {
    Command::new("sh").args(["-c", "true"]).status().unwrap();
}

/// The clone flags that share this process's memory with a child until its `execve` (as `posix_spawn` and shellward's
/// own spawn do, so no page tables are copied), with `SIGCHLD` at its end.
const SPAWN_FLAGS: libc::c_int = libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD;

/// `clone`s `child(arg)` on the top of `stack` with `flags`; returns the pid.
///
/// # Safety
/// `child` must do no more than a `vfork` child may (raw system calls on memory it does not free, then `execve` or
/// `_exit`), and `stack` must not be used by anything else until it has.
unsafe fn clone_on(
    stack: &mut [u8],
    child: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    flags: libc::c_int,
    arg: *mut libc::c_void,
) -> libc::pid_t {
    // SAFETY: the stack's top, 16-byte aligned, inside the slice; the caller answers for the child.
    unsafe {
        let top = stack.as_mut_ptr().add(stack.len()) as usize & !15;
        libc::clone(child, top as *mut libc::c_void, flags, arg)
    }
}

/// Execs `sh -c true`, or exits 127.
extern "C" fn exec_sh(_: *mut libc::c_void) -> libc::c_int {
    let argv = [
        c"sh".as_ptr(),
        c"-c".as_ptr(),
        c"true".as_ptr(),
        std::ptr::null(),
    ];
    // SAFETY: NUL-terminated literals and a NULL-terminated array that live until the exec.
    unsafe {
        libc::execv(c"/bin/sh".as_ptr(), argv.as_ptr());
        libc::_exit(127)
    }
}

/// Pid 1 of the new namespaces: private mounts and a `/proc` of its own, then `sh -c true`, directly (`arg` null) or
/// as the child of a minimal init that waits until the namespace is empty (`arg` a second stack of 64 KiB).
extern "C" fn namespace_pid1(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: runs while the parent thread is suspended (CLONE_VFORK) until the exec or exit; raw system-call
    // wrappers on NUL-terminated literals; errno, at most, is written in the parent's memory, and it reads none of it.
    unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        );
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        );
        if arg.is_null() {
            return exec_sh(arg);
        }
        // The init: the command on the second stack (this process is the one waiting on it, so nothing else runs
        // on that stack), then reap until no child is left.
        let stack = std::slice::from_raw_parts_mut(arg as *mut u8, 64 << 10);
        if clone_on(stack, exec_sh, SPAWN_FLAGS, std::ptr::null_mut()) < 0 {
            libc::_exit(126);
        }
        let mut status = 0;
        while libc::wait(&mut status) > 0 {}
        libc::_exit(0)
    }
}

/// `sh -c true` in a fresh PID and mount namespace with its own `/proc`, spawned as barely as the kernel allows: one
/// `clone`, two mounts, the `execve` — with `init`, under a minimal init (one more `clone`, and a wait until the
/// namespace is empty: the least a PID namespace's pid 1 must do when the command is not pid 1 itself, as under
/// shellward, whose init also forwards signals and reports the status). What the per-command containment costs the
/// kernel before shellward does anything. Panics where namespaces cannot be made (the row checks first).
pub(crate) fn contained(init: bool) {
    thread_local! {
        static STACKS: std::cell::RefCell<(Vec<u8>, Vec<u8>)> =
            std::cell::RefCell::new((vec![0; 64 << 10], vec![0; 64 << 10]));
    }
    STACKS.with_borrow_mut(|(stack, second)| {
        let arg = if init {
            second.as_mut_ptr() as *mut libc::c_void
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: `namespace_pid1` keeps to what a vfork child may do, and both stacks are this thread's, borrowed
        // for the whole call, while CLONE_VFORK keeps the thread suspended until pid 1 has exec'd or exited.
        let pid = unsafe {
            clone_on(
                stack,
                namespace_pid1,
                SPAWN_FLAGS | libc::CLONE_NEWPID | libc::CLONE_NEWNS,
                arg,
            )
        };
        assert!(pid > 0, "clone: {}", std::io::Error::last_os_error());
        let mut status = 0;
        // SAFETY: waits for the child just made.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status:#x}"
        );
    });
}

/// Whether this process can make PID and mount namespaces (root, or a kernel that allows it).
pub(crate) fn namespaces_available() -> bool {
    Command::new("unshare")
        .args(["--pid", "--fork", "--mount", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
