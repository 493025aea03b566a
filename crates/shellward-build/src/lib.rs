//! What shellward's build scripts share. Two of them run a nested `cargo build`: `shellward-policy` builds the guest
//! policies for `wasm32-wasip2`, and `shellward-exec` builds the static namespace init. Both need the same three
//! things, which live here once:
//!
//! - [`nested_cargo`]: a `cargo` command that does not inherit the outer build's flags and wrappers (clippy,
//!   coverage, host `RUSTFLAGS`), which are not meant for the nested build;
//! - [`nested_target_dir`]: where the nested build puts its files, a directory of its own so the outer build is not
//!   blocked on its lock;
//! - [`failure_tail`]: the end of a failed build's error output, for a message that fits one line.
//!
//! No dependencies: build scripts compile it before anything else.

#![deny(missing_docs)]

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Variables of the outer build that a nested build must not see: they hold the outer build's target directory,
/// target, flags and wrappers (clippy and coverage set some of them).
pub const OUTER_BUILD_VARIABLES: &[&str] = &[
    "RUSTFLAGS",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_WRAPPER",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_PRIMARY_PACKAGE",
    "__CARGO_FIX_PLZ",
];

/// The cargo running this build script (`$CARGO`), else `cargo` from `PATH`.
pub fn cargo() -> OsString {
    env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// A `cargo build` command run from `dir`, with [`OUTER_BUILD_VARIABLES`] removed. The caller adds what to build and
/// where ([`nested_target_dir`]); flags meant for the nested build go in `CARGO_ENCODED_RUSTFLAGS`, set after this.
pub fn nested_cargo(dir: &Path) -> Command {
    let mut cmd = Command::new(cargo());
    cmd.current_dir(dir).arg("build");
    for var in OUTER_BUILD_VARIABLES {
        cmd.env_remove(var);
    }
    cmd
}

/// The target directory of a nested build named `name`:
/// - `$<override_var>` when set (the build script also prints `rerun-if-env-changed` for it);
/// - in a workspace checkout (`workspace_root` has a `Cargo.toml`), `<outer target directory>/<name>`, shared across
///   profiles and rebuilds: `$CARGO_TARGET_DIR` or `<workspace_root>/target`;
/// - otherwise (a registry build) `None`: the caller picks a place under `OUT_DIR`.
pub fn nested_target_dir(override_var: &str, workspace_root: &Path, name: &str) -> Option<PathBuf> {
    if let Some(dir) = env::var_os(override_var) {
        return Some(PathBuf::from(dir));
    }
    workspace_root.join("Cargo.toml").is_file().then(|| {
        env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root.join("target"))
            .join(name)
    })
}

/// The last `lines` lines of a finished build's standard error, joined with ` | `: the part that says what failed.
pub fn failure_tail(output: &Output, lines: usize) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let all: Vec<&str> = stderr.lines().collect();
    all[all.len().saturating_sub(lines)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_cargo_does_not_inherit_the_outer_builds_flags() {
        let cmd = nested_cargo(Path::new("."));
        let removed: Vec<_> = cmd
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        for var in ["RUSTFLAGS", "RUSTC_WORKSPACE_WRAPPER", "CARGO_TARGET_DIR"] {
            assert!(removed.iter().any(|r| r == var), "{var} kept: {removed:?}");
        }
        assert_eq!(cmd.get_args().next().unwrap(), "build");
    }

    #[test]
    fn a_nested_target_dir_is_beside_the_outer_one_only_in_a_workspace() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("Cargo.toml"), "[workspace]\n").unwrap();
        let var = "SHELLWARD_BUILD_TEST_UNSET_VARIABLE";
        let got = nested_target_dir(var, ws.path(), "guests").unwrap();
        assert!(got.ends_with("guests"), "{}", got.display());
        let registry = tempfile::tempdir().unwrap();
        assert_eq!(nested_target_dir(var, registry.path(), "guests"), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_failure_tail_keeps_the_last_lines() {
        use std::os::unix::process::ExitStatusExt;
        let output = Output {
            status: std::process::ExitStatus::from_raw(256),
            stdout: Vec::new(),
            stderr: b"one\ntwo\nthree\n".to_vec(),
        };
        assert_eq!(failure_tail(&output, 2), "two | three");
        assert_eq!(failure_tail(&output, 9), "one | two | three");
    }
}
