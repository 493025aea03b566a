//! What a command's first process does to itself between clone and exec, on every spawn path (the `clone3` fast path
//! and the `pre_exec` fallback): one set of routines both call, so the two paths cannot drift apart.
//!
//! - [`early`] first: signal dispositions reset, the executor's death signal, the process-count group joined before
//!   anything can fork, the resource limits.
//! - Then each path's own steps (descriptors, process group or session, working directory: `std` does these on the
//!   fallback), with the mounts below where the child makes a sandbox.
//! - [`Hardening::privileges`] last, before exec: every earlier step may need a capability it drops.
//!
//! [`Hardening`] is prepared once per executor (paths turned into C strings, the capability mask computed), so the
//! child allocates nothing and makes only async-signal-safe system calls (through `rustix` where that needs no
//! `unsafe`):
//!
//! - **mounts** (only in the child that becomes pid 1 of a session's new sandbox; the session's commands enter the
//!   mount namespace it made): mounts made private, a `/proc` of the new PID namespace, then every path of [`Hardening::read_only`] bound onto itself
//!   and made read-only with its sub-mounts (`mount_setattr(AT_RECURSIVE)`): `/sys` with every cgroup hierarchy,
//!   the kernel's writable `/proc` files (`/proc/sys`, `/proc/sysrq-trigger`, …), the cgroup hierarchies mounted
//!   elsewhere, the executor's log directory and the host's own files (config, policies, caches); then every path of
//!   [`Hardening::hidden`] (the host's secrets: token file, cache key, audit log; the operator's `deny_read`) covered
//!   by a socket node no one can open (a file: reading it fails) or an empty read-only `tmpfs` (a directory). A path that does not exist is skipped; any other failure fails the
//!   start (fail closed), naming the path.
//! - **privileges**: as root (the executor holds `CAP_SETPCAP`), every capability outside [`crate::KEPT_CAPABILITIES`] and
//!   [`crate::ExecutorConfig::keep_capabilities`] is dropped from the bounding set, the inheritable set is cleared and
//!   the ambient set emptied, so the command's programs never hold them (`umount /proc`, `ptrace`, module loading,
//!   raw I/O, `mount`, …); for every user, `no_new_privs` is set, so no set-user-id program or file capability can
//!   give them back.
//!
//! - **network** (before privileges, per command): with a plan's network `none` or `loopback`, a network namespace
//!   of the command's own ([`network`]), its loopback brought up for `loopback`.
//! - **writes** (after privileges, per command): the plan's Landlock ruleset applied ([`restrict_writes`]; built
//!   once per set of writable paths by `sys::linux::landlock`).
//! - **system calls** (last before exec, per command): the plan's seccomp program installed ([`restrict_syscalls`];
//!   compiled once per deny list by `sys::linux::seccomp`).
//!
//! Without `CAP_SYS_ADMIN` the command cannot undo the mounts (no `umount`, no `mount -o remount,rw`).

use super::mount_calls::read_only;
use crate::capabilities::{CAPABILITY_NAMES, KEPT_CAPABILITIES, capability_number};
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Paths every command sees read-only, when it has a mount namespace of its own: the kernel's writable files and
/// the cgroup hierarchies (under `/sys/fs/cgroup`).
const SYSTEM_READ_ONLY: &[&str] = &[
    "/sys",
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/irq",
    "/proc/bus",
    "/proc/fs",
];

/// The executor's preparation of every command's set-up (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Hardening {
    /// Bit `n` set: drop capability `n` from the bounding set (0 where the executor cannot, i.e. is not root).
    drop_caps: u64,
    /// Paths made read-only in a command's own mount namespace, in order.
    read_only: Vec<CString>,
    /// Paths covered so commands cannot read them, in order.
    hidden: Vec<CString>,
    /// What covers a hidden file: a unix socket's node in the log directory, which no one can open (`ENXIO`), so a
    /// read fails instead of reading empty; `/dev/null` where it cannot be made.
    cover: CString,
    /// Ancestors of the host's own files, made mount points so no name leading to them can be renamed or replaced
    /// (`host_mounts`), shallow first.
    pins: Vec<CString>,
    /// The per-user root of every executor's log directory, covered in a sandbox; none without a log directory.
    log_root: Option<CString>,
    /// The session's own log directory to bind back under the covered root (set per sandbox by
    /// [`Hardening::for_session_logs`]); without it the whole root is hidden.
    logs: Option<super::host_mounts::LogView>,
    /// A preview's copy-on-write layers, mounted first (set per preview sandbox by [`Hardening::with_overlay`]).
    overlay: Option<std::sync::Arc<super::overlay::PreviewLayers>>,
    /// The write accesses a preview's ruleset handles (Landlock bits), which its overlays' rules allow.
    write_mask: u64,
    /// A preview sandbox's pid 1: the host's paths are covered later, by the preview's command after its overlays
    /// (whose layers are in the log directory the cover hides).
    cover_later: bool,
}

/// Why a child's set-up failed: the step and the `errno`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Failure {
    /// [`STEP_PRIVATE`], [`STEP_CAPS`], [`STEP_NO_NEW_PRIVS`], or [`STEP_READ_ONLY`] + the path's index.
    pub(crate) step: i32,
    /// The error number.
    pub(crate) errno: i32,
}

/// Making the mounts private failed.
pub(crate) const STEP_PRIVATE: i32 = 1;
/// Dropping capabilities failed.
pub(crate) const STEP_CAPS: i32 = 2;
/// Setting `no_new_privs` failed.
pub(crate) const STEP_NO_NEW_PRIVS: i32 = 3;
/// Setting the death signal failed.
pub(crate) const STEP_DEATH_SIGNAL: i32 = 4;
/// Joining the process-count (`pids`) group failed.
pub(crate) const STEP_PIDS: i32 = 5;
/// Setting a resource limit failed.
pub(crate) const STEP_RLIMITS: i32 = 6;
/// Giving the command its own network namespace (or bringing its loopback up) failed.
pub(crate) const STEP_NETWORK: i32 = 7;
/// Applying the write confinement (Landlock) failed.
pub(crate) const STEP_LANDLOCK: i32 = 8;
/// Installing the system-call filter (seccomp) failed.
pub(crate) const STEP_SECCOMP: i32 = 9;
/// Making read-only path `n` failed: this plus `n`.
/// Handing the command's connects to the Unix socket broker (`sys::linux::unix_broker`).
pub(crate) const STEP_UNIX_BROKER: i32 = 12;
pub(crate) const STEP_READ_ONLY: i32 = 100;
/// Hiding path `n` failed: this plus `n`.
pub(crate) const STEP_HIDDEN: i32 = 100_000;
/// Pinning ancestor `n` of the host's files failed: this plus `n`.
pub(crate) const STEP_PIN: i32 = 200_000;
/// Covering the log root (and binding the session's own logs back) failed.
pub(crate) const STEP_LOGS: i32 = 10;
/// Covering a preview's layer directory failed.
pub(crate) const STEP_OVERLAY_SCRATCH: i32 = 11;
/// Mounting a preview's overlay `n` failed: this plus `n`.
pub(crate) const STEP_OVERLAY: i32 = 300_000;

impl Hardening {
    /// Prepares the set-up from the executor's settings; `log_dir` is the executor's log directory.
    pub(crate) fn new(
        config: &crate::ExecutorConfig,
        log_dir: Option<&Path>,
    ) -> io::Result<Hardening> {
        let mut kept = 0u64;
        for name in KEPT_CAPABILITIES
            .iter()
            .copied()
            .chain(config.keep_capabilities.iter().map(String::as_str))
        {
            let n = capability_number(name).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "keep_capabilities: {name:?} is not a Linux capability (write it as CAP_SYS_ADMIN or \
                         sys_admin; see capabilities(7))"
                    ),
                )
            })?;
            kept |= 1 << n;
        }
        let drop_caps = if holds_setpcap() {
            let last = last_capability();
            let all = if last >= 63 {
                u64::MAX
            } else {
                (1u64 << (last + 1)) - 1
            };
            all & !kept
        } else {
            0
        };
        let mut paths: Vec<PathBuf> = SYSTEM_READ_ONLY.iter().map(PathBuf::from).collect();
        paths.extend(cgroup_mounts_outside_sys());
        paths.extend(config.read_only_paths.iter().cloned());
        let read_only = c_paths("read_only_paths", paths)?;
        // The log directory sits in a per-user root of every executor's (`logdir`): the sandbox covers that.
        let log_root = log_dir.and_then(Path::parent).map(Path::to_path_buf);
        let protected: Vec<PathBuf> = config
            .read_only_paths
            .iter()
            .filter(|p| p.is_absolute())
            .cloned()
            .chain(log_root.clone())
            .collect();
        let log_root = log_root.and_then(|p| CString::new(p.into_os_string().into_vec()).ok());
        let pins = c_paths(
            "read_only_paths",
            super::host_mounts::ancestors_to_pin(&protected, super::host_mounts::is_mount_root),
        )?;
        // Other instances' log roots under the other default parent (this one's is covered by its own view).
        let own_root = log_dir.and_then(Path::parent);
        let other_roots = crate::logdir::default_roots()
            .into_iter()
            .filter(|r| Some(r.as_path()) != own_root);
        let hidden = c_paths(
            "hidden_paths",
            config.hidden_paths.iter().cloned().chain(other_roots),
        )?;
        let cover = log_dir
            .map(|d| d.join(".hidden"))
            .filter(|p| {
                let _ = std::fs::remove_file(p);
                // The node stays when the listener is dropped; nothing ever listens on it.
                std::os::unix::net::UnixListener::bind(p).is_ok()
            })
            .and_then(|p| CString::new(p.into_os_string().into_vec()).ok())
            .unwrap_or_else(|| c"/dev/null".to_owned());
        Ok(Hardening {
            drop_caps,
            read_only,
            hidden,
            cover,
            pins,
            log_root,
            logs: None,
            overlay: None,
            write_mask: 0,
            cover_later: false,
        })
    }

    /// This hardening for the sandbox of a session whose logs are in `own` (under the log root): that directory alone
    /// stays visible (read-only) under the covered root.
    pub(crate) fn for_session_logs(&self, own: &Path) -> Hardening {
        let mut h = self.clone();
        h.logs = h.log_root.as_deref().and_then(|root| {
            super::host_mounts::LogView::new(
                Path::new(std::ffi::OsStr::from_bytes(root.to_bytes())),
                own,
            )
        });
        h
    }

    /// The hardening of a preview sandbox's pid 1, whose logs are in `own`: its private mounts and `/proc` only, the
    /// rest left to the preview's command ([`Hardening::for_preview`]).
    pub(crate) fn for_preview_init(&self, own: &Path) -> Hardening {
        let mut h = self.for_session_logs(own);
        h.cover_later = true;
        h
    }

    /// The hardening of a preview's command, whose logs are in `own`: its overlays `layers` mounted when it starts,
    /// then the host's paths covered ([`Hardening::preview_view`]).
    pub(crate) fn for_preview(
        &self,
        layers: std::sync::Arc<super::overlay::PreviewLayers>,
        own: &Path,
    ) -> Hardening {
        let mut h = self.for_session_logs(own);
        h.write_mask = super::landlock::write_mask();
        h.overlay = Some(layers);
        h
    }

    /// Nothing beyond `no_new_privs`: for tests of the spawn path itself.
    #[cfg(test)]
    pub(crate) fn none() -> Hardening {
        Hardening {
            drop_caps: 0,
            read_only: Vec::new(),
            hidden: Vec::new(),
            cover: c"/dev/null".to_owned(),
            pins: Vec::new(),
            log_root: None,
            logs: None,
            overlay: None,
            write_mask: 0,
            cover_later: false,
        }
    }

    /// Says what failed, for the start error.
    pub(crate) fn describe(&self, failure: Failure) -> io::Error {
        let os = io::Error::from_raw_os_error(failure.errno);
        let what = match failure.step {
            STEP_PRIVATE => "cannot make the command's mounts private".to_string(),
            STEP_CAPS => "cannot drop the command's capabilities".to_string(),
            STEP_NO_NEW_PRIVS => "cannot set no_new_privs for the command".to_string(),
            STEP_DEATH_SIGNAL => "cannot give the command a death signal".to_string(),
            STEP_PIDS => "cannot put the command in its process-count (pids) group".to_string(),
            STEP_RLIMITS => "cannot set the command's resource limits".to_string(),
            STEP_NETWORK => "cannot give the command a network namespace of its own (its confinement asks for \
                             network \"none\" or \"loopback\"; without privilege this needs the session sandbox's \
                             user namespace — see `shellward sandbox check`)"
                .to_string(),
            STEP_LANDLOCK => "cannot confine the command's writes (Landlock)".to_string(),
            STEP_OVERLAY_SCRATCH => "cannot cover the preview's layer directory in its sandbox".to_string(),
            STEP_SECCOMP => "cannot install the command's system-call filter (seccomp)".to_string(),
            STEP_UNIX_BROKER => "cannot hand the command's Unix socket connects to the broker (a seccomp filter \
                                 with a user-notification listener; its network is not the host's)"
                .to_string(),
            STEP_LOGS => format!(
                "cannot cover the log directories ({}) in the session's sandbox, keeping only its own",
                self.log_root
                    .as_deref()
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ),
            n if n >= STEP_OVERLAY => format!(
                "cannot lay the preview's copy-on-write view (overlayfs) over {} (the kernel needs overlayfs, and \
                 without privilege a user namespace that may mount it: see `shellward sandbox check`)",
                self.overlay
                    .as_ref()
                    .and_then(|o| o.covered().get((n - STEP_OVERLAY) as usize).cloned())
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "a writable path".into())
            ),
            n if n >= STEP_PIN => match self.pins.get((n - STEP_PIN) as usize) {
                Some(p) => format!(
                    "cannot pin {} (an ancestor of the host's own files) in the command's mount namespace",
                    p.to_string_lossy()
                ),
                None => "cannot pin an ancestor of the host's own files".into(),
            },
            n if n >= STEP_HIDDEN => match self.hidden.get((n - STEP_HIDDEN) as usize) {
                Some(p) => format!(
                    "cannot hide {} from the command in its mount namespace",
                    p.to_string_lossy()
                ),
                None => "cannot hide a path from the command in its mount namespace".into(),
            },
            n if n >= STEP_READ_ONLY => match self.read_only.get((n - STEP_READ_ONLY) as usize) {
                Some(p) => format!(
                    "cannot make {} read-only in the command's mount namespace",
                    p.to_string_lossy()
                ),
                None => "cannot make a path read-only in the command's mount namespace".into(),
            },
            _ => "the command's set-up failed".into(),
        };
        // Not an OS error: a failed hardening step must fail the start, never read as "namespaces unavailable".
        io::Error::other(format!(
            "{what}: {os}; the command was not started (the host refused a confinement step shellward relies on)"
        ))
    }

    /// In the child of a new mount and PID namespace: private mounts, a fresh `/proc`, the read-only paths.
    ///
    /// # Safety
    /// Call only in a child between clone and exec (it changes the calling process's mounts); async-signal-safe.
    pub(crate) unsafe fn mounts(&self) -> Result<(), Failure> {
        // SAFETY: plain system calls on NUL-terminated strings that outlive them; no allocation.
        unsafe {
            if libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err(failure(STEP_PRIVATE));
            }
            // A /proc of this namespace: `ps` shows the namespace only. Where the host refuses, the host's stays (the
            // PID namespace still fences signals); nothing else depends on it.
            let _ = libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            );
        }
        if self.cover_later {
            return Ok(());
        }
        // SAFETY: as above.
        unsafe { self.cover_host() }
    }

    /// A preview command's view, in its child once it has entered the preview's sandbox (whose pid 1 made the
    /// sandbox's private mounts and `/proc`; without privilege only now is the sandbox's user namespace mapped, as
    /// overlayfs needs): the overlays mounted (their layers are in the log directory, still visible), then the
    /// host's read-only and hidden paths and the log root covered on top, then the write ruleset `landlock_fd` told
    /// to allow writes beneath the overlays' own directories (not the real ones beneath them).
    ///
    /// # Safety
    /// Async-signal-safe: system calls on memory prepared before the fork.
    pub(crate) unsafe fn preview_view(&self, landlock_fd: RawFd) -> Result<(), Failure> {
        let Some(layers) = &self.overlay else {
            return Ok(());
        };
        // SAFETY: strings prepared before the fork.
        if let Err((i, errno)) = unsafe { layers.mount() } {
            return Err(Failure {
                step: STEP_OVERLAY + i as i32,
                errno,
            });
        }
        // SAFETY: as above.
        unsafe { self.cover_host() }?;
        // The layers' own directory: the command sees its writes through the overlays only.
        // SAFETY: as above.
        if let Err(errno) = unsafe { hide(layers.c_scratch(), &self.cover) } {
            return Err(Failure {
                step: STEP_OVERLAY_SCRATCH,
                errno,
            });
        }
        // SAFETY: as above.
        unsafe { layers.allow_writes(landlock_fd, self.write_mask) }.map_err(|errno| Failure {
            step: STEP_LANDLOCK,
            errno,
        })
    }

    /// The mounts over the host's own paths: pins, read-only paths, hidden paths, the log root's cover.
    ///
    /// # Safety
    /// Async-signal-safe: system calls on memory prepared before the fork.
    unsafe fn cover_host(&self) -> Result<(), Failure> {
        // SAFETY: plain system calls on NUL-terminated strings that outlive them; no allocation.
        unsafe {
            for (i, path) in self.pins.iter().enumerate() {
                if let Err(errno) = super::host_mounts::pin(path) {
                    if errno == libc::ENOENT {
                        continue;
                    }
                    return Err(Failure {
                        step: STEP_PIN + i as i32,
                        errno,
                    });
                }
            }
            for (i, path) in self.read_only.iter().enumerate() {
                if let Err(errno) = read_only(path) {
                    if errno == libc::ENOENT {
                        continue;
                    }
                    return Err(Failure {
                        step: STEP_READ_ONLY + i as i32,
                        errno,
                    });
                }
            }
            for (i, path) in self.hidden.iter().enumerate() {
                if let Err(errno) = hide(path, &self.cover) {
                    if errno == libc::ENOENT {
                        continue;
                    }
                    return Err(Failure {
                        step: STEP_HIDDEN + i as i32,
                        errno,
                    });
                }
            }
            // Last: the cover of hidden files is a node in the log directory.
            let logs = match (&self.logs, &self.log_root) {
                // A kernel without `open_tree` (before 5.2) cannot bind the session's own back: every log is hidden.
                (Some(view), Some(root)) => match view.apply() {
                    Err(libc::ENOSYS) => hide(root, &self.cover),
                    other => other,
                },
                (Some(view), None) => view.apply(),
                (None, Some(root)) => hide(root, &self.cover),
                (None, None) => Ok(()),
            };
            match logs {
                Ok(()) | Err(libc::ENOENT) => {}
                Err(errno) => {
                    return Err(Failure {
                        step: STEP_LOGS,
                        errno,
                    });
                }
            }
        }
        Ok(())
    }

    /// In the child, last before exec: capabilities dropped (as root) and `no_new_privs` set.
    ///
    /// # Safety
    /// Call only in a child between clone and exec (it changes the calling process's credentials);
    /// async-signal-safe.
    pub(crate) unsafe fn privileges(&self) -> Result<(), Failure> {
        // SAFETY: prctl and capget/capset on this task's own credentials, with stack memory only.
        unsafe {
            if self.drop_caps != 0 {
                for cap in 0..64u32 {
                    if self.drop_caps & (1 << cap) != 0
                        && libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0
                    {
                        return Err(failure(STEP_CAPS));
                    }
                }
                // The inheritable set would give them back at exec (root's file sets are full): empty it.
                let mut header = CapHeader {
                    version: LINUX_CAPABILITY_VERSION_3,
                    pid: 0,
                };
                let mut data = [CapData::default(); 2];
                if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0 {
                    return Err(failure(STEP_CAPS));
                }
                for d in &mut data {
                    d.inheritable = 0;
                }
                if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
                    return Err(failure(STEP_CAPS));
                }
            }
            // Empty already unless the host was given ambient capabilities; `EINVAL` on kernels without them.
            if libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            ) != 0
                && *libc::__errno_location() != libc::EINVAL
            {
                return Err(failure(STEP_CAPS));
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(failure(STEP_NO_NEW_PRIVS));
            }
        }
        Ok(())
    }
}

/// The first steps of every spawn path's child (see the module docs and [`early`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Early<'a> {
    /// Signals to reset to their default disposition (bit `n`: signal `n`), from
    /// [`super::fast_spawn::signals_to_reset`].
    pub(crate) reset_signals: u64,
    /// The `tasks` file of the command's `pids` group, open for writing; -1 when there is none.
    pub(crate) join_procs_fd: RawFd,
    /// `(RLIMIT_*, value)` pairs to set, both limits to the value.
    pub(crate) rlimits: &'a [(u32, u64)],
}

/// The child's first steps, shared by both spawn paths: the parent's signal handlers must not run in the child and
/// what it ignores the command must not (dispositions reset), the command dies with the executor (`SIGKILL` as
/// death signal), the whole tree is counted (the `pids` group joined before anything can fork), and the resource
/// limits hold from the start. Async-signal-safe, allocation-free.
pub(crate) fn early(steps: &Early<'_>) -> Result<(), Failure> {
    reset_signals(steps.reset_signals);
    let errno = |e: rustix::io::Errno| e.raw_os_error();
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL)).map_err(
        |e| Failure {
            step: STEP_DEATH_SIGNAL,
            errno: errno(e),
        },
    )?;
    if steps.join_procs_fd >= 0 {
        // Writing 0 moves the calling thread (the whole process: it has one) into the group.
        // SAFETY: the descriptor is open for the duration of the spawn (the caller holds it).
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(steps.join_procs_fd) };
        match rustix::io::write(fd, b"0") {
            Ok(1) => {}
            Ok(_) => {
                return Err(Failure {
                    step: STEP_PIDS,
                    errno: libc::EIO,
                });
            }
            Err(e) => {
                return Err(Failure {
                    step: STEP_PIDS,
                    errno: errno(e),
                });
            }
        }
    }
    for &(resource, value) in steps.rlimits {
        let Some(resource) = rlimit_resource(resource) else {
            return Err(Failure {
                step: STEP_RLIMITS,
                errno: libc::EINVAL,
            });
        };
        let limit = rustix::process::Rlimit {
            current: Some(value),
            maximum: Some(value),
        };
        rustix::process::setrlimit(resource, limit).map_err(|e| Failure {
            step: STEP_RLIMITS,
            errno: errno(e),
        })?;
    }
    Ok(())
}

/// The `rustix` resource of an `RLIMIT_*` number (the ones the executor sets).
// The resource constants are `u32` on glibc and `c_int` on musl: the casts are needed on one of them.
#[allow(clippy::unnecessary_cast)]
fn rlimit_resource(n: u32) -> Option<rustix::process::Resource> {
    use rustix::process::Resource;
    Some(match n {
        n if n == libc::RLIMIT_CORE as u32 => Resource::Core,
        n if n == libc::RLIMIT_AS as u32 => Resource::As,
        n if n == libc::RLIMIT_FSIZE as u32 => Resource::Fsize,
        n if n == libc::RLIMIT_CPU as u32 => Resource::Cpu,
        n if n == libc::RLIMIT_NOFILE as u32 => Resource::Nofile,
        n if n == libc::RLIMIT_NPROC as u32 => Resource::Nproc,
        n if n == libc::RLIMIT_DATA as u32 => Resource::Data,
        n if n == libc::RLIMIT_STACK as u32 => Resource::Stack,
        _ => return None,
    })
}

/// Resets the signals of `mask` to their default disposition. Async-signal-safe: for a child between fork and exec.
fn reset_signals(mask: u64) {
    // SAFETY: `sigaction` with a zeroed (SIG_DFL) action is async-signal-safe and touches no shared memory.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        for sig in 1..64 {
            if mask & (1u64 << sig) != 0 {
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
    }
}

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The network a command's process gives itself (see [`network`]): the host's.
pub(crate) const NET_HOST: i32 = 0;
/// A network namespace of its own, loopback down.
pub(crate) const NET_NONE: i32 = 1;
/// A network namespace of its own, loopback up.
pub(crate) const NET_LOOPBACK: i32 = 2;
/// A network namespace of its own, loopback up, with a listener on the proxy's address handed to the executor (see
/// `proxy_fd::proxy_listener`).
pub(crate) const NET_PROXIED: i32 = 3;

/// The `NET_*` value for a plan's network.
pub(crate) fn net_mode(network: crate::plan::Network) -> i32 {
    match network {
        crate::plan::Network::Host => NET_HOST,
        crate::plan::Network::None => NET_NONE,
        crate::plan::Network::Loopback => NET_LOOPBACK,
        crate::plan::Network::Allow => NET_PROXIED,
    }
}

/// In the child, before [`Hardening::privileges`] (it needs `CAP_SYS_ADMIN` in the user namespace that owns the
/// network namespace: the host's as root, the session sandbox's without privilege): with [`NET_NONE`] or
/// [`NET_LOOPBACK`] the process leaves the host's network — for `prepared` (≥ 0), the session's network namespace of
/// that kind, made once (`session::Sandbox::net`); else a new one of its own, whose only interface is a loopback,
/// brought up for [`NET_LOOPBACK`] and [`NET_PROXIED`] (which then hands a listener to the executor through
/// `proxy_fd`). Async-signal-safe: system calls on stack memory only.
pub(crate) fn network(mode: i32, prepared: RawFd, proxy_fd: RawFd) -> Result<(), Failure> {
    if mode == NET_HOST {
        return Ok(());
    }
    // SAFETY: setns/unshare on this process's own namespaces; the descriptor is held by the parent for the spawn.
    unsafe {
        if prepared >= 0 {
            if libc::setns(prepared, libc::CLONE_NEWNET) != 0 {
                return Err(failure(STEP_NETWORK));
            }
            return Ok(());
        }
        if libc::unshare(libc::CLONE_NEWNET) != 0 {
            return Err(failure(STEP_NETWORK));
        }
    }
    if mode == NET_LOOPBACK || mode == NET_PROXIED {
        loopback_up().map_err(|errno| Failure {
            step: STEP_NETWORK,
            errno,
        })?;
    }
    if mode == NET_PROXIED {
        super::proxy_fd::proxy_listener(proxy_fd).map_err(|errno| Failure {
            step: STEP_NETWORK,
            errno,
        })?;
    }
    Ok(())
}

/// Brings up the loopback interface of the calling thread's network namespace. Returns the errno on failure.
/// Async-signal-safe: a socket, two ioctls on a stack `ifreq`, a close.
pub(crate) fn loopback_up() -> Result<(), i32> {
    // SAFETY: socket, ioctl and close on a descriptor this function owns and a zeroed stack `ifreq`.
    unsafe {
        let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if sock < 0 {
            return Err(*libc::__errno_location());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *dst = *src as libc::c_char;
        }
        let up = if libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) == 0 {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            libc::ioctl(sock, libc::SIOCSIFFLAGS, &req) == 0
        } else {
            false
        };
        let errno = *libc::__errno_location();
        libc::close(sock);
        if up { Ok(()) } else { Err(errno) }
    }
}

/// In the child, after [`Hardening::privileges`] (Landlock needs `no_new_privs`) and last before exec: applies the
/// prepared write-confinement ruleset (`sys::linux::landlock`), when there is one (`fd` ≥ 0). Async-signal-safe.
pub(crate) fn restrict_writes(fd: RawFd) -> Result<(), Failure> {
    if fd < 0 {
        return Ok(());
    }
    // SAFETY: landlock_restrict_self on a ruleset descriptor the parent keeps open for the spawn; flags 0.
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) } != 0 {
        return Err(failure(STEP_LANDLOCK));
    }
    Ok(())
}

/// In the child, last before exec (after `no_new_privs`): installs the prepared seccomp program (`len` instructions
/// at `filter`; none when null). Async-signal-safe: one `prctl` with a stack `sock_fprog`.
pub(crate) fn restrict_syscalls(filter: *const libc::c_void, len: usize) -> Result<(), Failure> {
    if filter.is_null() || len == 0 {
        return Ok(());
    }
    let program = libc::sock_fprog {
        len: len as libc::c_ushort,
        filter: filter as *mut libc::sock_filter,
    };
    // SAFETY: the program points to `len` BPF instructions the parent keeps alive for the spawn (`sock_filter` in
    // seccompiler has libc's layout); PR_SET_SECCOMP copies it into the kernel.
    if unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &program as *const libc::sock_fprog,
        )
    } != 0
    {
        return Err(failure(STEP_SECCOMP));
    }
    Ok(())
}

/// The current `errno` as a failure of `step`.
fn failure(step: i32) -> Failure {
    // SAFETY: reading this thread's errno.
    let errno = unsafe { *libc::__errno_location() };
    Failure { step, errno }
}

/// Absolute, NUL-free paths as C strings, without repeats; `key` names the setting in errors.
fn c_paths(key: &str, paths: impl IntoIterator<Item = PathBuf>) -> io::Result<Vec<CString>> {
    let mut out: Vec<CString> = Vec::new();
    for p in paths {
        if !p.is_absolute() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{key}: {} is not an absolute path (give it from /)",
                    p.display()
                ),
            ));
        }
        let c = CString::new(p.as_os_str().as_bytes()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{key}: {} contains a NUL byte", p.display()),
            )
        })?;
        if !out.contains(&c) {
            out.push(c);
        }
    }
    Ok(out)
}

/// Covers `path` so it cannot be read: a file by a read-only bind of `cover` (a socket node: opening it fails with
/// `ENXIO`; or `/dev/null`), a directory by an empty read-only `tmpfs`. Returns the errno on failure (`ENOENT` when
/// there is nothing to hide).
///
/// # Safety
/// As [`Hardening::mounts`].
unsafe fn hide(path: &CStr, cover: &CStr) -> Result<(), i32> {
    // SAFETY: stat(2) and mount(2) on NUL-terminated strings and stack memory; no allocation.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::lstat(path.as_ptr(), &mut st) != 0 {
            return Err(*libc::__errno_location());
        }
        if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            if libc::mount(
                c"tmpfs".as_ptr(),
                path.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                c"size=4k,mode=0500".as_ptr().cast(),
            ) != 0
            {
                return Err(*libc::__errno_location());
            }
            return Ok(());
        }
        // A symbolic link is covered where it points: the secret is what it names.
        if libc::mount(
            cover.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        ) != 0
        {
            return Err(*libc::__errno_location());
        }
        read_only(path)
    }
}

/// Whether this process may drop capabilities from its children's bounding sets (`CAP_SETPCAP` effective).
fn holds_setpcap() -> bool {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget into stack memory of the documented layout.
    let ok = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } == 0;
    const CAP_SETPCAP: u32 = 8;
    ok && data[0].effective & (1 << CAP_SETPCAP) != 0
}

/// The highest capability number this kernel knows.
fn last_capability() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(CAPABILITY_NAMES.len() as u32 - 1)
        .min(63)
}

/// Mount points of cgroup hierarchies outside `/sys` (under it they are covered by `/sys`).
fn cgroup_mounts_outside_sys() -> Vec<PathBuf> {
    let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fstype = right.split(' ').next()?;
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            let point = super::cgroup::unescape(left.split(' ').nth(4)?);
            let point = PathBuf::from(point);
            (!point.starts_with("/sys")).then_some(point)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_named_as_people_write_them() {
        assert_eq!(capability_number("CAP_SYS_ADMIN"), Some(21));
        assert_eq!(capability_number("cap_sys_admin"), Some(21));
        assert_eq!(capability_number("sys_ptrace"), Some(19));
        assert_eq!(capability_number("CAP_CHOWN"), Some(0));
        assert_eq!(capability_number("CAP_CHECKPOINT_RESTORE"), Some(40));
        assert_eq!(capability_number("CAP_SYS_ADMN"), None);
        assert_eq!(capability_number(""), None);
        for name in KEPT_CAPABILITIES {
            assert!(capability_number(name).is_some(), "{name}");
        }
    }

    #[test]
    fn an_unknown_capability_to_keep_is_refused_with_its_name() {
        let config = crate::ExecutorConfig {
            keep_capabilities: vec!["CAP_SYS_ADMN".into()],
            ..Default::default()
        };
        let e = Hardening::new(&config, None).unwrap_err();
        assert!(e.to_string().contains("\"CAP_SYS_ADMN\""), "{e}");
        assert!(e.to_string().contains("CAP_SYS_ADMIN or sys_admin"), "{e}");
    }

    #[test]
    fn escape_capabilities_are_dropped_for_root_and_kept_ones_stay() {
        let config = crate::ExecutorConfig {
            keep_capabilities: vec!["sys_nice".into()],
            ..Default::default()
        };
        let h = Hardening::new(&config, None).unwrap();
        if !holds_setpcap() {
            assert_eq!(
                h.drop_caps, 0,
                "a process without CAP_SETPCAP drops nothing"
            );
            return;
        }
        for name in [
            "CAP_SYS_ADMIN",
            "CAP_SYS_PTRACE",
            "CAP_SYS_MODULE",
            "CAP_SYS_BOOT",
            "CAP_SYS_RAWIO",
            "CAP_DAC_READ_SEARCH",
            "CAP_MKNOD",
        ] {
            let n = capability_number(name).unwrap();
            assert!(h.drop_caps & (1 << n) != 0, "{name} is kept");
        }
        for name in KEPT_CAPABILITIES.iter().chain(&["CAP_SYS_NICE"]) {
            let n = capability_number(name).unwrap();
            assert!(h.drop_caps & (1 << n) == 0, "{name} is dropped");
        }
    }

    #[test]
    fn relative_read_only_paths_are_refused() {
        let config = crate::ExecutorConfig {
            read_only_paths: vec!["etc/shellward.toml".into()],
            ..Default::default()
        };
        let e = Hardening::new(&config, None).unwrap_err();
        assert!(e.to_string().contains("not an absolute path"), "{e}");
    }
}
