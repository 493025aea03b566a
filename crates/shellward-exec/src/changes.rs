//! Change sets: what a command would change in the paths it may write, read from a preview's copy-on-write layer
//! ([`crate::Executor::preview`]), and the bounds of a preview ([`PreviewLimits`]).
//!
//! The types are the same on every platform; only Linux fills them (`sys/linux/overlay.rs`), elsewhere a preview is
//! refused naming the platform ([`crate::Executor::preview_support`]).

use std::path::PathBuf;
use std::time::Duration;

/// What happened to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ChangeKind {
    /// It did not exist and now does.
    Created,
    /// Its content changed (and perhaps its mode).
    Modified,
    /// It existed and is gone (for a directory: every entry beneath it is listed too).
    Deleted,
    /// A file moved: deleted at [`Change::renamed_from`], created at [`Change::path`] with the same content.
    Renamed,
    /// Only its permission bits changed.
    ModeChanged,
}

impl ChangeKind {
    /// The kind as one lower-case word (`created`, `modified`, `deleted`, `renamed`, `mode_changed`).
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Created => "created",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
            ChangeKind::Renamed => "renamed",
            ChangeKind::ModeChanged => "mode_changed",
        }
    }
}

/// What a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntryType {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// Anything else (a FIFO, a socket, a device node).
    Other,
}

impl EntryType {
    /// The type as one lower-case word.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryType::File => "file",
            EntryType::Directory => "directory",
            EntryType::Symlink => "symlink",
            EntryType::Other => "other",
        }
    }
}

/// One path's change.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Change {
    /// The absolute path (as the command names it; for a rename, where it is now).
    pub path: PathBuf,
    /// What happened.
    pub kind: ChangeKind,
    /// What the path is now (for a deleted one: what it was).
    pub entry: EntryType,
    /// For [`ChangeKind::Renamed`]: where it was.
    pub renamed_from: Option<PathBuf>,
    /// Size before and after, in bytes (files and symlinks; `None` where it did not exist).
    pub size_before: Option<u64>,
    /// See [`Change::size_before`].
    pub size_after: Option<u64>,
    /// Permission bits before and after (`None` where it did not exist).
    pub mode_before: Option<u32>,
    /// See [`Change::mode_before`].
    pub mode_after: Option<u32>,
    /// A unified diff of a small text file's content (bounded by [`PreviewLimits::diff_file_bytes`] and the total
    /// [`PreviewLimits::diff_bytes`]); `None` for binary or large files, and when the budget is spent.
    pub diff: Option<String>,
    /// The SHA-256 of a file's new content (hex) where no diff is given.
    pub sha256_after: Option<String>,
    /// A symlink's target now (for a deleted one: what it was).
    pub link_target: Option<PathBuf>,
}

impl Change {
    /// A change of `kind` at `path`, with nothing else known yet.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn new(path: PathBuf, kind: ChangeKind, entry: EntryType) -> Change {
        Change {
            path,
            kind,
            entry,
            renamed_from: None,
            size_before: None,
            size_after: None,
            mode_before: None,
            mode_after: None,
            diff: None,
            sha256_after: None,
            link_target: None,
        }
    }
}

/// Everything a command changed (or would change) beneath its writable paths, in path order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChangeSet {
    /// The changes, at most [`PreviewLimits::max_changes`].
    pub changes: Vec<Change>,
    /// Changes found beyond [`PreviewLimits::max_changes`], not listed (counted in the totals below).
    pub omitted: usize,
    /// How many of each kind, listed or not: created, modified, deleted, renamed, mode-changed.
    pub totals: ChangeTotals,
    /// Bytes the command wrote into its copy-on-write layer.
    pub bytes_written: u64,
    /// The layer reached [`PreviewLimits::space`]: the command was stopped there, so it may have changed more.
    pub space_exceeded: bool,
    /// The writable paths the preview covered (the layers), in order.
    pub covered: Vec<PathBuf>,
    /// Writable paths the preview could not cover and so kept read-only (a writable file, not a directory; a path
    /// whose name the kernel's overlay options cannot carry), with why.
    pub read_only: Vec<(PathBuf, String)>,
}

/// Counts of a change set's kinds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChangeTotals {
    /// Paths created.
    pub created: usize,
    /// Paths modified.
    pub modified: usize,
    /// Paths deleted.
    pub deleted: usize,
    /// Files renamed.
    pub renamed: usize,
    /// Paths whose mode alone changed.
    pub mode_changed: usize,
}

impl ChangeTotals {
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn count(&mut self, kind: ChangeKind) {
        match kind {
            ChangeKind::Created => self.created += 1,
            ChangeKind::Modified => self.modified += 1,
            ChangeKind::Deleted => self.deleted += 1,
            ChangeKind::Renamed => self.renamed += 1,
            ChangeKind::ModeChanged => self.mode_changed += 1,
        }
    }

    /// Every change counted.
    pub fn all(&self) -> usize {
        self.created + self.modified + self.deleted + self.renamed + self.mode_changed
    }
}

impl ChangeSet {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.totals.all() == 0
    }

    /// One line for a person or a model: `would delete 3 files (src/a.rs, src/b.rs, …), modify 1, create 0`, paths
    /// shown relative to `base` where they are beneath it (at most three per kind).
    pub fn summary(&self, base: Option<&std::path::Path>) -> String {
        self.line(base, &WOULD)
    }

    /// [`ChangeSet::summary`] of what a command did: `deleted 3 paths (…), modified 1, created 0`.
    pub fn summary_done(&self, base: Option<&std::path::Path>) -> String {
        self.line(base, &DID)
    }

    fn line(&self, base: Option<&std::path::Path>, words: &Words) -> String {
        if self.is_empty() {
            return words.nothing.into();
        }
        let shown = |kind: ChangeKind| -> String {
            let names: Vec<String> = self
                .changes
                .iter()
                .filter(|c| c.kind == kind && c.entry != EntryType::Directory)
                .take(3)
                .map(|c| {
                    let p = base
                        .and_then(|b| c.path.strip_prefix(b).ok())
                        .filter(|r| !r.as_os_str().is_empty())
                        .unwrap_or(&c.path);
                    p.display().to_string()
                })
                .collect();
            if names.is_empty() {
                return String::new();
            }
            let more = if names.len() < 3 { "" } else { ", …" };
            format!(" ({}{more})", names.join(", "))
        };
        let t = &self.totals;
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let mut parts = vec![
            format!(
                "{} {} path{}{}",
                words.delete,
                t.deleted,
                plural(t.deleted),
                shown(ChangeKind::Deleted)
            ),
            format!(
                "{} {}{}",
                words.modify,
                t.modified,
                shown(ChangeKind::Modified)
            ),
            format!(
                "{} {}{}",
                words.create,
                t.created,
                shown(ChangeKind::Created)
            ),
        ];
        if t.renamed > 0 {
            parts.push(format!(
                "{} {}{}",
                words.rename,
                t.renamed,
                shown(ChangeKind::Renamed)
            ));
        }
        if t.mode_changed > 0 {
            parts.push(format!(
                "{} {}{}",
                words.mode,
                t.mode_changed,
                shown(ChangeKind::ModeChanged)
            ));
        }
        let mut line = parts.join(", ");
        if self.space_exceeded {
            line.push_str(" (stopped at the preview's space limit: it may change more)");
        }
        line
    }
}

/// The verbs of a summary line: what a preview would do, or what a command did.
struct Words {
    nothing: &'static str,
    delete: &'static str,
    modify: &'static str,
    create: &'static str,
    rename: &'static str,
    mode: &'static str,
}

const WOULD: Words = Words {
    nothing: "would change nothing in the writable paths",
    delete: "would delete",
    modify: "modify",
    create: "create",
    rename: "rename",
    mode: "change the mode of",
};

const DID: Words = Words {
    nothing: "changed nothing",
    delete: "deleted",
    modify: "modified",
    create: "created",
    rename: "renamed",
    mode: "changed the mode of",
};

/// The bounds of a preview ([`crate::Executor::preview`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PreviewLimits {
    /// How long the command may run (default 10 s; the plan's own timeout when shorter). It is then stopped, and
    /// the change set is what it had changed by then.
    pub time: Duration,
    /// Bytes the command may write into its copy-on-write layer (default 256 MiB); it is stopped there.
    pub space: u64,
    /// Changes listed at most (default 1,000; the rest are counted).
    pub max_changes: usize,
    /// Files larger than this (before or after) get no diff (default 64 KiB).
    pub diff_file_bytes: u64,
    /// Bytes of diffs in one change set at most (default 64 KiB).
    pub diff_bytes: usize,
}

impl Default for PreviewLimits {
    fn default() -> PreviewLimits {
        PreviewLimits {
            time: Duration::from_secs(10),
            space: 256 << 20,
            max_changes: 1000,
            diff_file_bytes: 64 << 10,
            diff_bytes: 64 << 10,
        }
    }
}

impl PreviewLimits {
    /// These limits with `time` as the run time.
    pub fn with_time(mut self, time: Duration) -> PreviewLimits {
        self.time = time;
        self
    }

    /// These limits with `space` bytes of layer.
    pub fn with_space(mut self, space: u64) -> PreviewLimits {
        self.space = space;
        self
    }
}

/// A preview's answer: the command's run (in the copy-on-write view, never applied) and what it changed there.
#[derive(Debug)]
#[non_exhaustive]
pub struct Preview {
    /// The run: exit, output, timing (its process id names a finished process of no session).
    pub result: crate::ExecResult,
    /// What it would change.
    pub changes: ChangeSet,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_kinds_and_a_few_paths() {
        let mut set = ChangeSet::default();
        for name in ["a.rs", "b.rs", "c.rs", "d.rs"] {
            set.changes.push(Change::new(
                PathBuf::from("/ws/src").join(name),
                ChangeKind::Deleted,
                EntryType::File,
            ));
            set.totals.count(ChangeKind::Deleted);
        }
        set.changes.push(Change::new(
            "/ws/Cargo.toml".into(),
            ChangeKind::Modified,
            EntryType::File,
        ));
        set.totals.count(ChangeKind::Modified);
        // Paths as this platform writes them (Windows: `src\\a.rs`).
        let rel = |name: &str| std::path::Path::new("src").join(name).display().to_string();
        assert_eq!(
            set.summary(Some(std::path::Path::new("/ws"))),
            format!(
                "would delete 4 paths ({}, {}, {}, …), modify 1 (Cargo.toml), create 0",
                rel("a.rs"),
                rel("b.rs"),
                rel("c.rs")
            )
        );
        assert_eq!(
            ChangeSet::default().summary(None),
            "would change nothing in the writable paths"
        );
    }
}
