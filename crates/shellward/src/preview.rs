//! Previews on the facade: `execute` with `preview: true` runs the decided plan in a copy-on-write view
//! (`shellward_exec::Executor::preview`) and answers with its change set ([`PreviewReport`]) and `applied: false`.
//!
//! What a preview cannot show is said in every report ([`CANNOT_SHOW`]); the limits are the executor's defaults
//! (10 s, 256 MiB of layer, 1,000 changes listed, 64 KiB of diffs).

use crate::decided::Decided;
use crate::error::ToolError;
use crate::tools::ExecuteResult;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use shellward_exec::{ChangeSet, ExecPlan, PreviewLimits};
use std::path::Path;

/// What every preview says it cannot show.
pub const CANNOT_SHOW: &str = "A preview shows changes to files beneath the writable paths only. It cannot show \
     effects outside the file system (a git push, a database, a network call: the network is cut, so such a command \
     fails in the preview), and the real run may differ (time, randomness, the network). Paths outside the writable \
     ones are refused in the preview as in a real run.";

/// A preview's change set, as the tools answer it (see [`ExecuteResult::preview`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct PreviewReport {
    /// One line: `would delete 3 paths (src/a.rs, …), modify 1, create 0`.
    pub summary: String,
    /// The changes, in path order (at most 1,000; `omitted` counts the rest).
    pub changes: Vec<PreviewChange>,
    /// Changes found but not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: usize,
    /// How many of each kind, listed or not.
    pub totals: PreviewTotals,
    /// Bytes the command wrote into its throwaway layer.
    pub bytes_written: u64,
    /// The command was stopped at the preview's space limit: it may change more.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub space_exceeded: bool,
    /// Writable paths the preview kept read-only (a writable file, not a directory), with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only: Vec<ReadOnlyPath>,
    /// What a preview cannot show.
    pub cannot_show: String,
}

/// A writable path a preview kept read-only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct ReadOnlyPath {
    /// The path.
    pub path: String,
    /// Why.
    pub why: String,
}

/// Counts of a preview's kinds of change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct PreviewTotals {
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

/// One path's change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct PreviewChange {
    /// The absolute path (for a rename: where it is now).
    pub path: String,
    /// `created`, `modified`, `deleted`, `renamed` or `mode_changed`.
    pub kind: String,
    /// `file`, `directory`, `symlink` or `other`.
    pub entry: String,
    /// For a rename: where it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renamed_from: Option<String>,
    /// Size before, in bytes (files and symlinks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_before: Option<u64>,
    /// Size after, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_after: Option<u64>,
    /// Permission bits before, in octal (`"644"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode_before: Option<String>,
    /// Permission bits after, in octal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode_after: Option<String>,
    /// A unified diff of a small text file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The SHA-256 of the new content where no diff is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256_after: Option<String>,
    /// A symlink's target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_target: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl PreviewReport {
    /// The report of `set`, its summary's paths relative to `base`.
    pub fn from_change_set(set: &ChangeSet, base: Option<&Path>) -> PreviewReport {
        let octal = |m: Option<u32>| m.map(|m| format!("{m:o}"));
        let path = |p: &Path| p.display().to_string();
        PreviewReport {
            summary: set.summary(base),
            changes: set
                .changes
                .iter()
                .map(|c| PreviewChange {
                    path: path(&c.path),
                    kind: c.kind.as_str().to_string(),
                    entry: c.entry.as_str().to_string(),
                    renamed_from: c.renamed_from.as_deref().map(path),
                    size_before: c.size_before,
                    size_after: c.size_after,
                    mode_before: octal(c.mode_before),
                    mode_after: octal(c.mode_after),
                    diff: c.diff.clone(),
                    sha256_after: c.sha256_after.clone(),
                    link_target: c.link_target.as_deref().map(path),
                })
                .collect(),
            omitted: set.omitted,
            totals: PreviewTotals {
                created: set.totals.created,
                modified: set.totals.modified,
                deleted: set.totals.deleted,
                renamed: set.totals.renamed,
                mode_changed: set.totals.mode_changed,
            },
            bytes_written: set.bytes_written,
            space_exceeded: set.space_exceeded,
            read_only: set
                .read_only
                .iter()
                .map(|(p, why)| ReadOnlyPath {
                    path: path(p),
                    why: why.clone(),
                })
                .collect(),
            cannot_show: CANNOT_SHOW.to_string(),
        }
    }
}

/// Most changed paths listed with a question (the summary counts them all).
const QUESTION_PATHS: usize = 20;

impl crate::runner::Runner {
    /// The change set an asked command would make, for its question (`[approvals] preview`): its summary and up to
    /// [`QUESTION_PATHS`] changed paths, relative to where it runs; `None` where this host cannot preview, or the
    /// plan's writes are not confined. A preview that fails to run says so instead.
    pub(crate) async fn question_preview(&self, decided: &Decided) -> Option<String> {
        let crate::Verdict::Ask { plan, .. } = decided.verdict().clone() else {
            return None;
        };
        let executor = &self.executor;
        if executor.preview_support().is_err() || plan.confinement.writable.is_none() {
            return None;
        }
        let mut plan = plan;
        plan.workdir = self.workdir_of(&plan);
        let base = plan.workdir.clone();
        let preview = match executor.preview(plan, &PreviewLimits::default()).await {
            Ok(p) => p,
            Err(e) => return Some(format!("could not be previewed ({e})")),
        };
        let set = &preview.changes;
        let mut text = set.summary(base.as_deref());
        if preview.result.exit != shellward_exec::ExitState::Code(0) {
            text.push_str(&format!(
                " (the preview ended with {})",
                preview.result.exit
            ));
        }
        for c in set.changes.iter().take(QUESTION_PATHS) {
            let shown = base
                .as_deref()
                .and_then(|b| c.path.strip_prefix(b).ok())
                .filter(|r| !r.as_os_str().is_empty())
                .unwrap_or(&c.path);
            text.push_str(&format!("\n{} {}", c.kind.as_str(), shown.display()));
        }
        let more = set
            .totals
            .all()
            .saturating_sub(QUESTION_PATHS.min(set.changes.len()));
        if more > 0 {
            text.push_str(&format!("\n… and {more} more"));
        }
        Some(text)
    }

    /// Runs a decided plan (a run, or an ask: a preview needs no approval, since nothing of it is applied) as a
    /// preview and shapes the answer: the command's run, `applied: false`, the change set.
    pub(crate) async fn run_preview(
        &self,
        decided: &Decided,
        plan: ExecPlan,
        notes: Vec<String>,
    ) -> Result<ExecuteResult, ToolError> {
        let executor = &self.executor;
        let mut plan = plan;
        plan.workdir = self.workdir_of(&plan);
        let base = plan.workdir.clone();
        let command = plan.command.clone();
        let timeout = plan.timeout;
        let preview = executor
            .preview(plan, &PreviewLimits::default())
            .await
            .map_err(ToolError::from)?;
        let _ = decided;
        let report = PreviewReport::from_change_set(&preview.changes, base.as_deref());
        let mut notes = crate::run::policy_notes(notes);
        notes.insert(
            0,
            crate::Note::new(
                crate::NoteKind::Changes,
                format!(
                    "Preview only, nothing was applied: the command {}. Run it again without `preview` to apply it.",
                    report.summary
                ),
            ),
        );
        let mut result = crate::shape::shape_execute(
            preview.result,
            command,
            notes,
            timeout,
            true,
            false,
            false,
        );
        // A preview's process ended with its sandbox: it has no id to read or signal.
        result.process_id = None;
        result.background_process_id = None;
        result.running = false;
        result.applied = Some(false);
        result.preview = Some(Box::new(report));
        Ok(result)
    }
}
