//! Per-command resource limits: the number of processes of a tree (a cgroup v1 `pids` group per command) and the
//! resource limits (`RLIMIT_*`) set in the leader before exec and inherited by the whole tree.
//!
//! The process count is what stops a fork bomb written in any language. It needs a `pids` controller: on a hybrid
//! hierarchy (this project's CI machine) the v1 `pids` hierarchy is used — found in `/proc/self/mountinfo`, never a
//! fixed path — with one directory per executor (`shellward-<token>`) and one per command below it, which the
//! leader joins before exec, so every process of the tree is counted from its first fork. Where no `pids`
//! hierarchy is writable the count is not limited (the executor logs it and [`crate::Executor::limits`] says so);
//! `RLIMIT_NPROC` is no substitute: it counts every process of the user and does not bind root.

use crate::config::ResourceLimits;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The `RLIMIT_*` settings of a config, as `(resource, value)` pairs for the spawn path.
// The resource constants are `u32` on glibc and `c_int` on musl: the casts are needed on one of them.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn rlimits(limits: &ResourceLimits) -> Vec<(u32, u64)> {
    let mut out = vec![(libc::RLIMIT_CORE as u32, 0)];
    if let Some(v) = limits.address_space_bytes {
        out.push((libc::RLIMIT_AS as u32, v));
    }
    if let Some(v) = limits.file_size_bytes {
        out.push((libc::RLIMIT_FSIZE as u32, v));
    }
    if let Some(v) = limits.cpu_seconds {
        out.push((libc::RLIMIT_CPU as u32, v));
    }
    out
}

/// The v1 `pids` hierarchy's directory for this process's own cgroup, from `/proc/self/mountinfo` and
/// `/proc/self/cgroup`.
fn discover_v1() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (mount_root, mount_point) = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut r = right.split(' ');
        let fstype = r.next()?;
        let _source = r.next()?;
        let options = r.next()?;
        if fstype != "cgroup" || !options.split(',').any(|o| o == "pids") {
            return None;
        }
        let f: Vec<&str> = left.split(' ').collect();
        Some((f.get(3)?.to_string(), f.get(4)?.to_string()))
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let _id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        controllers
            .split(',')
            .any(|c| c == "pids")
            .then(|| path.to_string())
    })?;
    let relative = path
        .strip_prefix(mount_root.as_str())
        .unwrap_or(&path)
        .trim_start_matches('/');
    Some(Path::new(&mount_point).join(relative))
}

/// This executor's directory in the `pids` hierarchy; removed when dropped.
#[derive(Debug)]
pub(crate) struct PidsRoot {
    dir: PathBuf,
}

impl PidsRoot {
    /// Creates `shellward-<token>` in the v1 `pids` hierarchy, if there is one and it is writable.
    pub(crate) fn create(token: &str) -> io::Result<PidsRoot> {
        let base = discover_v1().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "no cgroup v1 `pids` hierarchy is mounted",
            )
        })?;
        let ns = pid_namespace_id();
        sweep(&base, &ns);
        let dir = base.join(format!("shellward-{ns}-{token}"));
        std::fs::create_dir(&dir)?;
        Ok(PidsRoot { dir })
    }

    /// Removes every command's group and this executor's directory (at shutdown, once the trees are stopped).
    pub(crate) fn remove_all(&self) {
        remove_tree(&self.dir);
    }

    /// A group for one command, limited to `max` processes, and its `cgroup.procs` opened for the leader to join
    /// (close-on-exec; the leader writes `0` to it before exec).
    pub(crate) fn group(&self, name: &str, max: u64) -> io::Result<(PidsGroup, File)> {
        // Recreated if something removed it while it was empty (it holds no state of its own).
        std::fs::create_dir_all(&self.dir)?;
        let dir = self.dir.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let group = PidsGroup { dir };
        let procs = File::options()
            .write(true)
            .open(group.dir.join("cgroup.procs"))?;
        File::options()
            .write(true)
            .open(group.dir.join("pids.max"))?
            .write_all(max.to_string().as_bytes())?;
        Ok((group, procs))
    }
}

impl Drop for PidsRoot {
    fn drop(&mut self) {
        remove_tree(&self.dir);
    }
}

/// Removes a group directory and its (empty) command groups; a group still holding a process stays.
fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir(e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// This process's PID namespace (the inode of `/proc/self/ns/pid`): a pid means something only within it.
fn pid_namespace_id() -> String {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|l| {
            let l = l.to_string_lossy().into_owned();
            l.strip_prefix("pid:[")
                .and_then(|r| r.strip_suffix(']'))
                .map(str::to_string)
        })
        .unwrap_or_else(|| "0".into())
}

/// Removes what executors that died left in the hierarchy: `shellward-NS-PID-…` directories of this PID namespace
/// whose process is gone. Directories of other namespaces (whose pids mean nothing here), of live executors, or of a
/// pid reused meanwhile are left alone; a group still holding a process cannot be removed anyway.
fn sweep(base: &Path, ns: &str) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("shellward-")) else {
            continue;
        };
        let mut parts = rest.split('-');
        let (Some(dir_ns), Some(pid)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(pid) = pid.parse::<i32>() else {
            continue;
        };
        if dir_ns != ns {
            continue;
        }
        // SAFETY: signal 0 only checks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            remove_tree(&e.path());
        }
    }
}
/// One command's `pids` group.
#[derive(Debug)]
pub(crate) struct PidsGroup {
    dir: PathBuf,
}

impl PidsGroup {
    /// Whether the group hit its limit at least once (a fork was refused).
    pub(crate) fn limit_hit(&self) -> bool {
        std::fs::read_to_string(self.dir.join("pids.events"))
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("max ").map(|n| n.trim().parse::<u64>().ok()))
            })
            .flatten()
            .is_some_and(|n| n > 0)
    }

    /// Removes the group; fails (and can be retried) while a process is still in it.
    pub(crate) fn try_remove(&self) -> bool {
        match std::fs::remove_dir(&self.dir) {
            Ok(()) => true,
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_removes_only_dead_executors_of_this_pid_namespace() {
        let base = tempfile::tempdir().unwrap();
        let ns = pid_namespace_id();
        // A pid above any pid_max: no such process.
        let dead = i32::MAX - 1;
        let ours = std::process::id();
        let names = [
            format!("shellward-{ns}-{dead}-1"),
            format!("shellward-{ns}-{ours}-2"),
            // Another namespace's pid means nothing here, dead-looking or not.
            format!("shellward-4026531999-{dead}-3"),
            // The old format carries no namespace: left alone.
            format!("shellward-{dead}-4"),
        ];
        for n in &names {
            std::fs::create_dir_all(base.path().join(n).join("p1")).unwrap();
        }
        sweep(base.path(), &ns);
        let left: Vec<bool> = names.iter().map(|n| base.path().join(n).exists()).collect();
        assert_eq!(left, [false, true, true, true]);
    }
}
