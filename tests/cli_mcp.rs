//! `shellward mcp` driven end to end by a stock MCP client: the official Python SDK (`mcp` from PyPI), run by
//! `tests/support/mcp_client.py`.
//!
//! The Python interpreter is `$SHELLWARD_TEST_PYTHON` (`.ci/run` creates a virtualenv with `mcp` installed and sets
//! it), else `python3`. When that interpreter cannot import `mcp` the test fails and says how to install it.

#[path = "support/cli.rs"]
mod cli;

use cli::{MARK, bin, kill_marked, new_mark, survivors};
use std::path::Path;
use std::process::Command;

fn python() -> String {
    std::env::var("SHELLWARD_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

#[test]
fn a_stock_mcp_client_drives_every_tool() {
    let python = python();
    let probe = Command::new(&python)
        .args(["-c", "import mcp"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}; set SHELLWARD_TEST_PYTHON"));
    assert!(
        probe.status.success(),
        "{python} cannot import the MCP SDK. Install it with `python3 -m venv target/mcp-venv && \
         target/mcp-venv/bin/pip install 'mcp>=1.9,<3'` and set SHELLWARD_TEST_PYTHON=target/mcp-venv/bin/python \
         (.ci/run does this)"
    );
    let mark = new_mark("mcp");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/support/mcp_client.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(bin())
        .env(MARK, &mark)
        .env_remove("SHELLWARD_CONFIG")
        .output()
        .expect("run the MCP client");
    let left = survivors(&mark);
    kill_marked(&mark);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("MCP-OK"),
        "MCP client failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // The client left a background process running and disconnected: the server stopped it.
    assert!(left.is_empty(), "survivors after the MCP session: {left:?}");
}
