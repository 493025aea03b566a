//! The sandbox is the session: a session's commands share one PID and mount namespace, so a server one command
//! started is found and stopped by the next (`pgrep`, `kill PID`), while other sessions and the host's processes stay
//! invisible and out of reach; an idle, empty sandbox ends, a busy one does not.

// Unix only: these tests prove Linux containment (`/proc`, signals, namespaces); `portable.rs` holds what every
// platform shares.
#![cfg(unix)]

use crate::common::*;
use shellward_exec::{ExecPlan, Executor, Session};
use std::time::{Duration, Instant};

fn in_session(command: &str, session: &str) -> ExecPlan {
    let mut plan = ExecPlan::new(command);
    plan.session = Some(session.into());
    plan
}

/// Starts `command` (which prints `started` once it runs) in the background in `session`, marked with `mark`, and
/// returns once it has said so.
async fn started_in(ex: &Executor, session: &str, command: &str, mark: &str) {
    let mut plan = marked_plan(command, mark);
    plan.session = Some(session.into());
    plan.background = true;
    let r = ex.execute(plan).await.unwrap();
    wait_for_output_in(ex, &r.id, Some(&Session::from(session)), "started").await;
}

/// The number a probe printed as `visible=N` (how many processes it saw).
fn visible_count(text: &str) -> usize {
    text.lines()
        .find_map(|l| l.strip_prefix("visible="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no visible= line in {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_s_commands_see_and_stop_each_other_and_other_sessions_see_nothing() {
    let ex = confined(namespaced()).await;
    let mark = new_mark();
    started_in(&ex, "a", "echo started; exec sleep 4242", &mark).await;

    // Another session: neither the server nor anything of session a, and only a handful of processes.
    let other = ex
        .execute(in_session(
            "pgrep -f 'slee[p] 4242' || echo none; echo visible=$(ps -e --no-headers | wc -l)",
            "b",
        ))
        .await
        .unwrap();
    assert!(other.output.text.starts_with("none\n"), "{other:?}");
    let visible = visible_count(&other.output.text);
    assert!(
        visible <= 5,
        "session b sees {visible} processes: {other:?}"
    );

    // The same session: found by name and stopped by its pid, as in a terminal.
    let stop = ex
        .execute(in_session(
            "pid=$(pgrep -f 'slee[p] 4242'); echo found=$pid; ps -e -o comm= | sort | tr '\\n' ' '; echo; \
             kill $pid; echo kill=$?",
            "a",
        ))
        .await
        .unwrap();
    assert!(!stop.output.text.contains("found=\n"), "{stop:?}");
    assert!(stop.output.text.contains("kill=0"), "{stop:?}");
    assert!(stop.output.text.contains("sleep"), "{stop:?}");
    assert!(
        survivors_after(&mark, Duration::from_secs(5)).is_empty(),
        "the server outlived kill PID: {stop:?}"
    );
    // The host's processes are not there: this test's own pid means nothing inside.
    let host = ex
        .execute(in_session(
            &format!("kill -0 {} 2>/dev/null; echo probe=$?", std::process::id()),
            "a",
        ))
        .await
        .unwrap();
    assert!(
        !host.output.text.contains("probe=0") || std::process::id() < 10,
        "{host:?}"
    );
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_minus_one_reaches_only_its_own_session() {
    let ex = confined(namespaced()).await;
    let mark = new_mark();
    started_in(&ex, "other", "echo started; exec sleep 300", &mark).await;
    let mut sentinel = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let mut attack = in_session(
        "python3 -c 'import os, time; time.sleep(0.2); os.kill(-1, 9)'; echo after",
        "attacker",
    );
    attack.timeout = Some(Duration::from_secs(20));
    let r = ex.execute(attack).await.unwrap();
    let alive = sentinel.try_wait().unwrap().is_none();
    let _ = sentinel.kill();
    let _ = sentinel.wait();
    assert!(alive, "kill(-1, 9) reached a process outside the session");
    assert_eq!(
        marked(&mark).len(),
        1,
        "another session's process was killed: {r:?}"
    );
    // The session's sandbox outlives the attack: the next command of the session runs.
    let next = ex
        .execute(in_session("echo next", "attacker"))
        .await
        .unwrap();
    assert_eq!(next.output.text, "next\n", "{next:?}");
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

/// Children of this process that are a sandbox's pid 1.
fn sandboxes() -> Vec<i32> {
    let me = std::process::id() as i32;
    shellward_test_support::scan()
        .into_iter()
        .filter(|p| p.ppid == me && p.alive())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{}/cmdline", p.pid))
                .is_ok_and(|c| c.contains("__shellward-session"))
        })
        .map(|p| p.pid)
        .collect()
}

const FRESH: &str = "SHELLWARD_TEST_SESSION_IDLE";

/// A sandbox with something running stays past its idle time; once empty it ends, and the next command of the session
/// gets a new one. Shutdown ends the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_idle_sandbox_ends_and_a_busy_one_stays() {
    if !shellward_test_support::in_fresh_process(FRESH) {
        shellward_test_support::rerun_in_fresh_process(
            shellward_test_support::test_path!("an_empty_idle_sandbox_ends_and_a_busy_one_stays"),
            FRESH,
        );
        return;
    }
    let mut config = namespaced();
    config.session_idle = Duration::from_millis(300);
    let ex = confined(config).await;
    // The check command of `confined` left an empty sandbox: it ends by itself.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sandboxes().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        sandboxes().is_empty(),
        "the check's empty sandbox did not end"
    );
    let mark = new_mark();
    started_in(&ex, "busy", "echo started; exec sleep 300", &mark).await;
    let busy = ex
        .execute(in_session("readlink /proc/self/ns/pid", "busy"))
        .await
        .unwrap();
    let quiet = ex
        .execute(in_session("readlink /proc/self/ns/pid", "quiet"))
        .await
        .unwrap();
    let (busy, quiet) = (busy.output.text.trim(), quiet.output.text.trim());
    assert_ne!(busy, quiet, "two sessions shared one sandbox");
    // The quiet session's sandbox ends once idle; the busy one's stays, well past the idle time.
    let deadline = Instant::now() + Duration::from_secs(10);
    while sandbox_namespaces().contains(&quiet.to_string()) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !sandbox_namespaces().contains(&quiet.to_string()),
        "the empty sandbox did not end"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        sandbox_namespaces(),
        vec![busy.to_string()],
        "the busy sandbox ended"
    );
    assert_eq!(
        marked(&mark).len(),
        1,
        "the busy session's process was killed"
    );
    // The next command of the quiet session gets a new sandbox (namespace numbers are reused, so none is compared).
    let again = ex.execute(in_session("echo again", "quiet")).await.unwrap();
    assert_eq!(again.output.text, "again\n", "{again:?}");
    ex.shutdown().await;
    assert!(sandboxes().is_empty(), "shutdown left {:?}", sandboxes());
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

/// The PID namespace of each sandbox of this process (as `readlink /proc/self/ns/pid` prints it inside).
fn sandbox_namespaces() -> Vec<String> {
    sandboxes()
        .into_iter()
        .filter_map(|pid| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok())
        .map(|l| l.to_string_lossy().into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_sandbox_is_made_anew_at_the_next_start() {
    let ex = confined(namespaced()).await;
    let first = ex
        .execute(in_session("readlink /proc/self/ns/pid", "s"))
        .await
        .unwrap();
    // Kill the session's pid 1 from outside (only our own child, found by the namespace it holds).
    let ns = first.output.text.trim().to_string();
    let me = std::process::id() as i32;
    let init = shellward_test_support::scan()
        .into_iter()
        .find(|p| {
            p.ppid == me
                && std::fs::read_link(format!("/proc/{}/ns/pid", p.pid))
                    .is_ok_and(|l| l.to_str() == Some(ns.as_str()))
        })
        .expect("the session's pid 1");
    // SAFETY: SIGKILL to our own child, alive and unreaped (its pid cannot have been reused).
    unsafe { libc::kill(init.pid, libc::SIGKILL) };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = ex
        .execute(in_session("readlink /proc/self/ns/pid", "s"))
        .await
        .unwrap();
    assert_eq!(second.exit.code(), Some(0), "{second:?}");
    assert_ne!(
        second.output.text.trim(),
        ns,
        "the dead namespace was reused"
    );
    ex.shutdown().await;
}

const AS_USER: &str = "SHELLWARD_TEST_SESSION_AS_USER";

/// Without privilege the session's sandbox is made in a user namespace of its own (the user mapped to itself): the
/// same isolation, files created inside stay the user's, and `kill -9 -1` inside leaves the host (this test process)
/// and other sessions alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_normal_user_s_session_is_a_sandbox_too() {
    if !shellward_test_support::as_unprivileged_user(
        shellward_test_support::test_path!("a_normal_user_s_session_is_a_sandbox_too"),
        AS_USER,
    ) {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let ex = confined(namespaced()).await;
    let scratch = tempfile::tempdir().unwrap();
    let made = scratch.path().join("made-inside");
    let r = ex
        .execute(in_session(
            &format!(
                "id -u; touch {}; echo visible=$(ps -e --no-headers | wc -l)",
                made.display()
            ),
            "a",
        ))
        .await
        .unwrap();
    assert!(r.output.text.starts_with(&format!("{uid}\n")), "{r:?}");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&made).unwrap().uid(), uid, "{r:?}");
    assert!(
        !r.output.text.contains("log=0"),
        "the log directory was writable: {r:?}"
    );
    let visible = visible_count(&r.output.text);
    assert!(visible <= 5, "{visible} processes visible: {r:?}");
    let mark = new_mark();
    started_in(&ex, "other", "echo started; exec sleep 300", &mark).await;
    let attack = ex
        .execute(in_session("sleep 30 & sh -c 'kill -9 -1'; echo after", "a"))
        .await
        .unwrap();
    assert!(!attack.output.text.contains("after"), "{attack:?}");
    assert_eq!(
        marked(&mark).len(),
        1,
        "another session's process was killed"
    );
    let next = ex.execute(in_session("echo next", "a")).await.unwrap();
    assert_eq!(next.output.text, "next\n", "{next:?}");
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}
