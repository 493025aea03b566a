//! The doors to the tools by name: a typed [`ToolCall`] in, a typed [`ToolOutput`] out ([`Shellward::call_tool`]),
//! and the JSON form of the same for surfaces that speak JSON ([`Shellward::call`]).

use crate::tools;
use crate::{Shellward, ToolError};
use serde_json::Value;
use tools::{ToolCall, ToolOutput};

impl Shellward {
    /// Runs a typed tool call in `session`.
    pub async fn call_tool(
        &self,
        session: Option<&str>,
        call: ToolCall,
    ) -> Result<ToolOutput, ToolError> {
        Ok(match call {
            ToolCall::Execute(args) => ToolOutput::Execute(self.execute(session, args).await?),
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
        })
    }

    /// [`Shellward::call`] with `options` for an `execute` call (its approver, a start callback); other tools ignore
    /// them.
    pub async fn call_using(
        &self,
        session: Option<&str>,
        tool: &str,
        arguments: Value,
        options: crate::ExecuteOptions,
    ) -> Result<Value, ToolError> {
        match ToolCall::parse(tool, arguments)? {
            ToolCall::Execute(args) => {
                Ok(ToolOutput::Execute(self.execute_with(session, args, options).await?).to_json())
            }
            call => Ok(self.call_tool(session, call).await?.to_json()),
        }
    }

    /// Runs a tool by wire name with JSON arguments and returns its JSON result (what the HTTP API answers).
    /// Arguments that do not match the tool's schema are an [`ToolErrorKind::InvalidArguments`] error naming the
    /// expected shape; see [`ToolCall::parse`].
    pub async fn call(
        &self,
        session: Option<&str>,
        tool: &str,
        arguments: Value,
    ) -> Result<Value, ToolError> {
        let call = ToolCall::parse(tool, arguments)?;
        Ok(self.call_tool(session, call).await?.to_json())
    }
}
