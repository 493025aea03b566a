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

use std::io;
use std::path::PathBuf;
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

/// A program that can serve as pid 1 of a session's sandbox.
#[derive(Clone, Debug)]
pub(crate) enum InitProgram {
    /// A binary on disk (configured, beside the executable, or the executable itself).
    File(PathBuf),
    /// The static init embedded in this crate, in a sealed memfd.
    Embedded(super::embedded_init::EmbeddedInit),
}

impl InitProgram {
    /// The path the child execs.
    pub(crate) fn path(&self) -> &std::path::Path {
        match self {
            InitProgram::File(p) => p,
            InitProgram::Embedded(e) => e.path(),
        }
    }

    /// The `argv[0]` the init gets: its path, or for the embedded init a name (`ps` would show `/proc/self/fd/N`).
    pub(crate) fn argv0(&self) -> &std::ffi::OsStr {
        match self {
            InitProgram::File(p) => p.as_os_str(),
            InitProgram::Embedded(_) => std::ffi::OsStr::new("shellward-init"),
        }
    }

    /// Whether `self` and `other` are the same candidate.
    pub(crate) fn same(&self, other: &InitProgram) -> bool {
        self.path() == other.path()
    }
}

impl std::fmt::Display for InitProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InitProgram::File(p) => write!(f, "{}", p.display()),
            InitProgram::Embedded(_) => f.write_str("the embedded static init (memfd)"),
        }
    }
}

/// The init candidates for `config`, best first (the order `nsinit` documents).
pub(crate) fn init_candidates(config: &crate::ExecutorConfig) -> Vec<InitProgram> {
    let mut candidates = Vec::new();
    if let Some(program) = &config.init_program {
        candidates.push(InitProgram::File(program.clone()));
    }
    match super::embedded_init::load() {
        Ok(Some(embedded)) => candidates.push(InitProgram::Embedded(embedded)),
        Ok(None) => {}
        Err(e) => tracing::info!("{e}; using a dynamically linked init"),
    }
    if hook_installed()
        && let Ok(exe) = std::env::current_exe()
    {
        if let Some(small) = small_init_beside(&exe) {
            candidates.push(InitProgram::File(small));
        }
        candidates.push(InitProgram::File(exe));
    }
    candidates
}

/// Whether a spawn under an init failed because of the init or the namespace (so the next candidate, or no namespace,
/// may work), not because of the command.
pub(crate) fn init_refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::EPERM
                | libc::EINVAL
                | libc::ENOSPC
                | libc::EUSERS
                | libc::ENOENT
                | libc::EACCES
                | libc::ENOEXEC
                | libc::ETXTBSY
        )
    )
}

/// This crate's `shellward-init` binary in the same directory as `exe`, when it is there and executable: a small
/// program starts in about half the time of a large host binary (fewer pages and relocations). As trustworthy as
/// `exe` itself (same directory, installed together).
fn small_init_beside(exe: &std::path::Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let init = exe.parent()?.join("shellward-init");
    let meta = std::fs::metadata(&init).ok()?;
    (meta.is_file() && meta.permissions().mode() & 0o111 != 0 && init != exe).then_some(init)
}
