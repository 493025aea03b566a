//! [`SessionHandle`]: the facade's operations for one session, its id typed once. A connection (an MCP client, an
//! HTTP token, a terminal) is one session; its handle runs its tools, finds its processes and answers its approvals
//! without the session's name passed — or mistyped, or swapped with a process id — at every call. The methods that
//! take `Option<&str>` on [`Shellward`] remain the wire form the surfaces parse; this is the typed seam over them.

use crate::approval::{ApprovalAnswer, ApprovalRequest};
use crate::tools::{ExecuteArgs, ExecuteResult, ToolCall, ToolOutput};
use crate::{ExecuteOptions, Process, Shellward, ToolError};
use shellward_exec::{ProcessId, ProcessList, Session};

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

    /// Runs `execute` in this session (see [`Shellward::execute`]).
    pub async fn execute(&self, args: ExecuteArgs) -> Result<ExecuteResult, ToolError> {
        self.sw.execute(self.name(), args).await
    }

    /// Runs `execute` with `options` (see [`Shellward::execute_with`]).
    pub async fn execute_with(
        &self,
        args: ExecuteArgs,
        options: ExecuteOptions,
    ) -> Result<ExecuteResult, ToolError> {
        self.sw.execute_with(self.name(), args, options).await
    }

    /// Runs a typed tool call in this session (see [`Shellward::call_tool`]).
    pub async fn call_tool(&self, call: ToolCall) -> Result<ToolOutput, ToolError> {
        self.sw.call_tool(self.name(), call).await
    }

    /// Runs a tool by wire name with JSON arguments (see [`Shellward::call`]).
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Value,
    ) -> Result<serde_json::Value, ToolError> {
        self.sw.call(self.name(), tool, arguments).await
    }

    /// The handle of this session's process `id` (see [`Shellward::process`]).
    pub fn process(&self, id: &ProcessId) -> Process {
        self.sw.process(self.name(), id.as_str())
    }

    /// Every process of this session still kept (see [`Shellward::all_processes`]).
    pub fn processes(&self) -> ProcessList {
        self.sw.all_processes(self.name())
    }

    /// The approvals waiting for an answer in this session, oldest first.
    pub fn pending_approvals(&self) -> Vec<ApprovalRequest> {
        self.sw.pending_approvals(self.name())
    }

    /// Answers this session's pending approval `id` as `by` (see [`Shellward::answer_approval`]); another session's
    /// id is unknown here.
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
}
