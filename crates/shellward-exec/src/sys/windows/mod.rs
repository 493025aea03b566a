//! Windows process control, one part per concern:
//!
//! - [`job`]: a job object per command: every process the command starts is in it (children inherit the job), it is
//!   killed whole with `TerminateJobObject`, and it kills what is left when the executor's handle closes (the
//!   executor exiting or being killed included), so no watchdog is needed;
//! - [`platform`]: the per-executor state and spawning one command's leader (suspended, put in its job, then
//!   resumed, so nothing it starts can run outside the job);
//! - [`tree`]: one command's tree as the portable core asks about it (members, liveness, terminate, kill);
//! - [`io`]: its streams (pipes read and written on threads of their own, bridged to the runtime);
//! - [`spawn_env`]: its environment, with Windows' case-insensitive names; [`files`]: private files.
//!
//! What Windows does not have here is said, never pretended: no PID namespaces, no cgroups, no per-command write or
//! network confinement (a plan that asks for a network other than the host's is refused), no system-call filter, no
//! pseudo-terminal yet (a `tty` start is refused).

pub(crate) mod files;
mod io;
mod job;
mod platform;
mod spawn_env;
mod tree;

pub(crate) use io::{InputSink, Stream, is_input_gone, pipe_reader, read_terminal, wait_leader};
pub(crate) use platform::{Leader, Platform};

pub(crate) use super::absent::{landlock_abi, log_skeleton, own_pids_dir, unix_socket_broker};
pub(crate) use spawn_env::{BaseEnv, SpawnEnv};
pub(crate) use tree::Tree;

/// Windows processes are not ended by numbered signals: `None`.
pub(crate) fn signal_name(_n: i32) -> Option<&'static str> {
    None
}

/// Windows processes are not ended by numbered signals: `None`.
pub(crate) fn signal_number(_name: &str) -> Option<i32> {
    None
}

/// Returns at once: on Windows there is no PID-namespace init to run (the call exists so a host's `main` reads the
/// same on every platform).
pub fn init_main_if_requested() {}
