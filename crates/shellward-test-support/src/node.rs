//! The Node.js MCP client some end-to-end tests drive shellward with: the official TypeScript SDK's client
//! (`@modelcontextprotocol/client`, pinned), installed by the tests themselves with the machine's `npm` into one
//! directory under the target directory. Parallel test binaries share the work through a file lock
//! (`target/node-client.lock`); a directory whose pin differs is installed again.
//!
//! Override: `SHELLWARD_TEST_NODE_MODULES` (a `node_modules` directory holding the client).

use crate::python::{Lock, target_dir};
use std::path::PathBuf;
use std::process::Command;

/// The package the directory holds, pinned.
pub const PIN: &str = "@modelcontextprotocol/client@2.4.0";

/// A `node_modules` directory with the pinned TypeScript client (`NODE_PATH` for a script run with `node`).
pub fn node_modules() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("SHELLWARD_TEST_NODE_MODULES").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let target = target_dir();
    let dir = target.join("node-client");
    let _lock = Lock::take(&target.join("node-client.lock"))?;
    let stamp = dir.join(".shellward-pin");
    let modules = dir.join("node_modules");
    if modules
        .join("@modelcontextprotocol/client/package.json")
        .is_file()
        && std::fs::read_to_string(&stamp).is_ok_and(|s| s == PIN)
    {
        return Ok(modules);
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    std::fs::write(
        dir.join("package.json"),
        "{\"private\": true, \"type\": \"module\"}\n",
    )
    .map_err(|e| format!("cannot write {}: {e}", dir.display()))?;
    let out = Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            PIN,
        ])
        .current_dir(&dir)
        .output()
        .map_err(|e| unreachable(&format!("cannot run npm: {e}")))?;
    if !out.status.success() {
        return Err(unreachable(&format!(
            "npm install {PIN} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    std::fs::write(&stamp, PIN).map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    Ok(modules)
}

fn unreachable(detail: &str) -> String {
    format!(
        "the Node.js test client could not be provisioned: node and npm (Node.js 20 or later) or the npm registry is \
         unreachable. These tests need `node` and `npm` on PATH and access to the npm registry for {PIN}. \
         Details:\n{detail}"
    )
}
