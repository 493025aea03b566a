//! `shellward serve` driven end to end with a plain HTTP client (ureq): tool routes, the process API and its status
//! codes, sessions, bearer-token auth, `wait=true`, bad input, and cleanup at shutdown.

#[path = "support/cli.rs"]
mod cli;

use cli::{MARK, Signal, bin, kill_marked, new_mark, survivors, wait_exit};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Server {
    child: Child,
    base: String,
    mark: String,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        let mark = new_mark("serve");
        let mut child = Command::new(bin())
            .arg("serve")
            .args(extra)
            .env(MARK, &mark)
            .env_remove("SHELLWARD_CONFIG")
            .env_remove("SHELLWARD_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start shellward serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("shellward: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Server { child, base, mark }
    }

    /// Stops the server with SIGTERM and proves nothing it started survives.
    fn stop(mut self) {
        cli::signal(&self.child, Signal::SIGTERM);
        let status = wait_exit(&mut self.child, Duration::from_secs(30));
        let left = survivors(&self.mark);
        kill_marked(&self.mark);
        assert!(status.success(), "serve exited with {status}");
        assert!(left.is_empty(), "survivors after shutdown: {left:?}");
    }
}

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
    assert_eq!(tools["tools"].as_array().unwrap().len(), 4);

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
    for field in [
        "command",
        "workdir",
        "exit_code",
        "started_at_unix",
        "exited_at_unix",
    ] {
        assert!(procs[0].get(field).is_some(), "{field} missing: {r}");
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

    // wait=true returns once the process has exited, with its exit code.
    let (_, r) = post(
        &b,
        "/api/v0/processes/start",
        None,
        json!({"command": "sleep 0.5; echo done; exit 3", "background": true}),
    );
    let id = r["id"].as_str().unwrap().to_string();
    let (status, r) = get(
        &b,
        &format!("/api/v0/processes/{id}/output?wait=true"),
        None,
    );
    assert_eq!(status, 200);
    assert_eq!(r["running"], false, "{r}");
    assert_eq!(r["exit_code"], 3, "{r}");
    assert_eq!(r["output"], "done\n");
    assert_eq!(r["truncated"], false);

    // A foreground start runs to completion and is listed too.
    let (status, r) = post(
        &b,
        "/api/v0/processes/start",
        None,
        json!({"command": "echo fg"}),
    );
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["exit_code"], 0);
    let (_, r) = get(&b, "/api/v0/processes/list", None);
    assert!(
        r["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["background"] == false),
        "{r}"
    );

    server.stop();
}

/// Bad input to every route and tool gets a clear error with the right status, and the server keeps answering.
#[test]
fn bad_input_gets_clear_errors_and_the_server_keeps_answering() {
    let server = Server::start(&["--listen", "127.0.0.1:0"]);
    let b = server.base.clone();
    let huge = "y".repeat(1 << 20);
    let cases: Vec<(&str, String, u16, &str)> = vec![
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
            "empty",
        ),
        (
            "/api/v0/processes/start",
            r#"{"background": true}"#.into(),
            400,
            "command",
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
    ];
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
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let body = r#"{"command": "echo via-unix"}"#;
    write!(
        s,
        "POST /v1/tools/execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("via-unix"), "{reply}");
    server.stop();
}
