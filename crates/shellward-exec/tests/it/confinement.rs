//! What the host confines beyond syntax: each command in its own PID namespace (under this crate's init), a process
//! limit per tree, and resource limits. Commands that would harm the machine outside a namespace (`os.kill(-1, 9)`, a
//! fork bomb) run only after the test has proven the confinement is active.

// Unix only: these tests prove Linux containment (`/proc`, signals, namespaces); `portable.rs` holds what every
// platform shares.
#![cfg(unix)]

use crate::common::*;
use shellward_exec::ReadOptions;
use shellward_exec::{ExecPlan, Executor, ExecutorConfig, ExitState, OnTimeout, SignalKind};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_minus_one_inside_reaches_only_the_tree() {
    let ex = confined(namespaced()).await;
    // A process outside the tree, started by this test: it must survive.
    let mut sentinel = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let mark = new_mark();
    let mut plan = marked_plan(
        "sleep 30 & python3 -c 'import os, time; time.sleep(0.2); os.kill(-1, 9)'; echo after",
        &mark,
    );
    plan.timeout = Some(Duration::from_secs(20));
    let r = ex.execute(plan).await.unwrap();
    let alive = sentinel.try_wait().unwrap().is_none();
    let _ = sentinel.kill();
    let _ = sentinel.wait();
    assert!(
        alive,
        "kill(-1, 9) inside the tree killed a process outside it"
    );
    // Everything of the namespace got the signal: the shell (its own kill) and the sleep.
    assert_eq!(r.exit, ExitState::Signal(libc::SIGKILL), "{r:?}");
    assert!(!r.output.text.contains("after"), "{r:?}");
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_status_passes_through_the_init() {
    let ex = confined(namespaced()).await;
    for (command, want) in [
        ("exit 3", ExitState::Code(3)),
        ("true", ExitState::Code(0)),
        ("kill -KILL $$", ExitState::Signal(libc::SIGKILL)),
        ("kill -TERM $$", ExitState::Signal(libc::SIGTERM)),
    ] {
        let r = ex.execute(ExecPlan::new(command)).await.unwrap();
        assert_eq!(r.exit, want, "{command}: {r:?}");
        assert_eq!(r.leftover_processes, 0, "{command}: {r:?}");
        // The init outlives the command by a moment; the process is not reported running for it.
        assert!(!ex.info(None, &r.id).unwrap().running, "{command}");
    }
    let mut plan = ExecPlan::new("sleep 0.2; exit 4");
    plan.background = true;
    let r = ex.execute(plan).await.unwrap();
    let read = output_of(
        &ex,
        &r.id,
        ReadOptions::view()
            .wait(Duration::from_secs(10))
            .max_bytes(1024),
    )
    .await;
    assert_eq!(read.exit, ExitState::Code(4));
    assert!(!read.running, "{read:?}");
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_still_means_term_then_grace_then_kill() {
    let ex = confined(namespaced()).await;
    // A command that handles TERM: the init forwards it, the handler runs, its exit code is the result.
    let mut plan =
        ExecPlan::new("trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.1; done");
    plan.background = true;
    let r = ex.execute(plan).await.unwrap();
    wait_for_output(&ex, &r.id, "ready").await;
    ex.signal(None, &r.id, SignalKind::Terminate).await.unwrap();
    let info = ex.info(None, &r.id).unwrap();
    assert_eq!(info.exit, ExitState::Code(7), "{info:?}");
    wait_for_output(&ex, &r.id, "got-term").await;
    // A command that ignores TERM is killed after the grace period.
    let mark = new_mark();
    let mut plan = marked_plan(
        "trap '' TERM; echo ready; while :; do sleep 0.1; done",
        &mark,
    );
    plan.background = true;
    let r = ex.execute(plan).await.unwrap();
    wait_for_output(&ex, &r.id, "ready").await;
    let started = Instant::now();
    ex.signal(None, &r.id, SignalKind::Terminate).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "no grace period"
    );
    assert_eq!(
        ex.info(None, &r.id).unwrap().exit,
        ExitState::Signal(libc::SIGKILL)
    );
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_left_behind_are_reported_and_stoppable_under_the_init() {
    let ex = confined(namespaced()).await;
    let mark = new_mark();
    let r = ex
        .execute(marked_plan("sleep 30 & sleep 31 & echo started", &mark))
        .await
        .unwrap();
    assert_eq!(r.exit, ExitState::Code(0), "{r:?}");
    assert_eq!(
        r.leftover_processes, 2,
        "the init itself is no leftover: {r:?}"
    );
    assert!(ex.info(None, &r.id).unwrap().running);
    ex.signal(None, &r.id, SignalKind::Terminate).await.unwrap();
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
    ex.shutdown().await;
}

/// Under a namespace init a foreground run's result comes before the init has exited; its cgroup is still released
/// as soon as the init is reaped (not at the reaper's next pass), so the next command starts in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_runs_cgroup_is_released_when_its_init_is_reaped() {
    let ex = confined(namespaced()).await;
    assert!(
        ex.cgroup_dir().is_some(),
        "this test needs the cgroup path (a writable cgroup v2 hierarchy with cgroup.kill: run the suite as root, as CI does); containment here: {}",
        ex.containment()
    );
    // The check command `confined` ran is released the same way: let it reach the free list, so each round's first
    // run takes the only free cgroup and leaves exactly its own there.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for round in 0..3 {
        // A command's cgroup keeps the name it was made with: the first run reports where it ran.
        let first = ex
            .execute(ExecPlan::new("grep '^0::' /proc/self/cgroup"))
            .await
            .unwrap();
        assert_eq!(first.exit, ExitState::Code(0), "{first:?}");
        let where_first = first.output.text.trim().to_string();
        // Well within the reaper's period (500 ms), so its pass rarely releases the tree first.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mark = new_mark();
        let mut plan = marked_plan("exec sleep 30", &mark);
        plan.background = true;
        let later = ex.execute(plan).await.unwrap();
        let members = ex.tree_members(None, &later.id).unwrap();
        let cgroups: Vec<String> = members
            .iter()
            .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok())
            .collect();
        ex.signal(None, &later.id, SignalKind::Kill).await.unwrap();
        assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
        assert!(
            !cgroups.is_empty() && cgroups.iter().all(|c| c.lines().any(|l| l == where_first)),
            "round {round}: the later command is not in the first one's cgroup ({where_first}): {cgroups:?}"
        );
    }
    ex.shutdown().await;
}

/// A signal sent the moment a background start returns reaches the command, even when the namespace's init has not
/// forked it yet (it used to be refused as "nothing alive", leaving the command running).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_right_after_the_start_is_never_refused() {
    let ex = confined(namespaced()).await;
    for kind in [SignalKind::Kill, SignalKind::Terminate] {
        for _ in 0..10 {
            let mark = new_mark();
            let mut plan = marked_plan("sleep 60", &mark);
            plan.background = true;
            let r = ex.execute(plan).await.unwrap();
            ex.signal(None, &r.id, kind)
                .await
                .unwrap_or_else(|e| panic!("{kind:?} right after the start: {e}"));
            assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
            assert!(!ex.info(None, &r.id).unwrap().running);
        }
    }
    ex.shutdown().await;
}

/// A background plan's deadline stops the whole tree when it is reached; one that ends first is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_deadline_stops_the_tree() {
    let ex = Executor::new(ExecutorConfig::default()).unwrap();
    let mark = new_mark();
    let mut plan = marked_plan("sleep 60 & sleep 61; echo never", &mark);
    plan.background = true;
    plan.deadline = Some(Duration::from_millis(300));
    let r = ex.execute(plan).await.unwrap();
    assert!(r.running);
    let info = tokio::time::timeout(Duration::from_secs(20), ex.wait_exit(None, &r.id))
        .await
        .expect("the deadline stopped it")
        .unwrap();
    assert_eq!(info.exit, ExitState::Signal(libc::SIGTERM), "{info:?}");
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
    let mut quick = ExecPlan::new("echo done");
    quick.background = true;
    quick.deadline = Some(Duration::from_secs(30));
    quick.labels = vec![("chat".into(), "a".into())];
    let r = ex.execute(quick).await.unwrap();
    let info = ex.wait_exit(None, &r.id).await.unwrap();
    assert_eq!(info.exit, ExitState::Code(0));
    assert_eq!(info.labels, vec![("chat".to_string(), "a".to_string())]);
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_in_python_is_contained() {
    let mut config = namespaced();
    config.limits.max_processes = Some(64);
    let ex = confined(config).await;
    assert_eq!(
        ex.process_limit(),
        Some(64),
        "no pids cgroup here: refusing to run a fork bomb unconfined"
    );
    let mark = new_mark();
    let mut plan = marked_plan(
        "python3 -c '\nimport os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n'",
        &mark,
    );
    plan.timeout = Some(Duration::from_secs(3));
    plan.on_timeout = OnTimeout::Kill;
    let bomb = {
        let ex = ex.clone();
        tokio::spawn(async move { ex.execute(plan).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // The tree never exceeds its limit, and the host stays responsive.
    let count = marked(&mark).len();
    assert!(count <= 64, "{count} processes in a tree limited to 64");
    let started = Instant::now();
    let other = Executor::new(ExecutorConfig::default()).unwrap();
    let r = other
        .execute(ExecPlan::new("echo responsive"))
        .await
        .unwrap();
    assert_eq!(r.output.text, "responsive\n");
    assert!(started.elapsed() < Duration::from_secs(10));
    other.shutdown().await;
    let r = bomb.await.unwrap();
    assert!(r.timed_out, "{r:?}");
    assert!(r.process_limit_hit, "{r:?}");
    let left = survivors_after(&mark, Duration::from_secs(10));
    kill_marked(&mark);
    assert!(left.is_empty(), "{left:?}");
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_limits_reach_every_command() {
    let mut config = ExecutorConfig::default();
    config.limits.file_size_bytes = Some(1 << 20);
    config.limits.cpu_seconds = Some(600);
    config.limits.address_space_bytes = Some(8 << 30);
    let ex = Executor::new(config).unwrap();
    let r = ex
        .execute(ExecPlan::new(
            "python3 -c 'import resource as r; print(*[r.getrlimit(x)[0] for x in \
             (r.RLIMIT_CORE, r.RLIMIT_FSIZE, r.RLIMIT_CPU, r.RLIMIT_AS)])'",
        ))
        .await
        .unwrap();
    assert_eq!(
        r.output.text.trim(),
        format!("0 {} 600 {}", 1 << 20, 8u64 << 30),
        "{r:?}"
    );
    // Writing past the file-size limit fails.
    let dir = tempfile::tempdir().unwrap();
    let mut plan = ExecPlan::new("head -c 2000000 /dev/zero > big; wc -c < big");
    plan.workdir = Some(dir.path().to_path_buf());
    let r = ex.execute(plan).await.unwrap();
    let size = std::fs::metadata(dir.path().join("big")).unwrap().len();
    assert!(size <= 1 << 20, "{size} bytes written: {r:?}");
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_init_that_cannot_run_gives_way_to_the_embedded_one() {
    let mut config = namespaced();
    config.init_program = Some("/nonexistent/shellward-init".into());
    let ex = confined(config).await;
    let r = ex
        .execute(ExecPlan::new("cat /proc/1/comm; readlink /proc/1/exe"))
        .await
        .unwrap();
    assert!(
        r.output
            .text
            .starts_with("shellward-init\n/memfd:shellward-init"),
        "{r:?}"
    );
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_static_init_is_the_default_and_names_itself() {
    // No init_program, and this test binary's main never called init_main_if_requested: only the embedded init can
    // make the namespace.
    let ex = confined(namespaced()).await;
    let r = ex
        .execute(ExecPlan::new("cat /proc/1/comm; readlink /proc/1/exe"))
        .await
        .unwrap();
    let lines: Vec<&str> = r.output.text.lines().collect();
    assert_eq!(lines.first(), Some(&"shellward-init"), "{r:?}");
    assert!(
        lines
            .get(1)
            .is_some_and(|exe| exe.starts_with("/memfd:shellward-init")),
        "the init is not the embedded memfd: {r:?}"
    );
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_namespace_commands_run_unconfined_and_say_so() {
    let mut config = namespaced();
    config.pid_namespace = false;
    let ex = Executor::new(config).unwrap();
    assert!(!ex.pid_namespaces());
    let r = ex.execute(ExecPlan::new("echo $$")).await.unwrap();
    assert!(r.output.text.trim().parse::<i32>().unwrap() > 3);
    ex.shutdown().await;
}
