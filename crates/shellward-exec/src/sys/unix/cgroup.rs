//! cgroup v2 containment: one cgroup per command tree under a per-executor parent, killed with `cgroup.kill`.
//!
//! The hierarchy is discovered from `/proc/self/mountinfo` (the `cgroup2` mount) and `/proc/self/cgroup` (the `0::`
//! line with this process's cgroup), never assumed. The executor creates `shellward-<pid>-<n>` below its
//! own cgroup, and one child `p<id>` per command. A command starts inside its cgroup (`clone3` with
//! `CLONE_INTO_CGROUP`, see `fast_spawn`; on the portable path it joins between fork and exec), so everything it forks
//! afterwards — including processes that leave the process group with `setsid` or double-fork —
//! stays inside and dies with `cgroup.kill`.

use std::ffi::CString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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
fn unescape(s: &str) -> String {
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
}

static ROOT_SEQ: AtomicU64 = AtomicU64::new(0);

impl CgroupRoot {
    /// Creates the executor's parent cgroup below `base` and checks `cgroup.kill` is available.
    pub(crate) fn create(base: &Path) -> io::Result<CgroupRoot> {
        let n = ROOT_SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("shellward-{}-{n}", std::process::id()));
        fs::create_dir(&dir)?;
        if !dir.join("cgroup.kill").exists() {
            let _ = fs::remove_dir(&dir);
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "cgroup.kill is not available (kernel < 5.14)",
            ));
        }
        Ok(CgroupRoot { dir })
    }

    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates the cgroup for one command.
    pub(crate) fn child(&self, name: &str) -> io::Result<Cgroup> {
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
            events: std::sync::Mutex::new(None),
        })
    }

    /// Kills everything in every command cgroup and removes them all (best effort, synchronous).
    pub(crate) fn kill_all_and_remove(&self) {
        let _ = fs::write(self.dir.join("cgroup.kill"), "1");
        if let Ok(entries) = fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                if e.path().is_dir() {
                    remove_when_empty(&e.path());
                }
            }
        }
        remove_when_empty(&self.dir);
    }
}

/// Removes a cgroup directory, waiting briefly for killed processes to leave it.
fn remove_when_empty(dir: &Path) {
    for _ in 0..200 {
        match fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    }
    tracing::warn!(dir = %dir.display(), "could not remove cgroup (still populated)");
}

/// One command's cgroup.
#[derive(Debug)]
pub(crate) struct Cgroup {
    dir: PathBuf,
    /// The end of this cgroup's path as `/proc/<pid>/cgroup` shows it (`/shellward-…/p7`): names are unique per
    /// executor, so a process whose cgroup path ends so is in this cgroup.
    suffix: String,
    procs: CString,
    /// `cgroup.events`, held open while someone waits for the command to end (see [`Cgroup::hold_events`]).
    events: std::sync::Mutex<Option<fs::File>>,
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

    /// The pids currently in the cgroup.
    pub(crate) fn pids(&self) -> Vec<i32> {
        fs::read_to_string(self.dir.join("cgroup.procs"))
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Whether `pid` is in this cgroup now (read from `/proc/<pid>/cgroup`).
    pub(crate) fn contains(&self, pid: i32) -> bool {
        super::procfs::cgroup_v2(pid).is_some_and(|p| p.ends_with(&self.suffix))
    }

    /// Whether any process is in the cgroup.
    pub(crate) fn populated(&self) -> bool {
        let held = self.events.lock().unwrap_or_else(|p| p.into_inner());
        let read = match held.as_ref() {
            Some(f) => read_small(f),
            None => fs::File::open(self.dir.join("cgroup.events")).and_then(|f| read_small(&f)),
        };
        match read {
            Ok((buf, n)) => says_populated(&buf[..n]),
            Err(_) => !self.pids().is_empty(),
        }
    }

    /// Opens `cgroup.events` and keeps it open until [`Cgroup::release_events`], so the end-of-run check is a
    /// single `pread`. Called while the command runs (the open overlaps its run instead of following its exit);
    /// released when nobody waits any more, so background processes hold no extra descriptor.
    pub(crate) fn hold_events(&self) {
        let mut held = self.events.lock().unwrap_or_else(|p| p.into_inner());
        if held.is_none() {
            *held = fs::File::open(self.dir.join("cgroup.events")).ok();
        }
    }

    /// Closes what [`Cgroup::hold_events`] opened.
    pub(crate) fn release_events(&self) {
        self.events.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// SIGKILLs every process in the cgroup.
    pub(crate) fn kill(&self) -> io::Result<()> {
        fs::write(self.dir.join("cgroup.kill"), "1")
    }

    /// Removes the cgroup (it must be empty; waits briefly for dying processes).
    pub(crate) fn remove(&self) {
        remove_when_empty(&self.dir);
    }

    /// Tries once to remove the cgroup; returns whether it is gone.
    pub(crate) fn try_remove(&self) -> bool {
        match fs::remove_dir(&self.dir) {
            Ok(()) => true,
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        }
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
}
