//! The static namespace init embedded at build time (`build.rs`), made runnable without touching the disk: its bytes
//! are written once per executor into a `memfd`, sealed against any change, reopened read-only, and exec'd as
//! `/proc/self/fd/N`.
//!
//! Why a memfd and not a file: nothing on disk to install, find or keep in step with the binary (`cargo install`
//! copies one binary), no directory that may be `noexec`, and a sealed memfd cannot be modified by anyone — a file
//! beside the binary can be by whoever may write that directory. Where the host forbids executing a memfd
//! (`vm.memfd_noexec = 2`, a security module), creating or running it fails and the executor uses its next init
//! candidate.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

/// A runnable copy of the embedded init: the open, sealed, read-only memfd and the path that execs it.
#[derive(Clone)]
pub(crate) struct EmbeddedInit {
    /// Kept open as long as any spawn may exec `path`: a closed descriptor's number could be reused by another file.
    fd: Arc<OwnedFd>,
    path: PathBuf,
}

impl EmbeddedInit {
    /// The path to exec (`/proc/self/fd/N`, resolved in the child, which has a copy of the descriptor until exec).
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl std::fmt::Debug for EmbeddedInit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "embedded init (memfd {})", self.fd.as_raw_fd())
    }
}

/// The embedded init's bytes, when this build has one.
fn bytes() -> Option<&'static [u8]> {
    #[cfg(shellward_embedded_init)]
    {
        Some(include_bytes!(env!("SHELLWARD_EMBEDDED_INIT")))
    }
    #[cfg(not(shellward_embedded_init))]
    {
        None
    }
}

/// Makes the embedded init runnable; `Ok(None)` when this build has none.
pub(crate) fn load() -> io::Result<Option<EmbeddedInit>> {
    let Some(bytes) = bytes() else {
        return Ok(None);
    };
    let name = c"shellward-init";
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // SAFETY: memfd_create with a valid C string; the result is checked.
    let mut raw = unsafe { libc::memfd_create(name.as_ptr(), flags | libc::MFD_EXEC) };
    if raw < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        // Kernels before 6.3 do not know MFD_EXEC (and every memfd may be executed there).
        // SAFETY: as above.
        raw = unsafe { libc::memfd_create(name.as_ptr(), flags) };
    }
    if raw < 0 {
        return Err(annotate(io::Error::last_os_error(), "create a memfd"));
    }
    // SAFETY: `raw` is a descriptor we just created and own.
    let writable = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut file = std::fs::File::from(writable);
    io::Write::write_all(&mut file, bytes).map_err(|e| annotate(e, "write the memfd"))?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: fcntl on a descriptor we own.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(annotate(io::Error::last_os_error(), "seal the memfd"));
    }
    // exec refuses a file open for writing (ETXTBSY): keep a read-only descriptor and close the writable one.
    let read_only = std::fs::File::open(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_err(|e| annotate(e, "reopen the memfd read-only through /proc/self/fd"))?;
    drop(file);
    let fd = above_child_descriptors(OwnedFd::from(read_only))
        .map_err(|e| annotate(e, "move the memfd's descriptor above 3"))?;
    let path = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    Ok(Some(EmbeddedInit {
        fd: Arc::new(fd),
        path,
    }))
}

/// The lowest descriptor number the init's descriptor may have: the spawned child puts its standard streams on 0-2
/// (`dup2`) before it execs `/proc/self/fd/N`, so an `N` of 2 or less would exec one of those instead (`EACCES`: a
/// pipe), and the per-command init once also took 3. A host with such a descriptor free when the executor started
/// got exactly that, and silently ran every command without a PID namespace.
const FIRST_SAFE_FD: i32 = 4;

/// `fd`, or a copy of it numbered [`FIRST_SAFE_FD`] or above (close-on-exec) when it is lower.
fn above_child_descriptors(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() >= FIRST_SAFE_FD {
        return Ok(fd);
    }
    // SAFETY: fcntl on a descriptor we own; the result is checked and owned from here on.
    let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, FIRST_SAFE_FD) };
    if moved < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor this process owns.
    Ok(unsafe { OwnedFd::from_raw_fd(moved) })
}

fn annotate(e: io::Error, step: &str) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("cannot {step} for the embedded namespace init: {e}"),
    )
}

#[cfg(all(test, shellward_embedded_init))]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// The init's descriptor is never one the child overwrites before exec, even when it would be numbered 3 (in a
    /// multi-threaded host another thread can close 3 between the memfd's creation and its read-only reopening).
    /// Runs itself again in a fresh process of this test binary, where descriptor 3 is free and nothing else runs.
    #[test]
    fn the_init_descriptor_is_above_the_ones_the_child_replaces() {
        const CHILD: &str = "SHELLWARD_TEST_EMBEDDED_INIT_LOW_FD";
        let name = "sys::linux::embedded_init::tests::the_init_descriptor_is_above_the_ones_the_child_replaces";
        if shellward_test_support::in_fresh_process(CHILD) {
            // SAFETY: F_GETFD only asks whether descriptor 3 is open.
            let three_free = unsafe { libc::fcntl(3, libc::F_GETFD) } < 0;
            println!("fd3-free={three_free}");
            let low = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
            assert_eq!(low.as_raw_fd(), 3, "the lowest free descriptor");
            let moved = above_child_descriptors(low).unwrap();
            assert!(moved.as_raw_fd() >= FIRST_SAFE_FD, "{moved:?}");
            let init = load().unwrap().expect("this build embeds the init");
            assert!(init.fd.as_raw_fd() >= FIRST_SAFE_FD, "{init:?}");
            return;
        }
        let stdout = shellward_test_support::rerun_in_fresh_process(name, CHILD);
        assert!(
            stdout.contains("fd3-free=true"),
            "the fresh process had descriptor 3 open, so this proved nothing: {stdout}"
        );
    }

    #[test]
    fn the_memfd_holds_the_init_and_nobody_can_change_it() {
        let init = load().unwrap().expect("this build embeds the init");
        let mut copy = Vec::new();
        std::fs::File::open(init.path())
            .unwrap()
            .read_to_end(&mut copy)
            .unwrap();
        assert_eq!(copy, bytes().unwrap(), "the memfd is not the embedded init");
        assert_eq!(&copy[..4], b"\x7fELF");
        // SAFETY: fcntl on a descriptor the test owns.
        let seals = unsafe { libc::fcntl(init.fd.as_raw_fd(), libc::F_GET_SEALS) };
        let wanted =
            libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
        assert_eq!(seals & wanted, wanted, "seals {seals:#x}");
        // Even reopened for writing (as anyone who can reach /proc/PID/fd could), it cannot be written or resized.
        let mut writer = std::fs::OpenOptions::new()
            .write(true)
            .open(init.path())
            .unwrap();
        let e = writer.write_all(b"#!/bin/sh\n").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
        assert!(writer.set_len(0).is_err());
        drop(writer);
        let mut again = Vec::new();
        std::fs::File::open(init.path())
            .unwrap()
            .read_to_end(&mut again)
            .unwrap();
        assert_eq!(again, copy);
    }
}
