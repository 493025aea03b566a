//! The init of a command's PID namespace: a minimal `tini` that forwards signals to the tree and reaps it.
//!
//! When the host allows it, a command's leader is started with `clone3(CLONE_NEWPID | CLONE_NEWNS)` and execs an
//! *init program* (the `shellward` binary, the `shellward-init` binary of this crate, or any host binary that calls
//! [`init_main_if_requested`] first thing in `main`) with the arguments
//! `__shellward-init REPORT_FD PROGRAM_PATH -- ARGV0 ARGS…`. As pid 1 of the new namespace it:
//!
//! 1. makes its mounts private and mounts a fresh `/proc`, so `ps` inside shows the namespace only (on failure the
//!    host's `/proc` stays visible; nothing else depends on it);
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

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};

/// The first argument that puts a binary into init mode.
pub(crate) const INIT_ARG: &str = "__shellward-init";

/// Set when this process's `main` called [`init_main_if_requested`]: its own executable can then serve as the init.
static HOOK_INSTALLED: AtomicBool = AtomicBool::new(false);

/// Whether [`init_main_if_requested`] was called in this process.
pub(crate) fn hook_installed() -> bool {
    HOOK_INSTALLED.load(Ordering::Relaxed)
}

/// Runs the PID-namespace init when this process was started as one, and never returns then; otherwise returns at
/// once and records that this executable can serve as the init of command namespaces.
///
/// Call it first thing in `main`, before any thread is started: the `shellward` binary does. Hosts that embed the
/// executor without calling it get namespaces only when [`ExecutorConfig::init_program`] names an init (the
/// `shellward-init` binary of this crate); otherwise commands run without a PID namespace (the executor logs it and
/// [`Executor::pid_namespaces`] says so).
///
/// [`ExecutorConfig::init_program`]: crate::ExecutorConfig::init_program
/// [`Executor::pid_namespaces`]: crate::Executor::pid_namespaces
pub fn init_main_if_requested() {
    let mut args = std::env::args_os();
    let _self = args.next();
    if args.next().as_deref() != Some(std::ffi::OsStr::new(INIT_ARG)) {
        HOOK_INSTALLED.store(true, Ordering::Relaxed);
        return;
    }
    let rest: Vec<OsString> = args.collect();
    let code = run(&rest);
    std::process::exit(code);
}

fn say(message: &str) {
    let line = format!("shellward-init: {message}\n");
    // SAFETY: writing a buffer we own to stderr.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
    }
}

fn cstr(s: &std::ffi::OsStr) -> Option<CString> {
    CString::new(s.as_bytes()).ok()
}

/// The init proper; returns the exit code.
fn run(args: &[OsString]) -> i32 {
    // REPORT_FD PROGRAM_PATH -- ARGV0 ARGS…
    let report: i32 = match args
        .first()
        .and_then(|a| a.to_str())
        .and_then(|a| a.parse().ok())
    {
        Some(fd) => fd,
        None => {
            say(
                "usage: __shellward-init REPORT_FD PROGRAM_PATH -- ARGV0 [ARGS…] (started by shellward only)",
            );
            return 2;
        }
    };
    let (Some(path), Some(sep)) = (args.get(1), args.get(2)) else {
        say("missing PROGRAM_PATH -- ARGV0");
        return 2;
    };
    if sep != "--" || args.len() < 4 {
        say("missing -- ARGV0 after PROGRAM_PATH");
        return 2;
    }
    let Some(path) = cstr(path) else {
        say("the program path holds a NUL byte");
        return 127;
    };
    let argv: Option<Vec<CString>> = args[3..].iter().map(|a| cstr(a)).collect();
    let Some(argv) = argv else {
        say("an argument holds a NUL byte");
        return 127;
    };
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());

    // SAFETY: this process is single-threaded (init mode runs before anything else in `main`); every call below is a
    // plain syscall wrapper on buffers that outlive it.
    unsafe {
        libc::fcntl(report, libc::F_SETFD, libc::FD_CLOEXEC);
        // Private mounts, then a /proc of this namespace (only when pid 1 of a new namespace).
        if libc::getpid() == 1 {
            let none = c"none";
            let root = c"/";
            if libc::mount(
                none.as_ptr(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) == 0
            {
                let proc_ = c"proc";
                let target = c"/proc";
                libc::mount(
                    proc_.as_ptr(),
                    target.as_ptr(),
                    proc_.as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                );
            }
        }
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigprocmask(libc::SIG_SETMASK, &all, &mut old);

        let child = libc::fork();
        if child < 0 {
            say(&format!(
                "cannot fork the command: {}",
                std::io::Error::last_os_error()
            ));
            return 127;
        }
        if child == 0 {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::execv(path.as_ptr(), argv_ptrs.as_ptr());
            let e = std::io::Error::last_os_error();
            say(&format!("cannot run {}: {e}", path.to_string_lossy()));
            libc::_exit(127);
        }

        // The init never writes to the command's streams again: closing its copies lets the command's output end
        // when the command's own last process closes it, not when the namespace is torn down after the init exits.
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
        let mut status: Option<i32> = None;
        loop {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let sig = libc::sigwaitinfo(&all, &mut info);
            if sig < 0 {
                continue;
            }
            if sig != libc::SIGCHLD {
                // A signal the terminal generated (Ctrl-C, a resize, a hang-up) was delivered by the kernel to the
                // terminal's foreground group already — possibly a job the command's shell put there; forwarding it
                // to everything would interrupt the shell too. Others (the host's TERM, INT, HUP) are forwarded to
                // every process of the namespace (never to this init).
                if info.si_code != libc::SI_KERNEL {
                    libc::kill(-1, sig);
                }
                continue;
            }
            let mut empty = false;
            loop {
                let mut st = 0;
                let pid = libc::waitpid(-1, &mut st, libc::WNOHANG);
                if pid == child {
                    status = Some(st);
                    // The command's end is the host's to know now, even if processes it left live on.
                    let buf = st.to_le_bytes();
                    libc::write(report, buf.as_ptr().cast(), buf.len());
                } else if pid < 0 {
                    empty = *libc::__errno_location() == libc::ECHILD;
                    break;
                } else if pid == 0 {
                    break;
                }
            }
            // No child left: every process of the namespace descends from this init, so it is empty.
            if empty && let Some(st) = status {
                return if libc::WIFEXITED(st) {
                    libc::WEXITSTATUS(st)
                } else if libc::WIFSIGNALED(st) {
                    128 + libc::WTERMSIG(st)
                } else {
                    1
                };
            }
        }
    }
}

/// Reads an init's report (the command's wait status), if it wrote one; never blocks.
pub(crate) fn read_report(fd: &std::os::fd::OwnedFd) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let mut buf = [0u8; 4];
    // SAFETY: fcntl and read on a descriptor we own, into a buffer we own.
    let n = unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
    };
    (n == 4).then(|| i32::from_le_bytes(buf))
}
