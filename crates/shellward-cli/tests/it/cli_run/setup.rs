//! Usage errors, `config init`, what `run`, `mcp` and `serve` leave in the temporary directory, and the terminal's approval question.

use super::*;

/// Usage errors exit 2 with the usage, and a mistyped subcommand gets a suggestion.
#[test]
fn usage_errors_exit_2_and_typos_get_a_suggestion() {
    let o = run(&["--", ""]);
    assert_eq!(o.status.code(), Some(2), "{}", crate::cli::stderr(&o));
    assert!(
        crate::cli::stderr(&o).contains("Usage: shellward run"),
        "{}",
        crate::cli::stderr(&o)
    );
    let o = crate::cli::shellward(&[]).arg("rn").output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        crate::cli::stderr(&o).contains("did you mean 'run'"),
        "{}",
        crate::cli::stderr(&o)
    );
    let o = crate::cli::shellward(&[])
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
}

/// `config init` writes the manual's reference configuration (`docs/src/configuration.md`); it checks as written, every commented setting is valid
/// when uncommented (only the ones naming files or variables this machine lacks are refused), and an existing file is
/// kept unless --force.
#[test]
fn config_init_writes_the_readme_reference_and_it_checks() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shellward.toml");
    let check = |f: &std::path::Path| {
        crate::cli::shellward(&[])
            .args(["config", "check", f.to_str().unwrap()])
            .current_dir(dir.path())
            .env("AGENT_A_TOKEN", "a-token-for-the-check")
            .output()
            .unwrap()
    };
    let o = crate::cli::shellward(&[])
        .args(["config", "init", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", crate::cli::stderr(&o));
    let written = std::fs::read_to_string(&file).unwrap();
    let manual = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/src/configuration.md"
    ))
    .unwrap();
    let section = manual.split("# Configuration file").nth(1).unwrap();
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .unwrap();
    assert_eq!(
        block.trim_end(),
        written.trim_end(),
        "the manual's reference is not `config init`'s file"
    );
    let o = check(&file);
    assert_eq!(o.status.code(), Some(0), "{}", crate::cli::stderr(&o));
    assert!(crate::cli::stdout(&o).contains("default (embedded) -> guard (embedded)"));
    // Again without --force: refused, the file kept.
    let o = crate::cli::shellward(&[])
        .args(["config", "init", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        crate::cli::stderr(&o).contains("--force"),
        "{}",
        crate::cli::stderr(&o)
    );
    // Every commented setting uncommented: valid, but for paths that do not exist here.
    let all: String = written
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest)
                if rest.starts_with('[')
                    || rest.split_once(" = ").is_some_and(|(k, _)| {
                        k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                    }) =>
            {
                rest.to_string()
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let uncommented = crate::cli::write_file(dir.path(), "all.toml", &all);
    let o = check(&uncommented);
    let err = crate::cli::stderr(&o);
    for line in err.lines().skip(1) {
        let key = line.trim().split(':').next().unwrap_or_default();
        assert!(
            [
                "policies.dir",
                "executor.workdir",
                "executor.log_dir",
                "audit.path",
                "sandbox.cache_dir",
                "approvals.allow_file"
            ]
            .contains(&key),
            "{key} refused when uncommented:\n{err}\n{all}"
        );
    }
}

/// `config init` into a directory that does not exist yet (`/etc/shellward/` on a fresh machine) creates it (0755) and
/// writes the file 0600 (it may hold a token); where the directory cannot be created it says which `mkdir` to run.
#[test]
fn config_init_creates_missing_directories_and_writes_a_private_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("etc/shellward/shellward.toml");
    let o = crate::cli::shellward(&[])
        .args(["config", "init", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", crate::cli::stderr(&o));
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().unwrap()), 0o755);
    assert_eq!(mode(&dir.path().join("etc")), 0o755);
    // A parent that is a file: the directory cannot be made, and the message says what to run.
    std::fs::write(dir.path().join("plain"), "").unwrap();
    let blocked = dir.path().join("plain/sub/shellward.toml");
    let o = crate::cli::shellward(&[])
        .args(["config", "init", blocked.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = crate::cli::stderr(&o);
    assert!(
        err.contains(&format!("mkdir -p {}", blocked.parent().unwrap().display())),
        "{err}"
    );
}

/// What a serving command left in its temporary directory (`TMPDIR`), as names.
fn left_in(tmp: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// `shellward run -- COMMAND` with `TMPDIR` set to `tmp`; it must succeed.
fn run_in(tmp: &std::path::Path, command: &str) {
    let o = crate::cli::shellward(&[])
        .args(["run", "--", command])
        .env("TMPDIR", tmp)
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("SHELLWARD_CONFIG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", crate::cli::stderr(&o));
}

/// `shellward serve` on a free loopback port with `TMPDIR` set to `tmp` (and no `XDG_RUNTIME_DIR`, so its directories
/// go there), once it has announced its address; its stdout, to keep open until it exits.
fn serve_in(tmp: &std::path::Path) -> (std::process::Child, BufReader<std::process::ChildStdout>) {
    let tmp = tmp.to_str().unwrap();
    let (serve, _, stdout) = crate::cli::start_serve_keeping_stdout(
        &["--listen", "127.0.0.1:0"],
        &[("TMPDIR", tmp), ("XDG_RUNTIME_DIR", "")],
        &new_mark("tmpdir"),
        Stdio::null(),
    );
    (serve, stdout)
}

/// `run`, `mcp` (its client gone) and `serve` (stopped by SIGTERM) leave nothing in the temporary directory: not the
/// directory their commands report their working directory into, which each made at start. They exit without
/// dropping the facade (for speed), so its shutdown removes it; before, every run left one behind.
#[test]
fn run_mcp_and_serve_leave_nothing_in_the_temporary_directory() {
    let tmp = tempfile::tempdir().unwrap();
    run_in(tmp.path(), "cd /; true");
    assert_eq!(left_in(tmp.path()), Vec::<String>::new(), "after run");

    let mut command = crate::cli::shellward(&[]);
    command
        .arg("mcp")
        .env("TMPDIR", tmp.path())
        .env_remove("XDG_RUNTIME_DIR");
    let (mut mcp, stdin, out) = crate::cli::start_stdio(command);
    {
        use std::io::Write;
        // Moved in: both close at the end of the block, as a client going away closes them.
        let (mut stdin, mut out) = (stdin, out);
        let mut line = String::new();
        for message in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"cd /tmp; true"}}}"#,
        ] {
            writeln!(stdin, "{message}").unwrap();
            if message.contains("\"id\"") {
                line.clear();
                out.read_line(&mut line).unwrap();
                assert!(line.contains("\"result\""), "{line}");
            }
        }
        // The client goes away.
    }
    let status = wait_exit(&mut mcp, Duration::from_secs(10));
    assert!(status.success(), "{status}");
    assert_eq!(left_in(tmp.path()), Vec::<String>::new(), "after mcp");

    let (mut serve, stdout) = serve_in(tmp.path());
    crate::cli::signal(&serve, Signal::SIGTERM);
    let status = wait_exit(&mut serve, Duration::from_secs(10));
    drop(stdout);
    assert!(status.success(), "{status}");
    assert_eq!(left_in(tmp.path()), Vec::<String>::new(), "after serve");
}

/// A server killed outright (`SIGKILL`: no shutdown runs) leaves its log directory (in the per-user log root) and the
/// directory its commands report their working directory into; the next start in the same place removes both (their
/// locks died with it), and the root with its last log directory.
#[test]
fn the_next_start_removes_what_a_killed_server_left_in_the_temporary_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut serve, stdout) = serve_in(tmp.path());
    crate::cli::signal(&serve, Signal::SIGKILL);
    let status = wait_exit(&mut serve, Duration::from_secs(10));
    drop(stdout);
    assert!(!status.success(), "{status}");
    // The report directory beside the per-user log root, the log directory inside it.
    let left = left_in(tmp.path());
    let report = left.iter().filter(|n| n.starts_with("shellward-")).count();
    let roots: Vec<&String> = left
        .iter()
        .filter(|n| n.starts_with(".shellward-logs-"))
        .collect();
    assert_eq!(
        (report, roots.len()),
        (1, 1),
        "the killed server's directories: {left:?}"
    );
    let logs = left_in(&tmp.path().join(roots[0]));
    assert_eq!(
        logs.iter().filter(|n| n.starts_with("shellward-")).count(),
        1,
        "the killed server's log directory: {logs:?}"
    );
    run_in(tmp.path(), "true");
    assert_eq!(
        left_in(tmp.path()),
        Vec::<String>::new(),
        "after the next run"
    );
}

/// A command the guard asks about: without a terminal `run` refuses it (126) and says how to approve it; the
/// operator's `--approve` runs it; on a terminal `run` asks there, and only `y` runs it.
#[test]
fn run_asks_on_a_terminal_and_refuses_without_one_unless_pre_approved() {
    let dir = tempfile::tempdir().unwrap();
    let victim = |name: &str| {
        let path = crate::cli::write_file(dir.path(), name, "data\n");
        (path.clone(), format!("shred -u {}", path.display()))
    };
    let (path, command) = victim("no-terminal");
    let out = run(&["--", &command]);
    assert_eq!(out.status.code(), Some(126), "{}", crate::cli::stderr(&out));
    let err = crate::cli::stderr(&out);
    assert!(
        err.contains("needs approval") && err.contains("--approve"),
        "{err}"
    );
    assert!(path.exists(), "refused: nothing ran");

    let (path, command) = victim("pre-approved");
    let out = run(&["--approve", "--", &command]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::cli::stderr(&out));
    assert!(!path.exists());

    // On a terminal (script(1) gives `run` a pseudo-terminal and relays the answer typed on its stdin).
    for (answer, runs) in [("y\n", true), ("n\n", false), ("\n", false)] {
        let (path, command) = victim("terminal");
        let out = on_terminal(&command, answer);
        let shown = crate::cli::stdout(&out);
        assert!(
            shown.contains("Run it? [y/N]") && shown.contains("guard[shred]"),
            "{shown}"
        );
        assert_eq!(!path.exists(), runs, "answer {answer:?}: {shown}");
        assert_eq!(
            out.status.code(),
            Some(if runs { 0 } else { 126 }),
            "answer {answer:?}: {shown}"
        );
    }
}

/// On a terminal, the question a person answers shows a hostile command's every character as text (the escape
/// sequences, carriage return, bidirectional override and zero-width space escaped and counted), after a clean line
/// and a visible separator; declined, nothing runs.
#[test]
fn the_terminal_question_shows_a_hostile_command_as_text() {
    terminal_question_shows_text();
}

/// [`the_terminal_question_shows_a_hostile_command_as_text`] as an unprivileged user.
#[test]
fn the_terminal_question_shows_a_hostile_command_as_text_to_a_normal_user_too() {
    if !shellward_test_support::as_unprivileged_user(
        shellward_test_support::test_path!(
            "the_terminal_question_shows_a_hostile_command_as_text_to_a_normal_user_too"
        ),
        "SHELLWARD_TEST_RUN_TTY_AS_USER",
    ) {
        return;
    }
    terminal_question_shows_text();
}

/// `shellward run -- COMMAND` on a pseudo-terminal (script(1)), `answer` typed ahead: what it printed there.
fn on_terminal(command: &str, answer: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new("script")
        .args([
            "-qec",
            &format!("{} run -- \"$SW_COMMAND\"", bin()),
            "/dev/null",
        ])
        .env("SW_COMMAND", command)
        .env_remove("SHELLWARD_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1)");
    // The answer is typed ahead (the terminal keeps it until read); stdin stays open until `run` ends, since its
    // end would end script(1)'s session.
    let mut typed = child.stdin.take().unwrap();
    typed.write_all(answer.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    drop(typed);
    out
}

fn terminal_question_shows_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = crate::cli::write_file(dir.path(), "hostile", "data\n");
    let command = format!(
        "shred -u {} \x1b[2K\x1b[1G\r\u{202e}echo safe\u{200b}",
        path.display()
    );
    let out = on_terminal(&command, "n\n");
    let shown = crate::cli::stdout(&out);
    assert!(
        shown.contains("shellward: approval needed") && shown.contains("Run it? [y/N]"),
        "{shown:?}"
    );
    for raw in ["\x1b[2K", "\x1b[1G", "\u{202e}", "\u{200b}", "\rech"] {
        assert!(
            !shown.contains(raw),
            "{raw:?} reached the terminal: {shown:?}"
        );
    }
    assert!(
        shown.contains("\\x1b[2K\\x1b[1G\\r\\u{202e}echo safe\\u{200b}")
            && shown.contains("contains 5 invisible or control characters, shown escaped"),
        "{shown:?}"
    );
    assert_eq!(out.status.code(), Some(126), "{shown}");
    assert!(path.exists(), "declined: nothing ran");
    // Declined at the terminal: the refusal once, as one sentence per reason, and no advice on how to be asked.
    assert!(
        shown.contains("They said: answered no at the terminal. ")
            && !shown.contains("Not run: Not run")
            && !shown.contains("not run: Not run")
            && !shown.contains("run it on a terminal"),
        "{shown:?}"
    );
}

/// A bad option value is a usage error (exit 2, with the usage line), as clap's own, not a failure of shellward (125):
/// a duration without a unit, a variable without a value, in text and JSON mode; nothing runs.
#[test]
fn bad_option_values_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let touch = format!("touch {}", marker.display());
    for (args, says) in [
        (vec!["--timeout", "5"], "a number has no unit"),
        (vec!["--env", "FOO"], "must look like NAME=VALUE"),
        (vec!["--json", "--timeout", "5"], "a number has no unit"),
    ] {
        let mut all = args.clone();
        all.extend(["--", touch.as_str()]);
        let out = run(&all);
        let text = crate::cli::text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(says), "{args:?}: {text}");
        assert!(!marker.exists(), "{args:?}: it ran");
    }
}

/// `config init -` prints the starter configuration, as `config init` alone does, instead of writing a file named `-`.
#[test]
fn config_init_dash_is_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let o = crate::cli::shellward(&["config", "init", "-"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", crate::cli::stderr(&o));
    let plain = crate::cli::output(&["config", "init"]);
    assert_eq!(crate::cli::stdout(&o), crate::cli::stdout(&plain));
    assert!(crate::cli::stdout(&o).contains("[[policy]]"));
    assert!(!dir.path().join("-").exists(), "a file named - was written");
}

/// `sandbox check --json`: the same report as one JSON object — the header, every check with `ok`, `what` and
/// `detail` — and the same exit status as the text report.
#[test]
fn sandbox_check_json_is_the_text_report_as_data() {
    let text = crate::cli::output(&["sandbox", "check"]);
    let json = crate::cli::output(&["sandbox", "check", "--json"]);
    assert_eq!(
        json.status.code(),
        text.status.code(),
        "{}",
        crate::cli::stderr(&json)
    );
    let report: serde_json::Value = serde_json::from_str(&crate::cli::stdout(&json))
        .unwrap_or_else(|e| panic!("{e}: {}", crate::cli::stdout(&json)));
    assert_eq!(
        report["sandboxed"],
        json.status.code() == Some(0),
        "{report}"
    );
    let checks = report["checks"].as_array().expect("checks");
    let lines: Vec<String> = crate::cli::stdout(&text)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(report["header"], lines[0], "{report}");
    assert_eq!(checks.len(), lines.len() - 1, "{report}\n{lines:?}");
    for (check, line) in checks.iter().zip(&lines[1..]) {
        let what = check["what"].as_str().unwrap();
        assert!(line.contains(what), "{line} / {check}");
        assert_eq!(
            line.starts_with("yes"),
            check["ok"] == true,
            "{line} / {check}"
        );
    }
}
