//! Unit tests of the executor's internals.

use super::*;
use crate::output::ReadOptions;
use nix::sys::signal::Signal;

/// An executor whose sessions get PID namespaces (`pid_namespace`) or not.
fn with_namespaces(pid_namespace: bool) -> Executor {
    Executor::new(ExecutorConfig {
        pid_namespace,
        ..Default::default()
    })
    .unwrap()
}

/// An executor without PID namespaces.
fn without_namespaces() -> Executor {
    with_namespaces(false)
}

/// The process whose reads pause between the two halves of a read (its state, then its output) until it has ended
/// and its output is drained: the moment a process ending at the wrong time used to cost a read its last bytes.
static PAUSE_READS_OF: Mutex<Option<String>> = Mutex::new(None);

/// Called by [`Executor::read_output`] between taking the process's state and its output.
pub(super) async fn between_state_and_output(proc: &Proc) {
    let paused = PAUSE_READS_OF.lock().unwrap().as_deref() == Some(proc.id.as_str());
    if paused {
        let ended = async {
            proc.wait_exit().await;
            proc.wait_readers().await;
        };
        tokio::time::timeout(Duration::from_secs(10), ended)
            .await
            .expect("the paused process ends within 10 s");
    }
}

/// A current-thread runtime with timers and I/O.
fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Shutdown's blocking half (cgroups removed, the watchdog's exit waited for, the log directory removed) runs off
/// the runtime's threads: on a current-thread runtime, another task still runs while shutdown waits for a
/// watchdog that is held stopped, and that task is what lets it go on.
#[test]
fn shutdown_does_not_block_the_runtime_it_is_awaited_on() {
    use crate::sys::linux::pidfd::{pidfd_open, pidfd_send_signal};
    let rt = current_thread();
    rt.block_on(async {
        let ex = Executor::new(ExecutorConfig::default()).unwrap();
        let pid = ex.inner.platform.watchdog_pid();
        assert!(pid > 0, "the executor has a watchdog");
        // The watchdog is our own unreaped child (reaped only by shutdown): the pidfd names that very process.
        let dog = Arc::new(pidfd_open(pid).unwrap());
        pidfd_send_signal(&dog, Signal::SIGSTOP).unwrap();
        // A safety net, so that a blocking shutdown fails this test instead of hanging it.
        let net = dog.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(10));
            let _ = pidfd_send_signal(&net, Signal::SIGCONT);
        });
        let resumed = Arc::new(AtomicBool::new(false));
        let task = {
            let (dog, resumed) = (dog.clone(), resumed.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                resumed.store(true, Ordering::SeqCst);
                pidfd_send_signal(&dog, Signal::SIGCONT).unwrap();
            })
        };
        let started = Instant::now();
        ex.shutdown().await;
        assert!(
            resumed.load(Ordering::SeqCst),
            "shutdown returned after {:?} without letting the runtime's other task run",
            started.elapsed()
        );
        task.await.unwrap();
    });
}

/// The portable spawn path (`std::process::Command` + `pre_exec`, taken where the `clone3` fast path is not
/// available) sets the child up with the same routine as the fast path: signals the host ignores are reset (Rust
/// ignores SIGPIPE), no core files, `no_new_privs`, and the process-count group joined.
#[test]
fn the_portable_spawn_path_sets_the_child_up_as_the_fast_one() {
    let rt = current_thread();
    rt.block_on(async {
        let ex = without_namespaces();
        let probe =
            "ulimit -c; grep -E '^(NoNewPrivs|SigIgn)' /proc/self/status; cat /proc/self/cgroup";
        let mut seen = Vec::new();
        for portable in [false, true] {
            ex.inner
                .platform
                .force_portable
                .store(portable, Ordering::Relaxed);
            let r = ex.execute(ExecPlan::new(probe)).await.unwrap();
            let text = r.output.text.clone();
            assert_eq!(r.exit, ExitState::Code(0), "{text}");
            assert!(text.starts_with("0\n"), "core files allowed: {text}");
            assert!(text.contains("NoNewPrivs:\t1"), "{text}");
            let ignored = text
                .lines()
                .find_map(|l| l.strip_prefix("SigIgn:\t"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
                .unwrap_or_else(|| panic!("no SigIgn line: {text}"));
            // Bit n-1 is signal n: SIGPIPE (13), which this test process ignores, must be reset.
            assert_eq!(ignored & (1 << 12), 0, "SIGPIPE stayed ignored: {text}");
            if ex.process_limit().is_some() {
                assert!(
                    text.lines()
                        .any(|l| l.contains(":pids:") && l.contains("shellward")),
                    "not in its pids group: {text}"
                );
            }
            seen.push(
                text.lines()
                    .filter(|l| !l.contains(":/"))
                    .map(str::to_string)
                    .collect::<Vec<_>>(),
            );
        }
        assert_eq!(seen[0], seen[1], "both paths set the child up alike");
        ex.shutdown().await;
    });
}

/// Where no start can enter a session sandbox (the portable spawn path), commands run without one and the
/// executor says so (`pid_namespaces()` false) instead of reporting a sandbox its commands are not in.
#[test]
fn without_a_way_into_a_sandbox_the_executor_says_it_has_none() {
    let rt = current_thread();
    rt.block_on(async {
        let ex = Executor::new(ExecutorConfig::default()).unwrap();
        if !ex.pid_namespaces() {
            // This host gives no sandbox at all: nothing to prove here.
            ex.shutdown().await;
            return;
        }
        ex.inner
            .platform
            .force_portable
            .store(true, Ordering::Relaxed);
        let r = ex
            .execute(ExecPlan::new("readlink /proc/self/ns/pid"))
            .await
            .unwrap();
        assert_eq!(r.exit, ExitState::Code(0), "{r:?}");
        let ours = std::fs::read_link("/proc/self/ns/pid").unwrap();
        assert_eq!(r.output.text.trim(), ours.to_string_lossy(), "{r:?}");
        assert!(
            !ex.pid_namespaces(),
            "the executor still claims a sandbox its commands are not in"
        );
        ex.shutdown().await;
    });
}

/// With the static init in the build, the watchdog is that binary in its watchdog mode, not a shell: with
/// namespaces on (it shares the init's memfd) and off (it loads its own), and it still quits when told to.
#[cfg(shellward_embedded_init)]
#[test]
fn the_watchdog_is_the_static_binary() {
    let rt = current_thread();
    for pid_namespace in [true, false] {
        rt.block_on(async {
            let ex = with_namespaces(pid_namespace);
            let pid = ex.inner.platform.watchdog_pid();
            // `posix_spawn` returns once the child has left the spawner's memory (`CLONE_VFORK`), which the
            // kernel signals before it renames the process and before the init names itself: wait for the name.
            let deadline = Instant::now() + Duration::from_secs(10);
            let comm = loop {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
                if comm.trim_end() == "shellward-watch" || Instant::now() > deadline {
                    break comm;
                }
                std::thread::sleep(Duration::from_millis(2));
            };
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
            assert_eq!(comm.trim_end(), "shellward-watch", "{pid_namespace}");
            assert!(
                cmdline.starts_with(b"shellward-watchdog\0__shellward-watchdog\0"),
                "{pid_namespace}: {:?}",
                String::from_utf8_lossy(&cmdline)
            );
            // Shutdown waits for it: it must have read `quit` and exited.
            let dog = crate::sys::linux::pidfd::pidfd_open(pid).unwrap();
            ex.shutdown().await;
            assert!(
                crate::sys::linux::pidfd::pidfd_send_signal(&dog, Signal::SIGCONT).is_err(),
                "the watchdog is gone after shutdown"
            );
        });
    }
}

#[test]
fn the_reaper_makes_at_most_one_pass_per_period_however_many_starts_wake_it() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ex = without_namespaces();
        let started = Instant::now();
        let starts = 40;
        for _ in 0..starts {
            let r = ex.execute(ExecPlan::new("true")).await.unwrap();
            assert_eq!(r.exit.code(), Some(0));
        }
        let elapsed = started.elapsed();
        let passes = ex.inner.reaper_passes.load(Ordering::Relaxed);
        // One pass per 500 ms period, plus the first and one in flight.
        let bound = elapsed.as_millis() as u64 / 500 + 2;
        assert!(
            passes <= bound && passes < starts,
            "{passes} reaper passes for {starts} starts in {elapsed:?} (at most {bound})"
        );
        ex.shutdown().await;
    });
}

/// A process that ends in the middle of a read (after its state was looked at, before its output was) never makes the
/// read report "output closed" beside a chunk that misses output: a caller that reads until then (as `shellward run`
/// does) gets every byte. The read used to take the state last, and `run --tty` lost a command's last line.
#[test]
fn a_process_ending_during_a_read_loses_no_output() {
    let rt = current_thread();
    rt.block_on(async {
        let ex = without_namespaces();
        let mut plan = ExecPlan::new("printf first; sleep 0.3; printf last");
        plan.background = true;
        let started = ex.execute(plan).await.unwrap();
        *PAUSE_READS_OF.lock().unwrap() = Some(started.id.to_string());
        let (mut cursor, mut text, mut reads) = (0, String::new(), 0);
        loop {
            reads += 1;
            assert!(reads < 50, "the output never closed: {text:?}");
            let options = ReadOptions::after(cursor).wait(Duration::from_secs(5));
            let read = ex.read_output(None, &started.id, &options).await.unwrap();
            let chunk = read.chunk.unwrap();
            text.push_str(&chunk.text);
            cursor = chunk.next_cursor;
            if chunk.next_cursor < chunk.total_bytes {
                continue;
            }
            if read.output_closed {
                break;
            }
        }
        *PAUSE_READS_OF.lock().unwrap() = None;
        assert_eq!(text, "firstlast");
        ex.shutdown().await;
    });
}
