//! The POSIX platform (what macOS and FreeBSD run) exercised on Linux: a leader in a process group of its own, its
//! output on pipes or a terminal, its input, the group signalled whole, a process that left the group followed (the
//! walk macOS does, reading Linux's `/proc`), the exit waited for, and the confinement it cannot give refused. Every test marks its processes and proves from `/proc` that none survive.

use super::{BaseEnv, Platform, SpawnEnv, wait_leader};
use crate::plan::{Confinement, Network};
use crate::results::ExitState;
use crate::sys::SpawnSpec;
use std::ffi::OsString;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

const MARK: &str = "SW_POSIX_TEST_MARK";
/// Set in the fresh process the tests run in.
const FRESH: &str = "SW_POSIX_TEST_FRESH";

/// The POSIX platform's cases, in a fresh process of their own: this crate's other tests make the test process a
/// child subreaper whose reaper would reap a leader before its own wait does (macOS and FreeBSD have no such
/// reaper), and a leader's group must not meet theirs.
#[test]
fn the_posix_platform_runs_commands_as_macos_and_freebsd_do() {
    if !shellward_test_support::in_fresh_process(FRESH) {
        shellward_test_support::rerun_in_fresh_process(
            "sys::bsd::tests::the_posix_platform_runs_commands_as_macos_and_freebsd_do",
            FRESH,
        );
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        a_command_runs_in_its_own_group_and_its_exit_is_reported().await;
        kill_reaches_the_whole_group_and_nothing_outside_it().await;
        a_process_that_leaves_the_group_is_followed_and_killed().await;
        the_watchdog_kills_the_groups_of_an_executor_that_died().await;
        input_goes_through_a_pipe_and_a_terminal_is_the_commands_own().await;
        confinement_it_cannot_give_is_refused_unless_the_operator_runs_it_anyway().await;
    });
}

/// A spec running `command` with `sh -c`, its processes marked with `mark`.
fn spec(command: &str, mark: &str, stdin: crate::StdinMode) -> SpawnSpec {
    let base = BaseEnv::new(vec![(
        "PATH".into(),
        std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
    )])
    .unwrap();
    SpawnSpec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), command.into()],
        workdir: std::env::temp_dir(),
        env: SpawnEnv::new(Arc::new(base), vec![(MARK.into(), OsString::from(mark))]),
        separate_stderr: false,
        name: "p1".into(),
        stdin,
        session: None,
        log_dir: std::env::temp_dir(),
        confinement: Confinement::none(),
        #[cfg(target_os = "linux")]
        preview: None,
    }
}

fn platform() -> Platform {
    Platform::new(&crate::ExecutorConfig::default(), &std::env::temp_dir()).unwrap()
}

fn survivors(mark: &str) -> std::collections::HashSet<i32> {
    shellward_test_support::survivors_after(&format!("{MARK}={mark}"), Duration::from_secs(5))
}

/// `command` started with its processes marked with `mark`.
async fn started(command: &str, mark: &str) -> super::platform::Spawned {
    platform()
        .spawn(spec(command, mark, crate::StdinMode::Null))
        .await
        .unwrap()
}

/// The processes marked with `mark` once `ready` holds for them (at most 10 s).
async fn marked_once(mark: &str, ready: impl Fn(&[i32]) -> bool) -> Vec<i32> {
    let entry = format!("{MARK}={mark}");
    let started = std::time::Instant::now();
    loop {
        let pids: Vec<i32> = shellward_test_support::with_env(&entry)
            .into_iter()
            .collect();
        if ready(&pids) {
            return pids;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{pids:?} never got ready"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Everything readable from `fd` until every writer is gone.
fn read_all(fd: std::os::fd::OwnedFd) -> String {
    let mut text = String::new();
    let _ = std::fs::File::from(fd).read_to_string(&mut text);
    text
}

async fn a_command_runs_in_its_own_group_and_its_exit_is_reported() {
    let mark = shellward_test_support::unique_mark("posix-exit");
    let spawned = platform()
        .spawn(spec(
            "echo out; echo err >&2; exit 7",
            &mark,
            crate::StdinMode::Null,
        ))
        .await
        .unwrap();
    let pid = spawned.leader.pid();
    assert_eq!(spawned.tree.pgid(), pid);
    let output = tokio::task::spawn_blocking(move || read_all(spawned.stdout));
    let mut exited = false;
    let state = wait_leader(spawned.leader, &spawned.tree, || exited = true)
        .await
        .unwrap();
    assert!(exited);
    assert_eq!(state, ExitState::Code(7));
    assert_eq!(output.await.unwrap(), "out\nerr\n");
    assert!(!spawned.tree.alive());
    assert!(survivors(&mark).is_empty());
}

async fn kill_reaches_the_whole_group_and_nothing_outside_it() {
    let mark = shellward_test_support::unique_mark("posix-kill");
    let spawned = started("sleep 300 & sleep 301 & wait", &mark).await;
    let members = marked_once(&mark, |pids| pids.len() == 3).await;
    for pid in &members {
        let group = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(*pid))).unwrap();
        assert_eq!(
            group.as_raw(),
            spawned.tree.pgid(),
            "{pid} is outside the group"
        );
    }
    assert!(spawned.tree.alive());
    let mut listed = spawned.tree.member_pids();
    listed.sort();
    let mut expected = members.clone();
    expected.sort();
    assert_eq!(listed, expected, "the tree lists its group's processes");
    assert!(spawned.tree.escapees().is_empty());
    spawned.tree.kill();
    let state = wait_leader(spawned.leader, &spawned.tree, || {})
        .await
        .unwrap();
    assert_eq!(state, ExitState::Signal(libc::SIGKILL));
    assert!(survivors(&mark).is_empty(), "the group outlived its kill");
    // (The killed sleeps are orphans: whether their group is gone depends on their new parent reaping them, which
    // init does on macOS and FreeBSD; what counts here is that nothing of them runs.)
    // This test's own process is untouched (it is in another group).
    assert_ne!(nix::unistd::getpgrp().as_raw(), spawned.tree.pgid());
}

/// A member that moves to a session of its own (`setsid`) is still the tree's: listed as escaped, killed with the
/// tree (macOS finds it through its living parent; FreeBSD through the reaper's subtree).
async fn a_process_that_leaves_the_group_is_followed_and_killed() {
    let mark = shellward_test_support::unique_mark("posix-escape");
    let spawned = started("setsid sleep 302 & sleep 303 & wait", &mark).await;
    let pgid = spawned.tree.pgid();
    let outside = |pids: &[i32]| -> Vec<i32> {
        pids.iter()
            .copied()
            .filter(|pid| {
                nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(*pid)))
                    .is_ok_and(|g| g.as_raw() != pgid)
            })
            .collect()
    };
    let members = marked_once(&mark, |pids| pids.len() == 3 && outside(pids).len() == 1).await;
    let escaped = outside(&members)[0];
    assert_eq!(spawned.tree.escapees(), [escaped as u32]);
    assert!(spawned.tree.member_pids().contains(&escaped));
    spawned.tree.kill();
    let state = wait_leader(spawned.leader, &spawned.tree, || {})
        .await
        .unwrap();
    assert_eq!(state, ExitState::Signal(libc::SIGKILL));
    assert!(
        survivors(&mark).is_empty(),
        "the escaped process outlived the kill"
    );
    assert!(spawned.tree.escapees().is_empty());
}

/// The executor's death (its end of the watchdog's pipe closed without `quit`) kills the groups still running; a
/// released group is left alone, and a clean shutdown kills nothing.
async fn the_watchdog_kills_the_groups_of_an_executor_that_died() {
    let mark = shellward_test_support::unique_mark("posix-watchdog");
    let spared = shellward_test_support::unique_mark("posix-watchdog-spared");
    let platform = platform();
    let spawn = |command: &'static str, mark: &str| {
        platform.spawn(spec(command, mark, crate::StdinMode::Null))
    };
    let doomed = spawn("sleep 306 & sleep 307; wait", &mark).await.unwrap();
    let released = spawn("sleep 308 & sleep 309; wait", &spared).await.unwrap();
    marked_once(&mark, |pids| pids.len() == 3).await;
    marked_once(&spared, |pids| pids.len() == 3).await;
    platform.watchdog_send(&format!("- {}\n", released.tree.pgid()));
    let mut dog = platform.watchdog.as_ref().unwrap().abandon().unwrap();
    let waited = wait_leader(doomed.leader, &doomed.tree, || {});
    let state = tokio::time::timeout(Duration::from_secs(10), waited)
        .await
        .expect("the watchdog left the group running")
        .unwrap();
    assert_eq!(state, ExitState::Signal(libc::SIGKILL));
    assert!(
        survivors(&mark).is_empty(),
        "the watchdog left the group running"
    );
    assert!(dog.wait().unwrap().success());
    assert_eq!(
        shellward_test_support::with_env(&format!("{MARK}={spared}")).len(),
        3,
        "a released group was killed"
    );
    released.tree.kill();
    wait_leader(released.leader, &released.tree, || {})
        .await
        .unwrap();
    assert!(survivors(&spared).is_empty());

    // A clean shutdown: the watchdog exits and kills nothing.
    let platform =
        super::Platform::new(&crate::ExecutorConfig::default(), &std::env::temp_dir()).unwrap();
    let kept = platform
        .spawn(spec("sleep 310", &spared, crate::StdinMode::Null))
        .await
        .unwrap();
    platform.shutdown();
    assert!(
        platform.watchdog.as_ref().unwrap().abandon().is_none(),
        "the watchdog was not let go"
    );
    assert!(kept.tree.alive(), "the shutdown's watchdog killed a group");
    kept.tree.kill();
    wait_leader(kept.leader, &kept.tree, || {}).await.unwrap();
}

async fn input_goes_through_a_pipe_and_a_terminal_is_the_commands_own() {
    let mark = shellward_test_support::unique_mark("posix-io");
    let spawned = platform()
        .spawn(spec(
            "read line; echo got:$line",
            &mark,
            crate::StdinMode::Pipe,
        ))
        .await
        .unwrap();
    let input = std::fs::File::from(spawned.stdin.unwrap());
    std::io::Write::write_all(&mut &input, b"hello\n").unwrap();
    drop(input);
    let output = tokio::task::spawn_blocking(move || read_all(spawned.stdout));
    let state = wait_leader(spawned.leader, &spawned.tree, || {})
        .await
        .unwrap();
    assert_eq!(state, ExitState::Code(0));
    assert_eq!(output.await.unwrap(), "got:hello\n");

    let spawned = platform()
        .spawn(spec(
            "test -t 0 && test -t 1 && stty size",
            &mark,
            crate::StdinMode::Terminal {
                rows: 33,
                cols: 101,
            },
        ))
        .await
        .unwrap();
    assert!(spawned.terminal);
    let mut text = String::new();
    let mut buf = Vec::new();
    let reading = crate::sys::read_terminal(spawned.stdout, |b| buf.extend_from_slice(b));
    let (read, state) = tokio::join!(reading, wait_leader(spawned.leader, &spawned.tree, || {}));
    read.unwrap();
    text.push_str(&String::from_utf8_lossy(&buf));
    assert_eq!(state.unwrap(), ExitState::Code(0), "{text:?}");
    assert!(text.contains("33 101"), "{text:?}");
    assert!(survivors(&mark).is_empty());
}

async fn confinement_it_cannot_give_is_refused_unless_the_operator_runs_it_anyway() {
    let mark = shellward_test_support::unique_mark("posix-refuse");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let command = format!("touch {}", marker.display());
    for confinement in [
        Confinement::new(Some(vec![dir.path().to_path_buf()]), Network::Host),
        Confinement::new(None, Network::None),
        Confinement::new(None, Network::Loopback),
        Confinement::new(None, Network::Host).allow_only(["crates.io"]),
    ] {
        let mut s = spec(&command, &mark, crate::StdinMode::Null);
        s.confinement = confinement.clone();
        let e = match platform().spawn(s).await {
            Err(e) => e,
            Ok(_) => panic!("{confinement:?} ran unconfined"),
        };
        assert_eq!(e.kind(), std::io::ErrorKind::Unsupported, "{e}");
        assert!(e.to_string().contains(std::env::consts::OS), "{e}");
        assert!(e.to_string().contains("unenforceable = \"run\""), "{e}");
        assert!(!marker.exists(), "{confinement:?}: the command ran");
    }
    // The operator's explicit choice: such plans run without what cannot be held, and the spawn says so.
    let config = crate::ExecutorConfig {
        unenforceable: crate::Unenforceable::Run,
        ..Default::default()
    };
    let run_anyway = Platform::new(&config, &std::env::temp_dir()).unwrap();
    let mut s = spec(&command, &mark, crate::StdinMode::Null);
    s.confinement = Confinement::new(Some(vec![dir.path().to_path_buf()]), Network::None);
    let spawned = run_anyway.spawn(s).await.unwrap();
    assert!(!spawned.writes_confined && !spawned.network_enforced);
    wait_leader(spawned.leader, &spawned.tree, || {})
        .await
        .unwrap();
    assert!(marker.exists(), "the command did not run");
    // A system-call deny list alone is reported (the result says it was not filtered), not refused.
    let mut s = spec("true", &mark, crate::StdinMode::Null);
    s.confinement = Confinement::none().deny_syscalls(["ptrace"]);
    let spawned = platform().spawn(s).await.unwrap();
    assert!(!spawned.syscalls_filtered && !spawned.writes_confined && spawned.network_enforced);
    wait_leader(spawned.leader, &spawned.tree, || {})
        .await
        .unwrap();
    assert!(survivors(&mark).is_empty());
}
