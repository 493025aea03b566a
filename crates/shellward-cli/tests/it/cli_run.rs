//! End-to-end tests of `shellward run`, driving the real binary (`config check` is `cli_config.rs`).

// Unix only: these tests drive the binary on Linux (signals, `/proc`, unix sockets, sandboxes); `cli_portable.rs`
// holds what every platform shares.
#![cfg(unix)]

use crate::cli::{MARK, Signal, bin, kill_marked, new_mark, survivors, wait_exit};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod setup;

/// `shellward run ARGS` to its end (see [`crate::cli::shellward`]).
fn run(args: &[&str]) -> Output {
    crate::cli::shellward(&["run"])
        .args(args)
        .output()
        .expect("run shellward")
}

#[test]
fn exit_codes_follow_the_command() {
    let ok = run(&["--", "echo hello"]);
    assert_eq!(ok.status.code(), Some(0));
    assert_eq!(crate::cli::stdout(&ok), "hello\n");

    let failed = run(&["--", "echo out; echo err >&2; exit 7"]);
    assert_eq!(failed.status.code(), Some(7));
    assert_eq!(
        crate::cli::stdout(&failed),
        "out\nerr\n",
        "stderr is interleaved into the stream"
    );

    let signalled = run(&["--", "kill -TERM $$"]);
    assert_eq!(signalled.status.code(), Some(128 + 15));

    // Without `--`, everything from the first word of the command on is the command (as with timeout(1)).
    let bare = run(&["--timeout", "5s", "echo", "a", "--json"]);
    assert_eq!(bare.status.code(), Some(0));
    assert_eq!(crate::cli::stdout(&bare), "a --json\n");
}

/// `run --on-timeout kill` makes the timeout a hard limit (exit 124, the tree terminated, its output up to then
/// kept); without it the default plan keeps the command past its timeout and streams it to its end.
#[test]
fn on_timeout_kill_makes_the_timeout_a_hard_limit() {
    let mark = new_mark("on-timeout");
    let started = Instant::now();
    let killed = run(&[
        "--timeout",
        "1s",
        "--on-timeout",
        "kill",
        "--env",
        &format!("{MARK}={mark}"),
        "--",
        "echo before; sleep 30; echo after",
    ]);
    assert_eq!(
        killed.status.code(),
        Some(124),
        "{}",
        crate::cli::stderr(&killed)
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(crate::cli::stdout(&killed), "before\n");
    assert!(
        crate::cli::stderr(&killed).contains("timed out after 1s"),
        "{}",
        crate::cli::stderr(&killed)
    );
    assert!(
        survivors(&mark).is_empty(),
        "left running: {:?}",
        survivors(&mark)
    );
    let kept = run(&[
        "--timeout",
        "200ms",
        "--on-timeout",
        "background",
        "--",
        "sleep 1; echo after",
    ]);
    assert_eq!(kept.status.code(), Some(0), "{}", crate::cli::stderr(&kept));
    assert_eq!(crate::cli::stdout(&kept), "after\n");
    let bad = run(&["--on-timeout", "stop", "--", "true"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        crate::cli::stderr(&bad).contains("kill"),
        "{}",
        crate::cli::stderr(&bad)
    );
}

#[test]
fn each_command_runs_in_its_session_s_namespace_under_the_embedded_init_when_root() {
    // The shell's own pid, the processes it can see, the command line and name of pid 1 of its /proc, and the file
    // pid 1 runs (readable with writes unconfined: a command under Landlock may not inspect a process outside its
    // domain, pid 1 included — see the next test).
    let dir = tempfile::tempdir().unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "unconfined.toml",
        "[confinement]\nwritable = \"any\"\n",
    );
    let o = run(&[
        "--config",
        config.to_str().unwrap(),
        "--",
        "echo $$; ls /proc | grep -c '^[0-9]'; tr '\\0' ' ' < /proc/1/cmdline; echo; cat /proc/1/comm; \
         readlink /proc/1/exe",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", crate::cli::stderr(&o));
    let out = crate::cli::stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    let pid: i32 = lines[0].parse().unwrap();
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if root {
        assert!(pid <= 3, "not in a PID namespace: {out}");
        assert!(lines[1].parse::<usize>().unwrap() <= 6, "{out}");
        // Named for `ps`, not after the descriptor it was started from.
        assert!(
            lines[2].starts_with("shellward-init __shellward-session"),
            "{out}"
        );
        // The static init built into the binary (a sealed memfd), not a file beside it or the binary itself: an
        // installed `shellward` alone gets the fast init.
        assert_eq!(lines[3], "shellward-init", "{out}");
        assert!(lines[4].starts_with("/memfd:shellward-init"), "{out}");
    } else {
        // Without privilege, commands run unconfined (the binary says so in its info log).
        assert!(pid > 3, "{out}");
    }
}

/// With the default confinement a command cannot inspect the session's pid 1 (Landlock confines ptrace-class access
/// to processes of its own domain), and cannot write outside the writable paths.
#[test]
fn a_confined_command_cannot_inspect_pid_1_or_write_outside() {
    let o = run(&[
        "--",
        "readlink /proc/1/exe || echo no-exe; echo x > /etc/shellward-probe || echo no-write",
    ]);
    let out = crate::cli::stdout(&o);
    assert!(out.contains("no-exe") && out.contains("no-write"), "{out}");
    assert!(!std::path::Path::new("/etc/shellward-probe").exists());
}

#[test]
fn a_foreground_timeout_with_kill_exits_124_and_leaves_nothing() {
    let mark = new_mark("run-timeout");
    let dir = tempfile::tempdir().unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "kill.toml",
        "[[policy]]\nbuiltin = \"default\"\n[policy.settings]\non_timeout = \"kill\"\n",
    );
    let started = Instant::now();
    let out = run(&[
        "--config",
        config.to_str().unwrap(),
        "--timeout",
        "500ms",
        "--env",
        &format!("{MARK}={mark}"),
        "--",
        "echo before; sh -c 'setsid sleep 62 & sleep 61' | cat; echo never",
    ]);
    assert_eq!(out.status.code(), Some(124), "{}", crate::cli::stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(crate::cli::stdout(&out), "before\n");
    assert!(
        crate::cli::stderr(&out).contains("timed out after 500ms"),
        "{}",
        crate::cli::stderr(&out)
    );
    let left = survivors(&mark);
    kill_marked(&mark);
    assert!(left.is_empty(), "survivors: {left:?}");
}

/// The files that decide what runs — the config, its drop-in policy directory, the compiled-policy cache — are
/// read-only for commands: one command cannot change what judges the next.
/// The attack run's route, through `run`: with the default cache (`~/.cache/shellward`, under the writable
/// `~/.cache`) and a configuration in the working directory (`.shellward/shellward.toml`), a command renames the
/// directories away to rebuild them with its own key or without the guard. Every rename is refused now, and the next
/// start still has the guard: `rm -rf /` is denied.
#[test]
fn a_command_cannot_rename_the_cache_or_the_configuration_away() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().canonicalize().unwrap().join("home");
    let work = dir.path().canonicalize().unwrap().join("work");
    std::fs::create_dir_all(work.join(".shellward")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let config = crate::cli::write_file(
        &work,
        ".shellward/shellward.toml",
        format!(
            "[[policy]]\nbuiltin = \"default\"\n[[policy]]\nbuiltin = \"guard\"\n[executor]\nworkdir = \"{}\"\n",
            work.display()
        ),
    );
    let shellward = |args: &[&str]| {
        crate::cli::shellward(&[])
            .args(args)
            .env("HOME", &home)
            .env_remove("XDG_CACHE_HOME")
            .env_remove("SHELLWARD_CACHE_DIR")
            .env_remove("SHELLWARD_CONFIG")
            .current_dir(&work)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    // A first start makes the cache.
    let first = shellward(&["run", "--config", config.to_str().unwrap(), "--", "true"]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        crate::cli::stderr(&first)
    );
    let cache = home.join(".cache/shellward");
    assert!(cache.join("policies").is_dir());
    let attack = format!(
        "mv ~/.cache/shellward ~/.cache/gone && echo cache-renamed; \
         mv {w}/.shellward {w}/gone && echo config-renamed; \
         mv {w} {w}-gone && echo workdir-renamed; true",
        w = work.display()
    );
    let out = shellward(&["run", "--config", config.to_str().unwrap(), "--", &attack]);
    let stdout = crate::cli::stdout_exited(&out, 0);
    assert!(!stdout.contains("renamed"), "{stdout}");
    assert!(!home.join(".cache/gone").exists() && !work.join("gone").exists());
    let check = shellward(&[
        "policy",
        "check",
        "--config",
        config.to_str().unwrap(),
        "--",
        "rm -rf /",
    ]);
    assert_eq!(
        check.status.code(),
        Some(3),
        "{}",
        crate::cli::stdout(&check)
    );
}

#[test]
fn a_command_cannot_rewrite_the_config_or_the_policies_that_judge_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("shellward.toml");
    let drop_ins = dir.path().join("policies.d");
    let cache = dir.path().join("cache");
    std::fs::create_dir(&drop_ins).unwrap();
    let text_before = format!(
        "[policies]\ndir = \"policies.d\"\n[sandbox]\ncache_dir = \"{}\"\n",
        cache.display()
    );
    std::fs::write(&config, &text_before).unwrap();
    let out = run(&[
        "--config",
        config.to_str().unwrap(),
        "--",
        &format!(
            "echo '[[policy]]' >> {c}; echo config=$?; touch {d}/evil.wasm; echo dropin=$?; \
             touch {k}/evil.cwasm; echo cache=$?; touch {dir}/beside; echo beside=$?",
            c = config.display(),
            d = drop_ins.display(),
            k = cache.display(),
            dir = dir.path().display(),
        ),
    ]);
    let stdout = crate::cli::stdout(&out);
    for step in ["config", "dropin", "cache"] {
        assert!(
            !stdout.contains(&format!("{step}=0")),
            "{step} was writable: {stdout}{}",
            crate::cli::stderr(&out)
        );
    }
    assert!(
        stdout.contains("beside=0"),
        "{stdout}{}",
        crate::cli::stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text_before);
    assert!(!drop_ins.join("evil.wasm").exists());
    assert!(!cache.join("evil.cwasm").exists());

    // The cache's key, with which entries are authenticated, cannot even be read: no command can forge an entry.
    let key = std::fs::read(cache.join("key")).expect("the run made the cache key");
    assert_eq!(key.len(), 32);
    let out = run(&[
        "--config",
        config.to_str().unwrap(),
        "--",
        &format!(
            "od -An -tx1 {}/key | tr -d ' \\n'; echo; echo done",
            cache.display()
        ),
    ]);
    let stdout = crate::cli::stdout(&out);
    let key_hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    assert!(
        stdout.contains("done"),
        "{stdout}{}",
        crate::cli::stderr(&out)
    );
    assert!(!stdout.contains(&key_hex), "the key was read: {stdout}");
}

/// `sandbox check` says what commands get, from a probe run in a session's sandbox: as root, as a normal user (a
/// user namespace), and with the sandbox turned off (exit 1, with the reason).
#[test]
fn sandbox_check_reports_what_commands_get_for_root_users_and_when_off() {
    let out = crate::cli::shellward(&[])
        .args(["sandbox", "check"])
        .env_remove("SHELLWARD_CONFIG")
        .output()
        .unwrap();
    let stdout = crate::cli::stdout_exited(&out, 0);
    assert!(
        stdout.contains("yes  session sandbox: PID and mount namespace per session"),
        "{stdout}"
    );
    assert!(stdout.contains("yes  no_new_privs"), "{stdout}");
    assert!(stdout.contains("yes  other sessions' output"), "{stdout}");
    assert!(stdout.contains("yes  host Unix sockets cut"), "{stdout}");
    assert!(
        stdout.contains("yes  refused writes seen as they happen"),
        "{stdout}"
    );
    assert!(
        stdout.contains("every directory on the way to them"),
        "{stdout}"
    );

    let out = shellward_test_support::command_as_user(std::path::Path::new(bin()))
        .args(["sandbox", "check"])
        .env_remove("SHELLWARD_CONFIG")
        .current_dir(std::env::temp_dir())
        .env("HOME", std::env::temp_dir())
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let stdout = crate::cli::stdout_exited(&out, 0);
    assert!(
        stdout.contains("in a user namespace of its own"),
        "{stdout}"
    );

    let dir = tempfile::tempdir().unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "off.toml",
        "[executor]\npid_namespace = false\n",
    );
    let out = crate::cli::shellward(&[])
        .args(["sandbox", "check", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = crate::cli::stdout_exited(&out, 1);
    assert!(
        stdout.contains("no   session sandbox: turned off ([executor] pid_namespace = false)"),
        "{stdout}"
    );
    assert!(stdout.contains("no   other sessions' output"), "{stdout}");

    // The ordinary-work lines read the configuration: what a tool needs that it does not give, and what to change.
    let config = crate::cli::write_file(
        dir.path(),
        "narrow.toml",
        "[confinement]\nnetwork = \"none\"\nwritable = [\"$WORKDIR\", \"/tmp\", \"/var/tmp\"]\nwatch_writes = false\n",
    );
    let out = crate::cli::shellward(&[])
        .args(["sandbox", "check", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = crate::cli::stdout(&out);
    let cargo = stdout
        .lines()
        .find(|l| l.contains("cargo build, cargo install (ordinary work)"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        cargo.starts_with("no ")
            && cargo.contains(".cargo/bin")
            && cargo.contains("add them to [confinement] writable"),
        "{cargo}"
    );
    assert!(
        stdout.contains("yes  temporary files (ordinary work)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "no   refused writes seen as they happen: turned off ([confinement] watch_writes = false)"
        ),
        "{stdout}"
    );
    let docker = stdout
        .lines()
        .find(|l| l.contains("host sockets (ordinary work)"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        docker.starts_with("no ") && docker.contains("[confinement] unix_sockets"),
        "{docker}"
    );
    assert!(
        stdout.contains(
            "yes  tmux, ssh-agent, gpg-agent, a test's own socket (ordinary work): a command's own"
        ),
        "{stdout}"
    );
}

#[test]
fn a_denied_command_exits_126_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = run(&[
        "--timeout",
        "0s",
        "--",
        &format!("touch {}", marker.display()),
    ]);
    // A zero timeout is a bad option value: a usage error (2), as `--timeout 5` is.
    assert_eq!(out.status.code(), Some(2), "{}", crate::cli::stderr(&out));
    assert!(
        crate::cli::stderr(&out).contains("greater than zero"),
        "{}",
        crate::cli::stderr(&out)
    );

    // The scripted test policy traps on the command `trap`; the chain fails closed, so the command is denied.
    let config = crate::cli::write_file(
        dir.path(),
        "scripted.toml",
        format!(
            "[[policy]]\npath = {:?}\n",
            shellward_policy::embedded::guests::SCRIPTED_POLICY
        ),
    );
    let out = run(&["--config", config.to_str().unwrap(), "--", "trap"]);
    assert_eq!(out.status.code(), Some(126), "{}", crate::cli::stderr(&out));
    let err = crate::cli::stderr(&out);
    assert!(
        err.contains("denied by") && err.contains("fail closed"),
        "{err}"
    );

    // A policy that fails to load is shellward's own failure, named by its config key.
    let bad = crate::cli::write_file(
        dir.path(),
        "bad-settings.toml",
        "[[policy]]\nbuiltin = \"default\"\n[policy.settings]\ndefault_timeout = \"forever\"\n",
    );
    let out = run(&[
        "--config",
        bad.to_str().unwrap(),
        "--",
        &format!("touch {}", marker.display()),
    ]);
    assert_eq!(out.status.code(), Some(125), "{}", crate::cli::stderr(&out));
    assert!(
        crate::cli::stderr(&out).contains("policy[0]"),
        "{}",
        crate::cli::stderr(&out)
    );
    assert!(!marker.exists());
}

#[test]
fn explain_prints_the_decision_and_background_plans_are_streamed_to_the_end() {
    let out = run(&["--explain", "--", "echo one; sleep 0.3; echo two &"]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::cli::stderr(&out));
    let err = crate::cli::stderr(&out);
    assert!(err.contains("decision:   run"), "{err}");
    assert!(err.contains("mode:       background"), "{err}");
    assert!(err.contains("running in the background as p1-"), "{err}");
    // No log path is announced: it would be gone when `run` exits (every byte is streamed instead).
    assert!(!err.contains(".log"), "{err}");
    assert_eq!(crate::cli::stdout(&out), "one\ntwo\n");
}

#[test]
fn json_reports_the_tool_result() {
    let out = run(&["--json", "--", "printf 'a\\nb\\n'; exit 2"]);
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["exit_code"], 2);
    assert_eq!(v["success"], false);
    assert_eq!(v["output"], "a\nb\n");
    assert_eq!(v["decision"]["decision"], "run");
}

#[test]
fn output_is_streamed_live() {
    let (mut child, mut stdout) = crate::cli::spawn_reading(
        crate::cli::shellward(&["run", "--", "echo first; sleep 3; echo second"])
            .stderr(Stdio::piped()),
    );
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "first\n");
    // The first line arrived while the command is still sleeping.
    assert!(
        child.try_wait().unwrap().is_none(),
        "output was not streamed before the end"
    );
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "second\n");
    assert_eq!(
        wait_exit(&mut child, Duration::from_secs(20)).code(),
        Some(0)
    );
}

#[test]
fn sigint_terminates_the_whole_tree() {
    let mark = new_mark("run-sigint");
    let mut command = crate::cli::shellward(&[]);
    command
        .args([
            "run",
            "--env",
            &format!("{MARK}={mark}"),
            "--timeout",
            "1h",
            "--",
            "sleep 300 & setsid sleep 301 & (trap '' TERM; sleep 302) & echo ready; wait",
        ])
        .stderr(Stdio::piped());
    let (mut child, mut stdout) = crate::cli::spawn_reading(&mut command);
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    while crate::cli::survivors_now(&mark).len() < 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    crate::cli::signal(&child, Signal::SIGINT);
    let status = wait_exit(&mut child, Duration::from_secs(20));
    let left = survivors(&mark);
    kill_marked(&mark);
    assert_eq!(status.code(), Some(130));
    assert!(left.is_empty(), "survivors after Ctrl-C: {left:?}");
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("interrupted"), "{err}");
}

#[test]
fn secrets_in_shellwards_environment_never_reach_a_command() {
    let env_of = |config: Option<&std::path::Path>| {
        let mut cmd = crate::cli::shellward(&[]);
        cmd.arg("run");
        if let Some(c) = config {
            cmd.arg("--config").arg(c);
        }
        let out = cmd
            .args(["--", "env"])
            .stdin(Stdio::null())
            .env_remove("SHELLWARD_CONFIG")
            .env("SHELLWARD_TOKEN", "tok-9f8e7d")
            .env("MY_API_KEY", "key-1a2b3c")
            .env("github_token", "gh-4d5e6f")
            .env("PLAIN_SETTING", "plain-ok")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", crate::cli::stderr(&out));
        crate::cli::stdout(&out)
    };
    let env = env_of(None);
    for secret in ["tok-9f8e7d", "key-1a2b3c", "gh-4d5e6f", "SHELLWARD_TOKEN"] {
        assert!(
            !env.contains(secret),
            "{secret} reached the command:\n{env}"
        );
    }
    assert!(env.contains("PLAIN_SETTING=plain-ok"), "{env}");
    assert!(env.contains("PATH="), "{env}");
    // The operator opts in by name; the host's own token is never inherited.
    let dir = tempfile::tempdir().unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "env.toml",
        "[env]\nallow = [\"MY_API_KEY\", \"SHELLWARD_TOKEN\"]\nexclude = [\"PLAIN_*\"]\n",
    );
    let env = env_of(Some(&config));
    assert!(env.contains("MY_API_KEY=key-1a2b3c"), "{env}");
    assert!(!env.contains("tok-9f8e7d"), "{env}");
    assert!(!env.contains("gh-4d5e6f"), "{env}");
    assert!(!env.contains("PLAIN_SETTING"), "{env}");
    // `core` keeps only the basics.
    std::fs::write(&config, "[env]\ninherit = \"core\"\n").unwrap();
    let env = env_of(Some(&config));
    assert!(!env.contains("PLAIN_SETTING"), "{env}");
    assert!(env.contains("PATH="), "{env}");
}

/// A Python daemon that double-forks with `setsid`, in a `shellward run` that is interrupted (SIGINT) shortly after
/// it starts, while CPU burners load both cores: nothing of the tree may survive, on either containment path, in 20
/// runs in a row each. The delay before the signal varies so that it lands before, during and after the forks.
#[test]
fn an_interrupted_run_leaves_no_daemon_behind_under_load() {
    if Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .is_err()
    {
        panic!("python3 is needed for this test; install it (apt-get install python3)");
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = crate::cli::write_file(
        dir.path(),
        "daemon.py",
        "import os, time\n\
         if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(300)\n    os._exit(0)\n\
         time.sleep(300)\n",
    );
    let pg = crate::cli::write_file(
        dir.path(),
        "pg.toml",
        "[executor]\ncontainment = \"process-group\"\n",
    );
    // Load: two busy loops, ours to stop (by the handles we hold), also if the test fails.
    struct Burners(Vec<std::process::Child>);
    impl Drop for Burners {
        fn drop(&mut self) {
            for b in &mut self.0 {
                let _ = b.kill();
                let _ = b.wait();
            }
        }
    }
    let burners = Burners(
        (0..2)
            .map(|_| {
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()
                    .unwrap()
            })
            .collect(),
    );
    let mut failures = Vec::new();
    for (path, config) in [("auto", None), ("process-group", Some(&pg))] {
        for i in 0..20u64 {
            let mark = new_mark("run-load");
            let mut cmd = crate::cli::shellward(&[]);
            cmd.arg("run");
            if let Some(c) = config {
                cmd.arg("--config").arg(c);
            }
            let mut child = cmd
                .args(["--env", &format!("{MARK}={mark}"), "--timeout", "1h", "--"])
                .arg(format!("python3 {}", daemon.display()))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .env_remove("SHELLWARD_CONFIG")
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(20 + (i * 37) % 160));
            crate::cli::signal(&child, Signal::SIGINT);
            crate::cli::wait_exit_labeled(
                &mut child,
                Duration::from_secs(30),
                &format!("({path} containment, run {i})"),
            );
            let left = survivors(&mark);
            kill_marked(&mark);
            if !left.is_empty() {
                failures.push(format!("{path} run {i}: survivors {left:?}"));
            }
        }
    }
    drop(burners);
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn completions_and_the_manual_page_are_generated() {
    for (shell, needle) in [
        ("bash", "complete"),
        ("zsh", "#compdef shellward"),
        ("fish", "complete -c shellward"),
    ] {
        let out = crate::cli::shellward(&[])
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{shell}: {}",
            crate::cli::stderr(&out)
        );
        let script = crate::cli::stdout(&out);
        assert!(script.contains(needle), "{shell}: {script}");
        for sub in ["run", "mcp", "serve", "policy"] {
            assert!(script.contains(sub), "{shell} completion lacks {sub}");
        }
    }
    let man = crate::cli::shellward(&[]).arg("man").output().unwrap();
    assert!(man.status.success());
    let page = crate::cli::stdout(&man);
    assert!(
        page.starts_with(".ie") || page.contains(".TH shellward"),
        "{page}"
    );
    // A real manual: every command (nested ones too) with its options, and exit status, files and environment;
    // no references to pages that do not exist.
    for needle in [
        ".SH COMMANDS",
        ".SS shellward run",
        ".SS shellward policy check",
        ".SS shellward config init",
        "\\-\\-timeout",
        ".SH EXIT STATUS",
        ".SH FILES",
        ".SH ENVIRONMENT",
        "SHELLWARD_CONFIG",
    ] {
        assert!(page.contains(needle), "the manual lacks {needle:?}");
    }
    assert!(
        !page.contains("shellward\\-run(1)"),
        "a reference to a page that does not exist"
    );
    // Rendered by man(1) where it is installed, without warnings.
    if let Ok(o) = Command::new("man")
        .args(["--warnings", "-l", "-"])
        .env("MANWIDTH", "100")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(page.as_bytes())?;
            child.wait_with_output()
        })
    {
        assert!(
            crate::cli::stdout(&o).contains("EXIT STATUS"),
            "{}",
            crate::cli::stderr(&o)
        );
        assert!(o.stderr.is_empty(), "man warns: {}", crate::cli::stderr(&o));
    }
    // Every policy subcommand is described in the top-level help.
    let help = crate::cli::stdout(&crate::cli::output(&["--help"]));
    for word in ["check", "test", "bench", "inspect", "new"] {
        assert!(
            help.contains(word),
            "--help does not mention policy {word}:\n{help}"
        );
    }
}

#[test]
fn a_python_programs_output_arrives_while_it_runs() {
    // Python buffers a pipe unless told not to: the line must be streamed before the program ends.
    let (mut child, mut stdout) = crate::cli::spawn_reading(
        crate::cli::shellward(&[
            "run",
            "--",
            "python3 -c 'import time; print(\"banner\"); time.sleep(30)'",
        ])
        .stderr(Stdio::null())
        .env_remove("PYTHONUNBUFFERED"),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(10));
    crate::cli::signal(&child, Signal::SIGINT);
    wait_exit(&mut child, Duration::from_secs(20));
    assert_eq!(
        line.as_deref(),
        Ok("banner\n"),
        "the banner did not arrive while the program ran"
    );
}

#[test]
fn run_goes_through_the_facade_and_is_audited_like_every_surface() {
    let dir = tempfile::tempdir().unwrap();
    let config = crate::cli::write_file(
        dir.path(),
        "shellward.toml",
        "[audit]\npath = \"audit.jsonl\"\n[executor]\ndrain = \"300ms\"\n",
    );
    let cfg = config.to_str().unwrap();
    let ok = run(&["--config", cfg, "--", "echo hi"]);
    assert_eq!(ok.status.code(), Some(0), "{}", crate::cli::stderr(&ok));
    assert_eq!(crate::cli::stdout(&ok), "hi\n");
    let denied = run(&["--config", cfg, "--", "rm -rf /"]);
    assert_eq!(denied.status.code(), Some(126));
    assert!(
        crate::cli::stderr(&denied).contains("denied by guard"),
        "{}",
        crate::cli::stderr(&denied)
    );
    let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<(&str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["type"].as_str().unwrap(),
                r["outcome"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [("decision", "run"), ("end", ""), ("decision", "deny")],
        "{audit}"
    );
    assert!(records.iter().all(|r| r["surface"] == "run"), "{audit}");
    assert_eq!(records[1]["exit_code"], 0, "{audit}");
}

/// `run --interactive` relays stdin to the command and ends its input with this stdin; `--tty` gives it a terminal.
#[test]
fn interactive_runs_relay_stdin() {
    use std::io::Write;
    let relay = |args: &[&str], input: &str| -> Output {
        let mut child = crate::cli::shellward(&[])
            .arg("run")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_remove("SHELLWARD_CONFIG")
            .spawn()
            .expect("run shellward");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let o = relay(&["--interactive", "--", "python3 -q"], "print(6*7)\n");
    assert_eq!(o.status.code(), Some(0), "{}", crate::cli::stderr(&o));
    assert_eq!(crate::cli::stdout(&o), "42\n");
    let o = relay(
        &["--interactive", "--", "tty -s; echo tty=$?; cat"],
        "line\n",
    );
    assert_eq!(
        crate::cli::stdout(&o),
        "tty=1\nline\n",
        "{}",
        crate::cli::stderr(&o)
    );
    let o = relay(
        &[
            "--tty",
            "--",
            "tty -s && echo on-a-terminal; read x; echo got $x",
        ],
        "hi\n",
    );
    assert_eq!(o.status.code(), Some(0), "{}", crate::cli::stderr(&o));
    let out = crate::cli::stdout(&o);
    assert!(
        out.contains("on-a-terminal") && out.contains("got hi"),
        "{out:?}"
    );
    assert!(!out.contains('\r'), "{out:?}");
    // A REPL on a terminal ends when its input does (the end-of-input ^D it missed while it set the terminal up is
    // sent again): this run used to wait forever.
    let mut child = crate::cli::shellward(&[])
        .args(["run", "--tty", "--", "python3 -q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env_remove("SHELLWARD_CONFIG")
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"print(6*7)\n")
        .unwrap();
    let status = wait_exit(&mut child, Duration::from_secs(20));
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{out}");
    assert!(out.contains("42"), "{out}");
    // Without the flags a command reading stdin sees end of input at once.
    let o = relay(&["--", "cat; echo done"], "ignored\n");
    assert_eq!(crate::cli::stdout(&o), "done\n");
}

/// `run --preview` prints the command's output and its change set, exits 0, and applies nothing; `--json` answers
/// the tool's result with `applied: false`; a denied command is not previewed (126).
#[test]
fn run_preview_shows_the_change_set_and_applies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::write(ws.join("notes"), "one\n").unwrap();
    std::fs::write(ws.join("gone"), "x").unwrap();
    let w = ws.display().to_string();
    let out = run(&[
        "--preview",
        "--workdir",
        &w,
        "--",
        "rm gone; echo two >> notes; echo said; exit 3",
    ]);
    let text = crate::cli::stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        crate::cli::stderr(&out)
    );
    assert!(
        text.starts_with("said\n--- preview (exit 3): nothing was applied\n"),
        "{text}"
    );
    assert!(
        text.contains("would delete 1 path (gone), modify 1 (notes), create 0"),
        "{text}"
    );
    assert!(text.contains(&format!("  deleted      {w}/gone")), "{text}");
    assert!(text.contains("      +two"), "{text}");
    assert_eq!(std::fs::read_to_string(ws.join("notes")).unwrap(), "one\n");
    assert!(ws.join("gone").exists());
    let json = run(&["--preview", "--json", "--workdir", &w, "--", "rm gone"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["applied"], false, "{v}");
    assert_eq!(v["preview"]["totals"]["deleted"], 1, "{v}");
    assert!(ws.join("gone").exists());
    // The guard asks about `shred -u`: previewed without asking. `--preview` with `--background` is a usage error.
    let asked = run(&["--preview", "--workdir", &w, "--", "shred -u gone"]);
    assert_eq!(
        asked.status.code(),
        Some(0),
        "{}",
        crate::cli::stderr(&asked)
    );
    assert!(crate::cli::stdout(&asked).contains("would delete 1 path (gone)"));
    assert!(ws.join("gone").exists());
    let usage = run(&["--preview", "--background", "--", "true"]);
    assert_eq!(usage.status.code(), Some(2));
}
