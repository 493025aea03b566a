//! End-to-end: `shellward policy check` drives the real binary with the embedded default policy and with policy files.

// Unix only: these tests drive the binary on Linux (signals, `/proc`, unix sockets, sandboxes); `cli_portable.rs`
// holds what every platform shares.
#![cfg(unix)]

use crate::cli::{stderr, stdout};

use shellward_policy::embedded::guests;
use std::process::{Command, Output};

/// `shellward ARGS` to its end with the tests' policy cache.
fn shellward(args: &[&str]) -> Output {
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-policy-cache");
    crate::cli::shellward(args)
        .env("SHELLWARD_CACHE_DIR", cache)
        .output()
        .expect("run shellward")
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

#[test]
fn trailing_ampersand_is_shown_as_background() {
    let o = shellward(&[
        "policy",
        "check",
        "--",
        "npm run dev &   # start the server",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("command:    npm run dev\n"), "{out}");
    assert!(out.contains("mode:       background"), "{out}");
    assert!(out.contains("process_output"), "{out}");
}

#[test]
fn json_output_carries_the_whole_plan() {
    let o = shellward(&[
        "policy",
        "check",
        "--json",
        "--timeout",
        "2h",
        "--env",
        "A=1",
        "--",
        "make",
        "test",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["decision"], "run");
    assert_eq!(v["command"], "make test");
    assert_eq!(v["background"], false);
    assert_eq!(v["timeout_ms"], 3_600_000, "clamped to the 1h maximum");
    assert_eq!(v["on_timeout"], "background");
    assert_eq!(v["env"][0][0], "A");
    assert!(v["notes"][0].as_str().unwrap().contains("maximum"));
}

#[test]
fn deny_exits_3_with_the_reason() {
    let o = shellward(&["policy", "check", "--json", "--", "rm", "-rf", "/"]);
    assert_eq!(o.status.code(), Some(3));
    let v = json(&o);
    assert_eq!(v["decision"], "deny");
    assert_eq!(v["denied_by"], "guard");
    assert!(v["reason"].as_str().unwrap().contains("guard[rm-root]"));
    // Checked as a run checks it: a call `execute` refuses before any policy sees it is refused here too, with the
    // same words, not handed to the chain (which a run never does).
    let o = shellward(&["policy", "check", "--json", "--timeout", "0s", "--", "make"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("timeout must be greater than zero"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn settings_apply_and_bad_input_is_a_clear_error() {
    let o = shellward(&[
        "policy",
        "check",
        "--json",
        "--settings",
        r#"{"default_timeout":"45s"}"#,
        "--",
        "ls",
    ]);
    assert_eq!(json(&o)["timeout_ms"], 45_000);

    for (args, needle) in [
        (
            vec!["policy", "check", "--timeout", "soon", "--", "ls"],
            "500ms, 30s",
        ),
        (
            vec!["policy", "check", "--settings", r#"{"nope":1}"#, "--", "ls"],
            "nope",
        ),
        (
            vec!["policy", "check", "--policy", "/no/such.wasm", "--", "ls"],
            "/no/such.wasm",
        ),
        (
            vec!["policy", "check", "--policy", "Cargo.toml", "--", "ls"],
            "not a WebAssembly file",
        ),
        (
            vec![
                "policy",
                "check",
                "--settings",
                "{}",
                "--settings",
                "{}",
                "--",
                "ls",
            ],
            "one --settings per --policy",
        ),
        (
            vec!["policy", "check", "--env", "novalue", "--", "ls"],
            "NAME=VALUE",
        ),
    ] {
        let o = shellward(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
}

#[test]
fn a_chain_of_policy_files_runs_in_order() {
    let scripted = guests::SCRIPTED_POLICY;
    let o = shellward(&[
        "policy",
        "check",
        "--json",
        "--policy",
        scripted,
        "--settings",
        "append: --fast",
        "--policy",
        scripted,
        "--settings",
        "deny:no fast builds",
        "--",
        "make",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(json(&o)["reason"], "no fast builds");

    let future = guests::FUTURE_POLICY;
    let o = shellward(&["policy", "check", "--policy", future, "--", "ls"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("@1.0.0")
            && stderr(&o).contains(&format!("@{}", shellward_policy::WIT_VERSION)),
        "{}",
        stderr(&o)
    );
}

/// Without any configuration the chain is `default`, then `guard`: catastrophic commands are denied out of the box,
/// naming the guard and saying what to do instead; ordinary development commands are not.
#[test]
fn catastrophic_commands_are_denied_out_of_the_box() {
    let check = |command: &str| shellward(&["policy", "check", "--", command]);
    for command in ["rm -rf /", "kill -9 -1", "sudo rm -rf /", ":(){ :|:& };:"] {
        let out = check(command);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(3), "{command}: {text}");
        assert!(text.contains("denied by:  guard"), "{command}: {text}");
    }
    // What a user may want but should see first is asked about: exit 4, the question and the plan shown.
    for (command, rule) in [
        ("sudo reboot", "privilege"),
        ("pkill node", "kill-by-name"),
        ("git reset --hard", "git-discard"),
        ("git push --force", "git-force-push"),
    ] {
        let out = check(command);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(4), "{command}: {text}");
        assert!(
            text.contains("decision:   ask") && text.contains("asked by:   guard"),
            "{command}: {text}"
        );
        assert!(
            text.contains(&format!("rule:       {rule}")),
            "{command}: {text}"
        );
        assert!(
            text.contains(&format!("command:    {command}")),
            "{command}: {text}"
        );
    }
    assert!(String::from_utf8_lossy(&check("pkill node").stdout).contains("process_signal"));
    for command in [
        "rm -rf ./build target node_modules",
        "kill %1",
        "kill $PID",
        "git clean -n",
        "sudo -l",
        "echo 'sudo is just text here'",
        "cargo test",
    ] {
        let out = check(command);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{command}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // `run` refuses them too, with exit 126.
    let run = Command::new(env!("CARGO_BIN_EXE_shellward"))
        .args(["run", "--", "kill -9 -1"])
        .env_remove("SHELLWARD_CONFIG")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(126));
    assert!(String::from_utf8_lossy(&run.stderr).contains("denied by guard"));
}

/// A mistyped option before the command is a usage error naming it (exit 2), never the first word of the command,
/// for `run` and `policy check` alike; with `--`, a command may start with a dash.
#[test]
fn a_mistyped_option_is_a_usage_error_not_the_command() {
    for args in [
        &["run", "--timout", "5s", "--", "echo hi"][..],
        &["policy", "check", "--polcy", "x.wasm", "--", "rm -rf /"][..],
    ] {
        let o = shellward(args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        let err = stderr(&o);
        assert!(
            err.contains(&format!("'{}'", args[if args[0] == "run" { 1 } else { 2 }])),
            "{err}"
        );
        assert!(err.contains("use '-- "), "{err}");
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    }
    // Options after the command's first word belong to the command.
    let o = shellward(&["policy", "check", "echo", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("command:    echo --json\n"),
        "{}",
        stdout(&o)
    );
}

/// `policy check --config FILE` answers as the configured chain would: without the guard `rm -rf /` runs, with the
/// built-in chain (an empty file) it is denied.
#[test]
fn policy_check_uses_the_configured_chain() {
    let dir = tempfile::tempdir().unwrap();
    let no_guard = crate::cli::write_file(
        dir.path(),
        "no-guard.toml",
        "[[policy]]\nbuiltin = \"default\"\n",
    );
    let defaults = crate::cli::write_file(dir.path(), "defaults.toml", "");
    let o = shellward(&[
        "policy",
        "check",
        "--config",
        no_guard.to_str().unwrap(),
        "--",
        "rm -rf /",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("decision:   run"), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("command:    rm -rf /\n"),
        "{}",
        stdout(&o)
    );
    let o = shellward(&[
        "policy",
        "check",
        "--config",
        defaults.to_str().unwrap(),
        "--",
        "rm -rf /",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("guard[rm-root]"), "{}", stdout(&o));
    let o = shellward(&[
        "policy",
        "check",
        "--config",
        "/nonexistent/shellward.toml",
        "--",
        "true",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("/nonexistent/shellward.toml"),
        "{}",
        stderr(&o)
    );
}

/// `policy check` shows the confinement a run would get: the configuration's, or the built-in defaults.
#[test]
fn policy_check_shows_the_confinement() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "strict.toml",
        "[confinement]\nnetwork = \"none\"\nwritable = [\"/srv/app\"]\ndeny_read = [\"/srv/secret\"]\ndeny_syscalls = [\"ptrace\"]\n",
    );
    let o = shellward(&[
        "policy",
        "check",
        "--config",
        config.to_str().unwrap(),
        "--",
        "ls",
    ]);
    let text = stdout(&o);
    for line in [
        "writable:   /srv/app",
        "network:    none",
        "hidden:     /srv/secret",
        "refused:    ptrace",
    ] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
    let o = shellward(&[
        "policy",
        "check",
        "--config",
        config.to_str().unwrap(),
        "--json",
        "--",
        "ls",
    ]);
    let v = json(&o);
    assert_eq!(v["confinement"]["network"], "none", "{v}");
    // Without a configuration: the built-in defaults (writes confined, the host's network, ptrace refused).
    let o = shellward(&["policy", "check", "--", "ls"]);
    let text = stdout(&o);
    assert!(
        text.contains("network:    host") && text.contains("ptrace"),
        "{text}"
    );
    assert!(!text.contains("not confined"), "{text}");
    // A denied command has no confinement to show; an asked one shows what it would run with once approved.
    let o = shellward(&["policy", "check", "--", "rm -rf /"]);
    assert!(!stdout(&o).contains("writable:"), "{}", stdout(&o));
    let o = shellward(&["policy", "check", "--", "sudo reboot"]);
    assert!(stdout(&o).contains("writable:"), "{}", stdout(&o));
}

/// Runs `commands` through a real `serve` with the chain `policies` and an audit log in `dir`, and returns the log
/// (stopping the server flushes it). Every command is answered 200 (a deny is a result too); one a policy asks about is
/// declined through `POST /v1/approvals/{id}`, so its decision is recorded.
fn record_traffic(dir: &std::path::Path, policies: &str, commands: &[&str]) -> std::path::PathBuf {
    let audit = dir.join("audit.jsonl");
    let config = crate::cli::write_file(
        dir,
        "recorded.toml",
        format!("{policies}[audit]\npath = \"{}\"\n", audit.display()),
    );
    let server = crate::cli::Server::start(&["--config", config.to_str().unwrap()]);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let post = |path: &str, body: serde_json::Value| {
        let mut r = agent
            .post(&format!("{}{path}", server.base))
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .unwrap();
        let status = r.status().as_u16();
        let body: serde_json::Value =
            serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
        (status, body)
    };
    for command in commands {
        let (status, r) = post(
            "/v1/tools/execute",
            serde_json::json!({ "command": command }),
        );
        assert_eq!(status, 200, "{command}");
        if let Some(id) = r["pending_approval"]["id"].as_str() {
            let (status, r) = post(
                &format!("/v1/approvals/{id}"),
                serde_json::json!({"decision": "deny"}),
            );
            assert_eq!((status, r["denied"].clone()), (200, true.into()), "{r}");
        }
    }
    server.stop();
    audit
}

/// `policy replay`: the decisions an audit log recorded, decided again by another chain; the changed ones listed with
/// counts per kind, records written before requests were recorded skipped and counted, exit 1 when anything changes.
#[test]
fn replay_shows_what_a_new_chain_would_change_in_recorded_traffic() {
    let dir = tempfile::tempdir().unwrap();
    // Traffic recorded by a real `serve` under the default policy alone: `sudo -n true` is run (no guard), the others
    // too.
    let audit = record_traffic(
        dir.path(),
        "[[policy]]\nbuiltin = \"default\"\n",
        &["echo one", "sudo -n true", "echo two"],
    );
    // A record from before requests were recorded.
    let mut log = std::fs::read_to_string(&audit).unwrap();
    log.push_str("{\"type\":\"decision\",\"command\":\"old\",\"outcome\":\"run\"}\nnot json\n");
    std::fs::write(&audit, log).unwrap();
    let replay = |extra: &[&str]| {
        let mut args = vec!["policy", "replay", "--audit", audit.to_str().unwrap()];
        args.extend_from_slice(extra);
        shellward(&args)
    };
    // The same chain: nothing changes.
    let o = replay(&["--policy", "default"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("3 decisions replayed, 0 would change"),
        "{}",
        stdout(&o)
    );
    // With the guard added: sudo would now be asked about, nothing else changes.
    let o = replay(&["--policy", "default", "--policy", "guard"]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("\"sudo -n true\"  [run -> ask]"), "{text}");
    assert!(
        text.contains("now: ask by guard (rule privilege)"),
        "{text}"
    );
    assert!(text.contains("1 would change (run -> ask: 1)"), "{text}");
    assert!(
        text.contains("1 decision records carry no request"),
        "{text}"
    );
    assert!(!text.contains("echo one"), "{text}");
    let o = replay(&[
        "--policy", "default", "--policy", "guard", "--format", "json",
    ]);
    let v = json(&o);
    assert_eq!(
        (v["replayed"].clone(), v["changed"].clone()),
        (3.into(), 1.into()),
        "{v}"
    );
    assert_eq!(v["kinds"]["run -> ask"], 1, "{v}");
    assert_eq!(v["changes"][0]["was"]["outcome"], "run", "{v}");
    assert_eq!(v["changes"][0]["now"]["asked_by"], "guard", "{v}");
    assert_eq!(v["skipped_without_request"], 1);
    // A missing log is a clear error.
    let o = shellward(&["policy", "replay", "--audit", "/no/such/audit.jsonl"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("cannot read the audit log"),
        "{}",
        stderr(&o)
    );
}

/// `policy replay` with the same policy loaded under another name (the built-in guard from a file path): the
/// decisions are the same (same rule, same reason), so nothing "would change"; the rename is reported apart.
#[test]
fn replay_reports_a_renamed_policy_apart_from_a_changed_decision() {
    let dir = tempfile::tempdir().unwrap();
    let audit = record_traffic(
        dir.path(),
        "[[policy]]\nbuiltin = \"default\"\n[[policy]]\nbuiltin = \"guard\"\n",
        &["echo one", "rm -rf /", "sudo -n true"],
    );
    // An operator who now denies what was asked about: ask -> deny.
    let o = shellward(&[
        "policy",
        "replay",
        "--audit",
        audit.to_str().unwrap(),
        "--policy",
        "default",
        "--policy",
        "guard",
        "--settings",
        "{}",
        "--settings",
        r#"{"deny": ["sudo *"]}"#,
    ]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}{}", stderr(&o));
    assert!(text.contains("\"sudo -n true\"  [ask -> deny]"), "{text}");
    assert!(text.contains("1 would change (ask -> deny: 1)"), "{text}");
    let guard = crate::cli::write_file(
        dir.path(),
        "my-guard.wasm",
        shellward_policy::embedded::builtin("guard").unwrap(),
    );
    let base = ["policy", "replay", "--audit", audit.to_str().unwrap()];
    let renamed = [
        &base[..],
        &["--policy", "default", "--policy", guard.to_str().unwrap()],
    ]
    .concat();
    let o = shellward(&renamed);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}{}", stderr(&o));
    assert!(
        text.contains("3 decisions replayed, 0 would change"),
        "{text}"
    );
    assert!(!text.contains("denied differently"), "{text}");
    assert!(
        text.contains("2 decisions are the same") && text.contains("a renamed policy"),
        "{text}"
    );
    let v = json(&shellward(&[&renamed[..], &["--json"]].concat()));
    assert_eq!(
        (v["changed"].clone(), v["renamed"].clone()),
        (0.into(), 2.into()),
        "{v}"
    );
    assert_eq!(v["renames"][0]["was_denied_by"], "guard", "{v}");
    // Without the guard the deny and the ask are changes, not renames.
    let o = shellward(&[&base[..], &["--policy", "default"]].concat());
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("(deny -> run: 1, ask -> run: 1)"),
        "{}",
        stdout(&o)
    );
}

/// Runs shellward with `args`, its stdout a pipe whose reader is already gone (what `| head -1` becomes once `head`
/// has its line): every write fails. Returns the status and stderr.
fn with_closed_stdout(args: &[&str], dir: &std::path::Path) -> (std::process::ExitStatus, String) {
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-policy-cache");
    let o = Command::new(env!("CARGO_BIN_EXE_shellward"))
        .args(args)
        .current_dir(dir)
        .env("SHELLWARD_CACHE_DIR", cache)
        .env("RUST_BACKTRACE", "0")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(write))
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run shellward");
    (o.status, stderr(&o))
}

/// The subcommands `shellward [parent] --help` lists.
fn subcommands(parent: &[&str]) -> Vec<String> {
    let o = shellward(&[parent, &["--help"]].concat());
    let text = stdout(&o);
    let Some((_, rest)) = text.split_once("Commands:\n") else {
        return Vec::new();
    };
    rest.lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// `shellward … | head -1` for every subcommand: its help, and each one that prints to stdout with real work. None
/// panics (exit 101, "panicked"), none prints "Broken pipe": each ends quietly, killed by SIGPIPE as `cat` is, or with
/// the status a shell shows for that (141).
#[test]
fn every_subcommand_ends_quietly_when_its_reader_closes_the_pipe() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "shellward.toml",
        "[[policy]]\nbuiltin = \"default\"\n",
    );
    let config = config.to_str().unwrap();
    let mut invocations: Vec<Vec<String>> = vec![vec!["--help".into()], vec!["--version".into()]];
    let top = subcommands(&[]);
    assert!(top.len() >= 8, "{top:?}");
    for name in &top {
        invocations.push(vec![name.clone(), "--help".into()]);
        for sub in subcommands(&[name]) {
            invocations.push(vec![name.clone(), sub, "--help".into()]);
        }
    }
    let work: &[&[&str]] = &[
        &["man"],
        &["completions", "fish"],
        &["completions", "bash"],
        &["policy", "inspect", "default"],
        &["policy", "inspect", "guard", "--json"],
        &["policy", "list"],
        &["policy", "check", "--", "rm -rf /"],
        &["policy", "check", "--json", "--", "ls"],
        &["config", "init"],
        &["config", "check", config],
        &["sandbox", "check"],
        &["run", "--", "seq 1 100000"],
        &["run", "--json", "--", "echo hi"],
        &["mcp", "--client-config", "claude-code"],
    ];
    for args in work {
        // Each one does its work when its output is read (so the closed pipe is what it meets).
        let o = Command::new(env!("CARGO_BIN_EXE_shellward"))
            .args(*args)
            .current_dir(dir.path())
            .env(
                "SHELLWARD_CACHE_DIR",
                std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-policy-cache"),
            )
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        // (`policy check` of a denied command exits 3.)
        assert!(
            matches!(o.status.code(), Some(0 | 3)) && !o.stdout.is_empty(),
            "shellward {args:?}: {:?} {}",
            o.status,
            stderr(&o)
        );
        invocations.push(args.iter().map(|s| s.to_string()).collect());
    }
    for args in &invocations {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (status, err) = with_closed_stdout(&args, dir.path());
        let quiet = status.signal() == Some(13)
            || matches!(status.code(), Some(0) | Some(1) | Some(2) | Some(141));
        assert!(
            quiet && !err.contains("panicked") && !err.contains("Broken pipe"),
            "shellward {args:?} with a closed stdout: {status:?}\n{err}"
        );
    }
}

/// A `--policy` that is neither a file nor a built-in is named as such, with the built-ins listed and the one meant
/// suggested (`gaurd` → `guard`), in `policy check` and in the commands that run things; a built-in's name works.
#[test]
fn a_mistyped_builtin_policy_names_the_builtins() {
    for args in [
        &["policy", "check", "--policy", "gaurd", "--", "ls"][..],
        &["run", "--policy", "gaurd", "--", "echo", "never"][..],
    ] {
        let o = crate::cli::output(args);
        assert!(!o.status.success(), "{args:?}");
        let err = crate::cli::stderr(&o);
        assert!(err.contains("did you mean `guard`?"), "{args:?}: {err}");
        assert!(err.contains("`default`, `guard`"), "{args:?}: {err}");
        assert!(!crate::cli::stdout(&o).contains("never"), "{args:?}");
    }
    let o = crate::cli::output(&["run", "--policy", "guard", "--", "echo", "fine"]);
    assert_eq!(
        crate::cli::stdout(&o),
        "fine\n",
        "{}",
        crate::cli::stderr(&o)
    );
}

/// A configuration file that came from `$SHELLWARD_CONFIG` (no `--config`) and fails is named as the variable's, with
/// how to get out of it; given with `--config`, the error stays the file's own.
#[test]
fn a_failing_configuration_from_the_environment_is_named_as_such() {
    let o = crate::cli::shellward(&["run", "--", "echo", "never"])
        .env("SHELLWARD_CONFIG", "/nonexistent/shellward.toml")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = crate::cli::stderr(&o);
    assert!(err.contains("comes from $SHELLWARD_CONFIG"), "{err}");
    assert!(err.contains("unset SHELLWARD_CONFIG"), "{err}");
    let o = crate::cli::output(&[
        "run",
        "--config",
        "/nonexistent/shellward.toml",
        "--",
        "echo",
        "never",
    ]);
    let err = crate::cli::stderr(&o);
    assert!(!o.status.success());
    assert!(!err.contains("SHELLWARD_CONFIG"), "{err}");
    assert!(err.contains("/nonexistent/shellward.toml"), "{err}");
}
