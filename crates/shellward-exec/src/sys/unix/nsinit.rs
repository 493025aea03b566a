//! Which program serves as a command's PID-namespace init, and the host's side of its protocol.
//!
//! The init itself (a minimal `tini`: private `/proc`, signal forwarding, reaping, the command's status on a report
//! pipe) is the `shellward-init` crate. A command's leader is started with `clone3(CLONE_NEWPID | CLONE_NEWNS)` and
//! execs an init program with `__shellward-init REPORT_FD PROGRAM_PATH -- ARGV0 ARGS…`. Candidates, in order:
//!
//! 1. [`ExecutorConfig::init_program`], when set;
//! 2. the static `shellward-init-static` embedded in this crate by its build script, run from a sealed, read-only
//!    `memfd` (`embedded_init.rs`): about 0.45 ms faster per start than a dynamically linked init, and available to
//!    every host without installing anything;
//! 3. when this process's `main` called [`init_main_if_requested`]: the `shellward-init` beside its executable, else
//!    the executable itself.
//!
//! A candidate the host refuses to run (a `noexec` memfd policy, a missing file) is dropped for the next; when none
//! is left commands run without a PID namespace.
//!
//! [`ExecutorConfig::init_program`]: crate::ExecutorConfig::init_program

use std::ffi::CString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::atomic::{AtomicBool, Ordering};

/// The first argument that puts a binary into init mode.
pub(crate) const INIT_ARG: &str = shellward_init::INIT_ARG;

/// Set when this process's `main` called [`init_main_if_requested`]: its own executable can then serve as the init.
static HOOK_INSTALLED: AtomicBool = AtomicBool::new(false);

/// Whether [`init_main_if_requested`] was called in this process.
pub(crate) fn hook_installed() -> bool {
    HOOK_INSTALLED.load(Ordering::Relaxed)
}

/// Runs the PID-namespace init when this process was started as one, and never returns then; otherwise returns at
/// once and records that this executable can serve as the init of command namespaces.
///
/// Call it first thing in `main`, before any thread is started: the `shellward` binary does. The executor needs it
/// only where its embedded static init cannot run (a build without it, a host that forbids executing a `memfd`);
/// without either, and without [`ExecutorConfig::init_program`], commands run without a PID namespace (the executor
/// logs it and [`Executor::pid_namespaces`] says so).
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
    // The init takes C arrays (it is also a program without a C library): build them from this process's own.
    let cstrings = |items: Vec<Vec<u8>>| -> Vec<CString> {
        items
            .into_iter()
            .map(|b| CString::new(b).unwrap_or_default())
            .collect()
    };
    let rest = cstrings(args.map(|a| a.into_vec()).collect());
    let env = cstrings(
        std::env::vars_os()
            .map(|(k, v)| {
                let mut kv = k.into_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                kv
            })
            .collect(),
    );
    let pointers = |items: &[CString]| -> Vec<*const u8> {
        items
            .iter()
            .map(|c| c.as_ptr().cast())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    let (argv, envp) = (pointers(&rest), pointers(&env));
    // SAFETY: both arrays are NULL-terminated arrays of NUL-terminated strings that outlive the call; this process is
    // the fresh single-threaded one the executor started as an init (it passed INIT_ARG, and `main` calls this first).
    let code = unsafe { shellward_init::run(argv.as_ptr(), envp.as_ptr()) };
    std::process::exit(code);
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
