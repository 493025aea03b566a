//! Process control on the Unix systems other than Linux (macOS, FreeBSD), with what POSIX gives, one part per
//! concern:
//!
//! - [`platform`]: the per-executor state and spawning a command's leader as the leader of a process group of its
//!   own (its terminal's session leader for a `tty` start);
//! - [`tree`]: one command's tree as the portable core asks about it — its process group, signalled whole, and the
//!   processes that left it, found by [`lineage`] through the system's process table ([`ps`]: libproc on macOS, the
//!   reaper's subtree on FreeBSD);
//! - `streams` (`sys/unix`, shared with Linux): its streams, pipes or a pseudo-terminal's master side (`pty`, shared too);
//!   [`io`]: the wait for its leader (kqueue);
//! - `spawn_env` and `files` (`sys/unix`, shared with Linux): its environment, private files;
//! - [`watchdog`]: a `/bin/sh` process that kills the commands' groups if the executor dies.
//!
//! What these systems do not have here is said, never pretended: no PID namespaces, no cgroups, no per-command
//! system-call filter; on macOS writes and the network are confined by a Seatbelt profile ([`crate::seatbelt`],
//! applied with `sandbox-exec`), elsewhere a plan that confines them is refused, naming the platform. A process that leaves its group (`setsid`) is
//! followed on FreeBSD always (the executor is a reaper) and on macOS while an ancestor of it in the tree lives. This code is built for macOS and FreeBSD here and has not run on either; on Linux it is built for
//! its tests ([`tests`]), which run everything but the kqueue wait and Seatbelt.

// On Linux only the tests use it.
#![cfg_attr(target_os = "linux", allow(dead_code, unused_imports))]

pub(crate) use super::unix::{files, pty, spawn_env, streams};
mod io;
mod lineage;
mod platform;
// The process table, one file per system (see `lineage`): libproc on macOS, the reaper's subtree on FreeBSD, `/proc`
// for Linux's build of this code for its tests, nothing elsewhere.
#[cfg(target_os = "freebsd")]
mod ps_freebsd;
#[cfg(target_os = "linux")]
mod ps_linux;
#[cfg(target_os = "macos")]
mod ps_macos;
#[cfg(not(any(target_os = "macos", target_os = "freebsd", target_os = "linux")))]
mod ps_other;
#[cfg(target_os = "freebsd")]
use ps_freebsd as ps;
#[cfg(target_os = "linux")]
use ps_linux as ps;
#[cfg(target_os = "macos")]
use ps_macos as ps;
#[cfg(not(any(target_os = "macos", target_os = "freebsd", target_os = "linux")))]
use ps_other as ps;
// The reaper that keeps orphans in their tree: FreeBSD's `procctl`; none elsewhere.
#[cfg(target_os = "freebsd")]
mod reaper_freebsd;
#[cfg(not(target_os = "freebsd"))]
mod reaper_none;
#[cfg(target_os = "freebsd")]
use reaper_freebsd as reaper;
#[cfg(not(target_os = "freebsd"))]
use reaper_none as reaper;
mod tree;
mod watchdog;

pub(crate) use io::wait_leader;
pub(crate) use streams::{InputSink, Stream, is_input_gone, pipe_reader, read_terminal};

/// Which stdin a tree's processes read is not looked up here (no `/proc`): unknown.
pub(crate) fn input_identity(_fd: std::os::fd::RawFd, _terminal: bool) -> Option<(u64, u64)> {
    None
}
pub(crate) use platform::{Leader, Platform};
pub(crate) use spawn_env::{BaseEnv, SpawnEnv};
pub(crate) use tree::Tree;

#[cfg(not(target_os = "linux"))]
pub(crate) use super::absent::{landlock_abi, log_skeleton, own_pids_dir, unix_socket_broker};

/// Returns at once: there is no PID-namespace init to run here (the call exists so a host's `main` reads the same on
/// every platform).
pub fn init_main_if_requested() {}

#[cfg(test)]
mod tests;
