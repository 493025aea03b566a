//! Per-command resource limits: the number of processes of a tree (a cgroup v1 `pids` group per command) and the
//! resource limits (`RLIMIT_*`) set in the leader before exec and inherited by the whole tree.
//!
//! The process count is what stops a fork bomb written in any language. It needs a `pids` controller: on a hybrid
//! hierarchy (this project's CI machine) the v1 `pids` hierarchy is used — found in `/proc/self/mountinfo`, never a
//! fixed path — with one directory per executor (`shellward-<token>`) and one per command below it, which the
//! leader joins before exec, so every process of the tree is counted from its first fork. Where no `pids`
//! hierarchy is writable the count is not limited (the executor logs it and [`crate::Executor::limits`] says so);
//! `RLIMIT_NPROC` is no substitute: it counts every process of the user and does not bind root.

use super::stale;
use crate::config::ResourceLimits;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

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
pub(crate) fn own_pids_dir() -> Option<PathBuf> {
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
///
/// Groups are reused: a command's group that is empty when its tree is released (`pids.current` is 0: no process
/// of the tree is left, none can fork into it) goes back to a free list of up to [`FREE_GROUPS`], and the next
/// command takes it instead of a new one. Making a group and removing it again costs the kernel about 130 µs of CPU
/// here (the `mkdir`, the limit written, the `rmdir` and the controller's offlining after it), a tenth of a short
/// command's whole execute. `pids.events` counts refused forks over the group's whole life, so a reused group
/// remembers the count it was handed out with and reports a hit only above it.
///
/// When the free list is empty one group is kept ready (`s-N`, limit already written), made on the spawner thread
/// after a start. A command's group keeps whatever name it was made with: only its directory is used, never its
/// name.
#[derive(Debug)]
pub(crate) struct PidsRoot {
    dir: PathBuf,
    spare: Arc<Mutex<PidsSpare>>,
}

/// How many empty groups an executor keeps for reuse (more are removed): enough for the commands a busy server runs
/// at once, each a directory of a few kilobytes of kernel memory.
pub(crate) const FREE_GROUPS: usize = 32;

#[derive(Debug, Default)]
struct PidsSpare {
    /// A ready group, its `tasks` and the limit written to it.
    ready: Option<(PidsGroup, File, u64)>,
    /// Empty groups released by finished trees, for reuse.
    free: Vec<FreeGroup>,
    made: u64,
    /// Set at shutdown: no more spares, nothing kept for reuse.
    off: bool,
}

/// An empty group waiting for its next command.
#[derive(Debug)]
struct FreeGroup {
    dir: PathBuf,
    /// The limit written to its `pids.max`.
    max: u64,
    /// Its `pids.events` count of refused forks when it was released.
    refused: u64,
}

impl PidsRoot {
    /// This executor's directory in the `pids` hierarchy (for the watchdog, which removes it if the executor dies).
    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Creates `shellward-<token>` in the v1 `pids` hierarchy, if there is one and it is writable.
    pub(crate) fn create(token: &str) -> io::Result<PidsRoot> {
        let base = own_pids_dir().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "no cgroup v1 `pids` hierarchy is mounted",
            )
        })?;
        let ns = stale::pid_namespace_id();
        stale::sweep(&base, &ns);
        let dir = base.join(format!("shellward-{ns}-{token}"));
        std::fs::create_dir(&dir)?;
        Ok(PidsRoot {
            dir,
            spare: Default::default(),
        })
    }

    /// Removes every command's group and this executor's directory (at shutdown, once the trees are stopped).
    pub(crate) fn remove_all(&self) {
        {
            let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
            spare.off = true;
            spare.ready = None;
            spare.free.clear();
        }
        stale::remove_tree(&self.dir);
    }

    /// Makes a group limited to `max` ready for the next command (blocking: call it off the start path).
    pub(crate) fn prepare_spare(&self, max: u64) {
        let name = {
            let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
            // A free group is the next command's: a spare would only be removed again.
            if spare.off || spare.ready.is_some() || spare.free.iter().any(|f| f.max == max) {
                return;
            }
            spare.made += 1;
            format!("s-{}", spare.made)
        };
        let Ok((group, tasks)) = self.create_group(&name, max) else {
            return;
        };
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        if spare.off || spare.ready.is_some() {
            drop(spare);
            drop(tasks);
            group.try_remove(false);
        } else {
            spare.ready = Some((group, tasks, max));
        }
    }

    /// A group for one command, limited to `max` processes, and its `tasks` file opened for the leader to join
    /// (close-on-exec; the leader writes `0` to it before exec).
    ///
    /// `tasks`, not `cgroup.procs`: the leader is a fresh single-threaded process, so moving its one thread moves
    /// the whole process, and the kernel moves the calling thread alone without taking the global
    /// `cgroup_threadgroup_rwsem` for writing. Taking that lock waits for an RCU grace period whenever no other
    /// migration happened moments before, which made a spaced-out command's spawn 8-14 ms slower here
    /// (`limits::tests::joining_by_tasks_moves_the_whole_process`, and the `executor` row of the performance bench).
    pub(crate) fn group(&self, name: &str, max: u64) -> io::Result<(PidsGroup, File)> {
        let (free, ready) = {
            let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
            let free = spare
                .free
                .iter()
                .rposition(|f| f.max == max)
                .map(|i| spare.free.swap_remove(i));
            let ready = if free.is_none() {
                spare.ready.take()
            } else {
                None
            };
            (free, ready)
        };
        if let Some(free) = free {
            // Opening `tasks` fails only if something removed the directory meanwhile: then make a new one.
            if let Ok(tasks) = File::options().write(true).open(free.dir.join("tasks")) {
                return Ok((self.handle(free.dir, max, free.refused), tasks));
            }
        }
        match ready {
            // Still there (a sweep may have removed an empty root), and for the same limit.
            Some((group, tasks, m)) if m == max && group.dir.exists() => return Ok((group, tasks)),
            Some((group, _, _)) => {
                group.try_remove(false);
            }
            None => {}
        }
        self.create_group(name, max)
    }

    /// The handle of a group limited to `max` whose `pids.events` counted `refused` when it was handed out.
    fn handle(&self, dir: PathBuf, max: u64, refused: u64) -> PidsGroup {
        PidsGroup {
            dir,
            refused_before: refused,
            max,
            home: Arc::downgrade(&self.spare),
            hit_when_released: std::sync::OnceLock::new(),
        }
    }

    fn create_group(&self, name: &str, max: u64) -> io::Result<(PidsGroup, File)> {
        let dir = self.dir.join(name);
        let created = match std::fs::create_dir(&dir) {
            // The root is recreated only when something removed it while it was empty (it holds no state of its
            // own): the usual start costs one mkdir, not three system calls.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&self.dir)?;
                std::fs::create_dir(&dir)
            }
            other => other,
        };
        match created {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let group = self.handle(dir, max, 0);
        let procs = File::options().write(true).open(group.dir.join("tasks"))?;
        File::options()
            .write(true)
            .open(group.dir.join("pids.max"))?
            .write_all(max.to_string().as_bytes())?;
        Ok((group, procs))
    }
}

impl Drop for PidsRoot {
    fn drop(&mut self) {
        stale::remove_tree(&self.dir);
    }
}

/// One command's `pids` group.
#[derive(Debug)]
pub(crate) struct PidsGroup {
    dir: PathBuf,
    /// `pids.events`' count of refused forks when the group was handed to this command (a reused group's count
    /// includes its earlier commands').
    refused_before: u64,
    /// The limit written to its `pids.max`.
    max: u64,
    /// The executor's free list, where the group goes when its tree is released empty.
    home: Weak<Mutex<PidsSpare>>,
    /// Whether the limit was hit, recorded when the group is released (reused by another command or removed).
    hit_when_released: std::sync::OnceLock<bool>,
}

impl PidsGroup {
    /// Whether the group hit its limit at least once (a fork was refused) while this command had it; still answered
    /// after the group is released (a result can be settled after the clean-up).
    pub(crate) fn limit_hit(&self) -> bool {
        match self.hit_when_released.get() {
            Some(&hit) => hit,
            None => self.refused() > self.refused_before,
        }
    }

    /// `pids.events`' count of refused forks (0 if unreadable).
    fn refused(&self) -> u64 {
        std::fs::read_to_string(self.dir.join("pids.events"))
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("max ").map(|n| n.trim().parse::<u64>().ok()))
            })
            .flatten()
            .unwrap_or(0)
    }

    /// Whether the kernel counts no process in the group (`pids.current` is 0). Only a process in the group can
    /// fork into it, so an empty group stays empty until someone joins it.
    fn empty(&self) -> bool {
        std::fs::read_to_string(self.dir.join("pids.current")).is_ok_and(|t| t.trim() == "0")
    }

    /// Releases the group: back to the executor's free list when it is empty (and the list has room), removed
    /// otherwise. Fails (and can be retried) while a process is still in it; once released, always succeeds.
    pub(crate) fn try_release(&self) -> bool {
        if self.hit_when_released.get().is_some() {
            return true;
        }
        // Read before the release: an empty group refuses no more forks, so the answer cannot change after it.
        let refused = self.refused();
        let hit = refused > self.refused_before;
        if let Some(home) = self.home.upgrade()
            && self.empty()
        {
            let mut spare = home.lock().unwrap_or_else(|p| p.into_inner());
            if !spare.off && spare.free.len() < FREE_GROUPS {
                if self.hit_when_released.set(hit).is_ok() {
                    spare.free.push(FreeGroup {
                        dir: self.dir.clone(),
                        max: self.max,
                        refused,
                    });
                }
                return true;
            }
        }
        self.try_remove(hit)
    }

    /// Removes the group (`hit` is what [`PidsGroup::limit_hit`] answers afterwards); fails while a process is in it.
    fn try_remove(&self, hit: bool) -> bool {
        match std::fs::remove_dir(&self.dir) {
            Ok(()) => {
                let _ = self.hit_when_released.set(hit);
                true
            }
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root for a test, or `None` (said on stderr) where no v1 `pids` hierarchy is writable.
    fn test_root(tag: &str) -> Option<PidsRoot> {
        PidsRoot::create(&format!("{}-{tag}", std::process::id()))
            .inspect_err(|e| eprintln!("no writable v1 pids hierarchy here ({e}); nothing to test"))
            .ok()
    }

    /// A group is the spare when one is ready for the same limit; a spare of another limit is discarded; after
    /// shutdown no spare is made.
    #[test]
    fn groups_take_the_spare_of_the_same_limit() {
        let Some(root) = test_root("spare-test") else {
            return;
        };
        root.prepare_spare(7);
        let (first, _tasks) = root.group("p1", 7).unwrap();
        assert!(first.dir.ends_with("s-1"), "{:?}", first.dir);
        assert_eq!(
            std::fs::read_to_string(first.dir.join("pids.max"))
                .unwrap()
                .trim(),
            "7"
        );
        root.prepare_spare(7);
        let (second, _) = root.group("p2", 9).unwrap();
        assert!(second.dir.ends_with("p2"), "{:?}", second.dir);
        assert!(
            !root.dir.join("s-2").exists(),
            "the spare of another limit is gone"
        );
        assert_eq!(
            std::fs::read_to_string(second.dir.join("pids.max"))
                .unwrap()
                .trim(),
            "9"
        );
        root.remove_all();
        root.prepare_spare(7);
        assert!(!root.dir.exists(), "no spare after shutdown");
    }

    /// Something (another executor's sweep, an operator) removed the empty root: the next group recreates it.
    #[test]
    fn a_removed_root_is_recreated_by_the_next_group() {
        let Some(root) = test_root("recreate-test") else {
            return;
        };
        let (first, tasks) = root.group("p1", 5).unwrap();
        drop(tasks);
        assert!(first.try_release());
        // The released group waits on the free list: something removes it and the (then empty) root.
        std::fs::remove_dir(&first.dir).unwrap();
        std::fs::remove_dir(&root.dir).unwrap();
        let (second, _tasks) = root.group("p2", 5).unwrap();
        assert!(second.dir.starts_with(&root.dir) && second.dir.is_dir());
        assert_eq!(
            std::fs::read_to_string(second.dir.join("pids.max"))
                .unwrap()
                .trim(),
            "5"
        );
        root.remove_all();
        assert!(!root.dir.exists());
    }

    /// Starts `script` inside the group behind `tasks` (the leader joins before exec).
    fn run_in(tasks: &File, script: &str) -> std::process::Child {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let fd = tasks.as_raw_fd();
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", script])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // SAFETY: a write of a static buffer to a descriptor opened before the fork.
        unsafe {
            cmd.pre_exec(move || {
                if libc::write(fd, c"0".as_ptr().cast(), 1) != 1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.spawn().unwrap()
    }

    /// Releases `group` once the kernel no longer counts exited members (until then it would be removed, not kept).
    fn release(group: &PidsGroup) -> bool {
        (0..100).any(|_| {
            (group.empty() && group.try_release()) || {
                std::thread::sleep(std::time::Duration::from_millis(10));
                false
            }
        })
    }

    /// An empty group goes back to the free list and the next command gets it, counting only its own refused
    /// forks; a group a process is still in is neither released nor handed out.
    #[test]
    fn empty_groups_are_reused_and_count_only_their_own_commands_refusals() {
        let Some(root) = test_root("reuse-test") else {
            return;
        };
        // With a limit of 1 the shell's first fork is refused and it exits: no orphan outlives the leader (the test
        // process may be a subreaper that reaps nobody).
        let (first, tasks) = root.group("p1", 1).unwrap();
        let mut c = run_in(&tasks, "/bin/true; /bin/true");
        c.wait().unwrap();
        drop(tasks);
        assert!(first.limit_hit());
        assert!(release(&first), "the group empties when the tree ends");
        assert!(first.limit_hit(), "answered after the release too");
        let (second, tasks) = root.group("p2", 1).unwrap();
        assert_eq!(second.dir, first.dir, "the free group is reused");
        assert!(
            !second.limit_hit(),
            "the earlier command's refusals are not the new one's"
        );
        let mut c = run_in(&tasks, "exec sleep 0.2");
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!second.try_release(), "a process is still in it");
        let (third, _) = root.group("p3", 1).unwrap();
        assert_ne!(third.dir, second.dir, "a group in use is not handed out");
        c.wait().unwrap();
        drop(tasks);
        assert!(!second.limit_hit());
        assert!(release(&second));
        root.remove_all();
        assert!(!root.dir.exists(), "free groups are removed with the root");
    }

    /// A leader that joins through `tasks` moves as a whole process: it, and everything it forks afterwards, is in
    /// the group and counted against the group's limit.
    #[test]
    fn joining_by_tasks_moves_the_whole_process() {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let Some(root) = test_root("tasks-test") else {
            return;
        };
        let (group, join) = root.group("p1", 3).unwrap();
        let fd = join.as_raw_fd();
        let mut cmd = std::process::Command::new("sh");
        // The leader and a child it forks report their cgroups; a fourth process would exceed the limit of 3.
        cmd.args([
            "-c",
            "grep pids /proc/$$/cgroup; sh -c 'grep pids /proc/self/cgroup'; \
             sleep 0.2 & sleep 0.2 & sleep 0.2 & wait; echo done",
        ]);
        // SAFETY: a write of a static buffer to a descriptor opened before the fork.
        unsafe {
            cmd.pre_exec(move || {
                if libc::write(fd, c"0".as_ptr().cast(), 1) != 1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stdout.lines().collect();
        assert!(lines.len() >= 2, "stdout {stdout:?}, stderr {stderr:?}");
        for l in &lines[..2] {
            assert!(
                l.ends_with("/p1"),
                "leader and child in the command's group: {l:?}"
            );
        }
        assert!(
            group.limit_hit(),
            "the third sleep exceeds the limit: {stderr}"
        );
        drop(join);
        // The kernel releases exited members shortly after they are reaped.
        let removed = (0..100).any(|_| {
            group.try_release() || {
                std::thread::sleep(std::time::Duration::from_millis(10));
                false
            }
        });
        assert!(removed, "the group empties when the tree ends");
        assert!(!group.dir.exists());
        assert!(
            group.limit_hit(),
            "the hit is remembered once the group and its pids.events are gone"
        );
    }
}
