//! Shaping results for the model: an executor result into the `execute` result with the notes that say what to do
//! next, and the file through which a foreground command reports its last working directory.

use crate::note::{Note, NoteKind, Refusal};
use crate::tools::ExecuteResult;
use shellward_exec::{ExecResult, ExitState};
use shellward_policy::duration::format_millis;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A fresh file name for a command to leave its last working directory in (`None` when the directory's path is not
/// plain enough for the executor's `EXIT` trap: see `ExecPlan::report_cwd`).
pub(crate) fn cwd_file(dir: Option<&Path>) -> Option<PathBuf> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let file = dir?.join(format!(
        ".shellward-cwd-{}-{n}-{nanos:x}",
        std::process::id()
    ));
    let text = file.to_str()?;
    text.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%,=".contains(&b))
        .then_some(file)
}

/// Reads and removes what the executor's `EXIT` trap (`ExecPlan::report_cwd`) wrote: an existing absolute directory, else `None`. The file is opened without
/// following a link or blocking on a FIFO, and only a small regular file is read.
pub(crate) fn read_cwd_file(file: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let opened = crate::sys::open_regular(file);
    let _ = std::fs::remove_file(file);
    let mut f = opened.ok()?;
    let mut text = String::new();
    f.by_ref().take(4096).read_to_string(&mut text).ok()?;
    let dir = PathBuf::from(text.trim_end_matches('\n'));
    (dir.is_absolute() && dir.is_dir()).then_some(dir)
}

/// Bytes left out of a result past which the note suggests searching the log rather than paging through it (four
/// calls of the default page size).
const SEARCH_THE_LOG_PAST: u64 = 256 * 1024;

/// The note for output left out of a result's middle: where the rest is, and — when there is much of it — to search
/// the log with a command (`grep`, `tail`) instead of paging through it 64 KiB at a time.
pub(crate) fn omitted_note(omitted: u64, id: &str, log: Option<&std::path::Path>) -> String {
    let pager = format!("process_output (process_id {id}, cursor 0)");
    match log {
        Some(log) if omitted > SEARCH_THE_LOG_PAST => {
            let log = shell_quote(&log.display().to_string());
            format!(
                "{omitted} bytes of output were left out of the middle. The whole output is in {log}: search it with \
                 a command such as `grep -n -i error {log}` or `tail -n 200 {log}` rather than paging through it with \
                 {pager}."
            )
        }
        Some(log) => format!(
            "{omitted} bytes of output were left out of the middle; read them with {pager} or from {}.",
            log.display()
        ),
        None => format!(
            "{omitted} bytes of output were left out of the middle; read them with {pager}."
        ),
    }
}

/// `text` as one shell word: as it is when it holds only characters no shell treats specially, else single-quoted.
pub(crate) fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%,=".contains(&b));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

pub(crate) fn reason_text(reason: String) -> String {
    if reason.trim().is_empty() {
        "the policy refused the command (it gave no reason)".into()
    } else {
        reason
    }
}

/// Turns an executor result into the tool result, with notes saying what to do next. An `interactive` start gets no
/// background note here: the note on answering its prompt is added once the prompt is read. `promoted`: a policy, not
/// the caller, put it in the background (its notes say why and how to follow up).
pub(crate) fn shape_execute(
    r: ExecResult,
    command: String,
    policy_notes: Vec<Note>,
    timeout: Option<Duration>,
    kills_leftovers: bool,
    interactive: bool,
    promoted: bool,
) -> ExecuteResult {
    let (exit_code, signal) = exit_fields(&r.exit);
    let id = r.id.as_str().to_string();
    // What the policies (or the approval) said come first; the host's notes follow, each of its kind.
    let said_before = !policy_notes.is_empty();
    let mut notes = policy_notes;
    let mut say = |kind: NoteKind, text: String| notes.push(Note::new(kind, text));
    let timeout_text = timeout
        .map(|t| format_millis(t.as_millis() as u64))
        .unwrap_or_default();
    if !r.listening.is_empty() {
        say(
            NoteKind::Background,
            format!(
                "Ready: {id} is listening on {}.",
                r.listening
                    .iter()
                    .map(|l| l.split_once(' ').map_or(l.as_str(), |(_, a)| a))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    let background_id = if r.running {
        if r.timed_out {
            say(
                NoteKind::Timeout,
                format!(
                    "Still running as {id} after the {timeout_text} timeout. Call process_output with process_id \
                 {id} (and cursor {}) to read more, or process_signal to stop it.",
                    r.cursor
                ),
            );
        } else if interactive {
            // Said by the prompt's note (how to answer it, how to stop it).
        } else if promoted && said_before {
            // A policy moved it to the background and said why; the policy that moves a command says how to follow
            // up (the default one does), so the id is the one fact left: one note per fact.
            say(
                NoteKind::Background,
                format!("Running in the background as {id}."),
            );
        } else {
            say(
                NoteKind::Background,
                format!(
                    "Running in the background as {id}. Call process_output with process_id {id} to read its \
                 output, process_signal to stop it."
                ),
            );
        }
        Some(id.clone())
    } else {
        if r.timed_out {
            say(
                NoteKind::Timeout,
                format!(
                    "Timed out after {timeout_text}; the command and every process it started were terminated. Run it \
                 with a longer timeout, or with run_in_background and poll process_output."
                ),
            );
        }
        if r.leftover_processes > 0 {
            let fate = match timeout.filter(|_| kills_leftovers) {
                Some(_) => format!(
                    "they will be stopped when the {timeout_text} timeout (counted from the start) is reached; stop \
                     them sooner with process_signal, or start such work with run_in_background"
                ),
                None => "stop them with process_signal".to_string(),
            };
            say(
                NoteKind::Leftover,
                format!(
                    "The command exited but {} process(es) it started are still running, tracked as {id}; {fate}.",
                    r.leftover_processes
                ),
            );
        }
        None
    };
    if r.output_incomplete {
        say(
            NoteKind::Output,
            "Output may be incomplete: a process kept the output open after the command exited."
                .into(),
        );
    }
    if r.process_limit_hit {
        say(
            NoteKind::Refused(Refusal::ProcessLimit),
            "The command reached its limit of processes (a fork bomb, or too much parallelism): starting more \
             failed, so its result is not to be trusted. Run fewer processes at once (e.g. make -j4)."
                .into(),
        );
    }
    if r.output.omitted_bytes > 0 {
        say(
            NoteKind::Output,
            omitted_note(r.output.omitted_bytes, &id, r.log_path.as_deref()),
        );
    }
    let success = if r.running {
        !r.process_limit_hit
    } else {
        !r.timed_out && !r.process_limit_hit && r.exit == ExitState::Code(0)
    };
    ExecuteResult {
        success,
        denied: false,
        deny_reason: None,
        command,
        exit_code,
        signal,
        timed_out: r.timed_out,
        running: r.running,
        wall_duration_ms: r.wall_ms,
        output: r.output.text,
        output_omitted_bytes: r.output.omitted_bytes,
        stderr: r.stderr.map(|v| v.text),
        output_total_bytes: r.output.total_bytes,
        output_incomplete: r.output_incomplete,
        process_limit_hit: r.process_limit_hit,
        log_path: r.log_path.map(|p| p.display().to_string()),
        cursor: r.cursor,
        process_id: Some(id),
        background_process_id: background_id,
        listening: r.listening,
        notes,
        attached: false,
        confinement: None,
        pending_approval: None,
        applied: None,
        preview: None,
    }
}

/// A process's exit as the tools report it: the exit code, or the signal's name (by number when it has none).
pub(crate) fn exit_fields(exit: &ExitState) -> (Option<i32>, Option<String>) {
    (
        exit.code(),
        exit.signal()
            .map(str::to_string)
            // A signal this platform has no name for (a real-time one) is still reported, by number.
            .or_else(|| exit.signal_number().map(|n| format!("signal {n}"))),
    )
}
