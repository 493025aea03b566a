//! Platform-specific process control, one module per platform behind the same crate-internal interface:
//!
//! - `Platform` (per executor: containment, spawning), `SpawnSpec`, `Leader`, `Tree` (one command's process tree:
//!   membership, liveness, terminate and kill), `BaseEnv`/`SpawnEnv` (the commands' environment);
//! - streams: `Stream` (the host's end of a command's standard stream), `pipe_reader`, `InputSink`, `read_terminal`,
//!   `wait_leader`;
//! - `files`: the executor's private directories and files;
//! - `signal_name`/`signal_number`, `landlock_abi`, `own_pids_dir`, `init_main_if_requested`, `log_skeleton` (what a sandbox shows of
//!   the log root).
//!
//! Linux is `linux/`; the other Unix systems (macOS, FreeBSD: process groups, kqueue, Seatbelt on macOS) are `bsd/`;
//! what every Unix shares (streams, terminals, the environment, private files) is `unix/`; Windows (job objects) is
//! `windows/`.

#[cfg(not(target_os = "linux"))]
mod absent;
pub(crate) mod leader_reap;
#[cfg(unix)]
pub(crate) mod unix;

#[cfg(target_os = "linux")]
pub(crate) mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::{
    BaseEnv, InputSink, Leader, Platform, SpawnEnv, Stream, Tree, files, input_identity,
    is_input_gone, landlock_abi, log_skeleton, own_pids_dir, pipe_reader, read_terminal,
    unix_socket_broker, wait_leader,
};

#[cfg(target_os = "linux")]
pub use linux::init_main_if_requested;

#[cfg(all(unix, not(target_os = "linux")))]
pub(crate) mod bsd;
// On Linux the macOS/FreeBSD platform is built for its tests alone: the suite runs the code macOS and FreeBSD run
// (all but the kqueue wait and Seatbelt).
#[cfg(all(test, target_os = "linux"))]
pub(crate) mod bsd;
#[cfg(all(unix, not(target_os = "linux")))]
pub use bsd::init_main_if_requested;
#[cfg(all(unix, not(target_os = "linux")))]
pub(crate) use bsd::{
    BaseEnv, InputSink, Leader, Platform, SpawnEnv, Stream, Tree, files, input_identity,
    is_input_gone, landlock_abi, log_skeleton, own_pids_dir, pipe_reader, read_terminal,
    unix_socket_broker, wait_leader,
};

#[cfg(windows)]
pub(crate) mod windows;
#[cfg(windows)]
pub use windows::init_main_if_requested;
#[cfg(windows)]
pub(crate) use windows::{
    BaseEnv, InputSink, Leader, Platform, SpawnEnv, Stream, Tree, files, is_input_gone,
    landlock_abi, log_skeleton, own_pids_dir, pipe_reader, read_terminal, signal_name,
    signal_number, unix_socket_broker, wait_leader,
};

/// The name of signal `n` (`SIGKILL`), when this platform names it.
#[cfg(unix)]
pub(crate) fn signal_name(n: i32) -> Option<&'static str> {
    nix::sys::signal::Signal::try_from(n)
        .ok()
        .map(|s| s.as_str())
}

/// The number of the signal named `name` (`SIGTERM`), when this platform knows it.
#[cfg(unix)]
pub(crate) fn signal_number(name: &str) -> Option<i32> {
    name.parse::<nix::sys::signal::Signal>()
        .ok()
        .map(|s| s as i32)
}

/// What to spawn: the same on every platform (each says what it cannot give when it spawns).
pub(crate) struct SpawnSpec {
    /// The program (looked up on the environment's `PATH`).
    pub(crate) program: std::ffi::OsString,
    /// Its arguments; the last is the command.
    pub(crate) args: Vec<std::ffi::OsString>,
    /// Working directory.
    pub(crate) workdir: std::path::PathBuf,
    /// The *complete* environment (nothing of the executor's own is added).
    pub(crate) env: SpawnEnv,
    /// Capture stderr on a pipe of its own.
    pub(crate) separate_stderr: bool,
    /// The tree's name (its process id, `p7`), for its cgroup and marker where there are any.
    pub(crate) name: String,
    /// Standard input: the null device, a pipe, or a pseudo-terminal (which then also takes stdout and stderr).
    pub(crate) stdin: crate::StdinMode,
    /// The session: on Linux its commands share one sandbox.
    pub(crate) session: Option<String>,
    /// The directory of the session's logs: on Linux the one log directory its sandbox shows.
    pub(crate) log_dir: std::path::PathBuf,
    /// Where it may write and what network it reaches.
    pub(crate) confinement: crate::plan::Confinement,
    /// A preview's copy-on-write layers: the command runs in a sandbox of its own with them over its writable paths.
    #[cfg(target_os = "linux")]
    pub(crate) preview: Option<std::sync::Arc<linux::overlay::PreviewLayers>>,
}

/// A spawned leader and the host's ends of its streams, the same on every platform: `L` is the platform's leader, `T`
/// its tree, `F` its stream handle and `S` its socket (each platform names it as `Spawned`).
pub(crate) struct Spawned<L, T, F, S> {
    pub(crate) leader: L,
    /// The output: a pipe, or the terminal's master side (see `terminal`).
    pub(crate) stdout: F,
    pub(crate) stderr: Option<F>,
    /// Where input is written: a pipe's write end, or the terminal's master side (`None`: stdin is the null device).
    pub(crate) stdin: Option<F>,
    /// The command runs on a pseudo-terminal (`stdout` and `stdin` are its master side; never on Windows yet).
    pub(crate) terminal: bool,
    pub(crate) tree: T,
    /// The command's writes are confined (Linux: a Landlock ruleset was applied; macOS: a Seatbelt profile with
    /// writable paths): false when the plan did not ask, or the platform cannot.
    pub(crate) writes_confined: bool,
    /// The command's system calls are filtered (Linux: the plan named some to deny; a filter that cannot be installed
    /// fails the start). Never elsewhere.
    pub(crate) syscalls_filtered: bool,
    /// The plan's network is the command's (false: it runs on the host's, see [`crate::Unenforceable::Run`]).
    pub(crate) network_enforced: bool,
    /// A proxied command's listener on its proxy address, in its network namespace, to serve on the host's; `true`
    /// when the namespace became its session's (served until the session's sandbox ends, not the command). Only on
    /// Linux: elsewhere an allow-list network is refused.
    pub(crate) proxy_listener: Option<(S, bool)>,
    /// The Unix sockets its connects were refused (Linux's socket broker records them).
    pub(crate) refusals: crate::results::Refusals,
}

/// How command trees are contained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContainmentKind {
    /// One cgroup v2 per tree, killed with `cgroup.kill`: holds processes that leave the process group (Linux).
    Cgroup,
    /// One process group per tree, plus the descendants found in `/proc`; the executor is a child subreaper so
    /// orphaned descendants stay visible (Linux). On macOS and FreeBSD: the process group alone (signals to the whole
    /// group; a process that leaves it is not followed).
    ProcessGroup,
    /// One job object per tree, killed with `TerminateJobObject` and closed with the executor (kill on close): holds
    /// every process the command starts, including those that leave its console (Windows).
    JobObject,
}

impl std::fmt::Display for ContainmentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ContainmentKind::Cgroup => "cgroup v2 (cgroup.kill)",
            ContainmentKind::ProcessGroup if cfg!(target_os = "linux") => {
                "process group + subreaper"
            }
            ContainmentKind::ProcessGroup => {
                "process group (killpg; a process that leaves it is not followed)"
            }
            ContainmentKind::JobObject => "job object (kill on close)",
        })
    }
}
