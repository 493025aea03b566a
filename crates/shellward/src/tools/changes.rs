//! The undo tools' arguments and results: `changes_list` (the session's recorded commands and what each changed)
//! and `changes_undo` (take one back). What they run is `crate::undo`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `changes_list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ChangesListArgs {
    /// Paths listed per command at most (default 50; the rest are counted in `omitted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_paths: Option<usize>,
}

/// Arguments of `changes_undo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ChangesUndoArgs {
    /// The command to undo (its process id, from `execute` or `changes_list`). Default: the newest command of this
    /// session that changed something and is not undone yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_id: Option<String>,
    /// Undo even where a later change touched the same paths (that later change is overwritten), and leave files
    /// whose old content was not kept as they are.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
}

impl ChangesUndoArgs {
    /// Undo of command `process_id` (`None`: the newest not undone).
    pub fn new(process_id: Option<&str>) -> ChangesUndoArgs {
        ChangesUndoArgs {
            process_id: process_id.map(str::to_string),
            force: false,
        }
    }

    /// The same, forced.
    pub fn forced(mut self) -> ChangesUndoArgs {
        self.force = true;
        self
    }
}

/// One path a command changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct ChangedPath {
    /// The path, relative to the workspace.
    pub path: String,
    /// `created`, `modified`, `deleted` or `mode_changed`.
    pub kind: String,
    /// `file`, `directory`, `symlink` or `other`.
    pub entry: String,
    /// Size before, in bytes (absent where it did not exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_before: Option<u64>,
    /// Size after, in bytes (absent where it no longer exists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_after: Option<u64>,
}

/// One recorded command in `changes_list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct ChangedCommand {
    /// The command's process id (what `changes_undo` takes).
    pub process_id: String,
    /// The command.
    pub command: String,
    /// When it ended, seconds since the Unix epoch.
    pub ended_at_unix: u64,
    /// One line: how many paths it deleted, modified and created, and a few of them.
    pub summary: String,
    /// The paths it changed (at most `max_paths`).
    pub changes: Vec<ChangedPath>,
    /// Changes not listed past `max_paths`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: usize,
    /// It has been undone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub undone: bool,
    /// Paths whose old content was not kept (too large): an undo leaves them as they are (with `force`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_kept: Vec<String>,
    /// Other commands of the session that ran at the same time: their changes could not be told apart, so each
    /// record holds both.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overlapped: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The result of `changes_list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct ChangesListResult {
    /// Always true for a result.
    pub success: bool,
    /// The workspace recorded (absent until a command of the session ran in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The session's commands that changed something, newest first.
    pub commands: Vec<ChangedCommand>,
    /// Older commands no longer kept (past `[changes] keep` or `max_bytes`): they cannot be undone.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: usize,
    /// Why nothing is recorded for this session, when nothing is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_recording: Option<String>,
}

/// The result of `changes_undo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct ChangesUndoResult {
    /// The command's changes were taken back.
    pub success: bool,
    /// The command undone.
    pub process_id: String,
    /// Its text.
    pub command: String,
    /// Paths put back as they were before it (relative to the workspace).
    pub restored: Vec<String>,
    /// Paths it had created, removed.
    pub removed: Vec<String>,
    /// Paths left as they are (their old content was not kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// What to know next.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<crate::Note>,
}

pub(crate) const CHANGES_LIST_DESCRIPTION: &str = "\
List what your recent commands changed in the workspace, newest first: for each command that created, modified or \
deleted files, its process_id, a one-line summary and the paths. Use it before changes_undo to find the command to \
take back. Build outputs and installed dependencies (node_modules, target, .venv, __pycache__) and .git/objects are \
not recorded.";

pub(crate) const CHANGES_UNDO_DESCRIPTION: &str = "\
Take back what one of your commands changed in the workspace: files it modified or deleted are put back as they \
were (content and mode), files and directories it created are removed. Give process_id (from execute or \
changes_list); without it the newest command not yet undone is taken back. Refused, with nothing changed, when a \
later command (or anyone else) changed the same paths since (undo that later command first, or pass force: true to \
overwrite it), when the command was already undone, or when it is not one of this session's. Effects outside the \
workspace's files (a push, a database, a network call) are not undone.";
