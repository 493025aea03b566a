//! The per-executor platform state: containment choice (cgroup v2 or process groups), the spawner thread every
//! fork happens on, the watchdog, and spawning one command's leader with its pipes into a new [`Tree`].

use super::cgroup::{self, CgroupRoot};
use super::child_setup;
use super::fast_spawn;
use super::limits::{self, PidsRoot};
use super::nsinit::{InitProgram, init_candidates};
use super::procfs;
use super::session;
use super::started::Leader;
use super::tree::{Children, Tree};
use super::watchdog::Watchdog;
use super::{ContainmentKind, TREE_VAR};
use crate::sys::SpawnSpec;
use nix::unistd::Pid;
use std::collections::HashMap;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
#[cfg(test)]
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// Platform state shared by all trees of one executor.
pub(crate) struct Platform {
    /// Tests of the portable spawn path (`std::process::Command` with `pre_exec`, what other architectures use): when
    /// set, starts skip the `clone3` fast path.
    #[cfg(test)]
    pub(crate) force_portable: AtomicBool,
    /// `ExecutorConfig::watch_writes`.
    watch_writes: bool,
    root: Option<CgroupRoot>,
    /// Identifies this executor's trees: every process of a tree inherits `SHELLWARD_TREE=<token>/<id>`, which
    /// survives `setsid` and double forks.
    token: String,
    spawner: Mutex<mpsc::Sender<SpawnJob>>,
    /// What the fast path keeps between spawns (resolved shell, `/dev/null`).
    spawn_cache: Arc<fast_spawn::SpawnCache>,
    /// Fallback mode: which of this process's children are accounted for.
    children: Arc<Children>,
    watchdog: Mutex<Option<Watchdog>>,
    /// The PID-namespace init programs not yet known to fail, best first (`nsinit` says which); empty once none
    /// works, or when namespaces are off.
    init: Arc<Mutex<Vec<InitProgram>>>,
    /// This executor's `pids` groups, when a `pids` hierarchy is writable and a process limit is set.
    pids_root: Option<Arc<PidsRoot>>,
    /// The process limit per tree.
    max_processes: Option<u64>,
    /// `RLIMIT_*` set in every leader.
    rlimits: Arc<Vec<(u32, u64)>>,
    /// What every leader does to itself before exec: read-only mounts, capabilities, `no_new_privs`.
    hardening: Arc<child_setup::Hardening>,
    /// The sessions' sandboxes (PID and mount namespaces), made at each session's first command.
    sessions: Arc<session::Sessions>,
    /// Numbers the sandboxes' markers.
    session_serial: Arc<std::sync::atomic::AtomicU64>,
    /// Write-confinement rulesets, one per distinct set of writable paths.
    rulesets: Arc<super::landlock::Rulesets>,
    /// System-call filters, one per distinct deny list.
    filters: Arc<super::seccomp::Filters>,
}

type SpawnJob = Box<dyn FnOnce() + Send>;

/// A spawned leader and its streams.
pub(crate) type Spawned = super::super::Spawned<Leader, Tree, OwnedFd, OwnedFd>;

impl Platform {
    /// Sets up containment (cgroup when a writable cgroup2 hierarchy with `cgroup.kill` is found and
    /// `config.containment` is `Auto`), PID namespaces and per-command limits as `config` asks and the host allows, and the spawner thread.
    ///
    /// It also marks this process non-dumpable (`PR_SET_DUMPABLE 0`): a command running as the same user can then
    /// neither read its `/proc/PID/environ` or `mem` nor trace it, and it writes no core file.
    pub(crate) fn new(
        config: &crate::ExecutorConfig,
        log_dir: &std::path::Path,
    ) -> io::Result<Platform> {
        // SAFETY: prctl with constant arguments.
        if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
            return Err(io::Error::other(format!(
                "cannot mark the host process non-dumpable, so its commands could read its memory: {}",
                io::Error::last_os_error()
            )));
        }
        let hardening = Arc::new(child_setup::Hardening::new(config, Some(log_dir))?);
        let root = cgroup_root(config.containment == crate::ContainmentPreference::Auto);
        if root.is_none() {
            // SAFETY: prctl with constant arguments.
            unsafe {
                libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            }
        }
        let (tx, spawner_tid) = spawner_thread()?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let token = format!("{}-{nanos}", std::process::id());
        let init = init_programs(config);
        let pids_root = pids_root(config, &token);
        let platform = Platform {
            root,
            token,
            spawner: Mutex::new(tx),
            spawn_cache: Arc::default(),
            children: Arc::new(Children {
                tids: [std::process::id() as i32, spawner_tid],
                leaders: Mutex::new(HashMap::new()),
                watchdog: AtomicI32::new(0),
            }),
            watchdog: Mutex::new(None),
            init: Arc::new(Mutex::new(init)),
            pids_root,
            max_processes: config.limits.max_processes,
            rlimits: Arc::new(limits::rlimits(&config.limits)),
            hardening,
            sessions: Arc::default(),
            session_serial: Arc::default(),
            rulesets: Arc::new(super::landlock::Rulesets::closing(
                config.closed_tcp_ports.clone(),
            )),
            filters: Arc::default(),
            watch_writes: config.watch_writes,
            #[cfg(test)]
            force_portable: AtomicBool::new(false),
        };
        platform.start_watchdog()?;
        // The first command's `pids` group, made while the host finishes starting (its policies load meanwhile).
        let spares = platform.spares();
        platform.submit(Box::new(spares))?;
        Ok(platform)
    }

    /// Starts the watchdog that stops every tree if the host dies: from the embedded static binary when there is one
    /// (the init candidates hold it when namespaces are on), else from a shell.
    fn start_watchdog(&self) -> io::Result<()> {
        let embedded = {
            let candidates = self.init.lock().unwrap_or_else(|p| p.into_inner());
            candidates.iter().find_map(|c| match c {
                InitProgram::Embedded(e) => Some(e.clone()),
                InitProgram::File(_) => None,
            })
        }
        .or_else(|| super::embedded_init::load().ok().flatten());
        let dog = Watchdog::start(
            self.root.as_ref().map(|r| r.dir().to_path_buf()),
            self.pids_root.as_ref().map(|r| r.dir().to_path_buf()),
            embedded,
            self,
        )?;
        self.children
            .watchdog
            .store(dog.child.id() as i32, Ordering::Relaxed);
        *self.watchdog.lock().unwrap_or_else(|p| p.into_inner()) = Some(dog);
        Ok(())
    }

    /// The watchdog's pid while it runs (0 before it starts), for tests that hold it up.
    #[cfg(test)]
    pub(crate) fn watchdog_pid(&self) -> i32 {
        self.children.watchdog.load(Ordering::Relaxed)
    }

    /// The executor's parent cgroup, when cgroups are used.
    pub(crate) fn cgroup_dir(&self) -> Option<&std::path::Path> {
        self.root.as_ref().map(|r| r.dir())
    }

    /// Whether commands are started in their own PID namespace (until a start shows the host does not allow it).
    pub(crate) fn pid_namespaces(&self) -> bool {
        !self
            .init
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// Whether the number of processes per command is limited.
    pub(crate) fn process_limit(&self) -> Option<u64> {
        self.pids_root.as_ref().and(self.max_processes)
    }

    /// The active containment.
    pub(crate) fn kind(&self) -> ContainmentKind {
        if self.root.is_some() {
            ContainmentKind::Cgroup
        } else {
            ContainmentKind::ProcessGroup
        }
    }

    /// A job that makes the next command's `pids` group ready (see [`PidsRoot::prepare_spare`]); run on the spawner
    /// thread after each start, so the next start finds it made.
    fn spares(&self) -> impl FnOnce() + Send + 'static {
        let pids = self.pids_root.clone().zip(self.max_processes);
        move || {
            if let Some((pids, max)) = pids {
                pids.prepare_spare(max);
            }
        }
    }

    /// Queues a job on the spawner thread.
    fn submit(&self, job: SpawnJob) -> io::Result<()> {
        self.spawner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(job)
            .map_err(|_| stopped())
    }

    /// This executor's tree-marker token.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// Runs `f` on the spawner thread and blocks until it is done (for set-up, outside async code paths).
    pub(crate) fn on_spawner_sync<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> io::Result<R> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(Box::new(move || {
            let _ = tx.send(f());
        }))?;
        rx.recv().map_err(|_| stopped())
    }

    /// Spawns `sh -c …` (or the configured shell) as the leader of a new process group, inside a new cgroup when
    /// available, with stdin on /dev/null and stdout/stderr on pipes.
    pub(crate) async fn spawn(&self, mut spec: SpawnSpec) -> io::Result<Spawned> {
        let syscalls_filtered = !spec.confinement.deny_syscalls.is_empty()
            || spec.confinement.network != crate::Network::Host;
        let marker = format!("{}/{}", self.token, spec.name);
        spec.env.push(TREE_VAR.into(), marker.clone().into());
        let cgroup = match &self.root {
            Some(root) => Some(root.child(&spec.name)?),
            None => None,
        };
        let procs = cgroup.as_ref().map(|c| c.procs_path().clone());
        let cgroup_dir = cgroup.as_ref().map(|c| c.dir().to_path_buf());
        let parent = std::process::id() as i32;
        let cache = self.spawn_cache.clone();
        let (pids, join_procs) = match (&self.pids_root, self.max_processes) {
            (Some(root), Some(max)) => match root.group(&spec.name, max) {
                Ok((group, procs)) => (Some(group), Some(procs)),
                Err(e) => {
                    if let Some(cg) = &cgroup {
                        cg.remove();
                    }
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "cannot create the process-count group of {}: {e}",
                            spec.name
                        ),
                    ));
                }
            },
            _ => (None, None),
        };
        #[cfg(test)]
        let portable = self.force_portable.load(Ordering::Relaxed);
        #[cfg(not(test))]
        let portable = false;
        let job = super::spawn_job::Job {
            spec,
            procs,
            cgroup_dir,
            parent,
            cache,
            join_procs,
            init_slot: self.init.clone(),
            rlimits: self.rlimits.clone(),
            hardening: self.hardening.clone(),
            sessions: self.sessions.clone(),
            session_serial: self.session_serial.clone(),
            rulesets: self.rulesets.clone(),
            filters: self.filters.clone(),
            token: self.token.clone(),
            portable,
            watch_writes: self.watch_writes,
        };
        let (tx, result) = tokio::sync::oneshot::channel();
        let spares = self.spares();
        self.submit(Box::new(move || {
            // If the caller stopped waiting (its future was dropped, e.g. on Ctrl-C), the value is dropped here or
            // in the channel, and `Unclaimed` kills the leader instead of letting it run on unseen.
            let _ = tx.send(job.run());
            // After the answer: the caller goes on while the next command's `pids` group is made.
            spares();
        }))?;
        // Awaited, never blocked on: the runtime's threads must keep driving I/O while the spawner forks.
        let result = result.await.map_err(|_| stopped())?;
        let (leader, streams, sandbox_init, writes_confined, proxy_listener, refusals) =
            match result {
                Ok((mut unclaimed, streams, sandbox_init, writes_confined, listener, refusals)) => {
                    match unclaimed.0.take() {
                        Some(leader) => (
                            leader,
                            streams,
                            sandbox_init,
                            writes_confined,
                            listener,
                            refusals,
                        ),
                        None => return Err(stopped()),
                    }
                }
                Err(e) => {
                    if let Some(cg) = &cgroup {
                        cg.remove();
                    }
                    return Err(e);
                }
            };
        let pgid = leader.pid();
        let marker = format!("{TREE_VAR}={marker}");
        let tree = match cgroup {
            Some(cg) => Tree::in_cgroup(cg, pgid, marker, pids),
            None => {
                self.children
                    .leaders
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(pgid, marker.clone());
                Tree::in_group(
                    pgid,
                    marker,
                    format!("{TREE_VAR}={}/", self.token),
                    self.children.clone(),
                    pids,
                    sandbox_init,
                )
            }
        };
        self.watchdog_send(&format!("+ {pgid}\n"));
        Ok(Spawned {
            leader,
            stdout: streams.out,
            stderr: streams.err,
            stdin: streams.input,
            terminal: streams.terminal,
            tree,
            writes_confined,
            syscalls_filtered,
            network_enforced: true,
            proxy_listener,
            refusals,
        })
    }

    /// To be called when a leader has exited and before it is reaped (its pid cannot be reused until then).
    pub(crate) fn leader_exited(&self, pid: i32) {
        self.children
            .leaders
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&pid);
    }

    /// Tells the watchdog about a process group (`+ pgid` / `- pgid`). With cgroups it needs no list: killing the
    /// executor's cgroup covers every tree.
    pub(crate) fn watchdog_send(&self, line: &str) {
        if self.root.is_some() {
            return;
        }
        if let Some(dog) = self
            .watchdog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            let _ = dog.pipe.write_all(line.as_bytes());
        }
    }

    /// Kills every tree and removes the executor's cgroups (synchronous, best effort), and releases the watchdog.
    ///
    /// The watchdog is told to quit first and waited for last, so its exit overlaps the removal. The trees are gone
    /// by now (the executor's shutdown ended them); if this process is killed in between, what is left is empty
    /// directories, which the next executor's start removes (see `stale`).
    pub(crate) fn shutdown(&self) {
        let dog = self
            .watchdog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .map(|mut dog| {
                let _ = dog.pipe.write_all(b"quit\n");
                drop(dog.pipe);
                dog.child
            });
        if let Some(root) = &self.root {
            root.kill_all_and_remove();
        }
        // What is left in the sessions' namespaces dies with their pid 1.
        self.sessions.end_all();
        if let Some(pids) = &self.pids_root {
            pids.remove_all();
        }
        if let Some(mut child) = dog {
            let _ = child.wait();
        }
    }

    /// Ends the sandbox of `session` (a preview's, once its command is done), on the spawner thread so no start
    /// races the end; returns when it has ended.
    pub(crate) async fn end_sandbox(&self, session: Option<String>) {
        let sessions = self.sessions.clone();
        let (tx, done) = tokio::sync::oneshot::channel();
        if self
            .submit(Box::new(move || {
                sessions.end(session.as_deref());
                let _ = tx.send(());
            }))
            .is_ok()
        {
            let _ = done.await;
        }
    }

    /// Whether any session has a sandbox.
    pub(crate) fn has_sessions(&self) -> bool {
        !self.sessions.is_empty()
    }

    /// Ends the sessions' sandboxes that have had no start for `idle` and hold nothing but their pid 1 (on the
    /// spawner thread, so no start races the end).
    pub(crate) fn end_idle_sessions(&self, idle: std::time::Duration) {
        let sessions = self.sessions.clone();
        let _ = self.submit(Box::new(move || sessions.end_idle(idle)));
    }

    /// In fallback mode: reaps zombies of tree members that were re-parented to this process (subreaper). `known`
    /// maps pids to start times: a zombie child is reaped only if it is that very process.
    pub(crate) fn reap_orphans(&self, known: &HashMap<i32, u64>) {
        if self.root.is_some() || known.is_empty() {
            return;
        }
        let me = std::process::id() as i32;
        for p in procfs::scan() {
            if p.ppid == me && !p.alive() && known.get(&p.pid) == Some(&p.start) {
                let _ = nix::sys::wait::waitpid(
                    Pid::from_raw(p.pid),
                    Some(nix::sys::wait::WaitPidFlag::WNOHANG),
                );
            }
        }
    }
}

fn stopped() -> io::Error {
    io::Error::other("the executor's spawner thread has stopped")
}

impl super::watchdog::Spawner for Platform {
    fn token(&self) -> &str {
        Platform::token(self)
    }

    fn on_spawner_sync<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> io::Result<R> {
        Platform::on_spawner_sync(self, f)
    }
}

/// The executor's parent cgroup, when `allow` and a writable cgroup2 hierarchy with `cgroup.kill` is found (why not
/// is logged: commands are then contained by process groups).
fn cgroup_root(allow: bool) -> Option<CgroupRoot> {
    if allow {
        match cgroup::discover() {
            Some(base) => match CgroupRoot::create(&base) {
                Ok(root) => Some(root),
                Err(e) => {
                    tracing::info!(base = %base.display(), "cgroup containment unavailable ({e}); using process groups");
                    None
                }
            },
            None => {
                tracing::info!("no cgroup v2 hierarchy found; using process groups");
                None
            }
        }
    } else {
        None
    }
}

/// The thread every fork happens on (`PR_SET_PDEATHSIG` fires when the thread that forked exits, so it lives as long as
/// the executor): its job queue and thread id.
fn spawner_thread() -> io::Result<(mpsc::Sender<SpawnJob>, i32)> {
    let (tx, rx) = mpsc::channel::<SpawnJob>();
    let (tid_tx, tid_rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("shellward-spawner".into())
        .spawn(move || {
            // SAFETY: gettid has no preconditions.
            let _ = tid_tx.send(unsafe { libc::gettid() });
            for job in rx {
                job();
            }
        })?;
    let spawner_tid = tid_rx.recv().map_err(|_| stopped())?;
    Ok((tx, spawner_tid))
}

/// The init programs a command's PID namespace may start with (none when namespaces are off, or none is available:
/// logged).
fn init_programs(config: &crate::ExecutorConfig) -> Vec<InitProgram> {
    if config.pid_namespace {
        let candidates = init_candidates(config);
        if candidates.is_empty() {
            tracing::info!(
                "commands run without a PID namespace: no init program (this build embeds none; call \
                 shellward_exec::init_main_if_requested() first in main, or set init_program)"
            );
        }
        candidates
    } else {
        Vec::new()
    }
}

/// The parent `pids` group that caps each command's processes, when `max_processes` is set and the host allows it.
fn pids_root(config: &crate::ExecutorConfig, token: &str) -> Option<Arc<PidsRoot>> {
    match config.limits.max_processes {
        Some(_) => match PidsRoot::create(token) {
            Ok(root) => Some(Arc::new(root)),
            Err(e) => {
                tracing::info!("the number of processes per command is not limited: {e}");
                None
            }
        },
        None => None,
    }
}
