//! The text a model reads for a tool result (the MCP `text` content): a few header lines — how the command ended or
//! that it runs on, how long it took, what was left out and where the full log is, the policy's notes — then the
//! output as plain text, never escaped JSON. Rendered from the typed result; the full result goes beside it (MCP
//! `structuredContent`).

use super::typed::ToolOutput;
use super::{ExecuteResult, ProcessListResult, ProcessOutputResult, ProcessSignalResult};
use crate::ToolError;
use shellward_policy::duration::format_millis;

/// The parts of a result the header is made of.
#[derive(Default)]
struct Parts<'a> {
    denied: Option<&'a str>,
    /// The status line (none for a deny).
    status: Option<Status<'a>>,
    confinement: Option<&'a str>,
    omitted: u64,
    log_path: Option<&'a str>,
    /// The cursor to read on from (output and input results of a running process).
    cursor: Option<u64>,
    notes: &'a [crate::Note],
    output: &'a str,
    stderr: Option<&'a str>,
}

/// How the process ended, or that it runs on.
struct Status<'a> {
    id: &'a str,
    running: bool,
    timed_out: bool,
    exit_code: Option<i32>,
    signal: Option<&'a str>,
    wall_ms: Option<u64>,
}

impl<'a> Status<'a> {
    /// A process's state as a follow-up call sees it (no timeout, no wall time).
    fn of(
        id: &'a str,
        running: bool,
        exit_code: Option<i32>,
        signal: &'a Option<String>,
    ) -> Status<'a> {
        Status {
            id,
            running,
            timed_out: false,
            exit_code,
            signal: signal.as_deref(),
            wall_ms: None,
        }
    }

    fn line(&self) -> String {
        let ended = match (self.exit_code, self.signal) {
            (Some(c), _) => Some(format!("exit code {c}")),
            (None, Some(s)) => Some(format!("killed by {s}")),
            _ => None,
        };
        let id = self.id;
        let mut line = match (self.running, self.timed_out, ended) {
            (true, true, _) => format!("still running as {id} after its timeout"),
            (true, false, _) => format!("running as {id}"),
            (false, true, Some(e)) => format!("timed out; stopped ({e})"),
            (false, true, None) => "timed out; stopped".into(),
            (false, false, Some(e)) => e,
            (false, false, None) => "finished".into(),
        };
        if let Some(ms) = self.wall_ms {
            line.push_str(&format!(" · {}", format_millis(ms)));
        }
        line
    }
}

impl Parts<'_> {
    fn render(&self, list: Vec<String>) -> String {
        let mut head: Vec<String> = Vec::new();
        if let Some(reason) = self.denied {
            head.push(format!("denied: {reason}"));
        }
        if let Some(status) = &self.status {
            head.push(status.line());
        }
        if let Some(sandbox) = self.confinement {
            head.push(sandbox.to_string());
        }
        if self.omitted > 0 {
            let log = self
                .log_path
                .map(|p| format!("; full output in {p}"))
                .unwrap_or_default();
            head.push(format!(
                "{} bytes of output left out{log} (read them with process_output, cursor 0)",
                self.omitted
            ));
        }
        if let Some(c) = self.cursor {
            head.push(format!("next cursor: {c}"));
        }
        head.extend(list);
        head.extend(self.notes.iter().map(|n| format!("note: {n}")));
        let mut text = head.join("\n");
        let stderr = self.stderr.unwrap_or("");
        if !self.output.is_empty() || !stderr.is_empty() {
            text.push_str("\n---\n");
            text.push_str(self.output);
            if !stderr.is_empty() {
                if !self.output.is_empty() && !self.output.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str("--- stderr\n");
                text.push_str(stderr);
            }
        }
        text
    }
}

fn execute(r: &ExecuteResult) -> String {
    let id = r
        .process_id
        .as_deref()
        .or(r.background_process_id.as_deref())
        .unwrap_or("");
    Parts {
        denied: r.denied.then(|| {
            r.deny_reason
                .as_deref()
                .unwrap_or("the policy refused the command")
        }),
        status: (!r.denied).then_some(Status {
            id,
            running: r.running,
            timed_out: r.timed_out,
            exit_code: r.exit_code,
            signal: r.signal.as_deref(),
            wall_ms: Some(r.wall_duration_ms),
        }),
        confinement: r.confinement.as_deref(),
        omitted: r.output_omitted_bytes,
        log_path: r.log_path.as_deref(),
        notes: &r.notes,
        output: &r.output,
        stderr: r.stderr.as_deref(),
        ..Parts::default()
    }
    .render(Vec::new())
}

fn output(r: &ProcessOutputResult) -> String {
    Parts {
        status: Some(Status::of(&r.process_id, r.running, r.exit_code, &r.signal)),
        omitted: r.output_omitted_bytes,
        log_path: r.log_path.as_deref(),
        cursor: r.running.then_some(r.cursor),
        notes: &r.notes,
        output: &r.output,
        ..Parts::default()
    }
    .render(Vec::new())
}

fn list(r: &ProcessListResult) -> String {
    let mut lines = Vec::new();
    if r.processes.is_empty() {
        lines.push("no processes".to_string());
    }
    for p in &r.processes {
        let state = if p.running {
            "running".to_string()
        } else {
            match (p.exit_code, &p.signal) {
                (Some(c), _) => format!("exited {c}"),
                (None, Some(s)) => format!("killed by {s}"),
                (None, None) => "ended".into(),
            }
        };
        lines.push(format!("{}  {state}  {}", p.process_id, p.command));
    }
    if r.omitted > 0 {
        lines.push(format!("(+{} more)", r.omitted));
    }
    Parts::default().render(lines)
}

fn changes_list(r: &super::ChangesListResult) -> String {
    let mut lines = Vec::new();
    if let Some(why) = &r.not_recording {
        lines.push(format!("not recording: {why}"));
    } else if r.commands.is_empty() {
        lines.push("no command of this session has changed the workspace".to_string());
    }
    for c in &r.commands {
        let undone = if c.undone { "  (undone)" } else { "" };
        lines.push(format!(
            "{}  {}{undone}  {}",
            c.process_id, c.summary, c.command
        ));
    }
    if r.dropped > 0 {
        lines.push(format!("({} older commands no longer kept)", r.dropped));
    }
    Parts::default().render(lines)
}

fn changes_undo(r: &super::ChangesUndoResult) -> String {
    let mut lines = vec![format!(
        "undid {}: restored {}, removed {}{}",
        r.process_id,
        r.restored.len(),
        r.removed.len(),
        if r.skipped.is_empty() {
            String::new()
        } else {
            format!(", left {} as they are (not kept)", r.skipped.len())
        }
    )];
    for p in r.restored.iter().take(20) {
        lines.push(format!("restored {p}"));
    }
    for p in r.removed.iter().take(20) {
        lines.push(format!("removed {p}"));
    }
    Parts {
        notes: &r.notes,
        ..Parts::default()
    }
    .render(lines)
}

fn signal(r: &ProcessSignalResult) -> String {
    Parts {
        status: Some(Status::of(&r.process_id, r.running, r.exit_code, &r.signal)),
        notes: &r.notes,
        ..Parts::default()
    }
    .render(Vec::new())
}

impl ToolOutput {
    /// The text a model reads for this result: header lines (how it ended or that it runs on, how long it took,
    /// what was left out and where the full log is, the notes), then the output as plain text.
    pub fn model_text(&self) -> String {
        match self {
            ToolOutput::Execute(r) => execute(r),
            ToolOutput::ProcessOutput(r) | ToolOutput::ProcessInput(r) => output(r),
            ToolOutput::ProcessList(r) => list(r),
            ToolOutput::ProcessSignal(r) => signal(r),
            ToolOutput::ChangesList(r) => changes_list(r),
            ToolOutput::ChangesUndo(r) => changes_undo(r),
        }
    }
}

impl ToolError {
    /// The text a model reads for a failed call: `error: ` and what to do.
    pub fn model_text(&self) -> String {
        format!("error: {}", self.message)
    }
}
