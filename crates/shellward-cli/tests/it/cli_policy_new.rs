//! `shellward policy new`: a scaffolded policy builds with its language's own tooling and passes its own case file.
//!
//! The Rust scaffold is built with cargo for wasm32-wasip2 (target dir `target/scaffold-test`, reused across runs).
//! The Python scaffold needs componentize-py, provisioned by `shellward_test_support::python` (the tests' pinned venv;
//! `$SHELLWARD_TEST_COMPONENTIZE_PY` overrides it).

// Unix only: these tests drive the binary on Linux (signals, `/proc`, unix sockets, sandboxes); `cli_portable.rs`
// holds what every platform shares.
#![cfg(unix)]

use crate::cli::{root, text};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn new_policy(parent: &Path, name: &str, lang: &str) -> PathBuf {
    let o = Command::new(crate::cli::bin())
        .args(["policy", "new", name, "--lang", lang])
        .current_dir(parent)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    parent.join(name)
}

/// `cargo build --target wasm32-wasip2 --release` of a scaffold, into a shared target directory.
fn cargo_build_wasm(dir: &Path, target: &Path) -> Output {
    Command::new(env!("CARGO"))
        .args(["build", "--target", "wasm32-wasip2", "--release"])
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .current_dir(dir)
        .output()
        .unwrap()
}

fn policy_test(dir: &Path, wasm: &str) -> Output {
    Command::new(crate::cli::bin())
        .args(["policy", "test", wasm])
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn a_rust_scaffold_builds_and_passes_its_cases() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = new_policy(tmp.path(), "no-telnet", "rust");
    for f in [
        "Cargo.toml",
        "src/lib.rs",
        "wit/policy.wit",
        "cases.toml",
        "README.md",
        "shellward-kit/Cargo.toml",
        "shellward-kit/src/effective.rs",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    // The scaffold reads commands with the kit, not word by word: the wrapper and nested-shell cases are its own.
    let cases = std::fs::read_to_string(dir.join("cases.toml")).unwrap();
    assert!(cases.contains("sudo -u deploy timeout 5 telnet"), "{cases}");
    let target = root().join("target/scaffold-test");
    let build = cargo_build_wasm(&dir, &target);
    assert!(
        build.status.success(),
        "cargo build failed:\n{}",
        text(&build)
    );
    let wasm = target.join("wasm32-wasip2/release/no_telnet.wasm");
    // The case file is found next to the project, not next to the shared target dir: give it explicitly.
    let o = Command::new(crate::cli::bin())
        .args(["policy", "test", wasm.to_str().unwrap(), "cases.toml"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("9 passed, 0 failed"),
        "{}",
        text(&o)
    );

    // The scaffold's install snippet, as written, keeps the built-in chain: the guard still denies `sudo reboot`,
    // the new policy denies telnet, and an ordinary command runs.
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    // It names the contract its wit/policy.wit is a copy of: the current one.
    assert!(
        readme.contains(&format!(
            "shellward:policy@{}",
            shellward_policy::WIT_VERSION
        )),
        "{readme}"
    );
    let snippet = readme
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the scaffold README's install snippet");
    let config = crate::cli::write_file(
        &dir,
        "shellward.toml",
        snippet.replace(
            &*dir.join("target").to_string_lossy(),
            &target.to_string_lossy(),
        ),
    );
    let run = |command: &str| {
        Command::new(crate::cli::bin())
            .args(["run", "--config", config.to_str().unwrap(), "--", command])
            .env_remove("SHELLWARD_CONFIG")
            .output()
            .unwrap()
    };
    for (command, code) in [
        ("sudo reboot", 126),
        ("telnet example.com", 126),
        ("true", 0),
    ] {
        let o = run(command);
        assert_eq!(
            o.status.code(),
            Some(code),
            "{command}: {}\n{snippet}",
            text(&o)
        );
    }

    // The authoring guide's component glue (a pass-through policy) builds as written and runs requests unchanged.
    let guide = std::fs::read_to_string(root().join("policies/README.md")).unwrap();
    let glue = guide
        .split("```rust,ignore\n")
        .skip(1)
        .filter_map(|rest| rest.split("\n```").next())
        .find(|block| block.contains("export!(Policy);"))
        .expect("the guide's ```rust,ignore glue block");
    assert!(glue.contains("export!(Policy);"), "{glue}");
    std::fs::write(dir.join("src/lib.rs"), glue).unwrap();
    std::fs::write(
        dir.join("pass.toml"),
        "[[case]]\nname = \"runs unchanged\"\ncommand = \"telnet x\"\nexpect = { decision = \"run\", command = \"telnet x\", no_notes = true }\n",
    )
    .unwrap();
    let build = cargo_build_wasm(&dir, &target);
    assert!(
        build.status.success(),
        "the guide's glue does not build:\n{}",
        text(&build)
    );
    let o = Command::new(crate::cli::bin())
        .args(["policy", "test", wasm.to_str().unwrap(), "pass.toml"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_python_scaffold_builds_and_passes_its_cases() {
    let tool = shellward_test_support::python::componentize_py().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        tool.is_file(),
        "componentize-py not found at {} (SHELLWARD_TEST_COMPONENTIZE_PY names a file that does not exist)",
        tool.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = new_policy(tmp.path(), "no-ftp", "python");
    let build = Command::new(dir.join("build.sh"))
        .env("COMPONENTIZE_PY", &tool)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(build.status.success(), "build.sh failed:\n{}", text(&build));
    // The case file is discovered next to target/no-ftp.wasm's project. It holds the reader cases too (wrappers,
    // assignments, lists, nested shells, quoted words): the Python scaffold reads commands as the Rust one does.
    let cases = std::fs::read_to_string(dir.join("cases.toml")).unwrap();
    assert!(cases.contains("sudo -u deploy timeout 5 telnet"), "{cases}");
    assert!(dir.join("shellward_reader.py").is_file());
    let o = policy_test(&dir, "target/no-ftp.wasm");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("9 passed, 0 failed"),
        "{}",
        text(&o)
    );
}

#[test]
fn bad_names_and_existing_directories_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["Bad_Name", "1x", "../escape"] {
        let o = Command::new(crate::cli::bin())
            .args(["policy", "new", name])
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert!(!o.status.success(), "{name}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("invalid policy name"),
            "{}",
            text(&o)
        );
    }
    std::fs::create_dir(tmp.path().join("taken")).unwrap();
    std::fs::write(tmp.path().join("taken/file"), "x").unwrap();
    let o = Command::new(crate::cli::bin())
        .args(["policy", "new", "taken"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not empty"),
        "{}",
        text(&o)
    );
}
