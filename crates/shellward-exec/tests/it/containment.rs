//! Zero survivors: every way of stopping a tree (terminate, kill, foreground timeout with kill, shutdown, drop, and
//! the executor itself being SIGKILLed), for both containment paths, proven by scanning /proc; and escapers left by a
//! foreground run are reported.

// Unix only: these tests prove Linux containment (`/proc`, signals, namespaces); `portable.rs` holds what every
// platform shares.
#![cfg(unix)]

use crate::common::*;
use shellward_exec::{
    ContainmentKind, ExecError, ExecPlan, Executor, ExecutorConfig, ExitState, OnTimeout,
    ProcessId, SignalKind,
};
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(5);

async fn start_nasty(ex: &Executor, mark: &str) -> ProcessId {
    let mut plan = marked_plan(NASTY_TREE, mark);
    plan.background = true;
    let r = ex.execute(plan).await.unwrap();
    wait_for_output(ex, &r.id, "ready").await;
    let members = marked(mark);
    assert!(
        members.len() >= 10,
        "the tree should have many members, found {}",
        members.len()
    );
    r.id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_containment_uses_cgroups_when_the_hierarchy_is_writable() {
    let ex = Executor::new(ExecutorConfig::default()).unwrap();
    println!("containment: {}", ex.containment());
    // These machines have a cgroup2 hierarchy root can write; a normal user (or a machine without one) falls back,
    // and says so.
    if shellward_test_support::is_root()
        && std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .contains(" - cgroup2 ")
    {
        assert_eq!(ex.containment(), ContainmentKind::Cgroup);
    }
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_and_kill_leave_no_survivors() {
    for (name, config) in configs() {
        let ex = Executor::new(config).unwrap();
        for kind in [SignalKind::Terminate, SignalKind::Kill] {
            let mark = new_mark();
            let id = start_nasty(&ex, &mark).await;
            ex.signal(None, &id, kind).await.unwrap();
            let left = survivors_after(&mark, SETTLE);
            kill_marked(&mark);
            assert!(left.is_empty(), "{name} {kind:?}: survivors {left:?}");
            // Nothing is left to signal.
            assert!(matches!(
                ex.signal(None, &id, kind).await,
                Err(ExecError::NotAlive(_))
            ));
        }
        ex.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_timeout_with_kill_leaves_no_survivors() {
    for (name, config) in configs() {
        let ex = Executor::new(config).unwrap();
        let mark = new_mark();
        let mut plan = marked_plan(NASTY_TREE, &mark);
        plan.timeout = Some(Duration::from_millis(800));
        plan.on_timeout = OnTimeout::Kill;
        let r = ex.execute(plan).await.unwrap();
        assert!(r.timed_out && !r.running, "{name}: {r:?}");
        assert!(r.exit.signal().is_some(), "{name}: {:?}", r.exit);
        assert!(r.output.text.contains("ready"));
        let left = survivors_after(&mark, SETTLE);
        kill_marked(&mark);
        assert!(left.is_empty(), "{name}: survivors {left:?}");
        ex.shutdown().await;
    }
}

/// A caller that stops waiting for a foreground run (its `execute` future dropped: a cancelled MCP call, an HTTP client
/// gone) takes the command with it: the whole tree is terminated (grace, then kill) and nothing stays listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_foreground_run_leaves_no_survivors() {
    for (name, config) in configs() {
        let ex = std::sync::Arc::new(Executor::new(config).unwrap());
        let mark = new_mark();
        let mut plan = marked_plan(NASTY_TREE, &mark);
        plan.timeout = Some(Duration::from_secs(600));
        let run = tokio::spawn({
            let ex = ex.clone();
            async move { ex.execute(plan).await }
        });
        let started = std::time::Instant::now();
        while marked(&mark).len() < 3 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{name}: never started"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        run.abort();
        assert!(run.await.unwrap_err().is_cancelled());
        let left = survivors_after(&mark, SETTLE);
        kill_marked(&mark);
        assert!(left.is_empty(), "{name}: survivors {left:?}");
        let mut listed = ex.list(None, 100);
        for _ in 0..100 {
            if listed.processes.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            listed = ex.list(None, 100);
        }
        assert!(listed.processes.is_empty(), "{name}: {listed:?}");
        ex.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_and_drop_leave_no_survivors() {
    for (name, config) in configs() {
        let ex = Executor::new(config.clone()).unwrap();
        let marks: Vec<String> = (0..3).map(|_| new_mark()).collect();
        for m in &marks {
            start_nasty(&ex, m).await;
        }
        let log_dir = ex.log_dir().to_path_buf();
        ex.shutdown().await;
        for m in &marks {
            let left = survivors_after(m, SETTLE);
            kill_marked(m);
            assert!(left.is_empty(), "{name} shutdown: survivors {left:?}");
        }
        assert!(
            !log_dir.exists(),
            "the log directory is removed at shutdown"
        );
        assert!(matches!(
            ex.execute(marked_plan("true", "x")).await,
            Err(ExecError::ShuttingDown)
        ));

        // Dropping the last handle without shutdown kills synchronously.
        let ex = Executor::new(config).unwrap();
        let mark = new_mark();
        start_nasty(&ex, &mark).await;
        drop(ex);
        let left = survivors_after(&mark, SETTLE);
        kill_marked(&mark);
        assert!(left.is_empty(), "{name} drop: survivors {left:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signalling_works_after_the_leader_exited() {
    for (name, config) in configs() {
        let ex = Executor::new(config).unwrap();
        let mark = new_mark();
        let mut plan = marked_plan("sleep 300 & echo started", &mark);
        plan.background = true;
        let r = ex.execute(plan).await.unwrap();
        wait_for_output(&ex, &r.id, "started").await;
        // The leader (sh) has exited; its child lives on.
        tokio::time::sleep(Duration::from_millis(200)).await;
        // The sleep alone: in a session's sandbox too, where the command is no init's child (the sandbox's pid 1
        // carries no command's marker).
        assert_eq!(marked(&mark).len(), 1, "{name}");
        assert_eq!(ex.info(None, &r.id).unwrap().exit.code(), Some(0));
        assert!(
            ex.info(None, &r.id).unwrap().running,
            "{name}: the tree still runs"
        );
        ex.signal(None, &r.id, SignalKind::Terminate).await.unwrap();
        let left = survivors_after(&mark, SETTLE);
        kill_marked(&mark);
        assert!(left.is_empty(), "{name}: {left:?}");
        ex.shutdown().await;
    }
}

/// Helper role for `executor_sigkill_leaves_no_survivors`: run as a child process, starts trees, reports, waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper: started by executor_sigkill_leaves_no_survivors in a child process"]
async fn sigkill_child_role() {
    let mark = std::env::var("SHELLWARD_CHILD_MARK").expect("run by the parent test");
    let containment = match std::env::var("SHELLWARD_CHILD_CONTAINMENT").as_deref() {
        Ok("process-group") => shellward_exec::ContainmentPreference::ProcessGroup,
        _ => shellward_exec::ContainmentPreference::Auto,
    };
    let mut config = ExecutorConfig::default();
    config.containment = containment;
    config.log_parent = std::env::var_os("SHELLWARD_CHILD_LOGS").map(Into::into);
    let ex = Executor::new(config).unwrap();
    for _ in 0..2 {
        let id = start_nasty(&ex, &mark).await;
        assert!(ex.info(None, &id).unwrap().log_path.is_some());
    }
    println!("SHELLWARD-CHILD-READY");
    tokio::time::sleep(Duration::from_secs(600)).await;
}

#[test]
fn executor_sigkill_leaves_no_survivors() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    for containment in ["auto", "process-group"] {
        let mark = new_mark();
        let logs = tempfile::tempdir().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                shellward_test_support::test_path!("sigkill_child_role"),
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SHELLWARD_CHILD_MARK", &mark)
            .env("SHELLWARD_CHILD_CONTAINMENT", containment)
            .env("SHELLWARD_CHILD_LOGS", logs.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let ready = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.contains("SHELLWARD-CHILD-READY"));
        assert!(ready, "the child executor did not start its trees");
        assert!(marked(&mark).len() >= 20);
        let pids_roots = pids_roots_of(child.id());
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let left = survivors_after(&mark, SETTLE);
        kill_marked(&mark);
        assert!(
            left.is_empty(),
            "{containment}: survivors of a SIGKILLed executor: {left:?}"
        );
        // Its watchdog removes its `pids` root too (where the hierarchy is writable: as root, as on CI).
        if shellward_test_support::is_root() {
            assert_eq!(pids_roots.len(), 1, "{containment}: {pids_roots:?}");
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !pids_roots_of(child.id()).is_empty() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(
                pids_roots_of(child.id()).is_empty(),
                "{containment}: the killed executor's pids root stayed: {pids_roots:?}"
            );
        }
        // The killed executor's log directory is left behind (in the per-user log root), and swept at once by the
        // next executor starting there.
        let log_dirs = || {
            let roots =
                shellward_test_support::entries_with_prefix(logs.path(), ".shellward-logs-");
            assert_eq!(roots.len(), 1, "{roots:?}");
            shellward_test_support::entries_with_prefix(&logs.path().join(&roots[0]), "shellward-")
        };
        let leftover = log_dirs();
        assert_eq!(leftover.len(), 1, "{leftover:?}");
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let mut config = ExecutorConfig::default();
            config.log_parent = Some(logs.path().into());
            let next = Executor::new(config).unwrap();
            let now = log_dirs();
            assert_eq!(now.len(), 1, "only the new executor's directory: {now:?}");
            assert!(!now.contains(&leftover[0]), "{now:?}");
            next.shutdown().await;
        });
    }
}

/// A foreground command that ends while a descendant it moved out of its process group lives on: the result says
/// so and the escaper stays tracked, under both containment paths (the fallback answers "gone?" without a full
/// process scan only when nothing of the tree can be left).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escapers_left_by_a_foreground_run_are_reported_and_stoppable() {
    for (name, config) in configs() {
        let ex = Executor::new(config).unwrap();
        // Another tree lives in the background throughout (its leader is a child of the executor, as escapers are).
        let other_mark = new_mark();
        let mut other = marked_plan("sleep 30", &other_mark);
        other.background = true;
        let other = ex.execute(other).await.unwrap();
        // Plain runs before and after: nothing left over, while other trees and the escaper exist.
        let before = ex.execute(ExecPlan::new("true")).await.unwrap();
        assert_eq!(before.leftover_processes, 0, "{name}");
        let mark = new_mark();
        let r = ex
            .execute(marked_plan(
                "setsid sh -c 'sleep 30' >/dev/null 2>&1 < /dev/null & sleep 0.2; echo started",
                &mark,
            ))
            .await
            .unwrap();
        assert_eq!(r.exit, ExitState::Code(0), "{name}");
        assert_eq!(r.output.text, "started\n", "{name}");
        assert!(r.leftover_processes >= 1, "{name}: {r:?}");
        let after = ex.execute(ExecPlan::new("echo x")).await.unwrap();
        assert_eq!(after.leftover_processes, 0, "{name}");
        assert!(ex.info(None, &r.id).unwrap().running, "{name}");
        ex.signal(None, &r.id, SignalKind::Terminate).await.unwrap();
        assert!(
            survivors_after(&mark, Duration::from_secs(5)).is_empty(),
            "{name}"
        );
        assert!(ex.info(None, &other.id).unwrap().running, "{name}");
        ex.signal(None, &other.id, SignalKind::Kill).await.unwrap();
        assert!(
            survivors_after(&other_mark, Duration::from_secs(5)).is_empty(),
            "{name}"
        );
        ex.shutdown().await;
    }
}

shellward_test_support::every_test_as_user!(
    /// Every test above again as a normal user: trees contained by process group and marker (no writable cgroup), in a
    /// session sandbox with a user namespace of its own, and without one — the same guarantees on that path.
    every_containment_test_passes_as_a_normal_user,
    "SHELLWARD_TEST_CONTAINMENT_AS_USER"
);
