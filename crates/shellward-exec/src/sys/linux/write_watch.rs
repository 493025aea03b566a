//! Refused writes, seen by the sandbox itself: which path a command tried to write that its write confinement
//! (Landlock) refuses, for its result (`ExecResult::refused_writes`) and the note that tells the model what to do.
//!
//! Landlock reports its denials only to the audit subsystem (ABI 7), which is off on most machines and readable by
//! root only. So a command whose writes are confined runs under the notify filter of `unix_broker` with its
//! file-writing calls added (`open`/`openat` with a write flag, `creat`, `openat2`, `truncate`, `mkdir*`, `mknod*`,
//! `unlink*`, `rmdir`, `rename*`, `link*`, `symlink*`): the broker reads the call's path, works out what Landlock
//! will decide — the same walk from the file or its directory up to the command's root, through `..` as the kernel
//! walks it, looking for a rule's inode ([`WriteRules`]) — and lets the kernel run the call as it was
//! (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). It only watches: Landlock still refuses, whatever is read here, so a command
//! changing its memory or its files between the look and the call can at most make its own report wrong.
//!
//! A call that fails before Landlock is asked (a missing directory, a file that exists for `mkdir`, a directory
//! opened for writing) is not reported; neither are `/proc` magic links (`/dev/stdout`), which name pipes and
//! terminals, not paths.

use super::landlock::ALWAYS_WRITABLE;
use std::collections::HashSet;
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The calls that write paths, sent to the broker (with `OPEN_CALLS` filtered by their flags first).
#[cfg(target_arch = "x86_64")]
pub(crate) const WRITE_CALLS: &[libc::c_long] = &[
    libc::SYS_creat,
    libc::SYS_openat2,
    libc::SYS_truncate,
    libc::SYS_mkdir,
    libc::SYS_mkdirat,
    libc::SYS_mknod,
    libc::SYS_mknodat,
    libc::SYS_unlink,
    libc::SYS_unlinkat,
    libc::SYS_rmdir,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_link,
    libc::SYS_linkat,
    libc::SYS_symlink,
    libc::SYS_symlinkat,
];
/// Elsewhere the broker is never used (`unix_broker::available` is false).
#[cfg(not(target_arch = "x86_64"))]
pub(crate) const WRITE_CALLS: &[libc::c_long] = &[];

/// The opening calls and which argument holds their flags: sent to the broker only with a write flag.
#[cfg(target_arch = "x86_64")]
pub(crate) const OPEN_CALLS: &[(libc::c_long, u32)] = &[(libc::SYS_open, 1), (libc::SYS_openat, 2)];
/// Elsewhere the broker is never used.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) const OPEN_CALLS: &[(libc::c_long, u32)] = &[];

/// The flags of an open that may write (or create) a file.
pub(crate) const WRITE_FLAGS: u32 =
    (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC) as u32;

/// Whether the call `nr` is one the broker watches for writes.
pub(crate) fn watched(nr: libc::c_long) -> bool {
    WRITE_CALLS.contains(&nr) || OPEN_CALLS.iter().any(|(n, _)| *n == nr)
}

/// The inodes of one command's write rules, as Landlock holds them: the writable paths and the always-writable
/// devices, by `(device, inode)`; and the directories found beneath one of them so far (a walk ends there).
pub(crate) struct WriteRules {
    dirs: Vec<(u64, u64)>,
    files: Vec<(u64, u64)>,
    beneath: Mutex<HashSet<(u64, u64)>>,
    /// The root directory of the thread that asked last (most writes come in runs from one process: `rm -r`, a
    /// compiler, an unpacker), kept to save opening it again.
    last_root: Mutex<Option<(libc::pid_t, std::sync::Arc<OwnedFd>)>>,
}

/// At most this many directories are remembered as beneath a rule (then the memory starts again).
const MAX_REMEMBERED: usize = 4096;
/// The deepest walk (a directory tree deeper than this is not followed to its root).
const MAX_DEPTH: usize = 512;
/// Symbolic links followed for one path at most (the kernel's limit is 40; fewer is enough to report).
const MAX_LINKS: usize = 16;

impl WriteRules {
    /// The rules of a ruleset built for `writable` (`sys::linux::landlock`), as the executor sees those paths now.
    pub(crate) fn of(writable: &[PathBuf]) -> WriteRules {
        use std::os::unix::fs::MetadataExt;
        let (mut dirs, mut files) = (Vec::new(), Vec::new());
        for path in writable
            .iter()
            .map(PathBuf::as_path)
            .chain(ALWAYS_WRITABLE.iter().map(Path::new))
        {
            if let Ok(m) = std::fs::metadata(path) {
                if m.is_dir() { &mut dirs } else { &mut files }.push((m.dev(), m.ino()));
            }
        }
        WriteRules {
            dirs,
            files,
            beneath: Mutex::default(),
            last_root: Mutex::default(),
        }
    }

    /// The root directory of thread `pid` (`/proc/PID/root`), opened once per run of calls from one thread. (A pid
    /// reused by another process of the command has the same root unless it changed its own: only a report could
    /// then be wrong, never what is allowed.)
    fn root_of(&self, pid: libc::pid_t) -> Option<std::sync::Arc<OwnedFd>> {
        let mut last = self.last_root.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((p, root)) = last.as_ref()
            && *p == pid
        {
            return Some(root.clone());
        }
        let root = std::sync::Arc::new(open_at(
            libc::AT_FDCWD,
            &CString::new(format!("/proc/{pid}/root")).ok()?,
            libc::O_DIRECTORY,
        )?);
        *last = Some((pid, root.clone()));
        Some(root)
    }

    /// Whether the directory `dir` is beneath a rule: itself, or one of the directories above it up to its root.
    fn dir_allowed(&self, dir: OwnedFd) -> bool {
        let mut seen = Vec::new();
        let mut fd = dir;
        let mut allowed = false;
        for _ in 0..MAX_DEPTH {
            let Some(id) = identity(&fd) else { break };
            let known = self
                .beneath
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&id);
            if known || self.dirs.contains(&id) {
                allowed = true;
                break;
            }
            seen.push(id);
            let Some(parent) = open_at(fd.as_raw_fd(), c"..", libc::O_DIRECTORY) else {
                break;
            };
            if identity(&parent) == Some(id) {
                // The root of the command's file system: no rule above.
                break;
            }
            fd = parent;
        }
        if allowed {
            let mut beneath = self.beneath.lock().unwrap_or_else(|p| p.into_inner());
            if beneath.len() + seen.len() > MAX_REMEMBERED {
                beneath.clear();
            }
            beneath.extend(seen);
        }
        allowed
    }
}

/// What a watched call asks of one path.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Access {
    /// Opened with these flags.
    Open(u32),
    /// Its content truncated (`truncate`).
    Truncate,
    /// Made (a directory, node, link or symbolic link): the directory it goes in is written.
    Make,
    /// Removed (or renamed away): the directory it is in is written.
    Remove,
    /// Renamed onto: the directory it goes in is written, whether it exists or not.
    Replace,
}

/// The paths call `notif` names and what it asks of each: `(dirfd, address of the path, access)`.
fn targets(notif: &libc::seccomp_notif, pid: libc::pid_t) -> Vec<(i64, u64, Access)> {
    let nr = notif.data.nr as libc::c_long;
    let a = notif.data.args;
    let cwd = libc::AT_FDCWD as i64;
    let fd = |v: u64| v as i32 as i64;
    #[cfg(target_arch = "x86_64")]
    {
        match nr {
            libc::SYS_open => vec![(cwd, a[0], Access::Open(a[1] as u32))],
            libc::SYS_creat => vec![(
                cwd,
                a[0],
                Access::Open((libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u32),
            )],
            libc::SYS_openat => vec![(fd(a[0]), a[1], Access::Open(a[2] as u32))],
            libc::SYS_openat2 => {
                // `struct open_how` starts with its u64 flags.
                let mut flags = [0u8; 8];
                if a[3] < 8 || super::unix_broker::read_memory(pid, a[2], &mut flags).is_err() {
                    return Vec::new();
                }
                vec![(
                    fd(a[0]),
                    a[1],
                    Access::Open(u64::from_ne_bytes(flags) as u32),
                )]
            }
            libc::SYS_truncate => vec![(cwd, a[0], Access::Truncate)],
            libc::SYS_mkdir | libc::SYS_mknod => vec![(cwd, a[0], Access::Make)],
            libc::SYS_mkdirat | libc::SYS_mknodat => vec![(fd(a[0]), a[1], Access::Make)],
            libc::SYS_symlink => vec![(cwd, a[1], Access::Make)],
            libc::SYS_symlinkat => vec![(fd(a[1]), a[2], Access::Make)],
            libc::SYS_link => vec![(cwd, a[1], Access::Make)],
            libc::SYS_linkat => vec![(fd(a[2]), a[3], Access::Make)],
            libc::SYS_unlink | libc::SYS_rmdir => vec![(cwd, a[0], Access::Remove)],
            libc::SYS_unlinkat => vec![(fd(a[0]), a[1], Access::Remove)],
            libc::SYS_rename => vec![(cwd, a[0], Access::Remove), (cwd, a[1], Access::Replace)],
            libc::SYS_renameat | libc::SYS_renameat2 => vec![
                (fd(a[0]), a[1], Access::Remove),
                (fd(a[2]), a[3], Access::Replace),
            ],
            _ => Vec::new(),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (nr, a, cwd, fd, pid);
        Vec::new()
    }
}

/// What one watched call asks, read while the caller waits: its paths made absolute and the caller's root.
pub(crate) struct Asked {
    root: std::sync::Arc<OwnedFd>,
    paths: Vec<(PathBuf, Access)>,
}

/// Reads what call `notif` asks (its memory, working directory and root); `None` when it names no path that can be
/// read, or the call no longer stands.
pub(crate) fn asked(
    notif: &libc::seccomp_notif,
    rules: &WriteRules,
    still_valid: impl Fn() -> bool,
) -> Option<Asked> {
    let pid = notif.pid as libc::pid_t;
    let mut paths = Vec::new();
    for (dirfd, addr, access) in targets(notif, pid) {
        let Some(named) = read_path(pid, addr) else {
            continue;
        };
        if let Some(full) = absolute(pid, dirfd, &named) {
            paths.push((full, access));
        }
    }
    if paths.is_empty() {
        return None;
    }
    let root = rules.root_of(pid)?;
    // What was read is the caller's only if its call still stands (the thread id was not reused).
    still_valid().then_some(Asked { root, paths })
}

/// The path `asked` writes that the rules refuse, as the command named it (made absolute; where the call follows a
/// symbolic link, the path it leads to); `None` when it writes nothing refused. Judged before the kernel makes the
/// call, so the files are as the call finds them.
pub(crate) fn refused(asked: &Asked, rules: &WriteRules) -> Option<PathBuf> {
    asked
        .paths
        .iter()
        .find_map(|(path, access)| refuses(&asked.root, path, *access, rules))
}

/// The path (absolute, as the process whose root is `root` sees it; links followed where the call follows them)
/// Landlock, with `rules`, refuses `access` to `path`; `None` when it does not.
fn refuses(root: &OwnedFd, path: &Path, access: Access, rules: &WriteRules) -> Option<PathBuf> {
    let follow = match access {
        Access::Open(flags) => flags & libc::O_NOFOLLOW as u32 == 0,
        Access::Truncate => true,
        _ => false,
    };
    let (dir, name, existing, path) = locate(root, path, follow)?;
    let is_dir = existing.is_some_and(|e| e.kind == libc::S_IFDIR);
    let is_link = existing.is_some_and(|e| e.kind == libc::S_IFLNK);
    let refused = match access {
        Access::Open(flags) => {
            let tmpfile = flags & libc::O_TMPFILE as u32 == libc::O_TMPFILE as u32;
            if tmpfile {
                // An unnamed file made in the directory `path`.
                let refused = is_dir
                    && open_at(dir.as_raw_fd(), &name, libc::O_DIRECTORY)
                        .is_some_and(|d| !rules.dir_allowed(d));
                return refused.then_some(path);
            }
            let writes = flags & (libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC) as u32 != 0;
            let creates = flags & libc::O_CREAT as u32 != 0;
            match existing {
                // The kernel refuses these itself (EISDIR, ELOOP, EEXIST), or the open writes nothing.
                Some(_) if is_dir || is_link || !writes => false,
                Some(_) if creates && flags & libc::O_EXCL as u32 != 0 => false,
                Some(e) => file_refused(dir, e.id, rules),
                None => creates && !rules.dir_allowed(dir),
            }
        }
        Access::Truncate => existing.is_some_and(|e| !is_dir && file_refused(dir, e.id, rules)),
        Access::Make => existing.is_none() && !rules.dir_allowed(dir),
        Access::Remove => existing.is_some() && !rules.dir_allowed(dir),
        Access::Replace => !rules.dir_allowed(dir),
    };
    refused.then_some(path)
}

/// Whether writing the existing file `id` in `dir` is refused: neither a rule of its own nor one above it.
fn file_refused(dir: OwnedFd, id: (u64, u64), rules: &WriteRules) -> bool {
    let own = rules.files.contains(&id) || rules.dirs.contains(&id);
    !own && !rules.dir_allowed(dir)
}

/// An entry of a directory, as `fstatat` sees it (not following a symbolic link).
#[derive(Clone, Copy)]
struct Entry {
    /// Its file type bits (`S_IFDIR`, `S_IFLNK`, …).
    kind: u32,
    /// Its `(device, inode)`.
    id: (u64, u64),
}

/// The directory `path` is in (opened in the command's root `root`), its last component, that entry (`None`: it does
/// not exist), and the path; with `follow`, a symbolic link as the last component is followed first (and the
/// path is where it leads).
fn locate(
    root: &OwnedFd,
    path: &Path,
    follow: bool,
) -> Option<(OwnedFd, CString, Option<Entry>, PathBuf)> {
    let mut path = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let name = path.file_name()?.to_os_string();
        let parent = path.parent()?;
        let dir = open_in_root(root, parent, libc::O_PATH | libc::O_DIRECTORY).ok()?;
        let cname = CString::new(name.into_vec()).ok()?;
        let entry = entry(&dir, &cname);
        if follow && entry.is_some_and(|e| e.kind == libc::S_IFLNK) {
            let target = read_link_at(&dir, &cname)?;
            path = if target.is_absolute() {
                target
            } else {
                parent.join(target)
            };
            continue;
        }
        return Some((dir, cname, entry, path));
    }
    None
}

/// `path` (absolute) opened with `flags` in the command's root `root` (`/proc/PID/root`): symbolic links followed
/// inside it, `/proc` magic links refused. The errno on failure.
pub(crate) fn open_in_root(
    root: &OwnedFd,
    path: &Path,
    flags: libc::c_int,
) -> Result<OwnedFd, i32> {
    let name = CString::new(path.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
    // SAFETY: `open_how` is plain data.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: openat2 with a NUL-terminated name and an `open_how` of the size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            name.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    // SAFETY: a fresh descriptor owned from here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `name` under `dir` opened `O_PATH` (with `flags`), without following a symbolic link through `/proc`.
fn open_at(dir: RawFd, name: &std::ffi::CStr, flags: libc::c_int) -> Option<OwnedFd> {
    // SAFETY: openat of a NUL-terminated name.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), libc::O_PATH | libc::O_CLOEXEC | flags) };
    // SAFETY: a fresh descriptor owned from here.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The `(device, inode)` of `fd`.
fn identity(fd: &OwnedFd) -> Option<(u64, u64)> {
    // SAFETY: fstat into a zeroed `stat`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat of a valid descriptor into `st`.
    (unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

/// The entry `name` in `dir` (not following a symbolic link), `None` when there is none.
fn entry(dir: &OwnedFd, name: &CString) -> Option<Entry> {
    // SAFETY: as in `identity`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstatat of a NUL-terminated name into `st`.
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    (r == 0).then_some(Entry {
        kind: st.st_mode & libc::S_IFMT,
        id: (st.st_dev, st.st_ino),
    })
}

/// The target of the symbolic link `name` in `dir`.
fn read_link_at(dir: &OwnedFd, name: &CString) -> Option<PathBuf> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: readlinkat into `buf`, at most its length.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n <= 0 {
        return None;
    }
    buf.truncate(n as usize);
    Some(PathBuf::from(OsString::from_vec(buf)))
}

/// The NUL-terminated path at `addr` in process `pid` (at most `PATH_MAX` bytes), read a page at a time so a string
/// ending just before an unmapped page is read whole.
fn read_path(pid: libc::pid_t, addr: u64) -> Option<PathBuf> {
    const PAGE: u64 = 4096;
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < libc::PATH_MAX as usize {
        let room = (PAGE - at % PAGE) as usize;
        let mut chunk = vec![0u8; room.min(libc::PATH_MAX as usize - out.len())];
        super::unix_broker::read_memory(pid, at, &mut chunk).ok()?;
        if let Some(end) = chunk.iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return (!out.is_empty()).then(|| PathBuf::from(OsString::from_vec(out)));
        }
        out.extend_from_slice(&chunk);
        at += chunk.len() as u64;
    }
    None
}

/// `named` made absolute as process `pid` resolves it: against its working directory (`AT_FDCWD`) or the directory
/// its descriptor `dirfd` names.
fn absolute(pid: libc::pid_t, dirfd: i64, named: &Path) -> Option<PathBuf> {
    if named.is_absolute() {
        return Some(named.to_path_buf());
    }
    let base = if dirfd == libc::AT_FDCWD as i64 {
        format!("/proc/{pid}/cwd")
    } else if dirfd >= 0 {
        format!("/proc/{pid}/fd/{dirfd}")
    } else {
        return None;
    };
    let base = std::fs::read_link(base).ok()?;
    let bytes = base.as_os_str().as_bytes();
    if !bytes.starts_with(b"/") || bytes.ends_with(b" (deleted)") {
        return None;
    }
    Some(base.join(named))
}

/// A path shown in a report: as given, but `.` components and repeated separators dropped.
pub(crate) fn tidy(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .map(|c| OsStr::new(c.as_os_str()).to_os_string())
        .collect()
}
