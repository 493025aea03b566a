//! The undo tools (`changes_list`, `changes_undo`) over the executor's per-session recording
//! (`shellward_exec::undo`): results with paths relative to the workspace, summaries a model reads.

use crate::tools::{
    ChangedCommand, ChangedPath, ChangesListArgs, ChangesListResult, ChangesUndoArgs,
    ChangesUndoResult,
};
use crate::{SessionHandle, ToolError};
use shellward_exec::{ProcessId, Session};
use std::path::Path;

/// Paths listed per command when `max_paths` is not given.
const DEFAULT_MAX_PATHS: usize = 50;

fn relative(path: &Path, base: Option<&Path>) -> String {
    base.and_then(|b| path.strip_prefix(b).ok())
        .filter(|r| !r.as_os_str().is_empty())
        .unwrap_or(path)
        .display()
        .to_string()
}

impl SessionHandle {
    /// The `changes_list` tool: this session's commands that changed its workspace, newest first, with what each
    /// changed.
    pub async fn changes_list(
        &self,
        args: ChangesListArgs,
    ) -> Result<ChangesListResult, ToolError> {
        let session = self.name();
        let list = self
            .sw
            .inner
            .runner
            .executor
            .changes(session.map(Session::from).as_ref())
            .await?;
        let max = args.max_paths.unwrap_or(DEFAULT_MAX_PATHS);
        let base = list.workspace.as_deref();
        let commands = list
            .commands
            .iter()
            .map(|c| {
                let summary = c.changes.summary_done(base);
                ChangedCommand {
                    process_id: c.id.to_string(),
                    command: c.command.clone(),
                    ended_at_unix: c
                        .ended
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_secs())
                        .unwrap_or(0),
                    summary,
                    changes: c
                        .changes
                        .changes
                        .iter()
                        .take(max)
                        .map(|ch| ChangedPath {
                            path: relative(&ch.path, base),
                            kind: ch.kind.as_str().to_string(),
                            entry: ch.entry.as_str().to_string(),
                            size_before: ch.size_before,
                            size_after: ch.size_after,
                        })
                        .collect(),
                    omitted: c.changes.changes.len().saturating_sub(max),
                    undone: c.undone,
                    not_kept: c.not_kept.iter().map(|p| relative(p, base)).collect(),
                    overlapped: c.overlapped.iter().map(|o| o.to_string()).collect(),
                }
            })
            .collect();
        Ok(ChangesListResult {
            success: true,
            workspace: list.workspace.as_ref().map(|w| w.display().to_string()),
            commands,
            dropped: list.dropped,
            not_recording: list.not_recording,
        })
    }

    /// The `changes_undo` tool: takes back what one of this session's commands changed (the newest not undone by
    /// default). Refused ([`ToolErrorKind::Conflict`](crate::ToolErrorKind::Conflict)), with nothing changed, over a
    /// later change to the same paths (unless forced), for a command already undone and for another session's.
    pub async fn changes_undo(
        &self,
        args: ChangesUndoArgs,
    ) -> Result<ChangesUndoResult, ToolError> {
        let session = self.name();
        let session = session.map(Session::from);
        let executor = &self.sw.inner.runner.executor;
        let id = args.process_id.as_deref().map(ProcessId::from);
        let done = executor
            .undo(session.as_ref(), id.as_ref(), args.force)
            .await;
        // Every undo asked for is audited, done or refused (what was put back is the workspace's history).
        if let Some(audit) = &self.sw.inner.runner.audit {
            let mut record = serde_json::json!({
                "type": "undo",
                "surface": self.sw.inner.runner.surface,
                "session": session.as_ref().map(|s| s.as_str()),
                "process_id": args.process_id,
                "forced": args.force,
            });
            match &done {
                Ok(d) => {
                    record["process_id"] = serde_json::json!(d.id.as_str());
                    record["command"] = serde_json::json!(d.command);
                    record["restored"] = serde_json::json!(d.restored.len());
                    record["removed"] = serde_json::json!(d.removed.len());
                    record["skipped"] = serde_json::json!(d.skipped.len());
                }
                Err(e) => record["refused"] = serde_json::json!(e.to_string()),
            }
            audit.record(record);
        }
        let done = done?;
        let base = executor
            .changes(session.as_ref())
            .await
            .ok()
            .and_then(|l| l.workspace);
        let rel = |paths: &[std::path::PathBuf]| -> Vec<String> {
            paths.iter().map(|p| relative(p, base.as_deref())).collect()
        };
        let mut notes = Vec::new();
        if !done.skipped.is_empty() {
            notes.push(crate::Note::new(
                crate::NoteKind::Changes,
                "Some files were left as they are: their old content was too large to keep ([changes] \
                 max_file_bytes).",
            ));
        }
        notes.push(crate::Note::new(
            crate::NoteKind::Changes,
            "Only the workspace's files were put back: effects elsewhere (a push, a database, the network) are not \
             undone.",
        ));
        Ok(ChangesUndoResult {
            success: true,
            process_id: done.id.to_string(),
            command: done.command.clone(),
            restored: rel(&done.restored),
            removed: rel(&done.removed),
            skipped: rel(&done.skipped),
            notes,
        })
    }
}
