//! Windows: no symbolic link followed (checked before the open), only regular files; directories keep the ACL they
//! inherit (the user's profile is private to the user).

use std::fs::File;
use std::io;
use std::path::Path;

/// Creates `dir` and its parents where missing.
pub(crate) fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Refuses a symbolic link at `path`.
fn refuse_link(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is a symbolic link", path.display()),
        )),
        _ => Ok(()),
    }
}

/// Opens `path` for reading, not through a symbolic link (whatever it is).
pub(super) fn open_read_nofollow(path: &Path) -> io::Result<File> {
    refuse_link(path)?;
    File::open(path)
}

/// Opens (or creates) `path` for appending; refused for a symbolic link and anything but a regular file.
pub(crate) fn open_append_owned(
    path: &Path,
    not_regular: impl Fn() -> io::Error,
) -> io::Result<File> {
    refuse_link(path).map_err(|_| not_regular())?;
    let file = File::options().create(true).append(true).open(path)?;
    if !file.metadata()?.file_type().is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

/// Whether this process may create files in the directory `dir` (as far as its read-only attribute says: Windows'
/// access lists are not read here).
pub(crate) fn writable(dir: &Path) -> bool {
    std::fs::metadata(dir).is_ok_and(|m| !m.permissions().readonly())
}
