//! The MCP client's person as an approver: when a policy asks, an `elicitation/create` form (approve or deny, and
//! "remember for this session") goes to a client that declared the elicitation capability. A client without it, or
//! a connection that cannot carry server requests (the 2026-07-28 wire), cannot be asked here: the next approver is
//! tried, and with nobody left the command is denied with a reason telling the model to ask its user.

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use shellward::approval::BoxFuture;
use shellward::{ApprovalAnswer, ApprovalRequest, Approver};

/// Most characters of a command an elicitation form shows (its start and end, the cut stated): a client may cut a
/// long message itself, silently, so shellward cuts it first and says so.
pub const FORM_LIMIT: usize = 8_000;

/// Asks the person at an MCP client through elicitation.
pub struct Elicitor {
    peer: Peer<RoleServer>,
}

impl Elicitor {
    /// An approver asking through `peer`'s client.
    pub fn new(peer: Peer<RoleServer>) -> Elicitor {
        Elicitor { peer }
    }

    /// Whether the client declared it can show forms.
    fn can_ask(&self) -> bool {
        self.peer
            .peer_info()
            .is_some_and(|info| info.capabilities.elicitation.is_some())
    }

    async fn elicit(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        if !self.can_ask() {
            return ApprovalAnswer::Unavailable;
        }
        let Ok(schema) = ElicitationSchema::from_json_schema(form()) else {
            return ApprovalAnswer::Unavailable;
        };
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: request.prompt_within(Some(FORM_LIMIT)),
            requested_schema: schema,
        };
        match self.peer.create_elicitation(params).await {
            Ok(result) => match result.action {
                ElicitationAction::Accept => answer(result.content.as_ref()),
                ElicitationAction::Decline => ApprovalAnswer::Deny {
                    reason: Some("the user declined".into()),
                },
                // Cancel, and any action newer than this server: not a yes.
                _ => ApprovalAnswer::Deny {
                    reason: Some("the user cancelled the question".into()),
                },
            },
            // The client refused the request or the wire cannot carry it: nobody was asked.
            Err(e) => {
                tracing::debug!("elicitation failed: {e}");
                ApprovalAnswer::Unavailable
            }
        }
    }
}

/// The form: a required choice (approve / deny) and "remember for this session".
pub fn form() -> serde_json::Map<String, Value> {
    let schema = json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Run this command?",
                "enum": ["approve", "deny"],
                "enumNames": ["Approve", "Deny"],
            },
            "remember": {
                "type": "boolean",
                "title": "Remember for this session",
                "description": "Do not ask again about this exact command in this session",
                "default": false,
            },
        },
        "required": ["decision"],
    });
    match schema {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

/// An accepted form as an answer: approve only when the person chose approve.
pub fn answer(content: Option<&Value>) -> ApprovalAnswer {
    let decision = content
        .and_then(|c| c.get("decision"))
        .and_then(Value::as_str);
    let remember = content
        .and_then(|c| c.get("remember"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    match decision {
        Some("approve") => ApprovalAnswer::Approve { remember },
        _ => ApprovalAnswer::Deny {
            reason: Some("the user chose deny".into()),
        },
    }
}

impl Approver for Elicitor {
    fn name(&self) -> &str {
        "user at the client"
    }

    fn ask<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(self.elicit(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_is_a_valid_elicitation_schema_and_only_approve_approves() {
        assert!(ElicitationSchema::from_json_schema(form()).is_ok());
        assert_eq!(
            answer(Some(&json!({"decision": "approve", "remember": true}))),
            ApprovalAnswer::Approve { remember: true }
        );
        assert_eq!(
            answer(Some(&json!({"decision": "approve"}))),
            ApprovalAnswer::Approve { remember: false }
        );
        for other in [
            json!({"decision": "deny"}),
            json!({}),
            json!({"decision": 1}),
        ] {
            assert!(
                matches!(answer(Some(&other)), ApprovalAnswer::Deny { .. }),
                "{other}"
            );
        }
        assert!(matches!(answer(None), ApprovalAnswer::Deny { .. }));
    }
}
