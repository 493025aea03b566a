//! What the executor hands back: how a process ended, the result of a run, listings, output reads, signal outcomes.

use crate::ids::{ProcessId, Session};
use crate::output::{OutputChunk, OutputView};
use std::path::PathBuf;

/// How a process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExitState {
    /// Still running.
    Running,
    /// Exited with a code.
    Code(i32),
    /// Killed by a signal (its number, e.g. 9; [`ExitState::signal`] names it).
    Signal(i32),
}

impl ExitState {
    /// The exit code, when it exited normally.
    pub fn code(&self) -> Option<i32> {
        match self {
            ExitState::Code(c) => Some(*c),
            _ => None,
        }
    }

    /// The signal's name (`SIGKILL`), when a signal this platform names ended it.
    pub fn signal(&self) -> Option<&'static str> {
        match self {
            ExitState::Signal(n) => crate::sys::signal_name(*n),
            _ => None,
        }
    }

    /// The signal's number, when a signal ended it.
    pub fn signal_number(&self) -> Option<i32> {
        match self {
            ExitState::Signal(n) => Some(*n),
            _ => None,
        }
    }

    /// The state of a process ended by the signal named `name` (`SIGTERM` or `TERM`); `None` for a name this
    /// platform does not know.
    pub fn from_signal_name(name: &str) -> Option<ExitState> {
        let full = if name.starts_with("SIG") {
            name.to_string()
        } else {
            format!("SIG{name}")
        };
        crate::sys::signal_number(&full).map(ExitState::Signal)
    }

    /// A shell-style status: the code, or 128 + signal number.
    pub fn shell_status(&self) -> Option<i32> {
        match self {
            ExitState::Running => None,
            ExitState::Code(c) => Some(*c),
            ExitState::Signal(n) => Some(128 + n),
        }
    }
}

/// How a process ended, as a sentence says it: `exit code 3`, `signal SIGKILL` (`signal 34` for a signal this platform
/// has no name for), or `still running`. Every surface words an exit this way.
impl std::fmt::Display for ExitState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitState::Running => f.write_str("still running"),
            ExitState::Code(c) => write!(f, "exit code {c}"),
            ExitState::Signal(n) => match self.signal() {
                Some(name) => write!(f, "signal {name}"),
                None => write!(f, "signal {n}"),
            },
        }
    }
}

/// The result of [`Executor::execute`](crate::Executor::execute).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ExecResult {
    /// The process id (`p1-k3x9q2mz`, `p2-k3x9q2mz`, ...: a number and the executor's random instance tag, so an id
    /// is never reused by a later run or another server). Valid for later calls while the process is tracked (background runs,
    /// timeouts kept in the background, and trees that left processes behind).
    pub id: ProcessId,
    /// How the leader ended (`Running` when it lives on).
    pub exit: ExitState,
    /// The foreground timeout expired.
    pub timed_out: bool,
    /// The process still runs (background run, or timeout with [`OnTimeout::Background`](crate::OnTimeout::Background)).
    pub running: bool,
    /// Wall time from start until the result, in milliseconds.
    pub wall_ms: u64,
    /// Head/tail view of the output (stdout and stderr interleaved, unless separated).
    pub output: OutputView,
    /// Head/tail view of stderr when it is captured separately.
    pub stderr: Option<OutputView>,
    /// Output may be incomplete: a process kept the output pipe open past the drain bound.
    pub output_incomplete: bool,
    /// The full output log, once anything was written.
    pub log_path: Option<PathBuf>,
    /// Cursor to continue reading the output from.
    pub cursor: u64,
    /// Processes of the tree still alive after the leader exited (e.g. a daemon it started); they stay tracked
    /// under `id` and can be signalled.
    pub leftover_processes: usize,
    /// The tree reached its process limit ([`ResourceLimits::max_processes`]) at least once: a fork was refused
    /// (a fork bomb, or a build spawning more processes than allowed).
    ///
    /// [`ResourceLimits::max_processes`]: crate::ResourceLimits::max_processes
    pub process_limit_hit: bool,
    /// How long starting the command took (creating its tree and leader, until it runs), in microseconds.
    pub spawn_micros: u64,
    /// A background start answered because its tree listens: what it listens on (`tcp 127.0.0.1:5173`,
    /// `udp 0.0.0.0:5353`, `unix /tmp/app.sock`). Empty otherwise.
    pub listening: Vec<String>,
    /// The confinement that held for the command.
    pub confinement: Enforced,
    /// Unix sockets at a path the command tried to connect to and was refused, because they are not its session's
    /// (a host socket such as `/var/run/docker.sock`, or another session's) under a network other than the host's;
    /// at most eight, in the order refused. The sandbox saw each refusal itself: nothing is read from the output.
    pub refused_sockets: Vec<PathBuf>,
    /// The command tried to make a datagram Unix socket (`socket(AF_UNIX, SOCK_DGRAM)` or such a pair) and was
    /// refused (`EPERM`) under a network other than the host's: one could send to any socket path. Seen by the
    /// sandbox itself.
    pub refused_unix_datagram: bool,
    /// Paths the command tried to write (open for writing, create, remove, rename, link) that its write confinement
    /// refused, because they are outside the writable paths; at most eight, in the order refused, each as the command
    /// named it made absolute. Seen by the sandbox itself (nothing is read from the output) where
    /// [`Enforced::writes_watched`]; empty otherwise.
    pub refused_writes: Vec<PathBuf>,
    /// Network destinations (`host:port`) the command tried to reach and its network refused: a direct connect
    /// with no route under `none`, `loopback` or an allow-list (`93.184.216.34:443`, seen by the socket broker on
    /// Linux's fast spawn path), or a destination the allow-list proxy refused (`example.com:443`); at most eight.
    pub refused_network: Vec<String>,
}

/// Where the broker records one command's refusals (`ExecResult::refused_sockets`, `ExecResult::refused_writes`,
/// `ExecResult::refused_unix_datagram`).
#[derive(Clone, Default, Debug)]
pub(crate) struct Refusals(std::sync::Arc<std::sync::Mutex<Refused>>);

/// What [`Refusals`] holds.
#[derive(Default, Debug)]
struct Refused {
    sockets: Vec<PathBuf>,
    writes: Vec<PathBuf>,
    addresses: Vec<String>,
    datagram: bool,
    writes_watched: bool,
}

impl Refusals {
    /// At most this many refused paths of each kind are kept per command.
    const MAX: usize = 8;

    fn with<T>(&self, f: impl FnOnce(&mut Refused) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Records a refused Unix socket path (once).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn push(&self, path: PathBuf) {
        self.with(|r| {
            if r.sockets.len() < Self::MAX && !r.sockets.contains(&path) {
                r.sockets.push(path);
            }
        })
    }

    /// Records a refused write (once).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn write(&self, path: PathBuf) {
        self.with(|r| {
            if r.writes.len() < Self::MAX && !r.writes.contains(&path) {
                r.writes.push(path);
            }
        })
    }

    /// Records a refused network destination (`host:port`, once).
    pub(crate) fn address(&self, to: String) {
        self.with(|r| {
            if r.addresses.len() < Self::MAX && !r.addresses.contains(&to) {
                r.addresses.push(to);
            }
        })
    }

    /// The network destinations refused so far.
    pub(crate) fn addresses(&self) -> Vec<String> {
        self.with(|r| r.addresses.clone())
    }

    /// Records a refused datagram Unix socket.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn datagram(&self) {
        self.with(|r| r.datagram = true)
    }

    /// Records that the command's writes are watched (so an empty list of refused writes means none was refused).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn watching_writes(&self) {
        self.with(|r| r.writes_watched = true)
    }

    /// The Unix socket paths refused so far.
    pub(crate) fn paths(&self) -> Vec<PathBuf> {
        self.with(|r| r.sockets.clone())
    }

    /// The writes refused so far.
    pub(crate) fn writes(&self) -> Vec<PathBuf> {
        self.with(|r| r.writes.clone())
    }

    /// Whether a datagram Unix socket was refused.
    pub(crate) fn datagram_refused(&self) -> bool {
        self.with(|r| r.datagram)
    }

    /// Whether the command's writes are watched.
    pub(crate) fn writes_watched(&self) -> bool {
        self.with(|r| r.writes_watched)
    }
}

/// One entry of [`Executor::list`](crate::Executor::list).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessInfo {
    /// Process id.
    pub id: ProcessId,
    /// The command.
    pub command: String,
    /// Working directory.
    pub workdir: PathBuf,
    /// The labels the host gave the plan ([`crate::ExecPlan::labels`]).
    pub labels: Vec<(String, String)>,
    /// Session.
    pub session: Option<Session>,
    /// Whether it was started (or kept) in the background.
    pub background: bool,
    /// Whether anything of its tree is running.
    pub running: bool,
    /// How the leader ended.
    pub exit: ExitState,
    /// OS pid of the leader.
    pub pid: i32,
    /// Start time (seconds since the epoch).
    pub started_at_unix: u64,
    /// Exit time of the leader (seconds since the epoch).
    pub exited_at_unix: Option<u64>,
    /// Output bytes so far.
    pub output_bytes: u64,
    /// Output log path.
    pub log_path: Option<PathBuf>,
}

/// What confinement held for a command (see [`crate::Confinement`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Enforced {
    /// Its writes were confined to the plan's writable paths (Landlock). False when the plan did not ask, or the
    /// kernel has no Landlock (then nothing confined them).
    pub writes: bool,
    /// The network it had.
    pub network: crate::plan::Network,
    /// Its system-call filter was installed (the plan's `deny_syscalls`).
    pub syscalls: bool,
    /// Its writes were confined and watched: [`ExecResult::refused_writes`] lists every write refused (Linux, on
    /// the fast spawn path; false where the watch cannot be had, e.g. inside another sandbox's notify filter).
    pub writes_watched: bool,
}

/// The result of [`Executor::list`](crate::Executor::list).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessList {
    /// Running first, then newest first.
    pub processes: Vec<ProcessInfo>,
    /// Entries not returned because of the limit.
    pub omitted: usize,
}

/// The result of [`Executor::read_output`](crate::Executor::read_output).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OutputRead {
    /// The bytes after the cursor (when a cursor was given).
    pub chunk: Option<OutputChunk>,
    /// The head/tail view (when no cursor was given).
    pub view: Option<OutputView>,
    /// Cursor for the next read.
    pub next_cursor: u64,
    /// Whether the process is still running.
    pub running: bool,
    /// How the leader ended.
    pub exit: ExitState,
    /// The leader has exited and its output pipes are closed: no more output will arrive (a process that inherited
    /// the pipes and keeps them open holds this false until it exits or the drain bound passes).
    pub output_closed: bool,
    /// An interactive command is blocked reading its input (a prompt is waiting for an answer): one of its
    /// processes waits in a read of the command's stdin and none is running.
    pub waiting_for_input: bool,
}

/// A signal request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignalKind {
    /// SIGTERM to the whole tree, then SIGKILL after the grace period.
    Terminate,
    /// SIGKILL to the whole tree at once.
    Kill,
}

/// What [`Executor::signal`](crate::Executor::signal) achieved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SignalOutcome {
    /// Processes carrying the tree's marker that had left its containment (cgroup path: moved to another cgroup)
    /// and were found and killed individually.
    pub escaped_killed: usize,
    /// Processes of the tree still alive when the call returned (a process that ignores SIGKILL cannot exist, so
    /// this counts processes that escaped beyond what can be found: another cgroup *and* a cleared environment,
    /// or processes in uninterruptible sleep). Zero means the whole tree is gone.
    pub survivors: usize,
}

#[cfg(all(test, unix))]
mod exit_state_tests {
    use super::ExitState;

    /// One wording of an exit for every surface: a code, a named signal, a signal without a name, still running.
    #[test]
    fn an_exit_reads_as_a_sentence() {
        assert_eq!(ExitState::Code(3).to_string(), "exit code 3");
        assert_eq!(ExitState::Running.to_string(), "still running");
        // 64 is a real-time signal on Linux: no name, so its number.
        assert_eq!(ExitState::Signal(64).to_string(), "signal 64");
        #[cfg(unix)]
        assert_eq!(ExitState::Signal(9).to_string(), "signal SIGKILL");
    }

    #[test]
    fn a_signal_is_kept_as_its_number_and_named_on_demand() {
        let killed = ExitState::Signal(libc::SIGKILL);
        assert_eq!(killed.signal(), Some("SIGKILL"));
        assert_eq!(killed.signal_number(), Some(9));
        assert_eq!(killed.shell_status(), Some(137));
        assert_eq!(
            ExitState::from_signal_name("SIGTERM"),
            Some(ExitState::Signal(libc::SIGTERM))
        );
        assert_eq!(
            ExitState::from_signal_name("TERM"),
            Some(ExitState::Signal(libc::SIGTERM))
        );
        assert_eq!(ExitState::from_signal_name("SIGNOPE"), None);
        // A real-time signal has no name here, but its number and status stay.
        let rt = ExitState::Signal(libc::SIGRTMIN() + 2);
        assert_eq!(rt.signal(), None);
        assert_eq!(rt.shell_status(), Some(128 + libc::SIGRTMIN() + 2));
        assert_eq!(ExitState::Code(3).signal_number(), None);
    }
}
