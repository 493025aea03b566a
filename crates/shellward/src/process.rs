//! The tools that work on a started process: `process_output`, `process_input`, `process_list`, `process_signal`.

use crate::decide::{check_text, parse_duration};
use crate::note::{Note, NoteKind};
use crate::shape::exit_fields;
use crate::tools::{
    ProcessEntry, ProcessInputArgs, ProcessListArgs, ProcessListResult, ProcessOutputArgs,
    ProcessOutputResult, ProcessSignalArgs, ProcessSignalResult, SignalName,
};
use crate::{INPUT_LIMIT, SessionHandle, ToolError};
use shellward_exec::{ReadOptions, Session, SignalKind};
use shellward_policy::duration::format_millis;

impl SessionHandle {
    /// The `process_output` tool: output since a cursor (or the head/tail view), waiting up to its `wait`.
    pub async fn process_output(
        &self,
        args: ProcessOutputArgs,
    ) -> Result<ProcessOutputResult, ToolError> {
        let session = self.name();
        let mut r = self.process_output_now(args).await?;
        self.sw
            .inner
            .runner
            .lead_with_pending_notes(session, &mut r.notes);
        Ok(r)
    }

    /// The `process_input` tool: writes text (or closes stdin), then reads as `process_output` does.
    pub async fn process_input(
        &self,
        args: ProcessInputArgs,
    ) -> Result<ProcessOutputResult, ToolError> {
        let session = self.name();
        let mut r = self.process_input_now(args).await?;
        self.sw
            .inner
            .runner
            .lead_with_pending_notes(session, &mut r.notes);
        Ok(r)
    }

    /// The `process_signal` tool: stops a process's tree (terminate, then kill after the grace period; or kill).
    pub async fn process_signal(
        &self,
        args: ProcessSignalArgs,
    ) -> Result<ProcessSignalResult, ToolError> {
        let session = self.name();
        let mut r = self.process_signal_now(args).await?;
        self.sw
            .inner
            .runner
            .lead_with_pending_notes(session, &mut r.notes);
        Ok(r)
    }

    /// `process_output`: output since a cursor (or the head/tail view), waiting up to `wait`.
    async fn process_output_now(
        &self,
        args: ProcessOutputArgs,
    ) -> Result<ProcessOutputResult, ToolError> {
        let session = self.name();
        check_text("process_id", &args.process_id)?;
        let limits = &self.sw.inner.limits;
        let mut notes = Vec::new();
        let mut wait = match &args.wait {
            None => limits.default_wait,
            Some(w) => parse_duration("wait", w, true)?,
        };
        if wait > limits.max_wait {
            notes.push(Note::new(
                NoteKind::Other,
                format!(
                    "wait was shortened to {} (the longest allowed); call again to wait longer.",
                    format_millis(limits.max_wait.as_millis() as u64)
                ),
            ));
            wait = limits.max_wait;
        }
        // An explicit wait means "wait for it"; without one, a quiet process is answered after `default_idle`.
        let idle = match (&args.idle, &args.wait) {
            (Some(i), _) => Some(parse_duration("idle", i, true)?),
            (None, None) => Some(limits.default_idle),
            (None, Some(_)) => None,
        }
        .filter(|i| !i.is_zero());
        let id = args.process_id.trim();
        let process = crate::Process::new(&self.sw, session, id);
        let mut options = match args.cursor {
            Some(c) => ReadOptions::after(c),
            None => ReadOptions::view(),
        }
        .wait(wait)
        .max_bytes(limits.max_read_bytes);
        if let Some(idle) = idle {
            options = options.until_quiet(idle);
        }
        let read = process.read(&options).await?;
        let info = process.view()?;
        let (output, omitted, total) = match (&read.chunk, &read.view) {
            (Some(c), _) => (c.text.clone(), c.skipped_bytes, c.total_bytes),
            (None, Some(v)) => (v.text.clone(), v.omitted_bytes, v.total_bytes),
            (None, None) => (String::new(), 0, 0),
        };
        if read.next_cursor < total {
            notes.push(Note::new(
                NoteKind::Output,
                format!(
                    "{} more bytes are available now; call process_output again with cursor {}.",
                    total - read.next_cursor,
                    read.next_cursor
                ),
            ));
        } else if read.waiting_for_input {
            notes.push(Note::new(
                NoteKind::Input,
                format!(
                    "{id} is waiting for input: answer with process_input (process_id {id}), then read on from \
                     cursor {}.",
                    read.next_cursor
                ),
            ));
        } else if read.running {
            notes.push(Note::new(
                NoteKind::Background,
                format!(
                    "{id} is still running; call process_output with cursor {} for newer output, or \
                     process_signal to stop it.",
                    read.next_cursor
                ),
            ));
        }
        if args.cursor.is_none() && omitted > 0 {
            notes.push(Note::new(
                NoteKind::Output,
                format!(
                    "{omitted} bytes were left out of the middle; read them with cursor 0 (or from log_path)."
                ),
            ));
        }
        let (exit_code, signal) = exit_fields(&read.exit);
        Ok(ProcessOutputResult {
            success: true,
            process_id: id.to_string(),
            running: read.running,
            exit_code,
            signal,
            output,
            output_omitted_bytes: omitted,
            output_total_bytes: total,
            cursor: read.next_cursor,
            waiting_for_input: read.waiting_for_input,
            log_path: info.log_path.map(|p| p.display().to_string()),
            notes,
        })
    }

    /// `process_input`: writes text or bytes to an interactive process's stdin (closing it when asked), then returns
    /// what it printed after that, as `process_output` does with the output's cursor from before the write.
    async fn process_input_now(
        &self,
        args: ProcessInputArgs,
    ) -> Result<ProcessOutputResult, ToolError> {
        let session = self.name();
        use base64::Engine;
        check_text("process_id", &args.process_id)?;
        let id = args.process_id.trim().to_string();
        let data: Vec<u8> = match (&args.text, &args.bytes_base64) {
            (Some(_), Some(_)) => {
                return Err(ToolError::invalid(
                    "give either text or bytes_base64, not both",
                ));
            }
            (Some(t), None) => t.as_bytes().to_vec(),
            (None, Some(b)) => base64::engine::general_purpose::STANDARD
                .decode(b.trim())
                .map_err(|e| {
                    ToolError::invalid(format!(
                        "bytes_base64 is not valid base64 ({e}); encode the bytes with the standard alphabet"
                    ))
                })?,
            (None, None) if args.close_stdin == Some(true) => Vec::new(),
            (None, None) => {
                return Err(ToolError::invalid(
                    "nothing to write: give text (e.g. \"yes\\n\"), bytes_base64, or close_stdin: true",
                ));
            }
        };
        const MAX_INPUT: usize = 1 << 20;
        if data.len() > MAX_INPUT {
            return Err(ToolError::invalid(format!(
                "the input is {} bytes; at most {MAX_INPUT} bytes go in one call (write a file and redirect it \
                 instead)",
                data.len()
            )));
        }
        // The answer is what comes after the input.
        let process = crate::Process::new(&self.sw, session, &id);
        let before = process
            .read(&ReadOptions::view().max_bytes(0))
            .await?
            .next_cursor;
        if args.close_stdin.unwrap_or(false) {
            process.close_input(&data, INPUT_LIMIT).await?;
        } else {
            process.write(&data, INPUT_LIMIT).await?;
        }
        let mut result = self
            .process_output(ProcessOutputArgs {
                process_id: id,
                cursor: Some(before),
                wait: args.wait,
                idle: args.idle.or_else(|| {
                    Some(format_millis(
                        self.sw.inner.limits.default_idle.as_millis() as u64
                    ))
                }),
            })
            .await?;
        if args.close_stdin == Some(true) {
            result
                .notes
                .insert(0, Note::new(NoteKind::Input, "stdin is closed now."));
        }
        Ok(result)
    }

    /// The `process_list` tool: this session's background processes, running first, then newest first.
    pub async fn process_list(
        &self,
        _args: ProcessListArgs,
    ) -> Result<ProcessListResult, ToolError> {
        let session = self.name();
        let list = self.sw.inner.runner.executor.list(
            session.map(Session::from).as_ref(),
            self.sw.inner.limits.list_limit,
        );
        Ok(ProcessListResult {
            success: true,
            processes: list
                .processes
                .into_iter()
                .map(|p| {
                    let (exit_code, signal) = exit_fields(&p.exit);
                    ProcessEntry {
                        process_id: p.id.into_string(),
                        command: p.command,
                        workdir: p.workdir.display().to_string(),
                        running: p.running,
                        exit_code,
                        signal,
                        started_at_unix: p.started_at_unix,
                        exited_at_unix: p.exited_at_unix,
                        output_bytes: p.output_bytes,
                        log_path: p.log_path.map(|l| l.display().to_string()),
                    }
                })
                .collect(),
            omitted: list.omitted,
        })
    }

    /// `process_signal`: terminate or kill a whole process tree.
    async fn process_signal_now(
        &self,
        args: ProcessSignalArgs,
    ) -> Result<ProcessSignalResult, ToolError> {
        let session = self.name();
        check_text("process_id", &args.process_id)?;
        let id = args.process_id.trim();
        let kind = match args.signal {
            SignalName::Terminate => SignalKind::Terminate,
            SignalName::Kill => SignalKind::Kill,
        };
        let process = crate::Process::new(&self.sw, session, id);
        let outcome = process.signal(kind).await?;
        let info = process.view()?;
        let (exit_code, signal) = exit_fields(&info.exit);
        let mut said = vec![match args.signal {
            SignalName::Terminate => format!(
                "{id} and every process it started were terminated (SIGTERM, then SIGKILL for what remained)."
            ),
            SignalName::Kill => {
                format!("{id} and every process it started were killed (SIGKILL).")
            }
        }];
        if outcome.escaped_killed > 0 {
            said.push(format!(
                "{} process(es) of {id} had left its containment (moved to another cgroup); they were found by their \
                 marker and killed.",
                outcome.escaped_killed
            ));
        }
        if outcome.survivors > 0 {
            said[0] = format!(
                "{id} was signalled, but {} process(es) of its tree are still alive: they may have escaped \
                 containment. Check with process_list, and tell the operator.",
                outcome.survivors
            );
        }
        let notes = said
            .into_iter()
            .map(|text| Note::new(NoteKind::Leftover, text))
            .collect();
        Ok(ProcessSignalResult {
            success: !info.running && outcome.survivors == 0,
            process_id: id.to_string(),
            running: info.running || outcome.survivors > 0,
            exit_code,
            signal,
            notes,
        })
    }
}
