//! shellward's native executor.
//!
//! This crate owns everything that touches the operating system when a decided command runs, and no policy logic:
//!
//! - spawning `sh -c COMMAND` (shell configurable) with stdin on `/dev/null`, a validated working directory and an
//!   environment built by an explicit policy ([`env`](mod@env): the host's credentials and secret-looking variables are not
//!   inherited by default), as the leader of its own process group;
//! - containment of the whole tree: a cgroup v2 per command (`cgroup.kill`) when a writable hierarchy is found,
//!   otherwise the process group plus `/proc` descendants with the executor as child subreaper
//!   ([`Executor::containment`] says which); `PR_SET_PDEATHSIG` on each leader and a watchdog process so nothing
//!   outlives an executor that is killed;
//! - foreground runs with a timeout (kill the tree, or keep it running in the background), background runs with short
//!   ids, scoped by session;
//! - bounded output capture ([`output`]): head and tail in memory, the full stream in a capped log file, incremental
//!   reads by cursor that can wait for new output;
//! - signals to whole trees (terminate: SIGTERM, grace, SIGKILL; kill: SIGKILL) that never reach a process outside
//!   the tree (membership is proven, and every signal sent through a pidfd, at the moment of signalling);
//! - limits one session cannot exhaust (running processes per session and in total; exited processes kept per
//!   session; bytes of logs on disk), a private log directory, and a clean shutdown that stops every tree it
//!   started.
//!
//! Modules: [`config`] (settings), [`env`](mod@env) (the environment policy), [`output`] (capture and views), `executor`
//! (the [`Executor`]), `registry` (processes by id, limits), `tasks` (per-process tasks, the reaper), `logdir`,
//! `results`, `error`, `plan`, [`proxy`] (the filtering proxy of allow-list commands), [`seatbelt`] (the macOS
//! profile of a confinement), and `sys` (platform code: `sys/linux` for Linux, `sys/bsd` for macOS and
//! FreeBSD, `sys/unix` for what every Unix shares — streams, terminals, environment, private files —, `sys/windows`).
//! ARCHITECTURE.md at the repository's root maps every module.
//!
//! On Windows (`sys/windows`) each command runs in a job object of its own (killed whole with `TerminateJobObject`,
//! and killed when the executor's handles close), started suspended in a console process group and resumed once in
//! its job, with `cmd.exe /d /s /c` as the default shell ([`DEFAULT_SHELL`]); there are no PID namespaces, no write,
//! network or system-call confinement and no terminals there (a start that asks for a network other than the host's,
//! or a terminal, is refused; results say writes and system calls were not confined).
//!
//! It has no WebAssembly dependency: a host that only wants a solid process executor can embed it alone. All methods
//! are `async` and need a Tokio runtime with I/O and time enabled.

#![deny(missing_docs)]

mod capabilities;
pub mod changes;
pub mod config;
pub mod env;
mod error;
mod executor;
mod ids;
mod logdir;
pub mod output;
mod plan;
pub mod proxy;
mod registry;
mod results;
pub mod seatbelt;
mod shared;
mod sys;
mod tasks;
mod terminal;
pub mod undo;

pub use capabilities::{KEPT_CAPABILITIES, capability_number};
pub use changes::{Change, ChangeKind, ChangeSet, ChangeTotals, EntryType, Preview, PreviewLimits};
pub use config::{
    ContainmentPreference, DEFAULT_SHELL, ExecutorConfig, ResourceLimits, Unenforceable,
};
pub use env::{EnvPolicy, Inherit, NON_INTERACTIVE_ENV};
pub use error::ExecError;
pub use executor::Executor;
pub use ids::{ProcessId, Session};
pub use logdir::PrivateDir;
pub use output::{OutputChunk, OutputLimits, OutputView, ReadOptions};
pub use plan::{Confinement, DEFAULT_DENIED_SYSCALLS, ExecPlan, Network, OnTimeout, StdinMode};
pub use proxy::{PROXY_ADDR, ProxyRules};
pub use results::{
    Enforced, ExecResult, ExitState, OutputRead, ProcessInfo, ProcessList, SignalKind,
    SignalOutcome,
};
pub use sys::ContainmentKind;
pub use sys::init_main_if_requested;
pub use undo::{ChangesConfig, ChangesList, CommandChanges, Undone};

/// This process's directory in the cgroup v1 `pids` hierarchy — where an executor makes its `pids` root — on a
/// machine that has one (hybrid cgroups), found from `/proc/self/mountinfo` and `/proc/self/cgroup`; `None` elsewhere
/// and on Windows. For tests and operators checking what an executor made or left behind.
pub fn own_pids_dir() -> Option<std::path::PathBuf> {
    sys::own_pids_dir()
}
