//! Unix: owner-only modes, `O_NOFOLLOW`, `O_NONBLOCK` for the open, the file's owner checked.

use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Creates `dir` and its parents where missing, the new ones owner-only (0700).
pub(crate) fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Opens `path` for reading without following a final link or blocking on a FIFO (whatever it is).
pub(super) fn open_read_nofollow(path: &Path) -> io::Result<File> {
    File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// Opens (or creates, 0600) `path` for appending: refused for a symbolic link, anything but a regular file (a FIFO
/// would block every write; a device is no log), and a file another user owns. The open itself cannot block on a
/// FIFO; writes then block as usual.
pub(crate) fn open_append_owned(
    path: &Path,
    not_regular: impl Fn() -> io::Error,
) -> io::Result<File> {
    let file = File::options()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(not_regular());
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "it is owned by uid {}, not by this user (uid {me}); remove it or give a path of your own",
                meta.uid()
            ),
        ));
    }
    // Back to blocking writes for the writer thread.
    // SAFETY: fcntl on a descriptor `file` owns.
    unsafe {
        use std::os::fd::AsRawFd;
        let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
    Ok(file)
}

/// Whether this process may create files in the directory `dir` (`access(W_OK)`: its user's permissions, a
/// read-only file system).
pub(crate) fn writable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path that lives across the call; access reads it and nothing else.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}
