//! The tools by name: a typed [`ToolCall`] in, a typed [`ToolOutput`] out (what
//! [`crate::SessionHandle::call_tool`] and its JSON form [`crate::SessionHandle::call`] run).

use crate::tools;
use crate::{SessionHandle, ToolError};
use tools::{ToolCall, ToolOutput};

impl SessionHandle {
    /// Runs a typed tool call in this session; `options` apply to an `execute` call (other tools ignore them).
    pub async fn call_tool(
        &self,
        call: ToolCall,
        options: crate::ExecuteOptions,
    ) -> Result<ToolOutput, ToolError> {
        Ok(match call {
            ToolCall::Execute(args) => ToolOutput::Execute(self.execute(args, options).await?),
            ToolCall::ProcessOutput(args) => {
                ToolOutput::ProcessOutput(self.process_output(args).await?)
            }
            ToolCall::ProcessInput(args) => {
                ToolOutput::ProcessInput(self.process_input(args).await?)
            }
            ToolCall::ProcessList(args) => ToolOutput::ProcessList(self.process_list(args).await?),
            ToolCall::ProcessSignal(args) => {
                ToolOutput::ProcessSignal(self.process_signal(args).await?)
            }
            ToolCall::ChangesList(args) => ToolOutput::ChangesList(self.changes_list(args).await?),
            ToolCall::ChangesUndo(args) => ToolOutput::ChangesUndo(self.changes_undo(args).await?),
        })
    }
}
