//! The tasks behind each process (a reader per output pipe, a waiter for the leader) and the executor's periodic
//! reaper, plus releasing a finished tree's resources.

use crate::registry::Proc;
use crate::results::ExitState;
use crate::shared::Inner;
use crate::sys::{Leader, Stream};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};
use tokio::io::AsyncReadExt;
use tracing::Instrument;

/// Releases a finished tree's resources once (may wait briefly; for shutdown paths).
pub(crate) fn cleanup(inner: &Inner, proc: &Proc) {
    if !proc.cleaned.swap(true, Ordering::SeqCst) {
        proc.tree.cleanup();
        inner
            .platform
            .watchdog_send(&format!("- {}\n", proc.tree.pgid()));
    }
}

/// Releases a finished tree's resources if that can be done at once; otherwise the reaper retries.
pub(crate) fn try_cleanup(inner: &Inner, proc: &Proc) {
    if !proc.cleaned.load(Ordering::SeqCst)
        && proc.tree.try_cleanup()
        && !proc.cleaned.swap(true, Ordering::SeqCst)
    {
        inner
            .platform
            .watchdog_send(&format!("- {}\n", proc.tree.pgid()));
    }
}

/// Reads a terminal's master side into the output capture until the terminal is gone, then marks the stream
/// finished.
pub(crate) async fn read_terminal(proc: Arc<Proc>, stream: Stream) {
    let recorder = proc.clone();
    if let Err(e) = crate::sys::read_terminal(stream, |bytes| record(&recorder, false, bytes)).await
    {
        tracing::warn!(id = %proc.id, "reading the terminal failed: {e}");
    }
    finish_stream(&proc, false);
}

/// The capture a stream goes to: stderr's own when it is captured separately, else the shared output.
fn capture_of(proc: &Proc, stderr: bool) -> &std::sync::Mutex<crate::output::Capture> {
    if stderr {
        proc.err.as_ref().unwrap_or(&proc.out)
    } else {
        &proc.out
    }
}

/// Appends bytes read from a stream to its capture and wakes the readers waiting for output.
fn record(proc: &Proc, stderr: bool, bytes: &[u8]) {
    capture_of(proc, stderr)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(bytes);
    proc.tick.send_modify(|t| *t += bytes.len() as u64);
}

/// A stream reached its end: the capture is final, and when it was the last one the output is complete.
fn finish_stream(proc: &Proc, stderr: bool) {
    capture_of(proc, stderr)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .finish();
    if proc.readers_open.fetch_sub(1, Ordering::SeqCst) == 1 {
        proc.readers_done.send_replace(true);
        proc.tick.send_modify(|t| *t += 1);
    }
}

/// Reads an output pipe into its capture until its end of file, then marks the stream finished.
pub(crate) async fn read_pipe(proc: Arc<Proc>, stream: Stream, stderr: bool) {
    let receiver = crate::sys::pipe_reader(stream);
    match receiver {
        Ok(mut rx) => {
            // Small while the process is quiet (1,000 idle processes must stay cheap), doubled up to 256 KiB while
            // reads fill it (bulk output needs few, large reads).
            let mut buf = vec![0u8; 8 * 1024];
            loop {
                match rx.read(&mut buf).await {
                    Ok(0) => break,
                    Ok(n) => {
                        if n == buf.len() && buf.len() < 256 * 1024 {
                            buf.resize(buf.len() * 2, 0);
                        }
                        record(&proc, stderr, &buf[..n]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        tracing::warn!(id = %proc.id, "reading output failed: {e}");
                        break;
                    }
                }
            }
        }
        Err(e) => tracing::warn!(id = %proc.id, "cannot watch the output pipe: {e}"),
    }
    finish_stream(&proc, stderr);
}

/// Waits for the leader to end, then publishes how it ended.
pub(crate) async fn wait_leader(inner: Weak<Inner>, proc: Arc<Proc>, leader: Leader) {
    let pid = leader.pid();
    let exited = || {
        if let Some(inner) = inner.upgrade() {
            inner.platform.leader_exited(pid);
        }
    };
    let status = crate::sys::wait_leader(leader, &proc.tree, exited)
        .instrument(tracing::debug_span!("leader", id = %proc.id))
        .await;
    publish_exit(&inner, &proc, status);
}

/// Records how the command ended, frees its running slot, and wakes its waiters.
fn publish_exit(inner: &Weak<Inner>, proc: &Proc, status: std::io::Result<ExitState>) {
    let state = match status {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(id = %proc.id, "waiting for the process failed: {e}");
            ExitState::Code(-1)
        }
    };
    proc.exit.send_replace(Some((state, SystemTime::now())));
    // Nothing reads the input any more: release it (a write in flight fails with a clear error).
    proc.close_input();
    if let Some(inner) = inner.upgrade() {
        inner.registry.release(&proc.session);
    }
    proc.tick.send_modify(|t| *t += 1);
}

/// One pass of upkeep: releases ended trees, enforces retention and the registry's limits, reaps orphaned members.
/// Returns the processes retained after it, and when it ran.
pub(crate) fn reap_pass(inner: &Inner) -> (Vec<Arc<Proc>>, SystemTime) {
    inner.reaper_passes.fetch_add(1, Ordering::Relaxed);
    let mut known = HashMap::new();
    for p in inner.registry.all() {
        // Zombies of a tree that is otherwise gone still need reaping: every tree's members count.
        known.extend(p.tree.known());
        if p.leader_exited() && !p.cleaned.load(Ordering::Relaxed) && !p.tree.alive() {
            try_cleanup(inner, &p);
        }
    }
    let now = SystemTime::now();
    inner.registry.enforce(now);
    // Leaders are reaped by their waiter task, which needs their exit status.
    let procs = inner.registry.all();
    for p in &procs {
        known.remove(&p.pid);
    }
    inner.platform.reap_orphans(&known);
    (procs, now)
}

/// How often the reaper looks while something is running or being released.
const BUSY_PERIOD: Duration = Duration::from_millis(500);
/// The longest the reaper sleeps with exited processes retained (their retention is checked at least this often).
const RETAINED_PERIOD: Duration = Duration::from_secs(60);

/// Periodic upkeep: releases finished trees, enforces retention and the registry's limits, reaps orphans.
///
/// It runs every 500 ms only while something needs it (a process running, a tree not yet released); with only
/// exited processes retained it sleeps until the first retention expires (at most a minute), and with nothing at
/// all until the next start wakes it (`wake`), so an idle executor costs no wake-ups. A pass visits every retained
/// process, so it runs at most once per 500 ms however many starts wake it: a pass per start made a busy server's
/// starts cost more the more processes it retained (200 sessions keep up to 20,000).
pub(crate) async fn reaper(inner: Weak<Inner>, wake: Arc<tokio::sync::Notify>) {
    let mut next = BUSY_PERIOD;
    let mut last_pass: Option<tokio::time::Instant> = None;
    let mut last_session_check = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(next) => {}
            _ = wake.notified() => {}
        }
        if let Some(at) = last_pass {
            tokio::time::sleep_until(at + BUSY_PERIOD).await;
        }
        last_pass = Some(tokio::time::Instant::now());
        let Some(inner) = inner.upgrade() else { return };
        if inner.shut_down.load(Ordering::SeqCst) {
            return;
        }
        let (procs, now) = reap_pass(&inner);
        // Sessions' sandboxes that have been idle long enough end (checked at most every 10 s: a `/proc` scan each).
        let sessions = inner.platform.has_sessions();
        let session_check = SESSION_CHECK.min(inner.config.session_idle);
        if sessions && last_session_check.elapsed() >= session_check {
            last_session_check = tokio::time::Instant::now();
            inner.platform.end_idle_sessions(inner.config.session_idle);
        }
        next = if procs.iter().any(|p| !p.finished()) {
            BUSY_PERIOD
        } else {
            let retention = inner.config.retention;
            match procs.iter().filter_map(|p| p.exited_at()).min() {
                Some(first) => (first + retention)
                    .duration_since(now)
                    .unwrap_or_default()
                    .clamp(BUSY_PERIOD, RETAINED_PERIOD),
                None => Duration::from_secs(24 * 3600),
            }
        };
        if sessions {
            next = next.min(session_check);
        }
    }
}

/// How often the reaper looks for idle sessions' sandboxes while there are any.
const SESSION_CHECK: Duration = Duration::from_secs(10);

/// The watched input side of a process started with an open stdin; `None` without one, or when the host cannot
/// watch it (logged).
pub(crate) fn input_sink(
    id: &impl std::fmt::Display,
    stdin: Option<crate::sys::Stream>,
) -> Option<Arc<crate::sys::InputSink>> {
    match crate::sys::InputSink::new(stdin?) {
        Ok(sink) => Some(Arc::new(sink)),
        Err(e) => {
            tracing::warn!(%id, "cannot watch the input side: {e}");
            None
        }
    }
}
