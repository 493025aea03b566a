//! The tools by name: a typed [`ToolCall`] in, a typed [`ToolOutput`] out (what
//! [`crate::SessionHandle::call_tool`] and its JSON form [`crate::SessionHandle::call`] run).

use crate::tools;
use crate::{Shellward, ToolError};
use tools::{ToolCall, ToolOutput};

impl Shellward {
    /// Runs a typed tool call in `session`; `options` apply to an `execute` call.
    pub(crate) async fn call_tool(
        &self,
        session: Option<&str>,
        call: ToolCall,
        options: crate::ExecuteOptions,
    ) -> Result<ToolOutput, ToolError> {
        Ok(match call {
            ToolCall::Execute(args) => {
                ToolOutput::Execute(self.execute_with(session, args, options).await?)
            }
            ToolCall::ProcessOutput(args) => {
                ToolOutput::ProcessOutput(self.process_output(session, args).await?)
            }
            ToolCall::ProcessInput(args) => {
                ToolOutput::ProcessInput(self.process_input(session, args).await?)
            }
            ToolCall::ProcessList(args) => {
                ToolOutput::ProcessList(self.process_list(session, args).await?)
            }
            ToolCall::ProcessSignal(args) => {
                ToolOutput::ProcessSignal(self.process_signal(session, args).await?)
            }
            ToolCall::ChangesList(args) => {
                ToolOutput::ChangesList(self.changes_list(session, args).await?)
            }
            ToolCall::ChangesUndo(args) => {
                ToolOutput::ChangesUndo(self.changes_undo(session, args).await?)
            }
        })
    }
}
