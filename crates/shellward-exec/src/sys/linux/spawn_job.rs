//! One command's start on the spawner thread ([`Job`]): its confinement prepared (write ruleset, system-call filter,
//! network, streams), then the leader started — in its session's sandbox by the `clone3` fast path, or without
//! namespaces, or by `std::process::Command` where the fast path does not exist — and handed back as [`Started`].
//! `Platform::spawn` prepares the job and builds the tree around what it returns.

use super::TREE_VAR;
use super::cgroup;
use super::child_setup;
use super::fast_spawn;
use super::nsinit::{InitProgram, init_refused};
use super::session;
use super::started::{Leader, Started, Streams, Unclaimed};
use crate::sys::SpawnSpec;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Everything one start needs on the spawner thread, moved there from `Platform::spawn`.
pub(super) struct Job {
    pub(super) spec: SpawnSpec,
    /// The tree's cgroup: its `cgroup.procs` (the portable path joins it) and its directory (the fast path clones into
    /// it).
    pub(super) procs: Option<CString>,
    pub(super) cgroup_dir: Option<PathBuf>,
    /// The executor's pid: a child whose parent is another has lost it and exits.
    pub(super) parent: i32,
    pub(super) cache: Arc<fast_spawn::SpawnCache>,
    /// The open `tasks` file of the tree's `pids` group; the job owns it until it is done.
    pub(super) join_procs: Option<File>,
    pub(super) init_slot: Arc<Mutex<Vec<InitProgram>>>,
    pub(super) rlimits: Arc<Vec<(u32, u64)>>,
    pub(super) hardening: Arc<child_setup::Hardening>,
    pub(super) sessions: Arc<session::Sessions>,
    pub(super) session_serial: Arc<AtomicU64>,
    pub(super) rulesets: Arc<super::landlock::Rulesets>,
    pub(super) filters: Arc<super::seccomp::Filters>,
    pub(super) token: String,
    /// Tests of the portable path: skip the fast path.
    pub(super) portable: bool,
    /// `ExecutorConfig::watch_writes`.
    pub(super) watch_writes: bool,
}

/// A start's confinement and streams, prepared before the fork.
struct Prepared {
    /// The write-confinement ruleset (held until the child has applied it), and whether writes are confined.
    landlock: Option<Arc<OwnedFd>>,
    writes_confined: bool,
    net_mode: libc::c_int,
    /// A proxied command hands its proxy listener over this pair (ours, the child's).
    proxy_pair: Option<(UnixDatagram, UnixDatagram)>,
    /// The system-call filter, held until the child has installed it.
    seccomp: Option<Arc<seccompiler::BpfProgram>>,
    /// With a network other than the host's or confined writes, on the fast path: the pair the child hands its
    /// broker's listener over (ours, the child's), what the broker watches, and where it records what was refused.
    broker_pair: Option<(UnixDatagram, UnixDatagram)>,
    watch: super::unix_broker::Watch,
    refusals: crate::results::Refusals,
    streams: Streams,
}

impl Prepared {
    fn landlock_fd(&self) -> RawFd {
        self.landlock.as_ref().map_or(-1, |fd| fd.as_raw_fd())
    }

    fn proxy_fd(&self) -> RawFd {
        self.proxy_pair
            .as_ref()
            .map_or(-1, |(_, theirs)| theirs.as_raw_fd())
    }

    fn seccomp_raw(&self) -> (*const libc::c_void, usize) {
        self.seccomp.as_ref().map_or((std::ptr::null(), 0), |p| {
            (p.as_ptr().cast::<libc::c_void>(), p.len())
        })
    }

    /// The broker's hand-over for the fast path's child (none on the portable path, which has the strict filter).
    fn broker<'p>(
        &self,
        programs: &'p super::unix_broker::Programs,
    ) -> Option<(RawFd, &'p super::unix_broker::Programs)> {
        self.broker_pair
            .as_ref()
            .map(|(_, theirs)| (theirs.as_raw_fd(), programs))
    }

    /// Once the child has started: serves its connects, if it handed its listener over, `allowed` (the operator's host
    /// sockets) connected as its own; and watches its writes against `writable` when they are confined.
    fn start_broker(
        &self,
        allowed: &[std::path::PathBuf],
        writable: Option<&[std::path::PathBuf]>,
    ) {
        if let Some((ours, _)) = &self.broker_pair {
            super::unix_broker::serve_from(
                ours.as_raw_fd(),
                self.refusals.clone(),
                super::unix_broker::allowed_sockets(allowed),
                writable
                    .filter(|_| self.watch.writes)
                    .map(super::write_watch::WriteRules::of),
            );
        }
    }

    /// The listener the child sent, once it has started (it sends before exec).
    fn take_listener(&self) -> io::Result<Option<OwnedFd>> {
        self.proxy_pair
            .as_ref()
            .map(|(ours, _)| super::proxy_fd::receive_listener(ours.as_raw_fd()))
            .transpose()
    }
}

/// A leader the fast path started: `(pid, pidfd)`, its sandbox's init pid, a proxied command's listener, and whether
/// its network namespace became the session's.
type FastStart = (
    (i32, OwnedFd),
    Option<i32>,
    io::Result<Option<OwnedFd>>,
    bool,
);

/// A leader started inside a session's sandbox: as [`FastStart`], with the sandbox's init pid.
type SandboxStart = ((i32, OwnedFd), i32, io::Result<Option<OwnedFd>>, bool);

impl Job {
    /// Starts the command: the fast path, or where it does not exist the portable one.
    pub(super) fn run(self) -> io::Result<Started> {
        let mut prepared = self.prepare()?;
        match self.in_sandbox(&prepared) {
            Ok(((pid, pidfd), sandbox_init, listener, shared)) => {
                // The child has its copies: closing ours makes EOF (or, on a terminal, EIO) arrive when the tree is
                // done.
                let streams = &mut prepared.streams;
                (streams.child_in, streams.child_out, streams.child_err) = (None, None, None);
                let leader = Unclaimed(Some(Leader::Raw { pid, pidfd }));
                // Without its listener a proxied command has no network at all: refused (the leader is killed as
                // `leader` drops), not run with less than asked.
                let listener = listener?.map(|l| (l, shared));
                let writes_confined = prepared.writes_confined;
                Ok((
                    leader,
                    prepared.streams,
                    sandbox_init,
                    writes_confined,
                    listener,
                    prepared.refusals,
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::Unsupported && self.spec.preview.is_some() => {
                Err(io::Error::other(format!(
                    "cannot preview here: a preview runs in a sandbox of its own, which this platform's spawn path \
                     cannot make ({e})"
                )))
            }
            Err(e) if e.kind() == io::ErrorKind::Unsupported => self.portable(prepared),
            Err(e) => Err(e),
        }
    }

    /// The write ruleset, network mode, proxy pair, system-call filter and streams of this start.
    fn prepare(&self) -> io::Result<Prepared> {
        let confinement = &self.spec.confinement;
        // Prepared once per set of paths; none where the kernel has no Landlock.
        let landlock = self.rulesets.get(confinement.writable.as_deref())?;
        let net_mode = child_setup::net_mode(confinement.network);
        let proxy_pair = if net_mode == child_setup::NET_PROXIED {
            // Close-on-exec: the child uses its end before exec, and nothing it runs inherits it.
            Some(UnixDatagram::pair()?)
        } else {
            None
        };
        // Unix sockets under a network other than the host's: brokered on the fast path (`unix_broker`), refused on
        // the portable one.
        let cut = confinement.network != crate::Network::Host;
        let broker = !self.portable && super::unix_broker::available();
        let brokered = cut && broker;
        let writes_confined = landlock.is_some() && confinement.writable.is_some();
        // Writes refused by the confinement, seen by the broker (`write_watch`); not a preview's (its writes land
        // in its own copy).
        let watch = super::unix_broker::Watch {
            sockets: brokered,
            writes: writes_confined && broker && self.watch_writes && self.spec.preview.is_none(),
        };
        // Compiled once per deny list.
        let seccomp = self
            .filters
            .get(&confinement.deny_syscalls, cut, brokered)?;
        // Close-on-exec: the child uses its end before exec.
        let broker_pair = if watch.sockets || watch.writes {
            Some(UnixDatagram::pair()?)
        } else {
            None
        };
        let streams = Streams::open(self.spec.stdin, self.spec.separate_stderr)?;
        Ok(Prepared {
            writes_confined,
            watch,
            landlock,
            net_mode,
            proxy_pair,
            seccomp,
            broker_pair,
            refusals: Default::default(),
            streams,
        })
    }

    /// The command itself by the fast path: in a session's sandbox (`enter`), or without namespaces.
    fn spawn_plain(
        &self,
        p: &Prepared,
        enter: Option<fast_spawn::Enter>,
        net_fd: RawFd,
        landlock_fd: RawFd,
        hardening: &child_setup::Hardening,
    ) -> io::Result<(i32, OwnedFd)> {
        if self.portable {
            return Err(io::Error::from(io::ErrorKind::Unsupported));
        }
        let programs = super::unix_broker::Programs::get(p.watch);
        let confine = fast_spawn::Around {
            join_procs_fd: self.join_procs.as_ref().map(|f| f.as_raw_fd()),
            rlimits: &self.rlimits,
            hardening,
            enter,
            net_mode: p.net_mode,
            net_fd,
            proxy_fd: p.proxy_fd(),
            landlock_fd,
            seccomp: p.seccomp_raw(),
            broker: p.broker(&programs),
        };
        let raw = |f: &Option<OwnedFd>| f.as_ref().map_or(-1, |f| f.as_raw_fd());
        let spawned = fast_spawn::spawn_spec(
            &self.spec,
            p.streams.child_in.as_ref().map(|f| f.as_raw_fd()),
            raw(&p.streams.child_out),
            raw(&p.streams.child_err),
            self.cgroup_dir.as_deref(),
            &self.cache,
            &confine,
        )?;
        p.start_broker(
            &self.spec.confinement.unix_sockets,
            self.spec.confinement.writable.as_deref(),
        );
        Ok(spawned)
    }

    /// The start by the fast path, in the session's sandbox: made at its first command with the best init not yet
    /// known to fail. A candidate the host refuses to run is dropped for the next; with none left commands run without
    /// one. `Unsupported` when the fast path does not exist here.
    fn in_sandbox(&self, p: &Prepared) -> io::Result<FastStart> {
        // The best init not yet known to fail; the clone keeps an embedded init's memfd open for this spawn.
        let mut init = self.best_init();
        loop {
            let Some(candidate) = init.as_ref() else {
                if self.spec.preview.is_some() {
                    return Err(io::Error::other(
                        "cannot preview: this host runs commands without a session sandbox (no PID and mount \
                         namespace: see `shellward sandbox check`), and a preview needs one of its own",
                    ));
                }
                return self
                    .spawn_plain(p, None, -1, p.landlock_fd(), &self.hardening)
                    .map(|spawned| (spawned, None, p.take_listener(), false));
            };
            let own = self.cache.own_pid_ns()?;
            let started = self.sessions.with(
                self.spec.session.as_deref(),
                || self.create_sandbox(candidate),
                |sandbox| self.in_this_sandbox(p, sandbox, own),
            );
            match started {
                // A sandbox exists but this start cannot enter it: refused, never run outside it.
                Ok(Err(e)) if e.kind() == io::ErrorKind::Unsupported => {
                    return Err(io::Error::other(
                        "cannot start the command inside its session's sandbox (this platform's spawn path \
                         cannot enter it); it was not run",
                    ));
                }
                Ok(result) => {
                    return result.map(|(spawned, init, listener, shared)| {
                        (spawned, Some(init), listener, shared)
                    });
                }
                // The fast path is what enters a sandbox; where it does not exist (another architecture, an old
                // kernel) no command could run inside one: say so once and run without, never pretend.
                Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                    self.init_slot
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .clear();
                    init = None;
                    tracing::info!(
                        "commands run without a session sandbox: this platform cannot start a process inside one \
                         (no clone3 fast path)"
                    );
                }
                Err(e) if init_refused(&e) => init = self.next_init(init.take(), &e),
                Err(e) => return Err(e),
            }
        }
    }

    /// The best init program not yet known to fail.
    fn best_init(&self) -> Option<InitProgram> {
        self.init_slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .first()
            .cloned()
    }

    /// `failed` could not start a sandbox (`e`): dropped for every later start, and the next candidate returned.
    fn next_init(&self, failed: Option<InitProgram>, e: &io::Error) -> Option<InitProgram> {
        let failed = failed?;
        let mut slot = self.init_slot.lock().unwrap_or_else(|p| p.into_inner());
        // Another spawn may have dropped it already.
        if slot.first().is_some_and(|first| first.same(&failed)) {
            slot.remove(0);
        }
        let next = slot.first().cloned();
        drop(slot);
        match &next {
            Some(n) => tracing::info!(
                failed = %failed,
                next = %n,
                "the namespace init cannot run here ({e}); trying the next one"
            ),
            None => tracing::info!(
                init = %failed,
                "commands run without a PID namespace: the host refused to create one, or the init program cannot \
                 run ({e})"
            ),
        }
        next
    }

    /// A new sandbox for the session, pid 1 being `candidate`.
    fn create_sandbox(&self, candidate: &InitProgram) -> io::Result<session::Sandbox> {
        if self.portable {
            return Err(io::Error::from(io::ErrorKind::Unsupported));
        }
        let marker = format!(
            "{TREE_VAR}={}/session-{n}",
            self.token,
            n = self.session_serial.fetch_add(1, Ordering::Relaxed)
        );
        // Without privilege the sandbox gets a user namespace of its own (this user mapped to itself).
        // SAFETY: geteuid has no preconditions.
        let user_ns = unsafe { libc::geteuid() } != 0;
        let hardening = match &self.spec.preview {
            Some(_) => self.hardening.for_preview_init(&self.spec.log_dir),
            None => self.hardening.for_session_logs(&self.spec.log_dir),
        };
        let (pid, pidfd) = fast_spawn::spawn_session_init(
            candidate.path(),
            candidate.argv0(),
            &marker,
            &self.cache,
            &hardening,
            user_ns,
        )?;
        session::Sandbox::new(pid, pidfd, user_ns)
    }

    /// The start inside `sandbox`: its namespaces entered, and the session's network of this kind (made once as
    /// root; a command makes its own otherwise, which then becomes the session's).
    fn in_this_sandbox(
        &self,
        p: &Prepared,
        sandbox: &session::Sandbox,
        own_pid_ns: RawFd,
    ) -> io::Result<SandboxStart> {
        let (user_ns, pid_ns, mnt_ns) = sandbox.namespaces();
        let allow = &self.spec.confinement.allow;
        let net_fd = sandbox.net(p.net_mode, allow)?;
        let enter = fast_spawn::Enter {
            user_ns,
            pid_ns,
            mnt_ns,
            own_pid_ns,
        };
        // A preview's ruleset allows writes beneath its overlays, which its command mounts and names itself (the
        // real directories beneath them are not where its writes go).
        let preview = match &self.spec.preview {
            Some(layers) => Some((
                self.rulesets.for_preview(&[])?,
                self.hardening
                    .for_preview(layers.clone(), &self.spec.log_dir),
            )),
            None => None,
        };
        let (landlock_fd, hardening) = match &preview {
            Some((fd, h)) => (fd.as_raw_fd(), h),
            None => (p.landlock_fd(), &*self.hardening),
        };
        self.spawn_plain(p, Some(enter), net_fd, landlock_fd, hardening)
            .map(|spawned| {
                // A proxied one's listener is then served for the session's life.
                let mut shared = false;
                let listener = if net_fd < 0 && p.net_mode != child_setup::NET_HOST {
                    let listener = p.take_listener();
                    let copy = match &listener {
                        Ok(Some(l)) => l.try_clone().ok(),
                        _ => None,
                    };
                    if listener.is_ok() && (copy.is_some() || p.proxy_pair.is_none()) {
                        shared = sandbox.adopt_network(p.net_mode, allow, spawned.0, copy);
                    }
                    listener
                } else {
                    Ok(None)
                };
                (spawned, sandbox.pid(), listener, shared)
            })
    }

    /// The portable start (`std::process::Command` with a `pre_exec` hook), where the fast path does not exist: no
    /// namespaces, the same confinement otherwise.
    fn portable(self, mut p: Prepared) -> io::Result<Started> {
        // No broker here: a network other than the host's refuses Unix sockets outright.
        let confinement = &self.spec.confinement;
        p.seccomp = self.filters.get(
            &confinement.deny_syscalls,
            confinement.network != crate::Network::Host,
            false,
        )?;
        p.broker_pair = None;
        let terminal = p.streams.terminal;
        let mut cmd = Command::new(&self.spec.program);
        cmd.args(&self.spec.args)
            .current_dir(&self.spec.workdir)
            .env_clear()
            .envs(self.spec.env.pairs())
            .stdin(
                p.streams
                    .child_in
                    .take()
                    .map_or_else(Stdio::null, Stdio::from),
            )
            .stdout(
                p.streams
                    .child_out
                    .take()
                    .map_or_else(Stdio::null, Stdio::from),
            )
            .stderr(
                p.streams
                    .child_err
                    .take()
                    .map_or_else(Stdio::null, Stdio::from),
            );
        if !terminal {
            // On a terminal the leader starts a session instead (below), which also makes it a group leader.
            cmd.process_group(0);
        }
        self.pre_exec(&mut cmd, &p);
        let child = cmd.spawn()?;
        // Dropping the command closes the parent's copies of the write ends, so EOF arrives when the tree is done.
        drop(cmd);
        let leader = Unclaimed(Some(Leader::Std(child)));
        let listener = p.take_listener()?.map(|l| (l, false));
        let writes_confined = p.writes_confined;
        // The ruleset and the filter were held until here: the child has applied them.
        drop((p.landlock.take(), p.seccomp.take()));
        Ok((
            leader,
            p.streams,
            None,
            writes_confined,
            listener,
            p.refusals,
        ))
    }

    /// The portable path's hook in the child: what every spawn path does first, then joining the cgroup, the network,
    /// privileges, write confinement and the system-call filter.
    fn pre_exec(&self, cmd: &mut Command, p: &Prepared) {
        let terminal = p.streams.terminal;
        let rlimits = self.rlimits.clone();
        let hardening = self.hardening.clone();
        let reset = fast_spawn::signals_to_reset();
        let join_procs_fd = self.join_procs.as_ref().map_or(-1, |f| f.as_raw_fd());
        let parent = self.parent;
        let procs = self.procs.clone();
        let (net_mode, proxy_fd, landlock_fd) = (p.net_mode, p.proxy_fd(), p.landlock_fd());
        // As an address: the hook must be `Send`; the program outlives the spawn (the caller holds `seccomp`).
        let (seccomp_ptr, seccomp_len) = p.seccomp_raw();
        let seccomp_addr = seccomp_ptr as usize;
        // SAFETY: the closure only makes async-signal-safe syscalls (prctl, getppid, kill, open/write/close,
        // setrlimit, sigaction, capget/capset) on memory allocated before the fork.
        unsafe {
            cmd.pre_exec(move || {
                // The steps every spawn path takes first (signals, death signal, pids group, limits).
                child_setup::early(&child_setup::Early {
                    reset_signals: reset,
                    join_procs_fd,
                    rlimits: &rlimits,
                })
                .map_err(|f| io::Error::from_raw_os_error(f.errno))?;
                // The executor may have died between fork and the death signal.
                if libc::getppid() != parent {
                    libc::_exit(127);
                }
                if terminal {
                    super::pty::become_controlled()?;
                }
                if let Some(procs) = &procs {
                    cgroup::join_from_child(procs)?;
                }
                // Its own network while it may still make one; no mount namespace on this path.
                child_setup::network(net_mode, -1, proxy_fd)
                    .map_err(|f| io::Error::from_raw_os_error(f.errno))?;
                hardening
                    .privileges()
                    .map_err(|f| io::Error::from_raw_os_error(f.errno))?;
                child_setup::restrict_writes(landlock_fd)
                    .map_err(|f| io::Error::from_raw_os_error(f.errno))?;
                child_setup::restrict_syscalls(seccomp_addr as *const libc::c_void, seccomp_len)
                    .map_err(|f| io::Error::from_raw_os_error(f.errno))
            });
        }
    }
}
