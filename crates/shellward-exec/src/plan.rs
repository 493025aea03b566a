//! The executor's own plan type: what to run and how, already decided (by policies or by the embedding host).

use crate::ids::Session;
use std::path::PathBuf;
use std::time::Duration;

/// What happens when a foreground command outlives its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnTimeout {
    /// Terminate the whole tree (SIGTERM, grace, SIGKILL) and report `timed_out`.
    Kill,
    /// Keep it running as a tracked background process; the caller gets its id and the output so far.
    #[default]
    Background,
}

/// What the command's standard input is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StdinMode {
    /// `/dev/null`: the command cannot wait for input (the default: an agent's commands must not hang on a prompt).
    #[default]
    Null,
    /// A pipe kept open: write to it with [`crate::Executor::write_input`]; closing it is end of input.
    Pipe,
    /// A pseudo-terminal for stdin, stdout and stderr (one stream), `rows` × `cols`, with `TERM=xterm-256color`: the
    /// command is the session leader with it as its controlling terminal, so `tty -s` succeeds, line editing and job
    /// control work, and `\u{3}` written to it interrupts the foreground job. Views of its output are cleaned of
    /// escape sequences and `\r` overwrites; the log keeps the raw bytes.
    Terminal {
        /// Rows (lines).
        rows: u16,
        /// Columns.
        cols: u16,
    },
}

impl StdinMode {
    /// Whether input can be written.
    pub fn interactive(self) -> bool {
        self != StdinMode::Null
    }
}

/// What network a command reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub enum Network {
    /// None at all: a network namespace of its own whose loopback is down.
    None,
    /// Only its session's loopback (`127.0.0.1`, `::1`): a network namespace with the loopback up, made by the
    /// session's first such command and entered by the next (in a session sandbox; without one, each command's own).
    /// Servers one command starts are reachable by the session's later `loopback` commands, as in one terminal; not
    /// by the host or other sessions, and nothing outside is reachable.
    Loopback,
    /// Only the destinations of [`Confinement::allow`], through a filtering proxy on the host
    /// ([`crate::proxy`]): a network namespace with the loopback up (shared, like `Loopback`, by the session's
    /// commands with the same list), where `127.0.0.1:3128` is the proxy
    /// and `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` say so.
    Allow,
    /// The host's network (the default).
    #[default]
    Host,
}

impl Network {
    /// The name operators write: `none`, `loopback`, `host`.
    pub fn as_str(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Loopback => "loopback",
            Network::Allow => "allow",
            Network::Host => "host",
        }
    }
}

/// What one command may touch beyond what the executor grants every command: where it may write and what network it
/// reaches. Enforced in the command's own process before it execs, so everything it starts inherits it and nothing
/// it runs can lift it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Confinement {
    /// `Some(paths)`: the command may create, change, rename or remove files only beneath these (absolute, existing)
    /// paths, everything else is read-only to it (Landlock; a path that does not exist is skipped). `None`: writes are
    /// not confined (the user's own permissions decide).
    pub writable: Option<Vec<PathBuf>>,
    /// The network it reaches.
    pub network: Network,
    /// With [`Network::Allow`]: the destinations it may reach (`host`, `*.domain`, each with an optional `:port`).
    pub allow: Vec<String>,
    /// System calls it may not make (they fail with `EPERM`), by name: see [`DEFAULT_DENIED_SYSCALLS`] for the ones
    /// that can be named. Empty: no filter.
    pub deny_syscalls: Vec<String>,
    /// Unix sockets of the host (absolute paths, e.g. an ssh-agent's) the command may still connect to when its
    /// network is not the host's; every other socket that is not its session's own stays out of reach. A path that
    /// is not a socket when the command starts is skipped. Linux (the socket broker) only.
    pub unix_sockets: Vec<PathBuf>,
}

/// System calls a confined command is refused by default: tracing or reading other processes' memory (`ptrace`,
/// `process_vm_readv`/`writev`), kernel interfaces that widen the attack surface or bypass other checks (`bpf`,
/// `io_uring_*`, `perf_event_open`, `userfaultfd`, `open_by_handle_at`, the keyring), and what only an
/// administrator should do (`kexec_*`, modules, swap, `reboot`, `acct`). These are also every name a deny list may
/// use.
pub const DEFAULT_DENIED_SYSCALLS: &[&str] = &[
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kexec_load",
    "kexec_file_load",
    "bpf",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "perf_event_open",
    "userfaultfd",
    "open_by_handle_at",
    "init_module",
    "finit_module",
    "delete_module",
    "add_key",
    "keyctl",
    "request_key",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
];

impl Confinement {
    /// No confinement: writes wherever the user may, the host's network.
    pub fn none() -> Confinement {
        Confinement::default()
    }

    /// Writes only beneath `writable`, with `network`.
    pub fn new(writable: Option<Vec<PathBuf>>, network: Network) -> Confinement {
        Confinement {
            writable,
            network,
            allow: Vec::new(),
            deny_syscalls: Vec::new(),
            unix_sockets: Vec::new(),
        }
    }

    /// The same, reaching only `destinations` through the filtering proxy ([`Network::Allow`]).
    pub fn allow_only(
        mut self,
        destinations: impl IntoIterator<Item = impl Into<String>>,
    ) -> Confinement {
        self.network = Network::Allow;
        self.allow = destinations.into_iter().map(Into::into).collect();
        self
    }

    /// The same, with `names` refused (see [`Confinement::deny_syscalls`]).
    pub fn deny_syscalls(
        mut self,
        names: impl IntoIterator<Item = impl Into<String>>,
    ) -> Confinement {
        self.deny_syscalls = names.into_iter().map(Into::into).collect();
        self
    }

    /// Whether anything is confined.
    pub fn is_confined(&self) -> bool {
        self.writable.is_some() || self.network != Network::Host || !self.deny_syscalls.is_empty()
    }
}

/// A decided plan. Start from [`ExecPlan::new`] and set what differs (the fields grow as the executor does).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ExecPlan {
    /// The command text, run as `<shell> -c COMMAND`.
    pub command: String,
    /// Working directory (default: the executor's).
    pub workdir: Option<PathBuf>,
    /// Extra environment; wins over the executor's and the non-interactive defaults.
    pub env: Vec<(String, String)>,
    /// Start in the background and return at once.
    pub background: bool,
    /// Foreground timeout (`None`: wait as long as it takes). A background plan has none (its limit is
    /// [`deadline`](Self::deadline)): one with both is refused with [`ExecError::InvalidPlan`](crate::ExecError).
    pub timeout: Option<Duration>,
    /// What happens when the foreground timeout expires.
    pub on_timeout: OnTimeout,
    /// The session (caller) the process belongs to; only that session can see or signal it.
    pub session: Option<Session>,
    /// Background plans: wait up to this long for the command to fail at start-up (a server whose port is taken
    /// exits at once), and return its exit and output in the same call when it does; a command still running then
    /// is returned as running. `None` returns at once.
    pub startup_wait: Option<Duration>,
    /// Background plans: terminate the whole tree (SIGTERM, grace, SIGKILL) if it still runs this long after the
    /// start — a hard limit for a host that returns at once but must still enforce a policy's kill timeout. `None`:
    /// no limit.
    pub deadline: Option<Duration>,
    /// Standard input: `/dev/null` (default), a pipe, or a pseudo-terminal.
    pub stdin: StdinMode,
    /// The host's own labels for the process (e.g. which conversation started it), returned in
    /// [`crate::ProcessInfo::labels`]; the executor does not read them.
    pub labels: Vec<(String, String)>,
    /// Where the command may write and what network it reaches (default: not confined).
    pub confinement: Confinement,
    /// A file the shell writes its last working directory into when the command ends, however it ends (a host
    /// that keeps a session's directory from one command to the next reads it). The executor adds an `EXIT` trap
    /// to the shell's script at the spawn; the command the plan names, and [`crate::ProcessInfo::command`], stay
    /// as they are. For a POSIX shell only (`sh -c`); the path must be absolute and plain (letters, digits and
    /// `/._-+:@%,=`), or the plan is refused. A command that sets its own `EXIT` trap replaces this one.
    pub report_cwd: Option<PathBuf>,
    /// The workspace whose changes are recorded so the session can undo them ([`crate::Executor::undo`]), where the
    /// platform records ([`crate::Executor::changes_support`]). A session records one workspace: the first plan's;
    /// later plans naming another directory are not recorded. Default none (nothing recorded).
    pub record: Option<PathBuf>,
}

/// The script a POSIX shell runs for `command` when its last working directory is to be left in `file`: `command`
/// prefixed (on its first line, so line numbers in the shell's messages stay the same) with an `EXIT` trap that
/// writes the directory; it changes neither the command's output nor its exit status.
pub(crate) fn with_cwd_report(file: &std::path::Path, command: &str) -> String {
    format!(
        "trap 'pwd -P >| {} 2>/dev/null' EXIT; {command}",
        file.display()
    )
}

/// Whether `file` can stand unquoted in the trap's single-quoted text: absolute, and plain characters only.
pub(crate) fn plain_report_path(file: &std::path::Path) -> bool {
    file.is_absolute()
        && file.to_str().is_some_and(|t| {
            t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%,=".contains(&b))
        })
}

impl ExecPlan {
    /// A foreground plan for `command` with no timeout.
    pub fn new(command: impl Into<String>) -> ExecPlan {
        ExecPlan {
            command: command.into(),
            ..Default::default()
        }
    }
}
