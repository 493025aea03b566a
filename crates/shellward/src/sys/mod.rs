//! The facade's few platform-specific file operations: a private directory, a cache or state file opened without
//! following a link or blocking on a FIFO, the audit file opened for appending, and whether this process may write
//! in a directory. Unix in `unix.rs`, Windows in `windows.rs`.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix::open_read_nofollow;
#[cfg(unix)]
pub(crate) use unix::{create_private_dir_all, open_append_owned, writable};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows::open_read_nofollow;
#[cfg(windows)]
pub(crate) use windows::{create_private_dir_all, open_append_owned, writable};

/// Opens `path` for reading without following a final link (on Unix, nor blocking on a FIFO); only a regular file.
pub(crate) fn open_regular(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let file = open_read_nofollow(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    Ok(file)
}
