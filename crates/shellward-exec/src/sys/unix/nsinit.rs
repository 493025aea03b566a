//! Which program serves as pid 1 of a session's sandbox (its PID namespace), and the hook that runs it.
//!
//! The program itself (reaps, holds the namespace) is the `shellward-init` crate's session mode; `session` starts it
//! with `clone3(CLONE_NEWPID | CLONE_NEWNS)` and `__shellward-session`. Candidates, in order:
//!
//! 1. [`ExecutorConfig::init_program`], when set;
//! 2. the static `shellward-init-static` embedded in this crate by its build script, run from a sealed, read-only
//!    `memfd` (`embedded_init.rs`): available to every host without installing anything;
//! 3. when this process's `main` called [`init_main_if_requested`]: the `shellward-init` beside its executable, else
//!    the executable itself.
//!
//! A candidate the host refuses to run (a `noexec` memfd policy, a missing file) is dropped for the next; when none
//! is left commands run without a PID namespace.
//!
//! [`ExecutorConfig::init_program`]: crate::ExecutorConfig::init_program

use std::sync::atomic::{AtomicBool, Ordering};

/// Set when this process's `main` called [`init_main_if_requested`]: its own executable can then serve as the init.
static HOOK_INSTALLED: AtomicBool = AtomicBool::new(false);

/// Whether [`init_main_if_requested`] was called in this process.
pub(crate) fn hook_installed() -> bool {
    HOOK_INSTALLED.load(Ordering::Relaxed)
}

/// Runs pid 1 of a session's sandbox when this process was started as one, and never returns then; otherwise returns
/// at once and records that this executable can serve as that program.
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
    let first = args.next();
    if first.as_deref() == Some(std::ffi::OsStr::new(shellward_init::SESSION_ARG)) {
        // SAFETY: the fresh single-threaded process the executor started as a session's init (`main` calls this
        // first, before any thread).
        let code = unsafe { shellward_init::session() };
        std::process::exit(code);
    }
    HOOK_INSTALLED.store(true, Ordering::Relaxed);
}
