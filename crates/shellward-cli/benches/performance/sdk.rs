//! The `sdk` rows: the MCP round trip of `execute {"command": "true"}` as agent hosts make it, through the stock
//! Python SDK (`mcp`, `ClientSession.call_tool`) and the stock TypeScript SDK (`@modelcontextprotocol/sdk`,
//! `Client.callTool`), both of which validate every structured result against the tool's output schema. Each client
//! talks to shellward and to `mcp-shell-server` at once, calls interleaved, so both servers meet the same load. The
//! clients are the scripts beside this file; the Python SDK comes with the peer's venv, the TypeScript SDK is
//! installed with npm under `target/bench-node` (a row without its toolchain says so and is skipped).

use super::{BIN, median, peer_command, percentile, samples, target_dir};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/performance");

/// The per-call times (ms) each labelled server's calls took, as the client script printed them.
fn run_client(
    mut cmd: Command,
    servers: &[(&str, Vec<String>, &str)],
) -> Result<Vec<Vec<f64>>, String> {
    cmd.arg(samples(300).to_string());
    for (label, argv, call) in servers {
        let argv = serde_json::to_string(argv).map_err(|e| e.to_string())?;
        cmd.arg(format!("{label}={argv}={call}"));
    }
    let out = cmd
        .env("ALLOW_COMMANDS", "true")
        .env_remove("SHELLWARD_CONFIG")
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(format!("the client failed: {}", last.join(" | ")));
    }
    let v: Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("client output: {e}"))?;
    servers
        .iter()
        .map(|(label, _, _)| {
            v[label]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .ok_or_else(|| format!("no times for {label}"))
        })
        .collect()
}

fn print_rows(client: &str, times: &[Vec<f64>]) {
    let (ours, peer) = (&times[0], &times[1]);
    println!(
        "{client:<10} shellward        median {:6.2} ms   p90 {:6.2} ms   (target ≤ 3 ms and below the peer)",
        median(ours),
        percentile(ours, 0.9)
    );
    println!(
        "{client:<10} mcp-shell-server median {:6.2} ms   p90 {:6.2} ms",
        median(peer),
        percentile(peer, 0.9)
    );
    println!(
        "{client:<10} ratio shellward / peer (medians): {:.2}",
        median(ours) / median(peer)
    );
}

/// `@modelcontextprotocol/sdk` under `target/bench-node`, installed with npm when missing; its `node_modules`.
fn node_sdk() -> Result<std::path::PathBuf, String> {
    let prefix = target_dir()?.join("bench-node");
    let modules = prefix.join("node_modules");
    if !modules
        .join("@modelcontextprotocol/sdk/package.json")
        .exists()
    {
        std::fs::create_dir_all(&prefix).map_err(|e| e.to_string())?;
        let ok = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg("@modelcontextprotocol/sdk@1")
            .status()
            .map_err(|e| format!("npm: {e}"))?
            .success();
        if !ok {
            return Err("npm could not install @modelcontextprotocol/sdk".into());
        }
    }
    Ok(modules)
}

pub fn through_the_sdks() {
    println!(
        "\n## MCP round trip through the stock SDKs: call_tool execute {{\"command\": \"true\"}} (structured result \
         validated by the client), interleaved with the peer"
    );
    let peer = match peer_command() {
        Ok(p) => p,
        Err(e) => return println!("peer unavailable ({e}); the SDK rows need its venv"),
    };
    let peer_exe = peer.get_program().to_string_lossy().into_owned();
    let venv_python = Path::new(&peer_exe).with_file_name("python");
    let servers = [
        (
            "shellward",
            vec![BIN.to_string(), "mcp".to_string()],
            r#"{"name": "execute", "arguments": {"command": "true"}}"#,
        ),
        (
            "peer",
            vec![peer_exe.clone()],
            r#"{"name": "shell_execute", "arguments": {"command": ["true"]}}"#,
        ),
    ];
    let mut python = Command::new(venv_python);
    python.arg(format!("{DIR}/sdk_client.py"));
    match run_client(python, &servers) {
        Ok(times) => print_rows("Python SDK", &times),
        Err(e) => println!("Python SDK: {e}"),
    }
    match node_sdk() {
        Ok(modules) => {
            let mut node = Command::new("node");
            node.arg(format!("{DIR}/sdk_client.mjs"))
                .env("NODE_PATH", modules);
            match run_client(node, &servers) {
                Ok(times) => print_rows("TS SDK", &times),
                Err(e) => println!("TS SDK: {e}"),
            }
        }
        Err(e) => println!("TS SDK: skipped ({e})"),
    }
}
