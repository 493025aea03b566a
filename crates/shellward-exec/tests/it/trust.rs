//! The executor touches only what it started: a stranger that receives the pid of a dead tree member survives every
//! way a tree is stopped; a member that moved itself to another cgroup is still found and killed; one session cannot
//! take every running slot, and what is retained is bounded (count per session, bytes of logs on disk).

// Unix only: these tests prove Linux containment (`/proc`, signals, namespaces); `portable.rs` holds what every
// platform shares.
#![cfg(unix)]

use crate::common::*;
use shellward_exec::{
    ContainmentKind, ContainmentPreference, ExecError, ExecPlan, Executor, ExecutorConfig,
    OnTimeout, SignalKind,
};
use shellward_exec::{ReadOptions, Session};
use std::time::{Duration, Instant};

/// A quick config without PID namespaces: these tests prove what the executor does where no namespace confines a
/// tree (a reused pid is a stranger on the host, a member can leave the cgroup), so they must see host pids.
fn quick(f: impl FnOnce(&mut ExecutorConfig)) -> ExecutorConfig {
    let mut c = ExecutorConfig::default();
    c.pid_namespace = false;
    c.grace = Duration::from_millis(300);
    c.drain = Duration::from_millis(300);
    f(&mut c);
    c
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Waits (polling) until `cond` holds or `limit` passes; returns whether it held.
async fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !cond() {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Starts `setsid sleep 600` with exactly pid `pid` (the next pid after `ns_last_pid`); only meaningful where this
/// process is the only one forking (a private PID namespace).
fn stranger_with_pid(pid: i32) -> Option<std::process::Child> {
    for _ in 0..50 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).ok()?;
        let mut child = std::process::Command::new("setsid")
            .args(["sleep", "600"])
            .spawn()
            .ok()?;
        if child.id() as i32 == pid {
            return Some(child);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    None
}

/// One way of stopping a tree whose dead member's pid now belongs to a stranger. Returns a report line.
async fn reuse_round(way: &str) -> String {
    let ex = Executor::new(quick(|c| {
        c.containment = ContainmentPreference::ProcessGroup
    }))
    .unwrap();
    assert_eq!(ex.containment(), ContainmentKind::ProcessGroup);
    let mark = new_mark();
    let timeout_kill = way == "timeout-kill";
    let command = if timeout_kill {
        "sleep 1 & echo $!; (sleep 300 &); sleep 100"
    } else {
        "sleep 1 & echo $!; (sleep 300 &); exit 0"
    };
    let mut plan = marked_plan(command, &mark);
    if timeout_kill {
        plan.timeout = Some(Duration::from_secs(5));
        plan.on_timeout = OnTimeout::Kill;
    }
    let mut runner = Some({
        let ex = ex.clone();
        tokio::spawn(async move { ex.execute(plan).await.unwrap() })
    });
    if !timeout_kill {
        let r = runner.take().unwrap().await.unwrap();
        assert!(r.leftover_processes >= 1, "{way}: {r:?}");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let id = loop {
        if let Some(p) = ex.list_all(None, 10).processes.first() {
            break p.id.clone();
        }
        assert!(Instant::now() < deadline, "{way}: nothing started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    // The victim's pid, printed by the tree; a membership snapshot sees it alive.
    let deadline = Instant::now() + Duration::from_secs(5);
    let victim: i32 = loop {
        let text = ex
            .read_output(None, &id, &ReadOptions::view().max_bytes(1 << 16))
            .await
            .unwrap()
            .view
            .unwrap()
            .text;
        if let Ok(pid) = text.trim().parse() {
            break pid;
        }
        assert!(Instant::now() < deadline, "{way}: no pid printed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        ex.tree_members(None, &id).unwrap().contains(&victim),
        "{way}"
    );
    // The victim exits and is reaped (by its shell, or by the executor as subreaper).
    assert!(
        wait_until(Duration::from_secs(10), || !std::path::Path::new(&format!(
            "/proc/{victim}"
        ))
        .exists())
        .await,
        "{way}: {victim} was not reaped"
    );
    let Some(mut stranger) = stranger_with_pid(victim) else {
        ex.shutdown().await;
        return format!("REUSE {way} skipped: could not start a process with pid {victim}");
    };
    match way {
        "terminate" => drop(ex.signal(None, &id, SignalKind::Terminate).await.unwrap()),
        "kill" => drop(ex.signal(None, &id, SignalKind::Kill).await.unwrap()),
        "timeout-kill" => {
            let r = runner.take().unwrap().await.unwrap();
            assert!(r.timed_out, "{way}: {r:?}");
        }
        "shutdown" => ex.shutdown().await,
        other => panic!("unknown way {other}"),
    }
    let tree_gone = survivors_after(&mark, Duration::from_secs(5)).is_empty();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stranger_alive = stranger.try_wait().unwrap().is_none();
    let _ = stranger.kill();
    let _ = stranger.wait();
    kill_marked(&mark);
    ex.shutdown().await;
    format!("REUSE {way} stranger_alive={stranger_alive} tree_gone={tree_gone}")
}

/// Helper role for `a_stranger_with_a_reused_pid_is_never_signalled`: runs inside a private PID namespace (as its
/// init), where it alone forks, so it can hand a dead member's pid to a stranger on purpose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "helper: started by a_stranger_with_a_reused_pid_is_never_signalled inside a PID namespace"]
async fn pid_reuse_child_role() {
    assert_eq!(std::process::id(), 1, "run inside unshare --pid --fork");
    for way in ["terminate", "kill", "timeout-kill", "shutdown"] {
        println!("{}", reuse_round(way).await);
    }
}

/// Reproduces the PID-reuse defect the way it was found: a tree member exits, an unrelated `setsid sleep` receives
/// its pid (`ns_last_pid`), then the tree is stopped by terminate, kill, a foreground timeout with kill, and
/// shutdown. The stranger must survive each. Root-only (it writes `ns_last_pid` inside a private PID namespace, so
/// nothing outside is affected); without root it fails saying so.
#[test]
fn a_stranger_with_a_reused_pid_is_never_signalled() {
    assert!(
        is_root(),
        "this test needs root (it writes ns_last_pid inside a private PID namespace): run the suite as root, as CI does"
    );
    let out = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            shellward_test_support::test_path!("pid_reuse_child_role"),
            "--nocapture",
            "--test-threads=1",
        ])
        .output();
    let out = out
        .unwrap_or_else(|e| panic!("this test needs `unshare` (util-linux): cannot run it ({e})"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() || !stdout.is_empty() || !stderr.contains("unshare"),
        "this test needs a private PID namespace, and unshare failed: {stderr}"
    );
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.find("REUSE ").map(|i| &l[i..]))
        .collect();
    println!("{}", lines.join("\n"));
    assert_eq!(lines.len(), 4, "{stdout}");
    for l in lines {
        assert!(!l.contains("skipped"), "{l}");
        assert!(
            l.contains("stranger_alive=true"),
            "a stranger was signalled: {l}"
        );
        assert!(l.contains("tree_gone=true"), "the tree survived: {l}");
    }
}

/// cgroup path: a member that moved itself to another cgroup (root can) but kept the process group and the marker
/// is still killed, and the result says it had escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_left_the_cgroup_is_still_killed() {
    let ex = Executor::new(quick(|_| {})).unwrap();
    let (Some(dir), true) = (ex.cgroup_dir().map(|d| d.to_path_buf()), is_root()) else {
        panic!(
            "this test needs root and the cgroup path (run the suite as root, as CI does); containment here: {}",
            ex.containment()
        );
    };
    // The cgroup this test process is in: the parent of the executor's own.
    let outside = dir.parent().unwrap().join("cgroup.procs");
    for kind in [SignalKind::Kill, SignalKind::Terminate] {
        let mark = new_mark();
        // One member moves to another cgroup but stays in the process group; another also leaves the group.
        let mut plan = marked_plan(
            &format!(
                "sh -c 'echo $$ > {o}; exec sleep 300' & setsid sh -c 'echo $$ > {o}; exec sleep 301' & \
                 sleep 300 & echo started; wait",
                o = outside.display()
            ),
            &mark,
        );
        plan.background = true;
        let r = ex.execute(plan).await.unwrap();
        wait_for_output(&ex, &r.id, "started").await;
        // Wait until one member is outside the executor's cgroups.
        let root_name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let moved = wait_until(Duration::from_secs(5), || {
            marked(&mark)
                .iter()
                .filter(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                        .is_ok_and(|c| !c.contains(&root_name))
                })
                .count()
                == 2
        })
        .await;
        assert!(moved, "the members did not leave the cgroup");
        let outcome = ex.signal(None, &r.id, kind).await.unwrap();
        let left = survivors_after(&mark, Duration::from_secs(5));
        kill_marked(&mark);
        assert!(left.is_empty(), "{kind:?}: survivors {left:?}");
        assert!(outcome.escaped_killed >= 1, "{kind:?}: {outcome:?}");
        assert_eq!(outcome.survivors, 0, "{kind:?}: {outcome:?}");
    }
    ex.shutdown().await;
}

/// cgroup path: command cgroups are reused, and a finished tree's id never reaches the command that has its cgroup
/// now — signalling it says it has ended, lists no members, and the later command lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_tree_never_reaches_the_command_that_reuses_its_cgroup() {
    let ex = Executor::new(quick(|_| {})).unwrap();
    let Some(root) = ex.cgroup_dir().map(|d| d.to_path_buf()) else {
        panic!(
            "this test needs the cgroup path (a writable cgroup v2 hierarchy with cgroup.kill: run the suite as root, as CI does); containment here: {}",
            ex.containment()
        );
    };
    let first = ex.execute(ExecPlan::new("true")).await.unwrap();
    assert_eq!(first.exit.code(), Some(0));
    let mark = new_mark();
    let mut reused = None;
    // The first tree's clean-up runs on a task of its own right after its result: give it a moment.
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut plan = marked_plan("exec sleep 60", &mark);
        plan.background = true;
        let later = ex.execute(plan).await.unwrap();
        let pids = ex.tree_members(None, &later.id).unwrap();
        let in_first = pids.iter().any(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                .is_ok_and(|c| c.trim_end().ends_with(&format!("/{}", first.id)))
        });
        if in_first {
            reused = Some(later);
            break;
        }
        ex.signal(None, &later.id, SignalKind::Kill).await.unwrap();
    }
    let later = reused.expect("a later command starts in the first command's (empty) cgroup");
    assert!(root.join(first.id.as_str()).is_dir());
    for kind in [SignalKind::Kill, SignalKind::Terminate] {
        let err = ex.signal(None, &first.id, kind).await.unwrap_err();
        assert!(matches!(err, ExecError::NotAlive(_)), "{kind:?}: {err}");
    }
    assert!(ex.tree_members(None, &first.id).unwrap().is_empty());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        ex.info(None, &later.id).unwrap().running,
        "the later command was not touched"
    );
    assert_eq!(marked(&mark).len(), 1, "its process lives");
    ex.signal(None, &later.id, SignalKind::Kill).await.unwrap();
    let left = survivors_after(&mark, Duration::from_secs(5));
    kill_marked(&mark);
    assert!(left.is_empty(), "survivors {left:?}");
    ex.shutdown().await;
    assert!(
        !root.exists(),
        "every cgroup, free ones too, is removed at shutdown"
    );
}

/// cgroup path: the cgroup of a tree that was killed with `cgroup.kill` is removed, not reused: the kernel kills a
/// process cloned into a cgroup that was killed before, so a later command started in it would die at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_trees_cgroup_is_never_reused() {
    let ex = Executor::new(quick(|_| {})).unwrap();
    assert!(
        ex.cgroup_dir().is_some(),
        "this test needs the cgroup path (a writable cgroup v2 hierarchy with cgroup.kill: run the suite as root, as CI does); containment here: {}",
        ex.containment()
    );
    for round in 0..3 {
        let mut plan = ExecPlan::new("sleep 60");
        plan.background = true;
        let victim = ex.execute(plan).await.unwrap();
        ex.signal(None, &victim.id, SignalKind::Kill).await.unwrap();
        // The reaper releases the ended tree within a pass (500 ms).
        tokio::time::sleep(Duration::from_millis(700)).await;
        for _ in 0..3 {
            let r = ex.execute(ExecPlan::new("echo ok")).await.unwrap();
            assert_eq!(r.exit.code(), Some(0), "round {round}: {r:?}");
            assert_eq!(r.output.text, "ok\n", "round {round}");
        }
    }
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_session_at_its_running_cap_does_not_block_another() {
    let ex = Executor::new(quick(|c| {
        c.max_running_per_session = 2;
        c.max_running = 10;
    }))
    .unwrap();
    let mark = new_mark();
    let bg = |session: &str| {
        let mut plan = marked_plan("sleep 30", &mark);
        plan.background = true;
        plan.session = Some(session.into());
        plan
    };
    let a1 = ex.execute(bg("a")).await.unwrap();
    ex.execute(bg("a")).await.unwrap();
    let e = ex.execute(bg("a")).await.unwrap_err();
    assert!(
        matches!(
            e,
            ExecError::TooManyRunningInSession {
                running: 2,
                limit: 2
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("stop some or wait"), "{e}");
    // Another session still starts.
    ex.execute(bg("b")).await.unwrap();
    // A slot comes back when a process of the session ends.
    ex.signal(Some(&Session::from("a")), &a1.id, SignalKind::Kill)
        .await
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || ex
            .info(Some(&Session::from("a")), &a1.id)
            .is_ok_and(|i| !i.running))
        .await
    );
    ex.execute(bg("a")).await.unwrap();
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exited_processes_are_capped_per_session_and_readers_are_told() {
    let ex = Executor::new(quick(|c| c.max_retained_per_session = 5)).unwrap();
    let mut b = ExecPlan::new("echo other session");
    b.session = Some("b".into());
    let kept = ex.execute(b).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..12 {
        let mut plan = ExecPlan::new(format!("echo {i}"));
        plan.session = Some("a".into());
        ids.push(ex.execute(plan).await.unwrap().id);
    }
    // One reaper pass enforces the cap (no waiting for its period).
    ex.reap_now();
    let listed = ex.list_all(Some(&Session::from("a")), 100).processes;
    assert!(listed.len() <= 5, "{} retained", listed.len());
    assert!(listed.iter().any(|p| p.id == ids[11]), "the newest is kept");
    let e = ex
        .read_output(
            Some(&Session::from("a")),
            &ids[0],
            &ReadOptions::after(0).max_bytes(100),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ExecError::Evicted { .. }), "{e:?}");
    assert!(e.to_string().contains("retention limits"), "{e}");
    // Another session's evicted id is just unknown; the other session's own process is untouched.
    assert!(matches!(
        ex.read_output(
            Some(&Session::from("b")),
            &ids[0],
            &ReadOptions::after(0).max_bytes(100)
        )
        .await,
        Err(ExecError::UnknownProcess(_))
    ));
    assert!(ex.info(Some(&Session::from("b")), &kept.id).is_ok());
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_start_holds_its_session_to_the_cap_without_waiting_for_the_reaper() {
    let ex = Executor::new(quick(|c| c.max_retained_per_session = 5)).unwrap();
    // Other sessions' entries neither count against this one nor are touched by its cap.
    let mut others = Vec::new();
    for s in ["b", "c"] {
        for _ in 0..3 {
            let mut plan = ExecPlan::new("true");
            plan.session = Some(s.into());
            others.push((s, ex.execute(plan).await.unwrap().id));
        }
    }
    for i in 0..12 {
        let mut plan = ExecPlan::new(format!("echo {i}"));
        plan.session = Some("a".into());
        ex.execute(plan).await.unwrap();
        // An entry is dropped only once its tree's resources are released, on a task of their own: a moment.
        tokio::time::sleep(Duration::from_millis(25)).await;
        // Checked right away: the reaper passes at most once per 500 ms, and these starts take a few dozen.
        let retained = ex.list_all(Some(&Session::from("a")), 100).processes.len();
        assert!(retained <= 5, "{retained} retained after start {i}");
    }
    for (s, id) in &others {
        assert!(
            ex.info(Some(&Session::from(*s)), id).is_ok(),
            "{id} of session {s} was dropped"
        );
    }
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_bytes_on_disk_are_capped_oldest_exited_first() {
    let parent = tempfile::tempdir().unwrap();
    let ex = Executor::new(quick(|c| {
        c.max_log_bytes = 1 << 20;
        c.log_parent = Some(parent.path().into());
    }))
    .unwrap();
    let mut ids = Vec::new();
    for _ in 0..6 {
        let r = ex
            .execute(ExecPlan::new("head -c 400000 /dev/zero | tr '\\0' a"))
            .await
            .unwrap();
        assert!(r.output.text.len() < 400000, "the view is bounded");
        ids.push(r.id);
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let on_disk: u64 = std::fs::read_dir(ex.log_dir())
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(on_disk <= 1 << 20, "{on_disk} bytes of logs on disk");
    let e = ex
        .read_output(None, &ids[0], &ReadOptions::after(0).max_bytes(100))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("of output logs on disk"), "{e}");
    let newest = ex
        .read_output(None, &ids[5], &ReadOptions::after(0).max_bytes(1 << 20))
        .await
        .unwrap();
    assert_eq!(newest.chunk.unwrap().text.len(), 400000);
    ex.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let parent = tempfile::tempdir().unwrap();
    let ex = Executor::new(quick(|c| c.log_parent = Some(parent.path().into()))).unwrap();
    let r = ex.execute(ExecPlan::new("echo secret")).await.unwrap();
    let dir_mode = std::fs::metadata(ex.log_dir())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
    let log = r.log_path.expect("a log");
    assert!(log.starts_with(ex.log_dir()));
    let file_mode = std::fs::metadata(&log).unwrap().permissions().mode() & 0o777;
    assert_eq!(file_mode, 0o600);
    let name = ex.log_dir().file_name().unwrap().to_str().unwrap();
    assert!(
        !name.contains(&std::process::id().to_string()),
        "the name is not predictable from the pid: {name}"
    );
    ex.shutdown().await;
    assert!(
        std::fs::read_dir(parent.path()).unwrap().next().is_none(),
        "shutdown removes the directory"
    );
}

const SUITE_AS_USER: &str = "SHELLWARD_TEST_TRUST_AS_USER";

/// Every test above again as a normal user: the session sandbox in a user namespace of its own, trees contained by
/// process group and marker (no writable cgroup) — the same guarantees on that path.
#[test]
fn every_trust_test_passes_as_a_normal_user() {
    if shellward_test_support::in_fresh_process(SUITE_AS_USER) || !shellward_test_support::is_root()
    {
        // Already the normal user's run (or not root, so the suite itself is that run).
        return;
    }
    let out = shellward_test_support::rerun_all_as_user(
        module_path!(),
        &[
            "every_trust_test_passes_as_a_normal_user",
            // Their subjects need root: the cgroup path, and writing ns_last_pid.
            "a_stranger_with_a_reused_pid_is_never_signalled",
            "a_member_that_left_the_cgroup_is_still_killed",
            "a_finished_tree_never_reaches_the_command_that_reuses_its_cgroup",
            "a_killed_trees_cgroup_is_never_reused",
        ],
        SUITE_AS_USER,
    );
    println!("{out}");
}
