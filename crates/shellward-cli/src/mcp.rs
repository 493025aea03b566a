//! `shellward mcp`: the five tools as an MCP server over stdio (rmcp). One connection is one session.

use crate::service::{ServiceArgs, runtime};
use anyhow::{Context, Result};
use clap::Args;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use shellward::Shellward;
use shellward::tools::ToolName;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct McpArgs {
    #[command(flatten)]
    pub service: ServiceArgs,
}

/// Instructions sent to the client at initialization.
const INSTRUCTIONS: &str = "shellward runs shell commands for you. Use `execute` to run a command; set \
run_in_background for dev servers, watchers and long builds instead of appending `&`. Read background output with \
`process_output` (pass the returned cursor to read only new output), find processes with `process_list`, stop them \
with `process_signal`. Read the `notes` in every result.";

struct Server {
    sw: Shellward,
    session: String,
    tools: Arc<Vec<Tool>>,
}

fn as_object(v: Value) -> Arc<serde_json::Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(serde_json::Map::new()),
    }
}

fn tools() -> Vec<Tool> {
    ToolName::ALL
        .into_iter()
        .map(|t| {
            Tool::new(t.as_str(), t.description(), as_object(t.input_schema()))
                .with_raw_output_schema(as_object(t.output_schema()))
        })
        .collect()
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("shellward", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if ToolName::parse(&request.name).is_none() {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {:?}; the tools are execute, process_output, process_input, process_list and process_signal",
                    request.name
                ),
                None,
            ));
        }
        let tool = ToolName::parse(&request.name).expect("checked above");
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        // The text is written for the model (header lines, then the output as plain text); the typed result goes in
        // structuredContent.
        let result = match self.sw.call(Some(&self.session), &request.name, args).await {
            Ok(value) => {
                let ok = value["success"].as_bool().unwrap_or(true);
                let text = shellward::tools::model_text(tool, &value);
                let mut r = if ok {
                    CallToolResult::success(vec![ContentBlock::text(text)])
                } else {
                    CallToolResult::error(vec![ContentBlock::text(text)])
                };
                r.structured_content = Some(value);
                r
            }
            Err(e) => CallToolResult::error(vec![ContentBlock::text(
                shellward::tools::model_text(tool, &e.to_json()),
            )]),
        };
        Ok(result.into())
    }
}

pub fn run(args: McpArgs) -> Result<ExitCode> {
    let rt = runtime()?;
    let result = rt.block_on(async move {
        let sw = args.service.build("mcp")?;
        let _watcher = crate::service::watch_and_reload(&sw);
        let session = format!("mcp-{}", std::process::id());
        tracing::info!(%session, containment = %sw.executor().containment(), "MCP server on stdio");
        let server = Server {
            sw: sw.clone(),
            session,
            tools: Arc::new(tools()),
        };
        let outcome = async {
            let running = server
                .serve(crate::mcp_io::guarded_stdio())
                .await
                .context("the MCP client did not complete initialization")?;
            tokio::select! {
                r = running.waiting() => { r.context("the MCP session failed")?; }
                _ = terminate_signal() => {}
            }
            anyhow::Ok(())
        }
        .await;
        // The client closed the connection (or we were told to stop): stop every process this session started.
        sw.shutdown().await;
        outcome.map(|_| ExitCode::SUCCESS)
    });
    // The stdin reader blocks in a thread until the client writes or closes; after a signal, exit without it.
    rt.shutdown_background();
    result
}

/// Resolves on SIGTERM or SIGINT (SIGHUP reloads the policies instead).
pub async fn terminate_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
