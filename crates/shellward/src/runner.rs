//! The running half: its state (the executor, the audit log, the working directory each session continues in as its
//! last foreground command left it, the notes waiting for a session's next answer, the private directory commands
//! report their last working directory into) and running itself — a decided plan started on the executor
//! ([`Runner::run_plan`], [`Runner::start_recorded`]), the first-prompt wait of an interactive start, the guard that
//! records a call abandoned mid-run, the end records, the result shaped for the model.

use crate::note::{Note, NoteKind};
use crate::shape::{cwd_file, exit_fields, read_cwd_file, shape_execute};
use crate::tools::ExecuteResult;
use crate::{ToolError, confinement};
use serde_json::Value;
use shellward_exec::{
    ExecError, ExecPlan, ExecResult, Executor, PrivateDir, ProcessId, ReadOptions, Session,
};
use shellward_policy::duration::format_millis;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

/// Most notes kept for a session's next answer.
const MAX_PENDING_NOTES: usize = 8;

/// Most sessions remembered as told about an unwritable working directory (then they are told again).
const MAX_TOLD: usize = 4096;

/// Most sessions whose working directory is remembered: a client that names a new session per call cannot grow the
/// map without bound; past it the session that moved longest ago starts again in the default directory.
const MAX_SESSION_DIRS: usize = 4096;

/// Each session's working directory, bounded by [`MAX_SESSION_DIRS`] (the least recently moved one goes first).
#[derive(Default)]
struct SessionDirs {
    dirs: HashMap<Option<String>, (PathBuf, u64)>,
    next: u64,
}

impl SessionDirs {
    fn get(&self, session: &Option<String>) -> Option<PathBuf> {
        self.dirs.get(session).map(|(dir, _)| dir.clone())
    }

    fn remove(&mut self, session: &Option<String>) {
        self.dirs.remove(session);
    }

    fn insert(&mut self, session: Option<String>, dir: PathBuf) {
        if self.dirs.len() >= MAX_SESSION_DIRS
            && !self.dirs.contains_key(&session)
            && let Some(oldest) = self
                .dirs
                .iter()
                .min_by_key(|(_, (_, n))| *n)
                .map(|(k, _)| k.clone())
        {
            self.dirs.remove(&oldest);
        }
        self.next += 1;
        self.dirs.insert(session, (dir, self.next));
    }
}

/// What [`Runner::new`] takes beside the executor and the configuration.
pub(crate) struct RunnerParts<'a> {
    /// The audit log, when the configuration keeps one.
    pub(crate) audit: Option<crate::audit::AuditLog>,
    /// The surface this instance serves, for the audit log.
    pub(crate) surface: String,
    /// The counters the deciding half adds to as well.
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    /// The name of the executor's shell (`sh`, `bash`, ...): whether `trap … EXIT` reports a command's directory.
    pub(crate) shell_name: &'a str,
    /// Where commands report their last working directory.
    pub(crate) cwd_dir: Option<PrivateDir>,
}

/// What a [`crate::Shellward`] runs plans with (see the module docs).
pub(crate) struct Runner {
    pub(crate) executor: Executor,
    /// The audit log every start, end, cancel and approval is written to (none when not configured).
    pub(crate) audit: Option<crate::audit::AuditLog>,
    /// The surface this instance serves (`serve`, `mcp`, `run`, `library`), for the audit log.
    pub(crate) surface: String,
    /// Counters of starts and approvals (shared with the deciding half).
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    /// How long output is drained after a command's leader exits (`[executor] drain`).
    pub(crate) drain: Duration,
    /// How long the executor keeps an exited process (`[executor] retention`): how long a token's deny is kept.
    pub(crate) retention: Duration,
    /// A cancelled call's foreground command is kept in the background (`[tools] on_cancel = "background"`).
    pub(crate) keep_cancelled: bool,
    /// The paths no command can read (`[confinement] deny_read`), for the confinement line of a result.
    pub(crate) deny_read: Vec<PathBuf>,
    /// Where a plan without a working directory runs (`[executor] workdir`; `None`: this process's own).
    pub(crate) default_workdir: Option<PathBuf>,
    /// The executor's shell understands `trap … EXIT` (how a command's last directory is learned).
    posix_shell: bool,
    /// Each session's working directory, as its last foreground `execute` left it (a terminal keeps its `cd`).
    session_dirs: Mutex<SessionDirs>,
    /// The directory each session was given (`choose_session_dir`: an MCP client's root), its undo workspace.
    session_roots: Mutex<SessionDirs>,
    /// Notes for each session's next answer (a cancelled call's command kept in the background), a few at most.
    pending_notes: Mutex<HashMap<Option<String>, Vec<crate::Note>>>,
    /// The sessions already told their working directory is not writable (forgotten past [`MAX_TOLD`]).
    told_unwritable: Mutex<HashSet<Option<String>>>,
    /// A private directory for the files through which commands report their last working directory (writable to
    /// every confined command); removed with this instance.
    cwd_dir: Option<PrivateDir>,
}

impl Runner {
    /// Where `plan` runs: its own directory, else the executor's default (`[executor] workdir`, `mcp --workdir`),
    /// else this process's.
    pub(crate) fn workdir_of(&self, plan: &shellward_exec::ExecPlan) -> Option<PathBuf> {
        plan.workdir
            .clone()
            .or_else(|| self.default_workdir.clone())
            .or_else(|| std::env::current_dir().ok())
    }

    /// The workspace whose changes `plan` records for undo (`ExecPlan::record`): the directory the session was
    /// given (an MCP client's first root, `SessionHandle::set_workdir`), else the instance's working directory
    /// (`[executor] workdir`, `mcp --workdir`, else this process's), whichever the plan runs beneath first, else the
    /// plan's own directory; `None` for `/` and for a directory commands may not write.
    pub(crate) fn workspace_of(&self, plan: &ExecPlan) -> Option<PathBuf> {
        let workdir = self.workdir_of(plan)?;
        let session = plan.session.as_ref().map(|s| s.as_str().to_string());
        let given = self
            .session_roots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&session);
        let instance = self
            .default_workdir
            .clone()
            .or_else(|| std::env::current_dir().ok());
        let root = [given, instance]
            .into_iter()
            .flatten()
            .find(|d| workdir.starts_with(d) && d != Path::new("/"))
            .unwrap_or(workdir);
        if root == Path::new("/") {
            return None;
        }
        if let Some(paths) = &plan.confinement.writable
            && !paths.iter().any(|p| root.starts_with(p))
        {
            return None;
        }
        Some(root)
    }

    /// A runner over `executor`, configured by `config`, with the audit log, metrics and report directory of `parts`.
    pub(crate) fn new(executor: Executor, config: &crate::Config, parts: RunnerParts) -> Runner {
        Runner {
            executor,
            audit: parts.audit,
            surface: parts.surface,
            metrics: parts.metrics,
            drain: config.executor.drain,
            retention: config.executor.retention,
            keep_cancelled: config.tools.on_cancel == crate::config::OnCancel::Background,
            deny_read: config.confinement.deny_read.clone(),
            default_workdir: config.executor.default_workdir.clone(),
            posix_shell: matches!(
                parts.shell_name,
                "sh" | "bash" | "dash" | "zsh" | "ksh" | "ash"
            ),
            session_dirs: Mutex::new(SessionDirs::default()),
            session_roots: Mutex::new(SessionDirs::default()),
            pending_notes: Mutex::new(HashMap::new()),
            told_unwritable: Mutex::new(HashSet::new()),
            cwd_dir: parts.cwd_dir,
        }
    }

    /// Where commands report their last working directory, while this runner has that directory.
    pub(crate) fn cwd_dir(&self) -> Option<&Path> {
        self.cwd_dir.as_ref().map(|d| d.path())
    }

    /// Removes the directory commands report their last working directory into (nothing runs any more).
    pub(crate) fn remove_cwd_dir(&self) {
        if let Some(dir) = &self.cwd_dir {
            dir.remove();
        }
    }

    /// The file a foreground `plan` that follows its session's directory reports its last directory into: only for
    /// a POSIX shell, and not for background or interactive runs (their directory is not the session's).
    pub(crate) fn cwd_report_file(&self, follow: bool, plan: &ExecPlan) -> Option<PathBuf> {
        (follow && self.posix_shell && !plan.background && !plan.stdin.interactive())
            .then(|| cwd_file(self.cwd_dir()))
            .flatten()
    }

    /// The working directory `session`'s commands continue in, when one was left and still exists.
    pub(crate) fn session_dir(&self, session: Option<&str>) -> Option<PathBuf> {
        let mut dirs = self.session_dirs.lock().unwrap_or_else(|p| p.into_inner());
        let key = session.map(str::to_string);
        match dirs.get(&key) {
            Some(dir) if dir.is_dir() => Some(dir),
            Some(_) => {
                dirs.remove(&key);
                None
            }
            None => None,
        }
    }

    /// `session`'s commands continue in `dir` from now on.
    pub(crate) fn set_session_dir(&self, session: Option<String>, dir: PathBuf) {
        self.session_dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session, dir);
    }

    /// The note for `session`'s first command in a working directory it cannot write (a client started in `/`): what
    /// fails there and how to choose another. Said once per session; `None` when `dir` is writable or it was said.
    pub(crate) fn unwritable_note(&self, session: Option<&str>, dir: &Path) -> Option<crate::Note> {
        if crate::sys::writable(dir) {
            return None;
        }
        let mut told = self
            .told_unwritable
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if told.len() >= MAX_TOLD {
            told.clear();
        }
        if !told.insert(session.map(str::to_string)) {
            return None;
        }
        Some(crate::Note::new(
            crate::NoteKind::Workdir,
            format!(
                "The working directory {} is not writable by shellward's user, so commands that create or change \
                 files there fail. Give `workdir` a directory you can write, or start shellward where you work \
                 (`shellward mcp --workdir DIR`, `[executor] workdir`); an MCP client that sends roots gets its first \
                 root.",
                dir.display()
            ),
        ))
    }

    /// `session`'s commands continue in `dir` from now on, when it is an existing absolute directory.
    pub(crate) fn choose_session_dir(
        &self,
        session: Option<&str>,
        dir: &Path,
    ) -> Result<(), crate::ToolError> {
        if !dir.is_absolute() || !dir.is_dir() {
            return Err(crate::ToolError::invalid(format!(
                "{} is not an existing absolute directory; give one the session's commands should run in",
                dir.display()
            )));
        }
        self.set_session_dir(session.map(str::to_string), dir.to_path_buf());
        self.session_roots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session.map(str::to_string), dir.to_path_buf());
        // Its undo baseline is taken now, not at its first command.
        if crate::sys::writable(dir) {
            self.executor
                .prepare_changes(session.map(shellward_exec::Session::from).as_ref(), dir);
        }
        Ok(())
    }

    /// Adds a note for `session`'s next answer (at most [`MAX_PENDING_NOTES`]; the oldest go first).
    pub(crate) fn add_pending_note(&self, session: Option<&str>, note: crate::Note) {
        let mut notes = self.pending_notes.lock().unwrap_or_else(|p| p.into_inner());
        let list = notes.entry(session.map(str::to_string)).or_default();
        if list.len() >= MAX_PENDING_NOTES {
            list.remove(0);
        }
        list.push(note);
    }

    /// Puts the notes waiting for `session`'s next answer first in `notes` (and forgets them).
    pub(crate) fn lead_with_pending_notes(
        &self,
        session: Option<&str>,
        notes: &mut Vec<crate::Note>,
    ) {
        let pending = self
            .pending_notes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&session.map(str::to_string))
            .unwrap_or_default();
        notes.splice(0..0, pending);
    }
}

/// A decided plan as the runner starts it, with what it was decided from.
pub(crate) struct Start {
    /// What the executor runs.
    pub(crate) plan: ExecPlan,
    /// The notes for the agent so far (the policies', who approved).
    pub(crate) notes: Vec<crate::Note>,
    /// The session it runs in.
    pub(crate) session: Option<String>,
    /// The decision's audit record, when there is an audit log (the process id is added once it started).
    pub(crate) record: Option<Value>,
    /// The caller asked for the background itself (otherwise a background plan was a policy's promotion).
    pub(crate) asked_background: bool,
    /// A foreground command's last working directory becomes its session's (see `ExecPlan::report_cwd`).
    pub(crate) follow: bool,
}

/// Running: starting a decided plan on the executor, recording it, and shaping its result for the model.
impl Runner {
    /// Starts a decided plan (a run, or an approved ask) and shapes its result for the model; `on_start` hears its
    /// process id once it started.
    pub(crate) async fn run_plan(
        self: &Arc<Self>,
        start: Start,
        limits: &crate::ToolLimits,
        on_start: Box<dyn FnOnce(&ProcessId) + Send>,
    ) -> Result<ExecuteResult, ToolError> {
        let Start {
            mut plan,
            notes,
            session,
            record,
            asked_background,
            follow,
        } = start;
        let timeout = plan.timeout;
        // What the executor does with leftovers at the deadline: stop them when the timeout kills.
        let kills_leftovers = matches!(plan.on_timeout, shellward_exec::OnTimeout::Kill);
        let command = plan.command.clone();
        let cwd_file = self.cwd_report_file(follow, &plan);
        // The executor adds the report at the spawn: the plan (and what process_list shows) stays as approved.
        plan.report_cwd = cwd_file.clone();
        let startup = plan.background.then_some(plan.startup_wait).flatten();
        // Where it runs: the plan's directory, else the executor's default (`[executor] workdir`, `mcp --workdir`),
        // else this process's own.
        let workdir = self.workdir_of(&plan);
        let background = plan.background;
        let asked = plan.confinement.clone();
        let interactive = plan.stdin.interactive();
        let r = self
            .start_recorded(plan, background, record, session.clone(), on_start)
            .await?;
        let id = r.id.clone();
        if let Some(file) = cwd_file {
            self.follow_reported_dir(file, &r, &session);
        }
        let held = r.confinement.clone();
        // What the sandbox saw refused, said whatever the command made of it (one note per kind).
        let seen = confinement::seen_refusal_notes(&asked, &r);
        let exit = r.exit.clone();
        let unwritable = workdir
            .as_deref()
            .and_then(|dir| self.unwritable_note(session.as_deref(), dir));
        // Put in the background by a policy, not asked for by the caller.
        let promoted = background && !asked_background;
        let mut result = shape_execute(
            r,
            command,
            notes,
            timeout,
            kills_leftovers,
            interactive,
            promoted,
        );
        if let Some(note) = unwritable {
            result.notes.insert(0, note);
        }
        result.confinement = confinement::line(
            &asked,
            &held,
            &self.deny_read,
            self.executor.pid_namespaces(),
        );
        // What the sandbox saw refused; else what the output shows.
        if !seen.is_empty() {
            result.notes.extend(seen);
        } else if !result.success
            && !result.running
            && let Some(note) =
                confinement::refusal_note(&asked, &held, &result.output, workdir.as_deref())
        {
            result.notes.push(note);
        }
        if interactive {
            self.first_prompt(
                &mut result,
                &id,
                session.as_deref().map(Session::from).as_ref(),
                limits,
            )
            .await?;
        }
        if let Some(window) = startup
            && !result.running
        {
            result.notes.push(Note::new(
                NoteKind::Background,
                format!(
                    "It exited during start-up (within {}) with {exit}, so it is not running in the background; \
                     its output is above.",
                    format_millis(window.as_millis() as u64)
                ),
            ));
        }
        Ok(result)
    }

    /// The directory a finished foreground command reported (`file`) becomes its session's; a command kept running
    /// after its timeout is not the session's: its report file is removed once it ends.
    fn follow_reported_dir(&self, file: PathBuf, r: &ExecResult, session: &Option<String>) {
        if !r.running {
            if let Some(dir) = read_cwd_file(&file) {
                self.set_session_dir(session.clone(), dir);
            }
            return;
        }
        let executor = self.executor.clone();
        let (id, session) = (r.id.clone(), session.clone());
        tokio::spawn(async move {
            let _ = executor
                .wait_exit(session.as_deref().map(Session::from).as_ref(), &id)
                .await;
            let _ = std::fs::remove_file(&file);
        });
    }

    /// An interactive start: waits until the program's output goes quiet (its prompt) or it exits, and puts that
    /// output in the result with how to answer it.
    async fn first_prompt(
        &self,
        result: &mut ExecuteResult,
        id: &ProcessId,
        session: Option<&Session>,
        limits: &crate::ToolLimits,
    ) -> Result<(), ToolError> {
        let read = self
            .executor
            .read_output(
                session,
                id,
                &ReadOptions::view()
                    .wait(limits.default_wait)
                    .until_quiet(limits.default_idle)
                    .max_bytes(limits.max_read_bytes),
            )
            .await?;
        if let Some(view) = read.view {
            result.output = view.text;
            result.output_omitted_bytes = view.omitted_bytes;
            result.output_total_bytes = view.total_bytes;
        }
        result.cursor = read.next_cursor;
        result.running = read.running;
        let (exit_code, signal) = exit_fields(&read.exit);
        result.exit_code = exit_code;
        result.signal = signal;
        if read.running {
            result.success = true;
            result.notes.push(Note::new(
                NoteKind::Input,
                format!(
                    "Interactive: {id} waits for input. Answer with process_input (process_id {id}, text ending in \
                     \"\\n\"); close_stdin ends its input; process_signal stops it."
                ),
            ));
        } else {
            result.success = exit_code == Some(0);
            result.background_process_id = None;
            result.notes.push(Note::new(
                NoteKind::Input,
                format!(
                    "It ended before any input was written ({}); its output is above.",
                    read.exit
                ),
            ));
        }
        Ok(())
    }

    /// Runs a plan on the executor and records it: the decision's audit record (with the process id, or the start
    /// error), the execute metrics (`background` is the mode the policies decided), and how the process ends.
    pub(crate) async fn start_recorded(
        self: &Arc<Self>,
        plan: ExecPlan,
        background: bool,
        record: Option<Value>,
        session: Option<String>,
        on_start: Box<dyn FnOnce(&ProcessId) + Send>,
    ) -> Result<ExecResult, ExecError> {
        // A caller that stops waiting (a cancelled call) stops the command (the executor's part); the audit log
        // still gets the decision, marked cancelled, and a record of the cancel.
        let started_id = Arc::new(std::sync::Mutex::new(None::<ProcessId>));
        let mut plan = plan;
        plan.record = self.workspace_of(&plan);
        let mut abandoned = Abandoned {
            runner: self.clone(),
            record: record.filter(|_| self.audit.is_some()),
            done: false,
            foreground: !plan.background,
            id: started_id.clone(),
            session: session.clone(),
            command: plan.command.clone(),
        };
        let r = self
            .executor
            .execute_observed(plan, |id| {
                *started_id.lock().unwrap_or_else(|p| p.into_inner()) = Some(id.clone());
                on_start(id)
            })
            .await;
        let record = abandoned.record.take();
        abandoned.done = true;
        if let (Some(audit), Some(mut record)) = (&self.audit, record) {
            match &r {
                Ok(r) => record["process_id"] = serde_json::json!(r.id.as_str()),
                Err(e) => record["error"] = serde_json::json!(e.to_string()),
            }
            audit.record(record);
        }
        let r = r?;
        self.metrics
            .execute(background, r.spawn_micros, r.timed_out);
        self.audit_end(&r, session);
        Ok(r)
    }

    /// Records how a started process ended: now when it already has, otherwise when it does (on a task of its own).
    pub(crate) fn audit_end(self: &Arc<Self>, r: &ExecResult, session: Option<String>) {
        let Some(audit) = &self.audit else {
            return;
        };
        let include_output = audit.include_output;
        if !r.running {
            let (code, signal) = exit_fields(&r.exit);
            let mut record = serde_json::json!({
                "type": "end",
                "surface": self.surface,
                "session": session,
                "process_id": r.id.as_str(),
                "exit_code": code,
                "signal": signal,
                "timed_out": r.timed_out,
                "duration_ms": r.wall_ms,
                "output_bytes": r.output.total_bytes,
                "leftover_processes": r.leftover_processes,
            });
            // What the sandbox refused it, as it saw it (not read from the output).
            if !r.refused_sockets.is_empty() {
                record["refused_sockets"] = serde_json::json!(r.refused_sockets);
            }
            if r.refused_unix_datagram {
                record["refused_unix_datagram"] = true.into();
            }
            if !r.refused_writes.is_empty() {
                record["refused_writes"] = serde_json::json!(r.refused_writes);
            }
            if !r.refused_network.is_empty() {
                record["refused_network"] = serde_json::json!(r.refused_network);
            }
            if include_output {
                record["output"] = serde_json::json!(r.output.text);
            }
            audit.record(record);
            return;
        }
        let this = self.clone();
        let id = r.id.clone();
        let (started, before) = (std::time::Instant::now(), r.wall_ms);
        let pending = audit.end_pending();
        tokio::spawn(async move {
            let _pending = pending;
            let exec_session = session.as_deref().map(Session::from);
            let Ok(info) = this.executor.wait_exit(exec_session.as_ref(), &id).await else {
                return;
            };
            let (code, signal) = exit_fields(&info.exit);
            let mut record = serde_json::json!({
                "type": "end",
                "surface": this.surface,
                "session": session,
                "process_id": id.as_str(),
                "exit_code": code,
                "signal": signal,
                "timed_out": false,
                "duration_ms": before + started.elapsed().as_millis() as u64,
                "output_bytes": info.output_bytes,
            });
            if include_output
                && let Ok(read) = this
                    .executor
                    .read_output(
                        exec_session.as_ref(),
                        &id,
                        &ReadOptions::view().max_bytes(64 * 1024),
                    )
                    .await
                && let Some(view) = read.view
            {
                record["output"] = serde_json::json!(view.text);
            }
            if let Some(audit) = &this.audit {
                audit.record(record);
            }
        });
    }
}

/// When the call that started a foreground run is dropped before the run ended (a cancelled MCP call, a cancelled
/// task, a client gone): the audit log gets its decision, marked `cancelled`, and a `cancel` record naming the process
/// and what became of it; when the operator keeps such runs (`[tools] on_cancel = "background"`), the session's next
/// answer says it runs on. (The executor stops or keeps the process itself.)
struct Abandoned {
    runner: Arc<Runner>,
    /// The decision record when there is an audit log, taken when the run ends normally.
    record: Option<Value>,
    /// Set when the run ended normally: nothing to do then.
    done: bool,
    /// A foreground run (a background start dropped during its start-up wait runs on anyway).
    foreground: bool,
    id: Arc<std::sync::Mutex<Option<ProcessId>>>,
    session: Option<String>,
    command: String,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let id = self
            .id
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .map(|id| id.as_str().to_string());
        let kept = !self.foreground || self.runner.keep_cancelled;
        if self.foreground
            && kept
            && let Some(id) = &id
        {
            let note = crate::Note::new(
                crate::NoteKind::Background,
                format!(
                    "{id} (`{}`) keeps running in the background: the call that started it was cancelled. Read its \
                     output with process_output; process_signal stops it.",
                    self.command
                ),
            );
            self.runner.add_pending_note(self.session.as_deref(), note);
        }
        let (Some(mut record), Some(audit)) = (self.record.take(), &self.runner.audit) else {
            return;
        };
        record["process_id"] = serde_json::json!(id);
        record["cancelled"] = serde_json::json!(true);
        audit.record(record);
        audit.record(serde_json::json!({
            "type": "cancel",
            "surface": self.runner.surface,
            "session": self.session,
            "process_id": id,
            "action": if kept {
                "kept: the caller stopped waiting (a cancelled call); the process runs on in the background"
            } else {
                "stopped: the caller stopped waiting (a cancelled call); the process tree is terminated"
            },
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client naming a new session per call cannot grow the remembered directories without bound: past the limit
    /// the session that moved longest ago is forgotten, and a session that moves again is kept.
    #[test]
    fn session_directories_are_bounded() {
        let mut dirs = SessionDirs::default();
        dirs.insert(Some("first".into()), "/a".into());
        for i in 0..MAX_SESSION_DIRS + 100 {
            dirs.insert(Some(format!("s{i}")), "/b".into());
            if i % 1000 == 0 {
                // Moving again keeps it recent.
                dirs.insert(Some("first".into()), "/a".into());
            }
        }
        assert_eq!(dirs.dirs.len(), MAX_SESSION_DIRS);
        assert_eq!(dirs.get(&Some("first".into())), Some("/a".into()));
        assert_eq!(
            dirs.get(&Some("s0".into())),
            None,
            "the oldest is forgotten"
        );
        let last = format!("s{}", MAX_SESSION_DIRS + 99);
        assert_eq!(dirs.get(&Some(last)), Some("/b".into()));
    }
}
