//! Approvals on the 2026-07-28 wire, which forbids server-to-client requests: a multi round-trip request (MRTR,
//! SEP-2322). A call a policy asks about answers `input_required` with one input request, an elicitation form
//! (`approval`: approve or deny, remember for this session), and `requestState` naming the parked approval; the client
//! shows the form and repeats the same call with `inputResponses.approval` and the `requestState`. The retry is
//! matched to its approval by that id (unguessable, this session's, answered once: see `shellward::approval`) and
//! to the first call by its arguments: an answer for one call never runs another.

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ElicitRequest, ElicitRequestParams, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult,
};
use serde_json::Value;
use shellward::tools::{ExecuteArgs, ToolOutput};
use shellward::{ApprovalAnswer, ExecuteOptions, Shellward, ToolError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The key of the one input request an approval asks.
const KEY: &str = "approval";

/// Who answers, as the audit log and the model's notes name them.
const BY: &str = "user at the client";

/// Most approvals one connection keeps waiting for their retry (older ones are forgotten: their retry is refused).
const MAX_WAITING: usize = 64;

/// The calls of one connection waiting for their approval's retry: approval id → the call's arguments.
#[derive(Default)]
pub struct Waiting(Mutex<HashMap<String, Value>>);

impl Waiting {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Value>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Runs an `execute` whose approval, if a policy asks, comes back as a retry: the call answers `input_required`.
pub async fn execute(
    sw: &Shellward,
    session: &str,
    waiting: &Waiting,
    args: ExecuteArgs,
    arguments: Value,
) -> Result<CallToolResponse, ToolError> {
    let options = ExecuteOptions::new().approver(Arc::new(shellward::approval::Deferred::new(BY)));
    let result = sw.session(session).execute(args, options).await?;
    let Some(pending) = result.pending_approval.clone() else {
        return Ok(crate::mcp::result::tool_result(Ok(ToolOutput::Execute(result))).into());
    };
    let mut map = waiting.map();
    if map.len() >= MAX_WAITING {
        map.clear();
    }
    map.insert(pending.id.clone(), arguments);
    drop(map);
    // The form shows the parked request as a person reads it (escaped, the cut stated); it is this session's own,
    // parked just now.
    let message = sw
        .session(session)
        .pending_approvals()
        .into_iter()
        .find(|r| r.id.as_str() == pending.id)
        .map(|r| r.prompt_within(Some(crate::mcp::elicit::FORM_LIMIT)))
        .unwrap_or_else(|| {
            shellward::shown::approval_question(
                "a policy",
                None,
                &pending.question,
                &pending.command,
                None,
                Some(crate::mcp::elicit::FORM_LIMIT),
            )
        });
    let form = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: ElicitationSchema::from_json_schema(crate::mcp::elicit::form())
            .map_err(|e| ToolError::new(shellward::ToolErrorKind::Internal, e.to_string()))?,
    });
    let requests: InputRequests = [(KEY.to_string(), InputRequest::Elicitation(form))].into();
    Ok(InputRequiredResult::new(Some(requests), Some(pending.id.clone())).into())
}

/// A retry carrying the person's answer: the approval its `requestState` names, answered as the form says, for the
/// same arguments as the call that asked.
pub async fn answer(
    sw: &Shellward,
    session: &str,
    waiting: &Waiting,
    request: &CallToolRequestParams,
) -> Result<CallToolResponse, ErrorData> {
    let id = request.request_state.clone().unwrap_or_default();
    let arguments = request
        .arguments
        .clone()
        .map(Value::Object)
        .unwrap_or(Value::Null);
    let first = waiting.map().remove(&id);
    if first.as_ref() != Some(&arguments) {
        let why = if first.is_some() {
            "the retry's arguments differ from the call that asked; repeat the same call with the answer"
        } else {
            "no approval of this connection is waiting under this requestState (answered already, expired, or \
             never asked); call again without it"
        };
        if let Some(first) = first {
            // A mismatched retry does not spend the approval: the real retry may still come.
            waiting.map().insert(id, first);
        }
        return Err(ErrorData::invalid_params(why, None));
    }
    let response = request
        .input_responses
        .as_ref()
        .and_then(|r| r.get(KEY))
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!(
                    "the retry carries no inputResponses.{KEY}: answer the form the call asked"
                ),
                None,
            )
        })?;
    let outcome = sw
        .session(session)
        .answer_approval(&id, from_form(response), BY)
        .await
        .map(ToolOutput::Execute);
    Ok(crate::mcp::result::tool_result(outcome).into())
}

/// An elicitation result (`{"action": "accept", "content": {"decision": "approve", "remember": true}}`) as an
/// answer: approve only when the person accepted and chose approve.
fn from_form(response: &Value) -> ApprovalAnswer {
    match response.get("action").and_then(Value::as_str) {
        Some("accept") => crate::mcp::elicit::answer(response.get("content")),
        Some("decline") => ApprovalAnswer::Deny {
            reason: Some("the user declined".into()),
        },
        _ => ApprovalAnswer::Deny {
            reason: Some("the user cancelled the question".into()),
        },
    }
}
