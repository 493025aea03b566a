//! `shellward serve` driven end to end with a plain HTTP client (ureq): tool routes, the process API and its status
//! codes, sessions, bearer-token auth, `wait=true`, bad input, and cleanup at shutdown.

// Unix only: these tests drive the binary on Linux (signals, `/proc`, unix sockets, sandboxes); `cli_portable.rs`
// holds what every platform shares.
#![cfg(unix)]

use crate::cli::{Server, Signal, bin, kill_marked, new_mark, start_serve, survivors, wait_exit};
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::Duration;

mod reload;

mod approvals;

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// Sends a request; returns the status and the JSON body.
fn send(
    method: &str,
    url: &str,
    session: Option<&str>,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, Value) {
    let agent = agent();
    let mut response = match method {
        "GET" => {
            let mut r = agent.get(url);
            if let Some(s) = session {
                r = r.header("X-Shellward-Session", s);
            }
            if let Some(t) = token {
                r = r.header("Authorization", &format!("Bearer {t}"));
            }
            r.call()
        }
        _ => {
            let mut r = agent.post(url).header("Content-Type", "application/json");
            if let Some(s) = session {
                r = r.header("X-Shellward-Session", s);
            }
            if let Some(t) = token {
                r = r.header("Authorization", &format!("Bearer {t}"));
            }
            r.send(body.unwrap_or(""))
        }
    }
    .expect("HTTP request");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value)
}

fn post(base: &str, path: &str, session: Option<&str>, body: Value) -> (u16, Value) {
    send(
        "POST",
        &format!("{base}{path}"),
        session,
        None,
        Some(&body.to_string()),
    )
}

fn get(base: &str, path: &str, session: Option<&str>) -> (u16, Value) {
    send("GET", &format!("{base}{path}"), session, None, None)
}

#[test]
fn tool_routes_and_process_api() {
    let server = Server::start(&["--listen", "127.0.0.1:0"]);
    let b = server.base.clone();

    let (status, tools) = get(&b, "/v1/tools", None);
    assert_eq!(status, 200);
    assert_eq!(tools["tools"].as_array().unwrap().len(), 7);

    let (status, r) = post(&b, "/v1/tools/execute", None, json!({"command": "echo hi"}));
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["output"], "hi\n");
    assert_eq!(r["exit_code"], 0);

    // Process API: background start, list, output, signal.
    let (status, r) = post(
        &b,
        "/api/v0/processes/start",
        Some("alice"),
        json!({"command": "echo $GREETING; sleep 300", "env": {"GREETING": "hello"}, "background": true}),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["started"], true);
    let id = r["id"].as_str().unwrap().to_string();

    let (status, r) = get(&b, "/api/v0/processes/list", Some("alice"));
    assert_eq!(status, 200);
    let procs = r["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 1, "{r}");
    assert_eq!(procs[0]["id"], id.as_str());
    assert_eq!(procs[0]["running"], true);
    assert_eq!(procs[0]["background"], true);
    for field in ["command", "workdir", "started_at_unix"] {
        assert!(procs[0].get(field).is_some(), "{field} missing: {r}");
    }
    // Go's omitempty: no exit code or exit time while it runs.
    for field in ["exit_code", "exited_at_unix"] {
        assert!(procs[0].get(field).is_none(), "{field} present: {r}");
    }

    let (status, r) = get(&b, &format!("/api/v0/processes/{id}/output"), Some("alice"));
    assert_eq!(status, 200);
    assert_eq!(r["running"], true);

    // Session isolation: bob sees nothing and cannot touch alice's process.
    let (_, r) = get(&b, "/api/v0/processes/list", Some("bob"));
    assert_eq!(r["processes"].as_array().unwrap().len(), 0);
    let (status, _) = get(&b, &format!("/api/v0/processes/{id}/output"), Some("bob"));
    assert_eq!(status, 404);
    let (status, _) = post(
        &b,
        &format!("/api/v0/processes/{id}/signal"),
        Some("bob"),
        json!({"signal": "kill"}),
    );
    assert_eq!(status, 404);

    // Status codes of signal: an unknown signal, one that ends it, one to a process that has ended.
    for (signal, code) in [("hup", 400), ("terminate", 200), ("kill", 409)] {
        let (status, r) = post(
            &b,
            &format!("/api/v0/processes/{id}/signal"),
            Some("alice"),
            json!({ "signal": signal }),
        );
        assert_eq!(status, code, "{signal}: {r}");
    }
    let (status, _) = post(
        &b,
        "/api/v0/processes/p999/signal",
        Some("alice"),
        json!({"signal": "kill"}),
    );
    assert_eq!(status, 404);

    process_api_waits_and_lists_foreground_starts(&b);
    server.stop();
}

/// `wait=true` returns once the process has exited, with its exit code; a foreground start returns at once too, listed as foreground.
fn process_api_waits_and_lists_foreground_starts(b: &str) {
    // wait=true returns once the process has exited, with its exit code.
    let (_, r) = post(
        b,
        "/api/v0/processes/start",
        None,
        json!({"command": "sleep 0.5; echo done; exit 3", "background": true}),
    );
    let id = r["id"].as_str().unwrap().to_string();
    let (status, r) = get(b, &format!("/api/v0/processes/{id}/output?wait=true"), None);
    assert_eq!(status, 200);
    assert_eq!(r["running"], false, "{r}");
    assert_eq!(r["exit_code"], 3, "{r}");
    assert_eq!(r["output"], "done\n");
    assert!(r.get("truncated").is_none(), "{r}");

    // A foreground start returns at once too (the client waits), and is listed as foreground.
    let (status, r) = post(
        b,
        "/api/v0/processes/start",
        None,
        json!({"command": "echo fg"}),
    );
    assert_eq!(status, 200, "{r}");
    let id = r["id"].as_str().unwrap().to_string();
    let (_, r) = get(b, &format!("/api/v0/processes/{id}/output?wait=true"), None);
    assert_eq!(
        (r["exit_code"].clone(), r["output"].clone()),
        (json!(0), json!("fg\n")),
        "{r}"
    );
    let (_, r) = get(b, "/api/v0/processes/list", None);
    assert!(
        r["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["background"] == false),
        "{r}"
    );
}

/// Bad input to every route and tool gets a clear error with the right status, and the server keeps answering.
#[test]
fn bad_input_gets_clear_errors_and_the_server_keeps_answering() {
    let server = Server::start(&["--listen", "127.0.0.1:0"]);
    let b = server.base.clone();
    let huge = "y".repeat(1 << 20);
    let cases = bad_http_calls(&huge);
    for (path, body, want, needle) in cases {
        let shown: String = format!("{path} {}", body.chars().take(60).collect::<String>());
        let (status, r) = send("POST", &format!("{b}{path}"), None, None, Some(&body));
        assert_eq!(status, want, "{shown}: {r}");
        assert!(
            r.to_string().contains(needle),
            "{shown}: {r} lacks {needle:?}"
        );
        let (status, r) = post(
            &b,
            "/v1/tools/execute",
            None,
            json!({"command": "echo alive"}),
        );
        assert_eq!(
            (status, r["output"].clone()),
            (200, json!("alive\n")),
            "after {shown}"
        );
    }
    let (status, _) = get(&b, "/api/v0/processes/p404/output", None);
    assert_eq!(status, 404);
    server.stop();
}

/// Bad calls to the HTTP routes: the path, the body, the status it gets, and what its error must say.
fn bad_http_calls(huge: &str) -> Vec<(&'static str, String, u16, &'static str)> {
    vec![
        (
            "/v1/tools/execute",
            r#"{"command": "ls", "timeout": "soon"}"#.into(),
            400,
            "500ms",
        ),
        (
            "/v1/tools/execute",
            r#"{"command": "ls", "timeout": "0s"}"#.into(),
            400,
            "greater than zero",
        ),
        (
            "/v1/tools/execute",
            r#"{"command": "ls", "timeout": "-1s"}"#.into(),
            400,
            "negative",
        ),
        (
            "/v1/tools/execute",
            r#"{"command": ""}"#.into(),
            400,
            "empty",
        ),
        (
            "/v1/tools/execute",
            r#"{"command": "a\u0000b"}"#.into(),
            400,
            "NUL",
        ),
        (
            "/v1/tools/execute",
            json!({"command": huge}).to_string(),
            400,
            "limit",
        ),
        (
            "/v1/tools/execute",
            r#"{"command": "ls", "workdir": "/no/such/dir"}"#.into(),
            400,
            "/no/such/dir",
        ),
        (
            "/v1/tools/execute",
            "{not json".into(),
            400,
            "not valid JSON",
        ),
        (
            "/v1/tools/process_output",
            r#"{"process_id": "p404"}"#.into(),
            404,
            "p404",
        ),
        (
            "/v1/tools/process_signal",
            r#"{"process_id": "p1", "signal": "stop"}"#.into(),
            400,
            "terminate",
        ),
        (
            "/v1/tools/process_signal",
            r#"{"process_id": "p404", "signal": "kill"}"#.into(),
            404,
            "p404",
        ),
        ("/v1/tools/nope", "{}".into(), 404, "execute"),
        ("/api/v0/processes/start", "{oops".into(), 400, "JSON"),
        (
            "/api/v0/processes/start",
            r#"{"command": ""}"#.into(),
            400,
            "Command is required",
        ),
        (
            "/api/v0/processes/start",
            r#"{"background": true}"#.into(),
            400,
            "Command is required",
        ),
        (
            "/api/v0/processes/start",
            r#"{"command": "ls", "env": {"A": 1}}"#.into(),
            400,
            "invalid",
        ),
        (
            "/api/v0/processes/p1/signal",
            r#"{"signal": "usr1"}"#.into(),
            400,
            "terminate",
        ),
    ]
}

#[test]
fn a_token_is_required_when_configured_and_off_loopback() {
    // Off loopback without a token: refused at start.
    let out = Command::new(bin())
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env_remove("SHELLWARD_TOKEN")
        .env_remove("SHELLWARD_CONFIG")
        .output()
        .unwrap();
    assert!(!out.status.success());
    // It points at the safe way to give a token, not at `--token VALUE`, which every local user can read.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--token-file FILE"), "{err}");
    assert!(!err.contains("--token TOKEN"), "{err}");

    let server = Server::start(&["--listen", "0.0.0.0:0", "--token", "s3cret"]);
    let port = server.base.rsplit(':').next().unwrap().to_string();
    let b = format!("http://127.0.0.1:{port}");
    let url = format!("{b}/v1/tools/process_list");
    let (status, r) = send("POST", &url, None, None, Some("{}"));
    assert_eq!(status, 401, "{r}");
    let (status, _) = send("POST", &url, None, Some("wrong"), Some("{}"));
    assert_eq!(status, 401);
    let (status, r) = send("POST", &url, None, Some("s3cret"), Some("{}"));
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["success"], true);
    server.stop();
}

/// What a newcomer and a supervisor meet first: `GET /healthz` answers without the token (and says nothing but
/// that the server is up); a route asked with the wrong method is a JSON error naming the right one, like every
/// other error; a session named in a mistyped header (`X-Session`) is refused, naming the header shellward reads,
/// instead of running in the anonymous session.
#[test]
fn health_wrong_methods_and_mistyped_session_headers_are_answered_plainly() {
    let server = Server::start(&["--token", "s3cret"]);
    let b = server.base.clone();
    let (status, health) = send("GET", &format!("{b}/healthz"), None, None, None);
    assert_eq!(status, 200, "{health}");
    assert_eq!(health, serde_json::json!({"status": "ok"}));
    let (status, r) = send(
        "GET",
        &format!("{b}/v1/tools/execute"),
        None,
        Some("s3cret"),
        None,
    );
    assert_eq!(status, 405, "{r}");
    let message = r["message"].as_str().unwrap_or_default();
    assert!(message.contains("send POST"), "{r}");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let body = serde_json::json!({"command": format!("touch {}", marker.display())}).to_string();
    let mut response = agent()
        .post(&format!("{b}/v1/tools/execute"))
        .header("Content-Type", "application/json")
        .header("Authorization", "Bearer s3cret")
        .header("X-Session", "agent-a")
        .send(body.as_str())
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let text = response.body_mut().read_to_string().unwrap();
    assert!(text.contains("x-shellward-session"), "{text}");
    assert!(text.contains("x-session"), "{text}");
    assert!(!marker.exists(), "the call ran in the anonymous session");
    // Other tools' own session headers are not taken for a mistyped one.
    let (status, r) = {
        let mut response = agent()
            .post(&format!("{b}/v1/tools/execute"))
            .header("Content-Type", "application/json")
            .header("Authorization", "Bearer s3cret")
            .header("Mcp-Session-Id", "abc")
            .header("Coder-Session-Token", "t")
            .send(serde_json::json!({"command": "true"}).to_string().as_str())
            .unwrap();
        let status = response.status().as_u16();
        (status, response.body_mut().read_to_string().unwrap())
    };
    assert_eq!(status, 200, "{r}");
    // The header shellward reads works as before.
    let (status, r) = send(
        "POST",
        &format!("{b}/v1/tools/execute"),
        Some("agent-a"),
        Some("s3cret"),
        Some(&body),
    );
    assert_eq!(status, 200, "{r}");
    assert!(marker.exists(), "{r}");
    server.stop();
}

#[test]
fn a_unix_socket_listener_serves_the_same_api() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("sw.sock");
    let server = Server::start(&["--listen", &format!("unix:{}", sock.display())]);
    assert!(sock.exists());
    // A minimal HTTP/1.1 exchange over the socket.
    let reply = unix_post(&sock, r#"{"command": "echo via-unix"}"#);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("via-unix"), "{reply}");
    // The operator's views reach it there too: `--server unix:PATH`.
    let reply = unix_post(
        &sock,
        r#"{"command": "sleep 30", "run_in_background": true}"#,
    );
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let o = crate::cli::shellward(&["ps", "--server", &format!("unix:{}", sock.display())])
        .output()
        .unwrap();
    let out = crate::cli::stdout(&o);
    assert!(o.status.success(), "{}", crate::cli::stderr(&o));
    assert!(
        out.lines()
            .any(|l| l.contains("sleep 30") && l.contains("running")),
        "{out}"
    );
    let o = crate::cli::shellward(&[
        "ps",
        "--json",
        "--server",
        &format!("unix:{}", sock.display()),
    ])
    .output()
    .unwrap();
    let v: Value = serde_json::from_str(&crate::cli::stdout(&o)).unwrap();
    assert!(
        v["processes"].as_array().is_some_and(|p| !p.is_empty()),
        "{v}"
    );
    let missing = dir.path().join("nothing.sock");
    let o = crate::cli::shellward(&["ps", "--server", &format!("unix:{}", missing.display())])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        crate::cli::stderr(&o).contains("is `shellward serve --listen unix:"),
        "{}",
        crate::cli::stderr(&o)
    );
    server.stop();
}

/// `POST /v1/tools/execute` with `body` over the unix socket `sock` (a minimal HTTP/1.1 exchange): the whole reply.
fn unix_post(sock: &std::path::Path, body: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    write!(
        s,
        "POST /v1/tools/execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    reply
}

/// A raw HTTP/1.1 request over TCP; returns the whole reply text (the connection is closed by the request).
fn raw_http(base: &str, request: &str) -> String {
    use std::io::{Read, Write};
    let addr = base.strip_prefix("http://").unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    reply
}

#[test]
fn idle_and_slow_clients_cannot_exhaust_the_server() {
    use std::io::{Read, Write};
    let server = Server::start(&["--header-timeout", "1s", "--max-connections", "4"]);
    let addr = server.base.strip_prefix("http://").unwrap().to_string();
    // Four connections that never finish their headers hold every slot...
    let mut idle: Vec<std::net::TcpStream> = (0..4)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(&addr).unwrap();
            s.write_all(b"POST /v1/tools/execute HTTP/1.1\r\nHost: x\r\n")
                .unwrap();
            s
        })
        .collect();
    // ...until the header timeout closes them: the server hangs up on each.
    for s in &mut idle {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = Vec::new();
        let started = std::time::Instant::now();
        let _ = s.read_to_end(&mut buf);
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "an idle connection was kept open"
        );
    }
    // And an authenticated-looking real request is served.
    let (status, r) = post(
        &server.base,
        "/v1/tools/execute",
        None,
        json!({"command": "echo alive"}),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["output"], "alive\n");
    server.stop();
}

/// 50 idle or slow sockets against a cap of 8 connections, each of which would hold its slot for the whole 10 s
/// header timeout: a client that sends its request at once is answered at once (each new client closes the longest
/// idle connection), not after the idle ones time out.
#[test]
fn idle_sockets_do_not_delay_a_client_that_sends_its_request() {
    use std::io::Write;
    let server = Server::start(&["--header-timeout", "10s", "--max-connections", "8"]);
    let addr = server.base.strip_prefix("http://").unwrap().to_string();
    let idle: Vec<std::net::TcpStream> = (0..50)
        .map(|i| {
            let mut s = std::net::TcpStream::connect(&addr).unwrap();
            if i % 2 == 0 {
                s.write_all(b"POST /v1/tools/execute HTTP/1.1\r\nHost: x\r\n")
                    .unwrap();
            }
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let (status, r) = post(
        &server.base,
        "/v1/tools/execute",
        None,
        json!({"command": "echo served"}),
    );
    let took = started.elapsed();
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["output"], "served\n");
    println!("a request behind 50 idle sockets (cap 8) was answered in {took:?}");
    assert!(
        took < Duration::from_secs(5),
        "the request waited {took:?} behind idle sockets (the header timeout is 10 s)"
    );
    drop(idle);
    server.stop();
}

#[test]
fn an_oversized_body_is_a_json_413() {
    use std::io::{Read, Write};
    let server = Server::start(&[]);
    // As curl sends a large body: the headers with `Expect: 100-continue`, the body only once the server asks for it.
    // The server refuses at once from the declared length, so the client never writes into a closing connection
    // (which loses the answer to a reset when it happens mid-body).
    let addr = server.base.strip_prefix("http://").unwrap().to_string();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "POST /v1/tools/execute HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Expect: 100-continue\r\nConnection: close\r\n\r\n",
        3 << 20
    )
    .unwrap();
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    let body = reply.split("\r\n\r\n").nth(1).unwrap_or_default();
    let r: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {reply}"));
    assert_eq!(r["error_kind"], "too_large", "{r}");
    server.stop();
}

#[test]
fn shutdown_is_bounded_and_a_second_signal_is_immediate() {
    for (timeout, signals) in [("1s", 1), ("60s", 2)] {
        let server = Server::start(&["--shutdown-timeout", timeout]);
        let base = server.base.clone();
        // A foreground command that would hold its request for a minute.
        let inflight = std::thread::spawn(move || {
            send(
                "POST",
                &format!("{base}/v1/tools/execute"),
                None,
                None,
                Some(r#"{"command": "sleep 60", "timeout": "1h"}"#),
            )
        });
        std::thread::sleep(Duration::from_millis(500));
        let mut server = server;
        let started = std::time::Instant::now();
        for _ in 0..signals {
            crate::cli::signal(&server.child, Signal::SIGTERM);
            std::thread::sleep(Duration::from_millis(200));
        }
        let status = wait_exit(&mut server.child, Duration::from_secs(30));
        let took = started.elapsed();
        let left = survivors(&server.mark);
        kill_marked(&server.mark);
        assert!(status.success(), "{status}");
        assert!(
            took < Duration::from_secs(8),
            "{timeout}/{signals}: exit took {took:?}"
        );
        assert!(left.is_empty(), "survivors: {left:?}");
        let _ = inflight.join();
    }
}

#[test]
fn a_unix_socket_is_private_and_never_replaces_other_files() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    // A regular file at the path is refused and left alone.
    let file = crate::cli::write_file(dir.path(), "not-a-socket", "keep me");
    let out = Command::new(bin())
        .args(["serve", "--listen", &format!("unix:{}", file.display())])
        .env_remove("SHELLWARD_CONFIG")
        .env_remove("SHELLWARD_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a socket"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    // A stale socket (nobody listening) is replaced; the new one is 0600 whatever the umask.
    let sock = dir.path().join("sw.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    let server = Server::start(&["--listen", &format!("unix:{}", sock.display())]);
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // A second server on the same live socket is refused.
    let out = Command::new(bin())
        .args(["serve", "--listen", &format!("unix:{}", sock.display())])
        .env_remove("SHELLWARD_CONFIG")
        .env_remove("SHELLWARD_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use"));
    server.stop();
}

#[test]
fn tokens_are_checked_strictly_and_sessions_must_be_well_formed() {
    for bad in ["", "   ", " padded", "tab\tinside"] {
        let out = Command::new(bin())
            .args(["serve", "--token", bad])
            .env_remove("SHELLWARD_CONFIG")
            .env_remove("SHELLWARD_TOKEN")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad:?} was accepted");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("token"),
            "{bad:?}"
        );
    }
    // A token works on loopback too, with the scheme in any case.
    let server = Server::start(&["--token", "s3cret-Token"]);
    let list = |auth: &str| {
        raw_http(
            &server.base,
            &format!(
                "GET /api/v0/processes/list HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n"
            ),
        )
    };
    assert!(list("Bearer s3cret-Token").starts_with("HTTP/1.1 200"));
    assert!(list("bearer s3cret-Token").starts_with("HTTP/1.1 200"));
    assert!(list("BEARER  s3cret-Token").starts_with("HTTP/1.1 200"));
    assert!(list("Bearer s3cret-token").starts_with("HTTP/1.1 401"));
    assert!(list("Basic s3cret-Token").starts_with("HTTP/1.1 401"));
    // The token never reaches a command, even when given through the environment.
    let (_, r) = send(
        "POST",
        &format!("{}/v1/tools/execute", server.base),
        None,
        Some("s3cret-Token"),
        Some(r#"{"command": "env"}"#),
    );
    assert!(!r["output"].as_str().unwrap().contains("s3cret"), "{r}");
    // Session headers: visible ASCII, 1 to 128 characters, else 400 (never the anonymous session).
    let with_session = |session: &str| {
        raw_http(
            &server.base,
            &format!(
                "GET /api/v0/processes/list HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-Token\r\n\
                 X-Shellward-Session: {session}\r\nConnection: close\r\n\r\n"
            ),
        )
    };
    assert!(with_session("agent-1").starts_with("HTTP/1.1 200"));
    for bad in ["two words", &"a".repeat(200), "caf\u{e9}"] {
        let reply = with_session(bad);
        assert!(reply.starts_with("HTTP/1.1 400"), "{bad:?}: {reply}");
        assert!(reply.contains("visible ASCII"), "{reply}");
    }
    server.stop();
}

#[test]
fn the_token_in_the_environment_does_not_reach_commands() {
    let server = Server::start_with_env(&[], &[("SHELLWARD_TOKEN", "env-tok-77aa")]);
    let base = server.base.clone();
    let (status, r) = send(
        "POST",
        &format!("{base}/v1/tools/execute"),
        None,
        Some("env-tok-77aa"),
        Some(r#"{"command": "env; echo done"}"#),
    );
    assert_eq!(status, 200, "{r}");
    let out = r["output"].as_str().unwrap();
    assert!(
        out.contains("done") && !out.contains("env-tok-77aa"),
        "{out}"
    );
    server.stop();
}

/// `--token-file` keeps the token out of the command line; `--token VALUE` still works but warns that every local
/// user can read it in /proc/PID/cmdline.
#[test]
fn the_token_comes_from_a_file_and_a_token_on_the_command_line_is_warned_against() {
    let dir = tempfile::tempdir().unwrap();
    let file = crate::cli::write_file(dir.path(), "token", "file-tok-91bb\n");
    let log = dir.path().join("serve.log");
    let server = start_logging(&["--token-file", file.to_str().unwrap()], &log);
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", server.child.id())).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains("file-tok-91bb"));
    let list = |auth: &str| {
        raw_http(
            &server.base,
            &format!(
                "GET /api/v0/processes/list HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nConnection: close\r\n\r\n"
            ),
        )
    };
    assert!(list("Bearer file-tok-91bb").starts_with("HTTP/1.1 200"));
    assert!(list("Bearer wrong").starts_with("HTTP/1.1 401"));
    // Commands can neither read it nor change it (it is hidden in their sandbox: opening it fails).
    let (_, r) = send(
        "POST",
        &format!("{}/v1/tools/execute", server.base),
        None,
        Some("file-tok-91bb"),
        Some(&format!(
            r#"{{"command": "cat {f}; echo evil > {f}; cat {f}; echo done"}}"#,
            f = file.display()
        )),
    );
    let output = r["output"].as_str().unwrap();
    assert!(output.contains("done"), "{r}");
    assert!(!output.contains("file-tok-91bb"), "the token was read: {r}");
    assert!(!output.contains("evil"), "{r}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "file-tok-91bb\n");
    server.stop();
    assert!(!std::fs::read_to_string(&log).unwrap().contains("cmdline"));

    let log = dir.path().join("serve-argv.log");
    let server = start_logging(&["--token", "argv-tok-33cc"], &log);
    let served = raw_http(
        &server.base,
        "GET /api/v0/processes/list HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer argv-tok-33cc\r\nConnection: close\r\n\r\n",
    );
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
    server.stop();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("readable by every local user") && text.contains("--token-file"),
        "{text}"
    );
    assert!(!text.contains("argv-tok-33cc"), "{text}");
}

#[test]
fn tokens_bound_to_sessions_only_reach_their_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "auth.toml",
        "[[auth]]\ntoken_env = \"SW_TEST_TOKEN_A\"\nsessions = [\"agent-a\"]\n\n\
         [[auth]]\ntoken = \"tok-b-2\"\nsessions = [\"agent-b\", \"agent-b2\"]\n",
    );
    let server = Server::start_with_env(
        &["--config", config.to_str().unwrap()],
        &[("SW_TEST_TOKEN_A", "tok-a-1")],
    );
    let call = |token: Option<&str>, session: Option<&str>, tool: &str, body: &str| {
        send(
            "POST",
            &format!("{}/v1/tools/{tool}", server.base),
            session,
            token,
            Some(body),
        )
    };
    // A starts a process without naming a session: it lands in A's first session.
    let (status, r) = call(
        Some("tok-a-1"),
        None,
        "execute",
        r#"{"command": "sleep 30", "run_in_background": true}"#,
    );
    assert_eq!(status, 200, "{r}");
    let id = r["process_id"].as_str().unwrap().to_string();
    let (_, listed) = call(Some("tok-a-1"), Some("agent-a"), "process_list", "{}");
    assert!(listed.to_string().contains(&id), "{listed}");
    // B cannot name A's session, and sees nothing of A's in its own.
    let (status, r) = call(Some("tok-b-2"), Some("agent-a"), "process_list", "{}");
    assert_eq!(status, 403, "{r}");
    assert_eq!(r["error_kind"], "forbidden");
    let (status, listed) = call(Some("tok-b-2"), Some("agent-b2"), "process_list", "{}");
    assert_eq!(status, 200);
    assert!(!listed.to_string().contains(&id), "{listed}");
    // No token, or an unknown one: 401.
    assert_eq!(call(None, None, "process_list", "{}").0, 401);
    assert_eq!(call(Some("tok-c"), None, "process_list", "{}").0, 401);
    // The token's own variable never reaches a command.
    let (_, r) = call(Some("tok-a-1"), None, "execute", r#"{"command": "env"}"#);
    assert!(!r["output"].as_str().unwrap().contains("tok-a-1"), "{r}");
    server.stop();
}

#[test]
fn an_idle_server_sleeps() {
    let server = Server::start(&[]);
    let (status, _) = post(
        &server.base,
        "/v1/tools/execute",
        None,
        json!({"command": "echo hi"}),
    );
    assert_eq!(status, 200);
    let wakeups = crate::cli::idle_wakeups(
        server.child.id(),
        Duration::from_millis(1500),
        Duration::from_secs(3),
    );
    println!("idle shellward serve: {wakeups} context switches in 3 s");
    assert!(wakeups <= 6, "an idle server woke {wakeups} times in 3 s");
    server.stop();
}

/// Starts `serve` with its stderr in a file (to read the reload log lines).
fn start_logging(args: &[&str], log: &std::path::Path) -> Server {
    let mark = new_mark("serve");
    let (child, base) = start_serve(
        &[&["--listen", "127.0.0.1:0"], args].concat(),
        &[],
        &mark,
        Stdio::from(std::fs::File::create(log).unwrap()),
    );
    Server { child, base, mark }
}

/// Polls `check` every 100 ms for up to `limit`; returns whether it became true.
fn within(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `POST /v1/tools/execute` with `preview: true`: the change set in the answer, `applied: false`, nothing applied.
#[test]
fn execute_over_http_previews_a_command() {
    let (_dir, ws, server) = served_workspace();
    let b = server.base.clone();
    let (status, r) = post(
        &b,
        "/v1/tools/execute",
        Some("previewer"),
        json!({"command": "rm a.txt && echo b > b.txt", "workdir": ws.display().to_string(), "preview": true}),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["applied"], false, "{r}");
    let kinds: Vec<(String, String)> = r["preview"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_string(),
                c["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let at = |n: &str| ws.join(n).display().to_string();
    assert_eq!(
        kinds,
        vec![
            (at("a.txt"), "deleted".to_string()),
            (at("b.txt"), "created".to_string())
        ]
    );
    assert!(ws.join("a.txt").exists() && !ws.join("b.txt").exists());
    server.stop();
}

/// The undo tools over HTTP: `POST /v1/tools/changes_list` lists a session's command, `changes_undo` takes it back,
/// a second undo is a 409 saying why, and another token's session cannot undo it.
#[cfg(target_os = "linux")]
#[test]
fn changes_are_listed_and_undone_over_http() {
    let (_dir, ws, server) = served_workspace();
    let b = server.base.clone();
    let (status, r) = post(
        &b,
        "/v1/tools/execute",
        Some("undoer"),
        json!({"command": "echo more >> a.txt && mkdir out && echo x > out/x", "workdir": ws.display().to_string()}),
    );
    assert_eq!(status, 200, "{r}");
    let id = r["process_id"].clone();
    let (status, list) = post(&b, "/v1/tools/changes_list", Some("undoer"), json!({}));
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["commands"][0]["process_id"], id, "{list}");
    assert_eq!(
        list["commands"][0]["changes"].as_array().unwrap().len(),
        3,
        "{list}"
    );
    // Another session cannot undo it.
    let (status, other) = post(
        &b,
        "/v1/tools/changes_undo",
        Some("someone-else"),
        json!({"process_id": id}),
    );
    assert_eq!(status, 409, "{other}");
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "a\nmore\n"
    );
    let (status, undone) = post(
        &b,
        "/v1/tools/changes_undo",
        Some("undoer"),
        json!({"process_id": id}),
    );
    assert_eq!(status, 200, "{undone}");
    assert_eq!(undone["removed"], json!(["out", "out/x"]), "{undone}");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "a\n");
    assert!(!ws.join("out").exists());
    let (status, again) = post(
        &b,
        "/v1/tools/changes_undo",
        Some("undoer"),
        json!({"process_id": id}),
    );
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error_kind"], "conflict");
    assert!(
        again["error"].as_str().unwrap().contains("already undone"),
        "{again}"
    );
    server.stop();
}

/// A workspace holding `a.txt` (`a`), its canonical path, and a server on loopback.
fn served_workspace() -> (tempfile::TempDir, std::path::PathBuf, Server) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    (dir, ws, Server::start(&["--listen", "127.0.0.1:0"]))
}
