//! The executor's settings: [`ExecutorConfig`] and its parts (containment preference, limits, the environment
//! policy in [`crate::env`]).

use crate::env::EnvPolicy;
use crate::output::OutputLimits;
use std::path::PathBuf;
use std::time::Duration;

/// Which containment to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ContainmentPreference {
    /// cgroup v2 when available, else process groups.
    #[default]
    Auto,
    /// Process groups (and subreaper tracking) only.
    ProcessGroup,
}

/// The shell commands run in when the configuration names none: `sh -c` on Unix.
#[cfg(not(windows))]
pub const DEFAULT_SHELL: &[&str] = &["sh", "-c"];
/// The shell commands run in when the configuration names none: `cmd.exe /d /s /c` on Windows (`/d`: no AutoRun
/// commands; `/s /c`: the command line after it runs as typed).
#[cfg(windows)]
pub const DEFAULT_SHELL: &[&str] = &["cmd.exe", "/d", "/s", "/c"];

/// Executor settings. Start from [`ExecutorConfig::default`] and change fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ExecutorConfig {
    /// The shell and its flags; the command is appended as the last argument. Default [`DEFAULT_SHELL`]: `["sh",
    /// "-c"]`, on Windows `["cmd.exe", "/d", "/s", "/c"]` (there the command is passed to `cmd` verbatim).
    pub shell: Vec<String>,
    /// Working directory when a plan names none (default: the executor's current directory).
    pub default_workdir: Option<PathBuf>,
    /// How a command's environment is built: what it inherits from the executor's (secrets never, by default) and
    /// what is set on top.
    pub env: EnvPolicy,
    /// Time between SIGTERM and SIGKILL when terminating a tree.
    pub grace: Duration,
    /// How long to keep draining output after the leader exits, so a grandchild holding stdout cannot hang a call.
    pub drain: Duration,
    /// Output window and log limits, per stream.
    pub output: OutputLimits,
    /// Capture stderr as its own stream instead of interleaving it with stdout.
    pub separate_stderr: bool,
    /// Most processes running at once, over all sessions; further starts fail with
    /// [`ExecError::TooManyRunning`](crate::ExecError::TooManyRunning).
    pub max_running: usize,
    /// Most processes one session may have running at once, so one session cannot take every slot.
    pub max_running_per_session: usize,
    /// How long exited processes stay listed (and their output readable).
    pub retention: Duration,
    /// Most exited processes kept per session; past it the oldest exited one is dropped (its log deleted).
    pub max_retained_per_session: usize,
    /// Most bytes of output logs on disk, over every process; past it the logs of the oldest exited processes are
    /// dropped with them. Running processes' logs are never dropped (each is capped by
    /// [`OutputLimits::log_cap`]).
    pub max_log_bytes: u64,
    /// Directory under which the executor creates its private log directory. Default: `$XDG_RUNTIME_DIR` when set,
    /// else the system temp dir. The directory is removed at shutdown, and left-overs of executors that died are
    /// removed when the next executor starts there.
    pub log_parent: Option<PathBuf>,
    /// Containment preference.
    pub containment: ContainmentPreference,
    /// Run each session's commands in a PID namespace of the session's own (and mount namespace with a private
    /// `/proc`) when the host allows it, under a minimal init that reaps what they leave: they see and can signal
    /// each other's processes (`pgrep`, `kill PID` of a server an earlier command started), and `kill -9 -1` or
    /// `pkill` inside reach only the session. Commands without a session share one such sandbox. Needs privilege for `CLONE_NEWPID` (root here) and an init that can run (below: the embedded
    /// one, unless the host forbids executing a memfd); otherwise commands run without one, the executor logs why,
    /// and [`Executor::pid_namespaces`] is false. Default true.
    ///
    /// [`Executor::pid_namespaces`]: crate::Executor::pid_namespaces
    pub pid_namespace: bool,
    /// A namespace init program to try first: a binary whose `main` calls [`crate::init_main_if_requested`] first
    /// (the `shellward` binary, or this crate's `shellward-init`). Default none: the static init built into this
    /// crate (run from a sealed memfd), then, when this process's `main` called that function, the `shellward-init`
    /// beside this process's executable and the executable itself. A program that cannot run gives way to the next.
    pub init_program: Option<PathBuf>,
    /// Per-command resource limits, inherited by every process of the tree.
    pub limits: ResourceLimits,
    /// Capabilities a command of a root executor keeps beyond [`KEPT_CAPABILITIES`](crate::KEPT_CAPABILITIES)
    /// (`"CAP_SYS_ADMIN"` or `"sys_admin"`). Every other one is dropped from the command's bounding set, so it can
    /// neither unmount its private `/proc`, nor trace, nor load modules. Default none. An unknown name fails
    /// [`Executor::new`](crate::Executor::new).
    pub keep_capabilities: Vec<String>,
    /// How long a session's sandbox (its PID and mount namespace, see [`pid_namespace`](Self::pid_namespace)) is kept
    /// after its last command started once nothing runs in it any more. Default 60 s.
    pub session_idle: Duration,
    /// Absolute paths commands see read-only (in their own mount namespace: where PID namespaces are on): the host's
    /// own files — its configuration, policy components and drop-in directory, compiled-policy cache, audit log —
    /// so a command cannot change what judges the next one. The executor adds `/sys` (with the cgroup
    /// hierarchies), the kernel's writable `/proc` files and its own log directory. A path that does not exist when
    /// a command starts is skipped. Default none.
    pub read_only_paths: Vec<PathBuf>,
    /// What happens to a foreground run whose caller stops waiting (its `execute` future dropped: a cancelled call):
    /// `false` (the default) stops its whole tree as a timeout would; `true` keeps it as a tracked background
    /// process (listed, signallable, its output readable by id).
    pub keep_abandoned: bool,
    /// Absolute paths commands cannot read at all (where PID namespaces are on): the host's secrets — a token file,
    /// the compiled-policy cache's key, the audit log. A file is covered by `/dev/null` (reads are empty, writes discarded), a
    /// directory by an empty read-only directory, in the command's mount namespace. A path that does not exist when a
    /// session's sandbox starts is skipped. Default none.
    pub hidden_paths: Vec<PathBuf>,
    /// TCP ports commands may not connect to, on any address, whatever their network: the server's own listener,
    /// so a command cannot call the server that runs it (list and answer approvals, start commands past its own
    /// sandbox's session). Enforced with Landlock (ABI 4, Linux 6.7) on Linux; elsewhere, or on an older kernel, a
    /// warning says it is not. Default none.
    pub closed_tcp_ports: Vec<u16>,
    /// Whether a confined command's refused writes are seen as they happen ([`crate::ExecResult::refused_writes`],
    /// Linux): each call of the command that writes a path (opening for writing, creating, removing, renaming) is
    /// shown to the executor, which reads its path and lets the kernel make it (Landlock still decides). It costs a
    /// round trip to the executor per such call (see `cargo bench -p shellward-exec --bench watch`). Default on; off,
    /// refused writes are only told from what the command prints.
    pub watch_writes: bool,
    /// What undo keeps per session ([`crate::undo`]): on by default, for plans that name a workspace
    /// ([`crate::ExecPlan::record`]).
    pub changes: crate::undo::ChangesConfig,
    /// Fixed addresses for names a proxied command ([`Network::Allow`](crate::Network)) asks for, instead of DNS
    /// (e.g. an internal registry; in tests, names for servers on loopback). They are trusted as given: the proxy's
    /// check that an allowed name does not resolve to a loopback or link-local address applies to DNS answers only.
    /// Default none.
    pub proxy_hosts: std::collections::HashMap<String, Vec<std::net::IpAddr>>,
    /// What to do with a plan whose confinement this platform cannot enforce: refuse it (the default) or run it
    /// without what cannot be held, saying so in its result.
    pub unenforceable: Unenforceable,
}

/// What the executor does with a plan asking for confinement the platform cannot give: confined writes on FreeBSD, a
/// network other than `host` on FreeBSD and Windows, a session's loopback or an allow-list on macOS. (Linux gives
/// every kind; a kernel without Landlock runs writes unconfined and results say so.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unenforceable {
    /// Refuse the command, naming the platform and what it lacks: a command never runs wider than decided.
    #[default]
    Refuse,
    /// Run it without what cannot be enforced (the operator's explicit choice, `[confinement] unenforceable =
    /// "run"`); its result's [`Enforced`](crate::Enforced) says what held (`writes: false`, `network: Host`).
    Run,
}

/// Resource limits of one command's tree. `RLIMIT_CORE` is always 0 (a crashing command does not write a core file
/// that may hold secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResourceLimits {
    /// Most processes and threads the tree may have at once (cgroup `pids.max`), so a fork bomb in any language is
    /// stopped. `None`: unlimited. Default 4096: builds and test suites stay far below it.
    pub max_processes: Option<u64>,
    /// `RLIMIT_AS` of every process (bytes of address space). Default: none.
    pub address_space_bytes: Option<u64>,
    /// `RLIMIT_FSIZE` of every process (largest file it may write, bytes). Default: none.
    pub file_size_bytes: Option<u64>,
    /// `RLIMIT_CPU` of every process (CPU seconds). Default: none.
    pub cpu_seconds: Option<u64>,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        ResourceLimits {
            max_processes: Some(4096),
            address_space_bytes: None,
            file_size_bytes: None,
            cpu_seconds: None,
        }
    }
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            shell: DEFAULT_SHELL.iter().map(|s| s.to_string()).collect(),
            default_workdir: None,
            env: EnvPolicy::default(),
            grace: Duration::from_secs(2),
            drain: Duration::from_secs(2),
            output: OutputLimits::default(),
            separate_stderr: false,
            max_running: 256,
            max_running_per_session: 64,
            retention: Duration::from_secs(30 * 60),
            max_retained_per_session: 100,
            max_log_bytes: 512 * 1024 * 1024,
            log_parent: None,
            containment: ContainmentPreference::Auto,
            pid_namespace: true,
            init_program: None,
            limits: ResourceLimits::default(),
            keep_capabilities: Vec::new(),
            session_idle: Duration::from_secs(60),
            read_only_paths: Vec::new(),
            keep_abandoned: false,
            hidden_paths: Vec::new(),
            closed_tcp_ports: Vec::new(),
            watch_writes: true,
            changes: crate::undo::ChangesConfig::default(),
            proxy_hosts: std::collections::HashMap::new(),
            unenforceable: Unenforceable::default(),
        }
    }
}
