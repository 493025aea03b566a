//! The behaviour every platform shares, run on Linux and, cross-built, on Windows (under Wine here): a command's
//! output, a timeout that kills a tree with a child, background runs read by cursor, input over a pipe, terminate
//! and kill, a shutdown that leaves nothing running, and a network the platform cannot give refused or reported.
//!
//! Each test names its command for both shells (`sh -c` and `cmd /s /c`); the tree's members are the executor's own
//! account (a job object's process list on Windows, the proven tree on Linux), checked to be empty afterwards.

use shellward_exec::{Confinement, Network, Unenforceable};
use shellward_exec::{
    ExecPlan, Executor, ExecutorConfig, ExitState, OnTimeout, SignalKind, StdinMode,
};
use shellward_exec::{ProcessId, ReadOptions};
use std::time::{Duration, Instant};

/// The command for this platform's default shell.
fn cmd(unix: &str, windows: &str) -> String {
    if cfg!(windows) { windows } else { unix }.to_string()
}

/// A command that runs about `secs` seconds and starts a child process of its own doing it.
fn long_with_child(secs: u32) -> String {
    cmd(
        &format!("sleep {secs} & sleep {secs}; wait"),
        &format!("ping -n {secs} 127.0.0.1 >NUL"),
    )
}

fn config() -> ExecutorConfig {
    let mut c = ExecutorConfig::default();
    c.grace = Duration::from_millis(500);
    c.drain = Duration::from_millis(500);
    c
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Reads `id`'s output (no session) with `options`.
async fn output_of(
    ex: &Executor,
    id: &ProcessId,
    options: ReadOptions,
) -> shellward_exec::OutputRead {
    ex.read_output(None, id, &options).await.unwrap()
}

/// Waits up to `limit` for the process's tree to have no member; returns what is left.
async fn members_after(ex: &Executor, id: &ProcessId, limit: Duration) -> Vec<i32> {
    let deadline = Instant::now() + limit;
    loop {
        let left = ex.tree_members(None, id).unwrap_or_default();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn a_command_prints_and_exits_with_its_code() {
    runtime().block_on(async {
        let ex = Executor::new(config()).unwrap();
        let r = ex.execute(ExecPlan::new("echo hello")).await.unwrap();
        assert_eq!(r.exit, ExitState::Code(0), "{r:?}");
        assert!(r.output.text.contains("hello"), "{r:?}");
        let r = ex.execute(ExecPlan::new("exit 3")).await.unwrap();
        assert_eq!(r.exit, ExitState::Code(3), "{r:?}");
        ex.shutdown().await;
    });
}

#[test]
fn a_timeout_kills_the_tree_with_its_child() {
    runtime().block_on(async {
        let ex = Executor::new(config()).unwrap();
        let mut plan = ExecPlan::new(long_with_child(40));
        plan.timeout = Some(Duration::from_secs(2));
        plan.on_timeout = OnTimeout::Kill;
        let started = Instant::now();
        let r = ex.execute(plan).await.unwrap();
        assert!(r.timed_out, "{r:?}");
        assert!(!r.running, "{r:?}");
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(r.leftover_processes, 0, "{r:?}");
        ex.shutdown().await;
    });
}

#[test]
fn a_background_run_is_read_by_cursor_until_it_ends() {
    runtime().block_on(async {
        let ex = Executor::new(config()).unwrap();
        let mut plan = ExecPlan::new(cmd(
            "echo one; sleep 1; echo two",
            "echo one & ping -n 2 127.0.0.1 >NUL & echo two",
        ));
        plan.background = true;
        let r = ex.execute(plan).await.unwrap();
        assert!(r.running || r.exit == ExitState::Code(0), "{r:?}");
        let mut cursor = 0;
        let mut seen = String::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let read = output_of(
                &ex,
                &r.id,
                ReadOptions::after(cursor)
                    .wait(Duration::from_secs(2))
                    .max_bytes(64 * 1024),
            )
            .await;
            let chunk = read.chunk.as_ref().expect("a cursor read returns a chunk");
            seen.push_str(&chunk.text);
            cursor = read.next_cursor;
            if !read.running && read.output_closed {
                assert_eq!(read.exit, ExitState::Code(0), "{read:?}");
                break;
            }
            assert!(Instant::now() < deadline, "still running: {seen:?}");
        }
        let one = seen.find("one").expect(&seen);
        let two = seen.find("two").expect(&seen);
        assert!(one < two, "{seen:?}");
        assert_eq!(ex.info(None, &r.id).unwrap().exit, ExitState::Code(0));
        ex.shutdown().await;
    });
}

#[test]
fn input_is_written_over_a_pipe() {
    runtime().block_on(async {
        let ex = Executor::new(config()).unwrap();
        let mut plan = ExecPlan::new(cmd("cat", "more"));
        plan.background = true;
        plan.stdin = StdinMode::Pipe;
        let r = ex.execute(plan).await.unwrap();
        let written = ex
            .close_input(None, &r.id, b"shellward-input\n", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(written, 16);
        let info = ex.wait_exit(None, &r.id).await.unwrap();
        assert_eq!(info.exit, ExitState::Code(0), "{info:?}");
        let read = output_of(
            &ex,
            &r.id,
            ReadOptions::after(0)
                .wait(Duration::from_secs(2))
                .max_bytes(4096),
        )
        .await;
        assert!(read.chunk.unwrap().text.contains("shellward-input"));
        ex.shutdown().await;
    });
}

#[test]
fn terminate_and_kill_end_the_whole_tree() {
    runtime().block_on(async {
        let ex = Executor::new(config()).unwrap();
        for kind in [SignalKind::Terminate, SignalKind::Kill] {
            let mut plan = ExecPlan::new(long_with_child(60));
            plan.background = true;
            let r = ex.execute(plan).await.unwrap();
            assert!(r.running, "{r:?}");
            // The shell and the child it started are both members (on Windows: both in the job).
            let deadline = Instant::now() + Duration::from_secs(10);
            while ex.tree_members(None, &r.id).unwrap().len() < 2 {
                assert!(Instant::now() < deadline, "the child never joined the tree");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let started = Instant::now();
            let outcome = ex.signal(None, &r.id, kind).await.unwrap();
            assert_eq!(outcome.survivors, 0, "{kind:?}: {outcome:?}");
            assert!(started.elapsed() < Duration::from_secs(10));
            assert!(
                members_after(&ex, &r.id, Duration::from_secs(5))
                    .await
                    .is_empty()
            );
            let info = ex.wait_exit(None, &r.id).await.unwrap();
            assert_ne!(info.exit, ExitState::Code(0), "{kind:?}: {info:?}");
            // A second signal has nothing left to reach.
            assert!(ex.signal(None, &r.id, SignalKind::Kill).await.is_err());
        }
        ex.shutdown().await;
    });
}

#[test]
fn shutdown_stops_every_background_run() {
    runtime().block_on(async {
        let ex = Executor::new(config()).unwrap();
        let mut ids = Vec::new();
        for _ in 0..3 {
            let mut plan = ExecPlan::new(long_with_child(60));
            plan.background = true;
            ids.push(ex.execute(plan).await.unwrap().id);
        }
        let pids: Vec<i32> = ids
            .iter()
            .flat_map(|id| ex.tree_members(None, id).unwrap())
            .collect();
        assert!(!pids.is_empty());
        let started = Instant::now();
        ex.shutdown().await;
        assert!(started.elapsed() < Duration::from_secs(15));
        for id in &ids {
            assert!(
                members_after(&ex, id, Duration::from_secs(5))
                    .await
                    .is_empty(),
                "{id}"
            );
            assert!(!ex.info(None, id).unwrap().running, "{id}");
        }
        assert!(ex.execute(ExecPlan::new("echo late")).await.is_err());
    });
}

/// A network the platform cannot give (on Windows any but `host`) is refused, naming the setting that runs it anyway;
/// with `unenforceable = Run` the command runs and its result says the host's network is what it had. Where the
/// platform gives it (Linux), it holds either way.
#[test]
fn a_network_the_platform_cannot_give_is_refused_or_runs_saying_so() {
    runtime().block_on(async {
        let mut plan = ExecPlan::new("echo ran");
        plan.confinement = Confinement::new(None, Network::None);
        let strict = Executor::new(config()).unwrap();
        let refused = strict.execute(plan.clone()).await;
        let mut lenient_config = config();
        lenient_config.unenforceable = Unenforceable::Run;
        let lenient = Executor::new(lenient_config).unwrap();
        let ran = lenient.execute(plan).await.unwrap();
        assert!(ran.output.text.contains("ran"), "{ran:?}");
        if cfg!(windows) {
            let e = refused.unwrap_err().to_string();
            assert!(e.contains("Windows") && e.contains("unenforceable"), "{e}");
            assert_eq!(ran.confinement.network, Network::Host);
        } else {
            assert_eq!(refused.unwrap().confinement.network, Network::None);
            assert_eq!(ran.confinement.network, Network::None);
        }
        strict.shutdown().await;
        lenient.shutdown().await;
    });
}

/// With only the core environment inherited, a command still finds what its platform's programs need: on Windows
/// `SystemRoot` (without it many programs do not start) and `PATH`; elsewhere `PATH`.
#[test]
fn a_core_environment_keeps_what_programs_need() {
    runtime().block_on(async {
        let mut c = config();
        c.env.inherit = shellward_exec::Inherit::Core;
        let ex = Executor::new(c).unwrap();
        let r = ex
            .execute(ExecPlan::new(cmd(
                "echo \"$PATH\"",
                "echo %SystemRoot% & echo %PATH%",
            )))
            .await
            .unwrap();
        assert_eq!(r.exit, ExitState::Code(0), "{r:?}");
        assert!(
            !r.output.text.contains('%'),
            "a variable was not set: {r:?}"
        );
        assert!(r.output.text.trim().len() > 3, "{r:?}");
        let r = ex
            .execute(ExecPlan::new(cmd(
                "ls / >/dev/null",
                "ping -n 1 127.0.0.1 >NUL",
            )))
            .await
            .unwrap();
        assert_eq!(r.exit, ExitState::Code(0), "{r:?}");
        ex.shutdown().await;
    });
}

/// A preview is refused where the platform cannot make one (every platform but Linux), naming the platform, and
/// nothing runs; on Linux `preview_support` says yes (this project's machines have namespaces and Landlock).
#[test]
fn a_preview_is_refused_where_the_platform_cannot_make_one() {
    runtime().block_on(async {
        let ex = Executor::new(config()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let mut plan = ExecPlan::new(cmd(
            &format!("echo x > {}", marker.display()),
            &format!("echo x > {}", marker.display()),
        ));
        plan.confinement = Confinement::new(Some(vec![dir.path().to_path_buf()]), Network::Host);
        let support = ex.preview_support();
        if cfg!(target_os = "linux") {
            assert_eq!(support, Ok(()));
        } else {
            let why = support.unwrap_err();
            assert!(why.contains(std::env::consts::OS), "{why}");
            let err = ex
                .preview(plan, &shellward_exec::PreviewLimits::default())
                .await
                .unwrap_err();
            assert!(
                matches!(err, shellward_exec::ExecError::PreviewUnavailable(_)),
                "{err}"
            );
            assert!(!marker.exists(), "nothing ran");
        }
        ex.shutdown().await;
    });
}
