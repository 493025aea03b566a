//! What the `shellward` binary does the same on every platform, run on Linux and, cross-built, on Windows (under
//! Wine here): `run` prints a command's output and exits with its code, `policy check` refuses what the guard
//! refuses, and `serve` over TCP kills a tree at its timeout, runs background processes read by cursor and
//! signalled, and leaves nothing running when it is killed.
//!
//! Commands are named for both default shells (`sh -c`, `cmd /d /s /c`); the child a command starts is a second
//! process (`sleep` on Linux, `ping` under `cmd` on Windows).

use crate::cli::shellward;
use serde_json::{Value, json};
use std::io::BufRead;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The command for this platform's default shell.
fn cmd(unix: &str, windows: &str) -> String {
    if cfg!(windows) { windows } else { unix }.to_string()
}

/// A command that runs about `secs` seconds and starts a child process of its own doing it.
fn long_with_child(secs: u32) -> String {
    cmd(
        &format!("sleep {secs} | cat"),
        &format!("ping -n {secs} 127.0.0.1 >NUL"),
    )
}

/// A running `shellward serve` on a loopback port; killed when dropped.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start() -> Server {
        let (child, mut stdout) = crate::cli::spawn_reading(
            shellward(&["serve", "--listen", "127.0.0.1:0"]).stderr(Stdio::null()),
        );
        let base = crate::cli::announced_base(&mut stdout);
        Server { child, base }
    }

    fn post(&self, path: &str, body: Value) -> Value {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let mut response = agent
            .post(&format!("{}{path}", self.base))
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .expect("HTTP request");
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap();
        assert_eq!(status, 200, "{path}: {text}");
        serde_json::from_str(&text).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn run_prints_the_output_and_exits_with_the_code() {
    let out = shellward(&["run", "--", "echo hello"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("hello"),
        "{out:?}"
    );
    let out = shellward(&["run", "--", "exit 4"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
}

#[test]
fn policy_check_refuses_what_the_guard_refuses() {
    let out = shellward(&["policy", "check", "--", "rm -rf /"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("deny") && text.contains("guard"), "{text}");
    let out = shellward(&["policy", "check", "--", "echo fine"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn serve_kills_a_tree_at_its_timeout() {
    let server = Server::start();
    let started = Instant::now();
    let r = server.post(
        "/v1/tools/execute",
        json!({"command": long_with_child(40), "timeout": "2s", "on_timeout": "kill"}),
    );
    assert_eq!(r["timed_out"], true, "{r}");
    assert_eq!(r["running"], false, "{r}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    // Nothing of it is listed as running afterwards.
    let list = server.post("/v1/tools/process_list", json!({}));
    let running: Vec<&Value> = list["processes"]
        .as_array()
        .map(|a| a.iter().filter(|p| p["running"] == true).collect())
        .unwrap_or_default();
    assert!(running.is_empty(), "{list}");
}

#[test]
fn serve_runs_background_processes_and_signals_them() {
    let server = Server::start();
    let r = server.post(
        "/v1/tools/execute",
        json!({"command": cmd("echo started; sleep 60", "echo started & ping -n 60 127.0.0.1 >NUL"), "run_in_background": true}),
    );
    let id = r["background_process_id"]
        .as_str()
        .or(r["process_id"].as_str())
        .unwrap_or_else(|| panic!("no process id: {r}"))
        .to_string();
    assert_eq!(r["running"], true, "{r}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut cursor = 0;
    let mut seen = String::new();
    while !seen.contains("started") {
        assert!(Instant::now() < deadline, "no output: {seen:?}");
        let out = server.post(
            "/v1/tools/process_output",
            json!({"process_id": id, "cursor": cursor, "wait": "2s"}),
        );
        seen.push_str(out["output"].as_str().unwrap_or_default());
        cursor = out["cursor"].as_u64().unwrap_or(cursor);
    }
    let s = server.post(
        "/v1/tools/process_signal",
        json!({"process_id": id, "signal": "kill"}),
    );
    assert_eq!(s["running"], false, "{s}");
    let info = server.post("/v1/tools/process_list", json!({}));
    let entry = info["processes"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["process_id"] == id.as_str()))
        .cloned()
        .unwrap_or(Value::Null);
    assert_ne!(entry["running"], true, "{info}");
}

#[test]
fn nothing_outlives_a_killed_server() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("beat");
    let f = file.display().to_string();
    // A loop whose child appends to a file about every half second.
    let beat = cmd(
        &format!("while :; do echo x >> '{f}'; sleep 0.4; done"),
        &format!("for /L %i in (1,1,600) do (echo x>>\"{f}\" & ping -n 2 127.0.0.1 >NUL)"),
    );
    let mut server = Server::start();
    let r = server.post(
        "/v1/tools/execute",
        json!({"command": beat, "run_in_background": true}),
    );
    assert_eq!(r["running"], true, "{r}");
    let size = || std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(20);
    while size() < 4 {
        assert!(Instant::now() < deadline, "the loop never wrote");
        std::thread::sleep(Duration::from_millis(100));
    }
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    // Whatever was in flight lands; then nothing writes any more.
    std::thread::sleep(Duration::from_secs(2));
    let after_kill = size();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        size(),
        after_kill,
        "the command kept running after its server was killed"
    );
}

/// One JSON-RPC request over `shellward mcp`'s stdio; returns its result (other lines are skipped).
fn mcp_call(
    stdin: &mut std::process::ChildStdin,
    stdout: &mut std::io::BufReader<std::process::ChildStdout>,
    id: u64,
    method: &str,
    params: Value,
) -> Value {
    use std::io::Write;
    let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
    loop {
        let mut reply = String::new();
        assert_ne!(
            stdout.read_line(&mut reply).unwrap(),
            0,
            "the server closed its output"
        );
        let Ok(v) = serde_json::from_str::<Value>(&reply) else {
            continue;
        };
        if v["id"] == json!(id) {
            assert!(v.get("error").is_none(), "{v}");
            return v["result"].clone();
        }
    }
}

#[test]
fn mcp_over_stdio_runs_a_command() {
    use std::io::Write;
    let mut child = shellward(&["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start shellward mcp");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let init = mcp_call(
        &mut stdin,
        &mut stdout,
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "cli-portable", "version": "0"}}),
    );
    assert_eq!(init["serverInfo"]["name"], "shellward", "{init}");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    let tools = mcp_call(&mut stdin, &mut stdout, 2, "tools/list", json!({}));
    assert_eq!(tools["tools"].as_array().map(Vec::len), Some(7), "{tools}");
    let r = mcp_call(
        &mut stdin,
        &mut stdout,
        3,
        "tools/call",
        json!({"name": "execute", "arguments": {"command": "echo hello"}}),
    );
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["exit_code"], 0, "{r}");
    assert!(
        r["structuredContent"]["output"]
            .as_str()
            .unwrap_or_default()
            .contains("hello"),
        "{r}"
    );
    // End of input ends the server.
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "mcp did not exit at the end of its input"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// On Windows, `sandbox check` says what a job object gives and names each piece Windows does not have, and exits 1
/// (contained, not isolated).
#[cfg(windows)]
#[test]
fn sandbox_check_says_what_windows_has_and_lacks() {
    let out = shellward(&["sandbox", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("yes  tree containment") && text.contains("job object"),
        "{text}"
    );
    for missing in [
        "session sandbox",
        "writes confined",
        "network per command",
        "terminal (tty)",
        "unix sockets",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("no") && l.contains(missing)),
            "{missing}: {text}"
        );
    }
}
