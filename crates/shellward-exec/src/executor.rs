//! The [`Executor`]: starting plans, foreground waits and timeouts, signals, listings, output reads and shutdown.

use crate::config::ExecutorConfig;
use crate::error::ExecError;
use crate::ids::{ProcessId, Session, session_str};
use crate::logdir::LogDir;
use crate::output::Capture;
use crate::plan::{ExecPlan, OnTimeout};
use crate::registry::{Limits, Proc, Registry};
use crate::results::{ExecResult, ExitState, ProcessInfo, ProcessList, SignalKind, SignalOutcome};
pub(crate) use crate::shared::Inner;
use crate::sys::{BaseEnv, ContainmentKind, Platform, SpawnEnv, SpawnSpec};
use crate::tasks::{
    cleanup, input_sink, read_pipe, read_terminal, reap_pass, reaper, try_cleanup, wait_leader,
};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;

/// Runs plans and tracks the processes they start. Cheap to clone (shared).
#[derive(Clone)]
pub struct Executor {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("containment", &self.containment())
            .field("log_dir", &self.inner.log_dir.path())
            .finish_non_exhaustive()
    }
}

impl Executor {
    /// Creates an executor. Must be called inside a Tokio runtime (it starts a reaper task).
    pub fn new(config: ExecutorConfig) -> Result<Executor, ExecError> {
        if config.shell.is_empty() {
            return Err(ExecError::Setup(
                "the shell must not be empty; use e.g. [\"sh\", \"-c\"]".into(),
            ));
        }
        for (name, value) in [
            ("max_running", config.max_running),
            ("max_running_per_session", config.max_running_per_session),
            ("max_retained_per_session", config.max_retained_per_session),
        ] {
            if value == 0 {
                return Err(ExecError::Setup(format!(
                    "{name} must be at least 1 (it is 0)"
                )));
            }
        }
        config
            .env
            .validate()
            .map_err(|e| ExecError::Setup(format!("environment policy: {e}")))?;
        let parent = config
            .log_parent
            .clone()
            .unwrap_or_else(LogDir::default_parent);
        let log_dir = LogDir::create(&parent).map_err(|e| ExecError::Setup(e.to_string()))?;
        let platform =
            Platform::new(&config, log_dir.path()).map_err(|e| ExecError::Setup(e.to_string()))?;
        tracing::info!(containment = %platform.kind(), pid_namespaces = platform.pid_namespaces(), max_processes = ?platform.process_limit(), log_dir = %log_dir.path().display(), "shellward executor ready");
        let base_env = BaseEnv::new(config.env.base_env(std::env::vars_os()))
            .map(Arc::new)
            .map_err(|e| ExecError::Setup(format!("the commands' environment: {e}")))?;
        let instance = crate::logdir::random_name(8).map_err(|e| {
            ExecError::Setup(format!(
                "cannot read /dev/urandom for the instance tag: {e}"
            ))
        })?;
        let registry = Registry::new(
            Limits {
                max_running: config.max_running,
                max_running_per_session: config.max_running_per_session,
                max_retained_per_session: config.max_retained_per_session,
                max_log_bytes: config.max_log_bytes,
                retention: config.retention,
            },
            instance,
        );
        let inner = Arc::new(Inner {
            config,
            platform,
            log_dir,
            base_env,
            registry,
            reaper_wake: Arc::default(),
            reaper_passes: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            closing: AtomicBool::new(false),
            recorders: Default::default(),
            proxy_audiences: Default::default(),
            shut_down: AtomicBool::new(false),
        });
        tokio::spawn(reaper(Arc::downgrade(&inner), inner.reaper_wake.clone()));
        Ok(Executor { inner })
    }

    /// The Landlock ABI version of the running kernel (0: no Landlock): what confines a plan's writes
    /// ([`crate::Confinement::writable`]). Without it writes are not confined, and results say so
    /// ([`crate::Enforced::writes`]).
    pub fn landlock_abi() -> i32 {
        crate::sys::landlock_abi()
    }

    /// Whether commands whose network is not the host's can have Unix sockets of their own here: the socket broker
    /// (Linux x86_64, kernel 5.9) connects a session's own sockets and refuses the host's
    /// ([`crate::ExecResult::refused_sockets`]). Without it they cannot make a Unix socket at all.
    pub fn unix_socket_broker() -> bool {
        crate::sys::unix_socket_broker()
    }

    /// Runs one pass of the reaper now (release of ended trees, retention and the per-session limits), instead of
    /// waiting for its next period: for tests that check what a pass leaves, without sleeping for it.
    #[doc(hidden)]
    pub fn reap_now(&self) {
        reap_pass(&self.inner);
    }

    /// The containment mechanism in use.
    pub fn containment(&self) -> ContainmentKind {
        self.inner.platform.kind()
    }

    /// Whether commands start in their own PID namespace (with a private `/proc`), so signals sent from inside reach
    /// only the command's tree. False when turned off, without an init program, or when the host refused to create
    /// one (then the first start found out, and logged it).
    pub fn pid_namespaces(&self) -> bool {
        self.inner.platform.pid_namespaces()
    }

    /// The most processes one command's tree may have at once, when that is enforced (a `pids` cgroup is writable).
    pub fn process_limit(&self) -> Option<u64> {
        self.inner.platform.process_limit()
    }

    /// The executor's parent cgroup directory, when cgroup containment is active (removed at shutdown).
    pub fn cgroup_dir(&self) -> Option<&Path> {
        self.inner.platform.cgroup_dir()
    }

    /// The per-executor directory holding output logs, one directory per session (removed at shutdown).
    pub fn log_dir(&self) -> &Path {
        self.inner.log_dir.path()
    }

    /// Where a host makes its [`crate::PrivateDir`]s: the log directories' parent (`[executor] log_dir`, else
    /// `XDG_RUNTIME_DIR` or the temporary directory), outside the log root a session's sandbox covers, and swept
    /// with the log directories.
    pub fn private_dir_parent(&self) -> &Path {
        self.inner.log_dir.parent()
    }

    fn find(&self, session: Option<&Session>, id: &ProcessId) -> Result<Arc<Proc>, ExecError> {
        self.inner.registry.find(id.as_str(), session_str(session))
    }

    /// Runs a plan: in the background (returns at once), or in the foreground until it exits or its timeout expires.
    pub async fn execute(&self, plan: ExecPlan) -> Result<ExecResult, ExecError> {
        self.execute_observed(plan, |_| {}).await
    }

    /// [`Executor::execute`], telling `started` the process's id as soon as it runs (before a foreground run ends),
    /// so a host can watch it meanwhile (progress, its output so far).
    pub async fn execute_observed(
        &self,
        plan: ExecPlan,
        started: impl FnOnce(&ProcessId) + Send,
    ) -> Result<ExecResult, ExecError> {
        let proc = self.start(&plan).await?;
        started(&ProcessId::new(proc.id.clone()));
        if plan.background {
            // The start-up window ends at the first of: the command exits (a start-up failure, answered with its
            // exit and output), its tree listens on a port or socket (ready, answered with what it listens on), or
            // the window passes (answered running).
            if let Some(window) = plan.startup_wait.filter(|w| !w.is_zero()) {
                let deadline = tokio::time::Instant::now() + window;
                loop {
                    let step = (tokio::time::Instant::now() + LISTEN_CHECK).min(deadline);
                    if tokio::time::timeout_at(step, proc.wait_exit())
                        .await
                        .is_ok()
                    {
                        // It ended during start-up: report it as a foreground run would (output, leftovers), and
                        // keep it listed so its output stays readable by id.
                        let (drained, leftovers) = self.settle(&proc).await;
                        return Ok(self.result(&proc, false, !drained, leftovers));
                    }
                    let listening = proc.tree.listening();
                    if !listening.is_empty() {
                        let mut r = self.result(&proc, false, false, 0);
                        r.listening = listening;
                        return Ok(r);
                    }
                    if tokio::time::Instant::now() >= deadline {
                        break;
                    }
                }
            }
            return Ok(self.result(&proc, false, false, 0));
        }
        // A caller that stops waiting (this future dropped) stops the command with it.
        let abandoned = StopIfAbandoned {
            inner: Arc::downgrade(&self.inner),
            proc: Some(proc.clone()),
        };
        let result = self.foreground(&plan, &proc).await;
        abandoned.disarm();
        result
    }

    /// The foreground part of [`Executor::execute`]: waits for the exit or the timeout, then settles the output.
    async fn foreground(&self, plan: &ExecPlan, proc: &Arc<Proc>) -> Result<ExecResult, ExecError> {
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
                OnTimeout::Background => {
                    proc.background.store(true, Ordering::Relaxed);
                    return Ok(self.result(proc, true, false, 0));
                }
                OnTimeout::Kill => {
                    self.terminate(proc).await;
                    proc.wait_exit().await;
                }
            }
        }
        let (drained, leftovers) = self.settle(proc).await;
        #[cfg(target_os = "linux")]
        if exited {
            self.record_end(proc.session.as_deref(), &proc.id).await;
        }
        if leftovers > 0 {
            // Something the command started lives on: keep it tracked (and signallable) under the same id.
            proc.background.store(true, Ordering::Relaxed);
            // A foreground command that must not outlive its timeout: what it left behind is stopped at the deadline
            // (a fork bomb's survivors, a server started with `&`), not left to run until someone signals it.
            if let (Some(t), OnTimeout::Kill) = (plan.timeout, plan.on_timeout) {
                let inner = Arc::downgrade(&self.inner);
                let p = proc.clone();
                let deadline = p.started_at + t;
                tokio::spawn(async move {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if !p.wait_tree_gone(left).await
                        && let Some(inner) = inner.upgrade()
                    {
                        tracing::info!(id = %p.id, "timeout reached: terminating what the command left running");
                        Executor { inner }.terminate(&p).await;
                    }
                });
            }
        }
        let result = self.result(proc, !exited, !drained, leftovers);
        if leftovers == 0 && drained {
            self.forget(proc);
        }
        Ok(result)
    }

    /// After the leader exited: drains the output (bounded by the drain time) and counts what of the tree lives on.
    /// Returns whether the output was drained, and the number of leftover processes.
    async fn settle(&self, proc: &Proc) -> (bool, usize) {
        let drained = tokio::time::timeout(self.inner.config.drain, proc.wait_readers())
            .await
            .is_ok();
        let leftovers = if proc.tree.certainly_gone() {
            0
        } else {
            proc.tree.members().len()
        };
        (drained, leftovers)
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
            id: ProcessId::new(proc.id.clone()),
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
            process_limit_hit: proc.tree.process_limit_hit(),
            spawn_micros: proc.spawn_micros,
            listening: Vec::new(),
            confinement: proc.confinement.clone(),
            refused_sockets: proc.refusals.paths(),
            refused_unix_datagram: proc.refusals.datagram_refused(),
            refused_writes: proc.refusals.writes(),
            refused_network: proc.refusals.addresses(),
        }
    }

    /// Releases a finished foreground process's tree resources (its cgroup) on a task of its own, so the caller gets
    /// its result without waiting for the release. The entry (and its log) stays readable by id until its retention
    /// expires, so the agent can page through output the head/tail view dropped.
    ///
    /// When the result comes before the leader has been reaped, the release waits for the reap (bounded) instead of
    /// leaving the tree to the reaper's next pass, which would keep the command's cgroup and `pids` group out of reuse
    /// for up to half a second.
    fn forget(&self, proc: &Arc<Proc>) {
        let inner = self.inner.clone();
        let proc = proc.clone();
        tokio::spawn(async move {
            try_cleanup(&inner, &proc);
            if proc.cleaned.load(Ordering::SeqCst) {
                return;
            }
            let mut tick = proc.tick.subscribe();
            let reaped = tick.wait_for(|_| proc.tree.leader().is_reaped());
            if tokio::time::timeout(Duration::from_secs(1), reaped)
                .await
                .is_ok()
            {
                try_cleanup(&inner, &proc);
            }
        });
    }

    fn validate(&self, plan: &ExecPlan) -> Result<PathBuf, ExecError> {
        check_mode(plan)?;
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
        if let Some(p) = plan
            .confinement
            .writable
            .iter()
            .flatten()
            .find(|p| !(p.is_absolute() || cfg!(windows) && p.has_root()))
        {
            return Err(ExecError::InvalidCommand(format!(
                "the confinement's writable path {} is relative; give absolute paths",
                p.display()
            )));
        }
        if plan.confinement.network == crate::Network::Allow {
            crate::proxy::ProxyRules::new(&plan.confinement.allow, &self.inner.config.proxy_hosts)
                .map_err(|e| ExecError::InvalidCommand(format!("the network allow-list: {e}")))?;
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
        self.start_with(plan, None).await
    }

    /// [`Executor::start`], for a preview with its copy-on-write layers and the session whose log directory it
    /// writes to (the plan's session is the preview's own sandbox).
    async fn start_with(
        &self,
        plan: &ExecPlan,
        preview: Option<(PreviewSpawn, Option<&str>)>,
    ) -> Result<Arc<Proc>, ExecError> {
        if self.inner.closing.load(Ordering::SeqCst) {
            return Err(ExecError::ShuttingDown);
        }
        let workdir = self.validate(plan)?;
        // Reserve a running slot (global and per session); it is released when the leader exits, or here when the
        // spawn fails.
        let registry = &self.inner.registry;
        let session = session_str(plan.session.as_ref());
        let slot = registry.reserve(session)?;
        registry.enforce_session_count(session);
        let n = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let id = registry.id_of(n);
        let config = &self.inner.config;
        let (env, proxy_rules) = self.command_env(plan)?;
        let mut args: Vec<OsString> = config.shell[1..].iter().map(OsString::from).collect();
        args.push(match &plan.report_cwd {
            Some(file) => crate::plan::with_cwd_report(file, &plan.command).into(),
            None => plan.command.clone().into(),
        });
        let log_session = match &preview {
            Some((_, owner)) => *owner,
            None => session,
        };
        let log_dir = self
            .inner
            .log_dir
            .session_dir(log_session)
            .map_err(ExecError::Spawn)?;
        // Recording starts before the command can write (a preview writes nothing real: not recorded).
        #[cfg(target_os = "linux")]
        let recording = match preview {
            None => self.record_begin(plan, &id).await,
            Some(_) => None,
        };
        let spawn_started = Instant::now();
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
                stdin: plan.stdin,
                session: session.map(str::to_string),
                log_dir: log_dir.clone(),
                confinement: plan.confinement.clone(),
                #[cfg(target_os = "linux")]
                preview: preview.map(|(layers, _)| layers),
            })
            .await;
        #[cfg(target_os = "linux")]
        if spawned.is_err() {
            self.record_end(session, &id).await;
        }
        let spawned = spawned.map_err(ExecError::Spawn)?;
        let confinement = crate::results::Enforced {
            writes: spawned.writes_confined,
            network: if spawned.network_enforced {
                plan.confinement.network
            } else {
                crate::Network::Host
            },
            syscalls: spawned.syscalls_filtered,
            writes_watched: spawned.writes_confined && spawned.refusals.writes_watched(),
        };
        let spawn_micros = spawn_started.elapsed().as_micros() as u64;
        slot.keep();
        let log = |suffix: &str| log_dir.join(format!("{id}{suffix}.log"));
        let proc = Arc::new(Proc {
            n,
            id: id.clone(),
            session: session.map(str::to_string),
            command: plan.command.clone(),
            workdir,
            labels: plan.labels.clone(),
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
            spawn_micros,
            confinement,
            refusals: spawned.refusals,
            interactive: spawned.stdin.is_some(),
            terminal: spawned.terminal,
            input: Mutex::new(input_sink(&id, spawned.stdin)),
            input_turn: tokio::sync::Mutex::new(()),
        });
        if proc.terminal {
            proc.out
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .set_terminal();
        }
        if plan.background {
            // A background run's log path is part of its start result (not only once it has printed something).
            proc.out
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .create_log();
        }
        if plan.confinement.network == crate::Network::Allow {
            // Every proxied command hears of the destinations its proxy refuses (a session's proxy serves its later
            // commands with that allow-list too).
            let audience = self.inner.proxy_audience(session, &plan.confinement.allow);
            audience.join(proc.refusals.clone(), proc.readers_done.subscribe());
            if let (Some((fd, shared)), Some(rules)) = (spawned.proxy_listener, proxy_rules) {
                serve_proxy(&proc, fd, shared, rules, audience);
            }
        }
        registry.insert(proc.clone());
        self.inner.reaper_wake.notify_one();
        // A command's recording ends with its exit (a foreground run's before its result, in `foreground`).
        #[cfg(target_os = "linux")]
        if let Some(rec) = recording {
            let p = proc.clone();
            tokio::spawn(async move {
                p.wait_exit().await;
                let id = p.id.clone();
                let _ = tokio::task::spawn_blocking(move || rec.end(&id)).await;
            });
        }
        self.follow(&proc, spawned.stdout, spawned.stderr, spawned.leader);
        if let Some(limit) = plan.deadline.filter(|_| plan.background) {
            self.terminate_at(&proc, limit);
        }
        Ok(proc)
    }

    /// Follows a registered process: its output readers (a terminal's or pipes) and the wait for its leader.
    fn follow(
        &self,
        proc: &Arc<Proc>,
        stdout: crate::sys::Stream,
        stderr: Option<crate::sys::Stream>,
        leader: crate::sys::Leader,
    ) {
        if proc.terminal {
            tokio::spawn(read_terminal(proc.clone(), stdout));
        } else {
            tokio::spawn(read_pipe(proc.clone(), stdout, false));
        }
        if let Some(err) = stderr {
            tokio::spawn(read_pipe(proc.clone(), err, true));
        }
        tokio::spawn(wait_leader(
            Arc::downgrade(&self.inner),
            proc.clone(),
            leader,
        ));
    }

    /// What the command's environment adds to the executor's base (a terminal's `TERM`, the plan's own variables,
    /// and for an allow-list network the proxy's variables), with the allow-list's proxy rules.
    fn command_env(
        &self,
        plan: &ExecPlan,
    ) -> Result<(SpawnEnv, Option<Arc<crate::proxy::ProxyRules>>), ExecError> {
        let config = &self.inner.config;
        let mut extra: Vec<(OsString, OsString)> = Vec::with_capacity(plan.env.len() + 2);
        if matches!(plan.stdin, crate::StdinMode::Terminal { .. }) {
            // A terminal that understands colours and cursor moves (the non-interactive default is `dumb`).
            extra.push(("TERM".into(), "xterm-256color".into()));
        }
        extra.extend(plan.env.iter().map(|(k, v)| (k.into(), v.into())));
        // A proxied command finds its proxy here (set after the plan's own, so a plan cannot point them elsewhere:
        // there is nowhere else to go in its namespace anyway).
        let proxy_rules = if plan.confinement.network == crate::Network::Allow {
            let url = format!("http://{}", crate::proxy::PROXY_ADDR);
            for name in [
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "ALL_PROXY",
                "http_proxy",
                "https_proxy",
                "all_proxy",
            ] {
                extra.push((name.into(), url.clone().into()));
            }
            for name in ["NO_PROXY", "no_proxy"] {
                extra.push((name.into(), "".into()));
            }
            Some(Arc::new(
                crate::proxy::ProxyRules::new(&plan.confinement.allow, &config.proxy_hosts)
                    .map_err(|e| {
                        ExecError::InvalidCommand(format!("the network allow-list: {e}"))
                    })?,
            ))
        } else {
            None
        };
        Ok((
            SpawnEnv::new(self.inner.base_env.clone(), extra),
            proxy_rules,
        ))
    }

    /// Terminates a background `proc` still running after `limit` (its plan's deadline).
    fn terminate_at(&self, proc: &Arc<Proc>, limit: Duration) {
        // Weak: a pending deadline does not keep a dropped executor alive.
        let inner = Arc::downgrade(&self.inner);
        let p = proc.clone();
        tokio::spawn(async move {
            if tokio::time::timeout(limit, p.wait_exit()).await.is_err()
                && let Some(inner) = inner.upgrade()
            {
                tracing::info!(id = %p.id, limit_ms = limit.as_millis() as u64, "deadline reached: terminating");
                Executor { inner }.terminate(&p).await;
            }
        });
    }

    /// SIGTERM to the tree, then SIGKILL to whatever remains after the grace period; waits until it is gone.
    async fn terminate(&self, proc: &Proc) {
        proc.tree.terminate();
        if !proc.wait_tree_gone(self.inner.config.grace).await {
            proc.tree.kill();
            proc.wait_tree_gone(Duration::from_secs(5)).await;
        }
    }

    /// Signals a process tree. Refused only when nothing of the tree is alive. Returns once the tree is gone (or, for
    /// a tree that resists, after the grace period and SIGKILL), saying what had escaped containment and what, if
    /// anything, still lives.
    ///
    /// Every process signalled is proven to be a member at that moment (see the `sys::linux::tree` docs): a process
    /// that merely received the pid of a dead member is never touched.
    pub async fn signal(
        &self,
        session: Option<&Session>,
        id: &ProcessId,
        kind: SignalKind,
    ) -> Result<SignalOutcome, ExecError> {
        let proc = self.find(session, id)?;
        // While the leader lives there is something to signal — in a PID namespace the init may not have forked the
        // command yet, so "no command process" right after the start does not mean "ended".
        if proc.leader_exited() && !proc.command_alive() && proc.tree.escapees().is_empty() {
            return Err(ExecError::NotAlive(id.to_string()));
        }
        match kind {
            SignalKind::Terminate => self.terminate(&proc).await,
            SignalKind::Kill => {
                proc.tree.kill();
                proc.wait_tree_gone(Duration::from_secs(5)).await;
            }
        }
        // Members that left the containment (cgroup path: moved to another cgroup) are found by their marker.
        let mut outcome = SignalOutcome {
            escaped_killed: proc.tree.kill_escapees(),
            ..SignalOutcome::default()
        };
        if outcome.escaped_killed > 0 {
            tracing::warn!(
                id = id.as_str(),
                escaped = outcome.escaped_killed,
                "killed members that had left the tree's cgroup"
            );
            proc.wait_escapees_gone(Duration::from_millis(500)).await;
        }
        outcome.survivors = proc.tree.member_pids().len() + proc.tree.escapees().len();
        Ok(outcome)
    }

    /// Writes `data` to the process's stdin (a pipe, or its terminal). On a terminal, control characters act as
    /// typed: `\u{3}` interrupts the foreground job, `\u{1a}` suspends it.
    ///
    /// A write is bounded by `limit`: a command that does not read its input makes the call fail with
    /// [`ExecError::InputStalled`] saying how much was written, never block the caller for longer. Writes of
    /// concurrent callers never interleave. Returns the number of bytes written.
    pub async fn write_input(
        &self,
        session: Option<&Session>,
        id: &ProcessId,
        data: &[u8],
        limit: Duration,
    ) -> Result<usize, ExecError> {
        self.input(session, id, data, false, limit).await
    }

    /// [`Executor::write_input`], then ends the input: a pipe's reader sees end of file; on a terminal, end of input
    /// is `Ctrl-D`, which is written instead.
    pub async fn close_input(
        &self,
        session: Option<&Session>,
        id: &ProcessId,
        data: &[u8],
        limit: Duration,
    ) -> Result<usize, ExecError> {
        self.input(session, id, data, true, limit).await
    }

    async fn input(
        &self,
        session: Option<&Session>,
        id: &ProcessId,
        data: &[u8],
        close: bool,
        limit: Duration,
    ) -> Result<usize, ExecError> {
        let proc = self.find(session, id)?;
        if !proc.interactive {
            return Err(ExecError::NotInteractive(id.to_string()));
        }
        let _turn = proc.input_turn.lock().await;
        let sink = proc.input.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(sink) = sink else {
            return Err(ExecError::InputClosed(id.to_string()));
        };
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + limit;
        let mut written = 0;
        let eot: &[u8] = if close && proc.terminal { b"\x04" } else { b"" };
        let bytes = [data, eot].concat();
        while written < bytes.len() {
            match tokio::time::timeout_at(deadline, sink.write_some(&bytes[written..])).await {
                Err(_) => {
                    return Err(ExecError::InputStalled {
                        id: id.to_string(),
                        written: written.min(data.len()),
                        total: data.len(),
                        waited_ms: started.elapsed().as_millis() as u64,
                    });
                }
                Ok(Ok(n)) => written += n,
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // The reading side is gone (the command closed stdin or ended; a terminal hung up).
                Ok(Err(e)) if crate::sys::is_input_gone(&e) => {
                    proc.close_input();
                    return Err(ExecError::InputClosed(id.to_string()));
                }
                Ok(Err(e)) => {
                    return Err(ExecError::InputFailed {
                        id: id.to_string(),
                        error: e,
                    });
                }
            }
        }
        if close && !proc.terminal {
            proc.close_input();
        }
        Ok(data.len())
    }

    /// Lists the session's processes (background ones, and foreground ones whose tree lives on): running first, then
    /// newest first, at most `limit`.
    pub fn list(&self, session: Option<&Session>, limit: usize) -> ProcessList {
        self.list_some(Some(session_str(session)), limit, false)
    }

    /// Like [`Executor::list`], with the finished foreground runs still retained listed too (for process APIs that
    /// list every start).
    pub fn list_all(&self, session: Option<&Session>, limit: usize) -> ProcessList {
        self.list_some(Some(session_str(session)), limit, true)
    }

    /// Every process kept, of every session (an operator's view, not a session's: `shellward ps`), running first, then
    /// newest first, at most `limit`; each names its session.
    pub fn list_every_session(&self, limit: usize) -> ProcessList {
        self.list_some(None, limit, true)
    }

    /// The processes of `session` (`None`: of every session).
    fn list_some(
        &self,
        session: Option<Option<&str>>,
        limit: usize,
        include_foreground: bool,
    ) -> ProcessList {
        let procs: Vec<Arc<Proc>> = self
            .inner
            .registry
            .procs()
            .by_n
            .values()
            .rev()
            .filter(|p| {
                session.is_none_or(|s| p.session.as_deref() == s)
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
    pub fn tree_members(
        &self,
        session: Option<&Session>,
        id: &ProcessId,
    ) -> Result<Vec<i32>, ExecError> {
        Ok(self.find(session, id)?.tree.member_pids())
    }

    /// How many commands are running now, over every session (for metrics).
    pub fn running_count(&self) -> usize {
        self.inner.registry.running_total()
    }

    /// One process's details.
    pub fn info(
        &self,
        session: Option<&Session>,
        id: &ProcessId,
    ) -> Result<ProcessInfo, ExecError> {
        Ok(self.find(session, id)?.info())
    }

    /// Waits until the process's command has ended (however long that takes) and returns its details then. For
    /// hosts that record how background runs end (an audit log); the wait holds no slot and no lock.
    pub async fn wait_exit(
        &self,
        session: Option<&Session>,
        id: &ProcessId,
    ) -> Result<ProcessInfo, ExecError> {
        let proc = self.find(session, id)?;
        let mut exit = proc.exit.subscribe();
        // The sender lives in `proc`, which this holds: the wait ends only when an exit is recorded.
        let _ = exit.wait_for(|e| e.is_some()).await;
        Ok(proc.info())
    }

    /// Terminates every tree this executor started (SIGTERM, grace, SIGKILL, all at once), waits for them, and
    /// removes the executor's cgroups and log directory. New starts are refused from the first moment.
    pub async fn shutdown(&self) {
        self.inner.closing.store(true, Ordering::SeqCst);
        let procs = self.inner.registry.all();
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
            // Both halves block (the platform's shutdown removes cgroups and waits for the watchdog; freeing the log
            // directory can wait for the disk, see `LogDir::remove`): they run on the blocking pool, not on a
            // runtime worker that other tasks share.
            let inner = self.inner.clone();
            let release = tokio::task::spawn_blocking(move || release_resources(&inner));
            if let Err(e) = release.await {
                tracing::error!(error = %e, "the executor's cgroups and log directory were not all removed");
            }
        }
    }
}

/// Removes the executor's log directory on a thread of its own while the platform shuts down (cgroups, `pids` groups,
/// the watchdog): neither needs the other, and each can wait.
fn release_resources(inner: &Inner) {
    let log_dir = &inner.log_dir;
    std::thread::scope(|scope| {
        let removal = std::thread::Builder::new()
            .name("shellward-logdir".into())
            .spawn_scoped(scope, || log_dir.remove());
        inner.platform.shutdown();
        if removal.is_err() {
            log_dir.remove();
        }
    });
}

/// How often a starting background command is checked for listening.
const LISTEN_CHECK: Duration = Duration::from_millis(50);
/// How often a quiet interactive command is checked for blocking on its input.
const INPUT_CHECK: Duration = Duration::from_millis(20);
/// How long output must have been quiet before a command blocked on its input is answered (the rest of a prompt
/// written in pieces arrives meanwhile).
const INPUT_SETTLE: Duration = Duration::from_millis(10);

/// The identity of an interactive command's stdin, while the executor still holds its end (see
/// `procfs::input_identity`); `None` for other commands.
fn input_identity(proc: &Proc) -> Option<(u64, u64)> {
    if !proc.interactive {
        return None;
    }
    let sink = proc
        .input
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()?;
    sink.identity(proc.terminal)
}

mod lifetime;
mod preview;
mod read;
mod undo;
use lifetime::{StopIfAbandoned, serve_proxy};
use preview::PreviewSpawn;
pub(crate) use undo::Recorders;

#[cfg(all(test, unix))]
mod tests;

/// A background plan has no foreground timeout (it would be ignored: the run returns at once); its limit is its
/// `deadline`.
fn check_mode(plan: &ExecPlan) -> Result<(), ExecError> {
    if let Some(file) = &plan.report_cwd
        && !crate::plan::plain_report_path(file)
    {
        return Err(ExecError::InvalidPlan(format!(
            "report_cwd {} must be an absolute path of letters, digits and /._-+:@%,= (it goes into the shell's \
             script); choose such a file",
            file.display()
        )));
    }
    if plan.background && plan.timeout.is_some() {
        return Err(ExecError::InvalidPlan(
            "a background plan returns at once and has no foreground timeout; give its `deadline` to end it after \
             a while, or run it in the foreground"
                .into(),
        ));
    }
    Ok(())
}
