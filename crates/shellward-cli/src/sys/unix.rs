//! Unix: SIGINT/SIGTERM/SIGHUP, SIGPIPE for the commands that only print, `termios` echo, unix sockets.

use anyhow::{Context, Result, bail};
use shellward::Shellward;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use tokio::signal::unix::{SignalKind, signal};

/// The signals that stop `run`, watched from its first moment: one that arrives while policies load or the command
/// starts is held and acted on as soon as the command is tracked (before this, the default action would end shellward
/// at once and leave the tree to the watchdog).
pub struct Interrupts {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Interrupts {
    pub fn new() -> Result<Interrupts> {
        Ok(Interrupts {
            int: signal(SignalKind::interrupt()).context("cannot watch SIGINT")?,
            term: signal(SignalKind::terminate()).context("cannot watch SIGTERM")?,
            hup: signal(SignalKind::hangup()).context("cannot watch SIGHUP")?,
        })
    }

    /// The next signal's number.
    pub async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.int.recv() => 2,
            _ = self.term.recv() => 15,
            _ = self.hup.recv() => 1,
        }
    }

    /// A signal that has already arrived, without waiting.
    pub async fn pending(&mut self) -> Option<i32> {
        tokio::select! {
            biased;
            sig = self.recv() => Some(sig),
            _ = std::future::ready(()) => None,
        }
    }
}

/// Turns off the local terminal's echo while it lives (only when stdin is a terminal).
pub struct EchoOff {
    saved: libc::termios,
}

impl EchoOff {
    pub fn new() -> Option<EchoOff> {
        // SAFETY: tcgetattr/tcsetattr on fd 0 with termios structures owned here; nothing happens when fd 0 is not
        // a terminal (tcgetattr fails).
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut t) != 0 {
                return None;
            }
            let saved = t;
            t.c_lflag &= !(libc::ECHO | libc::ECHONL);
            (libc::tcsetattr(0, libc::TCSANOW, &t) == 0).then_some(EchoOff { saved })
        }
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        // SAFETY: restores the attributes read in `new` on the same descriptor.
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &self.saved);
        }
    }
}

/// Resolves on SIGTERM or SIGINT (SIGHUP reloads the policies instead).
pub async fn terminate_signal() {
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// The stop signals (SIGTERM, SIGINT) of `serve`, watched from before the first connection. SIGHUP reloads the
/// policies.
pub struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Starts watching.
    pub fn new() -> std::io::Result<StopSignals> {
        Ok(StopSignals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next stop signal.
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// Reloads the policy chain on every SIGHUP (each logged), from now on: a SIGHUP must never find the default action
/// (exit). Needs a Tokio runtime.
pub fn reload_on_hangup(sw: &Shellward) {
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot watch SIGHUP ({e}); policies reload on file changes only");
            return;
        }
    };
    let sw = sw.clone();
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            let sw = sw.clone();
            let _ =
                tokio::task::spawn_blocking(move || sw.policies().reload_logged("SIGHUP")).await;
        }
    });
}

/// This process's effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Binds a unix socket at `path` with permissions `mode`, never exposing it with wider ones: it is bound in a
/// private (0700) directory beside the target, given its mode, then renamed into place. What is already at `path`
/// is replaced only if it is a socket nobody listens on (a stale one); anything else is an error.
pub fn bind_unix(path: &Path, mode: u32) -> Result<tokio::net::UnixListener> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                bail!(
                    "{} is in use: another server listens there; stop it or choose another path",
                    path.display()
                );
            }
            std::fs::remove_file(path)
                .with_context(|| format!("cannot remove the stale socket {}", path.display()))?;
        }
        Ok(_) => bail!(
            "{} exists and is not a socket; refusing to replace it. Remove it yourself or choose another path",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot inspect {}", path.display())),
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let private = tempfile::Builder::new()
        .prefix(".shellward-sock-")
        .tempdir_in(parent)
        .with_context(|| format!("cannot create a private directory in {}", parent.display()))?;
    let staged = private.path().join("s");
    let listener = std::os::unix::net::UnixListener::bind(&staged)
        .with_context(|| format!("cannot listen on unix socket {}", path.display()))?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot set the mode of {}", path.display()))?;
    std::fs::rename(&staged, path)
        .with_context(|| format!("cannot move the socket into place at {}", path.display()))?;
    listener.set_nonblocking(true)?;
    Ok(tokio::net::UnixListener::from_std(listener)?)
}

/// A write to a closed standard output ends the process quietly, as it ends `cat` or `ls` (the shell sees status 141),
/// instead of failing with EPIPE: Rust starts with SIGPIPE ignored, so `println!` panicked and a checked write printed
/// "Broken pipe". For the commands that only print; `run`, `mcp` and `serve` keep SIGPIPE ignored (a client or reader
/// going away must not kill the supervisor of running commands) and handle EPIPE where they write.
pub fn closed_stdout_ends_quietly() {
    // SAFETY: `signal` with `SIG_DFL` only resets a disposition; it is called from `main` before any thread this
    // process starts, and no handler of ours is replaced.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Creates `dir` and its missing parents, each `rwxr-xr-x` (a configuration directory others may read; the file in it
/// is the private part).
pub fn create_config_dirs(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
}

/// Makes a file `options` creates readable and writable by its owner only (`rw-------`): it may hold a token.
pub fn owner_only(options: &mut std::fs::OpenOptions) {
    use std::os::unix::fs::OpenOptionsExt;
    options.mode(0o600);
}
