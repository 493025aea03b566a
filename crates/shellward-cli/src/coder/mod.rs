//! The process API under `/api/v0/processes/…`, wire-compatible with Coder's workspace agent: the routes, request
//! and response shapes, status codes, error bodies and chat scoping that Coder's Go client
//! (`codersdk/workspacesdk`) and its chat tool rely on, over shellward's policy chain and executor.
//!
//! What Coder's client sees (checked against `codersdk/workspacesdk/agentconn.go` at coder/coder 024c7d3 and the agent
//! side in `agent/agentproc` — `api.go`, `process.go`, `headtail.go`):
//! - `POST start` `{command, workdir?, env?, background?}` answers `{id, started}` at once, foreground or background;
//!   the client waits with `output?wait=true` and enforces its own timeouts. Unknown request fields are ignored (as Go
//!   does); a field of the wrong JSON type is a 400.
//! - `GET list` `{processes: [...]}`: running first, then newest first, at most 10 (Coder's cap).
//! - `GET {id}/output[?wait=true]` `{output, truncated?, running, exit_code?}`: output up to 16 KiB whole, else the
//!   first and last 16 KiB around an omission marker, lines over 2048 bytes shortened; `truncated` is the object
//!   `{original_bytes, retained_bytes, omitted_bytes, strategy: "head_tail"}`, omitted when nothing was left out. A
//!   command ended by a signal has `exit_code: -1`.
//! - `POST {id}/signal` `{signal: "kill" | "terminate"}` answers `{message}`; 404 unknown, 409 not running.
//! - `POST start` with `client_token` is idempotent (Coder's `ClientToken`): a retry answers `{id, started: false,
//!   client_token, attached: true}`, the token with other parameters is 409; `GET tokens/{token}` answers `{found,
//!   process_id?, pending, token_index_age_ms}`.
//! - Every error is Coder's `{message, detail?}`.
//! - `Coder-Chat-Id` (a UUID; anything else is ignored, as Coder does): a start records the chat; a chat lists only
//!   its own processes and gets 404 for another chat's; a request without the header sees every process of its
//!   session. `Coder-Ancestor-Chat-Ids` grants nothing here (Coder uses it only for git notifications). The chat
//!   scope lives inside shellward's session (`X-Shellward-Session` or the token's), which stays the boundary.
//!
//! - The tracked-process protocol (version 1: `start-tracked`, `cancel-tracked`, `{id}/output-tracked`, the instance
//!   id and protocol version in `list`) is in `tracked`; `go_json` reproduces the Go marshalling its digest hashes.
//!
//! shellward's additions ride along as fields Go ignores: the command as run (a policy may rewrite it), the policies'
//! notes, the log path, the signal name.

mod go_json;
pub(crate) mod toolcall;
pub(crate) mod tracked;

use crate::http::session_header::session;
use crate::http::state::AppState;
use crate::service::session_handle;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use shellward::idempotency::{self, Fingerprint, Once, TokenScope, TokenState};
use shellward::tools::{ExecuteArgs, ProcessSignalArgs, SignalName, ToolCall, ToolOutput};
use shellward::{ExitState, StartOptions};
use shellward::{ReadOptions, ToolError, ToolErrorKind, Verdict};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

type Shared = Arc<AppState>;

/// Coder's chat header (`workspacesdk.CoderChatIDHeader`).
const CHAT_HEADER: &str = "coder-chat-id";
/// The label recording the chat that started a process.
const CHAT_LABEL: &str = "coder.chat_id";
/// The label recording whether the start asked for the background.
const BACKGROUND_LABEL: &str = "coder.background";
/// Coder's list cap (`maxListProcesses`).
const MAX_LIST: usize = 10;
/// Bytes kept from the start and from the end of the output (`MaxHeadBytes`, `MaxTailBytes`).
const HEAD_BYTES: usize = 16 << 10;
const TAIL_BYTES: usize = 16 << 10;
/// Lines longer than this are shortened (`MaxLineLength`), ending with [`LINE_SUFFIX`].
const MAX_LINE: usize = 2048;
const LINE_SUFFIX: &str = " ... [truncated]";

/// A Coder `codersdk.Response` error: `{message, detail?}` (and shellward's `error_kind`, from the status).
fn error(status: StatusCode, message: impl Into<String>, detail: Option<String>) -> Response {
    let (status, body) = error_body(status, message, detail);
    (status, axum::Json(body)).into_response()
}

/// [`error`]'s status and body.
fn error_body(
    status: StatusCode,
    message: impl Into<String>,
    detail: Option<String>,
) -> (StatusCode, Value) {
    let kind = match status {
        StatusCode::BAD_REQUEST => "invalid_arguments",
        StatusCode::NOT_FOUND => "unknown_process",
        StatusCode::CONFLICT => "not_alive",
        StatusCode::TOO_MANY_REQUESTS => "busy",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        StatusCode::GONE => "expired",
        _ => "internal",
    };
    error_kind_body(status, kind, message, detail)
}

/// [`error`] with shellward's `error_kind` named.
fn error_kind(
    status: StatusCode,
    kind: &str,
    message: impl Into<String>,
    detail: Option<String>,
) -> Response {
    let (status, body) = error_kind_body(status, kind, message, detail);
    (status, axum::Json(body)).into_response()
}

/// [`error_kind`]'s status and body.
fn error_kind_body(
    status: StatusCode,
    kind: &str,
    message: impl Into<String>,
    detail: Option<String>,
) -> (StatusCode, Value) {
    let mut body = json!({ "message": message.into() });
    if let Some(d) = detail.filter(|d| !d.is_empty()) {
        body["detail"] = json!(d);
    }
    body["error_kind"] = json!(kind);
    (status, body)
}

/// shellward's process id for an id a client sent: a tracked identity's or a tool call's process, else the id itself.
fn resolve(state: &AppState, id: &str, session: &Option<String>) -> String {
    state
        .tracked
        .process_of(id, session)
        .or_else(|| state.tool_calls.process_of(id, session))
        .unwrap_or_else(|| id.to_string())
}

/// The id a client knows shellward's process `ours` by: its tracked identity or tool call UUID, else its own.
fn shown_id(state: &AppState, ours: &str) -> String {
    state
        .tracked
        .identity_of(ours)
        .or_else(|| state.tool_calls.identity_of(ours))
        .unwrap_or_else(|| ours.to_string())
}

fn not_found(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!("Process {id:?} not found."),
        None,
    )
}

/// The chat of a request: `Coder-Chat-Id` parsed as a UUID (first value; unparsable is no chat, as in Coder), in the
/// canonical lowercase hyphenated form.
pub(crate) fn chat_id(headers: &HeaderMap) -> Option<String> {
    let raw = headers.get(CHAT_HEADER)?.to_str().ok()?;
    let id = uuid::Uuid::parse_str(raw.trim()).ok()?;
    Some(id.hyphenated().to_string())
}

/// A request body decoded as [`decode`] does; a body that is not one answers Coder's 400 before the handler runs.
pub(crate) struct Decoded<T>(pub(crate) T);

impl<T, S> axum::extract::FromRequest<S> for Decoded<T>
where
    T: serde::de::DeserializeOwned + Default,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Response> {
        let body = Bytes::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        decode(&body).map(Decoded).map_err(|r| *r)
    }
}

/// Decodes a JSON body the way Go's `json.NewDecoder(body).Decode(&v)` does: the first JSON value (what follows is
/// not read), unknown fields ignored, `null` leaves every field unset. Errors are Coder's 400.
fn decode<T: serde::de::DeserializeOwned + Default>(body: &Bytes) -> Result<T, Box<Response>> {
    let bad = |detail: String| {
        Box::new(error(
            StatusCode::BAD_REQUEST,
            "Request body must be valid JSON.",
            Some(detail),
        ))
    };
    let value = match serde_json::Deserializer::from_slice(body)
        .into_iter::<Value>()
        .next()
    {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(bad(e.to_string())),
        None => return Err(bad("EOF: the body is empty; send a JSON object".into())),
    };
    if value.is_null() {
        return Ok(T::default());
    }
    serde_json::from_value(value).map_err(|e| bad(e.to_string()))
}

/// `workspacesdk.StartProcessRequest`, plus shellward's `timeout`.
#[derive(Deserialize, Default)]
pub(crate) struct StartRequest {
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    workdir: Option<String>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    background: Option<bool>,
    /// Coder's idempotency token (`ClientToken`): a retry with the same token and parameters attaches.
    #[serde(default)]
    client_token: Option<String>,
    /// The same token under the name later Coder agents use (`IdempotencyKey`).
    #[serde(default)]
    idempotency_key: Option<String>,
    /// shellward's: the foreground timeout the policies see (Coder's client never sends it).
    #[serde(default)]
    timeout: Option<String>,
    /// The tracked protocol's identity (see `tracked`).
    #[serde(flatten)]
    tracked: tracked::IdentityFields,
    /// The tracked deadline as time left, once admitted: the tree is killed then.
    #[serde(skip)]
    deadline_in: Option<Duration>,
}

/// How long a retried start waits for the concurrent first start under its token before Coder's 409 "pending".
const TOKEN_WAIT: Duration = Duration::from_secs(10);

/// What a start's token was sent as: the field name echoed in the answer, and the token.
struct SentToken {
    field: &'static str,
    token: String,
}

/// `POST /api/v0/processes/start`.
///
/// With a `client_token` (or `idempotency_key`), as Coder's agent: the token is scoped to the session and chat; a
/// retry with the same command, workdir and background flag answers the first start's process (`started: false,
/// attached: true`) and starts nothing; the same token with other parameters is 409. The first start runs on its own
/// task, so a connection dropped mid-start still leaves its process for the retry to attach to. Tokens are kept as
/// long as their process is (`[executor] retention`).
pub(crate) async fn start(
    State(state): State<Shared>,
    headers: HeaderMap,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
    body: Bytes,
) -> Response {
    // A chat's tool call runs at most once; its repeats replay the recorded answer.
    if let Some(answer) =
        toolcall::start(&state, &headers, query.as_deref().unwrap_or(""), &body).await
    {
        return answer;
    }
    let req: StartRequest = match decode(&body) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    if tracked::carries_identity(&req) {
        return tracked::start(&state, &headers, req, false).await;
    }
    start_untracked(&state, &headers, req).await
}

/// `POST /api/v0/processes/start-tracked`: a start that must carry a tracked identity (see `tracked`).
pub(crate) async fn start_tracked(
    State(state): State<Shared>,
    headers: HeaderMap,
    Decoded(req): Decoded<StartRequest>,
) -> Response {
    tracked::start(&state, &headers, req, true).await
}

/// A start without a tracked identity: with or without a client token.
async fn start_untracked(state: &Shared, headers: &HeaderMap, req: StartRequest) -> Response {
    let command = req.command.clone().unwrap_or_default();
    if command.is_empty() {
        return error(StatusCode::BAD_REQUEST, "Command is required.", None);
    }
    // Go sends no token when it is empty.
    let sent = match (
        req.client_token.clone().filter(|t| !t.is_empty()),
        req.idempotency_key.clone().filter(|t| !t.is_empty()),
    ) {
        (Some(token), _) => SentToken {
            field: "client_token",
            token,
        },
        (None, Some(token)) => SentToken {
            field: "idempotency_key",
            token,
        },
        (None, None) => return start_new(state, headers, req, None).await.0,
    };
    if sent.token.len() > idempotency::MAX_TOKEN_BYTES {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "Client token is {} bytes; the limit is {}.",
                sent.token.len(),
                idempotency::MAX_TOKEN_BYTES
            ),
            None,
        );
    }
    let scope = TokenScope {
        session: session(headers),
        within: chat_id(headers),
    };
    // Coder's notion of the same start: the command, the working directory and the background flag.
    let workdir = req.workdir.clone().unwrap_or_default();
    let fingerprint = Fingerprint::of([
        command.as_bytes(),
        workdir.as_bytes(),
        &[u8::from(req.background.unwrap_or(false))],
    ]);
    let (sent_field, sent_token) = (sent.field, sent.token.clone());
    let (first_state, first_headers) = (state.clone(), headers.clone());
    let once = state
        .coder_tokens
        .start_once(
            scope.clone(),
            &sent_token,
            fingerprint,
            |scope, id, _| {
                session_handle(&state.sw, scope.session.as_deref())
                    .process(id)
                    .view()
                    .is_err()
            },
            Some(TOKEN_WAIT),
            move || async move { start_new(&first_state, &first_headers, req, Some(&sent)).await },
        )
        .await;
    match once {
        Once::Ran(response) => response,
        Once::Attached(id) => {
            let mut out =
                json!({ "id": id, "started": false, sent_field: sent_token, "attached": true });
            if let Ok(info) = session_handle(&state.sw, scope.session.as_deref())
                .process(id.as_str())
                .view()
            {
                out["command"] = json!(info.command);
                out["started_at"] = json!(info.started_at_unix);
            }
            axum::Json(out).into_response()
        }
        Once::Mismatch => error_kind(
            StatusCode::CONFLICT,
            "token_mismatch",
            "Client token was already used to start a process with different parameters.",
            Some(
                "client token was already used to start a process with different parameters".into(),
            ),
        ),
        Once::Pending => error_kind(
            StatusCode::CONFLICT,
            "token_pending",
            "Timed out waiting for the concurrent start that holds this client token.",
            None,
        ),
        Once::TaskFailed(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Failed to start process.",
            Some(format!("the start task failed: {e}")),
        ),
        Once::Busy => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "Failed to start process.",
            Some("the start first sent with this client token keeps failing; send it again".into()),
        ),
    }
}

/// Starts a process for `req` (no token, or the first start under one): the answer, and the new process's id.
async fn start_new(
    state: &AppState,
    headers: &HeaderMap,
    req: StartRequest,
    sent: Option<&SentToken>,
) -> (Response, Option<String>) {
    match launch(state, headers, req).await {
        Ok(started) => {
            let id = started.process.id().to_string();
            (
                axum::Json(started_json(&started, sent)).into_response(),
                Some(id),
            )
        }
        Err((status, body)) => ((status, axum::Json(body)).into_response(), None),
    }
}

/// A process a start launched: its handle, the policies' notes, whether it was asked for in the background.
pub(crate) struct Started {
    process: shellward::Process,
    notes: Vec<String>,
    background: bool,
}

/// Decides and starts `req`'s command (the policies, an approval if one asks, the executor), returning at once; a
/// refusal is Coder's failed start (status and body).
async fn launch(
    state: &AppState,
    headers: &HeaderMap,
    req: StartRequest,
) -> Result<Started, (StatusCode, Value)> {
    let command = req.command.unwrap_or_default();
    let chat = chat_id(headers);
    let background = req.background.unwrap_or(false);
    let args = {
        let mut built = ExecuteArgs::new(command).background(background);
        // Go sends no workdir when it is empty; an explicit "" means the default too.
        built.timeout = req.timeout;
        built.workdir = req.workdir.filter(|w| !w.is_empty());
        built
    };
    let mut env: Vec<(String, String)> = req.env.unwrap_or_default().into_iter().collect();
    if let Some(c) = &chat {
        // As Coder's agent does: the command's children (e.g. a git credential helper) can name their chat.
        env.push(("CODER_CHAT_ID".into(), c.clone()));
    }
    let sess = session(headers);
    let at = session_handle(&state.sw, sess.as_deref());
    let decided = at
        .decide(&args, &env, &[])
        .map_err(|e| start_error_body(&e))?;
    let notes = match decided.verdict().clone() {
        // An ask is answered when it starts (the operator's reviewer; Coder has no one to show it to).
        Verdict::Run { notes, .. } | Verdict::Ask { notes, .. } => notes,
        Verdict::Deny { reason, by } => {
            // Recorded (audit, metrics) like every deny, then answered as Coder answers a failed start.
            at.record_denied(&decided);
            return Err(denied_body(&reason, &by));
        }
    };
    // The start returns at once (Coder's client waits and times out on its own); a policy's kill timeout still holds,
    // as a deadline on the tree, and so does a tracked start's deadline, whichever comes first.
    let mut options = StartOptions::new()
        .timeout_as_deadline()
        .label(BACKGROUND_LABEL, background.to_string());
    if let Some(d) = req.deadline_in {
        options = options.deadline(d);
    }
    if let Some(c) = &chat {
        options = options.label(CHAT_LABEL, c.clone());
    }
    let process = at
        .start(decided, options)
        .await
        .map_err(|e| start_error_body(&e))?;
    Ok(Started {
        process,
        notes,
        background,
    })
}

/// A start's answer: `{id, started: true}`, the token it was sent with, and shellward's additions.
fn started_json(started: &Started, sent: Option<&SentToken>) -> Value {
    let process = &started.process;
    let mut out = json!({ "id": process.id().as_str(), "started": true });
    if let Some(sent) = sent {
        out[sent.field] = json!(sent.token);
        out["attached"] = json!(false);
    }
    if let Ok(info) = process.view() {
        if let Some(p) = &info.log_path {
            out["log_path"] = json!(p);
        }
        out["command"] = json!(info.command);
        out["started_at"] = json!(info.started_at_unix);
    }
    if !started.notes.is_empty() {
        out["notes"] = json!(started.notes);
    }
    out
}

/// `GET /api/v0/processes/tokens/{token}`: what this agent knows of a client token in the caller's session and chat,
/// always 200 (a 404 means an agent without the route): `found` (a start used the token and its process is still
/// kept), `process_id` (once started), `pending` (a start under it is in flight) and `token_index_age_ms` (how long
/// this server has been keeping tokens: a token sent before that went to an earlier instance, e.g. before a restart).
pub(crate) async fn token(
    State(state): State<Shared>,
    headers: HeaderMap,
    Path(token): Path<String>,
) -> Response {
    let scope = TokenScope {
        session: session(&headers),
        within: chat_id(&headers),
    };
    let session = scope.session.clone();
    let (known, _) = state.coder_tokens.lookup(scope, &token);
    let mut out = json!({
        "found": false,
        "pending": false,
        "token_index_age_ms": state.coder_tokens.age().as_millis() as u64,
    });
    match known {
        TokenState::Unknown => {}
        TokenState::Pending => {
            out["found"] = json!(true);
            out["pending"] = json!(true);
        }
        TokenState::Done(id) => {
            // A process past its retention is forgotten with its token.
            if session_handle(&state.sw, session.as_deref())
                .process(id.as_str())
                .view()
                .is_ok()
            {
                out["found"] = json!(true);
                out["process_id"] = json!(id);
            }
        }
    }
    axum::Json(out).into_response()
}

/// A start the policy chain refused, answered as Coder answers a failed start: 500 with the reason in `message`.
fn denied_body(reason: &str, by: &str) -> (StatusCode, Value) {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        json!({
            "message": format!("Failed to start process: denied by policy {by}: {reason}"),
            "detail": reason,
            "error_kind": "denied",
            "denied_by": by,
        }),
    )
}

/// A start that failed: 400 for what Coder also refuses before starting (an empty command), else Coder's 500
/// "Failed to start process." with the reason in `detail` (a missing working directory, a bad environment variable);
/// 429 and 503 keep their meaning (too many running, shutting down).
fn start_error_body(e: &ToolError) -> (StatusCode, Value) {
    let status = match e.kind {
        ToolErrorKind::Busy => StatusCode::TOO_MANY_REQUESTS,
        ToolErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error_body(
        status,
        format!("Failed to start process: {}", e.message),
        Some(e.message.clone()),
    )
}

/// Coder's exit code: the code, or -1 for a command ended by a signal (Go's `ExitCode()`); none while it runs.
fn exit_code(exit: &ExitState) -> Option<i32> {
    match exit {
        ExitState::Running => None,
        ExitState::Code(c) => Some(*c),
        _ => Some(-1),
    }
}

fn label<'a>(labels: &'a [(String, String)], key: &str) -> Option<&'a str> {
    labels
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Whether a request of `chat` may see a process with these labels: a chat sees its own processes and those started
/// without a chat; a request without a chat sees all (Coder's rule).
fn visible(chat: Option<&str>, labels: &[(String, String)]) -> bool {
    match (chat, label(labels, CHAT_LABEL)) {
        (Some(mine), Some(owner)) => mine == owner,
        _ => true,
    }
}

/// `GET /api/v0/processes/list`.
pub(crate) async fn list(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let sess = session(&headers);
    let chat = chat_id(&headers);
    let all = session_handle(&state.sw, sess.as_deref()).processes();
    let processes: Vec<Value> = all
        .processes
        .iter()
        // A chat lists only its own processes (those without a chat stay reachable by id).
        .filter(|p| match &chat {
            Some(c) => label(&p.labels, CHAT_LABEL) == Some(c.as_str()),
            None => true,
        })
        .take(MAX_LIST)
        .map(|p| {
            // `running` as Coder means it: the command itself (a daemon it left behind stays signallable).
            let running = p.exit == ExitState::Running;
            // A tracked start or a tool call's is listed under its identity.
            let id = shown_id(&state, p.id.as_str());
            let mut v = json!({
                "id": id,
                "command": p.command,
                "background": label(&p.labels, BACKGROUND_LABEL).map_or(p.background, |b| b == "true"),
                "running": running,
                "started_at_unix": p.started_at_unix,
            });
            let workdir = p.workdir.to_string_lossy();
            if !workdir.is_empty() {
                v["workdir"] = json!(workdir);
            }
            if let Some(c) = exit_code(&p.exit) {
                v["exit_code"] = json!(c);
            }
            if let Some(at) = p.exited_at_unix {
                v["exited_at_unix"] = json!(at);
            }
            if let Some(s) = p.exit.signal() {
                v["signal"] = json!(s);
            }
            v
        })
        .collect();
    axum::Json(json!({
        "processes": processes,
        "protocol_version": tracked::PROTOCOL_VERSION,
        "agent_instance_id": state.tracked.instance().hyphenated().to_string(),
    }))
    .into_response()
}

/// The query of the output route: `wait=true` (Coder; bounded by `wait_ms`), or a duration (shellward's).
#[derive(Deserialize)]
pub(crate) struct OutputQuery {
    #[serde(default)]
    wait: Option<String>,
    #[serde(default)]
    wait_ms: Option<String>,
}

/// `GET /api/v0/processes/{id}/output`.
pub(crate) async fn output(
    State(state): State<Shared>,
    Path(id): Path<String>,
    Query(q): Query<OutputQuery>,
    headers: HeaderMap,
) -> Response {
    let max_wait = state.sw.limits().max_wait;
    let wait = match q.wait.as_deref() {
        None | Some("") | Some("false") | Some("0") => Duration::ZERO,
        Some("true") if q.wait_ms.is_some() => {
            match tracked::wait_of(Some("true"), q.wait_ms.as_deref()) {
                Ok(w) => w.min(max_wait),
                Err(_) => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "wait_ms must be a non-negative number of milliseconds.",
                        None,
                    );
                }
            }
        }
        Some("true") | Some("1") => max_wait,
        Some(other) => match shellward_policy::duration::parse_millis(other) {
            Ok(ms) => Duration::from_millis(ms).min(max_wait),
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "wait={other:?}: {e}; use wait=true (until it exits) or a duration such as 30s"
                    ),
                    None,
                );
            }
        },
    };
    // A tracked identity (or a tool call's UUID) names the process it started.
    let id = resolve(&state, &id, &session(&headers));
    output_of(&state, &headers, &id, wait).await
}

/// The output of process `id` as Coder's output route answers it, after waiting up to `wait` for its exit.
pub(crate) async fn output_of(
    state: &AppState,
    headers: &HeaderMap,
    id: &str,
    wait: Duration,
) -> Response {
    match output_json(state, headers, id, wait).await {
        Some(out) => axum::Json(out).into_response(),
        None => not_found(id),
    }
}

/// [`output_of`]'s answer as JSON; `None` for a process this request may not see (or no longer kept).
pub(crate) async fn output_json(
    state: &AppState,
    headers: &HeaderMap,
    id: &str,
    wait: Duration,
) -> Option<Value> {
    let sess = session(headers);
    let chat = chat_id(headers);
    let process = session_handle(&state.sw, sess.as_deref()).process(id);
    match process.view() {
        Ok(info) if visible(chat.as_deref(), &info.labels) => {}
        _ => return None,
    }
    // Wait for the exit (the view is not used), then read the head and the tail as bytes.
    let done = match process
        .read(&ReadOptions::view().wait(wait).max_bytes(0))
        .await
    {
        Ok(r) => r,
        Err(_) => return None,
    };
    let head = process
        .read(&ReadOptions::after(0).max_bytes(HEAD_BYTES))
        .await;
    let Ok(head) = head else {
        return None;
    };
    let head_chunk = head.chunk.unwrap_or_else(empty_chunk);
    let mut tail_chunk = None;
    if head_chunk.total_bytes > head_chunk.next_cursor {
        let from = head_chunk
            .next_cursor
            .max(head_chunk.total_bytes.saturating_sub(TAIL_BYTES as u64));
        if let Ok(t) = process
            .read(&ReadOptions::after(from).max_bytes(TAIL_BYTES))
            .await
        {
            tail_chunk = t.chunk;
        }
    }
    let (text, truncation) = head_tail(&head_chunk, tail_chunk.as_ref());
    let running = done.exit == ExitState::Running;
    let mut out = json!({ "output": text, "running": running });
    if let Some(t) = truncation {
        out["truncated"] = t;
    }
    if let Some(c) = exit_code(&done.exit) {
        out["exit_code"] = json!(c);
    }
    if let Some(s) = done.exit.signal() {
        out["signal"] = json!(s);
    }
    if let Ok(info) = process.view() {
        // Coder's agent answers the command too (`ProcessOutputResponse.Command`).
        out["command"] = json!(info.command);
        if let Some(p) = info.log_path {
            out["log_path"] = json!(p);
        }
    }
    Some(out)
}

fn empty_chunk() -> shellward::OutputChunk {
    shellward::OutputChunk::default()
}

/// Coder's head/tail shape from a read of the first bytes and (when there is more) a read of the last: the text and
/// the `truncated` object (none when every byte is shown).
fn head_tail(
    head: &shellward::OutputChunk,
    tail: Option<&shellward::OutputChunk>,
) -> (String, Option<Value>) {
    let (head_text, head_cut) = shorten_lines(&head.text);
    let Some(tail) = tail.filter(|t| !t.text.is_empty() || t.skipped_bytes > 0) else {
        // Everything is in the head.
        let original = head.next_cursor;
        if head_cut == 0 {
            return (head_text, None);
        }
        let retained = head_text.len();
        return (
            head_text,
            Some(truncation(original, retained, head_cut as u64)),
        );
    };
    let tail_start = tail.next_cursor - tail.text.len() as u64;
    let gap = tail_start.saturating_sub(head.next_cursor);
    let original = tail.next_cursor;
    let (tail_text, tail_cut) = shorten_lines(&tail.text);
    let mut text = head_text;
    if gap > 0 {
        text.push_str(&format!("\n\n... [omitted {gap} bytes] ...\n\n"));
    }
    text.push_str(&tail_text);
    let omitted = gap + (head_cut + tail_cut) as u64;
    if omitted == 0 {
        return (text, None);
    }
    let retained = text.len();
    (text, Some(truncation(original, retained, omitted)))
}

fn truncation(original: u64, retained: usize, omitted: u64) -> Value {
    json!({
        "original_bytes": original,
        "retained_bytes": retained,
        "omitted_bytes": omitted,
        "strategy": "head_tail",
    })
}

/// Shortens lines over [`MAX_LINE`] bytes to that length, ending with [`LINE_SUFFIX`] (never inside a character).
/// Returns the text and the number of bytes cut.
fn shorten_lines(text: &str) -> (String, usize) {
    if text.len() <= MAX_LINE {
        return (text.to_string(), 0);
    }
    let mut out = String::with_capacity(text.len());
    let mut cut = 0;
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.len() > MAX_LINE {
            let mut keep = MAX_LINE - LINE_SUFFIX.len();
            while !line.is_char_boundary(keep) {
                keep -= 1;
            }
            out.push_str(&line[..keep]);
            out.push_str(LINE_SUFFIX);
            cut += line.len() - keep;
        } else {
            out.push_str(line);
        }
    }
    (out, cut)
}

/// `workspacesdk.SignalProcessRequest`.
#[derive(Deserialize, Default)]
struct SignalRequest {
    #[serde(default)]
    signal: Option<String>,
}

/// `POST /api/v0/processes/{id}/signal`.
pub(crate) async fn signal(
    State(state): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let sess = session(&headers);
    let chat = chat_id(&headers);
    // A tracked identity names the process it started; answers keep the id the client sent.
    let shown = id.clone();
    let id = resolve(&state, &id, &sess);
    if let Ok(info) = session_handle(&state.sw, sess.as_deref())
        .process(id.as_str())
        .view()
        && !visible(chat.as_deref(), &info.labels)
    {
        return not_found(&shown);
    }
    let req: SignalRequest = match decode(&body) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    let name = req.signal.unwrap_or_default();
    let signal = match name.as_str() {
        "" => return error(StatusCode::BAD_REQUEST, "Signal is required.", None),
        "kill" => SignalName::Kill,
        "terminate" => SignalName::Terminate,
        other => {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "Unsupported signal {other:?}. Use \"kill\" or \"terminate\" (SIGTERM, then SIGKILL after a grace \
                     period)."
                ),
                None,
            );
        }
    };
    let call = ToolCall::ProcessSignal(ProcessSignalArgs::new(id.clone(), signal));
    let signalled = session_handle(&state.sw, sess.as_deref())
        .call_tool(call, StartOptions::new())
        .await;
    match signalled {
        Ok(ToolOutput::ProcessSignal(r)) => {
            let mut out = json!({
                "message": format!("Signal {name:?} sent to process {shown:?}."),
                "running": r.running,
            });
            if let Some(c) = r.exit_code {
                out["exit_code"] = json!(c);
            }
            if let Some(s) = &r.signal {
                out["signal"] = json!(s);
            }
            axum::Json(out).into_response()
        }
        Ok(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Failed to signal process.",
            Some("process_signal answered with another tool's result".into()),
        ),
        Err(e) => match e.kind {
            ToolErrorKind::UnknownProcess => not_found(&shown),
            ToolErrorKind::NotAlive => error(
                StatusCode::CONFLICT,
                format!("Process {shown:?} is not running."),
                None,
            ),
            _ => error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Failed to signal process.",
                Some(e.message),
            ),
        },
    }
}

#[cfg(test)]
mod tests;
