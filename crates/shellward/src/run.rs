//! What a [`crate::SessionHandle`] does with a call: `execute` (idempotent client tokens, the session's working
//! directory), then the verdict — a deny recorded and answered, an ask to the approvers, a run or a preview handed to
//! the [`crate::runner::Runner`] — and a tracked start for hosts that stream (`shellward run`, Coder's routes). The
//! running itself (the executor, the records, the shaped result) is the runner's.

use crate::approval::{Approval, Approver};
use crate::decide::check_text;
use crate::note::{Note, NoteKind};
use crate::shape::exit_fields;
use crate::tools::{ExecuteArgs, ExecuteResult};
use crate::{Decided, Process, ToolError, ToolErrorKind, Verdict, idempotency};
use shellward_exec::{ExecPlan, ProcessId, Session};
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
                |scope, first, age| self.token_expired(scope, first, age),
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
        self.run_decided_with(decided, follow, options).await
    }
}

impl crate::SessionHandle {
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
                .sw
                .inner
                .runner
                .executor
                .info(
                    scope.session.as_deref().map(Session::from).as_ref(),
                    &ProcessId::from(id.as_str()),
                )
                .is_err(),
            None => age >= self.sw.inner.runner.retention,
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

    /// `run_decided_using`; with `follow`, a foreground command's last working directory becomes its
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
                    return self
                        .sw
                        .inner
                        .runner
                        .run_preview(&decided, plan, notes)
                        .await;
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

    /// Starts a decided plan through the runner, the decision's audit record made here (it names the chain) and the
    /// process's handle given to `started` once it runs.
    async fn run_plan(
        &self,
        decided: Decided,
        plan: ExecPlan,
        notes: Vec<Note>,
        follow: bool,
        started: OnStart,
    ) -> Result<ExecuteResult, ToolError> {
        let session = decided.session.clone();
        let start = crate::runner::Start {
            plan,
            notes,
            session: session.clone(),
            record: self
                .sw
                .inner
                .runner
                .audit
                .as_ref()
                .map(|_| self.decision_record(&decided)),
            asked_background: decided.request.background == Some(true),
            follow,
        };
        let sw = self.sw.clone();
        let on_start = Box::new(move |id: &ProcessId| {
            started(Process::new(&sw, session.as_deref(), id.as_str()))
        });
        self.sw
            .inner
            .runner
            .run_plan(start, &self.sw.inner.limits, on_start)
            .await
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
            .sw
            .inner
            .runner
            .audit
            .as_ref()
            .map(|_| self.decision_record(&decided));
        let background = plan.background;
        plan.background = true;
        plan.timeout = None;
        plan.startup_wait = None;
        let started = self
            .sw
            .inner
            .runner
            .start_recorded(plan, background, record, session.clone(), Box::new(|_| {}))
            .await?;
        Ok(Process::new(
            &self.sw,
            session.as_deref(),
            started.id.as_str(),
        ))
    }

    /// Records a decision the host will not run because the chain denied it: its audit record (the decision's
    /// metrics were counted when it was decided). A surface that answers a deny itself (Coder's routes) calls this;
    /// [`SessionHandle::run`](crate::SessionHandle::run), [`SessionHandle::start`](crate::SessionHandle::start) and `execute` do it on their own. Does nothing for a
    /// decision to run.
    pub fn record_denied(&self, decided: &Decided) {
        if decided.plan().is_some() {
            return;
        }
        if let Some(audit) = &self.sw.inner.runner.audit {
            audit.record(self.decision_record(decided));
        }
    }

    /// Records the decision of an asked command that was not approved (nothing ran).
    pub(crate) fn record_unapproved(&self, decided: &Decided) {
        if let Some(audit) = &self.sw.inner.runner.audit {
            let mut record = self.decision_record(decided);
            record["approved"] = false.into();
            audit.record(record);
        }
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
