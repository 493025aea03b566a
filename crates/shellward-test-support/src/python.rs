//! The Python tools some end-to-end tests need, provisioned by the tests themselves: one virtualenv under the target
//! directory with pinned versions of the official MCP SDK and componentize-py (which builds the Python policy
//! scaffold). `cargo test --workspace` on a fresh clone needs nothing but `python3` and the package index.
//!
//! Parallel test binaries share the work through a file lock (`target/py-venv.lock`): the first one creates the
//! venv, the others wait and reuse it. A venv whose pins differ (a stamp file records them) is rebuilt.
//!
//! Overrides, absolute or relative to the workspace root: `SHELLWARD_TEST_PYTHON` (an interpreter that can import
//! `mcp`), `SHELLWARD_TEST_COMPONENTIZE_PY`.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The packages the venv holds, pinned.
pub const PINS: &[&str] = &["mcp==2.3.0", "componentize-py==0.25.1"];

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

/// The target directory (`$CARGO_TARGET_DIR`, else `target/` under the workspace root).
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => absolute(PathBuf::from(d)),
        None => workspace_root().join("target"),
    }
}

fn absolute(p: PathBuf) -> PathBuf {
    if p.is_absolute() {
        p
    } else {
        workspace_root().join(p)
    }
}

/// An override from the environment, resolved against the workspace root.
fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(|v| absolute(PathBuf::from(v)))
}

/// Holds an exclusive `flock` on a file until dropped (closing the file releases it).
pub(crate) struct Lock {
    _file: File,
}

impl Lock {
    /// Takes the lock on `path` (made when missing), waiting for it.
    pub(crate) fn take(path: &Path) -> Result<Lock, String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| format!("cannot open the lock {}: {e}", path.display()))?;
        // SAFETY: flock on a valid descriptor we own; blocks until the lock is free.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(format!(
                "cannot lock {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(Lock { _file: file })
    }
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// The message every provisioning failure carries: what is needed, and that nothing else is.
fn unreachable(detail: &str) -> String {
    format!(
        "the Python test tools could not be provisioned: python3 (with venv and pip) or the Python package index is \
         unreachable. These tests need `python3` on PATH and access to PyPI for {}; everything else is set up by the \
         tests. Details:\n{detail}",
        PINS.join(" and ")
    )
}

/// The shared virtualenv (`target/py-venv`), created with [`PINS`] when missing or stale.
pub fn venv() -> Result<PathBuf, String> {
    let target = target_dir();
    let venv = target.join("py-venv");
    let _lock = Lock::take(&target.join("py-venv.lock"))?;
    let stamp = venv.join(".shellward-pins");
    let want = PINS.join("\n");
    let python = venv.join("bin/python");
    if python.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == want) {
        return Ok(venv);
    }
    let _ = std::fs::remove_dir_all(&venv);
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    )
    .map_err(|e| unreachable(&e))?;
    run(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(PINS),
        "pip install",
    )
    .map_err(|e| unreachable(&e))?;
    std::fs::write(&stamp, want).map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    Ok(venv)
}

/// A Python interpreter that can import the MCP SDK.
pub fn python() -> Result<PathBuf, String> {
    match env_path("SHELLWARD_TEST_PYTHON") {
        Some(p) => Ok(p),
        None => Ok(venv()?.join("bin/python")),
    }
}

/// The componentize-py command.
pub fn componentize_py() -> Result<PathBuf, String> {
    match env_path("SHELLWARD_TEST_COMPONENTIZE_PY") {
        Some(p) => Ok(p),
        None => Ok(venv()?.join("bin/componentize-py")),
    }
}
