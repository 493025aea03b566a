//! The MCP server's stdio, guarded: every line a client sends is checked before the MCP library sees it, so that a
//! malformed message gets the JSON-RPC error the specification asks for instead of silence (which leaves the client
//! waiting forever).
//!
//! - a line over [`MAX_LINE_BYTES`] is answered `-32600` and skipped (without buffering it whole);
//! - invalid UTF-8 or invalid JSON is answered `-32700` (parse error, `id: null`);
//! - JSON that is not a JSON-RPC 2.0 message (no `"jsonrpc": "2.0"`, a `method` that is not a string, a scalar) is
//!   answered `-32600` (invalid request);
//! - `params` that are not an object or array, and a `tools/call` whose `name` is not a string or whose `arguments`
//!   are not an object, are answered `-32602` (invalid params);
//! - everything else goes to the MCP library unchanged.
//!
//! The library's replies and these errors are written to stdout as whole lines, never interleaved. A request the
//! client cancelled (`notifications/cancelled` while it runs) gets no reply, as the specification asks: the library
//! answers every request it was given, so its reply to a cancelled one is dropped here ([`Cancelled`]).

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

/// Longest message line accepted from the client (16 MiB; a command is at most 128 KiB).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// Pipes between the guard and the MCP library: what the library reads, and what it writes.
pub fn guarded_stdio() -> (DuplexStream, DuplexStream) {
    guarded(tokio::io::stdin(), tokio::io::stdout())
}

/// [`guarded_stdio`] over any input and output (for tests).
pub fn guarded<R, W>(input: R, output: W) -> (DuplexStream, DuplexStream)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (to_library, library_in) = tokio::io::duplex(1 << 16);
    let (library_out, from_library) = tokio::io::duplex(1 << 16);
    let (errors_tx, errors_rx) = mpsc::unbounded_channel();
    let cancelled = Cancelled::default();
    tokio::spawn(read_client(input, to_library, errors_tx, cancelled.clone()));
    tokio::spawn(write_client(from_library, errors_rx, output, cancelled));
    (library_in, library_out)
}

/// The ids (as JSON text) of requests the client cancelled whose reply has not been dropped yet. Bounded: a client
/// cancelling thousands of requests that had already been answered clears it (at worst one late reply is sent).
#[derive(Clone, Default)]
struct Cancelled(std::sync::Arc<std::sync::Mutex<std::collections::HashSet<String>>>);

/// At most this many cancelled ids are remembered.
const MAX_CANCELLED: usize = 1024;

/// The `id` and `method` of a message, read without building the rest.
#[derive(serde::Deserialize)]
struct Head {
    id: Option<Value>,
    method: Option<String>,
    params: Option<CancelParams>,
}

#[derive(serde::Deserialize)]
struct CancelParams {
    #[serde(rename = "requestId")]
    request_id: Option<Value>,
}

impl Cancelled {
    fn set(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes what a client line means for cancellations: a cancel marks its request; a new request with a marked
    /// id (the client reusing it) unmarks it.
    fn client_sent(&self, line: &[u8]) {
        let cancels = line.windows(23).any(|w| w == b"notifications/cancelled");
        if !cancels && self.set().is_empty() {
            return;
        }
        let Ok(head) = serde_json::from_slice::<Head>(line) else {
            return;
        };
        let mut set = self.set();
        match (head.method.as_deref(), head.id, head.params) {
            (
                Some("notifications/cancelled"),
                None,
                Some(CancelParams {
                    request_id: Some(id),
                }),
            ) => {
                if set.len() >= MAX_CANCELLED {
                    set.clear();
                }
                set.insert(id.to_string());
            }
            (Some(_), Some(id), _) => {
                set.remove(&id.to_string());
            }
            _ => {}
        }
    }

    /// Whether the library's `line` is the reply to a cancelled request (then it is not sent, and forgotten).
    fn drops_reply(&self, line: &[u8]) -> bool {
        if self.set().is_empty() {
            return false;
        }
        match serde_json::from_slice::<Head>(line) {
            Ok(Head {
                id: Some(id),
                method: None,
                ..
            }) => self.set().remove(&id.to_string()),
            _ => false,
        }
    }
}

/// Reads the client's lines, forwards valid messages, reports invalid ones.
async fn read_client<R: AsyncRead + Unpin>(
    input: R,
    mut to_library: DuplexStream,
    errors: mpsc::UnboundedSender<String>,
    cancelled: Cancelled,
) {
    let mut input = BufReader::with_capacity(1 << 16, input);
    let mut line: Vec<u8> = Vec::new();
    let mut too_long = false;
    loop {
        let buf = match input.fill_buf().await {
            Ok([]) => break,
            Ok(buf) => buf,
            Err(e) => {
                tracing::warn!("reading the MCP client's input failed: {e}");
                break;
            }
        };
        let (chunk, ends_line) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], true),
            None => (buf, false),
        };
        if !too_long {
            if line.len() + chunk.len() > MAX_LINE_BYTES {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = chunk.len() + ends_line as usize;
        input.consume(used);
        if !ends_line {
            continue;
        }
        if too_long {
            too_long = false;
            tracing::warn!("MCP client sent a message over {MAX_LINE_BYTES} bytes; refused");
            let _ = errors.send(error(
                Value::Null,
                -32600,
                &format!(
                    "message over {} MiB; this server refuses longer lines",
                    MAX_LINE_BYTES >> 20
                ),
            ));
            continue;
        }
        let message = std::mem::take(&mut line);
        match check(&message) {
            Ok(()) => {
                cancelled.client_sent(&message);
                if to_library.write_all(&message).await.is_err()
                    || to_library.write_all(b"\n").await.is_err()
                {
                    break;
                }
            }
            Err(Some(reply)) => {
                let _ = errors.send(reply);
            }
            Err(None) => {}
        }
    }
    let _ = to_library.shutdown().await;
}

/// Writes the library's lines and the guard's error replies to the client, whole lines at a time.
async fn write_client<W: tokio::io::AsyncWrite + Unpin>(
    from_library: DuplexStream,
    mut errors: mpsc::UnboundedReceiver<String>,
    mut output: W,
    cancelled: Cancelled,
) {
    let mut lines = BufReader::new(from_library);
    // `read_until` keeps what it read when the other branch wins, so `line` is cleared only once written.
    let mut line = Vec::new();
    let mut errors_open = true;
    loop {
        let bytes: Vec<u8> = tokio::select! {
            n = lines.read_until(b'\n', &mut line) => match n {
                Ok(0) | Err(_) => break,
                Ok(_) if cancelled.drops_reply(&line) => {
                    line.clear();
                    continue;
                }
                Ok(_) => explain_unknown_method(std::mem::take(&mut line)),
            },
            e = errors.recv(), if errors_open => match e {
                Some(e) => format!("{e}\n").into_bytes(),
                None => { errors_open = false; continue; }
            },
        };
        if output.write_all(&bytes).await.is_err() || output.flush().await.is_err() {
            return;
        }
    }
    // The library has stopped writing: send what it left unterminated and the errors still queued.
    let _ = output.write_all(&line).await;
    while let Ok(e) = errors.try_recv() {
        let _ = output.write_all(format!("{e}\n").as_bytes()).await;
    }
    let _ = output.flush().await;
}

/// The methods this server answers, for a client that called another.
const SUPPORTED_METHODS: &str =
    "initialize, ping, tools/list and tools/call (notifications: initialized, cancelled)";

/// A library reply "method not found" (`-32601`) names only the method: it is made to say what is supported instead.
/// Every other line passes unchanged (and unparsed).
fn explain_unknown_method(line: Vec<u8>) -> Vec<u8> {
    if !line.windows(6).any(|w| w == b"-32601") {
        return line;
    }
    let Ok(mut reply) = serde_json::from_slice::<Value>(&line) else {
        return line;
    };
    let Some(error) = reply.get_mut("error").filter(|e| e["code"] == -32601) else {
        return line;
    };
    let method = error["message"].as_str().unwrap_or_default().to_string();
    error["message"] = Value::String(format!(
        "method not found: {method:?} is not supported by shellward; it answers {SUPPORTED_METHODS}"
    ));
    let mut out = reply.to_string().into_bytes();
    out.push(b'\n');
    out
}

/// A JSON-RPC error reply.
fn error(id: Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

/// Checks one line: `Ok` to forward it, `Err(Some(reply))` to answer it, `Err(None)` to drop it silently (blank
/// lines, and bad notifications, which get no reply by the specification).
fn check(line: &[u8]) -> Result<(), Option<String>> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Err(None);
    }
    let Ok(text) = std::str::from_utf8(line) else {
        return Err(Some(error(
            Value::Null,
            -32700,
            "parse error: the message is not valid UTF-8",
        )));
    };
    let value: Value = serde_json::from_str(text).map_err(|e| {
        Some(error(
            Value::Null,
            -32700,
            &format!("parse error: the message is not valid JSON ({e})"),
        ))
    })?;
    match &value {
        Value::Array(items) if !items.is_empty() => Ok(()),
        Value::Object(m) => check_message(m),
        _ => Err(Some(error(
            Value::Null,
            -32600,
            "invalid request: a JSON-RPC message is a JSON object",
        ))),
    }
}

fn check_message(m: &serde_json::Map<String, Value>) -> Result<(), Option<String>> {
    let id = m.get("id").cloned();
    let reply = |code: i64, message: &str| error(id.clone().unwrap_or(Value::Null), code, message);
    if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Some(reply(
            -32600,
            "invalid request: \"jsonrpc\": \"2.0\" is required",
        )));
    }
    if let Some(id) = &id
        && !matches!(id, Value::String(_) | Value::Number(_))
    {
        return Err(Some(error(
            Value::Null,
            -32600,
            "invalid request: \"id\" must be a string or a number",
        )));
    }
    let Some(method) = m.get("method") else {
        // A response from the client (to a request of ours): the library checks it.
        return Ok(());
    };
    let Some(method) = method.as_str() else {
        return Err(Some(reply(
            -32600,
            "invalid request: \"method\" must be a string",
        )));
    };
    // Notifications (no id) get no reply, even when wrong.
    let answer = |code: i64, message: String| match id {
        Some(_) => Err(Some(reply(code, &message))),
        None => Err(None),
    };
    let params = m.get("params");
    if let Some(p) = params
        && !matches!(p, Value::Object(_) | Value::Array(_) | Value::Null)
    {
        return answer(
            -32602,
            format!("invalid params for {method}: \"params\" must be an object"),
        );
    }
    if method == "tools/call" {
        let p = params.and_then(Value::as_object);
        let name_ok = p.and_then(|p| p.get("name")).is_some_and(Value::is_string);
        let args_ok = p
            .and_then(|p| p.get("arguments"))
            .is_none_or(|a| a.is_object() || a.is_null());
        if !name_ok || !args_ok {
            return answer(
                -32602,
                "invalid params for tools/call: send {\"name\": TOOL, \"arguments\": {…}} with the tool's \
                 arguments as a JSON object"
                    .into(),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn code(reply: &str) -> i64 {
        serde_json::from_str::<Value>(reply).unwrap()["error"]["code"]
            .as_i64()
            .unwrap()
    }

    #[test]
    fn an_unknown_method_s_reply_says_what_is_supported() {
        let line = br#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"tasks/get"}}
"#
        .to_vec();
        let out: Value = serde_json::from_slice(&super::explain_unknown_method(line)).unwrap();
        assert_eq!(out["id"], 2);
        assert_eq!(out["error"]["code"], -32601);
        let message = out["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("\"tasks/get\"") && message.contains("tools/call"),
            "{message}"
        );
        // Anything else passes byte for byte, a result mentioning the number included.
        let other =
            br#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"-32601"}]}}
"#
            .to_vec();
        assert_eq!(super::explain_unknown_method(other.clone()), other);
    }

    #[test]
    fn each_malformed_message_gets_its_json_rpc_error() {
        let err = |line: &[u8]| check(line).unwrap_err().map(|r| code(&r));
        assert_eq!(err(b"{not json"), Some(-32700));
        assert_eq!(err(b"\xff\xfe{}"), Some(-32700));
        assert_eq!(err(b"42"), Some(-32600));
        assert_eq!(err(br#"{"id":1,"method":"ping"}"#), Some(-32600));
        assert_eq!(err(br#"{"jsonrpc":"2.0","id":1,"method":7}"#), Some(-32600));
        assert_eq!(
            err(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute","arguments":"ls"}}"#),
            Some(-32602)
        );
        assert_eq!(
            err(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":"x"}"#),
            Some(-32602)
        );
        // A bad notification is dropped without a reply; blank lines too.
        assert_eq!(err(br#"{"jsonrpc":"2.0","method":"x","params":3}"#), None);
        assert_eq!(err(b"   "), None);
        // Good messages pass.
        assert!(check(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_ok());
        assert!(
            check(br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"execute","arguments":{"command":"ls"}}}"#)
                .is_ok()
        );
        assert!(check(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).is_ok());
    }

    #[tokio::test]
    async fn an_oversized_line_is_refused_and_the_stream_goes_on() {
        let mut input = vec![b'x'; MAX_LINE_BYTES + 10];
        input.push(b'\n');
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\n");
        let (out_w, mut out_r) = tokio::io::duplex(1 << 20);
        let (mut lib_in, lib_out) = guarded(std::io::Cursor::new(input), out_w);
        let mut forwarded = String::new();
        lib_in.read_to_string(&mut forwarded).await.unwrap();
        assert_eq!(
            forwarded,
            "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\n"
        );
        drop(lib_out);
        let mut replies = String::new();
        out_r.read_to_string(&mut replies).await.unwrap();
        assert_eq!(code(replies.lines().next().unwrap()), -32600, "{replies}");
    }
}
