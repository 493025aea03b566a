//! The facade's answers an agent relies on, in-process: input-wait, readiness, the session's working directory,
//! client tokens and confinement. Every test proves none of its processes survive.

// Unix only: these tests prove what the facade does on Linux (`/proc` scans, signals, sandboxes); the executor's
// `portable.rs` and the CLI's Windows tests cover what every platform shares.
#![cfg(unix)]

use crate::common::*;
use serde_json::json;
use shellward::tools::{ExecuteArgs, ProcessListArgs};
use shellward::{Config, Shellward, ToolErrorKind};
use std::time::{Duration, Instant};

/// `command` started interactive in the background, then its output once quiet for `idle`.
async fn interactive_output(
    sw: &Shellward,
    command: &str,
    idle: &str,
) -> shellward::tools::ProcessOutputResult {
    let mut args = exec(command);
    args.interactive = Some(true);
    args.run_in_background = Some(true);
    let r = run(sw, args).await;
    sw.without_session()
        .process_output(
            shellward::tools::ProcessOutputArgs::new(r.process_id.clone().unwrap()).idle(idle),
        )
        .await
        .unwrap()
}

/// A REPL's answer comes back as soon as its next prompt waits for input (not after the idle window), saying so;
/// a process blocked on `read` is reported waiting for input, a sleeping one is not — with a pipe and with a
/// terminal as stdin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_waiting_for_input_is_answered_at_once() {
    use shellward::tools::{ProcessInputArgs, ProcessOutputArgs};
    let mark = new_mark();
    let sw = instance(&mark);
    for tty in [false, true] {
        let mut args = exec("python3 -q -i");
        args.interactive = Some(true);
        args.tty = Some(tty);
        args.run_in_background = Some(true);
        let r = run(&sw, args).await;
        let id = r.process_id.clone().expect("an id");
        // Let the interpreter start and print its first prompt.
        let first = sw
            .without_session()
            .process_output(ProcessOutputArgs::new(id.clone()).idle("3s"))
            .await
            .unwrap();
        assert!(first.waiting_for_input, "tty={tty}: {first:?}");
        let started = Instant::now();
        let answer = sw
            .without_session()
            .process_input(
                ProcessInputArgs::new(id.clone())
                    .text("print(6*7)\n")
                    .idle("3s"),
            )
            .await
            .unwrap();
        let took = started.elapsed();
        assert!(answer.output.contains("42"), "tty={tty}: {answer:?}");
        assert!(answer.waiting_for_input, "tty={tty}: {answer:?}");
        println!("tty={tty}: a REPL exchange answered in {took:?}");
        assert!(
            took < Duration::from_millis(1500),
            "tty={tty}: the answer waited {took:?} (the idle window is 3 s)"
        );
        sw.without_session()
            .process_signal(shellward::tools::ProcessSignalArgs::new(
                id,
                shellward::tools::SignalName::Kill,
            ))
            .await
            .unwrap();
    }
    // A sleeping interactive process is not waiting for input.
    let out = interactive_output(&sw, "sleep 30", "300ms").await;
    assert!(!out.waiting_for_input, "{out:?}");
    // One blocked on `read` is.
    let out = interactive_output(&sw, "read answer; echo got $answer", "3s").await;
    assert!(out.waiting_for_input, "{out:?}");
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// A background start is answered as soon as it listens (naming the port) or fails (with its exit and error text),
/// and a quiet one that does neither within the start-up limit is answered running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_start_is_answered_when_ready_failed_or_at_the_limit() {
    let mark = new_mark();
    let sw = instance(&mark);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let background = |command: String| ExecuteArgs::new(command).background(true);
    // Listens after 1.5 s.
    let started = Instant::now();
    let r = sw
        .without_session()
        .execute(
            background(format!(
                "sleep 1.5; exec python3 -m http.server --bind 127.0.0.1 {port}"
            )),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(r.running, "{r:?}");
    assert_eq!(r.listening, [format!("tcp 127.0.0.1:{port}")], "{r:?}");
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains(&format!("listening on 127.0.0.1:{port}"))),
        "{:?}",
        r.notes
    );
    println!("ready after {took:?}");
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_millis(2900),
        "{took:?}"
    );
    // Fails after 1.2 s.
    let r = sw
        .without_session()
        .execute(
            background("sleep 1.2; echo 'port already in use' >&2; exit 1".into()),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(!r.running, "{r:?}");
    assert_eq!(r.exit_code, Some(1), "{r:?}");
    assert!(r.output.contains("port already in use"), "{r:?}");
    // Neither: answered running at the limit (3 s by default).
    let started = Instant::now();
    let r = run(&sw, background("sleep 30".into())).await;
    let took = started.elapsed();
    assert!(r.running && r.listening.is_empty(), "{r:?}");
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_secs(6),
        "{took:?}"
    );
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}

/// A session keeps its working directory between `execute` calls, as a terminal keeps its `cd`; other sessions do
/// not see it, a per-call `workdir` wins for that call, and the exit status and output are the command's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_its_working_directory() {
    let mark = new_mark();
    let sw = instance(&mark);
    let scratch = tempfile::tempdir().unwrap();
    let base = scratch.path().canonicalize().unwrap();
    let deep = base.join("a/b");
    std::fs::create_dir_all(&deep).unwrap();
    let pwd = |sw: &Shellward, session: Option<&'static str>| {
        let sw = sw.clone();
        async move {
            sw.at(session)
                .execute(exec("pwd"), ExecuteOptions::new())
                .await
                .unwrap()
                .output
        }
    };
    let start = pwd(&sw, Some("one")).await;
    let r = run_in(
        &sw,
        "one",
        exec(&format!("cd {}; echo moved", deep.display())),
    )
    .await;
    assert_eq!(
        r.output, "moved\n",
        "the output is the command's own: {r:?}"
    );
    assert_eq!(pwd(&sw, Some("one")).await, format!("{}\n", deep.display()));
    // The directory is reported by the executor, not by a rewrite of the command: the process's details (what
    // process_list and Coder's routes show) carry the command as the policies decided it, byte for byte.
    let moved = sw
        .session("one")
        .processes()
        .processes
        .into_iter()
        .find(|p| p.id.as_str() == r.process_id.as_deref().unwrap_or_default())
        .expect("the finished run is still kept");
    assert_eq!(moved.command, format!("cd {}; echo moved", deep.display()));
    // Relative moves go on from there.
    run_in(&sw, "one", exec("cd ..")).await;
    assert_eq!(
        pwd(&sw, Some("one")).await,
        format!("{}\n", base.join("a").display())
    );
    // Another session is where it was.
    assert_eq!(pwd(&sw, Some("two")).await, start);
    // A per-call workdir wins for that call and leaves the session's directory alone.
    let mut args = exec("pwd");
    args.workdir = Some(base.display().to_string());
    assert_eq!(
        run_in(&sw, "one", args).await.output,
        format!("{}\n", base.display())
    );
    assert_eq!(
        pwd(&sw, Some("one")).await,
        format!("{}\n", base.join("a").display())
    );
    // `exit 3` after a cd: the status is the command's, the directory is kept.
    let r = run_in(&sw, "one", exec(&format!("cd {}; exit 3", deep.display()))).await;
    assert_eq!(r.exit_code, Some(3), "{r:?}");
    assert_eq!(pwd(&sw, Some("one")).await, format!("{}\n", deep.display()));
    // A directory that is gone falls back to the default.
    std::fs::remove_dir_all(base.join("a")).unwrap();
    assert_eq!(pwd(&sw, Some("one")).await, start);
    // Nothing is left behind in the temporary directory.
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!(".shellward-cwd-{}-", std::process::id()))
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
    sw.shutdown().await;
}

/// An instance for the client-token tests: short grace, and a background start answers after 200 ms (so a start is
/// still running when answered).
fn token_instance(mark: &str) -> Shellward {
    let mut config = Config::default();
    config.executor.grace = Duration::from_millis(300);
    config.executor.env.set_var(MARK, mark);
    config.tools.startup_wait = Duration::from_millis(200);
    Shellward::builder().config(config).build().expect("build")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_execute_with_a_client_token_starts_nothing_new() {
    let mark = new_mark();
    let sw = token_instance(&mark);
    let dir = tempfile::tempdir().unwrap();
    let tally = dir.path().join("tally");
    let with_token = |command: String, token: &str| ExecuteArgs::new(command).client_token(token);
    let runs = || {
        std::fs::read_to_string(&tally)
            .unwrap_or_default()
            .lines()
            .count()
    };

    // A foreground call and its retry: one run, the first result returned, marked attached.
    let count_once = format!("echo run >> {}; echo done", tally.display());
    let first = run_in(&sw, "s1", with_token(count_once.clone(), "t-1")).await;
    assert!(first.success && !first.attached, "{first:?}");
    let again = run_in(&sw, "s1", with_token(count_once.clone(), "t-1")).await;
    assert!(again.attached, "{again:?}");
    assert_eq!(
        (again.process_id.clone(), again.output.clone()),
        (first.process_id.clone(), first.output.clone())
    );
    assert!(again.notes[0].contains("retry"), "{:?}", again.notes);
    assert_eq!(runs(), 1);

    // The token with another call is refused, and nothing runs; another session's token of that name is its own.
    let e = sw
        .session("s1")
        .execute(
            with_token(format!("{count_once}; true"), "t-1"),
            ExecuteOptions::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Conflict, "{e}");
    assert!(e.message.contains("client_token"), "{e}");
    let mut changed = with_token(count_once.clone(), "t-1");
    changed.env = Some([("X".to_string(), "1".to_string())].into());
    assert_eq!(
        sw.session("s1")
            .execute(changed, ExecuteOptions::new())
            .await
            .unwrap_err()
            .kind,
        ToolErrorKind::Conflict
    );
    assert_eq!(runs(), 1);
    let other = run_in(&sw, "s2", with_token(count_once.clone(), "t-1")).await;
    assert!(!other.attached);
    assert_eq!(runs(), 2);

    // A retry while the first call still runs waits for it and gets its result; a first call whose caller went
    // away (its future dropped) still runs to its result, which the retry gets.
    let slow = format!("sleep 0.6; echo run >> {}; echo slow", tally.display());
    let gone = tokio::spawn({
        let (sw, slow) = (sw.clone(), slow.clone());
        async move {
            sw.session("s1")
                .execute(with_token(slow, "t-2"), ExecuteOptions::new())
                .await
        }
    });
    // Its caller goes away once its command runs.
    let deadline = Instant::now() + Duration::from_secs(10);
    while shellward_test_support::with_env(&format!("{MARK}={mark}")).is_empty() {
        assert!(Instant::now() < deadline, "the first call never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    gone.abort();
    let waited = run_in(&sw, "s1", with_token(slow.clone(), "t-2")).await;
    assert!(waited.attached, "{waited:?}");
    assert_eq!(waited.output, "slow\n");
    assert_eq!(runs(), 3);

    assert!(survivors(&mark).is_empty());
}

/// A background start, a deny and bad tokens under client tokens: one process whose state a retry brings up to date,
/// a deny returned to its retry, bad tokens refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_tokens_cover_background_starts_denies_and_bad_tokens() {
    let mark = new_mark();
    let sw = token_instance(&mark);
    let with_token = |command: String, token: &str| ExecuteArgs::new(command).client_token(token);
    // A background start and its retry: one process, whose state the retry brings up to date.
    let bg = with_token("sleep 0.6; exit 4".into(), "t-3").background(true);
    let started = run_in(&sw, "s1", bg.clone()).await;
    assert!(started.running, "{started:?}");
    let id = started.process_id.clone().unwrap();
    sw.session("s1").process(&id).wait().await.unwrap();
    let later = run_in(&sw, "s1", bg).await;
    assert!(later.attached && !later.running, "{later:?}");
    assert_eq!(later.exit_code, Some(4));
    assert_eq!(later.process_id, started.process_id);
    let listed = sw
        .session("s1")
        .process_list(ProcessListArgs::default())
        .await
        .unwrap();
    assert_eq!(
        listed
            .processes
            .iter()
            .filter(|p| p.command == "sleep 0.6; exit 4")
            .count(),
        1
    );

    // A deny is a result too: the retry gets it without asking the policies again.
    let denied = run_in(&sw, "s1", with_token("kill -9 -1".into(), "t-4")).await;
    assert!(denied.denied);
    let again = run_in(&sw, "s1", with_token("kill -9 -1".into(), "t-4")).await;
    assert!(again.denied && again.attached, "{again:?}");

    // Bad tokens are the caller's to fix.
    for bad in ["", "  ", &"x".repeat(300)] {
        let e = sw
            .without_session()
            .execute(with_token("true".into(), bad), ExecuteOptions::new())
            .await
            .unwrap_err();
        assert_eq!(e.kind, ToolErrorKind::InvalidArguments, "{bad:?}: {e}");
    }
    assert!(survivors(&mark).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confinement_limits_writes_hides_secrets_and_cuts_the_network() {
    let mark = new_mark();
    let dir = tempfile::tempdir().unwrap();
    let (work, elsewhere) = (dir.path().join("work"), dir.path().join("elsewhere"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let secret = dir.path().join("secret-key");
    std::fs::write(&secret, "SECRET-VALUE-42\n").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let build = |network: &str| {
        let file = dir.path().join(format!("shellward-{network}.toml"));
        std::fs::write(
            &file,
            format!(
                "[confinement]\nnetwork = \"{network}\"\nwritable = [\"$WORKDIR\"]\ndeny_read = [\"{}\"]\n\
                 [executor]\nworkdir = \"{}\"\ngrace = \"300ms\"\n[env.set]\n{MARK} = \"{mark}\"\n",
                secret.display(),
                work.display()
            ),
        )
        .unwrap();
        Shellward::builder()
            .config(Config::load(&file).expect("config"))
            .build()
            .expect("build")
    };
    let sw = build("none");
    // Writes: the working directory yes, elsewhere no — with a note saying where writes go.
    let r = run(&sw, exec("echo data > made && cat made")).await;
    assert_eq!(r.output, "data\n", "{r:?}");
    let line = r.confinement.clone().expect("a confinement line");
    assert!(
        line.contains("writes only under")
            && line.contains("network none")
            && line.contains("hidden"),
        "{line}"
    );
    let r = sw
        .without_session()
        .execute(
            exec(&format!("echo data > {}/x", elsewhere.display())),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(!r.success, "{r:?}");
    assert!(!elsewhere.join("x").exists());
    assert!(
        r.notes.iter().any(|n| n.contains("writable")),
        "{:?}",
        r.notes
    );
    // The model cannot widen writes by choosing the directory: `$WORKDIR` is the configured one, not the call's.
    let r = sw
        .without_session()
        .execute(
            exec("echo data > y").workdir(elsewhere.display().to_string()),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(!r.success && !elsewhere.join("y").exists(), "{r:?}");
    // Reads: the denied file cannot be read; an ordinary one can.
    let r = sw
        .without_session()
        .execute(
            exec(&format!(
                "cat {}; cat /etc/hostname >/dev/null && echo ordinary",
                secret.display()
            )),
            ExecuteOptions::new(),
        )
        .await
        .unwrap();
    assert!(!r.output.contains("SECRET-VALUE"), "{r:?}");
    assert!(r.output.contains("ordinary"), "{r:?}");
    // Network none: the test's listener is out of reach, and the note says why.
    let reach = format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'");
    let r = run(&sw, exec(&reach)).await;
    assert!(!r.success, "{r:?}");
    assert!(
        r.notes.iter().any(|n| n.contains("network")),
        "{:?}",
        r.notes
    );
    // System calls: ptrace is refused by default (the operator's deny_syscalls), with a note saying so.
    let r = sw
        .without_session().execute(exec("python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); print(\"ptrace\", l.ptrace(0, 0, 0, 0), ctypes.get_errno())'"), ExecuteOptions::new())
        .await
        .unwrap();
    assert_eq!(r.output, "ptrace -1 1\n", "{r:?}");
    assert!(confinement_says(&r, "system calls refused"), "{r:?}");
    // The model cannot widen it: no argument names it (unknown arguments are refused).
    let e = sw
        .without_session()
        .call(
            "execute",
            json!({"command": "true", "confinement": {"network": "host"}}),
            ExecuteOptions::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidArguments);
    sw.shutdown().await;
    // With the host's network the same command reaches it.
    let sw = build("host");
    let r = run(&sw, exec(&reach)).await;
    assert!(r.success, "{r:?}");
    sw.shutdown().await;
    drop(listener);
    assert!(survivors(&mark).is_empty());
}

/// A session whose working directory its user cannot write (a client that started shellward in `/`) is told so in its
/// first result — what fails there and how to choose another — and only once; a directory the host chooses for the
/// session (`SessionHandle::set_workdir`, what an MCP client's first root becomes) is where its commands run next, and
/// a path that is no directory is refused. Run as a normal user (root may write anywhere).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_working_directory_is_said_once_and_a_chosen_one_is_used() {
    if !shellward_test_support::as_unprivileged_user(
        shellward_test_support::test_path!(
            "an_unwritable_working_directory_is_said_once_and_a_chosen_one_is_used"
        ),
        "SHELLWARD_TEST_UNWRITABLE_AS_USER",
    ) {
        return;
    }
    let mark = new_mark();
    let mut config = Config::default();
    config.executor.grace = Duration::from_millis(300);
    config.executor.env.set_var(MARK, &mark);
    config.executor.default_workdir = Some("/".into());
    let sw = Shellward::builder().config(config).build().expect("build");
    let session = sw.session("desktop");
    let said = |r: &shellward::tools::ExecuteResult| {
        r.notes
            .iter()
            .filter(|n| n.contains("is not writable"))
            .count()
    };
    let first = session
        .execute(exec("pwd"), ExecuteOptions::new())
        .await
        .unwrap();
    assert_eq!(first.output, "/\n", "{first:?}");
    assert_eq!(said(&first), 1, "{first:?}");
    let note = first
        .notes
        .iter()
        .find(|n| n.contains("is not writable"))
        .unwrap();
    assert!(
        note.contains("workdir") && note.contains("--workdir"),
        "{note}"
    );
    let again = session
        .execute(exec("pwd"), ExecuteOptions::new())
        .await
        .unwrap();
    assert_eq!(said(&again), 0, "said twice: {again:?}");
    // Another session in the same place is told too.
    let other = run_in(&sw, "other", exec("true")).await;
    assert_eq!(said(&other), 1, "{other:?}");
    // The host chooses a directory for the session: its commands run there, and nothing is said.
    let project = tempfile::tempdir().unwrap();
    let project_dir = project.path().canonicalize().unwrap();
    session.set_workdir(&project_dir).unwrap();
    let there = session
        .execute(exec("pwd; touch made"), ExecuteOptions::new())
        .await
        .unwrap();
    assert_eq!(
        there.output,
        format!("{}\n", project_dir.display()),
        "{there:?}"
    );
    assert!(project_dir.join("made").exists(), "{there:?}");
    assert_eq!(said(&there), 0);
    let e = session.set_workdir("relative/dir").unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::InvalidArguments);
    assert!(session.set_workdir(project_dir.join("made")).is_err());
    sw.shutdown().await;
    assert!(survivors(&mark).is_empty());
}
