//! The guests' target on the toolchain a build runs on (used by `build.rs`; tested by `tests/toolchain_target.rs`).
//!
//! `rust-toolchain.toml` asks for `wasm32-wasip2`, but rustup installs a toolchain file's targets only when it
//! installs the toolchain itself: a toolchain that was already there (or a pinned name that points at an existing
//! `stable`) lacks it, and the README's build command stopped on such a fresh machine. The build now adds the target
//! the way the toolchain file would, for the toolchain it runs on; where rustup is missing or cannot add it
//! (offline), it stops with what to run.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

/// Makes sure the toolchain of `rustc` has `target`, adding it with `rustup` when it does not.
///
/// Returns `Ok(None)` when it was there (or the sysroot cannot be asked: the compiler will say what is wrong),
/// `Ok(Some(toolchain))` when it was added to that rustup toolchain, and `Err(message)` saying what to run when it
/// could not be added.
pub fn ensure(rustc: &OsStr, rustup: &OsStr, target: &str) -> Result<Option<String>, String> {
    let Ok(out) = Command::new(rustc).args(["--print", "sysroot"]).output() else {
        return Ok(None);
    };
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if sysroot.is_empty() {
        return Ok(None);
    }
    let sysroot = Path::new(&sysroot);
    let lib = sysroot.join("lib/rustlib").join(target);
    if lib.exists() {
        return Ok(None);
    }
    // A rustup toolchain lives in `…/toolchains/<name>`.
    let toolchain = sysroot
        .parent()
        .filter(|p| p.file_name().is_some_and(|n| n == "toolchains"))
        .and_then(|_| sysroot.file_name())
        .and_then(|n| n.to_str());
    let mut why = "the toolchain is not one of rustup's".to_string();
    if let Some(toolchain) = toolchain {
        match Command::new(rustup)
            .args(["target", "add", "--toolchain", toolchain, target])
            .status()
        {
            Ok(s) if s.success() && lib.exists() => return Ok(Some(toolchain.to_string())),
            Ok(s) if s.success() => {
                why = format!(
                    "`rustup target add` succeeded but {} is missing",
                    lib.display()
                )
            }
            Ok(s) => {
                why = format!("`rustup target add --toolchain {toolchain} {target}` failed ({s})")
            }
            Err(e) => why = format!("rustup cannot be run ({e})"),
        }
    }
    Err(format!(
        "the {target} target is not installed for the toolchain at {} and could not be added: {why}; run `rustup \
         target add {target}` and build again (the default policy is compiled to a WebAssembly component and \
         embedded in shellward)",
        sysroot.display()
    ))
}
