//! How the executor's private files are made on Unix (Linux, and macOS and FreeBSD through `sys/bsd`): owner-only modes, never following a symlink, descriptors
//! closed on exec, ownership by this user, reads at an offset.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Makes `dir` exactly owner-only (0700: the umask may have narrowed the mode, never widened it).
pub(crate) fn make_private_dir(dir: &Path) -> io::Result<()> {
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

/// Creates the directory `dir`, owner-only (0700), failing when anything is already there.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new().mode(0o700).create(dir)
}

/// Creates a new file at `path`, readable by the owner alone (0600), never one already there nor a symlink.
pub(crate) fn create_private(path: &Path) -> io::Result<File> {
    File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Opens `path` for reading, failing on a symlink.
pub(crate) fn open_nofollow(path: &Path) -> io::Result<File> {
    File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Whether `meta` (of a directory found in a shared parent) belongs to this process's user.
pub(crate) fn owned_by_me(meta: &fs::Metadata) -> bool {
    // SAFETY: geteuid has no preconditions.
    meta.uid() == unsafe { libc::geteuid() }
}

/// Whether process `pid` no longer exists (for directories named after the process that made them).
#[cfg(target_os = "linux")]
pub(crate) fn process_gone(pid: i32) -> bool {
    pid > 0 && !Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether process `pid` no longer exists: without `/proc`, a null signal asks (`ESRCH`: no such process).
#[cfg(not(target_os = "linux"))]
pub(crate) fn process_gone(pid: i32) -> bool {
    // SAFETY: signal 0 checks that the process exists and sends nothing.
    pid > 0
        && unsafe { libc::kill(pid, 0) } != 0
        && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Reads `buf.len()` bytes (or fewer at the end) at `offset`; returns how many were read.
pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    file.read_at(buf, offset)
}

/// Renames `from` to `to`, failing with `AlreadyExists` rather than replacing anything at `to` (a plain `rename`
/// replaces an empty directory).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    match renameat2(AT_FDCWD, from, AT_FDCWD, to, RenameFlags::RENAME_NOREPLACE) {
        Ok(()) => Ok(()),
        // A filesystem without RENAME_NOREPLACE: the names are unpredictable, so a check first is enough.
        Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOSYS) => {
            crate::logdir::rename_if_absent(from, to)
        }
        Err(e) => Err(e.into()),
    }
}

/// Renames `from` to `to`, failing with `AlreadyExists` rather than replacing anything at `to`.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    crate::logdir::rename_if_absent(from, to)
}

/// What tells this user's files apart in a directory users share: the effective uid.
pub(crate) fn user_tag() -> String {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }.to_string()
}
