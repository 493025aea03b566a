//! What a spawn hands back to the executor: the leader process (a `std` child or a `clone3` one with its pidfd), the
//! descriptors of its standard streams, and the guard that kills a leader nobody claims.

use super::pipes::pipe;
use nix::unistd::Pid;
use std::io;
use std::os::fd::OwnedFd;
use std::process::Child;

/// A spawned leader process.
pub(crate) enum Leader {
    /// Spawned by `std::process::Command` (portable path).
    Std(Child),
    /// Spawned by `clone3` (fast path), with its pidfd.
    Raw {
        /// Process id.
        pid: i32,
        /// A pidfd for it.
        pidfd: OwnedFd,
    },
}

impl Leader {
    /// The process id.
    pub(crate) fn pid(&self) -> i32 {
        match self {
            Leader::Std(c) => c.id() as i32,
            Leader::Raw { pid, .. } => *pid,
        }
    }
}

/// The descriptors of a command's standard streams: the child's ends, and the host's.
pub(super) struct Streams {
    /// The child's stdin (`None`: /dev/null), stdout and stderr.
    pub(super) child_in: Option<OwnedFd>,
    pub(super) child_out: Option<OwnedFd>,
    pub(super) child_err: Option<OwnedFd>,
    /// The host's ends: output (and separate stderr), input.
    pub(super) out: OwnedFd,
    pub(super) err: Option<OwnedFd>,
    pub(super) input: Option<OwnedFd>,
    pub(super) terminal: bool,
}

impl Streams {
    /// The streams a start asks for: a terminal for all three, or pipes (stdin a pipe only when it stays open).
    pub(super) fn open(stdin: crate::StdinMode, separate_stderr: bool) -> io::Result<Streams> {
        if let crate::StdinMode::Terminal { rows, cols } = stdin {
            let (master, slave) = super::pty::open(rows, cols)?;
            return Ok(Streams {
                child_in: Some(slave.try_clone()?),
                child_out: Some(slave.try_clone()?),
                child_err: Some(slave),
                input: Some(master.try_clone()?),
                out: master,
                err: None,
                terminal: true,
            });
        }
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = if separate_stderr {
            let (r, w) = pipe()?;
            (Some(r), w)
        } else {
            (None, out_w.try_clone()?)
        };
        let (child_in, input) = match stdin {
            crate::StdinMode::Pipe => {
                let (r, w) = pipe()?;
                (Some(r), Some(w))
            }
            _ => (None, None),
        };
        Ok(Streams {
            child_in,
            child_out: Some(out_w),
            child_err: Some(err_w),
            out: out_r,
            err: err_r,
            input,
            terminal: false,
        })
    }
}

/// What the spawner thread hands back for a start: the leader (killed if nobody claims it), its streams, the pid of
/// its session sandbox's init, whether its writes are confined, and a proxied command's listener (and whether its
/// namespace is now the session's).
pub(super) type Started = (
    Unclaimed,
    Streams,
    Option<i32>,
    bool,
    Option<(OwnedFd, bool)>,
    crate::results::Refusals,
);

/// A spawned leader on its way to the caller; killed if dropped before the caller takes it.
pub(super) struct Unclaimed(pub(super) Option<Leader>);

impl Drop for Unclaimed {
    fn drop(&mut self) {
        if let Some(leader) = self.0.take() {
            abandon(leader);
        }
    }
}

/// Kills and reaps a leader whose spawn nobody waits for any more (its process group too: the leader is not yet
/// reaped, so the group id is still its own).
fn abandon(leader: Leader) {
    let pid = leader.pid();
    let _ = nix::sys::signal::killpg(Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    match leader {
        Leader::Std(mut child) => {
            let _ = child.kill();
            let _ = child.wait();
        }
        Leader::Raw { pidfd, .. } => {
            let _ = super::pidfd::pidfd_send_signal(&pidfd, nix::sys::signal::Signal::SIGKILL);
            let _ = super::pipes::waitpid_blocking(pid);
        }
    }
    tracing::debug!(
        pid,
        "killed a leader whose caller stopped waiting for its start"
    );
}
