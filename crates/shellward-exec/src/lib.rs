//! shellward's native executor.
//!
//! This crate owns everything that touches the operating system when a decided command runs, and no policy logic:
//!
//! - spawning `sh -c COMMAND` (shell configurable) with stdin on `/dev/null`, a validated working directory and a
//!   non-interactive environment, as the leader of its own process group;
//! - containment of the whole tree: a cgroup v2 per command (`cgroup.kill`) when a writable hierarchy is found,
//!   otherwise the process group plus `/proc` descendants with the executor as child subreaper
//!   ([`Executor::containment`] says which); `PR_SET_PDEATHSIG` on each leader and a watchdog process so nothing
//!   outlives an executor that is killed;
//! - foreground runs with a timeout (kill the tree, or keep it running in the background), background runs with short
//!   ids, scoped by session;
//! - bounded output capture ([`output`]): head and tail in memory, the full stream in a capped log file, incremental
//!   reads by cursor that can wait for new output;
//! - signals to whole trees (terminate: SIGTERM, grace, SIGKILL; kill: SIGKILL), retention of exited processes, and a
//!   clean shutdown that stops every tree it started.
//!
//! It has no WebAssembly dependency: a host that only wants a solid process executor can embed it alone. All methods
//! are `async` and need a Tokio runtime with I/O and time enabled.

pub mod output;
mod plan;
mod registry;
mod sys;

pub use output::{OutputChunk, OutputLimits, OutputView};
pub use plan::{ExecPlan, TimeoutAction};
pub use registry::{ExecResult, ExitState, OutputRead, ProcessInfo, ProcessList, SignalKind};
pub use sys::unix::ContainmentKind;
/// Linux process-table helpers (used by tests to prove no process survives).
pub use sys::unix::procfs;

use std::path::PathBuf;
use std::time::Duration;

/// Which containment to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContainmentPreference {
    /// cgroup v2 when available, else process groups.
    #[default]
    Auto,
    /// Process groups (and subreaper tracking) only.
    ProcessGroup,
}

/// Environment defaults that keep tools from waiting for a person: no pager, no editor, no prompts, no colours.
pub const NON_INTERACTIVE_ENV: &[(&str, &str)] = &[
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_EDITOR", "true"),
    ("EDITOR", "true"),
    ("VISUAL", "true"),
];

/// Executor settings.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// The shell and its flag; the command is appended as the last argument. Default `["sh", "-c"]`.
    pub shell: Vec<String>,
    /// Working directory when a plan names none (default: the executor's current directory).
    pub default_workdir: Option<PathBuf>,
    /// Environment added on top of the executor's own (the plan's environment wins over both).
    pub env_defaults: Vec<(String, String)>,
    /// Time between SIGTERM and SIGKILL when terminating a tree.
    pub grace: Duration,
    /// How long to keep draining output after the leader exits, so a grandchild holding stdout cannot hang a call.
    pub drain: Duration,
    /// Output window and log limits, per stream.
    pub output: OutputLimits,
    /// Capture stderr as its own stream instead of interleaving it with stdout.
    pub separate_stderr: bool,
    /// Most processes running at once; further starts fail with [`ExecError::TooManyRunning`].
    pub max_running: usize,
    /// How long exited background processes stay listed (and their output readable).
    pub retention: Duration,
    /// Directory under which the executor creates its own log directory (default: the system temp dir). The
    /// executor's directory is removed at shutdown.
    pub log_parent: Option<PathBuf>,
    /// Containment preference.
    pub containment: ContainmentPreference,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            shell: vec!["sh".into(), "-c".into()],
            default_workdir: None,
            env_defaults: NON_INTERACTIVE_ENV
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            grace: Duration::from_secs(2),
            drain: Duration::from_secs(2),
            output: OutputLimits::default(),
            separate_stderr: false,
            max_running: 256,
            retention: Duration::from_secs(30 * 60),
            log_parent: None,
            containment: ContainmentPreference::Auto,
        }
    }
}

/// Executor errors. Each says what failed and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The working directory does not exist or is not a directory.
    #[error("working directory {path} {problem}; give an existing directory")]
    Workdir {
        /// The directory.
        path: PathBuf,
        /// `does not exist`, `is not a directory`, ...
        problem: String,
    },
    /// The command is empty or contains a NUL byte.
    #[error("invalid command: {0}")]
    InvalidCommand(String),
    /// Too many processes are running.
    #[error(
        "{running} processes are already running (the limit is {limit}); stop some with process_signal or wait for \
         them to finish"
    )]
    TooManyRunning {
        /// Running now.
        running: usize,
        /// The limit.
        limit: usize,
    },
    /// No such process id (for this session).
    #[error("no process {0} (for this session); call process_list to see the ids")]
    UnknownProcess(String),
    /// Nothing of the process tree is alive.
    #[error(
        "process {0} has already exited and nothing of its process tree is alive; there is nothing to signal"
    )]
    NotAlive(String),
    /// The executor is shutting down.
    #[error("the executor is shutting down; no new processes are started")]
    ShuttingDown,
    /// Spawning failed.
    #[error("could not start the command: {0}")]
    Spawn(std::io::Error),
    /// The executor could not be set up.
    #[error("the executor could not be set up: {0}")]
    Setup(String),
}

pub use registry::Executor;
