//! Coder's at-most-once tool calls (`agent/agenttoolcall` in Coder's repository): a start that carries a chat tool
//! call's identity runs at most once, and every repeat of it is answered with the response the one run recorded.
//!
//! - **Identity.** `Coder-Tool-Call-Message-Id` (an integer > 0), `Coder-Tool-Call-Id` (path-escaped as Go's
//!   `url.PathEscape` writes it) and `Coder-Tool-Call-Age-Ms` (milliseconds since the tool call was committed): all
//!   three or none, one value each, else 400; with them `Coder-Chat-Id` is required. The process id is
//!   [`tool_call_uuid`]: UUIDv5 in Coder's namespace over the 16 chat-id bytes, the big-endian message id and the raw
//!   tool-call id; shellward keeps its own id behind it ([`ToolCalls::process_of`]).
//! - **Decisions**, per session and chat, keeping only the chat's latest message: a tool call of an older message is
//!   `stale_tool_call`; a known one answers its recorded response (waiting for a run in progress), unless it was
//!   canceled (`tool_call_canceled`) or its request differs (`input_mismatch`: method, path, query and body, each
//!   length-prefixed into one SHA-256); an unknown one runs, unless this server started no more than its age (plus
//!   2 s of transit) ago — then an earlier server may have run it and it is `agent_started_after_tool_call`. Every
//!   refusal is a 409 `{message, code}`; every recorded answer carries `Coder-Tool-Call-Run-Age-Ms`.
//! - **Cancel** (`POST /api/v0/tool-calls/{id}/cancel`, `{"stop_if_run_age_below_ms": N}`): the path's id must be the
//!   headers' tool call; one never received is recorded as canceled (a start still in transit then does nothing) and
//!   answered `{"started": false}`; one that ran is answered with its recorded start (`status_code`, `content_type`,
//!   `body` base64 as Go encodes bytes) and its process, stopped (its whole tree killed) when it still runs and its run
//!   age is below `N` (0 never stops: a background process, a foreground one past its timeout).
//!
//! The run itself happens on a task of its own, so a client that goes away mid-start still leaves its recorded
//! answer for the retry.

use super::{AppState, Shared, decode, error_body};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use uuid::Uuid;

/// `workspacesdk.CoderToolCallMessageIDHeader`.
const MESSAGE_ID: &str = "Coder-Tool-Call-Message-Id";
/// `workspacesdk.CoderToolCallIDHeader`.
const TOOL_CALL_ID: &str = "Coder-Tool-Call-Id";
/// `workspacesdk.CoderToolCallAgeMsHeader`.
const AGE_MS: &str = "Coder-Tool-Call-Age-Ms";
/// `workspacesdk.CoderToolCallRunAgeMsHeader`, set on every recorded answer.
pub(crate) const RUN_AGE_MS: &str = "Coder-Tool-Call-Run-Age-Ms";
/// `workspacesdk.ToolCallUUIDNamespace`: uuid5(NAMESPACE_URL, "https://coder.com/workspace-agent/tool-call").
const NAMESPACE: Uuid = Uuid::from_u128(0xc5773f4c_0b3f_57bc_9147_36daf7921a1b);
/// Request transit time after the chat measured a tool call's age (Coder's `ageMargin`).
const AGE_MARGIN: Duration = Duration::from_secs(2);
/// Chats remembered at most (each holds its latest message's records); past it the least recently used one goes.
const MAX_CHATS: usize = 4096;
/// Tool call UUIDs mapped to shellward's process ids at most; past it the oldest mapping goes (its process stays,
/// reachable by shellward's own id).
const MAX_PROCESSES: usize = 16384;

/// The process id of a chat's tool call, as Coder's chat and agent both derive it (`workspacesdk.ToolCallUUID`).
pub(crate) fn tool_call_uuid(chat: Uuid, message_id: i64, tool_call_id: &[u8]) -> Uuid {
    let mut name = Vec::with_capacity(16 + 8 + tool_call_id.len());
    name.extend_from_slice(chat.as_bytes());
    name.extend_from_slice(&(message_id as u64).to_be_bytes());
    name.extend_from_slice(tool_call_id);
    Uuid::new_v5(&NAMESPACE, &name)
}

/// The tool call headers of a request (`workspacesdk.ToolCall`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolCallHeaders {
    message_id: i64,
    /// The provider's tool call id, raw (unescaped) bytes.
    id: Vec<u8>,
    age: Duration,
}

/// Parses the tool call headers as Coder's `ToolCallFromHeaders` does: `Ok(None)` when none is present; an error
/// naming what is wrong when only some are, one is repeated, or a value is malformed.
pub(crate) fn from_headers(headers: &HeaderMap) -> Result<Option<ToolCallHeaders>, String> {
    let names = [MESSAGE_ID, TOOL_CALL_ID, AGE_MS];
    let mut missing = Vec::new();
    for name in names {
        match headers.get_all(name).iter().count() {
            0 => missing.push(name),
            1 => {}
            _ => return Err(format!("invalid {name} header: multiple values")),
        }
    }
    if missing.len() == names.len() {
        return Ok(None);
    }
    if !missing.is_empty() {
        return Err(format!(
            "incomplete tool call headers: missing {}",
            missing.join(", ")
        ));
    }
    let value = |name: &str| -> String {
        headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default()
    };
    let raw = value(MESSAGE_ID);
    let message_id = match raw.parse::<i64>() {
        Ok(n) if n > 0 && go_integer(&raw) => n,
        _ => {
            return Err(format!(
                "invalid {MESSAGE_ID} header {raw:?}: must be an integer greater than 0"
            ));
        }
    };
    let id = path_unescape(&value(TOOL_CALL_ID))
        .map_err(|e| format!("invalid {TOOL_CALL_ID} header: {e}"))?;
    if id.is_empty() {
        return Err(format!("invalid {TOOL_CALL_ID} header: must not be empty"));
    }
    let raw = value(AGE_MS);
    let age = match raw.parse::<i64>() {
        Ok(ms) if ms >= 0 && go_integer(&raw) && ms <= i64::MAX / 1_000_000 => {
            Duration::from_millis(ms as u64)
        }
        _ => {
            return Err(format!(
                "invalid {AGE_MS} header {raw:?}: must be a non-negative integer number of milliseconds"
            ));
        }
    };
    Ok(Some(ToolCallHeaders {
        message_id,
        id,
        age,
    }))
}

/// Whether `s` is an integer as Go's `strconv.ParseInt(s, 10, 64)` reads one (Rust's parse also takes a leading
/// `+`, as Go does; both refuse spaces and underscores).
fn go_integer(s: &str) -> bool {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Go's `url.PathUnescape`: `%XX` decoded, a `%` not followed by two hex digits an error, `+` left as it is.
fn path_unescape(s: &str) -> Result<Vec<u8>, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .filter(|h| h.iter().all(u8::is_ascii_hexdigit));
            let Some(hex) = hex else {
                let end = (i + 3).min(bytes.len());
                return Err(format!(
                    "invalid URL escape {:?}",
                    String::from_utf8_lossy(&bytes[i..end])
                ));
            };
            let text = std::str::from_utf8(hex).unwrap_or("00");
            out.push(u8::from_str_radix(text, 16).unwrap_or(0));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// A recorded answer: status, `Content-Type` and body, replayed byte for byte.
#[derive(Debug, Clone)]
struct Recorded {
    status: StatusCode,
    content_type: Option<HeaderValue>,
    body: Bytes,
}

/// One tool call: the request it was first sent as (hashed), whether a cancel came first, when it was first seen,
/// and its answer once the run has one. `input` and `canceled` never change after insertion.
struct Record {
    input: [u8; 32],
    canceled: bool,
    created: Instant,
    answer: watch::Sender<Option<Recorded>>,
    /// The process the run started (shellward's id), and whether a cancel killed it.
    process: Mutex<Option<String>>,
    killed: std::sync::atomic::AtomicBool,
}

impl Record {
    fn new(input: [u8; 32], canceled: bool, answer: Option<Recorded>) -> Arc<Record> {
        Arc::new(Record {
            input,
            canceled,
            created: Instant::now(),
            answer: watch::Sender::new(answer),
            process: Mutex::new(None),
            killed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    async fn wait(&self) -> Recorded {
        let mut rx = self.answer.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(a) => a.clone().unwrap_or_else(handler_failed),
            // The sender lives in the record itself: it cannot be dropped while this waits.
            Err(_) => handler_failed(),
        }
    }
}

/// The answer recorded for a run that ended without one (Coder's `panicResponse`).
fn handler_failed() -> Recorded {
    Recorded {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        content_type: Some(HeaderValue::from_static("application/json")),
        body: Bytes::from_static(br#"{"message":"The tool call handler failed."}"#),
    }
}

/// A chat's latest message and the records of its tool calls.
struct ChatRecords {
    latest: i64,
    records: HashMap<Vec<u8>, Arc<Record>>,
    used: u64,
}

/// Why a request is answered without acting on its tool call (each a 409 with its code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    Stale,
    StartedAfter,
    InputMismatch,
    Canceled,
}

impl Refusal {
    fn answer(self) -> Response {
        let (code, message) = match self {
            Refusal::Stale => (
                "stale_tool_call",
                "The tool call is in an older message than the chat's latest message.",
            ),
            Refusal::StartedAfter => (
                "agent_started_after_tool_call",
                "The workspace agent started after the tool call was committed.",
            ),
            Refusal::InputMismatch => (
                "input_mismatch",
                "The request differs from the recorded request for this tool call.",
            ),
            Refusal::Canceled => ("tool_call_canceled", "The tool call was canceled."),
        };
        (
            StatusCode::CONFLICT,
            axum::Json(json!({ "message": message, "code": code })),
        )
            .into_response()
    }
}

/// Which tool call a request acts for: its session, chat and headers.
struct Key {
    session: Option<String>,
    chat: Uuid,
    call: ToolCallHeaders,
}

impl Key {
    fn uuid(&self) -> Uuid {
        tool_call_uuid(self.chat, self.call.message_id, &self.call.id)
    }
}

/// A chat of a session.
type ChatKey = (Option<String>, Uuid);

/// Each chat's records, and a clock counting their uses (the least recently used chat goes first).
type Chats = (HashMap<ChatKey, ChatRecords>, u64);

/// Tool call UUID → (session, shellward's process id), and the UUIDs in the order they were mapped.
type Processes = (
    HashMap<Uuid, (Option<String>, String)>,
    std::collections::VecDeque<Uuid>,
);

/// This server's tool call records (see the module docs).
pub(crate) struct ToolCalls {
    started: Instant,
    chats: Mutex<Chats>,
    processes: Mutex<Processes>,
}

impl Default for ToolCalls {
    fn default() -> Self {
        ToolCalls {
            started: Instant::now(),
            chats: Mutex::new((HashMap::new(), 0)),
            processes: Mutex::new((HashMap::new(), std::collections::VecDeque::new())),
        }
    }
}

/// What a start or cancel found: the existing record, or none (never received).
enum Lookup {
    Found(Arc<Record>),
    New,
}

impl ToolCalls {
    /// shellward's process id for tool call UUID `id` of `session`, when its start ran.
    pub(crate) fn process_of(&self, id: &str, session: &Option<String>) -> Option<String> {
        let uuid = Uuid::parse_str(id).ok()?;
        let map = self.processes.lock().unwrap_or_else(|p| p.into_inner());
        let (s, p) = map.0.get(&uuid)?;
        (s == session).then(|| p.clone())
    }

    /// Records that tool call `uuid` of `session` started shellward's process `ours`.
    fn map(&self, uuid: Uuid, session: Option<String>, ours: String) {
        let mut guard = self.processes.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *guard;
        if map.insert(uuid, (session, ours)).is_none() {
            order.push_back(uuid);
        }
        while order.len() > MAX_PROCESSES {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }

    /// The tool call UUID shellward's process `process` was started for, if any.
    pub(crate) fn identity_of(&self, process: &str) -> Option<String> {
        self.processes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .iter()
            .find(|(_, (_, p))| p == process)
            .map(|(id, _)| id.hyphenated().to_string())
    }

    /// Coder's `lookup`: the record of `key`, none when this server can prove it never received it, or the refusal.
    /// The chats' lock must be held (`chats`).
    fn lookup(&self, chats: &HashMap<ChatKey, ChatRecords>, key: &Key) -> Result<Lookup, Refusal> {
        if let Some(chat) = chats.get(&(key.session.clone(), key.chat)) {
            if key.call.message_id < chat.latest {
                return Err(Refusal::Stale);
            }
            if key.call.message_id == chat.latest
                && let Some(rec) = chat.records.get(&key.call.id)
            {
                return Ok(Lookup::Found(rec.clone()));
            }
        }
        // Records from before this server started are lost: one that started after the tool call was committed
        // cannot tell whether an earlier one received it.
        if self.started.elapsed().saturating_sub(AGE_MARGIN) <= key.call.age {
            return Err(Refusal::StartedAfter);
        }
        Ok(Lookup::New)
    }

    /// Records `rec` for `key`: a newer message drops the chat's older records (the chat has resolved them).
    fn insert(&self, chats: &mut Chats, key: &Key, rec: Arc<Record>) {
        let (map, clock) = chats;
        *clock += 1;
        let now = *clock;
        let id = (key.session.clone(), key.chat);
        if !map.contains_key(&id)
            && map.len() >= MAX_CHATS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, c)| c.used)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        let chat = map.entry(id).or_insert_with(|| ChatRecords {
            latest: key.call.message_id,
            records: HashMap::new(),
            used: now,
        });
        if key.call.message_id > chat.latest {
            chat.latest = key.call.message_id;
            chat.records.clear();
        }
        chat.used = now;
        chat.records.insert(key.call.id.clone(), rec);
    }

    /// Coder's `begin`: the existing record (and whether this request must run it) or the refusal.
    fn begin(&self, key: &Key, input: [u8; 32]) -> Result<(Arc<Record>, bool), Refusal> {
        let mut chats = self.chats.lock().unwrap_or_else(|p| p.into_inner());
        match self.lookup(&chats.0, key)? {
            Lookup::Found(rec) if rec.canceled => Err(Refusal::Canceled),
            Lookup::Found(rec) if rec.input != input => Err(Refusal::InputMismatch),
            Lookup::Found(rec) => Ok((rec, false)),
            Lookup::New => {
                let rec = Record::new(input, false, None);
                self.insert(&mut chats, key, rec.clone());
                Ok((rec, true))
            }
        }
    }

    /// Coder's `cancel`: the existing record, or none after recording a tool call never received as canceled.
    fn cancel(&self, key: &Key) -> Result<Option<Arc<Record>>, Refusal> {
        let mut chats = self.chats.lock().unwrap_or_else(|p| p.into_inner());
        match self.lookup(&chats.0, key)? {
            Lookup::Found(rec) => Ok(Some(rec)),
            Lookup::New => {
                let rec = Record::new([0; 32], true, Some(handler_failed()));
                self.insert(&mut chats, key, rec);
                Ok(None)
            }
        }
    }
}

/// What a repeated request must match: method, path, raw query and body, each length-prefixed (Coder's
/// `requestInput`).
fn request_input(method: &str, path: &str, query: &str, body: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    for field in [method.as_bytes(), path.as_bytes(), query.as_bytes(), body] {
        h.update((field.len() as u64).to_be_bytes());
        h.update(field);
    }
    h.finalize().into()
}

/// The key of a request's tool call, or the 400 that answers it (`Ok(None)`: no tool call headers).
fn key_of(headers: &HeaderMap) -> Result<Option<Key>, Box<Response>> {
    let call = match from_headers(headers) {
        Ok(Some(c)) => c,
        Ok(None) => return Ok(None),
        Err(detail) => {
            let (status, body) = error_body(
                StatusCode::BAD_REQUEST,
                "Invalid tool call headers.",
                Some(detail),
            );
            return Err(Box::new((status, axum::Json(body)).into_response()));
        }
    };
    let Some(chat) = super::chat_id(headers).and_then(|c| Uuid::parse_str(&c).ok()) else {
        let (status, body) = error_body(
            StatusCode::BAD_REQUEST,
            "Tool call headers require the Coder-Chat-Id header.",
            None,
        );
        return Err(Box::new((status, axum::Json(body)).into_response()));
    };
    Ok(Some(Key {
        session: crate::http::session_header::session(headers),
        chat,
        call,
    }))
}

/// Writes a recorded answer with the run age of its record.
fn replay(rec: &Record, answer: Recorded) -> Response {
    let mut response = (answer.status, answer.body).into_response();
    let h = response.headers_mut();
    match answer.content_type {
        Some(ct) => {
            h.insert(axum::http::header::CONTENT_TYPE, ct);
        }
        None => {
            h.remove(axum::http::header::CONTENT_TYPE);
        }
    }
    h.insert(RUN_AGE_MS, run_age_header(rec));
    response
}

fn run_age_header(rec: &Record) -> HeaderValue {
    HeaderValue::from(rec.created.elapsed().as_millis() as u64)
}

/// `POST /api/v0/processes/start` with tool call headers (see the module docs); `None` when the request has none
/// (the caller starts it as any other).
pub(crate) async fn start(
    state: &Shared,
    headers: &HeaderMap,
    query: &str,
    body: &Bytes,
) -> Option<Response> {
    let key = match key_of(headers) {
        Ok(Some(k)) => k,
        Ok(None) => return None,
        Err(r) => return Some(*r),
    };
    let input = request_input("POST", "/api/v0/processes/start", query, body);
    let (rec, run) = match state.tool_calls.begin(&key, input) {
        Ok(r) => r,
        Err(refusal) => return Some(refusal.answer()),
    };
    if run {
        // On a task of its own: a client gone mid-start still leaves the answer its retry gets.
        let (state, headers, body, rec, uuid) = (
            state.clone(),
            headers.clone(),
            body.clone(),
            rec.clone(),
            key.uuid(),
        );
        let session = key.session.clone();
        tokio::spawn(async move {
            let answer = run_start(&state, &headers, &body, uuid, &session, &rec).await;
            rec.answer.send_replace(Some(answer));
        });
    }
    let answer = rec.wait().await;
    Some(replay(&rec, answer))
}

/// Runs a tool call's start: the process's id in the answer is the tool call's UUID.
async fn run_start(
    state: &AppState,
    headers: &HeaderMap,
    body: &Bytes,
    uuid: Uuid,
    session: &Option<String>,
    rec: &Record,
) -> Recorded {
    let json_answer = |status: StatusCode, v: Value| Recorded {
        status,
        content_type: Some(HeaderValue::from_static("application/json")),
        body: Bytes::from(serde_json::to_vec(&v).unwrap_or_default()),
    };
    let req: super::StartRequest = match decode(body) {
        Ok(r) => r,
        Err(r) => return recorded_of(*r).await,
    };
    if req.command.as_deref().unwrap_or("").is_empty() {
        let (status, v) = error_body(StatusCode::BAD_REQUEST, "Command is required.", None);
        return json_answer(status, v);
    }
    match super::launch(state, headers, req).await {
        Ok(started) => {
            let ours = started.process.id().to_string();
            state.tool_calls.map(uuid, session.clone(), ours.clone());
            *rec.process.lock().unwrap_or_else(|p| p.into_inner()) = Some(ours);
            let mut v = super::started_json(&started, None);
            v["id"] = json!(uuid.hyphenated().to_string());
            json_answer(StatusCode::OK, v)
        }
        Err((status, v)) => json_answer(status, v),
    }
}

/// A response turned into a recorded answer (its body read whole; the handler's own answers are small).
async fn recorded_of(response: Response) -> Recorded {
    let status = response.status();
    let content_type = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .cloned();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    Recorded {
        status,
        content_type,
        body,
    }
}

/// `workspacesdk.CancelToolCallRequest`.
#[derive(Deserialize, Default)]
pub(crate) struct CancelRequest {
    #[serde(default)]
    stop_if_run_age_below_ms: Option<i64>,
}

/// `POST /api/v0/tool-calls/{id}/cancel` (see the module docs).
pub(crate) async fn cancel(
    State(state): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let key = match key_of(&headers) {
        Ok(Some(k)) => k,
        Ok(None) => {
            let (status, body) = error_body(
                StatusCode::BAD_REQUEST,
                "Canceling a tool call requires tool call headers.",
                None,
            );
            return (status, axum::Json(body)).into_response();
        }
        Err(r) => return *r,
    };
    // The id is derived from the request's own chat: a request cannot address another chat's tool call.
    if id != key.uuid().hyphenated().to_string() {
        let (status, body) = error_body(
            StatusCode::BAD_REQUEST,
            "The tool call ID in the path is not the ID of the tool call in the headers.",
            None,
        );
        return (status, axum::Json(body)).into_response();
    }
    let req: CancelRequest = match decode(&body) {
        Ok(r) => r,
        Err(r) => return *r,
    };
    let rec = match state.tool_calls.cancel(&key) {
        Ok(Some(rec)) if !rec.canceled => rec,
        Ok(_) => return axum::Json(json!({ "started": false })).into_response(),
        Err(refusal) => return refusal.answer(),
    };
    let answer = rec.wait().await;
    let threshold = Duration::from_millis(req.stop_if_run_age_below_ms.unwrap_or(0).max(0) as u64);
    let mut out = json!({
        "started": true,
        "status_code": answer.status.as_u16(),
    });
    if let Some(ct) = answer.content_type.as_ref().and_then(|c| c.to_str().ok()) {
        out["content_type"] = json!(ct);
    }
    if !answer.body.is_empty() {
        use base64::Engine;
        out["body"] = json!(base64::engine::general_purpose::STANDARD.encode(&answer.body));
    }
    let ours = rec
        .process
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if let Some(ours) = ours
        && let Some(process) = stop(&state, &headers, &key, &ours, &rec, threshold).await
    {
        out["process"] = process;
    }
    let mut response = axum::Json(out).into_response();
    response
        .headers_mut()
        .insert(RUN_AGE_MS, run_age_header(&rec));
    response
}

/// Stops the tool call's process when it runs and its run age is below `threshold` (its whole tree, killed, and
/// waited for), and answers its state: `{running, canceled, output, truncated?, exit_code?, run_age_ms}`. `None` when
/// the process is no longer kept.
async fn stop(
    state: &AppState,
    headers: &HeaderMap,
    key: &Key,
    ours: &str,
    rec: &Record,
    threshold: Duration,
) -> Option<Value> {
    let handle = crate::service::session_handle(&state.sw, key.session.as_deref());
    let process = handle.process(ours);
    let info = process.view().ok()?;
    let run_age = rec.created.elapsed();
    if info.running && run_age < threshold {
        if process.signal(shellward::SignalKind::Kill).await.is_ok() {
            rec.killed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), process.wait()).await;
    }
    let output = super::output_json(state, headers, ours, Duration::ZERO).await?;
    let mut v = json!({
        "running": output["running"],
        "canceled": rec.killed.load(std::sync::atomic::Ordering::SeqCst),
        "output": output["output"],
        "run_age_ms": rec.created.elapsed().as_millis() as u64,
    });
    if !output["truncated"].is_null() {
        v["truncated"] = output["truncated"].clone();
    }
    if !output["exit_code"].is_null() {
        v["exit_code"] = output["exit_code"].clone();
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_uuid_is_coders() {
        // Coder's namespace is uuid5(NAMESPACE_URL, "https://coder.com/workspace-agent/tool-call").
        assert_eq!(
            Uuid::new_v5(
                &Uuid::NAMESPACE_URL,
                b"https://coder.com/workspace-agent/tool-call"
            ),
            NAMESPACE
        );
        // The name is the chat's 16 bytes, the big-endian message id and the raw tool call id.
        let chat = Uuid::parse_str("11111111-2222-3333-4444-555555555555").unwrap();
        let mut name = chat.as_bytes().to_vec();
        name.extend_from_slice(&7u64.to_be_bytes());
        name.extend_from_slice(b"call_1");
        assert_eq!(
            tool_call_uuid(chat, 7, b"call_1"),
            Uuid::new_v5(&NAMESPACE, &name)
        );
        assert_eq!(tool_call_uuid(chat, 7, b"call_1").get_version_num(), 5);
        assert_ne!(
            tool_call_uuid(chat, 7, b"call_1"),
            tool_call_uuid(chat, 8, b"call_1")
        );
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn headers_are_all_or_none_and_read_as_go_reads_them() {
        assert_eq!(from_headers(&HeaderMap::new()), Ok(None));
        let full = headers(&[
            (MESSAGE_ID, "3"),
            (TOOL_CALL_ID, "toolu_%2Fa%20b+c"),
            (AGE_MS, "1500"),
        ]);
        assert_eq!(
            from_headers(&full),
            Ok(Some(ToolCallHeaders {
                message_id: 3,
                id: b"toolu_/a b+c".to_vec(),
                age: Duration::from_millis(1500),
            }))
        );
        let partial = headers(&[(MESSAGE_ID, "3")]);
        assert_eq!(
            from_headers(&partial),
            Err(
                "incomplete tool call headers: missing Coder-Tool-Call-Id, Coder-Tool-Call-Age-Ms"
                    .into()
            )
        );
        for (name, bad) in [
            (MESSAGE_ID, "0"),
            (MESSAGE_ID, "-2"),
            (MESSAGE_ID, "1.5"),
            (MESSAGE_ID, " 3"),
            (TOOL_CALL_ID, "%zz"),
            (TOOL_CALL_ID, ""),
            (AGE_MS, "-1"),
            (AGE_MS, "soon"),
            (AGE_MS, "9223372036855"),
        ] {
            let mut h = full.clone();
            h.insert(name, HeaderValue::from_str(bad).unwrap());
            let e = from_headers(&h).unwrap_err();
            assert!(e.contains(name), "{name}={bad:?}: {e}");
        }
        let mut twice = full.clone();
        twice.append(AGE_MS, HeaderValue::from_static("1"));
        assert_eq!(
            from_headers(&twice),
            Err("invalid Coder-Tool-Call-Age-Ms header: multiple values".into())
        );
    }

    #[test]
    fn the_request_input_separates_its_fields() {
        assert_ne!(
            request_input("POST", "/a", "b", b""),
            request_input("POST", "/ab", "", b"")
        );
        assert_eq!(
            request_input("POST", "/a", "", b"{}"),
            request_input("POST", "/a", "", b"{}")
        );
    }
}
