//! The leader's exit on macOS and FreeBSD, turned into an [`ExitState`]: a kqueue `EVFILT_PROC`/`NOTE_EXIT` event
//! watched by the runtime (no thread held, no polling), else a blocking wait on a thread of its own.

use super::Leader;
use super::tree::Tree;
use crate::results::ExitState;
use crate::sys::unix::exit::reap_on_exit;
#[cfg(not(target_os = "linux"))]
use nix::sys::event::{EvFlags, EventFilter, FilterFlag, KEvent, Kqueue};
use std::io;
use std::os::fd::OwnedFd;

/// No kqueue on Linux (where this file is built for its tests): the blocking wait.
#[cfg(target_os = "linux")]
fn exit_watch(_pid: i32) -> io::Result<OwnedFd> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "no kqueue on Linux",
    ))
}

/// A kqueue that becomes readable when `pid` exits (the event is registered before this returns: an exit after it
/// is never missed; a process already gone is an error, and the caller waits for it directly).
#[cfg(not(target_os = "linux"))]
fn exit_watch(pid: i32) -> io::Result<OwnedFd> {
    let kq = Kqueue::new()?;
    let ident = usize::try_from(pid).map_err(|_| io::Error::other("a negative process id"))?;
    let event = KEvent::new(
        ident,
        EventFilter::EVFILT_PROC,
        EvFlags::EV_ADD | EvFlags::EV_ONESHOT,
        FilterFlag::NOTE_EXIT,
        0,
        0,
    );
    let now = nix::libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    kq.kevent(&[event], &mut [], Some(now))?;
    Ok(OwnedFd::from(kq))
}

/// Waits for the leader to exit and reaps it. `exited` runs once it has exited and, when the kqueue saw it, before it
/// is reaped (its pid is still its own then).
pub(crate) async fn wait_leader(
    leader: Leader,
    tree: &Tree,
    exited: impl FnOnce(),
) -> io::Result<ExitState> {
    let watch = exit_watch(leader.pid());
    let mut child = leader.child;
    reap_on_exit(watch, tree.leader(), exited, move || child.wait()).await
}
