//! The mount primitives a sandbox's pid 1 uses between clone and exec: making a path read-only with the mounts below
//! it (`mount_setattr`, or a bind remount on kernels before 5.12) and binding a path onto itself. System calls on
//! NUL-terminated strings prepared beforehand, no allocation; each returns the errno on failure.

use std::ffi::CStr;

/// `mount_setattr(2)` and its argument (Linux 5.12+).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const AT_RECURSIVE: libc::c_int = 0x8000;

/// Makes `path` read-only in this mount namespace, with everything mounted below it. Returns the errno on failure.
///
/// # Safety
/// In the child between clone and exec, in a mount namespace of its own (as `child_setup`'s `Hardening::mounts`).
pub(crate) unsafe fn read_only(path: &CStr) -> Result<(), i32> {
    // SAFETY: system calls on a NUL-terminated string and stack memory.
    unsafe {
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_RDONLY,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        let setattr = || {
            libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                path.as_ptr(),
                AT_RECURSIVE,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            )
        };
        let errno = || *libc::__errno_location();
        // A mount point (`/sys`, a cgroup hierarchy) is changed where it is; anything else is first bound onto
        // itself (`EINVAL`: not the root of a mount).
        if setattr() == 0 {
            return Ok(());
        }
        match errno() {
            libc::EINVAL => {}
            libc::ENOSYS => return remount_read_only(path),
            e => return Err(e),
        }
        bind_onto_itself(path)?;
        if setattr() == 0 {
            return Ok(());
        }
        match errno() {
            libc::ENOSYS => remount_read_only(path),
            e => Err(e),
        }
    }
}

/// Binds `path` (with what is mounted below it) onto itself, so it is the root of a mount of its own. Returns the errno
/// on failure. Async-signal-safe.
pub(crate) fn bind_onto_itself(path: &CStr) -> Result<(), i32> {
    // SAFETY: mount(2) on a NUL-terminated string; no allocation.
    unsafe {
        if libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        ) != 0
        {
            return Err(*libc::__errno_location());
        }
    }
    Ok(())
}

/// Kernels before 5.12: a read-only bind remount of `path` (not of the mounts below it).
///
/// # Safety
/// In the child between clone and exec, in a mount namespace of its own (as `child_setup`'s `Hardening::mounts`).
unsafe fn remount_read_only(path: &CStr) -> Result<(), i32> {
    bind_onto_itself(path)?;
    // SAFETY: as the caller's.
    unsafe {
        if libc::mount(
            std::ptr::null(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
            std::ptr::null(),
        ) != 0
        {
            return Err(*libc::__errno_location());
        }
    }
    Ok(())
}
