//! `shellward serve` driven end to end with a plain HTTP client (ureq): tool routes, the process API and its status
//! codes, sessions, bearer-token auth, `wait=true`, bad input, and cleanup at shutdown.

// Unix only: these tests drive the binary on Linux (signals, `/proc`, unix sockets, sandboxes); `cli_portable.rs`
// holds what every platform shares.
#![cfg(unix)]

use crate::cli::{Server, Signal, bin, kill_marked, new_mark, start_serve, survivors, wait_exit};
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::Duration;

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
    assert_eq!(tools["tools"].as_array().unwrap().len(), 5);

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

    // Status codes of signal.
    let (status, r) = post(
        &b,
        &format!("/api/v0/processes/{id}/signal"),
        Some("alice"),
        json!({"signal": "hup"}),
    );
    assert_eq!(status, 400, "{r}");
    let (status, r) = post(
        &b,
        &format!("/api/v0/processes/{id}/signal"),
        Some("alice"),
        json!({"signal": "terminate"}),
    );
    assert_eq!(status, 200, "{r}");
    let (status, r) = post(
        &b,
        &format!("/api/v0/processes/{id}/signal"),
        Some("alice"),
        json!({"signal": "kill"}),
    );
    assert_eq!(status, 409, "{r}");
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
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token"));

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
    let server = Server::start(&[]);
    let big = format!("{{\"command\": \"{}\"}}", "x".repeat(3 << 20));
    let (status, r) = send(
        "POST",
        &format!("{}/v1/tools/execute", server.base),
        None,
        None,
        Some(&big),
    );
    assert_eq!(status, 413);
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

#[test]
fn a_policy_dropped_into_the_watched_directory_takes_effect_and_a_broken_replacement_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let drop_in = dir.path().join("policies.d");
    std::fs::create_dir(&drop_in).unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "shellward.toml",
        "[policies]\ndir = \"policies.d\"\n",
    );
    let log = dir.path().join("serve.log");
    let server = start_logging(&["--config", config.to_str().unwrap()], &log);
    let b = server.base.clone();
    let echo = || post(&b, "/v1/tools/execute", None, json!({"command": "echo hi"}));

    let (status, r) = echo();
    assert_eq!((status, &r["output"]), (200, &json!("hi\n")), "{r}");
    let (_, p) = get(&b, "/v1/policies", None);
    let names: Vec<&str> = p["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "guard"], "{p}");

    // Drop in a guard that denies `echo`: settings beside it, then the component.
    std::fs::write(
        drop_in.join("50-no-echo.toml"),
        "[settings]\ndeny = [\"echo\"]\n",
    )
    .unwrap();
    let guard = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shellward-policy/components/shellward_guard_policy.wasm");
    std::fs::copy(&guard, drop_in.join("50-no-echo.wasm")).unwrap();
    let denied = within(Duration::from_secs(2), || {
        let (_, r) = echo();
        r.to_string().contains("deny-pattern")
    });
    assert!(
        denied,
        "the dropped-in policy did not take effect within 2 s: {:?}",
        std::fs::read_to_string(&log)
    );
    let (_, p) = get(&b, "/v1/policies", None);
    let policies = p["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 3, "{p}");
    assert!(
        policies[2]["source"]
            .as_str()
            .unwrap()
            .ends_with("50-no-echo.wasm")
    );
    assert!(
        policies[2]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(policies[2]["wit_version"], shellward_policy::WIT_VERSION);
    // `policy list --server` asks the running server.
    let listed = Command::new(bin())
        .args(["policy", "list", "--server", &b])
        .env_remove("SHELLWARD_TOKEN")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(
        out.contains("3. ") && out.contains("50-no-echo.wasm"),
        "{out}"
    );

    // Replacing the policy with a broken file keeps the chain in force, and the log names the file.
    std::fs::write(drop_in.join("50-no-echo.wasm"), b"not a component").unwrap();
    let logged = within(Duration::from_secs(5), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("50-no-echo.wasm"))
    });
    assert!(logged, "{:?}", std::fs::read_to_string(&log));
    let (_, r) = echo();
    assert!(
        r.to_string().contains("deny-pattern"),
        "the old chain must stay: {r}"
    );
    a_broken_policy_is_reported_as_failed_beside_the_stale_one(&b);
    // Fixed: removing the broken file brings the plain chain back.
    std::fs::remove_file(drop_in.join("50-no-echo.wasm")).unwrap();
    let back = within(Duration::from_secs(3), || echo().1["output"] == "hi\n");
    assert!(back, "{:?}", std::fs::read_to_string(&log));
    let (_, p) = get(&b, "/v1/policies", None);
    assert_eq!(
        (
            p["last_attempt_ok"].clone(),
            p["failed"].as_array().map(Vec::len)
        ),
        (json!(true), Some(0)),
        "{p}"
    );
    server.stop();
}

/// The status says so: the previous version keeps serving (`stale`), the broken file `failed`, with its error, in `/v1/policies`, `policy list --server` and `/metrics`.
fn a_broken_policy_is_reported_as_failed_beside_the_stale_one(b: &str) {
    // The status says so: the previous version keeps serving (`stale`), the broken file `failed`, with its error, in
    // `/v1/policies`, `policy list --server` and `/metrics`.
    let (_, p) = get(b, "/v1/policies", None);
    let policies = p["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 3, "{p}");
    assert_eq!(policies[2]["state"], "stale", "{p}");
    assert_eq!(policies[0]["state"], "loaded", "{p}");
    assert_eq!(p["last_attempt_ok"], false, "{p}");
    assert!(p["last_attempt"].as_u64().unwrap() > 0, "{p}");
    let failed = p["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{p}");
    assert!(
        failed[0]["source"]
            .as_str()
            .unwrap()
            .ends_with("50-no-echo.wasm"),
        "{p}"
    );
    assert!(!failed[0]["error"].as_str().unwrap().is_empty(), "{p}");
    let listed = Command::new(bin())
        .args(["policy", "list", "--server", b])
        .env_remove("SHELLWARD_TOKEN")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&listed.stdout);
    assert!(out.contains("[stale]") && out.contains("FAILED "), "{out}");
    let (_, metrics) = get(b, "/metrics", None);
    let metrics = metrics.as_str().unwrap_or_default().to_string();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("shellward_policy_load_failed{")
                && l.contains("50-no-echo.wasm")
                && l.ends_with(" 1")),
        "{metrics}"
    );
}

#[test]
fn sighup_reloads_the_policies_and_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let server = start_logging(&["--policy", "default", "--policy", "guard"], &log);
    crate::cli::signal(&server.child, Signal::SIGHUP);
    let reloaded = within(Duration::from_secs(5), || {
        std::fs::read_to_string(&log)
            .is_ok_and(|l| l.contains("SIGHUP: reloaded the policy chain (2 policies)"))
    });
    assert!(reloaded, "{:?}", std::fs::read_to_string(&log));
    let (status, r) = post(
        &server.base,
        "/v1/tools/execute",
        None,
        json!({"command": "echo still"}),
    );
    assert_eq!((status, &r["output"]), (200, &json!("still\n")), "{r}");
    server.stop();
}

#[test]
fn the_audit_log_records_decisions_and_ends_without_output() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "shellward.toml",
        "[audit]\npath = \"audit.jsonl\"\n",
    );
    let log = dir.path().join("serve.log");
    let server = start_logging(&["--config", config.to_str().unwrap()], &log);
    let b = server.base.clone();
    let (_, r) = post(
        &b,
        "/v1/tools/execute",
        Some("s1"),
        json!({"command": "printf 'sec%s' ret-output"}),
    );
    assert_eq!(r["output"], "secret-output", "{r}");
    let (_, r) = post(
        &b,
        "/v1/tools/execute",
        Some("s1"),
        json!({"command": "rm -rf /"}),
    );
    assert_eq!(r["denied"], true, "{r}");
    let (_, r) = post(
        &b,
        "/v1/tools/execute",
        Some("s1"),
        json!({"command": "sleep 0.3; exit 4", "run_in_background": true}),
    );
    let bg = r["process_id"].as_str().unwrap().to_string();
    let (_, r) = post(
        &b,
        "/v1/tools/process_output",
        Some("s1"),
        json!({"process_id": bg, "wait": "10s"}),
    );
    assert_eq!(r["running"], false, "{r}");
    server.stop();

    let text = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(
        !text.contains("secret-output"),
        "output is not logged by default: {text}"
    );
    let of = |kind: &str| -> Vec<&Value> { records.iter().filter(|r| r["type"] == kind).collect() };
    let decisions = of("decision");
    assert_eq!(decisions.len(), 3, "{text}");
    assert_eq!(decisions[0]["command"], "printf 'sec%s' ret-output");
    assert_eq!(decisions[0]["outcome"], "run");
    assert_eq!(decisions[0]["surface"], "serve");
    assert_eq!(decisions[0]["session"], "s1");
    assert_eq!(decisions[0]["plan"]["mode"], "foreground");
    assert_eq!(decisions[0]["policies"].as_array().unwrap().len(), 2);
    assert!(decisions[0]["time"].as_f64().unwrap() > 1.0e9);
    assert_eq!(decisions[1]["outcome"], "deny");
    assert_eq!(decisions[1]["denied_by"], "guard");
    assert!(decisions[1]["reason"].as_str().unwrap().contains("rm-root"));
    assert_eq!(decisions[2]["plan"]["mode"], "background");
    let ends = of("end");
    assert_eq!(ends.len(), 2, "{text}");
    let first = ends
        .iter()
        .find(|e| e["process_id"] == decisions[0]["process_id"])
        .unwrap();
    assert_eq!(first["exit_code"], 0);
    assert_eq!(first["output_bytes"], 13);
    let last = ends
        .iter()
        .find(|e| e["process_id"] == bg.as_str())
        .unwrap();
    assert_eq!(last["exit_code"], 4, "{text}");
    assert!(last["duration_ms"].as_u64().unwrap() >= 250, "{text}");
    // The file is private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.path().join("audit.jsonl"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn metrics_count_real_traffic() {
    let server = Server::start(&[]);
    let b = server.base.clone();
    let run = |body: Value| post(&b, "/v1/tools/execute", None, body).1;
    assert_eq!(run(json!({"command": "echo hi"}))["exit_code"], 0);
    assert_eq!(run(json!({"command": "rm -rf /"}))["denied"], true);
    let r = run(json!({"command": "sleep 5", "timeout": "500ms", "on_timeout": "kill"}));
    assert_eq!(r["timed_out"], true, "{r}");
    let r = run(json!({"command": "sleep 30", "run_in_background": true}));
    let id = r["process_id"].as_str().unwrap().to_string();
    let (status, _) = post(
        &b,
        "/v1/tools/process_signal",
        None,
        json!({"process_id": id, "signal": "kill"}),
    );
    assert_eq!(status, 200);

    let mut response = agent().get(&format!("{b}/metrics")).call().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let text = response.body_mut().read_to_string().unwrap();
    let value = |series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("{series} missing from:\n{text}"))
            .parse()
            .unwrap()
    };
    assert_eq!(
        value(r#"shellward_decisions_total{outcome="run",policy=""}"#),
        3.0
    );
    assert_eq!(
        value(r#"shellward_decisions_total{outcome="deny",policy="guard"}"#),
        1.0
    );
    assert_eq!(value(r#"shellward_executes_total{mode="foreground"}"#), 2.0);
    assert_eq!(value(r#"shellward_executes_total{mode="background"}"#), 1.0);
    assert_eq!(value("shellward_timeouts_total"), 1.0);
    assert_eq!(value(r#"shellward_signals_total{signal="kill"}"#), 1.0);
    assert_eq!(value("shellward_running_processes"), 0.0);
    assert_eq!(value("shellward_spawn_seconds_count"), 3.0);
    assert_eq!(value("shellward_policy_chain_seconds_count"), 4.0);
    assert!(value("shellward_policy_chain_seconds_sum") > 0.0);
    server.stop();
}

/// Interactive processes over HTTP: `execute` with `interactive`/`tty`, answers through `process_input`, end of input,
/// and the status codes of input errors.
#[test]
fn interactive_processes_over_http() {
    let server = Server::start(&[]);
    let b = server.base.clone();
    for mode in [json!({"interactive": true}), json!({"tty": true})] {
        let mut args = json!({"command": "python3 -i -q"});
        args.as_object_mut()
            .unwrap()
            .extend(mode.as_object().unwrap().clone());
        let (status, r) = post(&b, "/v1/tools/execute", Some("ia"), args);
        assert_eq!(status, 200, "{r}");
        assert_eq!(r["running"], true, "{r}");
        let id = r["process_id"].as_str().unwrap().to_string();
        let (status, r) = post(
            &b,
            "/v1/tools/process_input",
            Some("ia"),
            json!({"process_id": id, "text": "print(6*7)\n"}),
        );
        assert_eq!(status, 200, "{r}");
        assert!(r["output"].as_str().unwrap().contains("42"), "{mode}: {r}");
        // Another session cannot write to it.
        let (status, _) = post(
            &b,
            "/v1/tools/process_input",
            Some("other"),
            json!({"process_id": id, "text": "print(1)\n"}),
        );
        assert_eq!(status, 404);
        let (_, r) = post(
            &b,
            "/v1/tools/process_input",
            Some("ia"),
            json!({"process_id": id, "close_stdin": true, "wait": "10s"}),
        );
        assert_eq!(
            (r["running"].clone(), r["exit_code"].clone()),
            (json!(false), json!(0)),
            "{r}"
        );
        // Closed: 409.
        let (status, r) = post(
            &b,
            "/v1/tools/process_input",
            Some("ia"),
            json!({"process_id": id, "text": "x"}),
        );
        assert_eq!(status, 409, "{r}");
    }
    let (_, r) = post(
        &b,
        "/v1/tools/execute",
        None,
        json!({"command": "tty -s", "tty": true}),
    );
    assert_eq!(r["exit_code"], 0, "{r}");
    let (_, r) = post(
        &b,
        "/v1/tools/execute",
        None,
        json!({"command": "tty -s", "interactive": true}),
    );
    let id = r["process_id"].as_str().unwrap_or_default().to_string();
    if r["running"] == true {
        post(
            &b,
            "/v1/tools/process_input",
            None,
            json!({"process_id": id, "close_stdin": true}),
        );
    }
    // Bad input: 400 with what to do.
    let (status, r) = post(
        &b,
        "/v1/tools/execute",
        None,
        json!({"command": "true", "rows": 10}),
    );
    assert_eq!(status, 400, "{r}");
    assert!(r["error"].as_str().unwrap().contains("tty: true"), "{r}");
    let (_, r) = post(
        &b,
        "/v1/tools/execute",
        None,
        json!({"command": "sleep 60", "run_in_background": true}),
    );
    let plain = r["background_process_id"].as_str().unwrap().to_string();
    let (status, r) = post(
        &b,
        "/v1/tools/process_input",
        None,
        json!({"process_id": plain, "text": "x"}),
    );
    assert_eq!(status, 400, "{r}");
    assert!(r["error"].as_str().unwrap().contains("interactive"), "{r}");
    let (status, r) = post(
        &b,
        "/v1/tools/process_input",
        None,
        json!({"process_id": plain}),
    );
    assert_eq!(status, 400, "{r}");
    let (status, r) = post(
        &b,
        "/v1/tools/process_input",
        None,
        json!({"process_id": plain, "bytes_base64": "***"}),
    );
    assert_eq!(status, 400, "{r}");
    assert!(r["error"].as_str().unwrap().contains("base64"), "{r}");
    server.stop();
}

/// What an agent learns at once over the HTTP tool routes: a server ready (naming its port), a start-up failure with
/// its exit and error, a quiet command at the start-up limit, a REPL's answer when it waits for input (and a sleeping
/// process not reported waiting), the session's working directory, and a retried start that starts nothing.
#[test]
fn an_agent_knows_at_once_over_http() {
    use std::time::Instant;
    let server = Server::start(&[]);
    let b = server.base.clone();
    let exec = |session: &str, args: Value| {
        let (status, r) = post(&b, "/v1/tools/execute", Some(session), args);
        assert_eq!(status, 200, "{r}");
        r
    };
    let kill = |session: &str, id: &str| {
        post(
            &b,
            "/v1/tools/process_signal",
            Some(session),
            json!({"process_id": id, "signal": "kill"}),
        )
    };

    // Ready: listens after 1.5 s, answered within about 2 s naming the port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let began = Instant::now();
    let r = exec(
        "a",
        json!({"command": format!("sleep 1.5; exec python3 -m http.server --bind 127.0.0.1 {port}"),
               "run_in_background": true}),
    );
    let took = began.elapsed();
    assert_eq!(r["running"], true, "{r}");
    assert_eq!(
        r["listening"],
        json!([format!("tcp 127.0.0.1:{port}")]),
        "{r}"
    );
    assert!(took < Duration::from_millis(2900), "{took:?}");
    kill("a", r["process_id"].as_str().unwrap());

    // Failed during start-up: the exit code and the error text, from the start call.
    let r = exec(
        "a",
        json!({"command": "sleep 1.2; echo 'port already in use' >&2; exit 1", "run_in_background": true}),
    );
    assert_eq!(
        (r["running"].clone(), r["exit_code"].clone()),
        (json!(false), json!(1)),
        "{r}"
    );
    assert!(
        r["output"].as_str().unwrap().contains("already in use"),
        "{r}"
    );

    // Quiet and not listening: answered at the start-up limit (3 s), running.
    let began = Instant::now();
    let r = exec(
        "a",
        json!({"command": "sleep 30", "run_in_background": true}),
    );
    assert_eq!(r["running"], true, "{r}");
    assert!(
        began.elapsed() < Duration::from_secs(6),
        "{:?}",
        began.elapsed()
    );
    kill("a", r["process_id"].as_str().unwrap());

    // A REPL's answer within 0.4 s of the input, reported waiting for input.
    let r = exec(
        "a",
        json!({"command": "python3 -q -i", "interactive": true}),
    );
    let repl = r["process_id"].as_str().unwrap().to_string();
    let began = Instant::now();
    let (_, r) = post(
        &b,
        "/v1/tools/process_input",
        Some("a"),
        json!({"process_id": repl, "text": "print(6*7)\n"}),
    );
    let took = began.elapsed();
    assert!(r["output"].as_str().unwrap().contains("42"), "{r}");
    assert_eq!(r["waiting_for_input"], true, "{r}");
    assert!(took < Duration::from_millis(400), "{took:?}");
    kill("a", &repl);
    // Blocked on read: waiting; asleep with its stdin open: not.
    let r = exec(
        "a",
        json!({"command": "read line; echo got $line", "interactive": true}),
    );
    let reader = r["process_id"].as_str().unwrap().to_string();
    let (_, r) = post(
        &b,
        "/v1/tools/process_output",
        Some("a"),
        json!({"process_id": reader, "wait": "2s"}),
    );
    assert_eq!(r["waiting_for_input"], true, "{r}");
    let r = exec("a", json!({"command": "sleep 30", "interactive": true}));
    let sleeper = r["process_id"].as_str().unwrap().to_string();
    let (_, r) = post(
        &b,
        "/v1/tools/process_output",
        Some("a"),
        json!({"process_id": sleeper, "wait": "1s"}),
    );
    assert_ne!(r["waiting_for_input"], true, "{r}");
    kill("a", &reader);
    kill("a", &sleeper);

    the_session_keeps_its_directory_and_its_client_tokens(&b);
    server.stop();
}

/// `cd` persists within a session, not across sessions; a retried execute with a client token starts nothing new.
fn the_session_keeps_its_directory_and_its_client_tokens(b: &str) {
    let exec = |session: &str, args: Value| {
        let (status, r) = post(b, "/v1/tools/execute", Some(session), args);
        assert_eq!(status, 200, "{r}");
        r
    };
    // `cd` persists within a session, not across sessions.
    let dir = tempfile::tempdir().unwrap();
    let there = dir.path().canonicalize().unwrap();
    exec("a", json!({"command": format!("cd {}", there.display())}));
    let r = exec("a", json!({"command": "pwd"}));
    assert_eq!(r["output"], format!("{}\n", there.display()), "{r}");
    let r = exec("b", json!({"command": "pwd"}));
    assert_ne!(r["output"], format!("{}\n", there.display()), "{r}");

    // A retried execute with a client token starts nothing new; the token with another command is a 409.
    let tally = there.join("tally");
    let call = json!({"command": format!("echo run >> {}; echo ok", tally.display()), "client_token": "c-1"});
    let first = exec("a", call.clone());
    let again = exec("a", call);
    assert_eq!(again["attached"], true, "{again}");
    assert_eq!(again["process_id"], first["process_id"]);
    assert_eq!(std::fs::read_to_string(&tally).unwrap(), "run\n");
    let (status, r) = post(
        b,
        "/v1/tools/execute",
        Some("a"),
        json!({"command": "echo other", "client_token": "c-1"}),
    );
    assert_eq!(status, 409, "{r}");
    assert_eq!(r["error_kind"], "conflict", "{r}");
}

/// A newcomer's first commands: `--listen localhost:PORT` works (a name resolving to loopback), and the server's log
/// written to a file or pipe carries no colour codes.
#[test]
fn listen_takes_a_host_name_and_a_piped_log_has_no_colour() {
    use std::io::Read;
    let mark = new_mark("serve-localhost");
    let (mut child, base) = start_serve(&["--listen", "localhost:0"], &[], &mark, Stdio::piped());
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    let (status, _) = get(&base, "/v1/tools", None);
    assert_eq!(status, 200);
    crate::cli::signal(&child, Signal::SIGTERM);
    let status = wait_exit(&mut child, Duration::from_secs(30));
    assert!(status.success(), "{status}");
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(log.contains("no token:"), "the warning is logged: {log}");
    // It names the ways to give a token that do not show it in /proc, not --token.
    assert!(
        log.contains("--token-file")
            && log.contains("SHELLWARD_TOKEN")
            && !log.contains("set --token"),
        "{log}"
    );
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a piped log: {log:?}"
    );
    kill_marked(&mark);
    assert!(survivors(&mark).is_empty());
}

/// The attack run's route to another session's output, through `serve`: session B reads session A's log file (the
/// `log_path` A's result names) and searches every log it can find; it finds nothing of A's, while A reads its own.
#[test]
fn a_session_cannot_read_another_sessions_output() {
    let server = Server::start(&[]);
    let secret = format!("secret-of-a-{}", std::process::id());
    let (status, a) = post(
        &server.base,
        "/v1/tools/execute",
        Some("agent-a"),
        json!({"command": format!("echo {secret}")}),
    );
    assert_eq!(status, 200, "{a}");
    let log = a["log_path"].as_str().expect("a log path").to_string();
    let (_, own) = post(
        &server.base,
        "/v1/tools/execute",
        Some("agent-a"),
        json!({"command": format!("cat {log}")}),
    );
    assert!(own["output"].as_str().unwrap().contains(&secret), "{own}");
    let root = std::path::Path::new(&log)
        .ancestors()
        .nth(3)
        .unwrap()
        .to_path_buf();
    let search = format!(
        "cat {log}; grep -rs {secret} {} {}/.shellward-logs-* 2>/dev/null | head -3; echo searched",
        root.display(),
        root.parent().unwrap().display()
    );
    let (_, b) = post(
        &server.base,
        "/v1/tools/execute",
        Some("agent-b"),
        json!({"command": search, "timeout": "60s", "on_timeout": "kill"}),
    );
    let seen = b["output"].as_str().unwrap();
    assert!(seen.contains("searched") && !seen.contains(&secret), "{b}");
    server.stop();
}

/// A command the guard asks about, over HTTP: the call answers at once with a pending approval (nothing ran);
/// `GET /v1/approvals` lists it for its session only; `POST /v1/approvals/{id}` approve runs it and answers with the
/// result, deny refuses it; a decided, foreign or expired id is a 404 and runs nothing; a bad body is a 400.
#[test]
fn approvals_over_http_pend_then_run_or_refuse_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "shellward.toml",
        "[approvals]\nexpiry = \"2s\"\n",
    );
    let server = Server::start(&[
        "--listen",
        "127.0.0.1:0",
        "--config",
        config.to_str().unwrap(),
    ]);
    let b = server.base.clone();

    // Pending, listed for its own session only, then approved: it runs once.
    let (path, command) = crate::cli::victim(dir.path(), "approved");
    let id = ask_over_http(&b, "s1", &command);
    assert!(path.exists(), "nothing runs before the answer");
    let (_, listed) = get(&b, "/v1/approvals", Some("s1"));
    assert_eq!(listed["pending"][0]["id"], id.as_str(), "{listed}");
    assert_eq!(
        listed["pending"][0]["command"],
        command.as_str(),
        "{listed}"
    );
    let (_, other) = get(&b, "/v1/approvals", Some("s2"));
    assert_eq!(other["pending"], json!([]), "{other}");
    let (status, r) = post(
        &b,
        &format!("/v1/approvals/{id}"),
        Some("s2"),
        json!({"decision": "approve"}),
    );
    assert_eq!(status, 404, "another session cannot answer: {r}");
    assert!(path.exists());
    let (status, r) = post(
        &b,
        &format!("/v1/approvals/{id}"),
        Some("s1"),
        json!({"decision": "maybe"}),
    );
    assert_eq!(status, 400, "{r}");
    let (status, r) = post(
        &b,
        &format!("/v1/approvals/{id}"),
        Some("s1"),
        json!({"decision": "approve", "remember": "session"}),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        (r["success"].clone(), r["exit_code"].clone()),
        (json!(true), json!(0)),
        "{r}"
    );
    assert!(!path.exists(), "approved: it ran");
    let (status, _) = post(
        &b,
        &format!("/v1/approvals/{id}"),
        Some("s1"),
        json!({"decision": "approve"}),
    );
    assert_eq!(status, 404, "a decided id is spent");
    let (_, listed) = get(&b, "/v1/approvals", Some("s1"));
    assert_eq!(listed["remembered"], json!([command]), "{listed}");

    // Denied: nothing runs, and the reason says the user declined.
    let (path, command) = crate::cli::victim(dir.path(), "denied");
    let id = ask_over_http(&b, "s1", &command);
    let (status, r) = post(
        &b,
        &format!("/v1/approvals/{id}"),
        Some("s1"),
        json!({"decision": "deny", "reason": "not now"}),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["denied"], true, "{r}");
    assert!(
        r["deny_reason"].as_str().unwrap().contains("not now"),
        "{r}"
    );
    assert!(path.exists());

    // Expired: refused afterwards, and the command never ran.
    let (path, command) = crate::cli::victim(dir.path(), "expired");
    let id = ask_over_http(&b, "s1", &command);
    std::thread::sleep(Duration::from_millis(2500));
    let (status, r) = post(
        &b,
        &format!("/v1/approvals/{id}"),
        Some("s1"),
        json!({"decision": "approve"}),
    );
    assert_eq!(status, 404, "{r}");
    assert!(path.exists(), "an expired approval never runs");
    let (status, _) = post(
        &b,
        "/v1/approvals/ap-00000000000000000000000000000000",
        Some("s1"),
        json!({"decision": "approve"}),
    );
    assert_eq!(status, 404);
}

/// Sends `command` (one the guard asks about) in `session`: the pending approval's id.
fn ask_over_http(b: &str, session: &str, command: &str) -> String {
    let (status, r) = post(
        b,
        "/v1/tools/execute",
        Some(session),
        json!({"command": command}),
    );
    assert_eq!(status, 200, "{r}");
    let pending = r["pending_approval"].clone();
    assert!(pending["id"].as_str().unwrap().starts_with("ap-"), "{r}");
    assert!(
        pending["question"]
            .as_str()
            .unwrap()
            .contains("guard[shred]"),
        "{r}"
    );
    assert_eq!(r["success"], false, "{r}");
    pending["id"].as_str().unwrap().to_string()
}

/// The commands a server runs cannot call that server: over TCP its port is closed to them (another loopback port
/// stays open), over a unix socket the socket is hidden in their sandbox (another socket stays reachable). So no
/// command can list a pending approval's id or answer it, though the pending approval is there for the client.
#[test]
fn commands_cannot_reach_the_server_that_runs_them() {
    commands_cannot_reach_their_server();
}

/// Set in the rerun of the approval tests as an unprivileged user.
const AS_USER: &str = "SHELLWARD_TEST_SERVE_APPROVALS_AS_USER";

/// [`commands_cannot_reach_the_server_that_runs_them`] and
/// [`pending_approvals_over_http_show_every_character_as_text`] as an unprivileged user (the server, its sandbox
/// in a user namespace of its own, and the person reading).
#[test]
fn a_normal_users_server_is_out_of_its_commands_reach_and_shows_them_as_text() {
    if !shellward_test_support::as_unprivileged_user(
        shellward_test_support::test_path!(
            "a_normal_users_server_is_out_of_its_commands_reach_and_shows_them_as_text"
        ),
        AS_USER,
    ) {
        return;
    }
    commands_cannot_reach_their_server();
    pending_approvals_shown_as_text();
}

fn commands_cannot_reach_their_server() {
    let dir = tempfile::tempdir().unwrap();
    // TCP: the server's port closed, a port of the test's open.
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    let accepting = std::thread::spawn(move || {
        let _ = other.accept();
    });
    let server = Server::start(&[]);
    let b = server.base.clone();
    let port = b.rsplit(':').next().unwrap().to_string();
    let (path, command) = crate::cli::victim(dir.path(), "tcp");
    let id = ask_over_http(&b, "s1", &command);
    let connect = |port: &str, says: &str| {
        format!(
            "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5); print('{says}')\" \
             2>/dev/null"
        )
    };
    let probe = format!(
        "{}; {}",
        connect(&port, "SERVER-REACHED"),
        connect(&other_port.to_string(), "OTHER-REACHED")
    );
    let (status, r) = post(
        &b,
        "/v1/tools/execute",
        Some("s1"),
        json!({"command": probe}),
    );
    assert_eq!(status, 200, "{r}");
    reached_only_the_other(&r);
    accepting.join().unwrap();
    let (_, listed) = get(&b, "/v1/approvals", Some("s1"));
    assert_eq!(
        listed["pending"][0]["id"],
        id.as_str(),
        "still the client's to answer"
    );
    assert!(path.exists());
    server.stop();

    // A unix socket: hidden from commands, another socket reachable.
    let sock = dir.path().join("sw.sock");
    let other_sock = dir.path().join("other.sock");
    let other = std::os::unix::net::UnixListener::bind(&other_sock).unwrap();
    let accepting = std::thread::spawn(move || {
        let _ = other.accept();
    });
    let server = Server::start(&["--listen", &format!("unix:{}", sock.display())]);
    let connect = |p: &std::path::Path, says: &str| {
        format!(
            "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}'); print('{says}')\" \
             2>/dev/null",
            p.display()
        )
    };
    let probe = format!(
        "{}; {}",
        connect(&sock, "SERVER-REACHED"),
        connect(&other_sock, "OTHER-REACHED")
    );
    let reply = unix_post(&sock, &json!({"command": probe}).to_string());
    let r: Value = serde_json::from_str(reply.split_once("\r\n\r\n").unwrap().1).unwrap();
    reached_only_the_other(&r);
    accepting.join().unwrap();
    server.stop();
}

/// Over HTTP a person reading the pending approvals (with `curl`) sees a hostile command's every character as
/// text: the body carries no raw control, bidirectional or invisible character; the parsed `command` is the raw one
/// for machines; `shown` is the rendered question, escapes counted.
#[test]
fn pending_approvals_over_http_show_every_character_as_text() {
    pending_approvals_shown_as_text();
}

/// A probe's result: it reached the other listener, and not the server.
fn reached_only_the_other(r: &Value) {
    let output = r["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("OTHER-REACHED"),
        "the other listener is reachable: {r}"
    );
    assert!(
        !output.contains("SERVER-REACHED"),
        "a command reached its server: {r}"
    );
}

fn pending_approvals_shown_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[]);
    let b = server.base.clone();
    let (path, victim) = crate::cli::victim(dir.path(), "hostile");
    let hostile = format!("{victim} \x1b[2K\x1b[1G\r\u{202e}echo safe\u{200b}");
    let (status, r) = post(
        &b,
        "/v1/tools/execute",
        Some("s1"),
        json!({"command": hostile}),
    );
    assert_eq!(status, 200, "{r}");
    assert!(r["pending_approval"]["id"].is_string(), "{r}");
    let reply = raw_http(
        &b,
        "GET /v1/approvals HTTP/1.1\r\nHost: x\r\nX-Shellward-Session: s1\r\nConnection: close\r\n\r\n",
    );
    let body = reply
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    assert!(
        !body
            .chars()
            .any(|c| c != '\n' && c != '\r' && shellward::shown::is_hidden(c))
            && !body.contains('\r'),
        "{body:?}"
    );
    let listed: Value = serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {body}"));
    let pending = &listed["pending"][0];
    assert_eq!(pending["command"], hostile.as_str());
    let prompt = pending["shown"]["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("\\x1b[2K\\x1b[1G\\r\\u{202e}echo safe\\u{200b}")
            && prompt.contains("contains 5 invisible or control characters, shown escaped"),
        "{prompt}"
    );
    assert_eq!(pending["shown"]["command_escaped"], 5);
    assert!(path.exists());
    server.stop();
}
