//! Unix (Linux) process control: spawning into a process group and a cgroup, waiting with pidfds, signalling whole
//! trees, the process-group fallback, and the watchdog that kills everything if the executor itself is killed.

pub(crate) mod cgroup;
mod fast_spawn;
pub mod procfs;

use cgroup::{Cgroup, CgroupRoot};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// The variable marking fallback-mode trees.
const TREE_VAR: &str = "SHELLWARD_TREE";
/// The variable marking watchdogs (`SHELLWARD_WATCHDOG=1`), which belong to no tree: a process hosting several
/// executors has several.
const WATCHDOG_VAR: &str = "SHELLWARD_WATCHDOG";

/// How command trees are contained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainmentKind {
    /// One cgroup v2 per tree, killed with `cgroup.kill`: holds processes that leave the process group.
    Cgroup,
    /// One process group per tree, plus the descendants found in `/proc`; the executor is a child subreaper so
    /// orphaned descendants stay visible.
    ProcessGroup,
}

impl std::fmt::Display for ContainmentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ContainmentKind::Cgroup => "cgroup v2 (cgroup.kill)",
            ContainmentKind::ProcessGroup => "process group + subreaper",
        })
    }
}

/// Platform state shared by all trees of one executor.
pub(crate) struct Platform {
    root: Option<CgroupRoot>,
    /// Identifies this executor's trees in the fallback: every process of a tree inherits
    /// `SHELLWARD_TREE=<token>/<id>`, which survives `setsid` and double forks.
    token: String,
    spawner: Mutex<mpsc::Sender<SpawnJob>>,
    /// What the fast path keeps between spawns (resolved shell, `/dev/null`).
    spawn_cache: Arc<fast_spawn::SpawnCache>,
    /// Fallback mode: which of this process's children are accounted for.
    children: Arc<Children>,
    watchdog: Mutex<Option<Watchdog>>,
}

type SpawnJob = Box<dyn FnOnce() + Send>;

/// A spawned leader and its output pipes.
pub(crate) struct Spawned {
    pub(crate) leader: Leader,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: Option<OwnedFd>,
    pub(crate) tree: Tree,
}

/// A spawned leader process.
pub(crate) enum Leader {
    /// Spawned by `std::process::Command` (portable path).
    Std(Child),
    /// Spawned by `clone3` (fast path), with its pidfd.
    Raw {
        /// Process id.
        pid: i32,
        /// A pidfd for it.
        pidfd: OwnedFd,
    },
}

impl Leader {
    /// The process id.
    pub(crate) fn pid(&self) -> i32 {
        match self {
            Leader::Std(c) => c.id() as i32,
            Leader::Raw { pid, .. } => *pid,
        }
    }
}

/// What to spawn.
pub(crate) struct SpawnSpec {
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
    pub(crate) workdir: PathBuf,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) separate_stderr: bool,
    pub(crate) name: String,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    // A larger pipe halves the wakeups for chatty commands; failure is harmless.
    // SAFETY: fcntl on a valid fd.
    unsafe {
        libc::fcntl(r.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20);
    }
    Ok((r, w))
}

impl Platform {
    /// Sets up containment (cgroup when a writable cgroup2 hierarchy with `cgroup.kill` is found and `allow_cgroup`)
    /// and the spawner thread.
    pub(crate) fn new(allow_cgroup: bool) -> io::Result<Platform> {
        let root = if allow_cgroup {
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
        };
        if root.is_none() {
            // SAFETY: prctl with constant arguments.
            unsafe {
                libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            }
        }
        // Every fork happens on this thread: PR_SET_PDEATHSIG fires when the *thread* that forked exits, so it must
        // live as long as the executor.
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
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let token = format!("{}-{nanos}", std::process::id());
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
        };
        let dog = Watchdog::start(
            platform.root.as_ref().map(|r| r.dir().to_path_buf()),
            &platform,
        )?;
        platform
            .children
            .watchdog
            .store(dog.child.id() as i32, Ordering::Relaxed);
        *platform.watchdog.lock().unwrap() = Some(dog);
        Ok(platform)
    }

    /// The executor's parent cgroup, when cgroups are used.
    pub(crate) fn cgroup_dir(&self) -> Option<&std::path::Path> {
        self.root.as_ref().map(|r| r.dir())
    }

    /// The active containment.
    pub(crate) fn kind(&self) -> ContainmentKind {
        if self.root.is_some() {
            ContainmentKind::Cgroup
        } else {
            ContainmentKind::ProcessGroup
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

    /// Runs `f` on the spawner thread; the result arrives on the returned channel.
    fn on_spawner<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> io::Result<tokio::sync::oneshot::Receiver<R>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(Box::new(move || {
            let _ = tx.send(f());
        }))?;
        Ok(rx)
    }

    /// Runs `f` on the spawner thread and blocks until it is done (for set-up, outside async code paths).
    fn on_spawner_sync<R: Send + 'static>(
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
        let marker = format!("{}/{}", self.token, spec.name);
        if self.root.is_none() {
            spec.env.push((TREE_VAR.into(), marker.clone().into()));
        }
        let cgroup = match &self.root {
            Some(root) => Some(root.child(&spec.name)?),
            None => None,
        };
        let procs = cgroup.as_ref().map(|c| c.procs_path().clone());
        let cgroup_dir = cgroup.as_ref().map(|c| c.dir().to_path_buf());
        let parent = std::process::id() as i32;
        let cache = self.spawn_cache.clone();
        let result =
            self.on_spawner(move || -> io::Result<(Leader, OwnedFd, Option<OwnedFd>)> {
                let (out_r, out_w) = pipe()?;
                let (err_r, err_w) = if spec.separate_stderr {
                    let (r, w) = pipe()?;
                    (Some(r), w)
                } else {
                    (None, out_w.try_clone()?)
                };
                match fast_spawn::spawn_spec(
                    &spec,
                    out_w.as_raw_fd(),
                    err_w.as_raw_fd(),
                    cgroup_dir.as_deref(),
                    &cache,
                ) {
                    Ok((pid, pidfd)) => return Ok((Leader::Raw { pid, pidfd }, out_r, err_r)),
                    Err(e) if e.kind() == io::ErrorKind::Unsupported => {}
                    Err(e) => return Err(e),
                }
                let mut cmd = Command::new(&spec.program);
                cmd.args(&spec.args)
                    .current_dir(&spec.workdir)
                    .envs(spec.env.iter().map(|(k, v)| (k, v)))
                    .stdin(Stdio::null())
                    .stdout(Stdio::from(out_w))
                    .stderr(Stdio::from(err_w))
                    .process_group(0);
                // SAFETY: the closure only makes async-signal-safe syscalls (prctl, getppid, kill, open/write/close).
                unsafe {
                    cmd.pre_exec(move || {
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                            return Err(io::Error::last_os_error());
                        }
                        // The executor may have died between fork and prctl.
                        if libc::getppid() != parent {
                            libc::_exit(127);
                        }
                        if let Some(procs) = &procs {
                            cgroup::join_from_child(procs)?;
                        }
                        Ok(())
                    });
                }
                let child = cmd.spawn()?;
                // Dropping the command closes the parent's copies of the write ends, so EOF arrives when the tree is done.
                drop(cmd);
                Ok((Leader::Std(child), out_r, err_r))
            })?;
        // Awaited, never blocked on: the runtime's threads must keep driving I/O while the spawner forks.
        let result = result.await.map_err(|_| stopped())?;
        let (leader, stdout, stderr) = match result {
            Ok(r) => r,
            Err(e) => {
                if let Some(cg) = &cgroup {
                    cg.remove();
                }
                return Err(e);
            }
        };
        let pgid = leader.pid();
        let tree = match cgroup {
            Some(cg) => Tree::Cgroup { cgroup: cg, pgid },
            None => {
                let marker = format!("{TREE_VAR}={marker}");
                self.children
                    .leaders
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(pgid, marker.clone());
                Tree::Group {
                    pgid,
                    marker,
                    token_prefix: format!("{TREE_VAR}={}/", self.token),
                    known: Mutex::new(HashSet::from([pgid])),
                    children: self.children.clone(),
                }
            }
        };
        self.watchdog_send(&format!("+ {pgid}\n"));
        Ok(Spawned {
            leader,
            stdout,
            stderr,
            tree,
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

    /// Kills every tree and removes the executor's cgroups (synchronous, best effort), then releases the watchdog.
    pub(crate) fn shutdown(&self) {
        if let Some(root) = &self.root {
            root.kill_all_and_remove();
        }
        if let Some(mut dog) = self
            .watchdog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = dog.pipe.write_all(b"quit\n");
            drop(dog.pipe);
            let _ = dog.child.wait();
        }
    }

    /// In fallback mode: reaps zombies of tree members that were re-parented to this process (subreaper).
    pub(crate) fn reap_orphans(&self, known: &HashSet<i32>) {
        if self.root.is_some() {
            return;
        }
        let me = std::process::id() as i32;
        for p in procfs::scan() {
            if p.ppid == me && !p.alive() && known.contains(&p.pid) {
                let _ = nix::sys::wait::waitpid(
                    Pid::from_raw(p.pid),
                    Some(nix::sys::wait::WaitPidFlag::WNOHANG),
                );
            }
        }
    }
}

/// A contained process tree.
#[derive(Debug)]
pub(crate) enum Tree {
    /// In its own cgroup (and process group).
    Cgroup {
        /// The cgroup.
        cgroup: Cgroup,
        /// The process group (the leader's pid).
        pgid: i32,
    },
    /// In its own process group; members are found by group, by parentage and by the inherited marker variable;
    /// `known` accumulates every member seen.
    Group {
        /// The process group (the leader's pid).
        pgid: i32,
        /// `SHELLWARD_TREE=<token>/<id>`, inherited by every process of the tree.
        marker: String,
        /// `SHELLWARD_TREE=<token>/`: the marker of every tree of this executor.
        token_prefix: String,
        /// Every pid ever seen in the tree.
        known: Mutex<HashSet<i32>>,
        /// The executor's account of its own children, shared by its trees.
        children: Arc<Children>,
    },
}

/// Releases what [`Tree::prepare_end_check`] holds when dropped.
pub(crate) struct EndCheck<'a>(&'a Tree);

impl Drop for EndCheck<'_> {
    fn drop(&mut self) {
        if let Tree::Cgroup { cgroup, .. } = self.0 {
            cgroup.release_events();
        }
    }
}

/// Fallback mode: the executor's own direct children that are accounted for, and where to list them.
#[derive(Debug)]
pub(crate) struct Children {
    /// The threads whose children lists hold every child that matters: the main thread (orphans re-parented to this
    /// subreaper go to the first living thread of the process, which is the main thread while the process runs) and
    /// the spawner thread (the parent of every leader and of the watchdog).
    tids: [i32; 2],
    /// Leaders that have not been reaped, with their tree's marker (the pid of an unreaped process cannot be
    /// reused, so a child with such a pid is that leader).
    leaders: Mutex<HashMap<i32, String>>,
    /// This executor's watchdog.
    watchdog: AtomicI32,
}

impl Tree {
    /// The process group id.
    pub(crate) fn pgid(&self) -> i32 {
        match self {
            Tree::Cgroup { pgid, .. } | Tree::Group { pgid, .. } => *pgid,
        }
    }

    /// The living members now.
    pub(crate) fn members(&self) -> Vec<i32> {
        match self {
            // `cgroup.events` is one small read; only a populated cgroup needs its pids checked.
            Tree::Cgroup { cgroup, .. } if !cgroup.populated() => Vec::new(),
            Tree::Cgroup { cgroup, .. } => cgroup
                .pids()
                .into_iter()
                .filter(|&p| procfs::stat(p).is_some_and(|e| e.alive()))
                .collect(),
            Tree::Group {
                pgid,
                marker,
                known,
                ..
            } => {
                let table = procfs::scan();
                let mut known = known.lock().unwrap_or_else(|p| p.into_inner());
                let mut members = procfs::tree_members(&table, *pgid, &known);
                members.extend(procfs::with_env(&table, marker));
                let members = procfs::tree_members(&table, *pgid, &members);
                known.extend(members.iter().copied());
                members.into_iter().collect()
            }
        }
    }

    /// Prepares a cheap end-of-run check while the command runs (cgroup: keeps `cgroup.events` open). The returned
    /// guard undoes it.
    pub(crate) fn prepare_end_check(&self) -> EndCheck<'_> {
        if let Tree::Cgroup { cgroup, .. } = self {
            cgroup.hold_events();
        }
        EndCheck(self)
    }

    /// Every pid ever attributed to the tree (fallback mode), for reaping.
    pub(crate) fn known(&self) -> HashSet<i32> {
        match self {
            Tree::Cgroup { .. } => HashSet::new(),
            Tree::Group { known, .. } => known.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }

    /// Whether anything of the tree is alive.
    pub(crate) fn alive(&self) -> bool {
        if self.certainly_gone() {
            return false;
        }
        !self.members().is_empty()
    }

    /// Fallback mode's quick answer to "is the tree gone?", without scanning every process on the machine.
    ///
    /// The executor is a child subreaper, so when a tree's processes die their orphaned descendants are re-parented
    /// to it: once the process group is empty, any survivor of the tree is a direct child of the executor or a
    /// descendant of one. The tree is certainly gone when the group is empty and every direct child is a zombie, a
    /// member of *another* tree of this executor (by its marker) or a watchdog (by `SHELLWARD_WATCHDOG`; a process
    /// hosting several executors has several). Anything else (a child carrying this tree's marker, an unmarked or
    /// unreadable child, no `/proc/self/task/*/children`) answers "maybe", and the caller scans. With cgroups the
    /// answer is always "maybe": `cgroup.events` is already one small read.
    ///
    /// Only the children lists of the main thread and the spawner thread are read (see [`Children`]), and children
    /// the executor already accounts for — its watchdog, the unreaped leaders of its other trees — are settled
    /// without reading their `/proc` files (each such read costs 15–30 µs here).
    pub(crate) fn certainly_gone(&self) -> bool {
        let Tree::Group {
            pgid,
            marker,
            token_prefix,
            children: book,
            ..
        } = self
        else {
            return false;
        };
        // A group with any process left (a zombie included) needs the full answer.
        if killpg(Pid::from_raw(*pgid), None) != Err(nix::errno::Errno::ESRCH) {
            return false;
        }
        let Some(children) = procfs::children_of(&book.tids) else {
            return false;
        };
        let watchdog = book.watchdog.load(Ordering::Relaxed);
        children.into_iter().all(|child| {
            if child == watchdog {
                return true;
            }
            if let Some(m) = book
                .leaders
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&child)
            {
                // The leader of a tree of this executor that has not been reaped: fine unless it is this tree's.
                return m != marker;
            }
            if procfs::stat(child).is_some_and(|e| !e.alive()) {
                return true;
            }
            let Some(env) = procfs::environ(child) else {
                // Gone since the listing (fine) or unreadable (not fine): tell them apart.
                return procfs::stat(child).is_none();
            };
            let mine = marker.as_bytes();
            let prefix = token_prefix.as_bytes();
            match env.iter().find(|kv| kv.starts_with(prefix)) {
                // A member of another tree of this executor, or (with no marker of ours) some executor's watchdog.
                Some(kv) => kv.as_slice() != mine,
                None => env
                    .iter()
                    .any(|kv| kv.strip_prefix(WATCHDOG_VAR.as_bytes()) == Some(b"=1")),
            }
        })
    }

    /// Sends `signal` to every member (the group, and members outside it).
    pub(crate) fn signal(&self, signal: Signal) {
        let _ = killpg(Pid::from_raw(self.pgid()), signal);
        for pid in self.members() {
            let _ = kill(Pid::from_raw(pid), signal);
        }
    }

    /// SIGKILLs the whole tree at once.
    pub(crate) fn kill(&self) {
        match self {
            Tree::Cgroup { cgroup, pgid } => {
                if cgroup.kill().is_err() {
                    let _ = killpg(Pid::from_raw(*pgid), Signal::SIGKILL);
                }
            }
            Tree::Group { .. } => {
                // Repeat until nothing new appears: a member may fork while we signal.
                for _ in 0..10 {
                    let members = self.members();
                    if members.is_empty() {
                        break;
                    }
                    self.signal(Signal::SIGKILL);
                }
            }
        }
    }

    /// Releases the tree's resources (its cgroup) once it is empty, waiting briefly if the kernel still counts a
    /// dying member (for shutdown paths).
    pub(crate) fn cleanup(&self) {
        if let Tree::Cgroup { cgroup, .. } = self {
            cgroup.remove();
        }
    }

    /// Tries once to release the tree's resources without blocking; returns whether they are released.
    pub(crate) fn try_cleanup(&self) -> bool {
        match self {
            Tree::Cgroup { cgroup, .. } => cgroup.try_remove(),
            Tree::Group { .. } => true,
        }
    }
}

/// A helper process that outlives a killed executor just long enough to kill what it started.
///
/// It is `sh` reading commands from a pipe whose only write end is held by the executor (close-on-exec, so commands
/// never inherit it). When the executor dies — even by SIGKILL — the pipe reaches EOF and the watchdog kills the
/// executor's cgroup (which holds every tree, escapers included) and every process group it was told about.
struct Watchdog {
    child: Child,
    pipe: std::fs::File,
}

const WATCHDOG_SCRIPT: &str = r#"
cg="$1"; token="$2"; pgs=" "
while read -r op pg; do
  case "$op" in
    +) pgs="$pgs$pg " ;;
    -) new=" "; for p in $pgs; do [ "$p" = "$pg" ] || new="$new$p "; done; pgs="$new" ;;
    quit) exit 0 ;;
  esac
done
if [ -n "$cg" ]; then echo 1 > "$cg/cgroup.kill" 2>/dev/null; fi
for pg in $pgs; do kill -s KILL -- "-$pg" 2>/dev/null; done
if [ -n "$token" ]; then
  for round in 1 2 3; do
    for f in $(grep -lzE "^SHELLWARD_TREE=$token/" /proc/[0-9]*/environ 2>/dev/null); do
      p=${f#/proc/}; kill -s KILL "${p%/environ}" 2>/dev/null
    done
  done
fi
if [ -n "$cg" ]; then
  i=0
  while [ $i -lt 50 ]; do
    for d in "$cg"/*/; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
    rmdir "$cg" 2>/dev/null && exit 0
    i=$((i+1)); sleep 0.1
  done
fi
"#;

impl Watchdog {
    fn start(cgroup_dir: Option<PathBuf>, platform: &Platform) -> io::Result<Watchdog> {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
        let token = if cgroup_dir.is_none() {
            platform.token.clone()
        } else {
            String::new()
        };
        let cg = cgroup_dir.map(|d| d.into_os_string()).unwrap_or_default();
        let child = platform.on_spawner_sync(move || {
            let mut cmd = Command::new("/bin/sh");
            cmd.arg("-c")
                .arg(WATCHDOG_SCRIPT)
                .arg("shellward-watchdog")
                .arg(cg)
                .arg(token);
            cmd.env(WATCHDOG_VAR, "1")
                .stdin(Stdio::from(r))
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            // Its own session: terminal signals aimed at the executor's group do not reach it.
            // SAFETY: setsid is async-signal-safe.
            unsafe {
                cmd.pre_exec(|| {
                    libc::setsid();
                    Ok(())
                });
            }
            cmd.spawn()
        })??;
        // SAFETY: `w` is an owned, open pipe write end.
        let pipe = unsafe { std::fs::File::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(w)) };
        Ok(Watchdog { child, pipe })
    }
}

fn stopped() -> io::Error {
    io::Error::other("the executor's spawner thread has stopped")
}

/// Opens a pidfd for `pid` (Linux ≥ 5.3).
pub(crate) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: raw syscall with valid arguments; the returned fd is owned by us.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new, valid file descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
