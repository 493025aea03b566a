//! The state the HTTP surface's handlers share (the tool routes in `serve`, the process API in `coder`).

use shellward::Shellward;

/// What every HTTP handler shares: the facade, the bearer tokens, and the process API's client tokens.
pub(crate) struct AppState {
    pub(crate) sw: Shellward,
    /// The server's bearer token, when one is required.
    pub(crate) token: Option<String>,
    /// Tokens bound to sessions (`[[auth]]` in the config file).
    pub(crate) auth: Vec<shellward::AuthEntry>,
    /// The process API's client tokens (Coder's idempotent starts): token → process id.
    pub(crate) coder_tokens: shellward::idempotency::TokenIndex<String>,
    /// Coder's tracked-process identities (protocol 1) and this server's instance id.
    pub(crate) tracked: crate::coder::tracked::Tracked,
    /// Coder's chat tool calls (at most once per tool call, their recorded answers, cancel by tool call).
    pub(crate) tool_calls: crate::coder::toolcall::ToolCalls,
}

impl AppState {
    /// Whether any token is required.
    pub(crate) fn needs_token(&self) -> bool {
        self.token.is_some() || !self.auth.is_empty()
    }
}
