//! A tool call and its result as types: [`ToolCall`] is parsed once from a wire name and JSON arguments,
//! [`ToolOutput`] is what [`SessionHandle::call_tool`](crate::SessionHandle::call_tool) returns, and each surface renders it
//! (MCP: the model's text and the structured result; HTTP: the JSON).

use super::{
    ChangesListArgs, ChangesListResult, ChangesUndoArgs, ChangesUndoResult, ExecuteArgs,
    ExecuteResult, ProcessInputArgs, ProcessListArgs, ProcessListResult, ProcessOutputArgs,
    ProcessOutputResult, ProcessSignalArgs, ProcessSignalResult, ToolName,
};
use crate::{ToolError, ToolErrorKind};
use serde_json::Value;

/// One call of a tool, with its typed arguments.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolCall {
    /// `execute`
    Execute(ExecuteArgs),
    /// `process_output`
    ProcessOutput(ProcessOutputArgs),
    /// `process_input`
    ProcessInput(ProcessInputArgs),
    /// `process_list`
    ProcessList(ProcessListArgs),
    /// `process_signal`
    ProcessSignal(ProcessSignalArgs),
    /// `changes_list`
    ChangesList(ChangesListArgs),
    /// `changes_undo`
    ChangesUndo(ChangesUndoArgs),
}

impl ToolCall {
    /// Parses a call from its wire name and JSON arguments (`null` is an empty object). An unknown name is a
    /// [`ToolErrorKind::UnknownTool`] error listing the tools; arguments that do not fit the tool's schema are
    /// [`ToolErrorKind::InvalidArguments`], naming the expected shape.
    pub fn parse(tool: &str, arguments: Value) -> Result<ToolCall, ToolError> {
        let Some(name) = ToolName::parse(tool) else {
            return Err(ToolError::new(
                ToolErrorKind::UnknownTool,
                format!(
                    "unknown tool {tool:?}; the tools are execute, process_output, process_input, process_list, \
                     process_signal, changes_list and changes_undo"
                ),
            ));
        };
        // A missing arguments object is an empty one (process_list takes none).
        let arguments = if arguments.is_null() {
            Value::Object(Default::default())
        } else {
            arguments
        };
        fn args<T: serde::de::DeserializeOwned>(name: ToolName, v: Value) -> Result<T, ToolError> {
            serde_json::from_value(v).map_err(|e| {
                ToolError::invalid(format!(
                    "invalid arguments for {name}: {e}; expected {}",
                    name.usage()
                ))
            })
        }
        Ok(match name {
            ToolName::Execute => ToolCall::Execute(args(name, arguments)?),
            ToolName::ProcessOutput => ToolCall::ProcessOutput(args(name, arguments)?),
            ToolName::ProcessInput => ToolCall::ProcessInput(args(name, arguments)?),
            ToolName::ProcessList => ToolCall::ProcessList(args(name, arguments)?),
            ToolName::ProcessSignal => ToolCall::ProcessSignal(args(name, arguments)?),
            ToolName::ChangesList => ToolCall::ChangesList(args(name, arguments)?),
            ToolName::ChangesUndo => ToolCall::ChangesUndo(args(name, arguments)?),
        })
    }

    /// The tool called.
    pub fn tool(&self) -> ToolName {
        match self {
            ToolCall::Execute(_) => ToolName::Execute,
            ToolCall::ProcessOutput(_) => ToolName::ProcessOutput,
            ToolCall::ProcessInput(_) => ToolName::ProcessInput,
            ToolCall::ProcessList(_) => ToolName::ProcessList,
            ToolCall::ProcessSignal(_) => ToolName::ProcessSignal,
            ToolCall::ChangesList(_) => ToolName::ChangesList,
            ToolCall::ChangesUndo(_) => ToolName::ChangesUndo,
        }
    }
}

/// What a tool returned, typed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolOutput {
    /// `execute`
    Execute(ExecuteResult),
    /// `process_output`
    ProcessOutput(ProcessOutputResult),
    /// `process_input` (what the process printed after the input)
    ProcessInput(ProcessOutputResult),
    /// `process_list`
    ProcessList(ProcessListResult),
    /// `process_signal`
    ProcessSignal(ProcessSignalResult),
    /// `changes_list`
    ChangesList(ChangesListResult),
    /// `changes_undo`
    ChangesUndo(ChangesUndoResult),
}

impl ToolOutput {
    /// The tool that returned it.
    pub fn tool(&self) -> ToolName {
        match self {
            ToolOutput::Execute(_) => ToolName::Execute,
            ToolOutput::ProcessOutput(_) => ToolName::ProcessOutput,
            ToolOutput::ProcessInput(_) => ToolName::ProcessInput,
            ToolOutput::ProcessList(_) => ToolName::ProcessList,
            ToolOutput::ProcessSignal(_) => ToolName::ProcessSignal,
            ToolOutput::ChangesList(_) => ToolName::ChangesList,
            ToolOutput::ChangesUndo(_) => ToolName::ChangesUndo,
        }
    }

    /// Whether the call did what was asked (`success` of the result; a denied or failed command is `false`).
    pub fn success(&self) -> bool {
        match self {
            ToolOutput::Execute(r) => r.success,
            ToolOutput::ProcessOutput(r) | ToolOutput::ProcessInput(r) => r.success,
            ToolOutput::ProcessList(r) => r.success,
            ToolOutput::ProcessSignal(r) => r.success,
            ToolOutput::ChangesList(r) => r.success,
            ToolOutput::ChangesUndo(r) => r.success,
        }
    }

    /// The result as JSON, in the shape its output schema ([`ToolName::output_schema`]) describes.
    pub fn to_json(&self) -> Value {
        let encoded = match self {
            ToolOutput::Execute(r) => serde_json::to_value(r),
            ToolOutput::ProcessOutput(r) | ToolOutput::ProcessInput(r) => serde_json::to_value(r),
            ToolOutput::ProcessList(r) => serde_json::to_value(r),
            ToolOutput::ProcessSignal(r) => serde_json::to_value(r),
            ToolOutput::ChangesList(r) => serde_json::to_value(r),
            ToolOutput::ChangesUndo(r) => serde_json::to_value(r),
        };
        // Plain structs of strings, numbers and lists: encoding cannot fail; if it ever did, say so in the result.
        encoded.unwrap_or_else(|e| {
            ToolError::new(
                ToolErrorKind::Internal,
                format!("could not encode the result: {e}"),
            )
            .to_json()
        })
    }
}
