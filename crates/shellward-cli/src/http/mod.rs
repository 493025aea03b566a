//! `shellward serve`: the tools and a process API over HTTP (axum).
//!
//! Routes:
//! - `GET /v1/tools`: the tools with descriptions and schemas; `POST /v1/tools/{name}`: a tool call (JSON arguments
//!   in, JSON result out).
//! - `/api/v0/processes/…`: the process API of Coder's workspace agent (start, list, output, signal), wire-compatible
//!   with Coder's Go client; see [`crate::coder`].
//!
//! Sessions come from the `X-Shellward-Session` header (absent: the anonymous session; present, it must be 1–128
//! visible ASCII characters, else 400); one session never sees another's processes. Sessions are labels, not
//! credentials. `--token` (or `SHELLWARD_TOKEN`) is required on every request when set, sent as
//! `Authorization: Bearer TOKEN` (scheme case-insensitive); it is required to listen off loopback, and recommended on
//! loopback too, where without it every local user can run commands as the server's user.
//!
//! Connections are served by hyper's HTTP/1 server directly: a header-read timeout and a cap on open connections
//! keep idle or slow clients from exhausting the server before authentication; a unix socket is created with mode
//! 0600 (`--socket-mode`) and never replaces anything but a stale socket. Shutdown is bounded: on SIGTERM/SIGINT the
//! server stops accepting, gives requests in flight `--shutdown-timeout` to finish, then stops every process tree
//! and exits; a second signal skips the wait.

pub(crate) mod listen;
pub(crate) mod session_header;
pub(crate) mod state;

use crate::coder;
use crate::service::{ServiceArgs, runtime, session_handle};
use anyhow::{Context, Result, bail};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use clap::Args;
use serde_json::{Value, json};
use shellward::tools::tool_specs;
use shellward::{Shellward, ToolError, ToolErrorKind};
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

pub use crate::http::session_header::SESSION_HEADER;
use crate::http::session_header::session;
pub(crate) use crate::http::state::AppState;

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Address to listen on: HOST:PORT, HOST an address or a name such as localhost (port 0 picks a free one), or
    /// unix:/path/to/socket.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub listen: String,
    /// Bearer token required on every request (required when listening on a non-loopback address). Prefer
    /// `--token-file` or `SHELLWARD_TOKEN`: a value on the command line is readable by every local user in
    /// `/proc/PID/cmdline` (shellward warns).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "SHELLWARD_TOKEN",
        hide_env_values = true,
        conflicts_with = "token_file"
    )]
    pub token: Option<String>,
    /// Read the bearer token from this file (its first line; keep it 0600).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// Most connections open at once. A new client past it closes the connection idle longest (connected with no
    /// request in progress); only when every connection is busy does it wait until one is free.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_connections: usize,
    /// How long a client may take to send a request's headers (idle keep-alive connections are closed after it).
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub header_timeout: String,
    /// On SIGTERM/SIGINT: how long requests in flight may take to finish before every process tree is stopped.
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub shutdown_timeout: String,
    /// Permissions of a unix socket (octal): 600 for the owner only, 660 to let the socket's group connect.
    #[arg(long, value_name = "MODE", default_value = "600")]
    pub socket_mode: String,
}

/// Longest accepted session id.
const MAX_SESSION_BYTES: usize = 128;

/// Largest accepted request body (the longest command is 128 KiB).
const MAX_BODY_BYTES: usize = 2 << 20;

type Shared = Arc<AppState>;

/// Why a session header is refused, if it is.
fn session_problem(headers: &HeaderMap) -> Option<String> {
    let values: Vec<_> = headers.get_all(SESSION_HEADER).iter().collect();
    match values.as_slice() {
        [] => mistyped_session_header(headers).map(|name| {
            format!(
                "the request names a session in a {name} header, which shellward does not read: the session header \
                 is {SESSION_HEADER}. Send that one (or neither, for the anonymous session); nothing was run"
            )
        }),
        [one] => {
            let b = one.as_bytes();
            if b.is_empty()
                || b.len() > MAX_SESSION_BYTES
                || !b.iter().all(|c| c.is_ascii_graphic())
            {
                Some(format!(
                    "the {SESSION_HEADER} header must be 1 to {MAX_SESSION_BYTES} visible ASCII characters (no \
                     spaces or control characters); omit it for the anonymous session"
                ))
            } else {
                None
            }
        }
        _ => Some(format!("send the {SESSION_HEADER} header once")),
    }
}

/// A header that looks meant to name the session but is not [`SESSION_HEADER`] (`X-Session`, `Session-Id`,
/// `X-Shellward-Sesion`): read silently as "no session", it would run the call in the anonymous session.
fn mistyped_session_header(headers: &HeaderMap) -> Option<&str> {
    // The generic names people guess; other tools' own session headers (`Mcp-Session-Id`, `Coder-Session-Token`)
    // are not among them and pass through.
    const GUESSES: &[&str] = &["session", "x-session", "session-id", "x-session-id"];
    headers.keys().map(|k| k.as_str()).find(|name| {
        GUESSES.contains(name)
            || (name.contains("shellward") && name.contains("session"))
            || crate::edit_distance(name, SESSION_HEADER) <= 2
    })
}

/// The bearer token of a request: `Authorization: <scheme> <token>` with the scheme `Bearer` in any case.
fn bearer(request: &Request) -> Option<&str> {
    let value = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Refuses a token that cannot be typed back reliably: empty, whitespace only, or with whitespace around it.
pub fn check_token(token: &str) -> Result<()> {
    if token.trim().is_empty() {
        bail!(
            "the token is empty or whitespace; give a secret token (e.g. from `openssl rand -hex 32`)"
        );
    }
    if token.trim() != token {
        bail!(
            "the token starts or ends with whitespace; remove it (clients cannot send it reliably)"
        );
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!("the token must be visible ASCII characters only (it is sent in an HTTP header)");
    }
    Ok(())
}

fn status_of(kind: ToolErrorKind) -> StatusCode {
    match kind {
        ToolErrorKind::InvalidArguments => StatusCode::BAD_REQUEST,
        ToolErrorKind::UnknownTool
        | ToolErrorKind::UnknownProcess
        | ToolErrorKind::UnknownApproval => StatusCode::NOT_FOUND,
        ToolErrorKind::NotApproved => StatusCode::FORBIDDEN,
        ToolErrorKind::NotAlive | ToolErrorKind::Conflict => StatusCode::CONFLICT,
        ToolErrorKind::Busy => StatusCode::TOO_MANY_REQUESTS,
        ToolErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        // `Internal`, and a kind newer than this surface: the server's fault.
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn error_response(e: &ToolError) -> Response {
    let mut body = e.to_json();
    // Coder's clients read `message` (codersdk.Response); shellward's read `error`.
    body["message"] = json!(e.message);
    safe_json(status_of(e.kind), &body)
}

/// A JSON response in which every invisible or control character the model chose is a `\uXXXX` escape
/// (`shellward::shown::json`): the same value for a client's parser, and for a person reading it with `curl` the
/// characters themselves, never their effect on the terminal. Tool results, errors and approvals are written so.
fn safe_json(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        shellward::shown::json(value),
    )
        .into_response()
}

/// A JSON error body of the server itself: `error` and `error_kind` (shellward) and `message` (Coder's clients).
fn plain_error(status: StatusCode, kind: &str, message: String) -> Response {
    (
        status,
        axum::Json(json!({
            "success": false,
            "error": message,
            "message": message,
            "error_kind": kind,
        })),
    )
        .into_response()
}

fn bad_request(message: impl Into<String>) -> Response {
    error_response(&ToolError::new(ToolErrorKind::InvalidArguments, message))
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

/// Authentication (when a token is set), then the session header's shape and the token's sessions; and a 413 in
/// JSON like every other error.
async fn check_request(State(state): State<Shared>, mut request: Request, next: Next) -> Response {
    // `None`: not authenticated; `Some(None)`: every session; `Some(Some(list))`: only these sessions.
    let allowed: Option<Option<Vec<String>>> = if !state.needs_token() {
        Some(None)
    } else {
        let given = bearer(&request).map(str::as_bytes);
        match given {
            Some(g) if state.token.as_ref().is_some_and(|t| same(g, t.as_bytes())) => Some(None),
            Some(g) => state
                .auth
                .iter()
                .find(|a| same(g, a.token.as_bytes()))
                .map(|a| Some(a.sessions.clone())),
            None => None,
        }
    };
    let Some(allowed) = allowed else {
        let mut response = plain_error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong bearer token; send the header `Authorization: Bearer TOKEN` with the token the server \
             was started with"
                .into(),
        );
        response.headers_mut().insert(
            axum::http::header::WWW_AUTHENTICATE,
            axum::http::HeaderValue::from_static("Bearer"),
        );
        return response;
    };
    // A body declared too large is refused before any of it is read: a client that waits for `100 Continue` (curl,
    // for a large body) then never sends it, instead of writing into a connection the server is closing.
    if request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n > MAX_BODY_BYTES as u64)
    {
        return too_large();
    }
    if let Some(problem) = session_problem(request.headers()) {
        return bad_request(problem);
    }
    if allowed.is_some() {
        request.extensions_mut().insert(SessionBound);
    }
    if let Some(sessions) = allowed {
        match session(request.headers()) {
            Some(s) if !sessions.contains(&s) => {
                return plain_error(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    format!(
                        "this token may not use session {s:?}; it may use {}",
                        sessions.join(", ")
                    ),
                );
            }
            Some(_) => {}
            None => {
                // The token's first session stands in for the anonymous one.
                if let Ok(v) = axum::http::HeaderValue::from_str(&sessions[0]) {
                    request.headers_mut().insert(SESSION_HEADER, v);
                }
            }
        }
    }
    let response = next.run(request).await;
    if response.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return too_large();
    }
    response
}

/// The JSON 413 of a body over [`MAX_BODY_BYTES`].
fn too_large() -> Response {
    plain_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!(
            "the request body is over {} MiB; send a shorter one (a command is at most 128 KiB)",
            MAX_BODY_BYTES >> 20
        ),
    )
}

async fn list_tools() -> Response {
    axum::Json(json!({ "tools": tool_specs() })).into_response()
}

/// Prometheus metrics (text exposition format 0.0.4).
async fn metrics(State(state): State<Shared>) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.sw.metrics_text(),
    )
        .into_response()
}

/// The active policy chain (name, source, digests, WIT version, load time per policy).
/// `GET /v1/policies`: the chain in force (each `loaded`, or `stale` when a newer version of its file failed to load
/// and it keeps serving), what the last load attempt could not load (`failed`, with the error), and when it was.
async fn list_policies(State(state): State<Shared>) -> Response {
    let status = state.sw.policies().status();
    let file_name = |s: &str| {
        std::path::Path::new(s)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    };
    let policies: Vec<Value> = status
        .policies
        .iter()
        .map(|p| {
            let stale = status.failed.iter().any(|f| {
                file_name(&f.source).is_some() && file_name(&f.source) == file_name(&p.source)
            });
            let mut v = json!(p);
            v["state"] = json!(if stale { "stale" } else { "loaded" });
            v
        })
        .collect();
    let failed: Vec<Value> = status
        .failed
        .iter()
        .map(|f| json!({"source": f.source, "state": "failed", "error": f.error}))
        .collect();
    axum::Json(json!({
        "policies": policies,
        "failed": failed,
        "last_attempt": status.last_attempt,
        "last_attempt_ok": status.last_attempt_ok,
    }))
    .into_response()
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
    // A command a policy asks about waits for the user: the call answers at once with the pending approval, which
    // `POST /v1/approvals/{id}` decides.
    let options = shellward::ExecuteOptions::new().approver(std::sync::Arc::new(
        shellward::approval::Deferred::new("user (HTTP)"),
    ));
    match session_handle(&state.sw, session(&headers).as_deref())
        .call(&name, args, options)
        .await
    {
        Ok(v) => safe_json(StatusCode::OK, &v),
        Err(e) => error_response(&e),
    }
}

/// `GET /v1/approvals`: the session's approvals waiting for an answer, and the commands it remembers as approved.
async fn list_approvals(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let at = session_handle(&state.sw, session(&headers).as_deref());
    let pending: Vec<Value> = at.pending_approvals().iter().map(|r| r.to_json()).collect();
    safe_json(
        StatusCode::OK,
        &json!({
            "pending": pending,
            "remembered": at.remembered_approvals(),
        }),
    )
}

/// `POST /v1/approvals/{id}` with `{"decision": "approve" | "deny", "remember": "session", "reason": "…"}`: decides a
/// pending approval of the caller's session; approve answers with the tool's result (the command ran), deny with the
/// refusal. Decided, expired and other sessions' ids are 404.
async fn decide_approval(
    State(state): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = match parse_json(&body) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let answer = match approval_answer(&body) {
        Ok(a) => a,
        Err(message) => return bad_request(message),
    };
    match session_handle(&state.sw, session(&headers).as_deref())
        .answer_approval(&id, answer, "user (HTTP)")
        .await
    {
        Ok(r) => safe_json(
            StatusCode::OK,
            &serde_json::to_value(&r).unwrap_or_default(),
        ),
        Err(e) => error_response(&e),
    }
}

/// An approval's answer from its JSON body.
fn approval_answer(body: &Value) -> Result<shellward::ApprovalAnswer, String> {
    let usage = "send {\"decision\": \"approve\"} or {\"decision\": \"deny\"}, optionally with \"remember\": \"session\" \
                 (approve) or \"reason\": \"…\" (deny)";
    let remember = match body.get("remember") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) if s == "session" => true,
        Some(other) => {
            return Err(format!(
                "remember is {other}; the only value is \"session\". {usage}"
            ));
        }
    };
    match body.get("decision").and_then(Value::as_str) {
        Some("approve") => Ok(shellward::ApprovalAnswer::Approve { remember }),
        Some("deny") => Ok(shellward::ApprovalAnswer::Deny {
            reason: body
                .get("reason")
                .and_then(Value::as_str)
                .map(str::to_string),
        }),
        _ => Err(format!("decision is missing or unknown; {usage}")),
    }
}

async fn not_found() -> Response {
    plain_error(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route; see GET /v1/tools, POST /v1/tools/{name}, GET /v1/policies, GET /v1/approvals, POST \
         /v1/approvals/{id}, GET /v1/processes, GET /metrics, GET /healthz, and \
         /api/v0/processes/{start,start-tracked,cancel-tracked,list,{id}/output,{id}/output-tracked,{id}/signal,\
         tokens/{token}}, POST /api/v0/tool-calls/{id}/cancel"
            .into(),
    )
}

/// The TCP address of `--listen HOST:PORT`: an IP address as written, or a host name resolved (`localhost:7878`),
/// its first IPv4 address preferred. Errors say what to write instead.
fn resolve_listen(listen: &str) -> Result<SocketAddr> {
    if let Ok(addr) = listen.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let usage = "give HOST:PORT (e.g. 127.0.0.1:7878 or localhost:7878; port 0 picks a free one) or unix:/path";
    if listen.parse::<u16>().is_ok() {
        bail!("--listen {listen:?} has no host; {usage}, e.g. 127.0.0.1:{listen}");
    }
    let Some((host, port)) = listen.rsplit_once(':') else {
        bail!("--listen {listen:?} has no port; {usage}");
    };
    if host.is_empty() || port.parse::<u16>().is_err() {
        bail!("--listen {listen:?} is not HOST:PORT; {usage}");
    }
    use std::net::ToSocketAddrs;
    let addrs: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .with_context(|| format!("--listen {listen:?}: cannot resolve {host:?}; {usage}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .with_context(|| format!("--listen {listen:?}: {host:?} resolves to no address; {usage}"))
}

/// How many process-API client tokens are kept at most (the oldest finished go first).
const CODER_TOKENS: usize = 4096;

/// The router (exposed for tests and hosts that mount it elsewhere).
pub fn router(sw: Shellward, token: Option<String>, auth: Vec<shellward::AuthEntry>) -> Router {
    let state = Arc::new(AppState {
        sw,
        token,
        auth,
        coder_tokens: shellward::idempotency::TokenIndex::new(CODER_TOKENS),
        tracked: Default::default(),
        tool_calls: Default::default(),
    });
    Router::new()
        .route("/v1/tools", get(list_tools))
        .route("/v1/tools/{name}", post(call_tool))
        .route("/v1/policies", get(list_policies))
        .route("/v1/approvals", get(list_approvals))
        .route("/v1/approvals/{id}", post(decide_approval))
        .route("/v1/processes", get(every_process))
        .route("/metrics", get(metrics))
        .route("/api/v0/processes/start", post(coder::start))
        .route(
            "/api/v0/processes/start-tracked",
            post(coder::start_tracked),
        )
        .route(
            "/api/v0/processes/cancel-tracked",
            post(coder::tracked::cancel),
        )
        .route(
            "/api/v0/processes/{id}/output-tracked",
            get(coder::tracked::output),
        )
        .route("/api/v0/processes/list", get(coder::list))
        .route("/api/v0/processes/{id}/output", get(coder::output))
        .route("/api/v0/processes/{id}/signal", post(coder::signal))
        .route("/api/v0/processes/tokens/{token}", get(coder::token))
        .route(
            "/api/v0/tool-calls/{id}/cancel",
            post(coder::toolcall::cancel),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), check_request))
        // Added after the request check: a load balancer or a supervisor asks without a token, and learns nothing
        // but that the server answers.
        .route("/healthz", get(healthz))
        .with_state(state)
}

/// Set on a request whose token may use only its own sessions (an `[[auth]]` entry's).
#[derive(Clone, Copy)]
struct SessionBound;

/// Most processes `GET /v1/processes` lists.
const PS_LIMIT: usize = 1000;

/// `GET /v1/processes`: every session's processes (the operator's view: `shellward ps`), for the server's own token
/// only — a token bound to sessions sees its sessions' through the tools.
async fn every_process(
    State(state): State<Shared>,
    bound: Option<axum::Extension<SessionBound>>,
) -> Response {
    if bound.is_some() {
        return plain_error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this token may use only its own sessions; every session's processes are listed for the server's token \
             (--token-file or SHELLWARD_TOKEN), and a session's own with the process_list tool"
                .into(),
        );
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let list = state.sw.every_process(PS_LIMIT);
    let processes: Vec<Value> = list
        .processes
        .iter()
        .map(|p| {
            json!({
                "session": p.session.as_ref().map(|s| s.as_str()),
                "process_id": p.id.as_str(),
                "command": p.command,
                "running": p.running,
                "state": p.exit.to_string(),
                "background": p.background,
                "started_at": p.started_at_unix,
                "age_s": now.saturating_sub(p.started_at_unix),
            })
        })
        .collect();
    safe_json(
        StatusCode::OK,
        &json!({"processes": processes, "omitted": list.omitted}),
    )
}

/// `GET /healthz`: 200 `{"status": "ok"}` while the server answers; unauthenticated, so it says nothing more.
async fn healthz() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

/// A known route asked with another method (`GET /v1/tools/execute`): a JSON error like every other, saying which.
async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    let path = uri.path();
    let allowed = if path.starts_with("/v1/tools/")
        || path.starts_with("/v1/approvals/")
        || path.ends_with("/signal")
        || path.ends_with("/start")
        || path.ends_with("/start-tracked")
        || path.ends_with("/cancel-tracked")
    {
        "POST"
    } else {
        "GET"
    };
    let mut response = plain_error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{method} is not allowed on {path}; send {allowed} (the manual's HTTP API lists every route)"
        ),
    );
    response.headers_mut().insert(
        axum::http::header::ALLOW,
        axum::http::HeaderValue::from_static(allowed),
    );
    response
}

fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

fn duration(flag: &str, text: &str) -> Result<std::time::Duration> {
    shellward_policy::duration::parse_millis(text)
        .map(std::time::Duration::from_millis)
        .map_err(|e| anyhow::anyhow!("{flag} {text:?}: {e}"))
}

pub fn run(mut args: ServeArgs) -> Result<ExitCode> {
    if let Some(file) = &args.token_file {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("--token-file {}: cannot read it", file.display()))?;
        let token = text.lines().next().unwrap_or("").to_string();
        check_token(&token).with_context(|| format!("--token-file {}", file.display()))?;
        args.token = Some(token);
    } else if let Some(token) = &args.token {
        check_token(token).context("--token (or SHELLWARD_TOKEN)")?;
        if std::env::args().any(|a| a == "--token" || a.starts_with("--token=")) {
            tracing::warn!(
                "the token given with --token is readable by every local user in /proc/{}/cmdline; give it with \
                 --token-file FILE or the SHELLWARD_TOKEN variable instead",
                std::process::id()
            );
        }
    }
    if args.max_connections == 0 {
        bail!("--max-connections must be at least 1");
    }
    let header_timeout = duration("--header-timeout", &args.header_timeout)?;
    let shutdown_timeout = duration("--shutdown-timeout", &args.shutdown_timeout)?;
    let socket_mode = u32::from_str_radix(&args.socket_mode, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .with_context(|| {
            format!(
                "--socket-mode {:?} is not an octal mode such as 600 or 660",
                args.socket_mode
            )
        })?;
    let limits = listen::Limits {
        max_connections: args.max_connections,
        header_timeout,
        shutdown_timeout,
    };
    let rt = runtime()?;
    let result = rt.block_on(async move {
        let mut config = args.service.config()?;
        // The token file is the host's secret: commands cannot read it (nor the directory entry be replaced).
        if let Some(file) = &args.token_file
            && let Ok(file) = file.canonicalize()
        {
            config.executor.hidden_paths.push(file);
        }
        let auth = config.auth.clone();
        let has_token = args.token.is_some() || !auth.is_empty();
        // Bound first, so that the executor is built knowing it: the commands this server runs can never reach
        // its own listener (its approvals, its tools) — the socket hidden in their sandbox, the port closed.
        let (listener, at) = if let Some(path) = args.listen.strip_prefix("unix:") {
            let listener = crate::sys::bind_unix(std::path::Path::new(path), socket_mode)?;
            if let Ok(path) = std::path::Path::new(path).canonicalize() {
                config.executor.hidden_paths.push(path);
            }
            #[cfg(unix)]
            let listener = listen::Listener::Unix(listener);
            #[cfg(windows)]
            let listener = listen::Listener::Tcp(listener);
            (listener, format!("unix:{path}"))
        } else {
            let addr = resolve_listen(&args.listen)?;
            if !is_loopback(&addr) && !has_token {
                bail!(
                    "listening on {addr}, a non-loopback address, needs a bearer token: give it with --token-file \
                     FILE (a file only you can read) or the SHELLWARD_TOKEN variable, or listen on 127.0.0.1"
                );
            }
            if !has_token {
                tracing::warn!(
                    "no token: every local user can run commands as this user through {addr}; require one with \
                     --token-file FILE or SHELLWARD_TOKEN (a --token value is readable by every local user in \
                     /proc)"
                );
            }
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            let local = listener.local_addr()?;
            config.executor.closed_tcp_ports.push(local.port());
            #[cfg(not(target_os = "linux"))]
            tracing::warn!(
                "commands can reach this server's own port {} here (closing it to them needs Linux's Landlock); \
                 listen on a unix socket instead",
                local.port()
            );
            (listen::Listener::Tcp(listener), format!("http://{local}"))
        };
        let sw = match shellward::Shellward::builder()
            .config(config)
            .surface("serve")
            .build()
        {
            Ok(sw) => sw,
            Err(e) => {
                if let Some(path) = args.listen.strip_prefix("unix:") {
                    let _ = std::fs::remove_file(path);
                }
                return Err(anyhow::Error::new(e).context("cannot start shellward"));
            }
        };
        let _watcher = crate::service::watch_and_reload(&sw);
        let app = router(sw.clone(), args.token.clone(), auth.clone());
        // Watched before the address is announced: a stop signal sent as soon as it is shuts down cleanly.
        let signals = crate::sys::StopSignals::new().context("cannot watch for stop signals")?;
        announce(&at);
        let served = listen::serve(listener, app, limits, signals).await;
        sw.shutdown().await;
        if let Some(path) = args.listen.strip_prefix("unix:") {
            let _ = std::fs::remove_file(path);
        }
        served.context("the HTTP server failed")?;
        Ok(ExitCode::SUCCESS)
    });
    // Do not wait for blocked threads (none should be left; never hang an exit on one).
    rt.shutdown_background();
    result
}

/// Prints where the server listens (first line on stdout, so scripts and tests can read the port).
fn announce(at: &str) {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "shellward: listening on {at}");
    let _ = out.flush();
    tracing::info!(%at, "HTTP server listening");
}

#[cfg(test)]
mod tests {
    #[test]
    fn listen_addresses_may_name_a_host() {
        assert_eq!(
            super::resolve_listen("localhost:7880").unwrap().ip(),
            std::net::IpAddr::from([127, 0, 0, 1])
        );
        assert_eq!(super::resolve_listen("[::1]:0").unwrap().port(), 0);
        for (bad, says) in [
            ("7878", "has no host"),
            ("localhost", "has no port"),
            ("localhost:x", "not HOST:PORT"),
        ] {
            let e = super::resolve_listen(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
