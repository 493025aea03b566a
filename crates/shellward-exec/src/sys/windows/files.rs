//! How the executor's private files are made on Windows: new files only (never one already there, a symlink
//! included), in the user's own temporary directory; reads at an offset.
//!
//! Owner-only access comes from where the files are: the default parent is the user's profile temporary directory,
//! which other users cannot read. Explicit ACLs are not set (a configured shared parent gets its default ACL).

use std::fs::{self, File};
use std::io;
use std::os::windows::fs::FileExt;
use std::path::Path;

/// Nothing to narrow: the directory keeps the ACL it inherits from its parent.
pub(crate) fn make_private_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// Creates the directory `dir`, failing when anything is already there.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::create_dir(dir)
}

/// Creates a new file at `path`, never one already there nor a symlink (`CREATE_NEW` fails on both).
pub(crate) fn create_private(path: &Path) -> io::Result<File> {
    File::options().write(true).create_new(true).open(path)
}

/// Opens `path` for reading, failing on a symlink.
pub(crate) fn open_nofollow(path: &Path) -> io::Result<File> {
    if fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is a symlink", path.display()),
        ));
    }
    File::open(path)
}

/// Directories in the user's own temporary directory are the user's.
pub(crate) fn owned_by_me(_meta: &fs::Metadata) -> bool {
    true
}

/// Old pid-named directories are never made on Windows: never stale by that rule.
pub(crate) fn process_gone(_pid: i32) -> bool {
    false
}

/// Reads `buf.len()` bytes (or fewer at the end) at `offset`; returns how many were read.
pub(crate) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    file.seek_read(buf, offset)
}

/// Renames `from` to `to`, failing with `AlreadyExists` rather than replacing anything at `to`.
pub(crate) fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    crate::logdir::rename_if_absent(from, to)
}

/// What tells this user's files apart in a shared directory; Windows' temporary directory is the user's own.
pub(crate) fn user_tag() -> String {
    "user".to_string()
}
