//! The session an HTTP request names: the header that carries it and its value (checked by `serve`'s request check
//! before any handler runs).

use axum::http::HeaderMap;

/// The header carrying the caller's session id.
pub const SESSION_HEADER: &str = "x-shellward-session";

/// The session named by the request (validated by `serve`'s request check before any handler runs).
pub(crate) fn session(headers: &HeaderMap) -> Option<String> {
    headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
