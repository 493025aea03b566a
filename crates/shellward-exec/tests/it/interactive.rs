//! Interactive processes: stdin as a pipe kept open or a pseudo-terminal, input written by the host, bounded writes,
//! terminal output cleaned for reading — on every containment path (cgroup or process group, with or without a PID
//! namespace).

// Unix only: these tests prove Linux containment (`/proc`, signals, namespaces); `portable.rs` holds what every
// platform shares.
#![cfg(unix)]

use crate::common::*;
use shellward_exec::{ExecError, ExecPlan, Executor, ExitState, StdinMode};
use shellward_exec::{ProcessId, ReadOptions};
use std::time::{Duration, Instant};

const TTY: StdinMode = StdinMode::Terminal { rows: 24, cols: 80 };

fn interactive(command: &str, mark: &str, stdin: StdinMode) -> ExecPlan {
    let mut plan = marked_plan(command, mark);
    plan.background = true;
    plan.stdin = stdin;
    plan
}

/// Writes `input` and returns the output from before it, read until it is quiet (or the process ends) and contains
/// `needle`: the answer is waited for as an event, not as a quiet spell of a fixed length (a loaded machine can pause
/// a REPL between echoing the input and answering it for longer than the idle window).
async fn answer(ex: &Executor, id: &ProcessId, input: &str, needle: &str) -> String {
    let before = ex
        .read_output(None, id, &ReadOptions::view().max_bytes(0))
        .await
        .unwrap()
        .next_cursor;
    ex.write_input(None, id, input.as_bytes(), Duration::from_secs(5))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut text = String::new();
    let mut cursor = before;
    loop {
        let r = ex
            .read_output(
                None,
                id,
                &ReadOptions::after(cursor)
                    .wait(Duration::from_secs(15))
                    .until_quiet(Duration::from_millis(700))
                    .max_bytes(1 << 20),
            )
            .await
            .unwrap();
        let chunk = r.chunk.unwrap();
        text.push_str(&chunk.text);
        cursor = chunk.next_cursor;
        if text.contains(needle) || !r.running || Instant::now() >= deadline {
            return text;
        }
    }
}

/// Waits until the output contains `needle`, returning it all.
async fn output_until(ex: &Executor, id: &ProcessId, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = ex
            .read_output(
                None,
                id,
                &ReadOptions::after(0)
                    .wait(Duration::from_millis(200))
                    .max_bytes(1 << 20),
            )
            .await
            .unwrap();
        let text = r.chunk.unwrap().text;
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{id} never printed {needle:?}: {text:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_repl_answers_on_a_pipe_and_on_a_terminal() {
    for (name, config) in configs() {
        let ex = Executor::new(config).unwrap();
        for stdin in [StdinMode::Pipe, TTY] {
            let mark = new_mark();
            let r = ex
                .execute(interactive("python3 -i -q", &mark, stdin))
                .await
                .unwrap();
            assert!(r.running, "{name} {stdin:?}: {r:?}");
            let out = answer(&ex, &r.id, "print(6*7)\n", "42").await;
            assert!(out.contains("42"), "{name} {stdin:?}: {out:?}");
            if stdin == TTY {
                // The terminal echoed the input; the view has no escape sequences or carriage returns.
                assert!(out.contains("print(6*7)"), "{name}: {out:?}");
                assert!(
                    !out.contains('\r') && !out.contains('\x1b'),
                    "{name}: {out:?}"
                );
            }
            // End of input ends the REPL.
            ex.close_input(None, &r.id, b"", Duration::from_secs(5))
                .await
                .unwrap();
            let info = tokio::time::timeout(Duration::from_secs(15), ex.wait_exit(None, &r.id))
                .await
                .expect("python exits at end of input")
                .unwrap();
            assert_eq!(info.exit, ExitState::Code(0), "{name} {stdin:?}");
            assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
        }
        ex.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_terminal_is_a_tty_and_a_prompt_is_answered() {
    let ex = Executor::new(namespaced()).unwrap();
    for (stdin, want) in [(TTY, 0), (StdinMode::Pipe, 1), (StdinMode::Null, 1)] {
        let mut plan = ExecPlan::new("tty -s");
        plan.stdin = stdin;
        let r = ex.execute(plan).await.unwrap();
        assert_eq!(r.exit, ExitState::Code(want), "tty -s with {stdin:?}");
    }
    for stdin in [TTY, StdinMode::Pipe] {
        let mark = new_mark();
        let r = ex
            .execute(interactive(
                "read -p 'name? ' n; echo \"hello $n\"",
                &mark,
                stdin,
            ))
            .await
            .unwrap();
        if stdin == TTY {
            output_until(&ex, &r.id, "name? ").await;
        }
        ex.write_input(None, &r.id, b"bob\n", Duration::from_secs(5))
            .await
            .unwrap();
        let out = output_until(&ex, &r.id, "hello bob").await;
        assert!(!out.contains('\r'), "{out:?}");
        let info = ex.wait_exit(None, &r.id).await.unwrap();
        assert_eq!(info.exit, ExitState::Code(0));
    }
    // The terminal's size and TERM are what was asked.
    let mut plan = ExecPlan::new("stty size; echo $TERM");
    plan.stdin = StdinMode::Terminal {
        rows: 40,
        cols: 132,
    };
    let r = ex.execute(plan).await.unwrap();
    assert_eq!(r.output.text, "40 132\nxterm-256color\n", "{r:?}");
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_interrupts_the_foreground_job_not_the_shell() {
    for (name, config) in configs() {
        let ex = Executor::new(config).unwrap();
        let mark = new_mark();
        let r = ex.execute(interactive("sh", &mark, TTY)).await.unwrap();
        ex.write_input(
            None,
            &r.id,
            b"sleep 100; echo after-sleep-$?\n",
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        // Wait until the sleep runs (it is the only `sleep` with the mark).
        let deadline = Instant::now() + Duration::from_secs(10);
        while !marked(&mark).iter().any(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
        }) {
            assert!(Instant::now() < deadline, "{name}: sleep never started");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let interrupted = Instant::now();
        ex.write_input(None, &r.id, b"\x03", Duration::from_secs(5))
            .await
            .unwrap();
        let out = answer(&ex, &r.id, "echo shell-alive\n", "shell-alive").await;
        assert!(out.contains("shell-alive"), "{name}: {out:?}");
        assert!(interrupted.elapsed() < Duration::from_secs(20), "{name}");
        assert!(
            ex.info(None, &r.id).unwrap().running,
            "{name}: the shell died"
        );
        ex.write_input(None, &r.id, b"exit 0\n", Duration::from_secs(5))
            .await
            .unwrap();
        let info = tokio::time::timeout(Duration::from_secs(15), ex.wait_exit(None, &r.id))
            .await
            .expect("the shell exits")
            .unwrap();
        assert_eq!(info.exit, ExitState::Code(0), "{name}");
        assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
        ex.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_stdin_ends_cat_and_a_non_reader_never_blocks_the_writer() {
    let ex = Executor::new(namespaced()).unwrap();
    let mark = new_mark();
    let r = ex
        .execute(interactive("cat", &mark, StdinMode::Pipe))
        .await
        .unwrap();
    ex.close_input(None, &r.id, b"hi\n", Duration::from_secs(5))
        .await
        .unwrap();
    let info = tokio::time::timeout(Duration::from_secs(10), ex.wait_exit(None, &r.id))
        .await
        .expect("cat ends at end of input")
        .unwrap();
    assert_eq!(info.exit, ExitState::Code(0));
    assert_eq!(output_until(&ex, &r.id, "hi").await, "hi\n");
    // Closed: a later write says so.
    let e = ex
        .write_input(None, &r.id, b"more", Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(e, ExecError::InputClosed(_)), "{e}");

    // A command that never reads: the write stops at the limit with what was written, and says why.
    let r = ex
        .execute(interactive("sleep 60", &mark, StdinMode::Pipe))
        .await
        .unwrap();
    let big = vec![b'x'; 4 << 20];
    let started = Instant::now();
    let e = ex
        .write_input(None, &r.id, &big, Duration::from_millis(500))
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    match &e {
        ExecError::InputStalled { written, total, .. } => {
            assert!(*written < *total, "{e}");
            assert_eq!(*total, 4 << 20);
        }
        other => panic!("expected InputStalled, got {other}"),
    }
    assert!(e.to_string().contains("did not read its input"), "{e}");
    // Not interactive: a clear error.
    let mut plan = marked_plan("sleep 60", &mark);
    plan.background = true;
    let quiet = ex.execute(plan).await.unwrap();
    let e = ex
        .write_input(None, &quiet.id, b"x", Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(e, ExecError::NotInteractive(_)), "{e}");
    assert!(e.to_string().contains("a pipe or a terminal"), "{e}");
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_views_are_clean_and_the_log_keeps_the_raw_bytes() {
    let ex = Executor::new(namespaced()).unwrap();
    let mut plan = ExecPlan::new("printf '\\033[1;32mok\\033[0m\\n10%%\\r50%%\\r100%%\\n'");
    plan.stdin = TTY;
    let r = ex.execute(plan).await.unwrap();
    assert_eq!(r.output.text, "ok\n100%\n", "{r:?}");
    let raw = std::fs::read(r.log_path.expect("a log")).unwrap();
    let raw = String::from_utf8_lossy(&raw);
    assert!(
        raw.contains("\x1b[1;32m") && raw.contains("\r50%"),
        "{raw:?}"
    );
    ex.shutdown().await;
}
