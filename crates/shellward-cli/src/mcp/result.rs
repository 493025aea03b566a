//! A tool's outcome as an MCP tool result, shared by the plain call, the 2026 era's repeated call (`mrtr`) and task
//! results (`tasks`).

use rmcp::model::{CallToolResult, ContentBlock};

/// A tool's outcome as MCP answers it: the text written for the model (header lines, then the output as plain
/// text), and the typed result in `structuredContent`; an error as an error result the model reads.
pub fn tool_result(
    outcome: Result<shellward::tools::ToolOutput, shellward::ToolError>,
) -> CallToolResult {
    match outcome {
        Ok(output) => {
            let text = output.model_text();
            let mut r = if output.success() {
                CallToolResult::success(vec![ContentBlock::text(text)])
            } else {
                CallToolResult::error(vec![ContentBlock::text(text)])
            };
            r.structured_content = Some(output.to_json());
            r
        }
        Err(e) => CallToolResult::error(vec![ContentBlock::text(e.model_text())]),
    }
}
