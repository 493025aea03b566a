//! Executor behaviour: spawning, environment, errors, timeouts, drain bound, output capture and cursor reads,
//! registry (ids, sessions, listing, retention, caps), and resource hygiene (fds, zombies).

// Unix only: these tests prove Linux containment (`/proc`, signals, namespaces); `portable.rs` holds what every
// platform shares.
#![cfg(unix)]

use crate::common::*;
use shellward_exec::{
    ExecError, ExecPlan, Executor, ExecutorConfig, ExitState, OnTimeout, OutputLimits, SignalKind,
};
use shellward_exec::{ProcessId, ReadOptions, Session};
use std::time::{Duration, Instant};

fn quick() -> ExecutorConfig {
    let mut c = ExecutorConfig::default();
    c.grace = Duration::from_millis(300);
    c.drain = Duration::from_millis(300);
    c
}

/// `quick()` changed by `f`.
fn quick_with(f: impl FnOnce(&mut ExecutorConfig)) -> ExecutorConfig {
    let mut c = quick();
    f(&mut c);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_reports_exit_code_output_and_duration() {
    let ex = Executor::new(quick()).unwrap();
    let r = ex
        .execute(ExecPlan::new("echo out; echo err >&2; exit 3"))
        .await
        .unwrap();
    assert_eq!(r.exit, ExitState::Code(3));
    assert_eq!(r.output.text, "out\nerr\n");
    assert!(!r.timed_out && !r.running && !r.output_incomplete);
    assert_eq!(r.leftover_processes, 0);
    let r = ex.execute(ExecPlan::new("kill -TERM $$")).await.unwrap();
    assert_eq!(r.exit, ExitState::Signal(libc::SIGTERM));
    assert_eq!(r.exit.shell_status(), Some(143));
    // Finished foreground runs are not listed.
    assert!(ex.list(None, 100).processes.is_empty());
    ex.shutdown().await;
}

/// A plan that asks for its last working directory gets it in the file it names, however the command ends, and the
/// command stays the plan's own in the process's details (the `EXIT` trap is the executor's, added at the spawn); a
/// report path that could not stand in the shell's script is refused before anything runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_reports_its_last_directory_and_keeps_its_command() {
    let ex = Executor::new(quick()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cwd");
    let mut plan = ExecPlan::new("cd /tmp && echo in; exit 3");
    plan.report_cwd = Some(file.clone());
    let r = ex.execute(plan).await.unwrap();
    assert_eq!(r.exit, ExitState::Code(3));
    assert_eq!(r.output.text, "in\n");
    let reported = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        reported.trim_end(),
        std::fs::canonicalize("/tmp").unwrap().to_str().unwrap()
    );
    let info = ex.info(None, &r.id).unwrap();
    assert_eq!(info.command, "cd /tmp && echo in; exit 3");
    let mut bad = ExecPlan::new("echo never");
    bad.report_cwd = Some(dir.path().join("a'b"));
    let e = ex.execute(bad).await.unwrap_err();
    assert!(matches!(e, ExecError::InvalidPlan(_)), "{e:?}");
    assert!(e.to_string().contains("report_cwd"), "{e}");
    let mut relative = ExecPlan::new("echo never");
    relative.report_cwd = Some("cwd".into());
    assert!(matches!(
        ex.execute(relative).await.unwrap_err(),
        ExecError::InvalidPlan(_)
    ));
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_stdin_and_workdir() {
    let ex = Executor::new(quick()).unwrap();
    let mut plan = ExecPlan::new(
        "echo $TERM $NO_COLOR $PAGER $GIT_PAGER $GIT_TERMINAL_PROMPT $EDITOR $MINE; cat; pwd",
    );
    plan.env.push(("MINE".into(), "yes".into()));
    plan.env.push(("PAGER".into(), "less".into()));
    plan.workdir = Some("/tmp".into());
    let r = ex.execute(plan).await.unwrap();
    assert_eq!(
        r.output.text, "dumb 1 less cat 0 true yes\n/tmp\n",
        "plan env wins; stdin is empty"
    );

    for (workdir, problem) in [
        ("/no/such/dir", "does not exist"),
        ("/etc/hostname", "is not a directory"),
    ] {
        let mut plan = ExecPlan::new("true");
        plan.workdir = Some(workdir.into());
        let e = ex.execute(plan).await.unwrap_err();
        assert!(matches!(e, ExecError::Workdir { .. }), "{e:?}");
        assert!(
            e.to_string().contains(workdir) && e.to_string().contains(problem),
            "{e}"
        );
    }
    for bad in ["", "   ", "echo a\0b"] {
        assert!(
            matches!(
                ex.execute(ExecPlan::new(bad)).await,
                Err(ExecError::InvalidCommand(_))
            ),
            "{bad:?}"
        );
    }
    let mut plan = ExecPlan::new("true");
    plan.env.push(("A=B".into(), "x".into()));
    assert!(matches!(
        ex.execute(plan).await,
        Err(ExecError::InvalidCommand(_))
    ));
    // A background run has no foreground timeout (it returns at once): refused, nothing started.
    let mark = std::env::temp_dir().join(format!("sw-mode-{}", std::process::id()));
    let before = ex.list(None, 1000).processes.len();
    let mut plan = ExecPlan::new(format!("touch {}", mark.display()));
    plan.background = true;
    plan.timeout = Some(Duration::from_secs(5));
    let refused = ex.execute(plan).await;
    assert!(
        matches!(&refused, Err(ExecError::InvalidPlan(m)) if m.contains("deadline")),
        "{refused:?}"
    );
    assert_eq!(ex.list(None, 1000).processes.len(), before);
    assert!(!mark.exists());
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_timeout_can_keep_the_process_in_the_background() {
    let ex = Executor::new(quick()).unwrap();
    let mark = new_mark();
    let mut plan = marked_plan("echo begin; sleep 30; echo never", &mark);
    plan.timeout = Some(Duration::from_millis(500));
    plan.on_timeout = OnTimeout::Background;
    let started = Instant::now();
    let r = ex.execute(plan).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(r.timed_out && r.running);
    assert_eq!(r.output.text, "begin\n");
    let listed = ex.list(None, 10);
    assert_eq!(listed.processes[0].id, r.id);
    assert!(listed.processes[0].running);
    ex.signal(None, &r.id, SignalKind::Kill).await.unwrap();
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
    let info = ex.info(None, &r.id).unwrap();
    assert_eq!(info.exit, ExitState::Signal(libc::SIGKILL));
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_holding_stdout_does_not_hang_the_call() {
    let ex = Executor::new(quick()).unwrap();
    let mark = new_mark();
    let mut plan = marked_plan("sleep 30 & echo done; exit 7", &mark);
    plan.timeout = Some(Duration::from_secs(10));
    let started = Instant::now();
    let r = ex.execute(plan).await.unwrap();
    // Returns within the drain bound (300 ms), not the timeout.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(r.exit, ExitState::Code(7));
    assert!(r.output_incomplete);
    assert_eq!(r.output.text, "done\n");
    assert_eq!(r.leftover_processes, 1);
    // The leftover stays tracked and can be stopped.
    ex.signal(None, &r.id, SignalKind::Terminate).await.unwrap();
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursor_reads_return_every_byte_once_while_the_process_writes() {
    let ex = Executor::new(quick_with(|c| {
        c.output = OutputLimits {
            head: 1024,
            tail: 1024,
            ..Default::default()
        }
    }))
    .unwrap();
    let mut plan =
        ExecPlan::new("i=0; while [ $i -lt 3000 ]; do echo \"line $i é\"; i=$((i+1)); done");
    plan.background = true;
    let r = ex.execute(plan).await.unwrap();
    let mut cursor = 0;
    let mut text = String::new();
    loop {
        let read = output_of(
            &ex,
            &r.id,
            ReadOptions::after(cursor)
                .wait(Duration::from_secs(5))
                .max_bytes(777),
        )
        .await;
        let chunk = read.chunk.unwrap();
        assert_eq!(chunk.skipped_bytes, 0);
        text.push_str(&chunk.text);
        cursor = read.next_cursor;
        if !read.running && chunk.text.is_empty() {
            break;
        }
    }
    let expected: String = (0..3000).map(|i| format!("line {i} é\n")).collect();
    assert_eq!(text, expected);
    // A snapshot read without a cursor shows head and tail with a marker, and the log holds everything.
    let view = output_of(&ex, &r.id, ReadOptions::view().max_bytes(0))
        .await
        .view
        .unwrap();
    assert!(view.omitted_bytes > 0 && view.text.contains("bytes omitted"));
    assert!(!view.text.contains('\u{FFFD}'));
    let log = ex.info(None, &r.id).unwrap().log_path.unwrap();
    assert_eq!(std::fs::read_to_string(log).unwrap(), expected);
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_reads_return_on_new_output_or_exit() {
    let ex = Executor::new(quick()).unwrap();
    let mut plan = ExecPlan::new("sleep 0.3; echo late; sleep 0.3");
    plan.background = true;
    let r = ex.execute(plan).await.unwrap();
    let started = Instant::now();
    let read = output_of(
        &ex,
        &r.id,
        ReadOptions::after(0)
            .wait(Duration::from_secs(10))
            .max_bytes(1024),
    )
    .await;
    assert_eq!(read.chunk.unwrap().text, "late\n");
    assert!(started.elapsed() < Duration::from_secs(3));
    let read = output_of(
        &ex,
        &r.id,
        ReadOptions::after(read.next_cursor)
            .wait(Duration::from_secs(10))
            .max_bytes(1024),
    )
    .await;
    assert!(!read.running, "returned because the process exited");
    assert_eq!(read.exit, ExitState::Code(0));
    // A zero wait is a snapshot.
    let started = Instant::now();
    output_of(&ex, &r.id, ReadOptions::after(0).max_bytes(1024)).await;
    assert!(started.elapsed() < Duration::from_millis(500));
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_of_yes_stays_within_the_memory_bound() {
    let dir = tempfile::tempdir().unwrap();
    let ex = Executor::new(quick_with(|c| {
        c.output = OutputLimits {
            log_cap: 4 << 20,
            ..Default::default()
        };
        c.log_parent = Some(dir.path().into());
    }))
    .unwrap();
    let mut plan = ExecPlan::new("yes");
    plan.timeout = Some(Duration::from_secs(5));
    plan.on_timeout = OnTimeout::Kill;
    let r = ex.execute(plan).await.unwrap();
    assert!(r.timed_out);
    assert!(
        r.output.total_bytes > 64 << 20,
        "yes wrote {} bytes",
        r.output.total_bytes
    );
    assert!(
        r.output.text.len() < 40 * 1024,
        "the view is bounded: {}",
        r.output.text.len()
    );
    let log = r.log_path.unwrap();
    assert_eq!(
        std::fs::metadata(&log).unwrap().len(),
        4 << 20,
        "the log stops at its cap"
    );
    assert!(r.output.text.contains("holds the first 4194304 bytes"));
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multibyte_output_is_cut_cleanly() {
    let ex = Executor::new(quick_with(|c| {
        c.output = OutputLimits {
            head: 1001,
            tail: 1001,
            max_line: 333,
            log_cap: 1 << 20,
        }
    }))
    .unwrap();
    let r = ex
        .execute(ExecPlan::new(
            "i=0; while [ $i -lt 3000 ]; do printf 'é€😀'; i=$((i+1)); done",
        ))
        .await
        .unwrap();
    assert!(r.output.omitted_bytes > 0);
    assert!(!r.output.text.contains('\u{FFFD}'), "a character was split");
    assert!(r.output.text.contains("bytes of this line omitted"));
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_isolated_and_listing_is_ordered_and_capped() {
    let ex = Executor::new(quick()).unwrap();
    let mark = new_mark();
    let start = |cmd: &str, session: &str| {
        let mut plan = marked_plan(cmd, &mark);
        plan.background = true;
        plan.session = Some(session.into());
        ex.execute(plan)
    };
    let done = start("true", "a").await.unwrap();
    ex.read_output(
        Some(&Session::from("a")),
        &done.id,
        &ReadOptions::view()
            .wait(Duration::from_secs(5))
            .max_bytes(0),
    )
    .await
    .unwrap();
    let old = start("sleep 30", "a").await.unwrap();
    let new = start("sleep 30", "a").await.unwrap();
    let other = start("sleep 30", "b").await.unwrap();
    let ids: Vec<ProcessId> = ex
        .list(Some(&Session::from("a")), 10)
        .processes
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(
        ids,
        [new.id.clone(), old.id.clone(), done.id.clone()],
        "running first, newest first"
    );
    let capped = ex.list(Some(&Session::from("a")), 2);
    assert_eq!((capped.processes.len(), capped.omitted), (2, 1));
    assert_eq!(ex.list(Some(&Session::from("b")), 10).processes.len(), 1);
    assert!(ex.list(None, 10).processes.is_empty());
    // Session b can neither see nor signal a's processes.
    assert!(matches!(
        ex.signal(Some(&Session::from("b")), &old.id, SignalKind::Kill)
            .await,
        Err(ExecError::UnknownProcess(_))
    ));
    assert!(matches!(
        ex.read_output(
            Some(&Session::from("b")),
            &old.id,
            &ReadOptions::view().max_bytes(0)
        )
        .await,
        Err(ExecError::UnknownProcess(_))
    ));
    assert!(matches!(
        ex.info(Some(&Session::from("a")), &other.id),
        Err(ExecError::UnknownProcess(_))
    ));
    assert!(matches!(
        ex.info(Some(&Session::from("a")), &ProcessId::from("p999999")),
        Err(ExecError::UnknownProcess(_))
    ));
    assert!(matches!(
        ex.info(Some(&Session::from("a")), &ProcessId::from("bogus")),
        Err(ExecError::UnknownProcess(_))
    ));
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_cap_and_retention() {
    let ex = Executor::new(quick_with(|c| {
        c.max_running = 2;
        c.retention = Duration::from_millis(300);
    }))
    .unwrap();
    let mark = new_mark();
    let bg = |cmd: &str| {
        let mut plan = marked_plan(cmd, &mark);
        plan.background = true;
        ex.execute(plan)
    };
    let a = bg("sleep 30").await.unwrap();
    bg("sleep 30").await.unwrap();
    let e = bg("sleep 30").await.unwrap_err();
    assert!(
        matches!(
            e,
            ExecError::TooManyRunning {
                running: 2,
                limit: 2
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("limit is 2"));
    ex.signal(None, &a.id, SignalKind::Kill).await.unwrap();
    // A slot is free again; the killed process is dropped after its retention by the reaper, without listing.
    let c = bg("true").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let ids: Vec<ProcessId> = ex
        .list(None, 10)
        .processes
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert!(!ids.contains(&a.id) && !ids.contains(&c.id), "{ids:?}");
    assert_eq!(ids.len(), 1);
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

/// Counts this process's descriptors and zombie children, so it runs alone in a fresh process: other tests of this
/// binary open and close descriptors and reap children at the same time.
#[test]
fn many_runs_leak_no_descriptors_and_no_zombies() {
    const FRESH: &str = "SHELLWARD_TEST_FRESH_LEAKS";
    if !shellward_test_support::in_fresh_process(FRESH) {
        shellward_test_support::rerun_in_fresh_process(
            shellward_test_support::test_path!("many_runs_leak_no_descriptors_and_no_zombies"),
            FRESH,
        );
        return;
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(many_runs_leak_nothing());
}

async fn many_runs_leak_nothing() {
    // 200 at once in one session: above the default per-session cap, which this test is not about.
    let ex = Executor::new(quick_with(|c| c.max_running_per_session = 256)).unwrap();
    ex.execute(ExecPlan::new("echo warm")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = fd_count();
    for i in 0..500 {
        let r = ex
            .execute(ExecPlan::new(format!("echo {i}")))
            .await
            .unwrap();
        assert_eq!(r.output.text, format!("{i}\n"));
    }
    let mut tasks = Vec::new();
    for i in 0..200 {
        let ex = ex.clone();
        tasks.push(tokio::spawn(async move {
            ex.execute(ExecPlan::new(format!("echo c{i}; sleep 0.1")))
                .await
        }));
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let r = t.await.unwrap().unwrap();
        assert_eq!(r.output.text, format!("c{i}\n"), "{r:?}");
    }
    // The last releases run on their own tasks: a leak is descriptors that never come back.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut after = fd_count();
    while after > before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        after = fd_count();
    }
    assert!(
        after <= before,
        "file descriptors leaked: {before} before, {after} after"
    );
    assert!(
        zombie_children().is_empty(),
        "zombies: {:?}",
        zombie_children()
    );
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cgroups_are_released_when_trees_end_and_removed_at_shutdown() {
    let ex = Executor::new(quick()).unwrap();
    let Some(root) = ex.cgroup_dir().map(|d| d.to_path_buf()) else {
        println!(
            "no cgroup containment on this machine: {}",
            ex.containment()
        );
        return;
    };
    let cgroups = || {
        std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_dir())
            .count()
    };
    // Finished commands' cgroups are reused or removed: their number stays bounded by the free list (32 empty
    // ones kept), whatever the count of runs.
    for _ in 0..100 {
        let r = ex.execute(ExecPlan::new("echo hi")).await.unwrap();
        assert_eq!(r.exit.code(), Some(0));
    }
    assert!(
        cgroups() <= 33,
        "{} cgroups after 100 sequential runs",
        cgroups()
    );
    let mut plan = ExecPlan::new("sleep 0.2");
    plan.background = true;
    let bg = ex.execute(plan).await.unwrap();
    let members = ex.tree_members(None, &bg.id).unwrap();
    assert!(!members.is_empty());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ex.tree_members(None, &bg.id).unwrap().is_empty()
        || ex.info(None, &bg.id).unwrap().running
    {
        assert!(Instant::now() < deadline, "the background tree ends");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut plan = ExecPlan::new("sleep 30");
    plan.background = true;
    ex.execute(plan).await.unwrap();
    ex.shutdown().await;
    assert!(
        !root.exists(),
        "the executor's cgroup (with every command cgroup, free ones too) is removed at shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_can_be_captured_separately() {
    let ex = Executor::new(quick_with(|c| c.separate_stderr = true)).unwrap();
    let r = ex
        .execute(ExecPlan::new("echo out; echo err >&2; echo out2"))
        .await
        .unwrap();
    assert_eq!(r.output.text, "out\nout2\n");
    assert_eq!(r.stderr.unwrap().text, "err\n");
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_shell_is_a_clear_error_and_frees_its_slot() {
    let ex = Executor::new(quick_with(|c| {
        c.shell = vec!["/no/such/shell".into(), "-c".into()];
        c.max_running = 1;
    }))
    .unwrap();
    for _ in 0..3 {
        let e = ex.execute(ExecPlan::new("true")).await.unwrap_err();
        assert!(matches!(e, ExecError::Spawn(_)), "{e:?}");
        assert!(e.to_string().contains("could not start"), "{e}");
    }
    ex.shutdown().await;
}

/// A character whose bytes arrive apart (here 0.3 s apart) is read whole: reads in between return nothing for it and
/// keep the cursor before it, instead of a replacement character and a cursor past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_character_split_across_writes_is_read_whole() {
    let ex = Executor::new(quick()).unwrap();
    let mut plan = ExecPlan::new(r"printf 'a\342'; sleep 0.3; printf '\202\254b'");
    plan.background = true;
    let r = ex.execute(plan).await.unwrap();
    let mut cursor = 0;
    let mut text = String::new();
    let mut reads = 0;
    loop {
        let read = output_of(&ex, &r.id, ReadOptions::after(cursor).max_bytes(1000)).await;
        let chunk = read.chunk.unwrap();
        assert!(!chunk.text.contains('\u{FFFD}'), "read {reads}: {chunk:?}");
        text.push_str(&chunk.text);
        cursor = read.next_cursor;
        reads += 1;
        if !read.running {
            // Not running any more means every byte is in: one last read finds nothing new.
            let last = output_of(&ex, &r.id, ReadOptions::after(cursor).max_bytes(1000)).await;
            assert_eq!(last.chunk.unwrap().text, "");
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(text, "a€b");
    assert!(
        reads > 5,
        "the reads should have overlapped the pause ({reads})"
    );
    // A read that waits returns as soon as the character is complete, not with its first byte alone.
    let mut plan =
        ExecPlan::new(r"sleep 0.2; printf '\342'; sleep 0.3; printf '\202\254'; sleep 5");
    plan.background = true;
    let r = ex.execute(plan).await.unwrap();
    let read = output_of(
        &ex,
        &r.id,
        ReadOptions::after(0)
            .wait(Duration::from_secs(3))
            .max_bytes(1000),
    )
    .await;
    assert_eq!(read.chunk.unwrap().text, "€");
    ex.signal(None, &r.id, SignalKind::Kill).await.unwrap();
    ex.shutdown().await;
}

/// Shutdown removes the log directory and lets go of everything in it: no descriptor of this process still refers to
/// it. (The lock file used to stay open until the process exited; it was the last reference to the removed directory,
/// so the directory was freed — on a `discard` mount, a wait for the disk — only in the exit, while the parent waited.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_the_log_directory() {
    let parent = tempfile::tempdir().unwrap();
    let ex = Executor::new(quick_with(|c| c.log_parent = Some(parent.path().into()))).unwrap();
    let log_dir = ex.log_dir().to_path_buf();
    let r = ex.execute(ExecPlan::new("echo logged")).await.unwrap();
    assert_eq!(r.exit.code(), Some(0));
    let held = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .filter(|target| target.starts_with(&log_dir))
            .collect()
    };
    assert!(
        !held().is_empty(),
        "the executor holds its lock while it runs"
    );
    ex.shutdown().await;
    assert!(!log_dir.exists());
    assert_eq!(held(), Vec::<std::path::PathBuf>::new());
}

/// Output without a terminal reaches the model without escape sequences (a clipboard write, a screen clear,
/// colours); the log keeps the raw bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_are_kept_from_the_model_but_not_from_the_log() {
    let ex = Executor::new(ExecutorConfig::default()).unwrap();
    let r = ex
        .execute(ExecPlan::new(
            r"printf '\033]52;c;ZXZpbA==\007\033[2J\033[1;31mhello\033[0m\tworld\n'",
        ))
        .await
        .unwrap();
    assert_eq!(r.output.text, "hello\tworld\n", "{r:?}");
    let log = std::fs::read(r.log_path.as_ref().expect("a log")).unwrap();
    assert!(log.starts_with(b"\x1b]52;c;"), "{log:?}");
    let read = output_of(&ex, &r.id, ReadOptions::after(0).max_bytes(1 << 20)).await;
    assert_eq!(
        read.chunk.as_ref().unwrap().text,
        "hello\tworld\n",
        "{read:?}"
    );
    ex.shutdown().await;
}

/// A foreground command with a timeout that kills: what it leaves running when its leader exits is reported, tracked
/// under its id, and stopped when the timeout expires — never left running until someone signals it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_of_a_killing_foreground_run_die_at_its_deadline() {
    let ex = Executor::new(quick()).unwrap();
    let mark = new_mark();
    let mut plan = marked_plan("sleep 60 & sleep 61 & echo started", &mark);
    plan.timeout = Some(Duration::from_millis(1500));
    plan.on_timeout = OnTimeout::Kill;
    let started = Instant::now();
    let r = ex.execute(plan).await.unwrap();
    assert_eq!(r.exit.code(), Some(0), "{r:?}");
    assert_eq!(r.leftover_processes, 2, "{r:?}");
    assert!(started.elapsed() < Duration::from_millis(1500), "{r:?}");
    assert_eq!(marked(&mark).len(), 2, "killed before the deadline");
    let left = survivors_after(&mark, Duration::from_secs(10));
    kill_marked(&mark);
    assert!(
        left.is_empty(),
        "still running after the deadline: {left:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(1400));
    // Without a timeout that kills, they stay (tracked, signallable).
    let mark = new_mark();
    let mut plan = marked_plan("sleep 60 & echo started", &mark);
    plan.timeout = Some(Duration::from_millis(300));
    plan.on_timeout = OnTimeout::Background;
    let r = ex.execute(plan).await.unwrap();
    assert_eq!(r.leftover_processes, 1, "{r:?}");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(marked(&mark).len(), 1);
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

shellward_test_support::every_test_as_user!(
    /// Every test above again as a normal user: the session sandbox in a user namespace of its own, trees contained by
    /// process group and marker (no writable cgroup) — the same guarantees on that path.
    every_execute_test_passes_as_a_normal_user,
    "SHELLWARD_TEST_EXECUTE_AS_USER"
);
