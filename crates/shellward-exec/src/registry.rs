//! The process registry: one [`Proc`] per started command (its tree, output, exit), the map of them by id, the
//! running-slot accounting (global and per session), and the retention limits that drop the oldest exited
//! processes (count per session, total log bytes on disk).

use crate::error::ExecError;
use crate::ids::{ProcessId, Session};
use crate::output::{Capture, OutputView};
use crate::results::{ExitState, ProcessInfo};
use crate::sys::Tree;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// One started command.
pub(crate) struct Proc {
    pub(crate) n: u64,
    pub(crate) id: String,
    pub(crate) session: Option<String>,
    pub(crate) command: String,
    pub(crate) workdir: PathBuf,
    /// The host's labels ([`crate::ExecPlan::labels`]).
    pub(crate) labels: Vec<(String, String)>,
    pub(crate) pid: i32,
    pub(crate) background: AtomicBool,
    pub(crate) started: SystemTime,
    pub(crate) started_at: Instant,
    pub(crate) tree: Tree,
    pub(crate) out: Mutex<Capture>,
    pub(crate) err: Option<Mutex<Capture>>,
    /// Bumped on every output chunk and at exit.
    pub(crate) tick: watch::Sender<u64>,
    pub(crate) exit: watch::Sender<Option<(ExitState, SystemTime)>>,
    pub(crate) readers_open: AtomicU64,
    pub(crate) readers_done: watch::Sender<bool>,
    pub(crate) cleaned: AtomicBool,
    /// How long starting the leader took (clone to exec), in microseconds.
    pub(crate) spawn_micros: u64,
    /// The confinement that held for it.
    pub(crate) confinement: crate::results::Enforced,
    /// The Unix sockets its connects were refused (recorded by the broker as they happen).
    pub(crate) refusals: crate::results::Refusals,
    /// Started with an open stdin (a pipe or a terminal).
    pub(crate) interactive: bool,
    /// Runs on a pseudo-terminal.
    pub(crate) terminal: bool,
    /// Where input is written (non-blocking), until closed or the command ends.
    pub(crate) input: Mutex<Option<Arc<crate::sys::InputSink>>>,
    /// One write at a time, so concurrent inputs never interleave.
    pub(crate) input_turn: tokio::sync::Mutex<()>,
}

impl Proc {
    pub(crate) fn exit_state(&self) -> ExitState {
        self.exit
            .borrow()
            .as_ref()
            .map(|(s, _)| s.clone())
            .unwrap_or(ExitState::Running)
    }

    /// Closes the input side (a pipe's reader then sees end of file; a terminal stays open for the output).
    pub(crate) fn close_input(&self) {
        self.input.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    pub(crate) fn leader_exited(&self) -> bool {
        self.exit.borrow().is_some()
    }

    /// Whether anything the command started is alive (its tree). For what callers are told.
    pub(crate) fn command_alive(&self) -> bool {
        self.tree.alive()
    }

    pub(crate) fn info(&self) -> ProcessInfo {
        let exit = self.exit.borrow().clone();
        let out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        ProcessInfo {
            id: ProcessId::new(self.id.clone()),
            command: self.command.clone(),
            workdir: self.workdir.clone(),
            labels: self.labels.clone(),
            session: self.session.clone().map(Session::new),
            background: self.background.load(Ordering::Relaxed),
            running: exit.is_none()
                || !self.cleaned.load(Ordering::Relaxed) && self.command_alive(),
            exit: exit
                .as_ref()
                .map(|(s, _)| s.clone())
                .unwrap_or(ExitState::Running),
            pid: self.pid,
            started_at_unix: unix_secs(self.started),
            exited_at_unix: exit.map(|(_, at)| unix_secs(at)),
            output_bytes: out.total(),
            log_path: out.log_path().cloned(),
        }
    }

    pub(crate) async fn wait_exit(&self) {
        let mut rx = self.exit.subscribe();
        let _ = rx.wait_for(|e| e.is_some()).await;
    }

    pub(crate) async fn wait_readers(&self) {
        let mut rx = self.readers_done.subscribe();
        let _ = rx.wait_for(|d| *d).await;
    }

    /// Waits until nothing of the tree is alive, for at most `limit`: the leader's exit is awaited as the event it is;
    /// the rest of the tree has no event here (members other than the leader are not the executor's children), so it
    /// is looked at again after a pause that grows from 5 ms to 50 ms.
    pub(crate) async fn wait_tree_gone(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        let mut exit = self.exit.subscribe();
        if tokio::time::timeout_at(deadline, exit.wait_for(|e| e.is_some()))
            .await
            .is_err()
        {
            return false;
        }
        until(deadline, Duration::from_millis(5), || !self.tree.alive()).await
    }

    /// Waits until no process that escaped the tree is alive (after they were killed), for at most `limit`, looking
    /// again after a pause that grows from 2 ms to 50 ms: they are not the executor's children, so no event says so.
    pub(crate) async fn wait_escapees_gone(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        until(deadline, Duration::from_millis(2), || {
            self.tree.escapees().is_empty()
        })
        .await
    }

    pub(crate) fn views(&self) -> (OutputView, Option<OutputView>, u64, Option<PathBuf>) {
        let out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let err = self
            .err
            .as_ref()
            .map(|e| e.lock().unwrap_or_else(|p| p.into_inner()).view());
        (out.view(), err, out.total(), out.log_path().cloned())
    }
}

/// Whether `done` holds before `deadline`, looked at now and again after a pause that starts at `first` and doubles up
/// to 50 ms (for what has no event to wait on).
async fn until(
    deadline: tokio::time::Instant,
    first: Duration,
    mut done: impl FnMut() -> bool,
) -> bool {
    let mut pause = first;
    loop {
        if done() {
            return true;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return false;
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

impl Proc {
    /// Whether the entry may be dropped: the leader has exited, the output is drained, and nothing of the tree is
    /// alive (its resources are released).
    pub(crate) fn finished(&self) -> bool {
        self.leader_exited() && *self.readers_done.borrow() && self.cleaned.load(Ordering::Relaxed)
    }

    /// When the leader exited.
    pub(crate) fn exited_at(&self) -> Option<SystemTime> {
        self.exit.borrow().as_ref().map(|(_, at)| *at)
    }

    /// Bytes of log files on disk.
    pub(crate) fn log_bytes(&self) -> u64 {
        std::iter::once(&self.out)
            .chain(self.err.as_ref())
            .map(|c| c.lock().unwrap_or_else(|p| p.into_inner()).log_bytes())
            .sum()
    }

    /// Deletes the log files.
    pub(crate) fn remove_logs(&self) {
        for c in std::iter::once(&self.out).chain(self.err.as_ref()) {
            if let Some(path) = c.lock().unwrap_or_else(|p| p.into_inner()).log_path() {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

pub(crate) fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// How many evicted ids are remembered, so a reader of one is told why it is gone.
const EVICTED_MEMORY: usize = 4096;

/// Limits the registry enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_running: usize,
    pub(crate) max_running_per_session: usize,
    pub(crate) max_retained_per_session: usize,
    pub(crate) max_log_bytes: u64,
    pub(crate) retention: Duration,
}

/// Every process of one executor, by number (`p7-k3x9q2mz` is 7 of the instance `k3x9q2mz`).
pub(crate) struct Registry {
    limits: Limits,
    /// This executor's random tag, part of every id: an id of an earlier run (or of another server) is unknown here
    /// rather than naming whatever got the same number.
    instance: String,
    procs: Mutex<Entries>,
    /// Recently evicted: (number, session, which limit).
    evicted: Mutex<VecDeque<(u64, Option<String>, String)>>,
    /// Running leaders (reserved slots included), in total and by session.
    running: Mutex<Running>,
}

/// The retained processes by number, and how many each session has (so a start checks its session's count without
/// scanning every session's entries: with hundreds of sessions, that scan was most of a start's registry cost).
#[derive(Default)]
pub(crate) struct Entries {
    /// Every retained process, by number (oldest first).
    pub(crate) by_n: BTreeMap<u64, Arc<Proc>>,
    per_session: HashMap<Option<String>, usize>,
}

impl Entries {
    fn insert(&mut self, proc: Arc<Proc>) {
        if let Some(old) = self.by_n.insert(proc.n, proc.clone()) {
            self.uncount(&old.session);
        }
        *self.per_session.entry(proc.session.clone()).or_default() += 1;
    }

    fn remove(&mut self, n: u64) -> Option<Arc<Proc>> {
        let p = self.by_n.remove(&n)?;
        self.uncount(&p.session);
        Some(p)
    }

    fn uncount(&mut self, session: &Option<String>) {
        if let Some(c) = self.per_session.get_mut(session) {
            *c = c.saturating_sub(1);
            if *c == 0 {
                self.per_session.remove(session);
            }
        }
    }

    /// How many processes `session` has retained (running or exited).
    fn count_of(&self, session: Option<&str>) -> usize {
        self.per_session
            .get(&session.map(str::to_string))
            .copied()
            .unwrap_or(0)
    }
}

#[derive(Default)]
struct Running {
    total: usize,
    by_session: HashMap<Option<String>, usize>,
}

/// A reserved running slot; released by [`Registry::release`] when the leader exits, or on drop if never used.
pub(crate) struct Slot<'a> {
    registry: &'a Registry,
    session: Option<String>,
    armed: bool,
}

impl Slot<'_> {
    /// The process started: its slot is released when its leader exits.
    pub(crate) fn keep(mut self) {
        self.armed = false;
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.registry.release(&self.session);
        }
    }
}

impl Registry {
    pub(crate) fn new(limits: Limits, instance: String) -> Registry {
        Registry {
            limits,
            instance,
            procs: Mutex::new(Entries::default()),
            evicted: Mutex::new(VecDeque::new()),
            running: Mutex::new(Running::default()),
        }
    }

    /// The id of process number `n`: `p{n}-{instance}`.
    pub(crate) fn id_of(&self, n: u64) -> String {
        format!("p{n}-{}", self.instance)
    }

    /// The number in an id of this instance (`None` for anything else, including ids of earlier runs).
    fn number_of(&self, id: &str) -> Option<u64> {
        let (n, instance) = id.strip_prefix('p')?.split_once('-')?;
        if instance != self.instance || n.starts_with('+') {
            return None;
        }
        n.parse::<u64>().ok()
    }

    /// The map, locked.
    pub(crate) fn procs(&self) -> MutexGuard<'_, Entries> {
        self.procs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A snapshot of every entry.
    pub(crate) fn all(&self) -> Vec<Arc<Proc>> {
        self.procs().by_n.values().cloned().collect()
    }

    /// Adds a started process.
    pub(crate) fn insert(&self, proc: Arc<Proc>) {
        self.procs().insert(proc);
    }

    /// The entry for `id` if it belongs to `session`; an evicted one is reported as such.
    pub(crate) fn find(&self, id: &str, session: Option<&str>) -> Result<Arc<Proc>, ExecError> {
        let unknown = || ExecError::UnknownProcess(id.to_string());
        let n = self.number_of(id).ok_or_else(unknown)?;
        if let Some(p) = self.procs().by_n.get(&n)
            && p.session.as_deref() == session
        {
            return Ok(p.clone());
        }
        let evicted = self.evicted.lock().unwrap_or_else(|p| p.into_inner());
        match evicted
            .iter()
            .find(|(m, s, _)| *m == n && s.as_deref() == session)
        {
            Some((_, _, why)) => Err(ExecError::Evicted {
                id: id.to_string(),
                why: why.clone(),
            }),
            None => Err(unknown()),
        }
    }

    /// Commands running now (over every session; reserved slots included).
    pub(crate) fn running_total(&self) -> usize {
        self.running.lock().unwrap_or_else(|p| p.into_inner()).total
    }

    /// Reserves a running slot for `session`, within the global and the per-session limit.
    pub(crate) fn reserve(&self, session: Option<&str>) -> Result<Slot<'_>, ExecError> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if running.total >= self.limits.max_running {
            return Err(ExecError::TooManyRunning {
                running: running.total,
                limit: self.limits.max_running,
            });
        }
        let key = session.map(str::to_string);
        let mine = running.by_session.get(&key).copied().unwrap_or(0);
        if mine >= self.limits.max_running_per_session {
            return Err(ExecError::TooManyRunningInSession {
                running: mine,
                limit: self.limits.max_running_per_session,
            });
        }
        running.total += 1;
        *running.by_session.entry(key.clone()).or_default() += 1;
        Ok(Slot {
            registry: self,
            session: key,
            armed: true,
        })
    }

    /// Releases the running slot of a process of `session` whose leader exited.
    pub(crate) fn release(&self, session: &Option<String>) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.total = running.total.saturating_sub(1);
        if let Some(n) = running.by_session.get_mut(session) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                running.by_session.remove(session);
            }
        }
    }

    fn evict(&self, victims: Vec<(u64, String)>) {
        if victims.is_empty() {
            return;
        }
        let mut removed = Vec::new();
        {
            let mut procs = self.procs();
            for (n, why) in victims {
                if let Some(p) = procs.remove(n) {
                    removed.push((p, why));
                }
            }
        }
        let mut evicted = self.evicted.lock().unwrap_or_else(|p| p.into_inner());
        for (p, why) in removed {
            p.remove_logs();
            evicted.push_back((p.n, p.session.clone(), why));
            if evicted.len() > EVICTED_MEMORY {
                evicted.pop_front();
            }
        }
    }

    /// Drops the oldest finished processes of `session` when it has reached the per-session count (before a new
    /// start). It drops down to nine tenths of the limit, so a session starting one command after another pays for
    /// the scan once every few starts, not at each.
    pub(crate) fn enforce_session_count(&self, session: Option<&str>) {
        let max = self.limits.max_retained_per_session;
        let procs = self.procs();
        if procs.count_of(session) < max {
            return;
        }
        let mut finished: Vec<(SystemTime, u64)> = procs
            .by_n
            .values()
            .filter(|p| p.session.as_deref() == session && p.finished())
            .filter_map(|p| Some((p.exited_at()?, p.n)))
            .collect();
        drop(procs);
        let keep = (max - max / 10).saturating_sub(1);
        if finished.len() <= keep {
            return;
        }
        finished.sort();
        let excess = finished.len() - keep;
        let why = format!("{max} exited processes kept per session");
        self.evict(
            finished
                .into_iter()
                .take(excess)
                .map(|(_, n)| (n, why.clone()))
                .collect(),
        );
    }

    /// Periodic limits: retention time, the count per session, and the bytes of logs on disk (oldest exited first).
    pub(crate) fn enforce(&self, now: SystemTime) {
        let procs = self.all();
        let mut victims: Vec<(u64, String)> = Vec::new();
        let mut finished: Vec<(SystemTime, &Arc<Proc>)> = Vec::new();
        for p in &procs {
            if !p.finished() {
                continue;
            }
            let Some(at) = p.exited_at() else { continue };
            if now.duration_since(at).unwrap_or_default() >= self.limits.retention {
                // Past retention: dropped silently (as documented), not counted as evicted.
                self.procs().remove(p.n);
                p.remove_logs();
                continue;
            }
            finished.push((at, p));
        }
        finished.sort_by_key(|(at, p)| (*at, p.n));
        // Count per session.
        let mut per_session: HashMap<Option<&str>, usize> = HashMap::new();
        for (_, p) in &finished {
            *per_session.entry(p.session.as_deref()).or_default() += 1;
        }
        let max = self.limits.max_retained_per_session;
        let mut gone = std::collections::HashSet::new();
        for (_, p) in &finished {
            let n = per_session.entry(p.session.as_deref()).or_default();
            if *n > max {
                *n -= 1;
                gone.insert(p.n);
                victims.push((p.n, format!("{max} exited processes kept per session")));
            }
        }
        // Bytes on disk, over every process.
        let mut bytes: u64 = procs
            .iter()
            .filter(|p| !gone.contains(&p.n))
            .map(|p| p.log_bytes())
            .sum();
        let cap = self.limits.max_log_bytes;
        for (_, p) in &finished {
            if bytes <= cap {
                break;
            }
            let b = p.log_bytes();
            if b == 0 || gone.contains(&p.n) {
                continue;
            }
            bytes -= b;
            gone.insert(p.n);
            victims.push((
                p.n,
                format!("{} MiB of output logs on disk", cap.div_ceil(1024 * 1024)),
            ));
        }
        self.evict(victims);
    }
}
