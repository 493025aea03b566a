//! [`ExecError`]: what can go wrong when running or managing a process, each variant saying what to do in the
//! executor's own terms (a host that offers tools names them: the facade's `ToolError` does).

use std::path::PathBuf;

/// Executor errors. Each says what failed and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// The plan asks for what its mode cannot do: a foreground timeout on a background run.
    #[error("invalid plan: {0}")]
    InvalidPlan(String),
    /// Too many processes are running.
    #[error(
        "{running} processes are already running (the limit is {limit}); stop some or wait for them to finish"
    )]
    TooManyRunning {
        /// Running now.
        running: usize,
        /// The limit.
        limit: usize,
    },
    /// The session has too many processes running.
    #[error(
        "this session already has {running} processes running (the per-session limit is {limit}); stop some or \
         wait for them to finish"
    )]
    TooManyRunningInSession {
        /// Running now in the session.
        running: usize,
        /// The per-session limit.
        limit: usize,
    },
    /// No such process id (for this session).
    #[error("no process {0} (for this session); list the session's processes to see their ids")]
    UnknownProcess(String),
    /// The process existed but was dropped to stay within the retention limits.
    #[error(
        "process {id} has ended and was removed to stay within the retention limits ({why}); its output is no \
         longer available. Read output sooner, or ask the operator to raise the limit"
    )]
    Evicted {
        /// The process id.
        id: String,
        /// Which limit made room (`100 exited processes per session`, `512 MiB of logs`).
        why: String,
    },
    /// Nothing of the process tree is alive.
    #[error(
        "process {0} has already exited and nothing of its process tree is alive; there is nothing to signal"
    )]
    NotAlive(String),
    /// Input was written to a process that was not started with an open stdin.
    #[error(
        "process {0} was not started interactive: its stdin is /dev/null. Start it again with its stdin a pipe or a \
         terminal to write to it"
    )]
    NotInteractive(String),
    /// Its stdin was closed earlier (or its command has ended).
    #[error(
        "the input of process {0} is closed (closed by a caller, or the command has ended); nothing was written"
    )]
    InputClosed(String),
    /// The command stopped reading its input: the write did not finish in time.
    #[error(
        "process {id} did not read its input: {written} of {total} bytes were written within {waited_ms} ms, the \
         rest was dropped. It may not be reading stdin (check its output), or it is busy; write again later or stop \
         it"
    )]
    InputStalled {
        /// The process id.
        id: String,
        /// Bytes written.
        written: usize,
        /// Bytes asked to write.
        total: usize,
        /// How long the write waited.
        waited_ms: u64,
    },
    /// Writing the input failed for another reason.
    #[error("cannot write to the input of process {id}: {error}")]
    InputFailed {
        /// The process id.
        id: String,
        /// The error.
        error: std::io::Error,
    },
    /// The executor is shutting down.
    #[error("the executor is shutting down; no new processes are started")]
    ShuttingDown,
    /// Spawning failed.
    #[error("could not start the command: {0}")]
    Spawn(std::io::Error),
    /// The executor could not be set up.
    #[error("the executor could not be set up: {0}")]
    Setup(String),
    /// A preview cannot run here (the platform, the kernel, or the plan): the reason says which and what to do.
    #[error("cannot preview the command: {0}")]
    PreviewUnavailable(String),
    /// Undo is not available here (the platform, or `[changes]` turned off): the reason says which.
    #[error("changes are not recorded here: {0}")]
    ChangesUnavailable(String),
    /// An undo was refused, and nothing was changed: the reason says why and what to do.
    #[error("cannot undo: {0}")]
    UndoRefused(String),
}
