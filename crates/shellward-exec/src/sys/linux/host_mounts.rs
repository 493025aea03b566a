//! What keeps the host's own files out of a command's reach beyond making them read-only, in a session's sandbox:
//!
//! - **Pins.** A read-only bind protects a path's contents, not the names that lead to it: a command could rename a
//!   writable ancestor away (`mv ~/.cache/shellward ~/.cache/x`; the kernel renames a directory with mounts below it)
//!   and build a tree of its own in its place, which the next shellward start would trust (a policy cache with the
//!   command's key, a configuration with no guard). So every ancestor of a protected path is made a mount point of its
//!   own (bound onto itself, writable as before): a mount point cannot be renamed, removed or replaced in the
//!   namespace it is mounted in (`EBUSY`), so every name from `/` to the protected path stays the host's. Ancestors
//!   that are mount points already are left as they are. [`ancestors_to_pin`] chooses them, once per executor.
//! - **Logs.** Every executor of this user keeps its log directory under one per-user root (`logdir`). The sandbox
//!   covers that root with the session's skeleton of it and mounts back, read-only at its own path, only the
//!   directory of the session's own logs: a session reads its own commands' logs (the `log_path` results name),
//!   never another session's or another shellward instance's, including instances started after the sandbox was
//!   made.
//!
//! The routines run in the child that becomes a sandbox's pid 1, between clone and exec: system calls on
//! NUL-terminated strings prepared beforehand, no allocation.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// `open_tree(2)`: clone the mount tree at the path instead of opening it.
const OPEN_TREE_CLONE: libc::c_uint = 1;
/// `open_tree(2)`: the mounts below too.
const AT_RECURSIVE: libc::c_uint = 0x8000;
/// `move_mount(2)`: the source is the file descriptor itself.
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

/// The ancestors of `protected` to pin, shallow first and without repeats: every directory strictly between `/` and
/// each path that `is_mount_root` does not already call a mount point. Paths are absolute (the executor's settings
/// are checked for that).
pub(crate) fn ancestors_to_pin(
    protected: &[PathBuf],
    is_mount_root: impl Fn(&Path) -> bool,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for path in protected {
        let mut chain: Vec<&Path> = path.ancestors().skip(1).collect();
        chain.retain(|a| a.parent().is_some());
        for ancestor in chain.into_iter().rev() {
            if !out.iter().any(|p| p == ancestor) && !is_mount_root(ancestor) {
                out.push(ancestor.to_path_buf());
            }
        }
    }
    // Shallow first: a deeper pin is made inside its ancestor's, and kept by the recursive binds that follow.
    out.sort_by_key(|p| p.components().count());
    out
}

/// Whether `path` is the root of a mount in this namespace (`statx`'s `STATX_ATTR_MOUNT_ROOT`); false where the
/// kernel does not say.
pub(crate) fn is_mount_root(path: &Path) -> bool {
    const STATX_ATTR_MOUNT_ROOT: u64 = 0x2000;
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statx(2) on a NUL-terminated string and a zeroed struct it fills.
    unsafe {
        let mut st: libc::statx = std::mem::zeroed();
        if libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            0,
            &mut st,
        ) != 0
        {
            return false;
        }
        st.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT != 0
            && st.stx_attributes & STATX_ATTR_MOUNT_ROOT != 0
    }
}

/// Makes `path` a mount point of its own (bound onto itself with what is mounted below it), so it cannot be renamed
/// or replaced. Returns the errno on failure. Call it in a child with a mount namespace of its own; async-signal-safe.
pub(crate) fn pin(path: &CStr) -> Result<(), i32> {
    super::mount_calls::bind_onto_itself(path)
}

/// The log root a sandbox covers, and the session's own directory under it that it binds back (see the module).
///
/// The cover is not a fresh `tmpfs`: the directories the session's own is mounted on would have to be made in it, and a
/// sandbox without privilege makes its mounts before its user namespace maps any user (`mkdir` fails with
/// `EOVERFLOW`). So the executor keeps a skeleton per session ([`skeleton_of`]: empty directories on the way from the
/// root to the session's), bound over the root; the session's directory is then mounted on its place in it.
#[derive(Debug, Clone)]
pub(crate) struct LogView {
    /// The per-user root holding every executor's log directory.
    root: CString,
    /// The session's skeleton of the root, bound over it.
    skeleton: CString,
    /// The session's own log directory (the same path before and after the cover).
    own: CString,
}

/// The skeleton of the log root kept for the session whose logs are in `own` (`<root>/<instance>/<session>`):
/// `<root>/<instance>/.view-<session>`, holding `<instance>/<session>` as empty directories.
pub(crate) fn skeleton_of(own: &Path) -> Option<(PathBuf, PathBuf)> {
    let session = own.file_name()?;
    let instance_dir = own.parent()?;
    let instance = instance_dir.file_name()?;
    let mut view_name = std::ffi::OsString::from(".view-");
    view_name.push(session);
    let view = instance_dir.join(view_name);
    let inner = view.join(instance).join(session);
    Some((view, inner))
}

impl LogView {
    /// The view of `own` (a session's log directory, `<root>/<instance>/<session>`); `None` when `own` is not there.
    pub(crate) fn new(root: &Path, own: &Path) -> Option<LogView> {
        if own.parent()?.parent()? != root {
            return None;
        }
        let (view, _) = skeleton_of(own)?;
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).ok();
        Some(LogView {
            root: c(root)?,
            skeleton: c(&view)?,
            own: c(own)?,
        })
    }

    /// Covers the root with the skeleton and mounts the session's own directory back in it, all read-only. Returns
    /// the errno on failure.
    ///
    /// # Safety
    /// Call only in a child between clone and exec, in a mount namespace of its own (it changes the calling
    /// process's mounts); async-signal-safe.
    pub(crate) unsafe fn apply(&self) -> Result<(), i32> {
        // SAFETY: system calls on NUL-terminated strings prepared before the clone and on a descriptor this function
        // opens and closes; no allocation.
        unsafe {
            let errno = || *libc::__errno_location();
            // The session's directory as a detached copy of its mount, taken before the cover hides it.
            let tree = libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                self.own.as_ptr(),
                OPEN_TREE_CLONE | AT_RECURSIVE | libc::O_CLOEXEC as libc::c_uint,
            ) as libc::c_int;
            if tree < 0 {
                return Err(errno());
            }
            let mut result = Ok(());
            if libc::mount(
                self.skeleton.as_ptr(),
                self.root.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
                || libc::syscall(
                    libc::SYS_move_mount,
                    tree,
                    c"".as_ptr(),
                    libc::AT_FDCWD,
                    self.own.as_ptr(),
                    MOVE_MOUNT_F_EMPTY_PATH,
                ) != 0
            {
                result = Err(errno());
            }
            libc::close(tree);
            result?;
            // The cover and the session's directory in it, read-only.
            super::mount_calls::read_only(&self.root)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ancestor_but_the_root_and_mount_points_is_pinned_shallow_first() {
        let protected = [
            PathBuf::from("/home/u/.cache/shellward/policies"),
            PathBuf::from("/home/u/.cache/shellward/oci"),
            PathBuf::from("/srv/proj/.shellward/shellward.toml"),
            PathBuf::from("/top"),
        ];
        let pins = ancestors_to_pin(&protected, |p| p == Path::new("/home"));
        let pins: Vec<&str> = pins.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            pins,
            [
                "/srv",
                "/home/u",
                "/srv/proj",
                "/home/u/.cache",
                "/srv/proj/.shellward",
                "/home/u/.cache/shellward",
            ]
        );
    }

    #[test]
    fn a_log_view_covers_the_root_with_the_session_s_skeleton() {
        let root = Path::new("/tmp/.shellward-logs-0");
        let own = Path::new("/tmp/.shellward-logs-0/shellward-abc/s-1");
        let v = LogView::new(root, own).unwrap();
        assert_eq!(v.root.to_str().unwrap(), "/tmp/.shellward-logs-0");
        assert_eq!(
            v.skeleton.to_str().unwrap(),
            "/tmp/.shellward-logs-0/shellward-abc/.view-s-1"
        );
        assert_eq!(v.own.to_str().unwrap(), own.to_str().unwrap());
        let (view, inner) = skeleton_of(own).unwrap();
        assert_eq!(inner, view.join("shellward-abc/s-1"));
        assert!(LogView::new(Path::new("/a"), Path::new("/b/c/d")).is_none());
        assert!(LogView::new(root, Path::new("/tmp/.shellward-logs-0/s-1")).is_none());
    }
}
