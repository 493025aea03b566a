//! Running what was decided: `execute` (with idempotent client tokens and the session's working directory), a
//! foreground or background run shaped for the model, a tracked start for hosts that stream (`shellward run`,
//! Coder's routes), and the audit record and metrics of every start and every deny.

use crate::approval::{Approval, Approver};
use crate::decide::check_text;
use crate::note::{Note, NoteKind};
use crate::shape::{exit_fields, read_cwd_file, shape_execute};
use crate::tools::{ExecuteArgs, ExecuteResult};
use crate::{
    Decided, Process, Shellward, ToolError, ToolErrorKind, Verdict, confinement, idempotency,
};
use serde_json::Value;
use shellward_exec::{ExecError, ExecPlan, ExecResult, ProcessId, ReadOptions, Session};
use shellward_policy::duration::format_millis;
use std::sync::Arc;
use std::time::Duration;

impl crate::SessionHandle {
    /// `execute`: the session's working directory, the policy chain, then the executor, with `options` (extra
    /// environment, a start callback, the surface's approver, labels, a deadline).
    ///
    /// With a `client_token`, the call is idempotent within the session: a retry of the same call (same arguments,
    /// same extra environment) returns the first call's result with `attached: true` and starts nothing, waiting for
    /// it when the first call is still running; the token with different arguments is a
    /// [`ToolErrorKind::Conflict`](crate::ToolErrorKind::Conflict). The first call runs on its own task, so a caller
    /// that goes away (a dropped connection) does not take the result its retry will ask for with it. A first call
    /// that fails before it has a result (an error, not a deny) releases the token. Results are kept as long as the
    /// executor keeps their process (`[executor] retention`).
    pub async fn execute(
        &self,
        args: ExecuteArgs,
        options: ExecuteOptions,
    ) -> Result<ExecuteResult, ToolError> {
        let session = self.name();
        let mut r = self.execute_tokened(args, options).await?;
        self.sw
            .inner
            .runner
            .lead_with_pending_notes(session, &mut r.notes);
        Ok(r)
    }

    /// [`SessionHandle::execute`](crate::SessionHandle::execute) but the pending notes: with a client token, the first call's result or an
    /// attached retry.
    async fn execute_tokened(
        &self,
        args: ExecuteArgs,
        options: ExecuteOptions,
    ) -> Result<ExecuteResult, ToolError> {
        let session = self.name();
        let Some(token) = args.client_token.clone() else {
            return self.execute_now(args, options).await;
        };
        check_client_token(&token)?;
        let scope = idempotency::TokenScope {
            session: session.map(str::to_string),
            within: None,
        };
        let fingerprint = execute_fingerprint(&args, &options.env);
        let this = self.clone();
        let once = self
            .sw
            .inner
            .execute_tokens
            .start_once(
                scope,
                &token,
                fingerprint,
                |scope, first, age| self.sw.token_expired(scope, first, age),
                None,
                move || async move {
                    let r = this.execute_now(args, options).await;
                    let outcome = r.as_ref().ok().cloned();
                    (r, outcome)
                },
            )
            .await;
        match once {
            idempotency::Once::Ran(r) => r,
            idempotency::Once::Attached(first) => Ok(self.attached(first, &token)),
            idempotency::Once::Mismatch => Err(ToolError::new(
                ToolErrorKind::Conflict,
                format!(
                    "client_token {token:?} was already used in this session for a different call; nothing was \
                     started. Use a new client_token for a new command (send the same token only to retry the very \
                     same call)"
                ),
            )),
            idempotency::Once::TaskFailed(e) => Err(ToolError::new(
                ToolErrorKind::Internal,
                format!("the execute call failed on its task: {e}"),
            )),
            // Waiting without a limit, a retry is never left pending.
            idempotency::Once::Pending | idempotency::Once::Busy => Err(ToolError::new(
                ToolErrorKind::Busy,
                format!(
                    "the call first sent with client_token {token:?} keeps failing before it starts; send it again"
                ),
            )),
        }
    }

    /// A retry's answer: the first call's result, its process's state brought up to date, marked `attached`.
    fn attached(&self, first: ExecuteResult, token: &str) -> ExecuteResult {
        let session = self.name();
        let mut r = first;
        r.attached = true;
        let what = match &r.process_id {
            Some(id) => format!("started as {id}"),
            None if r.denied => "denied".to_string(),
            None => "run".to_string(),
        };
        let mut notes = vec![Note::new(
            NoteKind::Other,
            format!(
                "A retry: client_token {token:?} was already {what} by an earlier call; nothing new was started. \
                 This is that call's result."
            ),
        )];
        if let Some(id) = r.process_id.clone()
            && r.running
            && let Ok(info) = self.sw.inner.runner.executor.info(
                session.map(Session::from).as_ref(),
                &ProcessId::from(id.as_str()),
            )
            && !info.running
        {
            let (exit_code, signal) = exit_fields(&info.exit);
            r.running = false;
            r.exit_code = exit_code;
            r.signal = signal;
            notes.push(Note::new(
                NoteKind::Leftover,
                format!(
                    "{id} has ended since ({}); read its output with process_output.",
                    info.exit
                ),
            ));
        }
        notes.append(&mut r.notes);
        r.notes = notes;
        r
    }

    /// `execute` without a client token: the session's working directory, the policies, the executor.
    async fn execute_now(
        &self,
        args: ExecuteArgs,
        options: ExecuteOptions,
    ) -> Result<ExecuteResult, ToolError> {
        let session = self.name();
        // The session's working directory, as its last command left it, unless the call names one (which wins for
        // this call and leaves the session's alone). The policies see it in the request.
        let mut args = args;
        let follow = args.workdir.is_none();
        if follow && let Some(dir) = self.sw.inner.runner.session_dir(session) {
            args.workdir = Some(dir.display().to_string());
        }
        let mut options = options;
        options.preview |= args.preview == Some(true);
        let decided = self.sw.inner.decider.decide(
            session.map(Session::from).as_ref(),
            &args,
            &options.env,
        )?;
        self.sw.run_decided_with(decided, follow, options).await
    }
}

impl Shellward {
    /// Whether the result a client token names is gone: its process left the executor's registry, or (a deny,
    /// which has no process) it is older than the executor's retention.
    fn token_expired(
        &self,
        scope: &idempotency::TokenScope,
        first: &ExecuteResult,
        age: Duration,
    ) -> bool {
        match &first.process_id {
            Some(id) => self
                .inner
                .runner
                .executor
                .info(
                    scope.session.as_deref().map(Session::from).as_ref(),
                    &ProcessId::from(id.as_str()),
                )
                .is_err(),
            None => age >= self.inner.runner.retention,
        }
    }

    /// Runs a decided call as `execute` does, `options`' approver asked first when a policy asks (see
    /// [`crate::SessionHandle::run`]).
    pub(crate) async fn run_decided_using(
        &self,
        decided: Decided,
        options: ExecuteOptions,
    ) -> Result<ExecuteResult, ToolError> {
        self.run_decided_with(decided, false, options).await
    }

    /// [`Shellward::run_decided_using`]; with `follow`, a foreground command's last working directory becomes its
    /// session's (see `ExecPlan::report_cwd`).
    async fn run_decided_with(
        &self,
        decided: Decided,
        follow: bool,
        mut options: ExecuteOptions,
    ) -> Result<ExecuteResult, ToolError> {
        let mut decided = decided;
        options.edit(&mut decided);
        let started = options.on_start.unwrap_or_else(|| Box::new(|_| {}));
        // A preview applies nothing: it runs what a policy allows or asks about (the person is asked only before a
        // real run), never what it denies.
        if options.preview {
            match decided.verdict().clone() {
                Verdict::Run { plan, notes } | Verdict::Ask { plan, notes, .. } => {
                    return self.run_preview(&decided, plan, notes).await;
                }
                Verdict::Deny { .. } => {}
            }
        }
        let (plan, notes) = match decided.verdict().clone() {
            Verdict::Run { plan, notes } => (plan, notes),
            Verdict::Ask { .. } => {
                return match self
                    .approval(&decided, follow, options.approver.as_ref())
                    .await
                {
                    Approval::Run(note) => self.run_approved(decided, follow, note, started).await,
                    Approval::Answer(r) => {
                        if r.pending_approval.is_none() {
                            self.record_unapproved(&decided);
                        }
                        Ok(*r)
                    }
                };
            }
            Verdict::Deny { reason, by } => {
                self.record_denied(&decided);
                return Ok(ExecuteResult {
                    success: false,
                    denied: true,
                    deny_reason: Some(reason),
                    // The reason is in deny_reason; the note only points there (a long reason is not sent twice).
                    notes: vec![Note::new(
                        NoteKind::NotRun,
                        format!("Not run: denied by {by}; deny_reason says why."),
                    )],
                    ..Default::default()
                });
            }
        };
        self.run_plan(decided, plan, policy_notes(notes), follow, started)
            .await
    }

    /// Runs an asked command once approved: exactly the plan that was asked about, with `note` (who approved) first.
    pub(crate) async fn run_approved(
        &self,
        decided: Decided,
        follow: bool,
        note: String,
        started: OnStart,
    ) -> Result<ExecuteResult, ToolError> {
        let Verdict::Ask { plan, notes, .. } = decided.verdict().clone() else {
            return Err(ToolError::new(
                ToolErrorKind::Internal,
                "an approval was answered for a command that was not asked about; nothing was run",
            ));
        };
        let mut notes = policy_notes(notes);
        notes.insert(0, Note::new(NoteKind::Approval, note));
        self.run_plan(decided, plan, notes, follow, started).await
    }

    /// Starts a decided plan (a run, or an approved ask) and shapes its result for the model.
    async fn run_plan(
        &self,
        decided: Decided,
        plan: ExecPlan,
        notes: Vec<Note>,
        follow: bool,
        started: OnStart,
    ) -> Result<ExecuteResult, ToolError> {
        let session = decided.session.clone();
        let record = self
            .inner
            .audit
            .as_ref()
            .map(|_| self.decision_record(&decided));
        let mut plan = plan;
        let timeout = plan.timeout;
        // What the executor does with leftovers at the deadline: stop them when the timeout kills.
        let kills_leftovers = matches!(plan.on_timeout, shellward_exec::OnTimeout::Kill);
        let command = plan.command.clone();
        let cwd_file = self.inner.runner.cwd_report_file(follow, &plan);
        // The executor adds the report at the spawn: the plan (and what process_list shows) stays as approved.
        plan.report_cwd = cwd_file.clone();
        let startup = plan.background.then_some(plan.startup_wait).flatten();
        // Where it runs: the plan's directory, else the executor's default (`[executor] workdir`, `mcp --workdir`),
        // else this process's own.
        let workdir = self.inner.runner.workdir_of(&plan);
        let background = plan.background;
        let asked = plan.confinement.clone();
        let interactive = plan.stdin.interactive();
        let r = self
            .start_recorded(plan, background, record, session.clone(), started)
            .await?;
        let id = r.id.clone();
        if let Some(file) = cwd_file {
            if r.running {
                // Kept running after its timeout: its directory is not the session's; remove the file once it ends.
                let executor = self.inner.runner.executor.clone();
                let (id, session) = (id.clone(), session.clone());
                tokio::spawn(async move {
                    let _ = executor
                        .wait_exit(session.as_deref().map(Session::from).as_ref(), &id)
                        .await;
                    let _ = std::fs::remove_file(&file);
                });
            } else if let Some(dir) = read_cwd_file(&file) {
                self.inner.runner.set_session_dir(session.clone(), dir);
            }
        }
        let held = r.confinement.clone();
        let refused_sockets = r.refused_sockets.clone();
        let refused_datagram = r.refused_unix_datagram;
        let refused_writes = r.refused_writes.clone();
        let refused_network = r.refused_network.clone();
        let exit = r.exit.clone();
        let unwritable = workdir
            .as_deref()
            .and_then(|dir| self.inner.runner.unwritable_note(session.as_deref(), dir));
        // Put in the background by a policy, not asked for by the caller.
        let promoted = background && decided.request.background != Some(true);
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
            &self.inner.runner.deny_read,
            self.inner.runner.executor.pid_namespaces(),
        );
        // What the sandbox saw refused, said whatever the command made of it (one note per kind); else what its
        // output shows.
        let seen = [
            confinement::write_refusal_note(&asked, &refused_writes),
            confinement::socket_refusal_note(held.network, &refused_sockets),
            confinement::network_refusal_note(held.network, &asked.allow, &refused_network),
            refused_datagram.then(|| confinement::datagram_refusal_note(held.network)),
        ];
        if seen.iter().any(Option::is_some) {
            result.notes.extend(seen.into_iter().flatten());
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

    /// An interactive start: waits until the program's output goes quiet (its prompt) or it exits, and puts that
    /// output in the result with how to answer it.
    async fn first_prompt(
        &self,
        result: &mut ExecuteResult,
        id: &ProcessId,
        session: Option<&Session>,
    ) -> Result<(), ToolError> {
        let limits = &self.inner.limits;
        let read = self
            .inner
            .runner
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

    /// A tracked start (see [`crate::SessionHandle::start`]): when a policy asks, the options' approver (the
    /// surface's person: a terminal) is asked before the instance's own approvers, and a command nobody approved is
    /// an error saying why (nothing ran); labels and a deadline go on the process.
    pub(crate) async fn start_tracked_with(
        &self,
        decided: Decided,
        options: StartOptions,
    ) -> Result<Process, ToolError> {
        let (mut decided, mut options) = (decided, options);
        options.edit(&mut decided);
        let approver = options.approver.take();
        let session = decided.session.clone();
        let mut plan = match decided.verdict().clone() {
            Verdict::Run { plan, .. } => plan,
            Verdict::Ask { plan, .. } => {
                match self.approval(&decided, false, approver.as_ref()).await {
                    Approval::Run(_) => plan,
                    Approval::Answer(r) => {
                        self.record_unapproved(&decided);
                        let why = r
                            .deny_reason
                            .unwrap_or_else(|| "it needs approval, which nobody gave".into());
                        return Err(ToolError::new(ToolErrorKind::NotApproved, why));
                    }
                }
            }
            Verdict::Deny { reason, by } => {
                self.record_denied(&decided);
                return Err(ToolError::invalid(format!("denied by {by}: {reason}")));
            }
        };
        let record = self
            .inner
            .audit
            .as_ref()
            .map(|_| self.decision_record(&decided));
        let background = plan.background;
        plan.background = true;
        plan.timeout = None;
        plan.startup_wait = None;
        let started = self
            .start_recorded(plan, background, record, session.clone(), Box::new(|_| {}))
            .await?;
        Ok(Process::new(self, session.as_deref(), started.id.as_str()))
    }

    /// Records a denied decision's audit record (see [`crate::SessionHandle::record_denied`]).
    pub(crate) fn record_denied(&self, decided: &Decided) {
        if decided.plan().is_some() {
            return;
        }
        if let Some(audit) = &self.inner.audit {
            audit.record(self.decision_record(decided));
        }
    }

    /// Records the decision of an asked command that was not approved (nothing ran).
    pub(crate) fn record_unapproved(&self, decided: &Decided) {
        if let Some(audit) = &self.inner.audit {
            let mut record = self.decision_record(decided);
            record["approved"] = false.into();
            audit.record(record);
        }
    }

    /// Runs a plan on the executor and records it: the decision's audit record (with the process id, or the start
    /// error), the execute metrics (`background` is the mode the policies decided), and how the process ends.
    async fn start_recorded(
        &self,
        plan: ExecPlan,
        background: bool,
        record: Option<Value>,
        session: Option<String>,
        started: OnStart,
    ) -> Result<ExecResult, ExecError> {
        // A caller that stops waiting (a cancelled call) stops the command (the executor's part); the audit log
        // still gets the decision, marked cancelled, and a record of the cancel.
        let started_id = Arc::new(std::sync::Mutex::new(None::<ProcessId>));
        let mut plan = plan;
        plan.record = self.inner.runner.workspace_of(&plan);
        let mut abandoned = Abandoned {
            sw: self.clone(),
            record: record.filter(|_| self.inner.audit.is_some()),
            done: false,
            foreground: !plan.background,
            id: started_id.clone(),
            session: session.clone(),
            command: plan.command.clone(),
        };
        let r = self
            .inner
            .runner
            .executor
            .execute_observed(plan, |id| {
                *started_id.lock().unwrap_or_else(|p| p.into_inner()) = Some(id.clone());
                started(Process::new(self, session.as_deref(), id.as_str()))
            })
            .await;
        let record = abandoned.record.take();
        abandoned.done = true;
        if let (Some(audit), Some(mut record)) = (&self.inner.audit, record) {
            match &r {
                Ok(r) => record["process_id"] = serde_json::json!(r.id.as_str()),
                Err(e) => record["error"] = serde_json::json!(e.to_string()),
            }
            audit.record(record);
        }
        let r = r?;
        self.inner
            .metrics
            .execute(background, r.spawn_micros, r.timed_out);
        self.audit_end(&r, session);
        Ok(r)
    }
}

/// When the call that started a foreground run is dropped before the run ended (a cancelled MCP call, a cancelled
/// task, a client gone): the audit log gets its decision, marked `cancelled`, and a `cancel` record naming the process
/// and what became of it; when the operator keeps such runs (`[tools] on_cancel = "background"`), the session's next
/// answer says it runs on. (The executor stops or keeps the process itself.)
struct Abandoned {
    sw: Shellward,
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
        let kept = !self.foreground || self.sw.inner.runner.keep_cancelled;
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
            self.sw
                .inner
                .runner
                .add_pending_note(self.session.as_deref(), note);
        }
        let (Some(mut record), Some(audit)) = (self.record.take(), &self.sw.inner.audit) else {
            return;
        };
        record["process_id"] = serde_json::json!(id);
        record["cancelled"] = serde_json::json!(true);
        audit.record(record);
        audit.record(serde_json::json!({
            "type": "cancel",
            "surface": self.sw.inner.surface,
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

/// What [`ExecuteOptions::on_start`] calls with the started process's handle.
pub type OnStart = Box<dyn FnOnce(Process) + Send>;

/// How a call is carried out beyond its arguments — one set of options for every way a command starts (`execute`,
/// a decided run, a tracked start for `shellward run` and Coder's routes): extra environment for the command, who hears
/// when it starts, who approves it when a policy asks, labels, and a deadline on its tree. Start from
/// [`ExecuteOptions::new`].
#[derive(Default)]
#[non_exhaustive]
pub struct ExecuteOptions {
    env: Vec<(String, String)>,
    on_start: Option<OnStart>,
    approver: Option<Arc<dyn Approver>>,
    labels: Vec<(String, String)>,
    deadline: Option<Duration>,
    timeout_as_deadline: bool,
    preview: bool,
}

/// The options of a tracked start ([`crate::SessionHandle::start`]): the same type as `execute`'s.
pub type StartOptions = ExecuteOptions;

impl ExecuteOptions {
    /// No extra environment, no start callback, only the instance's own approvers, no labels, no deadline.
    pub fn new() -> ExecuteOptions {
        ExecuteOptions::default()
    }

    /// Run the command as a preview (as `execute`'s `preview: true`): in a throwaway copy-on-write view, answering
    /// its change set with `applied: false` (see [`crate::preview`]).
    pub fn preview(mut self, preview: bool) -> ExecuteOptions {
        self.preview = preview;
        self
    }

    /// Extra environment variables for the command (they win over the call's own; the policies see them).
    pub fn env(mut self, env: Vec<(String, String)>) -> ExecuteOptions {
        self.env = env;
        self
    }

    /// Called with the process's handle as soon as it runs (not for a deny, nor for an attached retry).
    pub fn on_start(mut self, on_start: OnStart) -> ExecuteOptions {
        self.on_start = Some(on_start);
        self
    }

    /// The caller's surface's approver (the person at the client), asked before the instance's own approvers when a
    /// policy asks (unless the operator turned asking the client off: `[approvals] client = false`).
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> ExecuteOptions {
        self.approver = Some(approver);
        self
    }

    /// A label on the process (`process_list` filters by labels; Coder's routes keep their chat and mode there).
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> ExecuteOptions {
        self.labels.push((key.into(), value.into()));
        self
    }

    /// The whole tree is killed `deadline` after the start, whatever the plan says (the earlier of the two when the
    /// plan has a deadline of its own).
    pub fn deadline(mut self, deadline: Duration) -> ExecuteOptions {
        self.deadline = Some(deadline);
        self
    }

    /// For a tracked start, which returns at once: a foreground plan's kill timeout still holds, as a deadline on the
    /// tree (without it the host enforces the timeout itself, as `shellward run` does).
    pub fn timeout_as_deadline(mut self) -> ExecuteOptions {
        self.timeout_as_deadline = true;
        self
    }

    /// Puts the labels and the deadline into `decided`'s plan (an asked plan too: it runs as approved, with them).
    fn edit(&mut self, decided: &mut Decided) {
        let Some(plan) = decided.plan_mut() else {
            return;
        };
        if self.timeout_as_deadline
            && !plan.background
            && plan.on_timeout == shellward_exec::OnTimeout::Kill
        {
            plan.deadline = plan.timeout;
        }
        if let Some(d) = self.deadline {
            plan.deadline = Some(plan.deadline.map_or(d, |p| p.min(d)));
        }
        plan.labels.append(&mut self.labels);
    }
}

/// How many `execute` results client tokens keep at most (the oldest finished go first).
pub(crate) const MAX_CLIENT_TOKENS: usize = 4096;

/// A client token must be non-empty, visible text, at most [`idempotency::MAX_TOKEN_BYTES`].
fn check_client_token(token: &str) -> Result<(), ToolError> {
    check_text("client_token", token)?;
    if token.trim().is_empty() {
        return Err(ToolError::invalid(
            "client_token is empty; omit it, or give a unique string (e.g. a UUID) for this call",
        ));
    }
    if token.len() > idempotency::MAX_TOKEN_BYTES {
        return Err(ToolError::invalid(format!(
            "client_token is {} bytes; the limit is {} (a UUID is 36)",
            token.len(),
            idempotency::MAX_TOKEN_BYTES
        )));
    }
    Ok(())
}

/// What makes two `execute` calls the same call: every argument but the token, and the host's extra environment.
fn execute_fingerprint(args: &ExecuteArgs, env: &[(String, String)]) -> idempotency::Fingerprint {
    let args = ExecuteArgs {
        client_token: None,
        ..args.clone()
    };
    // Serializing plain strings, numbers and a BTreeMap cannot fail; an empty encoding would only make calls alike.
    let encoded = serde_json::to_vec(&args).unwrap_or_default();
    let env: Vec<u8> = env
        .iter()
        .flat_map(|(k, v)| [k.as_bytes(), b"\0", v.as_bytes(), b"\0"])
        .flatten()
        .copied()
        .collect();
    idempotency::Fingerprint::of([encoded.as_slice(), env.as_slice()])
}

/// The policies' notes of a verdict, as the result's first notes.
pub(crate) fn policy_notes(notes: Vec<String>) -> Vec<Note> {
    notes
        .into_iter()
        .map(|text| Note::new(NoteKind::Policy, text))
        .collect()
}
