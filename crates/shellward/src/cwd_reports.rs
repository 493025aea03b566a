//! The private directory through which foreground commands report their last working directory (see
//! [`crate::shape::cwd_trap`]): one per instance under the temporary directory, marked in use by a lock the instance
//! holds for its whole life, and the sweep that removes the directories of instances that were killed before their
//! shutdown could remove their own (a `SIGKILL`ed server, a crashed host).
//!
//! The mark is an exclusive `flock` on `.owner` inside the directory. The kernel drops it when its holder dies, however
//! it dies, so a sweeper that can take the lock knows the owner is gone: pids are not used (they wrap). A directory is
//! swept only when it is owned by this user, is a real directory (never a link), is not this instance's, and has not
//! changed for [`YOUNG`] (so one made a moment ago, before its lock, is left alone). A directory without `.owner`,
//! left by a shellward from before the mark, is swept only when empty and unchanged for [`UNMARKED_AGE`].

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The name every such directory starts with (`tempfile` adds a random suffix).
pub(crate) const PREFIX: &str = ".shellward-cwd-";
/// The lock file inside one.
const OWNER: &str = ".owner";
/// A directory changed more recently than this is never swept: it may be between its creation and its lock.
const YOUNG: Duration = Duration::from_secs(10);
/// An unmarked directory is swept only when empty and unchanged for this long (its owner, if one still runs, has
/// started no command for a day; its next command then runs without the report, as when the directory is missing).
const UNMARKED_AGE: Duration = Duration::from_secs(24 * 3600);
/// Most entries of the temporary directory one sweep looks at (a bound on a huge `/tmp`).
const MAX_ENTRIES: usize = 100_000;

/// One instance's report directory and the lock that marks it in use.
pub(crate) struct CwdReports {
    dir: tempfile::TempDir,
    /// Held (locked) until [`CwdReports::remove`], the instance's drop, or the end of its process.
    owner: std::sync::Mutex<Option<File>>,
}

impl CwdReports {
    /// Makes a fresh report directory under `temp` (owner-only) and marks it in use.
    pub(crate) fn create_in(temp: &Path) -> io::Result<CwdReports> {
        let dir = tempfile::Builder::new().prefix(PREFIX).tempdir_in(temp)?;
        let owner = File::options()
            .write(true)
            .create_new(true)
            .open(dir.path().join(OWNER))?;
        // A new file nobody else has opened: the lock is granted at once.
        owner.lock()?;
        Ok(CwdReports {
            dir,
            owner: std::sync::Mutex::new(Some(owner)),
        })
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Removes the directory now (the instance is shutting down; nothing runs any more that could write there). A
    /// later drop finds it gone and says nothing.
    pub(crate) fn remove(&self) {
        // Closed first: a file still open keeps its directory from being removed on Windows.
        drop(self.owner.lock().unwrap_or_else(|p| p.into_inner()).take());
        let _ = std::fs::remove_dir_all(self.dir.path());
    }
}

/// Removes the report directories under `temp` whose instances are gone (see the module's documentation), never
/// `own`; returns those removed. Errors on one entry skip it: the sweep is housekeeping and never fails a start.
pub(crate) fn sweep(temp: &Path, own: Option<&Path>) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(temp) else {
        return removed;
    };
    let now = SystemTime::now();
    for entry in entries.take(MAX_ENTRIES).flatten() {
        if !entry.file_name().to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let path = entry.path();
        if own == Some(path.as_path()) {
            continue;
        }
        if is_stale(&path, now) && std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// Whether `dir` is a report directory of this user whose owner is gone.
fn is_stale(dir: &Path, now: SystemTime) -> bool {
    // Not followed: a link with the prefix is never a report directory.
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return false;
    };
    if !meta.is_dir() || !crate::sys::owned_by_this_user(&meta) {
        return false;
    }
    let unchanged_for = |meta: &std::fs::Metadata| {
        meta.modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .unwrap_or(Duration::ZERO)
    };
    if unchanged_for(&meta) < YOUNG {
        return false;
    }
    match crate::sys::open_regular(&dir.join(OWNER)) {
        // Taken: its owner is alive. Granted: nobody holds it any more (released when this file closes).
        Ok(owner) => owner.try_lock().is_ok(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            unchanged_for(&meta) >= UNMARKED_AGE
                && std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
        }
        Err(_) => false,
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// Makes `path` look unchanged for `age`.
    fn age(path: &Path, age: Duration) {
        File::open(path)
            .unwrap()
            .set_modified(SystemTime::now() - age)
            .unwrap();
    }

    /// What an instance killed under `temp` leaves: its directory, `.owner` there and unlocked (the kernel dropped
    /// the lock), unchanged for `unchanged`.
    fn left_by_a_killed_instance(temp: &Path, unchanged: Duration) -> PathBuf {
        let CwdReports { dir, owner } = CwdReports::create_in(temp).unwrap();
        // Kept as a killed process keeps it: dropping the TempDir would remove it.
        let path = dir.keep();
        drop(owner);
        age(&path, unchanged);
        path
    }

    #[test]
    fn the_sweep_removes_only_directories_whose_owner_is_gone() {
        let temp = tempfile::tempdir().unwrap();
        let minute = Duration::from_secs(60);
        let dead = left_by_a_killed_instance(temp.path(), minute);
        std::fs::write(dead.join(".shellward-cwd-1-0-0"), "/\n").unwrap();
        age(&dead, minute);
        // A live instance's (this process holds its lock), as old.
        let live = CwdReports::create_in(temp.path()).unwrap();
        age(live.path(), minute);
        // Dead but changed a moment ago: may be one being made, left alone.
        let young = left_by_a_killed_instance(temp.path(), Duration::ZERO);
        // Unmarked (from before the lock): swept when empty and a day old, not otherwise.
        let unmarked = |name: &str, days: u64, file: bool| {
            let path = temp.path().join(format!("{PREFIX}{name}"));
            std::fs::create_dir(&path).unwrap();
            if file {
                std::fs::write(path.join("x"), "").unwrap();
            }
            age(&path, Duration::from_secs(days * 24 * 3600 + 60));
            path
        };
        let old_empty = unmarked("oldempty", 2, false);
        let old_full = unmarked("oldfull", 2, true);
        let recent_empty = unmarked("recent", 0, false);
        // A link with the prefix, to a dead instance's directory elsewhere: neither it nor its target is touched.
        let elsewhere = tempfile::tempdir().unwrap();
        let target = left_by_a_killed_instance(elsewhere.path(), minute);
        let link = temp.path().join(format!("{PREFIX}link"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // Not a report directory at all.
        let other = temp.path().join("shellward-other");
        std::fs::create_dir(&other).unwrap();
        age(&other, minute * 60 * 48);

        let mut removed = sweep(temp.path(), Some(live.path()));
        removed.sort();
        let mut expected = vec![dead.clone(), old_empty.clone()];
        expected.sort();
        assert_eq!(removed, expected);
        for kept in [
            live.path(),
            &young,
            &old_full,
            &recent_empty,
            &link,
            &target,
            &other,
        ] {
            assert!(
                std::fs::symlink_metadata(kept).is_ok(),
                "{} was removed",
                kept.display()
            );
        }
        // This instance's own directory is skipped even when its lock could be taken.
        let own = left_by_a_killed_instance(temp.path(), minute);
        assert!(!sweep(temp.path(), Some(&own)).contains(&own));
        assert!(own.is_dir());
        // Its shutdown removes it (the lock closed first).
        live.remove();
        assert!(!live.path().exists());
    }
}
