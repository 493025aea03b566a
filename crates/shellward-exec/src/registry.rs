//! The executor: starting plans, waiting, timeouts, the process registry, signals, output reads and shutdown.

use crate::output::{Capture, OutputChunk, OutputView};
use crate::plan::{ExecPlan, TimeoutAction};
use crate::sys::{ContainmentKind, Leader, Platform, SpawnSpec, Tree, pidfd_open};
use crate::{ContainmentPreference, ExecError, ExecutorConfig};
use nix::sys::signal::Signal;
use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::AsyncReadExt;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::watch;

/// How a process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitState {
    /// Still running.
    Running,
    /// Exited with a code.
    Code(i32),
    /// Killed by a signal (its name, e.g. `SIGKILL`).
    Signal(String),
}

impl ExitState {
    /// The exit code, when it exited normally.
    pub fn code(&self) -> Option<i32> {
        match self {
            ExitState::Code(c) => Some(*c),
            _ => None,
        }
    }

    /// The signal name, when a signal ended it.
    pub fn signal(&self) -> Option<&str> {
        match self {
            ExitState::Signal(s) => Some(s),
            _ => None,
        }
    }

    /// A shell-style status: the code, or 128 + signal number.
    pub fn shell_status(&self) -> Option<i32> {
        match self {
            ExitState::Running => None,
            ExitState::Code(c) => Some(*c),
            ExitState::Signal(name) => name.parse::<Signal>().ok().map(|s| 128 + s as i32),
        }
    }
}

/// The result of [`Executor::execute`].
#[derive(Debug, Clone)]
pub struct ExecResult {
    /// The process id (`p1`, `p2`, ...). Valid for later calls while the process is tracked (background runs,
    /// timeouts kept in the background, and trees that left processes behind).
    pub id: String,
    /// How the leader ended (`Running` when it lives on).
    pub exit: ExitState,
    /// The foreground timeout expired.
    pub timed_out: bool,
    /// The process still runs (background run, or timeout with [`TimeoutAction::Background`]).
    pub running: bool,
    /// Wall time from start until the result, in milliseconds.
    pub wall_ms: u64,
    /// Head/tail view of the output (stdout and stderr interleaved, unless separated).
    pub output: OutputView,
    /// Head/tail view of stderr when it is captured separately.
    pub stderr: Option<OutputView>,
    /// Output may be incomplete: a process kept the output pipe open past the drain bound.
    pub output_incomplete: bool,
    /// The full output log, once anything was written.
    pub log_path: Option<PathBuf>,
    /// Cursor to continue reading the output from.
    pub cursor: u64,
    /// Processes of the tree still alive after the leader exited (e.g. a daemon it started); they stay tracked
    /// under `id` and can be signalled.
    pub leftover_processes: usize,
}

/// One entry of [`Executor::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Process id.
    pub id: String,
    /// The command.
    pub command: String,
    /// Working directory.
    pub workdir: PathBuf,
    /// Session.
    pub session: Option<String>,
    /// Whether it was started (or kept) in the background.
    pub background: bool,
    /// Whether anything of its tree is running.
    pub running: bool,
    /// How the leader ended.
    pub exit: ExitState,
    /// OS pid of the leader.
    pub pid: i32,
    /// Start time (seconds since the epoch).
    pub started_at_unix: u64,
    /// Exit time of the leader (seconds since the epoch).
    pub exited_at_unix: Option<u64>,
    /// Output bytes so far.
    pub output_bytes: u64,
    /// Output log path.
    pub log_path: Option<PathBuf>,
}

/// The result of [`Executor::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessList {
    /// Running first, then newest first.
    pub processes: Vec<ProcessInfo>,
    /// Entries not returned because of the limit.
    pub omitted: usize,
}

/// The result of [`Executor::read_output`].
#[derive(Debug, Clone)]
pub struct OutputRead {
    /// The bytes after the cursor (when a cursor was given).
    pub chunk: Option<OutputChunk>,
    /// The head/tail view (when no cursor was given).
    pub view: Option<OutputView>,
    /// Cursor for the next read.
    pub next_cursor: u64,
    /// Whether the process is still running.
    pub running: bool,
    /// How the leader ended.
    pub exit: ExitState,
    /// The leader has exited and its output pipes are closed: no more output will arrive (a process that inherited
    /// the pipes and keeps them open holds this false until it exits or the drain bound passes).
    pub output_closed: bool,
}

/// A signal request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalKind {
    /// SIGTERM to the whole tree, then SIGKILL after the grace period.
    Terminate,
    /// SIGKILL to the whole tree at once.
    Kill,
}

struct Proc {
    id: String,
    session: Option<String>,
    command: String,
    workdir: PathBuf,
    pid: i32,
    background: AtomicBool,
    started: SystemTime,
    started_at: Instant,
    tree: Tree,
    out: Mutex<Capture>,
    err: Option<Mutex<Capture>>,
    /// Bumped on every output chunk and at exit.
    tick: watch::Sender<u64>,
    exit: watch::Sender<Option<(ExitState, SystemTime)>>,
    readers_open: AtomicU64,
    readers_done: watch::Sender<bool>,
    cleaned: AtomicBool,
}

impl Proc {
    fn exit_state(&self) -> ExitState {
        self.exit
            .borrow()
            .as_ref()
            .map(|(s, _)| s.clone())
            .unwrap_or(ExitState::Running)
    }

    fn leader_exited(&self) -> bool {
        self.exit.borrow().is_some()
    }

    fn info(&self) -> ProcessInfo {
        let exit = self.exit.borrow().clone();
        let out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        ProcessInfo {
            id: self.id.clone(),
            command: self.command.clone(),
            workdir: self.workdir.clone(),
            session: self.session.clone(),
            background: self.background.load(Ordering::Relaxed),
            running: exit.is_none() || !self.cleaned.load(Ordering::Relaxed) && self.tree.alive(),
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

    async fn wait_exit(&self) {
        let mut rx = self.exit.subscribe();
        let _ = rx.wait_for(|e| e.is_some()).await;
    }

    async fn wait_readers(&self) {
        let mut rx = self.readers_done.subscribe();
        let _ = rx.wait_for(|d| *d).await;
    }

    /// Waits until nothing of the tree is alive, polling, for at most `limit`.
    async fn wait_tree_gone(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.leader_exited() && !self.tree.alive() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn views(&self) -> (OutputView, Option<OutputView>, u64, Option<PathBuf>) {
        let out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let err = self
            .err
            .as_ref()
            .map(|e| e.lock().unwrap_or_else(|p| p.into_inner()).view());
        (out.view(), err, out.total(), out.log_path().cloned())
    }
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

struct Inner {
    config: ExecutorConfig,
    platform: Platform,
    log_dir: PathBuf,
    procs: Mutex<BTreeMap<u64, Arc<Proc>>>,
    next_id: AtomicU64,
    /// Leaders not yet exited (reserved slots included).
    running: std::sync::atomic::AtomicUsize,
    closing: AtomicBool,
    shut_down: AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.shut_down.swap(true, Ordering::SeqCst) {
            // Not shut down cleanly: kill everything synchronously so nothing outlives the executor.
            for p in self
                .procs
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .values()
            {
                p.tree.kill();
            }
            self.platform.shutdown();
            let _ = std::fs::remove_dir_all(&self.log_dir);
        }
    }
}

/// Runs plans and tracks the processes they start. Cheap to clone (shared).
#[derive(Clone)]
pub struct Executor {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("containment", &self.containment())
            .field("log_dir", &self.inner.log_dir)
            .finish_non_exhaustive()
    }
}

fn id_number(id: &str) -> Option<u64> {
    id.strip_prefix('p')?.parse().ok()
}

impl Executor {
    /// Creates an executor. Must be called inside a Tokio runtime (it starts a reaper task).
    pub fn new(config: ExecutorConfig) -> Result<Executor, ExecError> {
        if config.shell.is_empty() {
            return Err(ExecError::Setup(
                "the shell must not be empty; use e.g. [\"sh\", \"-c\"]".into(),
            ));
        }
        if config.max_running == 0 {
            return Err(ExecError::Setup("max_running must be at least 1".into()));
        }
        let platform = Platform::new(config.containment == ContainmentPreference::Auto)
            .map_err(|e| ExecError::Setup(e.to_string()))?;
        tracing::info!(containment = %platform.kind(), "shellward executor ready");
        let parent = config.log_parent.clone().unwrap_or_else(std::env::temp_dir);
        let log_dir = parent.join(format!("shellward-{}-{}", std::process::id(), unique()));
        std::fs::create_dir_all(&log_dir).map_err(|e| {
            ExecError::Setup(format!(
                "cannot create the log directory {}: {e}",
                log_dir.display()
            ))
        })?;
        let inner = Arc::new(Inner {
            config,
            platform,
            log_dir,
            procs: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
            running: std::sync::atomic::AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            shut_down: AtomicBool::new(false),
        });
        tokio::spawn(reaper(Arc::downgrade(&inner)));
        Ok(Executor { inner })
    }

    /// The containment mechanism in use.
    pub fn containment(&self) -> ContainmentKind {
        self.inner.platform.kind()
    }

    /// The executor's parent cgroup directory, when cgroup containment is active (removed at shutdown).
    pub fn cgroup_dir(&self) -> Option<&Path> {
        self.inner.platform.cgroup_dir()
    }

    /// The per-executor directory holding output logs (removed at shutdown).
    pub fn log_dir(&self) -> &Path {
        &self.inner.log_dir
    }

    fn procs(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Proc>>> {
        self.inner.procs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn find(&self, id: &str, session: Option<&str>) -> Result<Arc<Proc>, ExecError> {
        let unknown = || ExecError::UnknownProcess(id.to_string());
        let n = id_number(id).ok_or_else(unknown)?;
        let p = self.procs().get(&n).cloned().ok_or_else(unknown)?;
        if p.session.as_deref() != session {
            return Err(unknown());
        }
        Ok(p)
    }

    /// Runs a plan: in the background (returns at once), or in the foreground until it exits or its timeout expires.
    pub async fn execute(&self, plan: ExecPlan) -> Result<ExecResult, ExecError> {
        let proc = self.start(&plan).await?;
        if plan.background {
            return Ok(self.result(&proc, false, false, 0));
        }
        let _end_check = proc.tree.prepare_end_check();
        let exited = match plan.timeout {
            Some(t) => tokio::time::timeout(t, proc.wait_exit()).await.is_ok(),
            None => {
                proc.wait_exit().await;
                true
            }
        };
        if !exited {
            match plan.on_timeout {
                TimeoutAction::Background => {
                    proc.background.store(true, Ordering::Relaxed);
                    return Ok(self.result(&proc, true, false, 0));
                }
                TimeoutAction::Kill => {
                    self.terminate(&proc).await;
                    proc.wait_exit().await;
                }
            }
        }
        let drained = tokio::time::timeout(self.inner.config.drain, proc.wait_readers())
            .await
            .is_ok();
        let leftovers = if proc.tree.certainly_gone() {
            0
        } else {
            proc.tree.members().len()
        };
        if leftovers > 0 {
            // Something the command started lives on: keep it tracked (and signallable) under the same id.
            proc.background.store(true, Ordering::Relaxed);
        }
        let result = self.result(&proc, !exited, !drained, leftovers);
        if leftovers == 0 && drained {
            self.forget(&proc);
        }
        Ok(result)
    }

    fn result(
        &self,
        proc: &Proc,
        timed_out: bool,
        incomplete: bool,
        leftovers: usize,
    ) -> ExecResult {
        let (output, stderr, cursor, log_path) = proc.views();
        let exit = proc.exit_state();
        ExecResult {
            id: proc.id.clone(),
            running: exit == ExitState::Running,
            exit,
            timed_out,
            wall_ms: proc.started_at.elapsed().as_millis() as u64,
            output,
            stderr,
            output_incomplete: incomplete,
            log_path,
            cursor,
            leftover_processes: leftovers,
        }
    }

    /// Releases a finished foreground process's tree resources (its cgroup) on a task of its own, so the caller gets
    /// its result without waiting for the `rmdir`. The entry (and its log) stays readable by id until its retention
    /// expires, so the agent can page through output the head/tail view dropped.
    fn forget(&self, proc: &Arc<Proc>) {
        let inner = self.inner.clone();
        let proc = proc.clone();
        tokio::spawn(async move { try_cleanup(&inner, &proc) });
    }

    fn validate(&self, plan: &ExecPlan) -> Result<PathBuf, ExecError> {
        if plan.command.trim().is_empty() {
            return Err(ExecError::InvalidCommand(
                "the command is empty; give a shell command to run".into(),
            ));
        }
        if plan.command.contains('\0') {
            return Err(ExecError::InvalidCommand(
                "the command contains a NUL byte, which no shell accepts".into(),
            ));
        }
        if let Some((k, _)) = plan
            .env
            .iter()
            .find(|(k, v)| k.is_empty() || k.contains(['=', '\0']) || v.contains('\0'))
        {
            return Err(ExecError::InvalidCommand(format!(
                "environment variable name {k:?} is invalid (empty, or contains `=` or NUL)"
            )));
        }
        let workdir = match plan
            .workdir
            .clone()
            .or_else(|| self.inner.config.default_workdir.clone())
        {
            Some(w) => w,
            None => std::env::current_dir()
                .map_err(|e| ExecError::Setup(format!("cannot read the current directory: {e}")))?,
        };
        match std::fs::metadata(&workdir) {
            Ok(m) if m.is_dir() => Ok(workdir),
            Ok(_) => Err(ExecError::Workdir {
                path: workdir,
                problem: "is not a directory".into(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ExecError::Workdir {
                path: workdir,
                problem: "does not exist".into(),
            }),
            Err(e) => Err(ExecError::Workdir {
                path: workdir,
                problem: format!("cannot be used ({e})"),
            }),
        }
    }

    async fn start(&self, plan: &ExecPlan) -> Result<Arc<Proc>, ExecError> {
        if self.inner.closing.load(Ordering::SeqCst) {
            return Err(ExecError::ShuttingDown);
        }
        let workdir = self.validate(plan)?;
        // Reserve a running slot; it is released when the leader exits (or the spawn fails).
        let limit = self.inner.config.max_running;
        let running = self.inner.running.fetch_add(1, Ordering::SeqCst);
        if running >= limit {
            self.inner.running.fetch_sub(1, Ordering::SeqCst);
            return Err(ExecError::TooManyRunning { running, limit });
        }
        let n = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let id = format!("p{n}");
        let config = &self.inner.config;
        let mut env: Vec<(OsString, OsString)> = config
            .env_defaults
            .iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        env.extend(plan.env.iter().map(|(k, v)| (k.into(), v.into())));
        let mut args: Vec<OsString> = config.shell[1..].iter().map(OsString::from).collect();
        args.push(plan.command.clone().into());
        let spawned = self
            .inner
            .platform
            .spawn(SpawnSpec {
                program: config.shell[0].clone().into(),
                args,
                workdir: workdir.clone(),
                env,
                separate_stderr: config.separate_stderr,
                name: id.clone(),
            })
            .await
            .map_err(|e| {
                self.inner.running.fetch_sub(1, Ordering::SeqCst);
                ExecError::Spawn(e)
            })?;
        let log = |suffix: &str| self.inner.log_dir.join(format!("{id}{suffix}.log"));
        let proc = Arc::new(Proc {
            id: id.clone(),
            session: plan.session.clone(),
            command: plan.command.clone(),
            workdir,
            pid: spawned.leader.pid(),
            background: AtomicBool::new(plan.background),
            started: SystemTime::now(),
            started_at: Instant::now(),
            tree: spawned.tree,
            out: Mutex::new(Capture::new(config.output.clone(), log(""))),
            err: spawned
                .stderr
                .as_ref()
                .map(|_| Mutex::new(Capture::new(config.output.clone(), log(".stderr")))),
            tick: watch::Sender::new(0),
            exit: watch::Sender::new(None),
            readers_open: AtomicU64::new(1 + spawned.stderr.is_some() as u64),
            readers_done: watch::Sender::new(false),
            cleaned: AtomicBool::new(false),
        });
        self.procs().insert(n, proc.clone());
        tokio::spawn(read_pipe(proc.clone(), spawned.stdout, false));
        if let Some(err) = spawned.stderr {
            tokio::spawn(read_pipe(proc.clone(), err, true));
        }
        tokio::spawn(wait_leader(
            Arc::downgrade(&self.inner),
            proc.clone(),
            spawned.leader,
        ));
        Ok(proc)
    }

    /// SIGTERM to the tree, then SIGKILL to whatever remains after the grace period; waits until it is gone.
    async fn terminate(&self, proc: &Proc) {
        proc.tree.signal(Signal::SIGTERM);
        if !proc.wait_tree_gone(self.inner.config.grace).await {
            proc.tree.kill();
            proc.wait_tree_gone(Duration::from_secs(5)).await;
        }
    }

    /// Signals a process tree. Refused only when nothing of the tree is alive. Returns once the tree is gone (or, for
    /// a tree that resists, after the grace period and SIGKILL).
    pub async fn signal(
        &self,
        id: &str,
        kind: SignalKind,
        session: Option<&str>,
    ) -> Result<(), ExecError> {
        let proc = self.find(id, session)?;
        if !proc.tree.alive() {
            return Err(ExecError::NotAlive(id.to_string()));
        }
        match kind {
            SignalKind::Terminate => self.terminate(&proc).await,
            SignalKind::Kill => {
                proc.tree.kill();
                proc.wait_tree_gone(Duration::from_secs(5)).await;
            }
        }
        Ok(())
    }

    /// Lists the session's processes (background ones, and foreground ones whose tree lives on): running first, then
    /// newest first, at most `limit`.
    pub fn list(&self, session: Option<&str>, limit: usize) -> ProcessList {
        self.list_filtered(session, limit, false)
    }

    /// Like [`Executor::list`]; with `include_foreground`, finished foreground runs still retained are listed too
    /// (for process APIs that list every start).
    pub fn list_filtered(
        &self,
        session: Option<&str>,
        limit: usize,
        include_foreground: bool,
    ) -> ProcessList {
        let procs: Vec<Arc<Proc>> = self
            .procs()
            .values()
            .rev()
            .filter(|p| {
                p.session.as_deref() == session
                    && (include_foreground || p.background.load(Ordering::Relaxed))
            })
            .cloned()
            .collect();
        let mut infos: Vec<ProcessInfo> = procs.iter().map(|p| p.info()).collect();
        // Stable: newest first within each group (the map is iterated newest first).
        infos.sort_by_key(|i| !i.running);
        let omitted = infos.len().saturating_sub(limit);
        infos.truncate(limit);
        ProcessList {
            processes: infos,
            omitted,
        }
    }

    /// The pids of the process's tree that are alive now (leader and descendants, escapers included).
    pub fn tree_members(&self, id: &str, session: Option<&str>) -> Result<Vec<i32>, ExecError> {
        Ok(self.find(id, session)?.tree.members())
    }

    /// One process's details.
    pub fn info(&self, id: &str, session: Option<&str>) -> Result<ProcessInfo, ExecError> {
        Ok(self.find(id, session)?.info())
    }

    /// Reads output. With a cursor: the bytes after it (at most `max_bytes`), waiting up to `wait` for new output or
    /// the exit when there is nothing new yet. Without: the head/tail view (after waiting up to `wait` for the
    /// process to exit). `wait` of zero is a snapshot.
    pub async fn read_output(
        &self,
        id: &str,
        session: Option<&str>,
        cursor: Option<u64>,
        wait: Duration,
        max_bytes: usize,
    ) -> Result<OutputRead, ExecError> {
        let proc = self.find(id, session)?;
        // Whether a read at `c` would return something: new bytes that make at least one whole character (the
        // first bytes of a character still arriving are not enough) or bytes skipped.
        let readable = |c: u64| {
            let out = proc.out.lock().unwrap_or_else(|p| p.into_inner());
            let probe = out.read(c, 4);
            probe.next_cursor > c || probe.skipped_bytes > 0
        };
        let done = |p: &Proc| p.leader_exited() && *p.readers_done.borrow();
        if !wait.is_zero() && !done(&proc) {
            let mut tick = proc.tick.subscribe();
            let _ = tokio::time::timeout(wait, async {
                loop {
                    if done(&proc) || cursor.is_some_and(readable) {
                        return;
                    }
                    if tick.changed().await.is_err() {
                        return;
                    }
                }
            })
            .await;
        }
        // The process has ended but its pipes are still being drained (usually for microseconds; until the drain
        // bound when something outside the tree holds them): let that finish first, so that a read reporting
        // "not running" has all the output.
        let exited_at = proc.exit.borrow().as_ref().map(|(_, at)| *at);
        if !done(&proc)
            && let Some(at) = exited_at
            && let Some(left) = self
                .inner
                .config
                .drain
                .checked_sub(SystemTime::now().duration_since(at).unwrap_or_default())
            && (proc.cleaned.load(Ordering::Relaxed) || !proc.tree.alive())
        {
            let _ = tokio::time::timeout(left, proc.wait_readers()).await;
        }
        let out = proc.out.lock().unwrap_or_else(|p| p.into_inner());
        let (chunk, view, next) = match cursor {
            Some(c) => {
                let chunk = out.read(c, max_bytes);
                let next = chunk.next_cursor;
                (Some(chunk), None, next)
            }
            None => (None, Some(out.view()), out.total()),
        };
        drop(out);
        let exit = proc.exit_state();
        Ok(OutputRead {
            chunk,
            view,
            next_cursor: next,
            running: exit == ExitState::Running
                || !proc.cleaned.load(Ordering::Relaxed) && proc.tree.alive(),
            exit,
            output_closed: done(&proc),
        })
    }

    /// Terminates every tree this executor started (SIGTERM, grace, SIGKILL, all at once), waits for them, and
    /// removes the executor's cgroups and log directory. New starts are refused from the first moment.
    pub async fn shutdown(&self) {
        self.inner.closing.store(true, Ordering::SeqCst);
        let procs: Vec<Arc<Proc>> = self.procs().values().cloned().collect();
        let mut tasks = Vec::new();
        for p in procs {
            let this = self.clone();
            tasks.push(tokio::spawn(async move {
                if p.tree.alive() {
                    this.terminate(&p).await;
                }
                p.wait_exit().await;
                cleanup(&this.inner, &p);
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
        if !self.inner.shut_down.swap(true, Ordering::SeqCst) {
            self.inner.platform.shutdown();
            let _ = std::fs::remove_dir_all(&self.inner.log_dir);
        }
    }
}

fn unique() -> u64 {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// Releases a finished tree's resources once (may wait briefly; for shutdown paths).
fn cleanup(inner: &Inner, proc: &Proc) {
    if !proc.cleaned.swap(true, Ordering::SeqCst) {
        proc.tree.cleanup();
        inner
            .platform
            .watchdog_send(&format!("- {}\n", proc.tree.pgid()));
    }
}

/// Releases a finished tree's resources if that can be done at once; otherwise the reaper retries.
fn try_cleanup(inner: &Inner, proc: &Proc) {
    if !proc.cleaned.load(Ordering::SeqCst)
        && proc.tree.try_cleanup()
        && !proc.cleaned.swap(true, Ordering::SeqCst)
    {
        inner
            .platform
            .watchdog_send(&format!("- {}\n", proc.tree.pgid()));
    }
}

async fn read_pipe(proc: Arc<Proc>, fd: OwnedFd, stderr: bool) {
    let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(fd);
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
                        let capture = if stderr {
                            proc.err.as_ref().unwrap_or(&proc.out)
                        } else {
                            &proc.out
                        };
                        capture
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(&buf[..n]);
                        proc.tick.send_modify(|t| *t += n as u64);
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
    let capture = if stderr {
        proc.err.as_ref().unwrap_or(&proc.out)
    } else {
        &proc.out
    };
    capture.lock().unwrap_or_else(|p| p.into_inner()).finish();
    if proc.readers_open.fetch_sub(1, Ordering::SeqCst) == 1 {
        proc.readers_done.send_replace(true);
        proc.tick.send_modify(|t| *t += 1);
    }
}

/// Blocks until `pid` (a child of this process) exits and reaps it.
fn waitpid_blocking(pid: i32) -> std::io::Result<std::process::ExitStatus> {
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid on our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(std::process::ExitStatus::from_raw(status));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

async fn wait_leader(inner: Weak<Inner>, proc: Arc<Proc>, leader: Leader) {
    let pid = leader.pid();
    let (pidfd, child) = match leader {
        Leader::Raw { pidfd, .. } => (Ok(pidfd), None),
        Leader::Std(child) => (pidfd_open(pid), Some(child)),
    };
    // SAFETY: the pidfd is an `OwnedFd` moved into the `AsyncFd`, which keeps it open for its whole lifetime.
    let registered = pidfd.and_then(|fd| {
        unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(|e| e.into())
    });
    let wait = move || match child {
        Some(mut c) => c.wait(),
        None => waitpid_blocking(pid),
    };
    let status = match registered {
        Ok(fd) => {
            let _ = fd.readable().await;
            // Exited, not yet reaped: its pid is still its own.
            if let Some(inner) = inner.upgrade() {
                inner.platform.leader_exited(pid);
            }
            // The process has exited: this reaps it without blocking.
            wait()
        }
        Err(e) => {
            tracing::debug!(id = %proc.id, "pidfd unavailable ({e}); waiting on a blocking thread");
            let status = tokio::task::spawn_blocking(wait)
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e)));
            if let Some(inner) = inner.upgrade() {
                inner.platform.leader_exited(pid);
            }
            status
        }
    };
    let state = match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => ExitState::Code(c),
            (None, Some(sig)) => ExitState::Signal(
                Signal::try_from(sig)
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_else(|_| format!("signal {sig}")),
            ),
            _ => ExitState::Code(-1),
        },
        Err(e) => {
            tracing::warn!(id = %proc.id, "waiting for the process failed: {e}");
            ExitState::Code(-1)
        }
    };
    proc.exit.send_replace(Some((state, SystemTime::now())));
    if let Some(inner) = inner.upgrade() {
        inner.running.fetch_sub(1, Ordering::SeqCst);
    }
    proc.tick.send_modify(|t| *t += 1);
}

/// Periodic upkeep: releases finished trees, drops exited background processes past retention, reaps orphans.
async fn reaper(inner: Weak<Inner>) {
    let mut interval = tokio::time::interval(Duration::from_millis(500));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        let Some(inner) = inner.upgrade() else { return };
        if inner.shut_down.load(Ordering::SeqCst) {
            return;
        }
        let procs: Vec<(u64, Arc<Proc>)> = inner
            .procs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        let now = SystemTime::now();
        let mut known = HashSet::new();
        for (n, p) in procs {
            let exited_at = p.exit.borrow().as_ref().map(|(_, at)| *at);
            let Some(at) = exited_at else {
                known.extend(p.tree.known());
                continue;
            };
            if !p.cleaned.load(Ordering::Relaxed) {
                if p.tree.alive() {
                    known.extend(p.tree.known());
                    continue;
                }
                try_cleanup(&inner, &p);
            }
            if now.duration_since(at).unwrap_or_default() >= inner.config.retention {
                inner
                    .procs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&n);
                for c in std::iter::once(&p.out).chain(p.err.as_ref()) {
                    if let Some(path) = c.lock().unwrap_or_else(|p| p.into_inner()).log_path() {
                        let _ = std::fs::remove_file(path);
                    }
                }
            }
        }
        // Leaders are reaped by their waiter task, which needs their exit status.
        for p in inner
            .procs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            known.remove(&p.pid);
        }
        inner.platform.reap_orphans(&known);
    }
}
