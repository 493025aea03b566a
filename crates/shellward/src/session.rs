//! [`SessionHandle`]: the only way to act in a session. A connection (an MCP client, an HTTP token, a terminal) is one
//! session; its handle decides and runs its commands, calls its tools, finds its processes and answers its approvals
//! without the session's name passed — or mistyped, or swapped with a process id — at every call. The facade's
//! `Option<&str>` forms of these operations are crate-private: every surface holds a handle.

use crate::approval::{ApprovalAnswer, ApprovalRequest};
use crate::tools::{
    ExecuteArgs, ExecuteResult, ProcessInputArgs, ProcessListArgs, ProcessListResult,
    ProcessOutputArgs, ProcessOutputResult, ProcessSignalArgs, ProcessSignalResult, ToolCall,
    ToolOutput,
};
use crate::{Decided, ExecuteOptions, Process, Shellward, ToolError};
use shellward_exec::{ProcessList, Session};

/// One session of an instance (or none: [`Shellward::without_session`]). Cheap to clone.
#[derive(Clone)]
pub struct SessionHandle {
    sw: Shellward,
    session: Option<Session>,
}

impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandle")
            .field("session", &self.session)
            .finish()
    }
}

impl Shellward {
    /// The operations of session `session` (its processes, approvals and working directory are its own).
    pub fn session(&self, session: impl Into<Session>) -> SessionHandle {
        SessionHandle {
            sw: self.clone(),
            session: Some(session.into()),
        }
    }

    /// The operations outside any session (a one-shot run, a host without sessions).
    pub fn without_session(&self) -> SessionHandle {
        SessionHandle {
            sw: self.clone(),
            session: None,
        }
    }
}

impl SessionHandle {
    /// The session (`None`: outside any).
    pub fn id(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    fn name(&self) -> Option<&str> {
        self.session.as_ref().map(Session::as_str)
    }

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
        self.sw.execute_with(self.name(), args, options).await
    }

    /// Validates `execute` arguments and runs the policy chain on them, without running anything: the
    /// [`Decided`] a host shows, records, or hands to [`SessionHandle::run`] / [`SessionHandle::start`]. `env` is
    /// extra environment for the command (the policies see it and may change it); `extra_context`'s pairs follow
    /// the facade's own request context (`tool`, `session-id`), as `shellward policy check --context` gives them.
    pub fn decide(
        &self,
        args: &ExecuteArgs,
        env: &[(String, String)],
        extra_context: &[(String, String)],
    ) -> Result<Decided, ToolError> {
        self.sw
            .inner
            .decider
            .decide_with_context(self.id(), args, env, extra_context)
    }

    /// Runs what [`SessionHandle::decide`] decided, as `execute` does: a deny becomes a `success: false` result with
    /// the reason, a plan goes to the executor, an ask to `options`' approver and then the instance's approvers.
    pub async fn run(
        &self,
        decided: Decided,
        options: ExecuteOptions,
    ) -> Result<ExecuteResult, ToolError> {
        self.check_owner(&decided)?;
        self.sw.run_decided_using(decided, options).await
    }

    /// Starts what [`SessionHandle::decide`] decided, tracked in the background, and returns its handle at once, for
    /// a host that streams the output and enforces the timeout itself (as `shellward run` does): no start-up wait, no
    /// foreground timeout, the decision and the end recorded (audit log, metrics) as for `execute`. When a policy
    /// asks, `options`' approver is asked before the instance's own, and a command nobody approved is a
    /// [`ToolErrorKind::NotApproved`](crate::ToolErrorKind::NotApproved) error (nothing ran); a deny is recorded and
    /// is an error naming the policy and the reason.
    pub async fn start(
        &self,
        decided: Decided,
        options: ExecuteOptions,
    ) -> Result<Process, ToolError> {
        self.check_owner(&decided)?;
        self.sw.start_tracked_with(decided, options).await
    }

    /// Records a decision the host will not run because the chain denied it: its audit record (the decision's
    /// metrics were counted when it was decided). A surface that answers a deny itself (Coder's routes) calls this;
    /// [`SessionHandle::run`], [`SessionHandle::start`] and `execute` do it on their own. Does nothing for a
    /// decision to run.
    pub fn record_denied(&self, decided: &Decided) {
        self.sw.record_denied(decided)
    }

    /// Runs a typed tool call in this session; `options` apply to an `execute` call (other tools ignore them).
    pub async fn call_tool(
        &self,
        call: ToolCall,
        options: ExecuteOptions,
    ) -> Result<ToolOutput, ToolError> {
        self.sw.call_tool(self.name(), call, options).await
    }

    /// Runs a tool by wire name with JSON arguments and returns its JSON result (what the HTTP API answers).
    /// Arguments that do not match the tool's schema are an
    /// [`ToolErrorKind::InvalidArguments`](crate::ToolErrorKind::InvalidArguments) error naming the expected shape
    /// (see [`ToolCall::parse`]); `options` apply to an `execute` call.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Value,
        options: ExecuteOptions,
    ) -> Result<serde_json::Value, ToolError> {
        let call = ToolCall::parse(tool, arguments)?;
        Ok(self.call_tool(call, options).await?.to_json())
    }

    /// The `process_output` tool: output since a cursor (or the head/tail view), waiting up to its `wait`.
    pub async fn process_output(
        &self,
        args: ProcessOutputArgs,
    ) -> Result<ProcessOutputResult, ToolError> {
        self.sw.process_output(self.name(), args).await
    }

    /// The `process_input` tool: writes text (or closes stdin), then reads as `process_output` does.
    pub async fn process_input(
        &self,
        args: ProcessInputArgs,
    ) -> Result<ProcessOutputResult, ToolError> {
        self.sw.process_input(self.name(), args).await
    }

    /// The `process_list` tool: this session's background processes, running first, then newest first.
    pub async fn process_list(
        &self,
        args: ProcessListArgs,
    ) -> Result<ProcessListResult, ToolError> {
        self.sw.process_list(self.name(), args).await
    }

    /// The `process_signal` tool: stops a process's tree (terminate, then kill after the grace period; or kill).
    pub async fn process_signal(
        &self,
        args: ProcessSignalArgs,
    ) -> Result<ProcessSignalResult, ToolError> {
        self.sw.process_signal(self.name(), args).await
    }

    /// The `changes_list` tool: this session's commands that changed its workspace, newest first, with what each
    /// changed.
    pub async fn changes_list(
        &self,
        args: crate::tools::ChangesListArgs,
    ) -> Result<crate::tools::ChangesListResult, ToolError> {
        self.sw.changes_list(self.name(), args).await
    }

    /// The `changes_undo` tool: takes back what one of this session's commands changed (the newest not undone by
    /// default). Refused ([`ToolErrorKind::Conflict`](crate::ToolErrorKind::Conflict)), with nothing changed, over a
    /// later change to the same paths (unless forced), for a command already undone and for another session's.
    pub async fn changes_undo(
        &self,
        args: crate::tools::ChangesUndoArgs,
    ) -> Result<crate::tools::ChangesUndoResult, ToolError> {
        self.sw.changes_undo(self.name(), args).await
    }

    /// The handle of this session's process `id`. Nothing is checked here: an operation on a process that is not
    /// kept (or is another session's) fails with
    /// [`ToolErrorKind::UnknownProcess`](crate::ToolErrorKind::UnknownProcess).
    pub fn process(&self, id: impl AsRef<str>) -> Process {
        self.sw.process(self.name(), id.as_ref())
    }

    /// Every process this session started that is still kept, background or foreground, running first, then newest
    /// first (for process APIs that list every start; the `process_list` tool lists background ones).
    pub fn processes(&self) -> ProcessList {
        self.sw.all_processes(self.name())
    }

    /// The working directory this session's commands run in from now on (those that name no `workdir`), as if its
    /// last command had `cd`-ed there: an MCP client's first root, a host's project directory. `dir` must be an
    /// existing absolute directory.
    pub fn set_workdir(&self, dir: impl AsRef<std::path::Path>) -> Result<(), ToolError> {
        self.sw
            .inner
            .runner
            .choose_session_dir(self.name(), dir.as_ref())
    }

    /// The approvals waiting for an answer in this session, oldest first.
    pub fn pending_approvals(&self) -> Vec<ApprovalRequest> {
        self.sw.pending_approvals(self.name())
    }

    /// Answers this session's pending approval `id` as `by`: yes runs exactly the plan that was asked about and
    /// returns its result, no returns the refusal; another session's id is unknown here.
    pub async fn answer_approval(
        &self,
        id: &str,
        answer: ApprovalAnswer,
        by: &str,
    ) -> Result<ExecuteResult, ToolError> {
        self.sw.answer_approval(self.name(), id, answer, by).await
    }

    /// The commands this session remembers as approved, sorted.
    pub fn remembered_approvals(&self) -> Vec<String> {
        self.sw.remembered_approvals(self.name())
    }

    /// Forgets this session's approvals, remembered and pending: the session ended.
    pub fn end_approvals(&self) {
        self.sw.end_session_approvals(self.name())
    }

    /// A decision is run in the session that decided it (its processes, approvals and directory are that session's).
    fn check_owner(&self, decided: &Decided) -> Result<(), ToolError> {
        if decided.session.as_deref() == self.name() {
            return Ok(());
        }
        Err(ToolError::invalid(format!(
            "this decision was made in {}, not in {}; nothing was run. Run a decision through the handle of the \
             session that decided it (Shellward::session)",
            session_words(decided.session.as_deref()),
            session_words(self.name()),
        )))
    }
}

/// "session `s`" or "no session", for errors.
fn session_words(session: Option<&str>) -> String {
    match session {
        Some(s) => format!("session {s:?}"),
        None => "no session".into(),
    }
}
