//! One sandbox per session: a PID and mount namespace every command of the session starts in, so its commands see
//! and can signal each other's processes, and nothing else.
//!
//! A session's sandbox is made at its first command: its pid 1 is the init program in session mode
//! (`shellward_init::session`: it reaps orphans and holds the namespace), started by the fast spawn path with
//! `CLONE_NEWPID | CLONE_NEWNS`, whose child set-up (`child_setup`) gives the namespace its private `/proc` and its
//! read-only paths. Each command then starts straight into it: the spawner thread enters the PID namespace for its
//! children (`setns(CLONE_NEWPID)`, which moves only that thread's `pid_for_children`) around the clone, and the child
//! enters the mount namespace (`setns(CLONE_NEWNS)`) before its privileges are dropped. The command's leader is the
//! executor's own child, tracked exactly as without namespaces (cgroup or process group, marker); its orphans go to
//! the session's pid 1.
//!
//! Lifetime: a sandbox lives until the executor shuts down ([`Sessions::end_all`]) or it has been idle — no start
//! for `ExecutorConfig::session_idle` and no process in it but its pid 1 — when the reaper ends it ([`Sessions::end_idle`]). A sandbox
//! whose pid 1 died (killed from outside) is noticed at the next start and made anew. Ending one sends its pid 1
//! `SIGTERM` (it exits), after which the kernel kills whatever else is in the namespace. Signals to a command go to
//! its tree, never to the sandbox.

use super::pidfd::pidfd_send_signal;
use nix::sys::signal::Signal;
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One session's namespaces.
pub(crate) struct Sandbox {
    /// Pid 1 of the namespace (the executor's child, in the executor's numbering) and a pidfd for it.
    pid: i32,
    pidfd: OwnedFd,
    /// The namespaces, held open (the user namespace only when the sandbox was made without privilege).
    user_ns: Option<OwnedFd>,
    pid_ns: OwnedFd,
    mnt_ns: OwnedFd,
    /// When a command last started in it.
    last_start: Instant,
    /// The session's network namespace for `network = none`, made at the first command asking (as root; without
    /// privilege each such command makes its own inside the sandbox's user namespace).
    no_network: std::sync::Mutex<Option<OwnedFd>>,
    /// The session's own networks, adopted from the first command that made one ([`Sandbox::adopt_network`]): by
    /// `child_setup::NET_*` mode and, for an allow-list, its destinations. Later commands of the session asking for
    /// the same enter it, so they start as fast as any and see each other's servers, as in one terminal.
    networks: std::sync::Mutex<HashMap<(i32, Vec<String>), OwnedFd>>,
    /// Copies of the proxy listeners of the session's allow-list networks: shut down when the sandbox ends, which
    /// ends the executor's proxy task serving them.
    proxy_listeners: std::sync::Mutex<Vec<OwnedFd>>,
}

impl Sandbox {
    /// Takes the freshly started pid 1 of a new namespace: opens its namespaces. With `user_ns` it was made in a
    /// user namespace of its own (without privilege): this user's uid and gid are mapped to themselves in it first,
    /// so the session's files stay theirs.
    pub(crate) fn new(pid: i32, pidfd: OwnedFd, user_ns: bool) -> io::Result<Sandbox> {
        // The pid is an unreaped child of this process: it names that process and no other.
        let open = |kind: &str| -> io::Result<OwnedFd> {
            Ok(std::fs::File::open(format!("/proc/{pid}/ns/{kind}"))?.into())
        };
        let user = || -> io::Result<Option<OwnedFd>> {
            if !user_ns {
                return Ok(None);
            }
            map_ids(pid)?;
            open("user").map(Some)
        };
        match (user(), open("pid"), open("mnt")) {
            (Ok(user_ns), Ok(pid_ns), Ok(mnt_ns)) => Ok(Sandbox {
                pid,
                pidfd,
                user_ns,
                pid_ns,
                mnt_ns,
                last_start: Instant::now(),
                no_network: std::sync::Mutex::new(None),
                networks: std::sync::Mutex::new(HashMap::new()),
                proxy_listeners: std::sync::Mutex::new(Vec::new()),
            }),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                let _ = pidfd_send_signal(&pidfd, Signal::SIGKILL);
                reap(pid);
                Err(io::Error::other(format!(
                    "cannot open the new session sandbox's namespaces: {e}"
                )))
            }
        }
    }

    /// Whether its pid 1 still runs (its pidfd is not readable yet).
    fn alive(&self) -> bool {
        !self.exits_within(Duration::ZERO)
    }

    /// Waits up to `timeout` for its pid 1 to exit (its pidfd becomes readable when it does); returns whether it did.
    fn exits_within(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut fds = [libc::pollfd {
                fd: self.pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            // Rounded up, so a wait never ends before its deadline.
            let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd, for at most `ms`.
            match unsafe { libc::poll(fds.as_mut_ptr(), 1, ms) } {
                0 if Instant::now() >= deadline => return false,
                0 => {}
                n if n > 0 => return true,
                _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
                // A pidfd that cannot be polled: taken as gone, as a readable one.
                _ => return true,
            }
        }
    }

    /// Pid 1 of the sandbox, in the executor's numbering: the reaper of every orphan in it.
    pub(crate) fn pid(&self) -> i32 {
        self.pid
    }

    /// The namespaces a command enters: `(user namespace if any, pid namespace, mount namespace)`.
    pub(crate) fn namespaces(&self) -> (Option<RawFd>, RawFd, RawFd) {
        (
            self.user_ns.as_ref().map(|f| f.as_raw_fd()),
            self.pid_ns.as_raw_fd(),
            self.mnt_ns.as_raw_fd(),
        )
    }

    /// The network namespace a command with network `mode` (and, for an allow-list, `allow`) enters: one the session
    /// already has of that kind — adopted from its first such command ([`Sandbox::adopt_network`]), or, for
    /// `child_setup::NET_NONE` as root, made on first use by this thread (a namespace with nothing up has nothing to
    /// share but abstract unix sockets, and those stay within the session) — so such a start costs no more than any
    /// other; -1 otherwise: the host's network, or the session's first command of that kind, which makes its own
    /// (in a sandbox in a user namespace the namespace must belong to it, which only its commands can make). Called
    /// on the spawner thread only (see [`make_network`]).
    pub(crate) fn net(&self, mode: i32, allow: &[String]) -> io::Result<RawFd> {
        if mode == super::child_setup::NET_HOST {
            return Ok(-1);
        }
        if let Some(fd) = self
            .networks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(mode, allow.to_vec()))
        {
            return Ok(fd.as_raw_fd());
        }
        if mode != super::child_setup::NET_NONE || self.user_ns.is_some() {
            return Ok(-1);
        }
        let mut slot = self.no_network.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(fd) = &*slot {
            return Ok(fd.as_raw_fd());
        }
        let fd = make_network(false)?;
        let raw = fd.as_raw_fd();
        *slot = Some(fd);
        Ok(raw)
    }

    /// After a command of this session made a network namespace of its own (`mode`, `allow`), keeps it as the
    /// session's: later commands asking for the same enter it ([`Sandbox::net`]). `pid` is the command's leader, an
    /// unreaped child of this process, so its number names it. `listener` is a copy of its proxy listener, kept to be
    /// shut down when the sandbox ends. Returns whether it was kept (false when one is kept already, or it cannot be
    /// opened: the command keeps its own).
    pub(crate) fn adopt_network(
        &self,
        mode: i32,
        allow: &[String],
        pid: i32,
        listener: Option<OwnedFd>,
    ) -> bool {
        let mut networks = self.networks.lock().unwrap_or_else(|p| p.into_inner());
        let key = (mode, allow.to_vec());
        if networks.contains_key(&key) {
            return false;
        }
        let Ok(ns) = std::fs::File::open(format!("/proc/{pid}/ns/net")) else {
            return false;
        };
        networks.insert(key, ns.into());
        if let Some(l) = listener {
            self.proxy_listeners
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(l);
        }
        true
    }

    /// Whether any process other than pid 1 is in the namespace (one `/proc` scan).
    fn occupied(&self) -> bool {
        // SAFETY: fstat of a descriptor held by `self`, into zeroed memory of the right type.
        let ns = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(self.pid_ns.as_raw_fd(), &mut st) != 0 {
                return true;
            }
            st
        };
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return true;
        };
        entries.flatten().any(|e| {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                return false;
            };
            pid != self.pid
                && std::fs::metadata(format!("/proc/{pid}/ns/pid"))
                    .is_ok_and(|m| m.ino() == ns.st_ino && m.dev() == ns.st_dev)
        })
    }

    /// Ends the sandbox: `SIGTERM` to its pid 1 (the kernel then kills the rest of the namespace), `SIGKILL` if it
    /// has not exited within a second, and the reap.
    fn end(self) {
        // The session's proxies stop accepting (their tasks end); then the namespace goes.
        for l in self
            .proxy_listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            // SAFETY: shutdown of a socket descriptor this sandbox holds.
            unsafe { libc::shutdown(l.as_raw_fd(), libc::SHUT_RDWR) };
        }
        let _ = pidfd_send_signal(&self.pidfd, Signal::SIGTERM);
        // Woken by its exit, not by polling (a 2 ms poll was most of a short `run`'s shutdown).
        if !self.exits_within(Duration::from_secs(1)) {
            let _ = pidfd_send_signal(&self.pidfd, Signal::SIGKILL);
        }
        reap(self.pid);
    }
}

/// A new network namespace (its loopback up when asked), made by the calling thread: it moves into the namespace,
/// opens it, and moves back. Only for the executor's spawner thread, which runs nothing else meanwhile (a thread's
/// network namespace is its own). Should the move back fail, the thread stays in the empty namespace, so later
/// commands get less network than asked, never more (logged).
fn make_network(loopback: bool) -> io::Result<OwnedFd> {
    let own = std::fs::File::open("/proc/thread-self/ns/net")?;
    // SAFETY: unshare of this thread's network namespace (allowed in a multi-threaded process).
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let made = std::fs::File::open("/proc/thread-self/ns/net")
        .map(OwnedFd::from)
        .and_then(|fd| {
            if loopback {
                super::child_setup::loopback_up().map_err(io::Error::from_raw_os_error)?;
            }
            Ok(fd)
        });
    // SAFETY: setns back into the namespace this thread came from, held open above.
    if unsafe { libc::setns(own.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        tracing::error!(
            "cannot return the spawner thread to the host's network namespace ({}); commands now start without \
             network",
            io::Error::last_os_error()
        );
    }
    made.map_err(|e| {
        io::Error::other(format!(
            "cannot prepare the session's network namespace: {e}"
        ))
    })
}

/// Reaps `pid`, a sandbox's pid 1 (this process's child, unreaped until this call, so the number is still its own).
fn reap(pid: i32) {
    let mut status = 0;
    // SAFETY: waitpid on our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

/// Maps this process's effective uid and gid to themselves in the user namespace of `pid` (a fresh sandbox's pid 1,
/// this process's child): `setgroups` denied first, as the kernel requires of an unprivileged writer.
fn map_ids(pid: i32) -> io::Result<()> {
    // SAFETY: geteuid and getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let write = |file: &str, text: String| {
        // The parent of a vfork-style child resumes at the exec's switch of memory, a moment before the kernel
        // marks the new program dumpable; until then its /proc files are root's: retry briefly.
        let path = format!("/proc/{pid}/{file}");
        let mut tries = 0;
        loop {
            match std::fs::write(&path, &text) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied && tries < 200 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_micros(250));
                }
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot write {file} of the session's new user namespace: {e}"),
                    ));
                }
            }
        }
    };
    write("uid_map", format!("{uid} {uid} 1\n"))?;
    write("setgroups", "deny\n".into())?;
    write("gid_map", format!("{gid} {gid} 1\n"))
}

/// The sandboxes of an executor's sessions, by session (`None`: commands started without one).
#[derive(Default)]
pub(crate) struct Sessions {
    map: Mutex<HashMap<Option<String>, Sandbox>>,
}

impl Sessions {
    /// Runs `f` with the session's sandbox, made by `create` when there is none or its pid 1 died. The map is locked
    /// for the call, so the sandbox cannot be ended under it.
    pub(crate) fn with<R>(
        &self,
        session: Option<&str>,
        create: impl FnOnce() -> io::Result<Sandbox>,
        f: impl FnOnce(&Sandbox) -> R,
    ) -> io::Result<R> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let key = session.map(str::to_string);
        if map.get(&key).is_some_and(|s| !s.alive())
            && let Some(dead) = map.remove(&key)
        {
            tracing::info!(
                session = session.unwrap_or(""),
                "the session's sandbox had ended; making a new one"
            );
            dead.end();
        }
        let sandbox = match map.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(create()?),
        };
        sandbox.last_start = Instant::now();
        Ok(f(sandbox))
    }

    /// Ends the sandboxes idle for at least `idle` with nothing in them but their pid 1.
    pub(crate) fn end_idle(&self, idle: Duration) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let ended: Vec<Option<String>> = map
            .iter()
            .filter(|(_, s)| s.last_start.elapsed() >= idle && (!s.alive() || !s.occupied()))
            .map(|(k, _)| k.clone())
            .collect();
        for key in ended {
            if let Some(s) = map.remove(&key) {
                s.end();
            }
        }
    }

    /// Ends the sandbox of `session`, if it has one (a preview's, once its command is done).
    pub(crate) fn end(&self, session: Option<&str>) {
        let ended = self
            .map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&session.map(str::to_string));
        if let Some(s) = ended {
            s.end();
        }
    }

    /// Ends every sandbox (executor shutdown).
    pub(crate) fn end_all(&self) {
        let all: Vec<Sandbox> = self
            .map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, s)| s)
            .collect();
        for s in all {
            s.end();
        }
    }

    /// Whether there is no sandbox.
    pub(crate) fn is_empty(&self) -> bool {
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }
}
