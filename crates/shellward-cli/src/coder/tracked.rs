//! Coder's tracked-process protocol, version 1 (`agent/agentproc/tracked.go`, `codersdk/workspacesdk/processes.go` at
//! coder/coder 09c521c): a start names its own identity — `process_id` (a UUID), the `agent_instance_id` it expects
//! (this server's, from `list`), an `input_digest` of the request ([`go_json::start_digest`]) and an optional
//! absolute `deadline` — so a retried or delayed request can never become a second execution.
//!
//! - `POST start-tracked` (or `start` carrying the identity): the same identity and digest attaches to the process it
//!   started (`{id, started: true}`, the id being `process_id`); a different digest, chat or deadline, a fenced
//!   identity or another instance is 409; a bad identity or digest 400; a deadline already past, or an identity whose
//!   process is gone, 410; more than 16,384 identities 429. A start refused before it ran (a policy's deny) is
//!   remembered and answered the same on a retry. The deadline kills the whole tree.
//! - `POST cancel-tracked` `{process_id, agent_instance_id, input_digest, deadline, wait_ms?}`: kills a running
//!   process (and waits up to `wait_ms` to observe its end), or *fences* an identity that has not started, so a
//!   delayed start of it is refused; answers `{agent_instance_id, fenced, process?}`.
//! - `GET {id}/output-tracked?agent_instance_id=…[&input_digest=…][&wait=true&wait_ms=…]`: the output as `output`
//!   answers it; once the process is no longer kept, 410 with its final state (`output_unavailable: true`) for the
//!   right digest.
//! - `GET list` carries `protocol_version: 1` and `agent_instance_id`; tracked processes are listed by their
//!   `process_id`, and `{id}/output` and `{id}/signal` take it too.
//!
//! Identities are scoped like everything else here: by shellward's session, then by Coder's chat.

use super::go_json::{StartInput, start_digest};
use super::{
    Shared, StartRequest, Started, chat_id, error, launch, not_found, output_of, started_json,
};
use crate::http::session_header::session;
use crate::service::session_handle;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};
use shellward::{ExitState, SignalKind};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use uuid::Uuid;

/// The protocol version `list` announces (`TrackedProcessProtocolVersion`).
pub const PROTOCOL_VERSION: u32 = 1;

/// Most identities remembered (`maxTrackedProcessIdentities`): receipts are never recycled within an instance.
const MAX_IDENTITIES: usize = 16_384;

/// The longest wait an output or cancel request may ask for (`maxWaitDuration`).
const MAX_WAIT: Duration = Duration::from_secs(300);

/// Why a tracked request is refused, with Coder's status and detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    Invalid,
    Conflict,
    Expired,
    Capacity,
}

impl Refusal {
    pub(crate) fn response(self) -> Response {
        let (status, detail) = match self {
            Refusal::Invalid => (StatusCode::BAD_REQUEST, "invalid tracked process identity"),
            Refusal::Conflict => (StatusCode::CONFLICT, "tracked process identity conflicts"),
            Refusal::Expired => (StatusCode::GONE, "tracked process history expired"),
            Refusal::Capacity => (
                StatusCode::TOO_MANY_REQUESTS,
                "tracked process identity capacity reached",
            ),
        };
        error(
            status,
            "Tracked process request failed.",
            Some(detail.into()),
        )
    }
}

/// What is remembered of one identity, past its process.
struct Receipt {
    digest: String,
    session: Option<String>,
    chat: Option<String>,
    deadline: Option<DateTime<Utc>>,
    /// Cancelled before it started: a start of it is refused.
    fenced: bool,
    /// The answer of a start refused before it ran (a deny, a failed spawn), repeated to a retry.
    refused: Option<(StatusCode, Value)>,
    /// shellward's id of the process it started.
    process: Option<String>,
    /// Its final state, once it ended (command and workdir left out, as Coder keeps it).
    terminal: Option<Value>,
}

impl Receipt {
    /// Whether a request's identity fields are this receipt's.
    fn same(
        &self,
        digest: &str,
        session: &Option<String>,
        chat: &Option<String>,
        deadline: &Option<DateTime<Utc>>,
    ) -> bool {
        self.digest == digest
            && &self.session == session
            && &self.chat == chat
            && &self.deadline == deadline
    }
}

/// The tracked identities of one server: its instance id and the receipts.
pub(crate) struct Tracked {
    instance: Uuid,
    receipts: Mutex<HashMap<Uuid, Receipt>>,
    /// Serializes admission (a start's check and spawn, a cancel's fence), as Coder's manager does under one lock.
    admission: tokio::sync::Mutex<()>,
}

impl Default for Tracked {
    fn default() -> Self {
        Tracked {
            instance: Uuid::new_v4(),
            receipts: Mutex::new(HashMap::new()),
            admission: tokio::sync::Mutex::new(()),
        }
    }
}

impl Tracked {
    fn receipts(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Receipt>> {
        self.receipts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This server's instance id, as `list` announces it.
    pub(crate) fn instance(&self) -> Uuid {
        self.instance
    }

    /// shellward's process id for a tracked `id` (a `process_id`) of `session`, when it started one.
    pub(crate) fn process_of(&self, id: &str, session: &Option<String>) -> Option<String> {
        let uuid = Uuid::parse_str(id).ok()?;
        let receipts = self.receipts();
        let r = receipts.get(&uuid)?;
        (&r.session == session).then(|| r.process.clone()).flatten()
    }

    /// The `process_id` shellward's process `process` was started under, if tracked.
    pub(crate) fn identity_of(&self, process: &str) -> Option<String> {
        self.receipts()
            .iter()
            .find(|(_, r)| r.process.as_deref() == Some(process))
            .map(|(id, _)| id.hyphenated().to_string())
    }
}

/// The identity fields of a start or cancel, parsed as Go decodes them (a field that does not parse is a 400).
struct Identity {
    process_id: Uuid,
    instance: Uuid,
    digest: String,
    deadline: Option<DateTime<Utc>>,
}

fn parse_uuid(field: &str, v: Option<&str>) -> Result<Uuid, Box<Response>> {
    match v {
        None | Some("") => Ok(Uuid::nil()),
        Some(s) => Uuid::parse_str(s).map_err(|e| bad_json(format!("{field}: invalid UUID: {e}"))),
    }
}

fn parse_deadline(v: Option<&str>) -> Result<Option<DateTime<Utc>>, Box<Response>> {
    let Some(s) = v else {
        return Ok(None);
    };
    let t = DateTime::parse_from_rfc3339(s)
        .map_err(|e| bad_json(format!("deadline: parsing time {s:?} as RFC 3339: {e}")))?
        .with_timezone(&Utc);
    // Go's zero time means no deadline.
    Ok((t.timestamp() != -62_135_596_800 || t.timestamp_subsec_nanos() != 0).then_some(t))
}

fn bad_json(detail: String) -> Box<Response> {
    Box::new(error(
        StatusCode::BAD_REQUEST,
        "Request body must be valid JSON.",
        Some(detail),
    ))
}

impl Identity {
    fn of(fields: &IdentityFields) -> Result<Identity, Box<Response>> {
        Ok(Identity {
            process_id: parse_uuid("process_id", fields.process_id.as_deref())?,
            instance: parse_uuid("agent_instance_id", fields.agent_instance_id.as_deref())?,
            digest: fields.input_digest.clone().unwrap_or_default(),
            deadline: parse_deadline(fields.deadline.as_deref())?,
        })
    }

    fn is_empty(&self) -> bool {
        self.process_id.is_nil()
            && self.instance.is_nil()
            && self.digest.is_empty()
            && self.deadline.is_none()
    }
}

/// Whether a start request carries any tracked identity field.
pub(crate) fn carries_identity(req: &StartRequest) -> bool {
    let t = &req.tracked;
    t.process_id.is_some()
        || t.agent_instance_id.is_some()
        || t.input_digest.is_some()
        || t.deadline.is_some()
}

/// What a start admits: attach to a process it started, or start it.
enum Admission {
    Attach(String),
    Start,
}

/// `POST start-tracked`, and `POST start` with a tracked identity (`route_tracked`: the identity is required).
pub(crate) async fn start(
    state: &Shared,
    headers: &HeaderMap,
    req: StartRequest,
    route_tracked: bool,
) -> Response {
    let ident = match Identity::of(&req.tracked) {
        Ok(i) => i,
        Err(r) => return *r,
    };
    if route_tracked && ident.process_id.is_nil() {
        return Refusal::Invalid.response();
    }
    let command = req.command.clone().unwrap_or_default();
    if command.is_empty() {
        return error(StatusCode::BAD_REQUEST, "Command is required.", None);
    }
    if ident.is_empty() {
        return super::start_untracked(state, headers, req).await;
    }
    let env = req.env.clone().unwrap_or_default();
    let digest = start_digest(&StartInput {
        command: &command,
        workdir: req.workdir.as_deref().unwrap_or_default(),
        env: &env,
        background: req.background.unwrap_or(false),
        deadline: ident.deadline,
    });
    let (sess, chat) = (session(headers), chat_id(headers));
    let tracked = &state.tracked;
    let _admitted = tracked.admission.lock().await;
    match admit(state, &ident, &digest, &sess, &chat) {
        Err(refusal) => return refusal.response(),
        Ok(Err(answer)) => return answer,
        Ok(Ok(Admission::Attach(process))) => {
            let _ = process;
            return axum::Json(json!({"id": ident.process_id.hyphenated().to_string(), "started": true, "attached": true}))
                .into_response();
        }
        Ok(Ok(Admission::Start)) => {}
    }
    let mut req = req;
    req.deadline_in = ident
        .deadline
        .map(|d| (d - Utc::now()).to_std().unwrap_or(Duration::ZERO));
    let mut receipt = Receipt {
        digest,
        session: sess.clone(),
        chat,
        deadline: ident.deadline,
        fenced: false,
        refused: None,
        process: None,
        terminal: None,
    };
    let answer = match launch(state, headers, req).await {
        Ok(started) => {
            receipt.process = Some(started.process.id().to_string());
            watch_end(state, ident.process_id, &started);
            let mut out = started_json(&started, None);
            out["id"] = json!(ident.process_id.hyphenated().to_string());
            axum::Json(out).into_response()
        }
        Err((status, body)) => {
            receipt.refused = Some((status, body.clone()));
            (status, axum::Json(body)).into_response()
        }
    };
    tracked.receipts().insert(ident.process_id, receipt);
    answer
}

/// Coder's `checkTrackedStart`: the identity checked against this instance and what it remembers. The inner
/// `Err` is a remembered refusal, answered again.
fn admit(
    state: &Shared,
    ident: &Identity,
    digest: &str,
    sess: &Option<String>,
    chat: &Option<String>,
) -> Result<Result<Admission, Response>, Refusal> {
    let tracked = &state.tracked;
    if ident.process_id.is_nil() || ident.instance.is_nil() || ident.digest != digest {
        return Err(Refusal::Invalid);
    }
    if ident.instance != tracked.instance {
        return Err(Refusal::Conflict);
    }
    let receipts = tracked.receipts();
    if let Some(r) = receipts.get(&ident.process_id) {
        if !r.same(digest, sess, chat, &ident.deadline) || r.fenced {
            return Err(Refusal::Conflict);
        }
        if let Some((status, body)) = &r.refused {
            return Ok(Err((*status, axum::Json(body.clone())).into_response()));
        }
        return match &r.process {
            Some(p)
                if session_handle(&state.sw, sess.as_deref())
                    .process(p.as_str())
                    .view()
                    .is_ok() =>
            {
                Ok(Ok(Admission::Attach(p.clone())))
            }
            _ => Err(Refusal::Expired),
        };
    }
    if ident.deadline.is_some_and(|d| Utc::now() >= d) {
        return Err(Refusal::Expired);
    }
    if receipts.len() >= MAX_IDENTITIES {
        return Err(Refusal::Capacity);
    }
    Ok(Ok(Admission::Start))
}

/// Records the final state of a tracked process once it ends, kept after the process itself is not.
fn watch_end(state: &Shared, id: Uuid, started: &Started) {
    let state = state.clone();
    let process = started.process.clone();
    let background = started.background;
    tokio::spawn(async move {
        let Ok(info) = process.wait().await else {
            return;
        };
        let mut terminal = info_json(&info, &id.hyphenated().to_string(), background);
        // Coder keeps the terminal state, never the execution payload.
        terminal["command"] = json!("");
        if let Some(o) = terminal.as_object_mut() {
            o.remove("workdir");
        }
        if let Some(r) = state.tracked.receipts().get_mut(&id) {
            r.terminal = Some(terminal);
        }
    });
}

/// A process as Coder's `ProcessInfo`, in its field order, under `id`.
pub(crate) fn info_json(info: &shellward::ProcessInfo, id: &str, background: bool) -> Value {
    let mut v = serde_json::Map::new();
    v.insert("id".into(), json!(id));
    v.insert("command".into(), json!(info.command));
    let workdir = info.workdir.to_string_lossy();
    if !workdir.is_empty() {
        v.insert("workdir".into(), json!(workdir));
    }
    v.insert("background".into(), json!(background));
    v.insert("running".into(), json!(info.exit == ExitState::Running));
    if let Some(c) = super::exit_code(&info.exit) {
        v.insert("exit_code".into(), json!(c));
    }
    v.insert("started_at_unix".into(), json!(info.started_at_unix));
    if let Some(at) = info.exited_at_unix {
        v.insert("exited_at_unix".into(), json!(at));
    }
    Value::Object(v)
}

/// The tracked protocol's identity as a request carries it: `process_id`, `agent_instance_id`, `input_digest`, and an
/// absolute `deadline` (RFC 3339).
#[derive(Deserialize, Default)]
pub(crate) struct IdentityFields {
    #[serde(default)]
    process_id: Option<String>,
    #[serde(default)]
    agent_instance_id: Option<String>,
    #[serde(default)]
    input_digest: Option<String>,
    #[serde(default)]
    deadline: Option<String>,
}

/// `workspacesdk.CancelProcessRequest`.
#[derive(Deserialize, Default)]
pub(crate) struct CancelRequest {
    #[serde(flatten)]
    tracked: IdentityFields,
    #[serde(default)]
    wait_ms: Option<i64>,
}

/// `POST cancel-tracked`: kills the identity's process, or fences an identity that never started.
pub(crate) async fn cancel(
    State(state): State<Shared>,
    headers: HeaderMap,
    super::Decoded(req): super::Decoded<CancelRequest>,
) -> Response {
    let wait = match req.wait_ms.unwrap_or(0) {
        ms if ms < 0 => return Refusal::Invalid.response(),
        ms => Duration::from_millis(ms as u64).min(MAX_WAIT),
    };
    let ident = match Identity::of(&req.tracked) {
        Ok(i) => i,
        Err(r) => return *r,
    };
    let hex_ok = ident.digest.len() == 64 && ident.digest.bytes().all(|b| b.is_ascii_hexdigit());
    if ident.process_id.is_nil() || ident.instance.is_nil() || !hex_ok {
        return Refusal::Invalid.response();
    }
    if ident.instance != state.tracked.instance {
        return Refusal::Conflict.response();
    }
    let (sess, chat) = (session(&headers), chat_id(&headers));
    let (process, fenced, terminal) = {
        let _admitted = state.tracked.admission.lock().await;
        let mut receipts = state.tracked.receipts();
        match receipts.get(&ident.process_id) {
            Some(r) if !r.same(&ident.digest, &sess, &chat, &ident.deadline) => {
                return Refusal::Conflict.response();
            }
            Some(_) => {}
            None if receipts.len() >= MAX_IDENTITIES => return Refusal::Capacity.response(),
            None => {
                receipts.insert(
                    ident.process_id,
                    Receipt {
                        digest: ident.digest.clone(),
                        session: sess.clone(),
                        chat: chat.clone(),
                        deadline: ident.deadline,
                        fenced: true,
                        refused: None,
                        process: None,
                        terminal: None,
                    },
                );
            }
        }
        let r = &receipts[&ident.process_id];
        (
            r.process.clone(),
            r.fenced || r.refused.is_some(),
            r.terminal.clone(),
        )
    };
    let id = ident.process_id.hyphenated().to_string();
    let mut out = json!({"agent_instance_id": state.tracked.instance.hyphenated().to_string(), "fenced": fenced});
    if let Some(t) = terminal {
        out["process"] = t;
    }
    if let Some(p) = process {
        let handle = session_handle(&state.sw, sess.as_deref()).process(p.as_str());
        if let Ok(info) = handle.view() {
            if info.exit == ExitState::Running {
                let _ = handle.signal(SignalKind::Kill).await;
            }
            // The wait only bounds observation; the kill stands either way.
            let _ = tokio::time::timeout(wait, handle.wait()).await;
            if let Ok(info) = handle.view() {
                let background = super::label(&info.labels, super::BACKGROUND_LABEL)
                    .is_some_and(|b| b == "true");
                out["process"] = info_json(&info, &id, background);
            }
        }
    }
    axum::Json(out).into_response()
}

/// The query of `output-tracked`.
#[derive(Deserialize)]
pub(crate) struct TrackedOutputQuery {
    #[serde(default)]
    agent_instance_id: Option<String>,
    #[serde(default)]
    input_digest: Option<String>,
    /// `wait` and `wait_ms`, as the output route takes them.
    #[serde(flatten)]
    wait: super::OutputQuery,
}

/// `GET {id}/output-tracked`.
pub(crate) async fn output(
    State(state): State<Shared>,
    Path(id): Path<String>,
    Query(q): Query<TrackedOutputQuery>,
    headers: HeaderMap,
) -> Response {
    let instance = state.tracked.instance.hyphenated().to_string();
    if q.agent_instance_id.as_deref() != Some(instance.as_str()) {
        return Refusal::Conflict.response();
    }
    let wait = match wait_of(q.wait.wait.as_deref(), q.wait.wait_ms.as_deref()) {
        Ok(w) => w,
        Err(refusal) => return refusal.response(),
    };
    let (sess, chat) = (session(&headers), chat_id(&headers));
    let Ok(uuid) = Uuid::parse_str(&id) else {
        // Not a tracked identity: an ordinary process id, answered as `output` answers it.
        return output_of(&state, &headers, &id, wait).await;
    };
    let digest = q.input_digest.unwrap_or_default();
    let (process, terminal, receipt_digest) = {
        let receipts = state.tracked.receipts();
        match receipts.get(&uuid) {
            None => return not_found(&id),
            Some(r) if r.session != sess || r.chat != chat => return not_found(&id),
            Some(r) => (r.process.clone(), r.terminal.clone(), r.digest.clone()),
        }
    };
    if !digest.is_empty() && digest != receipt_digest {
        return Refusal::Conflict.response();
    }
    if let Some(p) = &process
        && session_handle(&state.sw, sess.as_deref())
            .process(p.as_str())
            .view()
            .is_ok()
    {
        return output_of(&state, &headers, p, wait).await;
    }
    match terminal {
        Some(t) if digest == receipt_digest => (
            StatusCode::GONE,
            axum::Json(json!({
                "agent_instance_id": instance,
                "input_digest": receipt_digest,
                "output_unavailable": true,
                "process": t,
            })),
        )
            .into_response(),
        _ => not_found(&id),
    }
}

/// Coder's wait: none unless `wait=true`; then `wait_ms` (empty or 0: the longest, 5 minutes), at most 5 minutes.
pub(crate) fn wait_of(wait: Option<&str>, wait_ms: Option<&str>) -> Result<Duration, Refusal> {
    if wait != Some("true") {
        return Ok(Duration::ZERO);
    }
    match wait_ms.unwrap_or("") {
        "" | "0" => Ok(MAX_WAIT),
        ms => match ms.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(Duration::from_millis(n as u64).min(MAX_WAIT)),
            _ => Err(Refusal::Invalid),
        },
    }
}
