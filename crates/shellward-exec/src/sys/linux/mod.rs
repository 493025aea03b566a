//! Linux process control, one part per concern (the POSIX parts it shares with macOS and FreeBSD are in `sys/unix`):
//!
//! - [`platform`]: the per-executor state — containment choice, the spawner thread every fork happens on, the
//!   watchdog — and spawning a leader with its pipes;
//! - [`tree`]: one command's process tree — membership, liveness, signalling that never leaves the tree;
//! - [`pidfd`]: pidfds and signals sent only to a process whose identity was just proven;
//! - [`watchdog`]: the helper that kills what the executor started if the executor itself is killed;
//! - [`pipes`]: output pipes and blocking waits for a child;
//! - [`nsinit`]: which program is pid 1 of a session's sandbox (the program itself is the `shellward-init` crate), and
//!   the hook that runs it; [`embedded_init`]: the static init built into this crate, run from a sealed memfd;
//! - [`limits`]: per-command process-count groups (cgroup v1 `pids`) and `RLIMIT_*`;
//! - [`child_setup`]: what a command's first process does to itself before exec (read-only mounts, capabilities,
//!   `no_new_privs`) so the supervisor is out of its reach; [`host_mounts`]: the sandbox's pins of the host files'
//!   ancestors and its view of the logs (its session's own only);
//! - [`cgroup`], [`fast_spawn`], [`procfs`]: cgroup v2, the `clone3` spawn path, the `/proc` process table;
//! - [`session`]: one sandbox (PID and mount namespace) per session, which its commands start in;
//! - [`overlay`]: a preview's copy-on-write view of the writable paths and the change set read from it;
//! - [`spawn_env`]: a command's environment, the executor's base prepared once;
//! - [`stale`]: removing what executors that died left in the cgroup hierarchies;
//! - [`io`]: the leader's exit; the streams, terminals, environment and private files are `sys/unix`'s.

pub(crate) mod cgroup;
pub(crate) mod child_setup;
mod embedded_init;
mod fast_spawn;
mod host_mounts;
mod io;
pub(crate) mod landlock;
pub(crate) mod limits;
mod mount_calls;
mod notify_filter;
pub(crate) mod nsinit;
pub(crate) mod overlay;
pub(crate) mod pidfd;
pub(crate) mod pipes;
mod platform;
pub(crate) mod procfs;
pub(crate) mod proxy_fd;
pub(crate) mod record;
pub(crate) mod seccomp;
mod session;
mod spawn_job;
mod stale;
mod started;
mod tree;
pub(crate) mod unix_broker;
mod watchdog;
mod write_watch;

pub(crate) use super::ContainmentKind;
pub(crate) use super::unix::{files, pty, spawn_env, streams};
pub(crate) use host_mounts::skeleton_of as log_skeleton;
pub(crate) use io::wait_leader;
pub(crate) use limits::own_pids_dir;
pub use nsinit::init_main_if_requested;
pub(crate) use platform::Platform;
pub(crate) use spawn_env::{BaseEnv, SpawnEnv};
pub(crate) use started::Leader;
pub(crate) use streams::{InputSink, Stream, is_input_gone, pipe_reader, read_terminal};
pub(crate) use tree::Tree;

/// The variable marking every process of a tree (`SHELLWARD_TREE=<token>/<id>`), inherited through `setsid` and
/// double forks.
pub(crate) const TREE_VAR: &str = "SHELLWARD_TREE";
/// The variable marking watchdogs (`SHELLWARD_WATCHDOG=1`), which belong to no tree: a process hosting several
/// executors has several.
pub(crate) const WATCHDOG_VAR: &str = "SHELLWARD_WATCHDOG";

/// The `(device, inode)` the processes reading `fd` see as their stdin (see `procfs::input_identity`).
pub(crate) fn input_identity(fd: std::os::fd::RawFd, terminal: bool) -> Option<(u64, u64)> {
    procfs::input_identity(fd, terminal)
}

/// The Landlock ABI version of the running kernel (0: none).
/// Whether commands without the host's network can have Unix sockets of their own (see
/// `Executor::unix_socket_broker`).
pub(crate) fn unix_socket_broker() -> bool {
    unix_broker::available()
}

pub(crate) fn landlock_abi() -> i32 {
    landlock::kernel_abi()
}
