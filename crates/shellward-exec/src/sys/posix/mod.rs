//! Process control on the Unix systems other than Linux (macOS, FreeBSD), with what POSIX gives, one room per
//! concern:
//!
//! - [`platform`]: the per-executor state and spawning a command's leader as the leader of a process group of its
//!   own (its terminal's session leader for a `tty` start);
//! - [`tree`]: one command's tree as the portable core asks about it — its process group, signalled whole, and the
//!   processes that left it, found by [`lineage`] through the system's process table ([`ps`]: libproc on macOS, the
//!   reaper's subtree on FreeBSD);
//! - [`streams`] (shared with Linux): its streams, pipes or a pseudo-terminal's master side ([`pty`], shared too);
//!   [`io`]: the wait for its leader (kqueue);
//! - [`spawn_env`] and [`files`] (shared with Linux): its environment, private files;
//! - [`watchdog`]: a `/bin/sh` process that kills the commands' groups if the executor dies.
//!
//! What these systems do not have here is said, never pretended: no PID namespaces, no cgroups, no per-command
//! system-call filter; on macOS writes and the network are confined by a Seatbelt profile ([`crate::seatbelt`],
//! applied with `sandbox-exec`), elsewhere a plan that confines them is refused, naming the platform. A process that leaves its group (`setsid`) is
//! followed on FreeBSD always (the executor is a reaper) and on macOS while an ancestor of it in the tree lives. This code is built for macOS and FreeBSD here and has not run on either; on Linux it is built for
//! its tests ([`tests`]), which run everything but the kqueue wait and Seatbelt.

// On Linux only the tests use it.
#![cfg_attr(target_os = "linux", allow(dead_code, unused_imports))]

// The files Linux shares, compiled here from `unix/` (on Linux, where this is built for its tests, `unix`'s own).
#[cfg(not(target_os = "linux"))]
#[path = "../unix/files.rs"]
pub(crate) mod files;
#[cfg(target_os = "linux")]
pub(crate) use super::unix::files;
mod io;
mod lineage;
mod platform;
// The process table, one file per system (see `lineage`).
#[cfg_attr(target_os = "macos", path = "ps_macos.rs")]
#[cfg_attr(target_os = "freebsd", path = "ps_freebsd.rs")]
#[cfg_attr(target_os = "linux", path = "ps_linux.rs")]
#[cfg_attr(
    not(any(target_os = "macos", target_os = "freebsd", target_os = "linux")),
    path = "ps_other.rs"
)]
mod ps;
// The reaper that keeps orphans in their tree: FreeBSD's `procctl`; none elsewhere.
#[cfg(not(target_os = "linux"))]
#[path = "../unix/pty.rs"]
mod pty;
#[cfg_attr(target_os = "freebsd", path = "reaper_freebsd.rs")]
#[cfg_attr(not(target_os = "freebsd"), path = "reaper_none.rs")]
mod reaper;
#[cfg(target_os = "linux")]
use super::unix::pty;
#[cfg(not(target_os = "linux"))]
#[path = "../unix/spawn_env.rs"]
mod spawn_env;
#[cfg(target_os = "linux")]
use super::unix::spawn_env;
mod tree;
mod watchdog;

#[cfg(not(target_os = "linux"))]
#[path = "../unix/streams.rs"]
mod streams;
#[cfg(target_os = "linux")]
use super::unix::streams;

pub(crate) use io::wait_leader;
pub(crate) use streams::{InputSink, Stream, is_input_gone, pipe_reader, read_terminal};

/// Which stdin a tree's processes read is not looked up here (no `/proc`): unknown.
pub(crate) fn input_identity(_fd: std::os::fd::RawFd, _terminal: bool) -> Option<(u64, u64)> {
    None
}
pub(crate) use platform::{Leader, Platform};
pub(crate) use spawn_env::{BaseEnv, SpawnEnv};
pub(crate) use tree::Tree;

/// There is no cgroup `pids` hierarchy here.
pub(crate) fn own_pids_dir() -> Option<std::path::PathBuf> {
    None
}

/// No sandbox covers the log root here: no skeleton of it is kept.
pub(crate) fn log_skeleton(
    _own: &std::path::Path,
) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    None
}

/// No Landlock here: 0.
pub(crate) fn landlock_abi() -> i32 {
    0
}

/// Returns at once: there is no PID-namespace init to run here (the call exists so a host's `main` reads the same on
/// every platform).
pub fn init_main_if_requested() {}

#[cfg(test)]
mod tests;
