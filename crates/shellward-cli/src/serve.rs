//! `shellward serve`: the tools and a process API over HTTP (axum).
//!
//! Routes:
//! - `GET /v1/tools`: the tools with descriptions and schemas; `POST /v1/tools/{name}`: a tool call (JSON arguments
//!   in, JSON result out).
//! - `/api/v0/processes/…`: the process API agent hosts already use (start, list, output, signal).
//!
//! Sessions come from the `X-Shellward-Session` header (absent: the anonymous session); one session never sees
//! another's processes. Loopback listeners need no token; any other address requires `--token` (or
//! `SHELLWARD_TOKEN`), sent as `Authorization: Bearer TOKEN`.

use crate::mcp::terminate_signal;
use crate::service::{ServiceArgs, runtime};
use anyhow::{Context, Result, bail};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use clap::Args;
use serde::Deserialize;
use serde_json::{Value, json};
use shellward::tools::{ExecuteArgs, ProcessOutputArgs, ProcessSignalArgs, SignalName, tool_specs};
use shellward::{Shellward, ToolError, ToolErrorKind};
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

/// The header carrying the caller's session id.
pub const SESSION_HEADER: &str = "x-shellward-session";

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Address to listen on: HOST:PORT (port 0 picks a free one) or unix:/path/to/socket.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub listen: String,
    /// Bearer token required on every request (required when listening on a non-loopback address).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "SHELLWARD_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

struct AppState {
    sw: Shellward,
    token: Option<String>,
}

type Shared = Arc<AppState>;

fn session(headers: &HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn status_of(kind: ToolErrorKind) -> StatusCode {
    match kind {
        ToolErrorKind::InvalidArguments => StatusCode::BAD_REQUEST,
        ToolErrorKind::UnknownTool | ToolErrorKind::UnknownProcess => StatusCode::NOT_FOUND,
        ToolErrorKind::NotAlive => StatusCode::CONFLICT,
        ToolErrorKind::Busy => StatusCode::TOO_MANY_REQUESTS,
        ToolErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ToolErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn error_response(e: &ToolError) -> Response {
    (status_of(e.kind), axum::Json(e.to_json())).into_response()
}

fn bad_request(message: impl Into<String>) -> Response {
    error_response(&ToolError {
        kind: ToolErrorKind::InvalidArguments,
        message: message.into(),
    })
}

fn parse_json(body: &Bytes) -> Result<Value, Box<Response>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_slice(body).map_err(|e| {
        Box::new(bad_request(format!(
            "the request body is not valid JSON: {e}; send a JSON object"
        )))
    })
}

/// Constant-time comparison, so the token cannot be guessed byte by byte from response times.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn auth(State(state): State<Shared>, request: Request, next: Next) -> Response {
    if let Some(token) = &state.token {
        let given = request
            .headers()
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        if !given.is_some_and(|g| same(g.as_bytes(), token.as_bytes())) {
            return (
                StatusCode::UNAUTHORIZED,
                [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
                axum::Json(json!({
                    "success": false,
                    "error": "missing or wrong bearer token; send the header `Authorization: Bearer TOKEN` with the \
                              token the server was started with",
                    "error_kind": "unauthorized",
                })),
            )
                .into_response();
        }
    }
    next.run(request).await
}

async fn list_tools() -> Response {
    axum::Json(json!({ "tools": tool_specs() })).into_response()
}

async fn call_tool(
    State(state): State<Shared>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let args = match parse_json(&body) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    match state
        .sw
        .call(session(&headers).as_deref(), &name, args)
        .await
    {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => error_response(&e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartBody {
    command: String,
    #[serde(default)]
    workdir: Option<String>,
    #[serde(default)]
    env: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    background: Option<bool>,
    #[serde(default)]
    timeout: Option<String>,
}

async fn start(State(state): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let value = match parse_json(&body) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let body: StartBody = match serde_json::from_value(value) {
        Ok(b) => b,
        Err(e) => {
            return bad_request(format!(
                "invalid start request: {e}; expected {{\"command\": \"...\", \"workdir\"?: \"dir\", \"env\"?: \
                 {{\"NAME\": \"value\"}}, \"background\"?: true}}"
            ));
        }
    };
    let args = ExecuteArgs {
        command: body.command,
        timeout: body.timeout,
        workdir: body.workdir,
        run_in_background: body.background,
    };
    let env: Vec<(String, String)> = body.env.unwrap_or_default().into_iter().collect();
    let sess = session(&headers);
    match state.sw.execute_with_env(sess.as_deref(), args, env).await {
        Ok(r) if r.denied => (
            StatusCode::FORBIDDEN,
            axum::Json(json!({
                "started": false,
                "error": r.deny_reason,
                "error_kind": "denied",
            })),
        )
            .into_response(),
        Ok(r) => {
            let mut out = json!({
                "id": r.process_id,
                "started": true,
                "running": r.running,
                "command": r.command,
            });
            if !r.running {
                out["exit_code"] = json!(r.exit_code);
                out["signal"] = json!(r.signal);
                out["output"] = json!(r.output);
                out["timed_out"] = json!(r.timed_out);
            }
            if !r.notes.is_empty() {
                out["notes"] = json!(r.notes);
            }
            axum::Json(out).into_response()
        }
        Err(e) => error_response(&e),
    }
}

async fn list_processes(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let sess = session(&headers);
    let list =
        state
            .sw
            .executor()
            .list_filtered(sess.as_deref(), state.sw.limits().list_limit, true);
    let processes: Vec<Value> = list
        .processes
        .iter()
        .map(|p| {
            json!({
                "id": p.id,
                "command": p.command,
                "workdir": p.workdir,
                "background": p.background,
                "running": p.running,
                "exit_code": p.exit.code(),
                "signal": p.exit.signal(),
                "started_at_unix": p.started_at_unix,
                "exited_at_unix": p.exited_at_unix,
            })
        })
        .collect();
    axum::Json(json!({ "processes": processes, "omitted": list.omitted })).into_response()
}

#[derive(Deserialize)]
struct OutputQuery {
    #[serde(default)]
    wait: Option<String>,
}

async fn output(
    State(state): State<Shared>,
    Path(id): Path<String>,
    Query(q): Query<OutputQuery>,
    headers: HeaderMap,
) -> Response {
    let wait = match q.wait.as_deref() {
        None | Some("false") | Some("0") => "0s".to_string(),
        Some("true") | Some("1") => {
            shellward_policy::duration::format_millis(state.sw.limits().max_wait.as_millis() as u64)
        }
        Some(other) => other.to_string(),
    };
    let sess = session(&headers);
    let args = ProcessOutputArgs {
        process_id: id,
        cursor: None,
        wait: Some(wait),
    };
    match state.sw.process_output(sess.as_deref(), args).await {
        Ok(o) => {
            let mut out = json!({
                "output": o.output,
                "running": o.running,
                "truncated": o.output_omitted_bytes > 0,
                "omitted_bytes": o.output_omitted_bytes,
                "total_bytes": o.output_total_bytes,
            });
            if let Some(c) = o.exit_code {
                out["exit_code"] = json!(c);
            }
            if let Some(s) = &o.signal {
                out["signal"] = json!(s);
            }
            if let Some(l) = &o.log_path {
                out["log_path"] = json!(l);
            }
            axum::Json(out).into_response()
        }
        Err(e) => error_response(&e),
    }
}

async fn signal_process(
    State(state): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let value = match parse_json(&body) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let signal = match value.get("signal").and_then(Value::as_str) {
        Some("kill") => SignalName::Kill,
        Some("terminate") => SignalName::Terminate,
        Some(other) => {
            return bad_request(format!(
                "unknown signal {other:?}; use \"terminate\" (SIGTERM, then SIGKILL after a grace period) or \
                 \"kill\" (SIGKILL)"
            ));
        }
        None => {
            return bad_request(
                "missing signal; send {\"signal\": \"terminate\"} or {\"signal\": \"kill\"}",
            );
        }
    };
    let sess = session(&headers);
    let args = ProcessSignalArgs {
        process_id: id.clone(),
        signal,
    };
    match state.sw.process_signal(sess.as_deref(), args).await {
        Ok(r) => axum::Json(json!({
            "id": id,
            "signalled": true,
            "running": r.running,
            "exit_code": r.exit_code,
            "signal": r.signal,
        }))
        .into_response(),
        Err(e) => error_response(&e),
    }
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({
            "success": false,
            "error": "no such route; see GET /v1/tools, POST /v1/tools/{name}, and /api/v0/processes/{start,list,{id}/output,{id}/signal}",
            "error_kind": "not_found",
        })),
    )
        .into_response()
}

/// The router (exposed for tests and hosts that mount it elsewhere).
pub fn router(sw: Shellward, token: Option<String>) -> Router {
    let state = Arc::new(AppState { sw, token });
    Router::new()
        .route("/v1/tools", get(list_tools))
        .route("/v1/tools/{name}", post(call_tool))
        .route("/api/v0/processes/start", post(start))
        .route("/api/v0/processes/list", get(list_processes))
        .route("/api/v0/processes/{id}/output", get(output))
        .route("/api/v0/processes/{id}/signal", post(signal_process))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), auth))
        .with_state(state)
}

fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

pub fn run(args: ServeArgs) -> Result<ExitCode> {
    if args.token.as_deref() == Some("") {
        bail!("--token is empty; give a secret token or leave it out on a loopback address");
    }
    let rt = runtime()?;
    rt.block_on(async move {
        let sw = args.service.build()?;
        let app = router(sw.clone(), args.token.clone());
        let served = if let Some(path) = args.listen.strip_prefix("unix:") {
            let _ = std::fs::remove_file(path);
            let listener = tokio::net::UnixListener::bind(path)
                .with_context(|| format!("cannot listen on unix socket {path}"))?;
            announce(&format!("unix:{path}"));
            axum::serve(listener, app)
                .with_graceful_shutdown(terminate_signal())
                .await
        } else {
            let addr: SocketAddr = args.listen.parse().with_context(|| {
                format!(
                    "--listen {:?} is not HOST:PORT (e.g. 127.0.0.1:7878) or unix:/path",
                    args.listen
                )
            })?;
            if !is_loopback(&addr) && args.token.is_none() {
                bail!(
                    "listening on {addr}, a non-loopback address, needs a bearer token: pass --token TOKEN or set \
                     SHELLWARD_TOKEN (or listen on 127.0.0.1)"
                );
            }
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            let local = listener.local_addr()?;
            announce(&format!("http://{local}"));
            axum::serve(listener, app)
                .with_graceful_shutdown(terminate_signal())
                .await
        };
        sw.shutdown().await;
        served.context("the HTTP server failed")?;
        Ok(ExitCode::SUCCESS)
    })
}

/// Prints where the server listens (first line on stdout, so scripts and tests can read the port).
fn announce(at: &str) {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "shellward: listening on {at}");
    let _ = out.flush();
    tracing::info!(%at, "HTTP server listening");
}
