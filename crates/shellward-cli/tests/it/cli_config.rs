//! End-to-end tests of `shellward config check`: every problem of a file reported with its key, in one pass.

// Unix only, like `cli_run.rs` (the binary is driven on Linux); `cli_portable.rs` holds what every platform shares.
#![cfg(unix)]

#[test]
fn config_check_reports_every_problem_with_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let (code, err) = config_check(
        dir.path(),
        "bad.toml",
        "[executor]\ngrace = \"soon\"\nmax_running = 0\n[sandbox]\nmemory = 3\n[[policy]]\npath = \"nope.wasm\"\n",
    );
    assert_eq!(code, Some(1), "{err}");
    for key in [
        "executor.grace",
        "executor.max_running",
        "sandbox.memory",
        "policy[0].path",
    ] {
        assert!(err.contains(key), "{key} missing from:\n{err}");
    }
    // One pass: a policy's refused settings are reported with the file's own problems, not after they are fixed.
    let (code, err) = config_check(
        dir.path(),
        "both.toml",
        "[executor]\ngrace = \"soon\"\n[[policy]]\nbuiltin = \"default\"\n[policy.settings]\ndefault_timeout = \"banana\"\n",
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("executor.grace")
            && err.contains("default_timeout")
            && err.contains("2 problems"),
        "{err}"
    );

    let good = crate::cli::write_file(
        dir.path(),
        "good.toml",
        "[[policy]]\nbuiltin = \"default\"\n[policy.settings]\ndefault_timeout = \"30s\"\n[executor]\ngrace = \"1s\"\n",
    );
    let out = crate::cli::shellward(&[])
        .args(["config", "check", good.to_str().unwrap()])
        .env("DATABASE_URL", "postgres://app:hunter2@db/prod")
        .env("GH_PAT", "ghp_not_a_real_one")
        .env("SHELLWARD_TOKEN", "host-only-token")
        .env("PLAIN_SETTING", "visible")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", crate::cli::stderr(&out));
    let stdout = crate::cli::stdout(&out);
    assert!(stdout.contains("ok"));
    // What the defaults withhold: the rules, and this environment's names (never their values).
    assert!(
        stdout.contains("*TOKEN*") && stdout.contains("*PAT"),
        "{stdout}"
    );
    assert!(
        stdout.contains("DATABASE_URL (value carries a credential)"),
        "{stdout}"
    );
    assert!(stdout.contains("GH_PAT (secret-looking name)"), "{stdout}");
    assert!(
        stdout.contains("SHELLWARD_TOKEN (shellward's own)"),
        "{stdout}"
    );
    assert!(!stdout.contains("PLAIN_SETTING"), "{stdout}");
    for value in ["hunter2", "ghp_not_a_real_one", "host-only-token"] {
        assert!(!stdout.contains(value), "a value was printed: {stdout}");
    }

    // Invalid policy settings are found by loading the policy.
    let (code, err) = config_check(
        dir.path(),
        "settings.toml",
        "[[policy]]\nbuiltin = \"default\"\n[policy.settings]\ndefault_timeout = \"forever\"\n",
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("policy[0]") && err.contains("default_timeout"),
        "{err}"
    );
}

/// Writes `contents` to `dir/name` and runs `shellward config check` on it: its exit code and what it printed on
/// stderr.
fn config_check(dir: &std::path::Path, name: &str, contents: &str) -> (Option<i32>, String) {
    let file = crate::cli::write_file(dir, name, contents);
    let out = crate::cli::shellward(&[])
        .args(["config", "check", file.to_str().unwrap()])
        .output()
        .unwrap();
    (out.status.code(), crate::cli::stderr(&out))
}
