//! `shellward mcp`: the five tools as an MCP server over stdio (rmcp). One connection is one session.

pub(crate) mod elicit;
pub(crate) mod io;
pub(crate) mod mrtr;
pub(crate) mod progress;
pub(crate) mod result;
pub(crate) mod tasks;

use crate::mcp::result::tool_result;
use crate::service::{ServiceArgs, runtime};
use anyhow::{Context, Result};
use clap::Args;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    GetTaskParams, GetTaskResult, Implementation, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use shellward::Shellward;
use shellward::ToolErrorKind;
use shellward::tools::{ToolCall, ToolName};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct McpArgs {
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Print how to add this server to an MCP client (with this binary's absolute path, which GUI clients need, and
    /// --config when given) and exit, instead of serving.
    #[arg(long, value_name = "CLIENT", value_enum)]
    pub client_config: Option<Client>,
    /// The directory commands run in (default: the client's first MCP root when it sends roots, else
    /// `[executor] workdir`, else where the client started shellward — `/` for some desktop clients).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<std::path::PathBuf>,
    /// Also answer the HTTP API on this unix socket (`unix:PATH`, created mode 0600, removed at exit), for an
    /// operator's views of this instance: `shellward ps --server unix:PATH`, `shellward approvals … --server
    /// unix:PATH`. Its commands cannot see it.
    #[arg(long, value_name = "unix:PATH")]
    pub control: Option<String>,
}

/// The MCP clients `--client-config` knows.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// Claude Code: a `claude mcp add` command line.
    ClaudeCode,
    /// Cursor: `.cursor/mcp.json` (project) or `~/.cursor/mcp.json`.
    Cursor,
    /// Codex: `~/.codex/config.toml`.
    Codex,
    /// Claude Desktop: `claude_desktop_config.json`.
    ClaudeDesktop,
    /// VS Code: `.vscode/mcp.json` (its `servers` object).
    Vscode,
    /// Zed: its `settings.json` (`context_servers`).
    Zed,
    /// Windsurf: `~/.codeium/windsurf/mcp_config.json`.
    Windsurf,
    /// Any client taking the common `mcpServers` JSON.
    Json,
}

/// The snippet that adds `shellward mcp` (at `binary`, with `args`) to `client`, and where it goes (a note for
/// stderr, so the snippet alone can be redirected into a file or run).
pub fn client_config(client: Client, binary: &str, args: &[String]) -> (&'static str, String) {
    let json_args = serde_json::to_string(args).unwrap_or_default();
    let json = format!(
        "{{\"mcpServers\": {{\"shellward\": {{\"command\": {}, \"args\": {json_args}}}}}}}",
        serde_json::to_string(binary).unwrap_or_default()
    );
    match client {
        Client::ClaudeCode => {
            let quoted: Vec<String> = std::iter::once(binary.to_string())
                .chain(args.iter().cloned())
                .map(|a| shell_quote(&a))
                .collect();
            (
                "Claude Code: run this once (add --scope user before `shellward` to use it in every project)",
                format!("claude mcp add shellward -- {}", quoted.join(" ")),
            )
        }
        Client::Cursor => (
            "Cursor: put this in .cursor/mcp.json in the project, or ~/.cursor/mcp.json for every project",
            json,
        ),
        Client::ClaudeDesktop => (
            "Claude Desktop: put this in claude_desktop_config.json (Settings > Developer > Edit Config), then \
             restart the app",
            json,
        ),
        Client::Vscode => (
            "VS Code: put this in .vscode/mcp.json in the workspace (or run MCP: Open User Configuration for every \
             workspace)",
            format!(
                "{{\"servers\": {{\"shellward\": {{\"type\": \"stdio\", \"command\": {}, \"args\": {json_args}}}}}}}",
                serde_json::to_string(binary).unwrap_or_default()
            ),
        ),
        Client::Zed => (
            "Zed: merge this into your settings.json (zed: open settings)",
            format!(
                "{{\"context_servers\": {{\"shellward\": {{\"command\": {}, \"args\": {json_args}}}}}}}",
                serde_json::to_string(binary).unwrap_or_default()
            ),
        ),
        Client::Windsurf => (
            "Windsurf: put this in ~/.codeium/windsurf/mcp_config.json, then refresh its MCP servers",
            json,
        ),
        Client::Json => ("the common mcpServers JSON", json),
        Client::Codex => {
            let toml_args: Vec<String> = args
                .iter()
                .map(|a| serde_json::to_string(a).unwrap_or_default())
                .collect();
            (
                "Codex: add this to ~/.codex/config.toml",
                format!(
                    "[mcp_servers.shellward]\ncommand = {}\nargs = [{}]",
                    serde_json::to_string(binary).unwrap_or_default(),
                    toml_args.join(", ")
                ),
            )
        }
    }
}

/// `text` as one POSIX shell word.
fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:=@%,".contains(&b))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
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
    /// The connection's MCP tasks (for a client that declared the extension).
    tasks: crate::mcp::tasks::Tasks,
    /// Calls waiting for the retry that carries their approval (the 2026-07-28 wire: see `mrtr`).
    waiting: crate::mcp::mrtr::Waiting,
    /// The client's roots choose the session's directory (no `--workdir` was given).
    follow_roots: bool,
    /// `false` while the client's roots are being read: a call waits for them (briefly), so the first command already
    /// runs in the first root.
    roots_read: (
        tokio::sync::watch::Sender<bool>,
        tokio::sync::watch::Receiver<bool>,
    ),
}

/// How long a tool call waits for the client's roots to be read.
const ROOTS_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long the client may take to list its roots.
const ROOTS_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Server {
    /// Reads the client's roots (when it declared them and no `--workdir` was given) and moves the session to the
    /// first one that is a local directory; on a task of its own, since the answer comes through the same connection.
    // Roots are deprecated by the 2026 wire (SEP-2577), which has no server-to-client requests; clients of the 2025
    // revisions still send them.
    #[allow(deprecated)]
    fn read_roots(&self, peer: rmcp::service::Peer<RoleServer>) {
        let declared = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if !self.follow_roots || !declared {
            return;
        }
        self.roots_read.0.send_replace(false);
        let done = self.roots_read.0.clone();
        let session = self.sw.session(self.session.as_str());
        tokio::spawn(async move {
            let listed = tokio::time::timeout(ROOTS_LIMIT, peer.list_roots()).await;
            match listed {
                Ok(Ok(result)) => {
                    let first = result.roots.iter().find_map(|r| file_uri_path(&r.uri));
                    match first.map(|dir| (session.set_workdir(&dir), dir)) {
                        Some((Ok(()), dir)) => {
                            tracing::info!(workdir = %dir.display(), "commands run in the client's first root")
                        }
                        Some((Err(e), dir)) => tracing::warn!(
                            "the client's first root {} is not used: {}",
                            dir.display(),
                            e.message
                        ),
                        None => tracing::info!("the client lists no local directory as a root"),
                    }
                }
                Ok(Err(e)) => tracing::warn!("the client's roots could not be read: {e}"),
                Err(_) => {
                    tracing::warn!("the client did not list its roots within {ROOTS_LIMIT:?}")
                }
            }
            done.send_replace(true);
        });
    }

    /// Waits (at most [`ROOTS_WAIT`]) while the client's roots are being read.
    async fn roots_settled(&self) {
        let mut read = self.roots_read.1.clone();
        let _ = tokio::time::timeout(ROOTS_WAIT, read.wait_for(|done| *done)).await;
    }
}

/// The local path a `file://` URI names (`file:///home/me/proj`, `file://localhost/…`, percent-escapes decoded);
/// `None` for another scheme or host.
fn file_uri_path(uri: &str) -> Option<std::path::PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'%' => return None,
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    let text = String::from_utf8(out).ok()?;
    // `file:///C:/work` on Windows.
    #[cfg(windows)]
    let text = text.strip_prefix('/').map(str::to_string).unwrap_or(text);
    Some(std::path::PathBuf::from(text))
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
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("shellward", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        self.read_roots(context.peer);
    }

    async fn on_roots_list_changed(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        self.read_roots(context.peer);
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
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.roots_settled().await;
        // The 2026-07-28 wire asks the person by a multi round-trip request: a retry carries the answer.
        let wire_2026 = context
            .protocol_version()
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
        if wire_2026 && request.request_state.is_some() {
            return tokio::select! {
                r = crate::mcp::mrtr::answer(&self.sw, &self.session, &self.waiting, &request) => r,
                () = context.ct.cancelled() => Err(cancelled()),
            };
        }
        let args = request
            .arguments
            .clone()
            .map(Value::Object)
            .unwrap_or(Value::Null);
        let call = match ToolCall::parse(&request.name, args.clone()) {
            Ok(call) => call,
            // An unknown tool is the client's protocol error; arguments that do not fit go to the model to fix.
            Err(e) if e.kind == ToolErrorKind::UnknownTool => {
                return Err(ErrorData::invalid_params(e.message, None));
            }
            Err(e) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(e.model_text())]).into());
            }
        };
        // The text is written for the model (header lines, then the output as plain text); the typed result goes in
        // structuredContent.
        // A call the client cancels (`notifications/cancelled`) stops waiting at once: dropping it stops a foreground
        // command's whole tree (terminate, grace, kill, as its timeout would); a background process started by an
        // earlier call is not touched. The reply is dropped on the way out (`mcp_io`), as the specification asks.
        let tasks_declared = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        let progress = context.meta.get_progress_token();
        let can_elicit = context
            .client_capabilities()
            .is_some_and(|caps| caps.elicitation.is_some());
        if let (true, true, ToolCall::Execute(execute)) = (wire_2026, can_elicit, &call) {
            let execute = execute.clone();
            return tokio::select! {
                r = crate::mcp::mrtr::execute(&self.sw, &self.session, &self.waiting, execute, args) => {
                    Ok(r.unwrap_or_else(|e| tool_result(Err(e)).into()))
                }
                () = context.ct.cancelled() => Err(cancelled()),
            };
        }
        // When a policy asks, the person at the client answers first (elicitation), if the client can show it.
        let approver: std::sync::Arc<dyn shellward::Approver> =
            std::sync::Arc::new(crate::mcp::elicit::Elicitor::new(context.peer.clone()));
        let work: std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send + '_>> =
            match (call, progress) {
                // A client that takes tasks: a long `execute` becomes one (see `tasks`).
                (ToolCall::Execute(args), _) if tasks_declared => Box::pin(async move {
                    self.tasks
                        .execute(&self.sw, &self.session, args, approver)
                        .await
                }),
                // With a progress token, an `execute` reports while it runs (see `progress`).
                (ToolCall::Execute(args), Some(token)) => Box::pin(async move {
                    crate::mcp::tasks::Started::Done(
                        crate::mcp::progress::execute_reporting(
                            &self.sw,
                            &self.session,
                            args,
                            token,
                            context.peer.clone(),
                            approver,
                        )
                        .await,
                    )
                }),
                (ToolCall::Execute(args), None) => Box::pin(async move {
                    let options = shellward::ExecuteOptions::new().approver(approver);
                    crate::mcp::tasks::Started::Done(
                        self.sw
                            .session(self.session.as_str())
                            .execute(args, options)
                            .await
                            .map(shellward::tools::ToolOutput::Execute),
                    )
                }),
                (call, _) => Box::pin(async move {
                    crate::mcp::tasks::Started::Done(
                        self.sw
                            .session(self.session.as_str())
                            .call_tool(call, shellward::ExecuteOptions::new())
                            .await,
                    )
                }),
            };
        let started = tokio::select! {
            started = work => started,
            () = context.ct.cancelled() => return Err(cancelled()),
        };
        Ok(match started {
            crate::mcp::tasks::Started::Done(outcome) => tool_result(outcome).into(),
            crate::mcp::tasks::Started::Task(task) => task.into(),
        })
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.tasks
            .get(&request.task_id)
            .await
            .map(GetTaskResult::new)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel(&request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks
            .update(&request.task_id, request.input_responses)
            .await
    }
}

/// The error a cancelled request ends with (the stdio guard drops it on the way out, as the specification asks).
fn cancelled() -> ErrorData {
    ErrorData::new(
        rmcp::model::ErrorCode(-32800),
        "the request was cancelled by the client",
        None,
    )
}

pub fn run(args: McpArgs) -> Result<ExitCode> {
    if let Some(client) = args.client_config {
        let binary = std::env::current_exe()
            .and_then(|p| p.canonicalize())
            .context("cannot tell where this binary is")?;
        let mut server_args = vec!["mcp".to_string()];
        if let Some(config) = &args.service.config {
            let config = config
                .canonicalize()
                .with_context(|| format!("--config {}: no such file", config.display()))?;
            server_args.push("--config".into());
            server_args.push(config.display().to_string());
        }
        let (note, snippet) = client_config(client, &binary.display().to_string(), &server_args);
        eprintln!("# {note}");
        crate::print_line(snippet)?;
        return Ok(ExitCode::SUCCESS);
    }
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        // Started by hand: say what this is, rather than wait in silence for JSON-RPC a person will not type.
        eprintln!(
            "shellward mcp: an MCP server on standard input and output, for an MCP client to start; it waits for \
             one now (Ctrl-C stops it).\nTo connect a client, print its configuration: shellward mcp \
             --client-config claude-code (or claude-desktop, cursor, codex, vscode, zed, windsurf, json)."
        );
    }
    let control_path = match args.control.as_deref() {
        None => None,
        Some(c) => Some(std::path::PathBuf::from(c.strip_prefix("unix:").with_context(|| {
            format!("--control {c:?}: give a unix socket as unix:PATH (e.g. unix:/run/user/1000/shellward.sock)")
        })?)),
    };
    let rt = runtime()?;
    let result = rt.block_on(async move {
        // Bound first, so the executor is built knowing it: the socket is hidden from the commands it runs.
        let control = match &control_path {
            Some(path) => Some(crate::sys::bind_unix(path, 0o600)?),
            None => None,
        };
        let hidden: Vec<std::path::PathBuf> = control_path
            .iter()
            .filter_map(|p| p.canonicalize().ok())
            .collect();
        let sw = match args
            .service
            .build_in("mcp", args.workdir.as_deref(), hidden)
        {
            Ok(sw) => sw,
            Err(e) => {
                if let Some(path) = &control_path {
                    let _ = std::fs::remove_file(path);
                }
                return Err(e);
            }
        };
        let _watcher = crate::service::watch_and_reload(&sw);
        let control_task = match control {
            Some(listener) => Some(serve_control(&sw, listener)?),
            None => None,
        };
        let session = format!("mcp-{}", std::process::id());
        tracing::info!(%session, containment = %sw.containment(), "MCP server on stdio");
        let server = Server {
            sw: sw.clone(),
            session,
            tools: Arc::new(tools()),
            tasks: crate::mcp::tasks::Tasks::default(),
            waiting: crate::mcp::mrtr::Waiting::default(),
            follow_roots: args.workdir.is_none(),
            roots_read: tokio::sync::watch::channel(true),
        };
        let outcome = async {
            let running = server
                .serve(crate::mcp::io::guarded_stdio())
                .await
                .context("the MCP client did not complete initialization")?;
            tokio::select! {
                r = running.waiting() => { r.context("the MCP session failed")?; }
                _ = crate::sys::terminate_signal() => {}
            }
            anyhow::Ok(())
        }
        .await;
        // The client closed the connection (or we were told to stop): stop every process this session started.
        if let Some(task) = control_task {
            task.abort();
        }
        sw.shutdown().await;
        if let Some(path) = &control_path {
            let _ = std::fs::remove_file(path);
        }
        outcome.map(|_| ExitCode::SUCCESS)
    });
    // The stdin reader blocks in a thread until the client writes or closes; after a signal, exit without it.
    rt.shutdown_background();
    result
}

/// Serves the HTTP API of `sw` on `listener` (`--control`) until the task is aborted. The socket's mode (0600) is its
/// authentication, as for `serve --listen unix:PATH`.
fn serve_control(
    sw: &shellward::Shellward,
    listener: ControlListener,
) -> Result<tokio::task::JoinHandle<()>> {
    let app = crate::http::router(sw.clone(), None, Vec::new());
    let limits = crate::http::listen::Limits {
        max_connections: 16,
        header_timeout: std::time::Duration::from_secs(10),
        shutdown_timeout: std::time::Duration::from_secs(1),
    };
    let signals = crate::sys::StopSignals::new().context("cannot watch for stop signals")?;
    #[cfg(unix)]
    let listener = crate::http::listen::Listener::Unix(listener);
    #[cfg(windows)]
    let listener = crate::http::listen::Listener::Tcp(listener);
    Ok(tokio::spawn(async move {
        if let Err(e) = crate::http::listen::serve(listener, app, limits, signals).await {
            tracing::warn!("the control socket stopped: {e}");
        }
    }))
}

/// What `bind_unix` gives on this platform.
#[cfg(unix)]
type ControlListener = tokio::net::UnixListener;
#[cfg(windows)]
type ControlListener = tokio::net::TcpListener;

#[cfg(test)]
mod tests {
    use super::file_uri_path;

    /// Roots are `file://` URIs: the path, percent-escapes decoded; another scheme or host, or a broken escape, is
    /// no local directory.
    #[test]
    #[cfg(unix)]
    fn a_root_uri_is_read_as_a_local_path() {
        let p = |u: &str| file_uri_path(u).map(|p| p.display().to_string());
        assert_eq!(p("file:///home/me/proj").as_deref(), Some("/home/me/proj"));
        assert_eq!(p("file://localhost/srv/a%20b").as_deref(), Some("/srv/a b"));
        assert_eq!(p("file:///x/%C3%A9t%C3%A9").as_deref(), Some("/x/été"));
        assert_eq!(p("https://example.com/x"), None);
        assert_eq!(p("file://other-host/x"), None);
        assert_eq!(p("file:///x/%zz"), None);
        assert_eq!(p("file:///x/%4"), None);
    }
}
