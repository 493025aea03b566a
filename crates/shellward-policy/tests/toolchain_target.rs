//! The build adds the guests' target to a rustup toolchain that lacks it (`build/toolchain_target.rs`, used by
//! `build.rs`), and stops with what to run where it cannot; fake `rustc` and `rustup` programs stand in for the real
//! ones. One test: the fakes are written and then run, and no other test of this binary forks meanwhile (a write
//! descriptor inherited by a concurrent fork would make the exec fail with ETXTBSY) — which is why it is a test binary
//! of its own, beside the crate's `it`.

#[path = "../build/toolchain_target.rs"]
mod toolchain_target;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const TARGET: &str = "wasm32-wasip2";

/// Writes an executable shell script `name` with `body` into `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn a_missing_target_is_added_and_a_failure_says_what_to_run() {
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let sysroot = home.path().join("toolchains/fake-x86_64-unknown-linux-gnu");
    std::fs::create_dir_all(sysroot.join("lib/rustlib/x86_64-unknown-linux-gnu")).unwrap();
    let rustc = script(&bin, "rustc", &format!("echo {}", sysroot.display()));
    let log = home.path().join("rustup.log");
    // `rustup target add --toolchain NAME TARGET`: records its arguments, installs the target.
    let rustup = script(
        &bin,
        "rustup",
        &format!(
            "echo \"$@\" >> {log}\nmkdir -p {sysroot}/lib/rustlib/$5",
            log = log.display(),
            sysroot = sysroot.display()
        ),
    );
    let ensure = |rustc: &Path, rustup: &Path| {
        toolchain_target::ensure(rustc.as_os_str(), rustup.as_os_str(), TARGET)
    };

    // Missing: added to the very toolchain the build runs on.
    assert_eq!(
        ensure(&rustc, &rustup),
        Ok(Some("fake-x86_64-unknown-linux-gnu".to_string()))
    );
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!("target add --toolchain fake-x86_64-unknown-linux-gnu {TARGET}\n")
    );
    // There now: rustup is not run again.
    assert_eq!(ensure(&rustc, &rustup), Ok(None));
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 1);

    // rustup fails (offline): the build stops and says what to run.
    std::fs::remove_dir_all(sysroot.join("lib/rustlib").join(TARGET)).unwrap();
    let failing = script(&bin, "rustup-failing", "exit 1");
    let e = ensure(&rustc, &failing).unwrap_err();
    assert!(
        e.contains("failed") && e.contains(&format!("rustup target add {TARGET}")),
        "{e}"
    );
    // No rustup at all.
    let e = ensure(&rustc, &bin.join("no-such-rustup")).unwrap_err();
    assert!(e.contains("rustup cannot be run"), "{e}");
    // A toolchain rustup does not manage: nothing is run, and the message says so.
    let other = home.path().join("opt/rust");
    std::fs::create_dir_all(other.join("lib/rustlib")).unwrap();
    let other_rustc = script(&bin, "rustc-other", &format!("echo {}", other.display()));
    let e = ensure(&other_rustc, &rustup).unwrap_err();
    assert!(e.contains("not one of rustup's"), "{e}");
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 1);
}
