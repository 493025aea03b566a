//! Windows: console events stand for signals (`Ctrl-C` for SIGINT, `Ctrl-Break` for SIGTERM, the console closing
//! for SIGHUP's hang-up); there is no SIGHUP reload (policies reload on file changes), no terminal echo to turn off
//! (no `tty` runs), and no unix sockets.

use anyhow::{Result, bail};
use shellward::Shellward;
use std::path::Path;
use tokio::signal::windows::{CtrlBreak, CtrlC, CtrlClose, ctrl_break, ctrl_c, ctrl_close};

/// The console events that stop `run`, watched from its first moment.
pub struct Interrupts {
    c: CtrlC,
    brk: CtrlBreak,
    close: CtrlClose,
}

impl Interrupts {
    /// Starts watching.
    pub fn new() -> Result<Interrupts> {
        Ok(Interrupts {
            c: ctrl_c()?,
            brk: ctrl_break()?,
            close: ctrl_close()?,
        })
    }

    /// The next event, as the number of the Unix signal it stands for (2, 15, 1).
    pub async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.c.recv() => 2,
            _ = self.brk.recv() => 15,
            _ = self.close.recv() => 1,
        }
    }

    /// An event that has already arrived, without waiting.
    pub async fn pending(&mut self) -> Option<i32> {
        tokio::select! {
            biased;
            sig = self.recv() => Some(sig),
            _ = std::future::ready(()) => None,
        }
    }
}

/// Nothing to turn off: there are no `tty` runs on Windows.
pub struct EchoOff;

impl EchoOff {
    /// Always `None`.
    pub fn new() -> Option<EchoOff> {
        None
    }
}

/// Resolves on `Ctrl-C`, `Ctrl-Break` or the console closing.
pub async fn terminate_signal() {
    match StopSignals::new() {
        Ok(mut s) => s.recv().await,
        Err(_) => std::future::pending().await,
    }
}

/// The stop events of `serve` (`Ctrl-C`, `Ctrl-Break`, the console closing), watched from before the first
/// connection.
pub struct StopSignals {
    c: CtrlC,
    brk: CtrlBreak,
    close: CtrlClose,
}

impl StopSignals {
    /// Starts watching.
    pub fn new() -> std::io::Result<StopSignals> {
        Ok(StopSignals {
            c: ctrl_c()?,
            brk: ctrl_break()?,
            close: ctrl_close()?,
        })
    }

    /// The next stop event.
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.c.recv() => {}
            _ = self.brk.recv() => {}
            _ = self.close.recv() => {}
        }
    }
}

/// There is no SIGHUP on Windows: policies reload on file changes only.
pub fn reload_on_hangup(_sw: &Shellward) {
    tracing::debug!("no SIGHUP on Windows; policies reload on file changes");
}

/// Unix sockets are not served on Windows.
pub fn bind_unix(path: &Path, _mode: u32) -> Result<tokio::net::TcpListener> {
    bail!(
        "cannot listen on unix:{}: unix sockets are not served on Windows; listen on a TCP address such as \
         127.0.0.1:8080 (with a token for anything but loopback)",
        path.display()
    )
}

/// Windows has no SIGPIPE: a write to a closed pipe fails with an error that `main` ends the process on quietly.
pub fn closed_stdout_ends_quietly() {}

/// Creates `dir` and its missing parents (they inherit the parent's access list).
pub fn create_config_dirs(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Windows: a new file inherits its directory's access list; nothing to set here.
pub fn owner_only(_options: &mut std::fs::OpenOptions) {}
