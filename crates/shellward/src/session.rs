//! [`SessionHandle`]: the only way to act in a session. A connection (an MCP client, an HTTP token, a terminal) is one
//! session; its handle decides and runs its commands, calls its tools, finds its processes and answers its approvals
//! without the session's name passed — or mistyped, or swapped with a process id — at every call. The facade's
//! `Option<&str>` forms of these operations are crate-private: every surface holds a handle.

use crate::tools::{ExecuteArgs, ExecuteResult, ToolCall};
use crate::{Decided, ExecuteOptions, Process, Shellward, ToolError};
use shellward_exec::{ProcessList, Session};

/// One session of an instance (or none: [`Shellward::without_session`]). Cheap to clone.
#[derive(Clone)]
pub struct SessionHandle {
    pub(crate) sw: Shellward,
    pub(crate) session: Option<Session>,
}

impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandle")
            .field("session", &self.session)
            .finish()
    }
}

impl SessionHandle {
    /// The session (`None`: outside any).
    pub fn id(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    pub(crate) fn name(&self) -> Option<&str> {
        self.session.as_ref().map(Session::as_str)
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
        self.run_decided_using(decided, options).await
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
        self.start_tracked_with(decided, options).await
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

    /// The handle of this session's process `id`. Nothing is checked here: an operation on a process that is not
    /// kept (or is another session's) fails with
    /// [`ToolErrorKind::UnknownProcess`](crate::ToolErrorKind::UnknownProcess).
    pub fn process(&self, id: impl AsRef<str>) -> Process {
        Process::new(&self.sw, self.name(), id.as_ref())
    }

    /// Every process this session started that is still kept, background or foreground, running first, then newest
    /// first (for process APIs that list every start; the `process_list` tool lists background ones).
    pub fn processes(&self) -> ProcessList {
        self.sw
            .inner
            .runner
            .executor
            .list_all(self.id(), usize::MAX)
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
