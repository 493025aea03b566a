//! cgroup v2 containment: one cgroup per command tree under a per-executor parent, killed with `cgroup.kill`.
//!
//! The hierarchy is discovered from `/proc/self/mountinfo` (the `cgroup2` mount) and `/proc/self/cgroup` (the `0::`
//! line with this process's cgroup), never assumed. The executor creates `shellward-<pid>-<n>` below its
//! own cgroup, and one child `p<id>` per command. A command starts inside its cgroup (`clone3` with
//! `CLONE_INTO_CGROUP`, see `fast_spawn`; on the portable path it joins between fork and exec), so everything it forks
//! afterwards — including processes that leave the process group with `setsid` or double-fork —
//! stays inside and dies with `cgroup.kill`.
//!
//! A command's cgroup is reused: when its tree is released and the cgroup is empty (`populated 0`), it goes back to
//! the executor's free list (up to [`FREE_CGROUPS`]) and a later command starts in it, which saves the `mkdir` on the
//! start path and the `rmdir` (and the kernel's offlining work after it), together about 80 µs of CPU per command.
//! A released [`Cgroup`] handle answers as an empty cgroup from then on — no members, nothing to kill — so a
//! finished tree's handle never reaches the processes of the command that has its directory now: the flag is set
//! under the same lock that every signal through `cgroup.kill` and every membership answer takes. A reused cgroup
//! keeps the name of the command it was made for.

use std::ffi::CString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Finds the cgroup v2 directory this process belongs to.
pub(crate) fn discover() -> Option<PathBuf> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let cgroup = fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))?
        .trim()
        .to_string();
    for line in mountinfo.lines() {
        // Fields: id parent major:minor root mount-point options [optional...] - fstype source super-options
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        let fields: Vec<&str> = left.split_whitespace().collect();
        let (root, mount) = (*fields.get(3)?, *fields.get(4)?);
        let mount = unescape(mount);
        // Our cgroup path is relative to the hierarchy root; the mount shows the subtree at `root`.
        let rel = own
            .strip_prefix(root)
            .unwrap_or(&own)
            .trim_start_matches('/');
        let dir = Path::new(&mount).join(rel);
        if dir.join("cgroup.procs").exists() {
            return Some(dir);
        }
    }
    None
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
pub(super) fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v as char);
            i += 4;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// The executor's parent cgroup.
#[derive(Debug)]
pub(crate) struct CgroupRoot {
    dir: PathBuf,
    free: Arc<Mutex<Free>>,
}

/// How many empty command cgroups an executor keeps for reuse (more are removed).
pub(crate) const FREE_CGROUPS: usize = 32;

/// Empty command cgroups waiting for their next command.
#[derive(Debug, Default)]
struct Free {
    cgroups: Vec<Spare>,
    /// Set at shutdown: nothing is kept any more.
    off: bool,
}

/// An empty cgroup on the free list (it holds no descriptor: an executor's descriptors do not grow with it).
#[derive(Debug)]
struct Spare {
    dir: PathBuf,
    suffix: String,
    procs: CString,
}

static ROOT_SEQ: AtomicU64 = AtomicU64::new(0);

impl CgroupRoot {
    /// Creates the executor's parent cgroup below `base` (`shellward-<PID namespace>-<pid>-<n>`, after removing those
    /// of executors that died, see [`super::stale`]) and checks `cgroup.kill` is available.
    pub(crate) fn create(base: &Path) -> io::Result<CgroupRoot> {
        let n = ROOT_SEQ.fetch_add(1, Ordering::Relaxed);
        let ns = super::stale::pid_namespace_id();
        super::stale::sweep(base, &ns);
        let dir = base.join(format!("shellward-{ns}-{}-{n}", std::process::id()));
        fs::create_dir(&dir)?;
        if !dir.join("cgroup.kill").exists() {
            let _ = fs::remove_dir(&dir);
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "cgroup.kill is not available (kernel < 5.14)",
            ));
        }
        Ok(CgroupRoot {
            dir,
            free: Arc::default(),
        })
    }

    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cgroup for one command: an empty one from the free list, or a new one named `name`.
    pub(crate) fn child(&self, name: &str) -> io::Result<Cgroup> {
        loop {
            let spare = self
                .free
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .cgroups
                .pop();
            let Some(spare) = spare else { break };
            // Still empty (a process can join an empty cgroup only if someone writes it into `cgroup.procs`): a
            // cgroup that is not stays out of use until shutdown kills it. The `cgroup.events` opened for the check
            // is the one the end-of-run check holds.
            let Ok(events) = fs::File::open(spare.dir.join("cgroup.events")) else {
                continue;
            };
            if read_small(&events).is_ok_and(|(buf, n)| !says_populated(&buf[..n])) {
                return Ok(Cgroup {
                    dir: spare.dir,
                    suffix: spare.suffix,
                    procs: spare.procs,
                    state: Mutex::new(State {
                        events: Some(events),
                        ..State::default()
                    }),
                    home: Arc::downgrade(&self.free),
                });
            }
        }
        let dir = self.dir.join(name);
        fs::create_dir(&dir)?;
        let procs = CString::new(
            dir.join("cgroup.procs")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "cgroup path contains NUL"))?;
        let root_name = self.dir.file_name().unwrap_or_default().to_string_lossy();
        Ok(Cgroup {
            suffix: format!("/{root_name}/{name}"),
            dir,
            procs,
            state: Mutex::default(),
            home: Arc::downgrade(&self.free),
        })
    }

    /// Kills everything in every command cgroup and removes them all (best effort, synchronous).
    pub(crate) fn kill_all_and_remove(&self) {
        {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            free.off = true;
            free.cgroups.clear();
        }
        let _ = fs::write(self.dir.join("cgroup.kill"), "1");
        if let Ok(entries) = fs::read_dir(&self.dir) {
            // The entry's type comes with the listing: no `stat` per control file.
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    remove_when_empty(&e.path());
                }
            }
        }
        remove_when_empty(&self.dir);
    }
}

/// Removes a cgroup directory, waiting briefly for killed processes to leave it; returns whether it is gone.
fn remove_when_empty(dir: &Path) -> bool {
    for _ in 0..200 {
        match fs::remove_dir(dir) {
            Ok(()) => return true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return true,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    }
    tracing::warn!(dir = %dir.display(), "could not remove cgroup (still populated)");
    false
}

/// One command's cgroup.
#[derive(Debug)]
pub(crate) struct Cgroup {
    dir: PathBuf,
    /// The end of this cgroup's path as `/proc/<pid>/cgroup` shows it (`/shellward-…/p7`): names are unique per
    /// executor, so a process whose cgroup path ends so is in this cgroup.
    suffix: String,
    procs: CString,
    state: Mutex<State>,
    /// The executor's free list, where the cgroup goes when it is released empty.
    home: Weak<Mutex<Free>>,
}

#[derive(Debug, Default)]
struct State {
    /// `cgroup.events`, held open while someone waits for the command to end (see [`Cgroup::hold_events`]).
    events: Option<fs::File>,
    /// The tree is done with the cgroup (reused by another command, or removed): this handle sees it empty.
    released: bool,
    /// `cgroup.kill` was written: the cgroup is removed, never reused. The kernel (seen on 6.18) SIGKILLs a process
    /// created with `CLONE_INTO_CGROUP` in a cgroup that was killed before, from `cgroup_post_fork`, so a command
    /// started in it would die at once (`trust::a_killed_trees_cgroup_is_never_reused`).
    killed: bool,
}

/// Reads a small kernfs file (`cgroup.events`) with one `read` at offset 0: no size query, no second read.
fn read_small(file: &fs::File) -> io::Result<([u8; 256], usize)> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 256];
    let n = file.read_at(&mut buf, 0)?;
    Ok((buf, n))
}

fn says_populated(buf: &[u8]) -> bool {
    buf.split(|&b| b == b'\n').any(|l| l == b"populated 1")
}

impl Cgroup {
    /// The cgroup directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of `cgroup.procs`, for the child to join between fork and exec (portable spawn path).
    pub(crate) fn procs_path(&self) -> &CString {
        &self.procs
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The pids currently in the cgroup (none once it is released).
    pub(crate) fn pids(&self) -> Vec<i32> {
        if self.state().released {
            return Vec::new();
        }
        self.read_pids()
    }

    fn read_pids(&self) -> Vec<i32> {
        fs::read_to_string(self.dir.join("cgroup.procs"))
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Whether `pid` is in this cgroup now (read from `/proc/<pid>/cgroup`), and the cgroup is still this tree's.
    ///
    /// The release is checked after the membership: a process seen inside before the release was this tree's (the
    /// cgroup was not handed to another command before it was empty and released).
    pub(crate) fn contains(&self, pid: i32) -> bool {
        super::procfs::cgroup_v2(pid).is_some_and(|p| p.ends_with(&self.suffix))
            && !self.state().released
    }

    /// Whether any process is in the cgroup (never, once it is released).
    pub(crate) fn populated(&self) -> bool {
        let state = self.state();
        if state.released {
            return false;
        }
        Self::read_populated(&self.dir, &state).unwrap_or_else(|_| !self.read_pids().is_empty())
    }

    fn read_populated(dir: &Path, state: &State) -> io::Result<bool> {
        let (buf, n) = match state.events.as_ref() {
            Some(f) => read_small(f)?,
            None => read_small(&fs::File::open(dir.join("cgroup.events"))?)?,
        };
        Ok(says_populated(&buf[..n]))
    }

    /// Opens `cgroup.events` and keeps it open until [`Cgroup::release_events`], so the end-of-run check is a
    /// single `pread`. Called while the command runs (the open overlaps its run instead of following its exit);
    /// released when nobody waits any more, so background processes hold no extra descriptor.
    pub(crate) fn hold_events(&self) {
        let mut state = self.state();
        if state.events.is_none() && !state.released {
            state.events = fs::File::open(self.dir.join("cgroup.events")).ok();
        }
    }

    /// Closes what [`Cgroup::hold_events`] opened.
    pub(crate) fn release_events(&self) {
        self.state().events.take();
    }

    /// SIGKILLs every process in the cgroup. A released cgroup is empty: nothing is sent (the lock is held across
    /// the write, so the cgroup cannot be handed to another command in between).
    pub(crate) fn kill(&self) -> io::Result<()> {
        let mut state = self.state();
        if state.released {
            return Ok(());
        }
        state.killed = true;
        fs::write(self.dir.join("cgroup.kill"), "1")
    }

    /// Releases the cgroup, waiting briefly for dying processes to leave it (for shutdown paths).
    pub(crate) fn remove(&self) {
        if !self.try_release() && remove_when_empty(&self.dir) {
            self.state().released = true;
        }
    }

    /// Tries once to release the cgroup: back to the free list when it is empty (and the list has room), removed
    /// otherwise. Returns whether it is released; fails while a process is in it.
    pub(crate) fn try_release(&self) -> bool {
        let mut state = self.state();
        if state.released {
            return true;
        }
        let populated = Self::read_populated(&self.dir, &state);
        if matches!(populated, Ok(true)) {
            // Still in use (a dying member): retried later. An `rmdir` now could win the race with the last
            // member's exit and remove a cgroup that was about to be reusable.
            return false;
        }
        if let Some(home) = self.home.upgrade()
            && !state.killed
            && populated.is_ok()
        {
            let mut free = home.lock().unwrap_or_else(|p| p.into_inner());
            if !free.off && free.cgroups.len() < FREE_CGROUPS {
                state.released = true;
                state.events = None;
                free.cgroups.push(Spare {
                    dir: self.dir.clone(),
                    suffix: self.suffix.clone(),
                    procs: self.procs.clone(),
                });
                return true;
            }
        }
        let gone = match fs::remove_dir(&self.dir) {
            Ok(()) => true,
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        };
        if gone {
            state.released = true;
            state.events = None;
        }
        gone
    }
}

/// Writes the calling process's pid to `procs` using only async-signal-safe calls (for use between fork and exec).
pub(crate) fn join_from_child(procs: &CString) -> io::Result<()> {
    // SAFETY: plain syscalls on a valid NUL-terminated path and a stack buffer.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = [0u8; 20];
        let mut n = libc::getpid() as u64;
        let mut i = buf.len();
        loop {
            i -= 1;
            buf[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let len = buf.len() - i;
        let w = libc::write(fd, buf[i..].as_ptr().cast(), len);
        let err = io::Error::last_os_error();
        libc::close(fd);
        if w != len as isize {
            return Err(err);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape(r"/sys/fs/cgroup\040x"), "/sys/fs/cgroup x");
        assert_eq!(unescape("/plain"), "/plain");
    }

    /// An executor killed before its watchdog started left its parent cgroup behind: the next executor's root removes
    /// it (with its empty command cgroups), and leaves a live executor's alone.
    #[test]
    fn a_new_root_removes_the_roots_of_dead_executors() {
        let Some(base) = discover() else {
            eprintln!("no cgroup v2 hierarchy here; nothing to test");
            return;
        };
        let ns = super::super::stale::pid_namespace_id();
        // A pid above any pid_max: no such process.
        let dead = base.join(format!("shellward-{ns}-{}-7", i32::MAX - 1));
        let live = base.join(format!("shellward-{ns}-{}-9999", std::process::id()));
        if fs::create_dir_all(dead.join("p1")).is_err() {
            eprintln!("cgroup v2 hierarchy not writable here; nothing to test");
            return;
        }
        fs::create_dir(&live).unwrap();
        let root = CgroupRoot::create(&base);
        let (dead_left, live_left) = (dead.exists(), live.exists());
        let _ = fs::remove_dir(&live);
        let _ = fs::remove_dir(dead.join("p1"));
        let _ = fs::remove_dir(&dead);
        if let Ok(root) = root {
            root.kill_all_and_remove();
        }
        assert!(!dead_left, "the dead executor's root is removed");
        assert!(live_left, "a live executor's root stays");
    }
}
