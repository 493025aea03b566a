//! The facade's few platform-specific file operations: a private directory, a cache or state file opened without
//! following a link or blocking on a FIFO, the audit file opened for appending, and whether this process may write
//! in a directory. Unix in `unix.rs`, Windows in `windows.rs`.

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub(crate) use unix::{create_private_dir_all, open_append_owned, open_regular, writable};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::{create_private_dir_all, open_append_owned, open_regular, writable};
