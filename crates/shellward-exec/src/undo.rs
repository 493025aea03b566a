//! Undo: what each command of a session changed in its workspace, kept so the session can take it back
//! ([`crate::Executor::changes`], [`crate::Executor::undo`]), and the bounds of what is kept ([`ChangesConfig`]).
//!
//! A plan names the workspace to record ([`crate::ExecPlan::record`]). The first recorded command of a session
//! copies the workspace once (the *baseline*: every file's content, outside ignored trees, in a store no command
//! can see); from then on the kernel tells the session which paths changed (inotify on Linux), so each command costs
//! only the paths it touched: at its start and at its end those paths are compared with the baseline, and what
//! differs is that command's change set, its pre-images kept. Changes made while no recorded command of the session
//! runs (the host's own edits) move the baseline without being anyone's. While two commands of a session run at
//! once their changes cannot be told apart: each is recorded for both, and each record says it overlapped.
//!
//! The types are the same on every platform; only Linux records (`sys/linux/record.rs`), elsewhere
//! [`crate::Executor::changes_support`] says why not and the calls are refused naming the platform.

use crate::ProcessId;
use crate::changes::ChangeSet;
use std::path::PathBuf;
use std::time::SystemTime;

/// What undo keeps, per session. Start from [`ChangesConfig::default`] and change fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChangesConfig {
    /// Record at all (default true; the plan must also name its workspace in [`crate::ExecPlan::record`]).
    pub enabled: bool,
    /// Commands whose changes are kept (default 20, newest first; older ones are dropped and counted).
    pub keep: usize,
    /// Bytes the session's store may hold, baseline included (default 1 GiB). Past it the oldest records are
    /// dropped; a workspace whose baseline alone is larger is not recorded (and [`crate::Executor::changes`] says so).
    pub max_bytes: u64,
    /// Files larger than this are not copied (default 16 MiB): their changes are listed, marked not kept, and an undo
    /// that would need their old content is refused (or, forced, skips them).
    pub max_file_bytes: u64,
    /// Entries a recorded workspace may have (default 100,000): a larger one is not recorded.
    pub max_files: usize,
    /// How long a session's first recorded command waits for the workspace's baseline (default 3 s; about a second
    /// per 10,000 files): past it the command runs unrecorded and the baseline goes on for the commands after it.
    pub baseline_wait: std::time::Duration,
    /// Trees not recorded, neither copied nor watched. An entry without a `/` matches that name anywhere
    /// (`node_modules`); one with a `/` is a path from the workspace's root (`.git/objects`). Default:
    /// [`DEFAULT_IGNORED`].
    pub ignore: Vec<String>,
}

/// What is not recorded by default: build outputs and installed dependencies (rebuilt, not restored), caches, and
/// git's object database (append-only: the work tree, the index and the refs are recorded).
pub const DEFAULT_IGNORED: &[&str] = &[
    ".git/objects",
    "node_modules",
    "target",
    ".venv",
    "__pycache__",
    ".cache",
];

impl Default for ChangesConfig {
    fn default() -> ChangesConfig {
        ChangesConfig {
            enabled: true,
            keep: 20,
            max_bytes: 1 << 30,
            max_file_bytes: 16 << 20,
            max_files: 100_000,
            baseline_wait: std::time::Duration::from_secs(3),
            ignore: DEFAULT_IGNORED.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// One command's recorded changes.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CommandChanges {
    /// The command's process id.
    pub id: ProcessId,
    /// The command.
    pub command: String,
    /// When its recording ended (the command's exit).
    pub ended: SystemTime,
    /// What it changed (absolute paths beneath [`ChangesList::workspace`]; renames are listed as a deletion and a
    /// creation).
    pub changes: ChangeSet,
    /// Paths whose old content was not kept (larger than [`ChangesConfig::max_file_bytes`]).
    pub not_kept: Vec<PathBuf>,
    /// Other commands of the session that ran at the same time (their changes could not be told apart from this
    /// one's, so both records hold them).
    pub overlapped: Vec<ProcessId>,
    /// It has been undone.
    pub undone: bool,
}

/// A session's recorded commands ([`crate::Executor::changes`]).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ChangesList {
    /// The workspace recorded (`None` until a recorded command ran).
    pub workspace: Option<PathBuf>,
    /// Commands that changed something, newest first.
    pub commands: Vec<CommandChanges>,
    /// Older records dropped to stay within [`ChangesConfig::keep`] and [`ChangesConfig::max_bytes`].
    pub dropped: usize,
    /// Why nothing is recorded for this session, when nothing is (too many files, the platform, …).
    pub not_recording: Option<String>,
}

/// What an undo did ([`crate::Executor::undo`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Undone {
    /// The command undone.
    pub id: ProcessId,
    /// The command's text.
    pub command: String,
    /// Paths put back as they were before the command (content, mode and owner).
    pub restored: Vec<PathBuf>,
    /// Paths the command had created, removed.
    pub removed: Vec<PathBuf>,
    /// Paths left as they are: their old content was not kept, or (forced) a later change touched them.
    pub skipped: Vec<PathBuf>,
}
