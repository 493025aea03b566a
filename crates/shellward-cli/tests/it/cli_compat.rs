#![cfg(unix)]

//! Ordinary work through every surface: the compatibility suite's scenarios (`shellward_test_support::compat`: git,
//! Python, Node, Rust, C, tmux, gpg, ssh-agent, FIFOs, locks, shared memory, sockets, loopback servers, the shell)
//! run under plain `bash -c` and through `shellward run`, `shellward mcp` (JSON-RPC over stdio) and `shellward serve`
//! (HTTP), each in a fresh directory with the default configuration, and compared: exit status and output. As root and
//! (rerun) as a normal user. The facade's own run of the suite is `shellward`'s `compat` tests.

use crate::cli::{MARK, bin, new_mark, survivors};
use serde_json::{Value, json};
use shellward_test_support::compat::{
    SCENARIOS, Scenario, Seen, available, command, normalized, under_bash,
};
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Duration;

/// A fresh directory for one scenario, canonical (as the surfaces report it).
fn fresh() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    // A normal user's rerun writes there too.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

/// Through `shellward run --workdir DIR -- COMMAND`.
fn under_run(s: &Scenario, mark: &str) -> Seen {
    let (_dir, path) = fresh();
    let out = crate::cli::shellward(&["run", "--timeout", "2m", "--workdir"])
        .arg(&path)
        .arg("--")
        .arg(command(s))
        .env(MARK, mark)
        .env_remove("SHELLWARD_CONFIG")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    Seen {
        exit: out.status.code(),
        output: normalized(&String::from_utf8_lossy(&out.stdout), &path),
    }
}

/// What an execute result says, from its JSON (`exit_code`, `output`).
fn seen_in(result: &Value, path: &Path) -> Seen {
    Seen {
        exit: result["exit_code"].as_i64().map(|c| c as i32),
        output: normalized(result["output"].as_str().unwrap_or_default(), path),
    }
}

/// A `shellward mcp` on stdio, initialized; requests answered in order.
struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    id: u64,
}

impl Mcp {
    fn start(mark: &str) -> Mcp {
        let mut command = std::process::Command::new(bin());
        command.arg("mcp").env(MARK, mark);
        let (child, stdin, stdout) = crate::cli::start_stdio(command);
        let mut mcp = Mcp {
            child,
            stdin,
            stdout,
            id: 0,
        };
        let init = mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "compat", "version": "0"}}),
        );
        assert!(init["result"].is_object(), "{init}");
        mcp.line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn line(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and returns its answer (notifications before it are skipped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let id = self.id;
        self.line(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut text = String::new();
            assert!(
                self.stdout.read_line(&mut text).unwrap() > 0,
                "the MCP server exited"
            );
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    fn execute(&mut self, s: &Scenario) -> Seen {
        let (_dir, path) = fresh();
        let r = self.request(
            "tools/call",
            json!({"name": "execute", "arguments": {"command": command(s), "workdir": path, "timeout": "2m"}}),
        );
        seen_in(&r["result"]["structuredContent"], &path)
    }

    fn stop(mut self) {
        drop(self.stdin);
        let status = crate::cli::wait_exit(&mut self.child, Duration::from_secs(20));
        assert!(status.success(), "mcp exited with {status}");
    }
}

/// Through `POST /v1/tools/execute` of a `shellward serve`.
fn under_http(base: &str, s: &Scenario) -> Seen {
    let (_dir, path) = fresh();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(180)))
        .build()
        .into();
    let body = json!({"command": command(s), "workdir": path, "timeout": "2m"}).to_string();
    let mut response = agent
        .post(&format!("{base}/v1/tools/execute"))
        .header("Content-Type", "application/json")
        .send(&body)
        .expect("HTTP request");
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let result: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    seen_in(&result, &path)
}

#[test]
fn ordinary_work_runs_as_under_bash_through_run_mcp_and_http() {
    let mark = new_mark("compat");
    let server = crate::cli::Server::start_with_env(&["--listen", "127.0.0.1:0"], &[(MARK, &mark)]);
    let mut mcp = Mcp::start(&mark);
    let surfaces = ["run", "mcp", "http"];
    let mut same = [0usize; 3];
    let (mut ran, mut skipped) = (0usize, Vec::new());
    let mut differ = Vec::new();
    // The whole suite's time under bash and through each surface (interleaved, scenario by scenario).
    let mut times = [Duration::ZERO; 4];
    for s in SCENARIOS {
        if let Some(tool) = s.needs.iter().find(|t| !available(t)) {
            skipped.push(format!("{}: no {tool} here", s.name));
            continue;
        }
        ran += 1;
        let t = std::time::Instant::now();
        let plain = under_bash(s);
        times[0] += t.elapsed();
        let mut seen = Vec::with_capacity(3);
        for i in 0..3 {
            let t = std::time::Instant::now();
            seen.push(match i {
                0 => under_run(s, &mark),
                1 => mcp.execute(s),
                _ => under_http(&server.base, s),
            });
            times[i + 1] += t.elapsed();
        }
        for (i, ours) in seen.into_iter().enumerate() {
            if ours == plain {
                same[i] += 1;
            } else {
                differ.push(format!(
                    "{} via {}:\n  bash:      {plain:?}\n  shellward: {ours:?}",
                    s.name, surfaces[i]
                ));
            }
        }
    }
    mcp.stop();
    server.stop();
    for (i, surface) in surfaces.iter().enumerate() {
        println!(
            "{surface}: {} of {ran} scenarios identical under shellward and bash ({:.1} s through it, {:.1} s \
             under bash)",
            same[i],
            times[i + 1].as_secs_f64(),
            times[0].as_secs_f64()
        );
    }
    for d in &differ {
        println!("differs: {d}");
    }
    for s in &skipped {
        println!("skipped: {s}");
    }
    assert!(
        ran >= 40,
        "only {ran} scenarios could run here: {skipped:?}"
    );
    for (i, surface) in surfaces.iter().enumerate() {
        assert!(
            same[i] * 100 >= ran * 95,
            "{surface}: {} of {ran} identical; the differences:\n{}",
            same[i],
            differ.join("\n")
        );
    }
    assert!(survivors(&mark).is_empty(), "a scenario left processes");
}

/// [`ordinary_work_runs_as_under_bash_through_run_mcp_and_http`] as an unprivileged user.
#[test]
fn ordinary_work_runs_as_under_bash_through_every_surface_for_a_normal_user() {
    const AS_USER: &str = "SHELLWARD_TEST_CLI_COMPAT_AS_USER";
    if shellward_test_support::in_fresh_process(AS_USER) || !shellward_test_support::is_root() {
        return;
    }
    let out = shellward_test_support::rerun_as_user(
        shellward_test_support::test_path!(
            "ordinary_work_runs_as_under_bash_through_run_mcp_and_http"
        ),
        AS_USER,
    );
    println!("{out}");
}
