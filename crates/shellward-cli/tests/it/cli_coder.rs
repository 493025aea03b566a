//! Coder wire conformance: `shellward serve`'s `/api/v0/processes/…` routes driven exactly as Coder's Go client
//! (`codersdk/workspacesdk/agentconn.go`, coder/coder 024c7d3) drives its workspace agent, and every response decoded
//! with Go `encoding/json` rules into Coder's structs.
//!
//! The client below writes the bytes Go's `net/http` and `json.Encoder` write: HTTP/1.1, `User-Agent:
//! Go-http-client/1.1`, `Connection: close` (the client disables keep-alives), `Accept-Encoding: gzip`, no
//! `Content-Type`, compact JSON with omitted empty fields and a trailing newline, and the `Coder-Chat-Id` /
//! `Coder-Ancestor-Chat-Ids` headers of Coder's chat daemon. The decoder is Go's: unknown keys ignored, keys matched
//! case-insensitively, `null` leaves a field unset, and a value of the wrong JSON type (a bool where an object is
//! declared, 1.5 or "1" for an int) is a decode error — which is how Coder's client fails.

// Unix only: these tests drive the binary on Linux (signals, `/proc`, unix sockets, sandboxes); `cli_portable.rs`
// holds what every platform shares.
#![cfg(unix)]

use crate::cli::Server;
use serde_json::Value;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

mod toolcall;
mod tracked;

// ---------------------------------------------------------------------------------------------------------------
// Go's types, as declared in codersdk/workspacesdk and codersdk.

/// A Go type a JSON value is decoded into.
#[derive(Clone)]
enum Go {
    String,
    Bool,
    Int,
    /// A pointer (`*T`): `null` is nil, anything else decodes into `T`.
    Ptr(Box<Go>),
    Slice(Box<Go>),
    Struct(&'static str, Vec<(&'static str, Go)>),
}

fn process_truncation() -> Go {
    Go::Struct(
        "workspacesdk.ProcessTruncation",
        vec![
            ("original_bytes", Go::Int),
            ("retained_bytes", Go::Int),
            ("omitted_bytes", Go::Int),
            ("strategy", Go::String),
        ],
    )
}

fn start_process_response() -> Go {
    Go::Struct(
        "workspacesdk.StartProcessResponse",
        vec![
            ("id", Go::String),
            ("started", Go::Bool),
            ("client_token", Go::String),
            ("attached", Go::Bool),
        ],
    )
}

/// The token route's answer (`GET /api/v0/processes/tokens/{token}`).
fn token_lookup_response() -> Go {
    Go::Struct(
        "workspacesdk.ProcessTokenLookupResponse",
        vec![
            ("found", Go::Bool),
            ("process_id", Go::String),
            ("pending", Go::Bool),
            ("token_index_age_ms", Go::Int),
        ],
    )
}

fn process_info() -> Go {
    Go::Struct(
        "workspacesdk.ProcessInfo",
        vec![
            ("id", Go::String),
            ("command", Go::String),
            ("workdir", Go::String),
            ("background", Go::Bool),
            ("running", Go::Bool),
            ("exit_code", Go::Ptr(Box::new(Go::Int))),
            ("started_at_unix", Go::Int),
            ("exited_at_unix", Go::Ptr(Box::new(Go::Int))),
        ],
    )
}

fn list_processes_response() -> Go {
    Go::Struct(
        "workspacesdk.ListProcessesResponse",
        vec![
            ("processes", Go::Slice(Box::new(process_info()))),
            ("protocol_version", Go::Int),
            ("agent_instance_id", Go::String),
        ],
    )
}

/// `workspacesdk.CancelProcessResponse`.
fn cancel_process_response() -> Go {
    Go::Struct(
        "workspacesdk.CancelProcessResponse",
        vec![
            ("agent_instance_id", Go::String),
            ("fenced", Go::Bool),
            ("process", Go::Ptr(Box::new(process_info()))),
        ],
    )
}

/// `workspacesdk.ProcessOutputUnavailableError`: the 410 of a tracked output whose process is no longer kept.
fn output_unavailable() -> Go {
    Go::Struct(
        "workspacesdk.ProcessOutputUnavailableError",
        vec![
            ("agent_instance_id", Go::String),
            ("input_digest", Go::String),
            ("output_unavailable", Go::Bool),
            ("process", process_info()),
        ],
    )
}

fn process_output_response() -> Go {
    Go::Struct(
        "workspacesdk.ProcessOutputResponse",
        vec![
            ("output", Go::String),
            ("truncated", Go::Ptr(Box::new(process_truncation()))),
            ("running", Go::Bool),
            ("exit_code", Go::Ptr(Box::new(Go::Int))),
        ],
    )
}

/// `codersdk.Response`: what every error body (and the signal route's success) decodes into.
fn codersdk_response() -> Go {
    Go::Struct(
        "codersdk.Response",
        vec![
            ("message", Go::String),
            ("detail", Go::String),
            (
                "validations",
                Go::Slice(Box::new(Go::Struct(
                    "codersdk.ValidationError",
                    vec![("field", Go::String), ("detail", Go::String)],
                ))),
            ),
        ],
    )
}

/// Decodes `v` into `t` with Go's rules; the error reads like Go's.
fn go_decode(v: &Value, t: &Go, at: &str) -> Result<(), String> {
    if v.is_null() {
        return Ok(()); // null: a no-op for every Go type
    }
    let wrong = |want: &str| {
        Err(format!(
            "json: cannot unmarshal {} into Go value {at} of type {want}",
            kind(v)
        ))
    };
    match t {
        Go::String => v
            .is_string()
            .then_some(())
            .ok_or(())
            .or_else(|_| wrong("string")),
        Go::Bool => v
            .is_boolean()
            .then_some(())
            .ok_or(())
            .or_else(|_| wrong("bool")),
        Go::Int => (v.is_i64() || v.is_u64() && v.as_u64().unwrap() <= i64::MAX as u64)
            .then_some(())
            .ok_or(())
            .or_else(|_| wrong("int")),
        Go::Ptr(inner) => go_decode(v, inner, at),
        Go::Slice(elem) => match v.as_array() {
            Some(items) => items
                .iter()
                .enumerate()
                .try_for_each(|(i, e)| go_decode(e, elem, &format!("{at}[{i}]"))),
            None => wrong("slice"),
        },
        Go::Struct(name, fields) => {
            let Some(object) = v.as_object() else {
                return wrong(name);
            };
            for (key, value) in object {
                // Exact match first, then case-insensitive (encoding/json); unknown keys are ignored.
                let field = fields
                    .iter()
                    .find(|(f, _)| f == key)
                    .or_else(|| fields.iter().find(|(f, _)| f.eq_ignore_ascii_case(key)));
                if let Some((f, ft)) = field {
                    go_decode(value, ft, &format!("{name}.{f}"))?;
                }
            }
            Ok(())
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[test]
fn the_go_decoder_fails_where_go_fails() {
    let out = process_output_response();
    // The shape shellward answered before: `truncated` a bool.
    let old =
        serde_json::json!({"output": "x", "running": false, "truncated": false, "exit_code": 0});
    let e = go_decode(&old, &out, "").unwrap_err();
    assert!(e.contains("cannot unmarshal bool"), "{e}");
    assert!(e.contains("ProcessTruncation"), "{e}");
    let float = serde_json::json!({"exit_code": 1.5});
    assert!(go_decode(&float, &out, "").is_err());
    let text = serde_json::json!({"exit_code": "1"});
    assert!(go_decode(&text, &out, "").is_err());
    let fine = serde_json::json!({"output": "x", "running": true, "exit_code": null, "extra": [1, {"a": 2}]});
    go_decode(&fine, &out, "").unwrap();
}

// ---------------------------------------------------------------------------------------------------------------
// Go's client, byte for byte.

/// Go's `json.Marshal` of a string (what `SetEscapeHTML(false)` leaves: quotes, backslashes and controls escaped).
fn go_string(s: &str) -> String {
    let mut out = serde_json::to_string(s).unwrap();
    // encoding/json also escapes U+2028 and U+2029.
    out = out
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029");
    out
}

/// `workspacesdk.StartProcessRequest` as `json.Encoder` writes it: fields in declaration order, `omitempty` honoured,
/// map keys sorted, a trailing newline.
fn start_request(command: &str, workdir: &str, env: &[(&str, &str)], background: bool) -> String {
    start_request_with_token(command, workdir, env, background, "")
}

/// [`start_request`] with the `ClientToken` field (omitted when empty).
fn start_request_with_token(
    command: &str,
    workdir: &str,
    env: &[(&str, &str)],
    background: bool,
    token: &str,
) -> String {
    let mut s = format!("{{\"command\":{}", go_string(command));
    if !workdir.is_empty() {
        s += &format!(",\"workdir\":{}", go_string(workdir));
    }
    if !env.is_empty() {
        let mut env = env.to_vec();
        env.sort();
        let pairs: Vec<String> = env
            .iter()
            .map(|(k, v)| format!("{}:{}", go_string(k), go_string(v)))
            .collect();
        s += &format!(",\"env\":{{{}}}", pairs.join(","));
    }
    if background {
        s += ",\"background\":true";
    }
    if !token.is_empty() {
        s += &format!(",\"client_token\":{}", go_string(token));
    }
    s + "}\n"
}

#[derive(Clone)]
struct Response {
    status: u16,
    content_type: String,
    body: Value,
    /// Every header, names lower-cased, in order.
    headers: Vec<(String, String)>,
    /// The body's bytes as sent (after any chunked framing).
    raw: Vec<u8>,
}

/// An `agentConn` of Coder's client: `SetExtraHeaders` is `headers`.
struct Coder {
    addr: String,
    headers: Vec<(String, String)>,
}

impl Coder {
    fn new(server: &Server) -> Coder {
        Coder {
            addr: server.base.trim_start_matches("http://").to_string(),
            headers: Vec::new(),
        }
    }

    /// The client as the chat daemon configures it for one chat.
    fn chat(server: &Server, chat: &str, ancestors: &[&str]) -> Coder {
        let mut c = Coder::new(server);
        c.headers.push(("Coder-Chat-Id".into(), chat.into()));
        if !ancestors.is_empty() {
            let list: Vec<String> = ancestors.iter().map(|a| go_string(a)).collect();
            c.headers.push((
                "Coder-Ancestor-Chat-Ids".into(),
                format!("[{}]", list.join(",")),
            ));
        }
        c
    }

    /// `apiRequest`: one request on a fresh connection, as Go's transport with keep-alives disabled sends it.
    fn request(&self, method: &str, path: &str, body: Option<&str>) -> Response {
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: Go-http-client/1.1\r\n",
            self.addr
        );
        if let Some(b) = body {
            req += &format!("Content-Length: {}\r\n", b.len());
        }
        for (k, v) in &self.headers {
            req += &format!("{k}: {v}\r\n");
        }
        req += "Accept-Encoding: gzip\r\nConnection: close\r\n\r\n";
        req += body.unwrap_or("");
        let mut stream = std::net::TcpStream::connect(&self.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(120)))
            .unwrap();
        stream.write_all(req.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read the response");
        parse_response(&raw)
    }

    /// `StartProcess`.
    fn start(&self, body: &str) -> Response {
        self.request("POST", "/api/v0/processes/start", Some(body))
    }

    /// `StartProcess`, which must succeed: the id.
    fn start_ok(
        &self,
        command: &str,
        workdir: &str,
        env: &[(&str, &str)],
        background: bool,
    ) -> String {
        let r = self.start(&start_request(command, workdir, env, background));
        let v = ok(r, &start_process_response());
        assert_eq!(v["started"], true, "{v}");
        let id = v["id"].as_str().unwrap().to_string();
        assert!(!id.is_empty());
        id
    }

    /// `ProcessOutput(ctx, id, &ProcessOutputOptions{Wait: wait})`.
    fn output(&self, id: &str, wait: bool) -> Response {
        let mut path = format!("/api/v0/processes/{id}/output");
        if wait {
            path += "?wait=true";
        }
        self.request("GET", &path, None)
    }

    fn output_ok(&self, id: &str, wait: bool) -> Value {
        ok(self.output(id, wait), &process_output_response())
    }

    /// `ListProcesses`.
    fn list(&self) -> Vec<Value> {
        let v = ok(
            self.request("GET", "/api/v0/processes/list", None),
            &list_processes_response(),
        );
        v["processes"].as_array().cloned().unwrap_or_default()
    }

    /// `SignalProcess(ctx, id, signal)`.
    fn signal(&self, id: &str, signal: &str) -> Response {
        let body = format!("{{\"signal\":{}}}\n", go_string(signal));
        self.request(
            "POST",
            &format!("/api/v0/processes/{id}/signal"),
            Some(&body),
        )
    }
}

fn parse_response(raw: &[u8]) -> Response {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete HTTP response");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let mut content_type = String::new();
    let mut chunked = false;
    let mut headers = Vec::new();
    for line in lines {
        let (k, v) = line.split_once(':').unwrap();
        headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
        match k.to_ascii_lowercase().as_str() {
            "content-type" => content_type = v.trim().to_string(),
            "transfer-encoding" => chunked = v.trim().eq_ignore_ascii_case("chunked"),
            "content-encoding" => {
                panic!("the response is encoded ({v}); Go's client only undoes gzip it asked for")
            }
            _ => {}
        }
    }
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let nl = rest.windows(2).position(|w| w == b"\r\n").unwrap();
            let n = usize::from_str_radix(std::str::from_utf8(&rest[..nl]).unwrap().trim(), 16)
                .unwrap();
            rest = &rest[nl + 2..];
            if n == 0 {
                break;
            }
            out.extend_from_slice(&rest[..n]);
            rest = &rest[n + 2..];
        }
        body = out;
    }
    let raw = body;
    let body = serde_json::from_slice(&raw).unwrap_or_else(|e| {
        panic!(
            "status {status}: the body is not JSON ({e}): {:?}",
            String::from_utf8_lossy(&raw)
        )
    });
    Response {
        status,
        content_type,
        body,
        headers,
        raw,
    }
}

/// A 200 decoded into `t` (Coder's client: `json.NewDecoder(res.Body).Decode(&resp)`).
fn ok(r: Response, t: &Go) -> Value {
    assert_eq!(r.status, 200, "{}", r.body);
    go_decode(&r.body, t, "").unwrap_or_else(|e| panic!("{e}: {}", r.body));
    r.body
}

/// A non-200 as `codersdk.ReadBodyAsError` reads it: JSON with a non-empty `message`. Returns message and detail.
fn coder_error(r: &Response, status: u16) -> (String, String) {
    assert_eq!(r.status, status, "{}", r.body);
    assert!(
        r.content_type.starts_with("application/json"),
        "{}",
        r.content_type
    );
    go_decode(&r.body, &codersdk_response(), "").unwrap_or_else(|e| panic!("{e}: {}", r.body));
    let message = r.body["message"].as_str().unwrap_or_default().to_string();
    assert!(!message.is_empty(), "response has no message: {}", r.body);
    (
        message,
        r.body["detail"].as_str().unwrap_or_default().to_string(),
    )
}

const CHAT_A: &str = "0b6a4b1e-5d3c-4b8e-9f7a-1c2d3e4f5a6b";
const CHAT_B: &str = "7c1e2d3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f";

// ---------------------------------------------------------------------------------------------------------------

#[test]
fn start_output_and_signal_as_coders_client_and_chat_tool_use_them() {
    let server = Server::start(&[]);
    let c = Coder::new(&server);

    // Foreground start, then the chat tool's wait loop (`output?wait=true` until not running).
    let id = c.start_ok("echo hello; echo oops >&2; exit 3", "", &[], false);
    let v = c.output_ok(&id, true);
    assert_eq!(v["running"], false, "{v}");
    assert_eq!(v["exit_code"], 3, "{v}");
    assert!(v["output"].as_str().unwrap().contains("hello\n"), "{v}");
    assert!(v["output"].as_str().unwrap().contains("oops\n"), "{v}");
    assert!(v.get("truncated").is_none(), "{v}");

    // A foreground start answers at once: the client enforces its own timeout (a 10 s chat timeout used to expire
    // inside the start call, leaving the chat without an id).
    let began = Instant::now();
    let id = c.start_ok("sleep 60", "", &[], false);
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "start took {:?}",
        began.elapsed()
    );
    let v = c.output_ok(&id, false);
    assert_eq!(v["running"], true, "{v}");
    assert!(v.get("exit_code").is_none(), "{v}");

    // Killed: exit code -1 (a missing code reads as 0 = success in Coder's chat tool).
    let r = c.signal(&id, "kill");
    let v = ok(r, &codersdk_response());
    assert!(v["message"].as_str().unwrap().contains(&id), "{v}");
    let v = c.output_ok(&id, true);
    assert_eq!(
        (v["running"].clone(), v["exit_code"].clone()),
        (false.into(), (-1).into()),
        "{v}"
    );
    // Terminated: -1 too.
    let id2 = c.start_ok("sleep 60", "", &[], true);
    ok(c.signal(&id2, "terminate"), &codersdk_response());
    assert_eq!(c.output_ok(&id2, true)["exit_code"], -1);

    // Signal after the exit: 409; unknown id: 404; bad signals: 400 — each a codersdk.Response with a message.
    let (m, _) = coder_error(&c.signal(&id, "kill"), 409);
    assert!(m.contains("not running"), "{m}");
    let (m, _) = coder_error(&c.signal("p999-nothing", "kill"), 404);
    assert!(m.contains("not found"), "{m}");
    let (m, _) = coder_error(&c.signal(&id, "hup"), 400);
    assert!(m.contains("kill") && m.contains("terminate"), "{m}");
    let r = c.request(
        "POST",
        &format!("/api/v0/processes/{id}/signal"),
        Some("{}\n"),
    );
    assert_eq!(coder_error(&r, 400).0, "Signal is required.");
    coder_error(&c.output("p999-nothing", false), 404);
    coder_error(&c.output("p999-nothing", true), 404);

    // Background start with env and workdir; listed with Coder's fields.
    let dir = tempfile::tempdir().unwrap();
    let workdir = dir.path().to_str().unwrap();
    let id = c.start_ok(
        "echo \"$GREETING\"; pwd",
        workdir,
        &[("GREETING", "hi <&> there")],
        true,
    );
    let v = c.output_ok(&id, true);
    assert_eq!(v["output"], format!("hi <&> there\n{workdir}\n"), "{v}");
    assert_eq!(v["exit_code"], 0);
    let listed = c.list();
    let entry = listed
        .iter()
        .find(|p| p["id"] == id.as_str())
        .expect("listed");
    assert_eq!(entry["background"], true, "{entry}");
    assert_eq!(entry["workdir"], workdir, "{entry}");
    assert_eq!(entry["running"], false, "{entry}");
    assert_eq!(entry["exit_code"], 0, "{entry}");
    assert!(
        entry["exited_at_unix"].as_i64().unwrap() >= entry["started_at_unix"].as_i64().unwrap()
    );
    let fg = listed
        .iter()
        .find(|p| p["command"] == "echo hello; echo oops >&2; exit 3")
        .expect("listed");
    assert_eq!(fg["background"], false, "{fg}");

    failed_starts_answer_as_coders_agent_does(&c);
    server.stop();
}

/// Start failures, a deny, fields a newer client adds, and part of a tracked identity on the plain route: answered as Coder's agent answers them.
fn failed_starts_answer_as_coders_agent_does(c: &Coder) {
    // Start failures, as Coder's agent answers them.
    let (m, d) = coder_error(
        &c.start(&start_request("true", "/no/such/dir", &[], false)),
        500,
    );
    assert!(m.starts_with("Failed to start process"), "{m}");
    assert!(d.contains("/no/such/dir"), "{d}");
    assert_eq!(
        coder_error(&c.start("{\"command\":\"\"}\n"), 400).0,
        "Command is required."
    );
    assert_eq!(
        coder_error(&c.start("{oops"), 400).0,
        "Request body must be valid JSON."
    );
    let (_, d) = coder_error(
        &c.start("{\"command\":\"true\",\"background\":\"yes\"}\n"),
        400,
    );
    assert!(d.contains("invalid type"), "{d}");
    // The policy chain still decides every start: a deny is a failed start with the reason in the message.
    let (m, d) = coder_error(&c.start(&start_request("rm -rf /", "", &[], false)), 500);
    assert!(m.contains("denied by policy guard"), "{m}");
    assert!(!d.is_empty());

    // Fields a newer client adds are ignored, as a Go server ignores them.
    let body = "{\"command\":\"echo new\",\"client_token\":\"t\",\"run_as\":\"x\",\"future\":{\"nested\":[1,2]}}\n";
    let v = ok(c.start(body), &start_process_response());
    let id = v["id"].as_str().unwrap();
    assert_eq!(c.output_ok(id, true)["output"], "new\n");
    // Part of a tracked identity on the plain route is what Coder's agent refuses too (see the tracked tests).
    let partial = "{\"command\":\"echo new\",\"process_id\":\"3f2504e0-4f89-11d3-9a0c-0305e82c3301\",\"deadline\":\"2026-12-01T00:00:00Z\"}\n";
    let (_, d) = coder_error(&c.start(partial), 400);
    assert_eq!(d, "invalid tracked process identity");
}

#[test]
fn long_output_is_coders_head_tail_shape_and_long_lines_are_cut() {
    let server = Server::start(&[]);
    let c = Coder::new(&server);

    // 588 895 bytes: the first and last 16 KiB around Coder's marker.
    let id = c.start_ok("seq 1 100000", "", &[], false);
    let v = c.output_ok(&id, true);
    let out = v["output"].as_str().unwrap();
    let t = &v["truncated"];
    assert_eq!(t["strategy"], "head_tail", "{t}");
    assert_eq!(t["original_bytes"], 588_895, "{t}");
    assert_eq!(t["omitted_bytes"], 588_895 - 2 * 16_384, "{t}");
    assert_eq!(t["retained_bytes"], out.len(), "{t}");
    assert!(out.starts_with("1\n2\n3\n"), "{}", &out[..20]);
    assert!(out.ends_with("99999\n100000\n"));
    assert!(out.contains(&format!(
        "\n\n... [omitted {} bytes] ...\n\n",
        588_895 - 2 * 16_384
    )));

    // A 5000-byte line: cut to 2048 bytes ending in Coder's suffix; `truncated` says so.
    let id = c.start_ok(
        "printf '%5000s\\n' x | tr ' ' a; echo after",
        "",
        &[],
        false,
    );
    let v = c.output_ok(&id, true);
    let out = v["output"].as_str().unwrap();
    let first = out.lines().next().unwrap();
    assert_eq!(first.len(), 2048, "{}", first.len());
    assert!(first.ends_with(" ... [truncated]"), "{first}");
    assert!(out.ends_with("\nafter\n"), "{out}");
    assert_eq!(v["truncated"]["original_bytes"], 5001 + 6);
    assert_eq!(v["truncated"]["retained_bytes"], out.len());

    // Exactly 16 KiB: whole, nothing truncated; empty output: "" and no `truncated`.
    let id = c.start_ok("yes bbbbbbb | head -c 16384", "", &[], false);
    let v = c.output_ok(&id, true);
    assert_eq!(v["output"].as_str().unwrap().len(), 16_384);
    assert!(v.get("truncated").is_none(), "{}", v["truncated"]);
    let id = c.start_ok("true", "", &[], false);
    let v = c.output_ok(&id, true);
    assert_eq!(v["output"], "");
    assert!(v.get("truncated").is_none());

    server.stop();
}

#[test]
fn the_list_is_running_first_then_newest_and_capped_at_ten() {
    let server = Server::start(&[]);
    let c = Coder::new(&server);
    let mut finished = Vec::new();
    for i in 0..11 {
        let id = c.start_ok(&format!("echo {i}"), "", &[], false);
        assert_eq!(c.output_ok(&id, true)["running"], false);
        finished.push(id);
    }
    let running = c.start_ok("sleep 60", "", &[], true);
    let listed = c.list();
    let ids: Vec<&str> = listed.iter().map(|p| p["id"].as_str().unwrap()).collect();
    let mut want = vec![running.as_str()];
    want.extend(finished.iter().rev().take(9).map(String::as_str));
    assert_eq!(ids, want);
    assert_eq!(listed[0]["running"], true);
    assert!(listed[0].get("exit_code").is_none(), "{}", listed[0]);
    ok(c.signal(&running, "kill"), &codersdk_response());
    server.stop();
}

#[test]
fn chats_see_only_their_own_processes() {
    let server = Server::start(&[]);
    let a = Coder::chat(&server, CHAT_A, &[]);
    // Chat B names A as its ancestor: that grants nothing over A's processes (Coder uses ancestors for git only).
    let b = Coder::chat(&server, CHAT_B, &[CHAT_A]);
    let anyone = Coder::new(&server);

    let a_id = a.start_ok("echo \"$CODER_CHAT_ID\"; sleep 60", "", &[], true);
    let shared = anyone.start_ok("sleep 60", "", &[], true);

    // A lists its own only; B lists nothing of A's; a request without the header lists everything.
    let ids = |c: &Coder| -> Vec<String> {
        c.list()
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&a), vec![a_id.clone()]);
    assert!(ids(&b).is_empty());
    let all = ids(&anyone);
    assert!(all.contains(&a_id) && all.contains(&shared), "{all:?}");

    // B can neither read nor signal A's process: 404, as for an unknown id.
    coder_error(&b.output(&a_id, false), 404);
    coder_error(&b.output(&a_id, true), 404);
    coder_error(&b.signal(&a_id, "kill"), 404);
    // The owner reads it (the chat id reached the command, as Coder's agent passes it).
    let v = a.output_ok(&a_id, false);
    assert!(v["output"].as_str().unwrap().starts_with(CHAT_A), "{v}");
    // A process started without a chat is reachable by id from any chat (Coder's rule), though not listed there.
    assert_eq!(b.output_ok(&shared, false)["running"], true);
    // An unparsable chat id is no chat (Coder ignores it): such a request sees every process.
    let junk = Coder::chat(&server, "not-a-uuid", &[]);
    assert_eq!(ids(&junk).len(), 2);
    // The same chat id in another case or form is the same chat.
    let upper = Coder::chat(&server, &CHAT_A.to_uppercase(), &[]);
    assert_eq!(ids(&upper), vec![a_id.clone()]);

    ok(b.signal(&shared, "kill"), &codersdk_response());
    ok(a.signal(&a_id, "terminate"), &codersdk_response());
    server.stop();
}

#[test]
fn ids_are_unique_across_restarts() {
    let first = Server::start(&[]);
    let c = Coder::new(&first);
    let old = c.start_ok("echo first", "", &[], false);
    first.stop();

    let second = Server::start(&[]);
    let c = Coder::new(&second);
    // Re-attaching with the old id must not read whatever the new server numbered the same.
    let new = c.start_ok("echo second", "", &[], false);
    assert_ne!(old, new);
    let (m, _) = coder_error(&c.output(&old, true), 404);
    assert!(m.contains(&old), "{m}");
    assert_eq!(c.output_ok(&new, true)["output"], "second\n");
    second.stop();
}

#[test]
fn a_policys_kill_timeout_still_holds_when_the_start_returns_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "shellward.toml",
        "[[policy]]\nbuiltin = \"default\"\n[policy.settings]\non_timeout = \"kill\"\ndefault_timeout = \"500ms\"\n",
    );
    let server = Server::start(&["--config", config.to_str().unwrap()]);
    let c = Coder::new(&server);
    let began = Instant::now();
    let id = c.start_ok("echo started; sleep 60", "", &[], false);
    assert!(began.elapsed() < Duration::from_secs(5));
    let v = c.output_ok(&id, true);
    assert_eq!(
        (v["running"].clone(), v["exit_code"].clone()),
        (false.into(), (-1).into()),
        "{v}"
    );
    assert_eq!(v["output"], "started\n");
    assert!(
        began.elapsed() < Duration::from_secs(30),
        "{:?}",
        began.elapsed()
    );
    // A background start is not bound by the foreground timeout.
    let id = c.start_ok("sleep 60", "", &[], true);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(c.output_ok(&id, false)["running"], true);
    ok(c.signal(&id, "kill"), &codersdk_response());
    server.stop();
}

#[test]
fn client_tokens_make_starts_idempotent_as_coders_agent_does() {
    let server = Server::start(&[]);
    let c = Coder::chat(&server, CHAT_A, &[]);
    let dir = tempfile::tempdir().unwrap();
    let workdir = dir.path().to_str().unwrap();
    // Before any start: not found, and how long the index has been kept (a 404 would mean an older agent).
    let v = token_lookup(&c, "tok-1");
    assert_eq!(
        (v["found"].clone(), v["pending"].clone()),
        (false.into(), false.into()),
        "{v}"
    );
    assert!(v.get("process_id").is_none(), "{v}");
    assert!(v["token_index_age_ms"].as_u64().is_some(), "{v}");

    // The first start: started, not attached, the token echoed.
    let first = ok(
        token_start(&c, "sleep 30", workdir, true, "tok-1"),
        &start_process_response(),
    );
    assert_eq!(
        (
            first["started"].clone(),
            first["attached"].clone(),
            first["client_token"].clone()
        ),
        (true.into(), false.into(), "tok-1".into()),
        "{first}"
    );
    let id = first["id"].as_str().unwrap().to_string();
    // The retry: the same process, nothing started.
    for _ in 0..2 {
        let again = ok(
            token_start(&c, "sleep 30", workdir, true, "tok-1"),
            &start_process_response(),
        );
        assert_eq!(
            (
                again["id"].clone(),
                again["started"].clone(),
                again["attached"].clone()
            ),
            (id.as_str().into(), false.into(), true.into()),
            "{again}"
        );
        assert_eq!(again["client_token"], "tok-1");
    }
    assert_eq!(count_of(&c, "sleep 30"), 1);
    let v = token_lookup(&c, "tok-1");
    assert_eq!(
        (
            v["found"].clone(),
            v["process_id"].clone(),
            v["pending"].clone()
        ),
        (true.into(), id.as_str().into(), false.into()),
        "{v}"
    );

    // The token with other parameters (command, workdir or background): Coder's 409, and nothing started.
    for (command, wd, background) in [
        ("sleep 31", workdir, true),
        ("sleep 30", "", true),
        ("sleep 30", workdir, false),
    ] {
        let (m, d) = coder_error(&token_start(&c, command, wd, background, "tok-1"), 409);
        assert_eq!(
            m,
            "Client token was already used to start a process with different parameters."
        );
        assert!(d.contains("client token"), "{d}");
    }
    assert_eq!(count_of(&c, "sleep 31"), 0);
    assert_eq!(c.list().len(), 1);

    // Tokens are scoped to the chat, and to the session.
    let b = Coder::chat(&server, CHAT_B, &[]);
    let other = ok(
        token_start(&b, "sleep 30", workdir, true, "tok-1"),
        &start_process_response(),
    );
    assert_eq!(other["started"], true, "{other}");
    assert_ne!(other["id"], id.as_str());
    assert_eq!(token_lookup(&b, "tok-1")["process_id"], other["id"]);
    let mut s2 = Coder::chat(&server, CHAT_A, &[]);
    s2.headers
        .push(("X-Shellward-Session".into(), "second".into()));
    let v = token_lookup(&s2, "tok-1");
    assert_eq!(v["found"], false, "{v}");

    concurrent_and_dropped_retries_start_one_process(&server, &c);
    failed_and_empty_token_starts_start_afresh(&c);

    for p in c.list().iter().chain(b.list().iter()) {
        if p["running"] == true {
            let _ = c.signal(p["id"].as_str().unwrap(), "kill");
        }
    }
    server.stop();
}

/// A start with a client token, as Coder's client sends it.
fn token_start(c: &Coder, command: &str, workdir: &str, background: bool, token: &str) -> Response {
    c.start(&start_request_with_token(
        command,
        workdir,
        &[],
        background,
        token,
    ))
}

/// What the agent knows of a client token.
fn token_lookup(c: &Coder, token: &str) -> Value {
    ok(
        c.request("GET", &format!("/api/v0/processes/tokens/{token}"), None),
        &token_lookup_response(),
    )
}

/// How many of the chat's processes run `command`.
fn count_of(c: &Coder, command: &str) -> usize {
    c.list().iter().filter(|p| p["command"] == command).count()
}

/// Concurrent retries (a client that timed out and retried while the first was in flight), and a retry after a
/// connection dropped right after its request: one process each.
fn concurrent_and_dropped_retries_start_one_process(server: &Server, c: &Coder) {
    // Concurrent retries (a client that timed out and retried while the first was in flight): one process.
    let answers: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|_| {
                scope.spawn(|| {
                    ok(
                        token_start(c, "sleep 29", "", true, "tok-race"),
                        &start_process_response(),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(
        answers.iter().filter(|a| a["started"] == true).count(),
        1,
        "{answers:?}"
    );
    assert!(
        answers.iter().all(|a| a["id"] == answers[0]["id"]),
        "{answers:?}"
    );
    assert_eq!(count_of(c, "sleep 29"), 1);

    // A connection dropped right after the request was sent: the retry still finds one process, never two.
    {
        let body = start_request_with_token("sleep 28", "", &[], true, "tok-drop");
        let addr = server.base.trim_start_matches("http://").to_string();
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        let req = format!(
            "POST /api/v0/processes/start HTTP/1.1\r\nHost: {addr}\r\nCoder-Chat-Id: {CHAT_A}\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(req.as_bytes()).unwrap();
        drop(stream);
    }
    std::thread::sleep(Duration::from_millis(300));
    let retry = ok(
        token_start(c, "sleep 28", "", true, "tok-drop"),
        &start_process_response(),
    );
    assert_eq!(count_of(c, "sleep 28"), 1, "{retry}");
}

/// A start that fails (a policy deny) leaves the token free; an empty token is no token.
fn failed_and_empty_token_starts_start_afresh(c: &Coder) {
    // A start that fails (a policy deny) leaves the token free: its retry is decided afresh, and a different
    // command may use it.
    let (m, _) = coder_error(&token_start(c, "rm -rf /", "", false, "tok-deny"), 500);
    assert!(m.contains("denied"), "{m}");
    coder_error(&token_start(c, "rm -rf /", "", false, "tok-deny"), 500);
    let v = ok(
        token_start(c, "echo fine", "", false, "tok-deny"),
        &start_process_response(),
    );
    assert_eq!(v["started"], true, "{v}");

    // An empty token is no token (Go omits it): two starts, two processes.
    let x = ok(
        token_start(c, "echo twice", "", false, ""),
        &start_process_response(),
    );
    let y = ok(
        token_start(c, "echo twice", "", false, ""),
        &start_process_response(),
    );
    assert_ne!(x["id"], y["id"]);
}

// ---------------------------------------------------------------------------------------------------------------
// The tracked-process protocol (version 1), as Coder's current client speaks it (`codersdk/workspacesdk/processes.go`
// and `agent/agentproc/tracked.go` at coder/coder 09c521c).
