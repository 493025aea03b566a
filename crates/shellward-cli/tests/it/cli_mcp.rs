//! `shellward mcp` driven end to end by a stock MCP client: the official Python SDK (`mcp` from PyPI), run by
//! `tests/support/mcp_client.py`; and by raw JSON-RPC lines.
//!
//! The interpreter comes from `shellward_test_support::python` (a pinned venv under the target directory, created on
//! first use; `$SHELLWARD_TEST_PYTHON` overrides it).

// Unix only: these tests drive the binary on Linux (signals, `/proc`, unix sockets, sandboxes); `cli_portable.rs`
// holds what every platform shares.
#![cfg(unix)]

use crate::cli::{MARK, bin, kill_marked, new_mark, survivors};
use std::path::Path;
use std::process::Command;

mod tasks;

/// Runs one of the stock-client scripts in `tests/support/` against the binary; it must print `ok_marker`, and
/// nothing the session started may survive it (the client disconnects with processes running: the server stops them).
fn run_stock_client(script: &str, ok_marker: &str) {
    let python = shellward_test_support::python::python().unwrap_or_else(|e| panic!("{e}"));
    let probe = Command::new(&python)
        .args(["-c", "import mcp"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    assert!(
        probe.status.success(),
        "{} cannot import the MCP SDK; unset SHELLWARD_TEST_PYTHON to let the test provision it",
        python.display()
    );
    let mark = new_mark("mcp");
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/support")
        .join(script);
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(&python)
        .arg(&script)
        .arg(bin())
        .env(MARK, &mark)
        .env("TMPDIR", tmp.path())
        .env_remove("SHELLWARD_CONFIG")
        .output()
        .expect("run the MCP client");
    let left = survivors(&mark);
    kill_marked(&mark);
    assert_scripts_cleaned_up(tmp.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(ok_marker),
        "MCP client failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(left.is_empty(), "survivors after the MCP session: {left:?}");
}

/// A client script's own scratch directories (`shellward-approvals-…`, `shellward-ts-…`) are gone once it exits:
/// the tests leave nothing in the temporary directory.
fn assert_scripts_cleaned_up(tmp: &Path) {
    for prefix in ["shellward-approvals-", "shellward-ts-"] {
        let left = shellward_test_support::entries_with_prefix(tmp, prefix);
        assert!(
            left.is_empty(),
            "a client script left {left:?} in {}",
            tmp.display()
        );
    }
}

#[test]
fn a_stock_mcp_client_drives_every_tool() {
    run_stock_client("mcp_client.py", "MCP-OK");
}

/// A policy's ask through the stock client's elicitation callback: approve runs, decline/cancel/deny run nothing,
/// remembered approvals are not asked again, and a client without elicitation gets a deny with a reason.
#[test]
fn a_stock_mcp_client_approves_and_declines_through_elicitation() {
    run_stock_client("mcp_approvals.py", "MCP-APPROVALS-OK");
}

/// Runs one of the TypeScript client scripts in `tests/support/` (the SDK's client provisioned with npm by
/// `shellward_test_support::node`); it must print `ok_marker`, and nothing the session started may survive it.
fn run_node_client(script: &str, ok_marker: &str) {
    let modules = shellward_test_support::node::node_modules().unwrap_or_else(|e| panic!("{e}"));
    let mark = new_mark("mcp-ts");
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/support")
        .join(script);
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new("node")
        .arg(&script)
        .arg(bin())
        .env("NODE_PATH", &modules)
        .env(MARK, &mark)
        .env("TMPDIR", tmp.path())
        .env_remove("SHELLWARD_CONFIG")
        .output()
        .expect("run node");
    let left = survivors(&mark);
    kill_marked(&mark);
    assert_scripts_cleaned_up(tmp.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(ok_marker),
        "TypeScript client failed:\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(left.is_empty(), "survivors after the session: {left:?}");
}

/// Progress and cancel through the TypeScript SDK's client: `onprogress` hears a running command, an aborted call's
/// tree is gone within the grace period (polled with `process_list` while the server still runs) and its command
/// never reaches its end, and the next call is served at once.
#[test]
fn the_typescript_client_gets_progress_and_cancels() {
    run_node_client("mcp_control.mjs", "MCP-TS-CONTROL-OK");
}

/// The same through the TypeScript SDK's client (`@modelcontextprotocol/client` 2.x): approve runs, decline runs
/// nothing, no elicitation is a deny with its reason.
#[test]
fn the_typescript_client_approves_and_declines_through_elicitation() {
    run_node_client("mcp_approvals.mjs", "MCP-TS-APPROVALS-OK");
}

/// Interactive processes through the same stock client: a Python REPL on a pipe and on a terminal, a `read -p`
/// prompt, `tty -s`, Ctrl-C to a shell's job, end of input to `cat`, a writer that a non-reader cannot block.
#[test]
fn a_stock_mcp_client_talks_to_interactive_processes() {
    run_stock_client("mcp_interactive.py", "MCP-INTERACTIVE-OK");
}

/// `shellward mcp` spoken to line by line as a raw JSON-RPC client: the processes it starts carry `mark` (the server
/// too), and its replies are read on a thread of their own, so a test waits for one with a limit.
struct Raw {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    replies: std::sync::mpsc::Receiver<String>,
    mark: String,
}

impl Raw {
    fn start(tag: &str) -> Raw {
        Raw::start_with(tag, &[])
    }

    /// [`Raw::start`] with more arguments for `shellward mcp` (`--workdir DIR`).
    fn start_with(tag: &str, args: &[&str]) -> Raw {
        use std::io::BufRead;
        let mark = new_mark(tag);
        let mut command = Command::new(bin());
        command.arg("mcp").args(args).env(MARK, &mark);
        let (child, stdin, stdout) = crate::cli::start_stdio(command);
        let (tx, replies) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Raw {
            child,
            stdin: Some(stdin),
            replies,
            mark,
        }
    }

    /// Writes one message line.
    fn send(&mut self, line: impl AsRef<[u8]>) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(line.as_ref()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line the server writes, parsed (20 s at most).
    fn reply(&self) -> serde_json::Value {
        let line = self
            .replies
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the server answers");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// The 2025-06-18 handshake.
    fn initialize(&mut self) {
        self.send(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
        );
        assert!(self.reply()["result"].is_object());
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }

    /// The living processes its commands started (the server itself carries the mark too).
    fn commands(&self) -> Vec<i32> {
        let server = self.child.id() as i32;
        crate::cli::survivors_now(&self.mark)
            .into_iter()
            .filter(|p| *p != server)
            .collect()
    }

    /// Closes stdin (the client goes away) and waits for the server to exit.
    fn close(&mut self) -> std::process::ExitStatus {
        self.stdin = None;
        crate::cli::wait_exit(&mut self.child, std::time::Duration::from_secs(10))
    }
}

/// Raw JSON-RPC over the server's stdio: each malformed message gets the error the JSON-RPC specification asks for
/// (the client is never left waiting), the session goes on afterwards, and SIGTERM ends the server promptly even
/// while the client keeps stdin open.
#[test]
fn malformed_messages_are_answered_and_sigterm_exits_promptly() {
    use std::time::Duration;
    let mut raw = Raw::start("mcp-raw");
    raw.initialize();
    let cases: [(&[u8], i64); 4] = [
        (b"{not json", -32700),
        (b"\xff\xfe garbage", -32700),
        (b"42", -32600),
        (
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute","arguments":"ls"}}"#,
            -32602,
        ),
    ];
    for (line, code) in cases {
        raw.send(line);
        let r = raw.reply();
        assert_eq!(
            r["error"]["code"],
            code,
            "{}: {r}",
            String::from_utf8_lossy(line)
        );
    }
    // A 17 MiB line is refused; the session goes on.
    raw.send(vec![b'x'; 17 << 20]);
    assert_eq!(raw.reply()["error"]["code"], -32600);
    raw.send(br#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#);
    let r = raw.reply();
    assert_eq!(r["id"], 9);
    assert_eq!(r["result"]["tools"].as_array().map(Vec::len), Some(7));
    // A finished command, then idle: the server sleeps (no deadline ticker, no reaper polling).
    raw.send(
        br#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"execute","arguments":{"command":"echo hi"}}}"#,
    );
    assert_eq!(raw.reply()["id"], 11);
    let wakeups = crate::cli::idle_wakeups(
        raw.child.id(),
        Duration::from_millis(1500),
        Duration::from_secs(3),
    );
    println!("idle shellward mcp: {wakeups} context switches in 3 s");
    assert!(
        wakeups <= 6,
        "an idle MCP server woke {wakeups} times in 3 s"
    );
    // A background process, then SIGTERM with stdin still open: the server exits and stops it.
    raw.send(
        br#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"execute","arguments":{"command":"sleep 300","run_in_background":true}}}"#,
    );
    assert_eq!(raw.reply()["id"], 10);
    crate::cli::signal(&raw.child, crate::cli::Signal::SIGTERM);
    let started = std::time::Instant::now();
    let status = crate::cli::wait_exit(&mut raw.child, Duration::from_secs(10));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "exit took {:?}",
        started.elapsed()
    );
    raw.stdin = None;
    let left = survivors(&raw.mark);
    kill_marked(&raw.mark);
    assert!(status.success(), "{status}");
    assert!(left.is_empty(), "survivors: {left:?}");
}

/// `notifications/cancelled` for a running foreground `execute` (what a client sends when its user presses Esc):
/// the command's whole tree is gone within the grace period and a second, the cancelled request gets no answer, the
/// next call is answered at once, and `process_list` shows nothing left running.
#[test]
fn a_cancelled_call_stops_its_command_and_gets_no_answer() {
    use std::time::{Duration, Instant};
    let mut raw = Raw::start("mcp-cancel");
    raw.initialize();
    raw.send(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"sleep 300 | sleep 301","timeout":"10m","on_timeout":"kill"}}}"#,
    );
    let started = Instant::now();
    while raw.commands().len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the command never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let cancelled_at = Instant::now();
    raw.send(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"the user pressed Esc"}}"#,
    );
    // The connection serves the next call at once; the first answer is this one's, not the cancelled call's.
    raw.send(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute","arguments":{"command":"echo next"}}}"#,
    );
    let next = raw.reply();
    assert_eq!(next["id"], 3, "{next}");
    assert!(
        next["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("next"),
        "{next}"
    );
    // Gone within the grace period (5 s by default) and a second.
    while !raw.commands().is_empty() && cancelled_at.elapsed() < Duration::from_secs(6) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        raw.commands().is_empty(),
        "still alive after cancel: {:?}",
        raw.commands()
    );
    // Without a progress token, a command running for seconds sends no progress: the next line is the result.
    raw.send(
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"execute","arguments":{"command":"echo a; sleep 2.2; echo b"}}}"#,
    );
    let quiet = raw.reply();
    assert_eq!(quiet["id"], 5, "{quiet}");
    raw.send(
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"process_list","arguments":{}}}"#,
    );
    let list = raw.reply();
    assert_eq!(list["id"], 4, "{list}");
    let processes = &list["result"]["structuredContent"]["processes"];
    assert!(
        processes
            .as_array()
            .is_none_or(|p| p.iter().all(|p| p["running"] != true)),
        "{list}"
    );
    let status = raw.close();
    assert!(status.success(), "{status}");
    // Nothing more was written: no answer to the cancelled call, ever.
    let rest: Vec<String> = raw.replies.try_iter().collect();
    assert!(
        rest.iter().all(|l| !l.contains(r#""id":2"#)),
        "the cancelled call was answered: {rest:?}"
    );
    kill_marked(&raw.mark);
}

/// `shellward mcp` started by hand on a terminal says what it is and how to connect a client (on stderr: stdout is
/// the protocol's), instead of waiting in silence; the end of its input still ends it.
#[test]
fn mcp_on_a_terminal_says_how_to_connect_a_client() {
    use std::io::{Read, Write};
    let mut child = std::process::Command::new("script")
        .args(["-qec", &format!("{} mcp", crate::cli::bin()), "/dev/null"])
        .env_remove("SHELLWARD_CONFIG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("script(1)");
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let mut buf = [0u8; 4096];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => text.extend_from_slice(&buf[..n]),
            }
            if String::from_utf8_lossy(&text).contains("--client-config") {
                break;
            }
        }
        String::from_utf8_lossy(&text).into_owned()
    });
    let text = reader.join().unwrap();
    // Ctrl-D at the terminal: the end of its input.
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(b"\x04");
    drop(stdin);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("shellward mcp did not end with its input: {text}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        text.contains("an MCP server on standard input and output"),
        "{text}"
    );
    assert!(
        text.contains("shellward mcp --client-config claude-code"),
        "{text}"
    );
}

/// A client that declares roots gets its commands run in its first root (a `file://` URI, percent-escapes decoded)
/// from the first call on, and in the new first root after `notifications/roots/list_changed`; `--workdir` names the
/// directory instead (and then roots are not asked for); a `--workdir` that does not exist is refused at start.
#[test]
fn commands_run_in_the_clients_first_root_or_in_workdir() {
    use std::io::{BufRead, Write};
    let base = tempfile::tempdir().unwrap();
    let base = base.path().canonicalize().unwrap();
    let (first, second) = (base.join("first root"), base.join("second"));
    std::fs::create_dir_all(&first).unwrap();
    std::fs::create_dir_all(&second).unwrap();
    let uri = |p: &Path| format!("file://{}", p.display().to_string().replace(' ', "%20"));
    let start = |extra: &[&str]| {
        let mut command = Command::new(bin());
        command.arg("mcp").args(extra);
        let (child, stdin, stdout) = crate::cli::start_stdio(command);
        (child, stdin, stdout)
    };
    let read = |stdout: &mut std::io::BufReader<std::process::ChildStdout>| -> serde_json::Value {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    };
    let send = |stdin: &mut std::process::ChildStdin, v: serde_json::Value| {
        stdin.write_all(format!("{v}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    let init = |roots: bool| {
        let capabilities = if roots {
            serde_json::json!({"roots": {"listChanged": true}})
        } else {
            serde_json::json!({})
        };
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": capabilities,
            "clientInfo": {"name": "raw", "version": "0"}}})
    };
    let pwd = |id: u64| {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"command": "pwd"}}})
    };
    // Answers the server's roots/list with `dir` (its requests can come before the reply to a call).
    let answer_roots = |stdin: &mut std::process::ChildStdin,
                        stdout: &mut std::io::BufReader<std::process::ChildStdout>,
                        dir: &Path| {
        let request = read(stdout);
        assert_eq!(request["method"], "roots/list", "{request}");
        send(
            stdin,
            serde_json::json!({"jsonrpc": "2.0", "id": request["id"],
                "result": {"roots": [{"uri": uri(dir), "name": "project"}, {"uri": "https://example.invalid/x"}]}}),
        );
    };
    let output_of = |reply: &serde_json::Value| {
        reply["result"]["structuredContent"]["output"]
            .as_str()
            .unwrap_or_else(|| panic!("{reply}"))
            .to_string()
    };

    let (mut child, mut stdin, mut stdout) = start(&[]);
    send(&mut stdin, init(true));
    assert!(read(&mut stdout)["result"].is_object());
    send(
        &mut stdin,
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    answer_roots(&mut stdin, &mut stdout, &first);
    send(&mut stdin, pwd(2));
    assert_eq!(
        output_of(&read(&mut stdout)),
        format!("{}\n", first.display())
    );
    send(
        &mut stdin,
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}),
    );
    answer_roots(&mut stdin, &mut stdout, &second);
    send(&mut stdin, pwd(3));
    assert_eq!(
        output_of(&read(&mut stdout)),
        format!("{}\n", second.display())
    );
    drop(stdin);
    crate::cli::wait_exit(&mut child, std::time::Duration::from_secs(10));

    // --workdir wins over roots: none are asked for.
    let workdir = second.display().to_string();
    let (mut child, mut stdin, mut stdout) = start(&["--workdir", &workdir]);
    send(&mut stdin, init(true));
    assert!(read(&mut stdout)["result"].is_object());
    send(
        &mut stdin,
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    send(&mut stdin, pwd(2));
    let reply = read(&mut stdout);
    assert_eq!(reply["id"], 2, "the server asked something first: {reply}");
    assert_eq!(output_of(&reply), format!("{}\n", second.display()));
    drop(stdin);
    crate::cli::wait_exit(&mut child, std::time::Duration::from_secs(10));

    let o = crate::cli::output(&["mcp", "--workdir", "/nonexistent/project"]);
    assert!(!o.status.success());
    assert!(
        crate::cli::stderr(&o).contains("--workdir /nonexistent/project"),
        "{}",
        crate::cli::stderr(&o)
    );
}

/// `--client-config` for the editors: VS Code's `servers` (with `"type": "stdio"`), Zed's `context_servers`,
/// Windsurf's `mcpServers`; each names this binary by its absolute path and runs `mcp`, and says where it goes.
#[test]
fn the_editor_snippets_have_each_editors_shape() {
    let real = std::fs::canonicalize(bin()).unwrap().display().to_string();
    for (client, key) in [
        ("vscode", "servers"),
        ("zed", "context_servers"),
        ("windsurf", "mcpServers"),
    ] {
        let o = crate::cli::output(&["mcp", "--client-config", client]);
        assert!(o.status.success(), "{client}: {}", crate::cli::stderr(&o));
        let v: serde_json::Value = serde_json::from_str(crate::cli::stdout(&o).trim())
            .unwrap_or_else(|e| panic!("{client}: {e}"));
        let server = &v[key]["shellward"];
        assert_eq!(server["command"], real.as_str(), "{client}: {v}");
        assert_eq!(server["args"], serde_json::json!(["mcp"]), "{client}: {v}");
        if client == "vscode" {
            assert_eq!(server["type"], "stdio", "{v}");
        }
        assert!(
            !crate::cli::stderr(&o).trim().is_empty(),
            "{client}: where it goes"
        );
    }
}

/// The undo tools over MCP: a command's deletion and creation are listed by `changes_list` and taken back by
/// `changes_undo` byte for byte; a second undo is an error result naming why.
#[cfg(target_os = "linux")]
#[test]
fn changes_are_listed_and_undone_over_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(ws.join("a.txt"), "keep me\n").unwrap();
    let mut raw = Raw::start_with("mcp-undo", &["--workdir", ws.to_str().unwrap()]);
    raw.initialize();
    raw.send(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"rm a.txt && echo b > b.txt"}}}"#,
    );
    let r = raw.reply();
    assert_eq!(r["result"]["structuredContent"]["exit_code"], 0, "{r}");
    let id = r["result"]["structuredContent"]["process_id"].clone();
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"changes_list","arguments":{}}}"#);
    let r = raw.reply();
    let listed = &r["result"]["structuredContent"]["commands"];
    assert_eq!(listed[0]["process_id"], id, "{r}");
    assert_eq!(
        listed[0]["changes"],
        serde_json::json!([
            {"path": "a.txt", "kind": "deleted", "entry": "file", "size_before": 8},
            {"path": "b.txt", "kind": "created", "entry": "file", "size_after": 2},
        ]),
        "{r}"
    );
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("deleted 1 path (a.txt)"), "{text}");
    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"changes_undo","arguments":{}}}"#);
    let r = raw.reply();
    assert_eq!(
        r["result"]["structuredContent"]["restored"],
        serde_json::json!(["a.txt"]),
        "{r}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "keep me\n"
    );
    assert!(!ws.join("b.txt").exists());
    raw.send(
        format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"changes_undo","arguments":{{"process_id":{id}}}}}}}"#
        ),
    );
    let r = raw.reply();
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("already undone"), "{text}");
    assert!(raw.close().success());
    assert!(survivors(&raw.mark).is_empty());
}

/// `mcp --control unix:PATH` answers the operator's views of a stdio instance: `shellward ps` lists what its session
/// runs and `shellward approvals list` what waits, over the socket; its commands cannot reach the socket; the socket is
/// gone when the instance exits; a value that is no `unix:PATH` is refused saying what to give.
#[test]
#[cfg(unix)]
fn an_mcp_instance_shows_its_processes_on_its_control_socket() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("control.sock");
    let server = format!("unix:{}", sock.display());
    let mut raw = Raw::start_with("mcp-control", &["--control", &server]);
    raw.initialize();
    raw.send(
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "execute",
            "arguments": {"command": "sleep 300 # the-listed-one", "run_in_background": true}}})
        .to_string(),
    );
    assert_eq!(raw.reply()["result"]["structuredContent"]["running"], true);
    let o = crate::cli::shellward(&["ps", "--server", &server])
        .output()
        .unwrap();
    let table = crate::cli::stdout(&o);
    assert!(o.status.success(), "{table}{}", crate::cli::stderr(&o));
    let row = table
        .lines()
        .find(|l| l.contains("the-listed-one"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.starts_with("mcp-") && row.contains("running"), "{row}");
    let o = crate::cli::shellward(&["approvals", "list", "--server", &server])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", crate::cli::stderr(&o));
    // The instance's commands cannot reach it (the socket is covered in their sandbox).
    raw.send(
        serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "execute",
            "arguments": {"command": format!("python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); \
s.connect('{}'); print('REACHED')\" 2>&1 | tail -1", sock.display())}}})
        .to_string(),
    );
    let r = raw.reply();
    let output = r["result"]["structuredContent"]["output"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        !output.contains("REACHED") && output.contains("Error"),
        "{r}"
    );
    assert!(raw.close().success());
    assert!(!sock.exists(), "the control socket is removed at exit");
    assert!(crate::cli::survivors(&raw.mark).is_empty());
    let o = crate::cli::shellward(&["mcp", "--control", "/tmp/no-scheme.sock"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    // A bad option value is a usage error.
    assert_eq!(o.status.code(), Some(2), "{}", crate::cli::stderr(&o));
    assert!(
        crate::cli::stderr(&o).contains("unix:PATH"),
        "{}",
        crate::cli::stderr(&o)
    );
}
