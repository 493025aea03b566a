//! The executor's private log directory: unpredictable name, owner-only, locked while the executor lives, and swept
//! when an executor died without removing it. [`PrivateDir`] is the same for a host's own files (made in the log
//! directories' parent, swept with the log directories).
//!
//! Every executor of a user keeps its log directory in one per-user root under the configured parent,
//! `.shellward-logs-<uid>` (0700, this user's, never a link: anything else there is refused), and its logs in one
//! directory per session inside it ([`LogDir::session_dir`], a name keyed by a per-executor random hash). A session's
//! sandbox covers the root and sees only its own session's directory (`sys::linux::host_mounts`), so no command reads
//! another session's output, nor another shellward instance's, even one started later.
//!
//! What commands print is often secret, so the directory is created with an unpredictable name (`shellward-` and
//! 16 random letters and digits; creation fails rather than reuse anything already there), mode 0700, and holds a
//! `lock` file locked (`flock`) for the executor's whole life. Log files are created `O_EXCL | O_NOFOLLOW`, mode
//! 0600 (see [`crate::output`]).
//!
//! A directory is made under a staging name (`.shellward-new-…`), its `lock` created and locked inside, and only then
//! renamed (never over anything) to its `shellward-…` name. So every `shellward-*` directory's lock was taken before
//! the directory had that name, and a lock that can be taken means its executor is gone (the kernel drops a dead
//! process's locks).
//!
//! At start, the parent directory is swept: a `shellward-*` directory owned by this user whose `lock` can be locked is
//! removed at once. A staging directory is removed only once it has not changed for [`SETTLING`] and its lock (if it
//! has one yet) is free: its executor died while making it. Directories of the old `shellward-<pid>-<n>` form (which
//! had no lock) are removed when process `<pid>` is gone.

use crate::sys::files;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

const PREFIX: &str = "shellward-";
/// The per-user root every executor's log directory is made in: this and the user's tag (its uid).
const ROOT_PREFIX: &str = ".shellward-logs-";
/// The name a directory has until its lock is taken; the sweep leaves it alone while it is new.
const STAGING: &str = ".shellward-new-";
const LOCK: &str = "lock";

/// A live log directory; removed by [`LogDir::remove`].
#[derive(Debug)]
pub(crate) struct LogDir {
    path: PathBuf,
    /// Held (and locked) while the executor lives; released by [`LogDir::remove`].
    lock: std::sync::Mutex<Option<File>>,
    /// Keys the session directories' names (random per directory, so a name says nothing of its session).
    sessions: std::hash::RandomState,
    /// The configured parent (the log root's parent), where private directories go.
    parent: PathBuf,
}

impl LogDir {
    /// Where a log directory goes when the configuration names no parent.
    pub(crate) fn default_parent() -> PathBuf {
        match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(d) if !d.is_empty() && Path::new(&d).is_dir() => PathBuf::from(d),
            _ => std::env::temp_dir(),
        }
    }

    /// Sweeps stale directories under `parent`, then creates a new private one there.
    pub(crate) fn create(parent: &Path) -> io::Result<LogDir> {
        let meta = fs::metadata(parent).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "the log directory's parent {} cannot be used ({e}); create it or configure another log_dir",
                    parent.display()
                ),
            )
        })?;
        if !meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!(
                    "the log directory's parent {} is not a directory; configure another log_dir",
                    parent.display()
                ),
            ));
        }
        let root = user_root(parent)?;
        // The root holds the log directories; the parent the private directories beside them (and log directories
        // of the layout before the root).
        let removed = sweep_stale(&root) + sweep_stale(parent);
        if removed > 0 {
            tracing::info!(parent = %parent.display(), removed, "removed log directories of executors that are gone");
        }
        // Another executor's `remove` takes the root away when it leaves it empty: made again if that happened
        // between the two steps.
        let mut made = Self::make(&root);
        for _ in 0..3 {
            match &made {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    made = Self::make(&user_root(parent)?)
                }
                _ => break,
            }
        }
        let mut dir = made?;
        dir.parent = parent.to_path_buf();
        Ok(dir)
    }

    /// The configured parent: the log root's for a log directory, the directory itself's for a private one.
    pub(crate) fn parent(&self) -> &Path {
        &self.parent
    }

    /// The directory of `session`'s logs (`s-` and a keyed hash of the name), made (0700) at its first use.
    pub(crate) fn session_dir(&self, session: Option<&str>) -> io::Result<PathBuf> {
        use std::hash::BuildHasher;
        let dir = self
            .path
            .join(format!("s-{:016x}", self.sessions.hash_one(session)));
        if dir.is_dir() {
            return Ok(dir);
        }
        let made = files::create_private_dir(&dir).or_else(ignore_existing);
        // The skeleton a sandbox covers the log root with (`sys::linux::host_mounts`): empty directories only.
        let made = made.and_then(|()| match crate::sys::log_skeleton(&dir) {
            Some((view, inner)) => files::create_private_dir(&view)
                .or_else(ignore_existing)
                .and_then(|()| fs::create_dir_all(&inner)),
            None => Ok(()),
        });
        made.map(|()| dir.clone()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot create the session's log directory {}: {e}",
                    dir.display()
                ),
            )
        })
    }

    /// Creates a new private directory under `parent` (staging name, lock, rename), without a sweep.
    fn make(parent: &Path) -> io::Result<LogDir> {
        let mut last = None;
        for _ in 0..16 {
            let name = random_name(16)?;
            let staging = parent.join(format!("{STAGING}{name}"));
            match files::create_private_dir(&staging) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    last = Some(e);
                    continue;
                }
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "cannot create a log directory in {}: {e}; make it writable or configure another log_dir",
                            parent.display()
                        ),
                    ));
                }
            }
            let lock = match lock_new(&staging) {
                Ok(lock) => lock,
                Err(e) => {
                    let _ = fs::remove_dir_all(&staging);
                    return Err(e);
                }
            };
            let path = parent.join(format!("{PREFIX}{name}"));
            match files::rename_noreplace(&staging, &path) {
                Ok(()) => {
                    return Ok(LogDir {
                        path,
                        lock: std::sync::Mutex::new(Some(lock)),
                        sessions: std::hash::RandomState::new(),
                        parent: parent.to_path_buf(),
                    });
                }
                Err(e) => {
                    let _ = fs::remove_dir_all(&staging);
                    if e.kind() == io::ErrorKind::AlreadyExists {
                        last = Some(e);
                        continue;
                    }
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "cannot rename the new log directory {} to {}: {e}",
                            staging.display(),
                            path.display()
                        ),
                    ));
                }
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free log directory name")))
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory and everything in it, then releases the lock.
    ///
    /// The open lock file is the last reference to the removed directory: the directory is freed when it is closed.
    /// That is done here, not left to the process's exit: on a filesystem mounted with `discard` freeing the
    /// directory's block waits for the device (about a millisecond on the ext4 this was measured on), and at exit
    /// that wait delayed the moment the parent saw the process end.
    pub(crate) fn remove(&self) {
        let _ = fs::remove_dir_all(&self.path);
        drop(self.lock.lock().unwrap_or_else(|p| p.into_inner()).take());
        // The per-user root goes with its last log directory (a root still holding another's stays).
        if let Some(root) = self.path.parent().filter(|r| *r != self.parent) {
            let _ = fs::remove_dir(root);
        }
    }
}

/// A private directory of the host's own in the log directories' parent: an unpredictable `shellward-…` name,
/// owner-only, locked for as long as it lives, made and swept exactly as a log directory is (see the module). Give it
/// [`crate::Executor::private_dir_parent`]: the next executor started there removes it once its owner is gone, even
/// one killed outright, with no scan of its own.
///
/// The facade keeps the files through which commands report their last working directory in one.
#[derive(Debug)]
pub struct PrivateDir(LogDir);

impl PrivateDir {
    /// Creates one under `parent` (which must exist and be writable).
    pub fn create_in(parent: &Path) -> io::Result<PrivateDir> {
        LogDir::make(parent).map(PrivateDir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Removes the directory and everything in it, then releases its lock (also done on drop). A host that exits
    /// without either leaves it to the next executor's sweep.
    pub fn remove(&self) {
        self.0.remove();
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        self.0.remove();
    }
}

/// The shared log roots of this user under the default parents (the temporary directory, `XDG_RUNTIME_DIR`): where
/// other shellward instances of this user keep their logs unless configured otherwise. A sandbox covers those that
/// exist besides its own root, so a command reads no other instance's output even when the instances were started
/// with different parents. (Only sandboxes cover them: Linux.)
#[cfg(target_os = "linux")]
pub(crate) fn default_roots() -> Vec<PathBuf> {
    let name = format!("{ROOT_PREFIX}{}", files::user_tag());
    let mut roots = vec![std::env::temp_dir().join(&name)];
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        roots.push(PathBuf::from(d).join(&name));
    }
    roots
}

/// `Ok` for a directory that exists already.
fn ignore_existing(e: io::Error) -> io::Result<()> {
    if e.kind() == io::ErrorKind::AlreadyExists {
        Ok(())
    } else {
        Err(e)
    }
}

/// The per-user root under `parent` (see the module), made when missing. One that is not this user's own directory
/// (another user's, a link, a file: planted in a shared temporary directory) is refused, never used or removed.
fn user_root(parent: &Path) -> io::Result<PathBuf> {
    let shared = parent.join(format!("{ROOT_PREFIX}{}", files::user_tag()));
    match claim_root(&shared, parent) {
        Ok(()) => Ok(shared),
        // Planted by someone else (in a temporary directory users share): not a reason to fail; a root of this
        // executor's own instead (its sandboxes still cover it; other instances' roots are the shared one's loss).
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            tracing::warn!(target: "shellward::notice", "{e}; using a log root of this instance's own");
            for _ in 0..16 {
                let own = parent.join(format!(
                    "{ROOT_PREFIX}{}-{}",
                    files::user_tag(),
                    random_name(12)?
                ));
                match files::create_private_dir(&own) {
                    Ok(()) => return Ok(own),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(io::Error::other("no free log root name"))
        }
        Err(e) => Err(e),
    }
}

/// Makes `root` this user's private directory when missing; an error `PermissionDenied` when something else is
/// there (a link, a file, another user's directory).
fn claim_root(root: &Path, parent: &Path) -> io::Result<()> {
    match files::create_private_dir(root) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "cannot create the log root {}: {e}; make {} writable or configure another log_dir",
                    root.display(),
                    parent.display()
                ),
            ));
        }
    }
    let meta = fs::symlink_metadata(root)?;
    if !meta.is_dir() || !files::owned_by_me(&meta) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "the log root {} is not this user's directory (a link, a file, or another user's); remove it or \
                 configure another log_dir",
                root.display()
            ),
        ));
    }
    // Ours: owner-only, whatever mode it was left with.
    files::make_private_dir(root)
}

/// Makes `dir` exactly 0700 (the umask may have narrowed the mode, never widened it), then creates its `lock` file and
/// locks it.
fn lock_new(dir: &Path) -> io::Result<File> {
    files::make_private_dir(dir)?;
    let path = dir.join(LOCK);
    let lock = files::create_private(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display())))?;
    if !try_lock(&lock) {
        return Err(io::Error::other(format!("cannot lock {}", path.display())));
    }
    Ok(lock)
}

/// `rename` after checking that nothing is at `to`; for where `RENAME_NOREPLACE` is missing. The names are random, so
/// the gap between the check and the rename matters only to a process that guesses them.
pub(crate) fn rename_if_absent(from: &Path, to: &Path) -> io::Result<()> {
    match fs::symlink_metadata(to) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists", to.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => fs::rename(from, to),
        Err(e) => Err(e),
    }
}

/// `len` random characters from `[a-z0-9]`, from the kernel's random source.
pub(crate) fn random_name(len: usize) -> io::Result<String> {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = vec![0u8; len];
    getrandom::fill(&mut bytes).map_err(io::Error::other)?;
    Ok(bytes
        .iter()
        .map(|b| CHARS[*b as usize % CHARS.len()] as char)
        .collect())
}

/// Takes an exclusive lock (`flock` on Unix, `LockFileEx` on Windows) without waiting; returns whether it was taken.
fn try_lock(file: &File) -> bool {
    file.try_lock().is_ok()
}

/// Removes the log directories under `parent` that belong to executors no longer running; returns how many.
pub(crate) fn sweep_stale(parent: &Path) -> usize {
    let Ok(entries) = fs::read_dir(parent) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        // A log root of an instance's own (the shared one was planted): its stale directories, then itself if empty.
        if name.starts_with(&format!("{ROOT_PREFIX}{}-", files::user_tag())) {
            let path = entry.path();
            if fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && files::owned_by_me(&m)) {
                removed += sweep_stale(&path);
                let _ = fs::remove_dir(&path);
            }
            continue;
        }
        let (rest, staging) = match (name.strip_prefix(PREFIX), name.strip_prefix(STAGING)) {
            (Some(rest), _) => (rest, false),
            (None, Some(rest)) => (rest, true),
            (None, None) => continue,
        };
        let path = entry.path();
        // Never follow a symlink, never touch another user's directory.
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() || !files::owned_by_me(&meta) {
            continue;
        }
        let stale = if staging {
            staging_stale(&path)
        } else {
            is_stale(&path, rest)
        };
        // std's remove_dir_all does not follow symlinks inside the tree.
        if stale && fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether the `shellward-*` directory at `path` belongs to an executor that is gone: its lock can be taken (the lock
/// is released when the file is dropped), or it has none and is of the old form whose process is gone.
fn is_stale(path: &Path, rest: &str) -> bool {
    match open_lock(path) {
        Ok(lock) => try_lock(&lock),
        Err(e) if e.kind() == io::ErrorKind::NotFound => legacy_stale(rest),
        Err(_) => false,
    }
}

/// Whether the staging directory at `path` was left by an executor that died making it: unchanged for [`SETTLING`]
/// (until then its executor may be between creating its `lock` and taking it) and its lock missing or free.
fn staging_stale(path: &Path) -> bool {
    if recently_changed(path) {
        return false;
    }
    match open_lock(path) {
        Ok(lock) => try_lock(&lock),
        Err(e) => e.kind() == io::ErrorKind::NotFound,
    }
}

/// Opens the `lock` file in `dir` for locking, without following a symlink.
fn open_lock(dir: &Path) -> io::Result<File> {
    files::open_nofollow(&dir.join(LOCK))
}

/// How long after its last change a staging directory is left alone by the sweep.
const SETTLING: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether `dir` changed (an entry added or removed) within [`SETTLING`], or its time cannot be read or lies ahead.
fn recently_changed(dir: &Path) -> bool {
    fs::symlink_metadata(dir)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_none_or(|age| age < SETTLING)
}

/// The old `shellward-<pid>-<n>` form: stale when process `<pid>` no longer exists.
fn legacy_stale(rest: &str) -> bool {
    let Some((pid, n)) = rest.split_once('-') else {
        return false;
    };
    let (Ok(pid), true) = (
        pid.parse::<i32>(),
        !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()),
    ) else {
        return false;
    };
    files::process_gone(pid)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn directories_are_private_unpredictable_and_locked() {
        let parent = tempfile::tempdir().unwrap();
        let a = LogDir::create(parent.path()).unwrap();
        let b = LogDir::create(parent.path()).unwrap();
        assert_ne!(a.path(), b.path());
        // Both in the per-user root, 0700, which is where the sweep of the log directories looks.
        let root = a.path().parent().unwrap().to_path_buf();
        assert_eq!(root, b.path().parent().unwrap());
        assert_eq!(
            root.file_name().unwrap().to_str().unwrap(),
            format!("{ROOT_PREFIX}{}", files::user_tag())
        );
        assert_eq!(
            fs::metadata(&root).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert_eq!(a.parent(), parent.path());
        let mode = fs::metadata(a.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let name = a.path().file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(name.len(), PREFIX.len() + 16, "{name}");
        // A live directory is not swept, by another executor or this one.
        assert_eq!(sweep_stale(&root), 0);
        assert!(a.path().exists() && b.path().exists());
        let a_path = a.path().to_path_buf();
        drop(a); // the lock goes with it, as with a killed executor; the directory stays
        assert!(a_path.exists());
        // Its lock was taken before it had its name, so a free lock means its executor is gone: it is swept at once.
        // A child another test is spawning holds a copy of every descriptor until it execs (close-on-exec), the
        // lock's too: the sweep may see the directory locked for that moment.
        let mut swept = 0;
        for _ in 0..100 {
            swept = sweep_stale(&root);
            if swept > 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(swept, 1);
        assert!(!a_path.exists());
        assert!(b.path().exists());
        // No staging directory is left behind by a creation.
        let names: Vec<_> = fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [b.path().file_name().unwrap()], "{names:?}");
        b.remove();
        assert!(!b.path().exists());
    }

    /// Each session's logs have a directory of their own (0700), the same for every command of the session, its name
    /// saying nothing of the session's.
    #[test]
    fn each_session_has_its_own_log_directory() {
        let parent = tempfile::tempdir().unwrap();
        let dir = LogDir::create(parent.path()).unwrap();
        let a = dir.session_dir(Some("agent-a")).unwrap();
        let b = dir.session_dir(Some("agent-b")).unwrap();
        let none = dir.session_dir(None).unwrap();
        assert_eq!(dir.session_dir(Some("agent-a")).unwrap(), a);
        assert!(a != b && a != none && b != none);
        for d in [&a, &b, &none] {
            assert_eq!(d.parent().unwrap(), dir.path());
            assert_eq!(fs::metadata(d).unwrap().permissions().mode() & 0o777, 0o700);
            assert!(!d.to_str().unwrap().contains("agent"), "{}", d.display());
        }
        dir.remove();
    }

    /// The per-user root planted by someone else (a link to elsewhere, a file) is never used, followed or removed: the
    /// executor makes a root of its own beside it, which the next sweep removes once its executor is gone.
    #[test]
    fn a_planted_log_root_is_never_used() {
        let parent = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let root = parent
            .path()
            .join(format!("{ROOT_PREFIX}{}", files::user_tag()));
        std::os::unix::fs::symlink(elsewhere.path(), &root).unwrap();
        let dir = LogDir::create(parent.path()).unwrap();
        let own = dir.path().parent().unwrap().to_path_buf();
        assert_ne!(own, root);
        assert!(
            own.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with(ROOT_PREFIX)
        );
        assert_eq!(fs::read_dir(elsewhere.path()).unwrap().count(), 0);
        assert!(fs::symlink_metadata(&root).unwrap().is_symlink());
        // Killed (lock released, directory left): the next start in that parent removes it and its own root.
        drop(dir.lock.lock().unwrap().take());
        let killed = dir.path().to_path_buf();
        std::mem::forget(dir);
        fs::remove_file(&root).unwrap();
        fs::write(&root, "").unwrap();
        let mut gone = false;
        for _ in 0..100 {
            let next = LogDir::create(parent.path()).unwrap();
            gone = !killed.exists() && !own.exists();
            next.remove();
            if gone {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(gone, "{} left", killed.display());
        // A root of ours left with a wider mode is narrowed back to 0700.
        fs::remove_file(&root).unwrap();
        fs::create_dir(&root).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        let dir = LogDir::create(parent.path()).unwrap();
        assert_eq!(
            fs::metadata(&root).unwrap().permissions().mode() & 0o777,
            0o700
        );
        dir.remove();
    }

    /// A directory being made (staging name, its `lock` created but not yet locked, or not yet created) is left alone
    /// while new, as is one whose lock is held; once it has not changed for a while and its lock is free, its executor
    /// died making it and it is swept.
    #[test]
    fn a_directory_being_made_is_left_alone_until_it_is_old() {
        let parent = tempfile::tempdir().unwrap();
        let p = parent.path();
        let unlocked = p.join(format!("{STAGING}aaaaaaaaaaaaaaaa"));
        fs::create_dir(&unlocked).unwrap();
        File::create(unlocked.join(LOCK)).unwrap();
        let no_lock = p.join(format!("{STAGING}bbbbbbbbbbbbbbbb"));
        fs::create_dir(&no_lock).unwrap();
        let held = p.join(format!("{STAGING}cccccccccccccccc"));
        fs::create_dir(&held).unwrap();
        let held_lock = File::create(held.join(LOCK)).unwrap();
        assert!(try_lock(&held_lock));
        // The sweep another executor makes at its own start while these are being made.
        assert_eq!(sweep_stale(p), 0);
        assert!(unlocked.exists() && no_lock.exists() && held.exists());
        // A minute later, as if their executors had died making them.
        for dir in [&unlocked, &no_lock, &held] {
            File::open(dir)
                .unwrap()
                .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
                .unwrap();
        }
        assert_eq!(sweep_stale(p), 2);
        assert!(!unlocked.exists() && !no_lock.exists());
        assert!(
            held.exists(),
            "a staging directory whose lock is held stays"
        );
    }

    #[test]
    fn the_sweep_leaves_foreign_things_alone() {
        let parent = tempfile::tempdir().unwrap();
        let p = parent.path();
        // Not ours by name, a symlink, a plain file, and a legacy directory of a living process.
        fs::create_dir(p.join("other-dir")).unwrap();
        let target = tempfile::tempdir().unwrap();
        fs::write(target.path().join("keep"), "x").unwrap();
        std::os::unix::fs::symlink(target.path(), p.join("shellward-link")).unwrap();
        fs::write(p.join("shellward-file"), "x").unwrap();
        let alive = p.join(format!("shellward-{}-0", std::process::id()));
        fs::create_dir(&alive).unwrap();
        // A legacy directory of a pid that cannot exist (above pid_max's hard limit) is stale.
        let dead = p.join("shellward-99999999-3");
        fs::create_dir(&dead).unwrap();
        assert_eq!(sweep_stale(p), 1);
        assert!(!dead.exists());
        assert!(
            alive.exists() && p.join("other-dir").exists() && p.join("shellward-file").exists()
        );
        assert!(
            target.path().join("keep").exists(),
            "a symlink is never followed"
        );
    }

    /// A host's private directory is made without a sweep, private and locked; dropped it is removed, and one whose
    /// owner died (its lock released, the directory left) is removed by the next sweep of that parent.
    #[test]
    fn a_private_dir_is_swept_with_the_log_directories() {
        let parent = tempfile::tempdir().unwrap();
        let p = parent.path();
        let stale = p.join("shellward-99999999-3");
        fs::create_dir(&stale).unwrap();
        let dropped = PrivateDir::create_in(p).unwrap();
        assert!(stale.exists(), "making one sweeps nothing");
        let mode = fs::metadata(dropped.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let dropped_path = dropped.path().to_path_buf();
        drop(dropped);
        assert!(!dropped_path.exists(), "dropped, it is removed");
        fs::remove_dir(&stale).unwrap();

        let live = PrivateDir::create_in(p).unwrap();
        let killed = PrivateDir::create_in(p).unwrap();
        let killed_path = killed.path().to_path_buf();
        // What a killed owner leaves: the directory, its lock released by the kernel.
        drop(killed.0.lock.lock().unwrap().take());
        std::mem::forget(killed);
        // A child another test is spawning may hold a copy of the lock's descriptor until it execs.
        let mut swept = 0;
        for _ in 0..100 {
            swept = sweep_stale(p);
            if swept > 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(swept, 1);
        assert!(!killed_path.exists());
        assert!(live.path().exists(), "a live one stays");
    }

    #[test]
    fn a_missing_parent_is_a_clear_error() {
        let e = LogDir::create(Path::new("/nonexistent/shellward-parent")).unwrap_err();
        assert!(e.to_string().contains("log_dir"), "{e}");
    }
}
