//! A command's streams as the portable core reads and writes them, on every Unix (Linux here, macOS and FreeBSD
//! through `sys/bsd`): its output as an async reader, its input as a sink that writes without blocking, a
//! terminal's master side read until hang-up.

use crate::results::ExitState;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// The host's end of one of a command's standard streams.
pub(crate) type Stream = OwnedFd;

/// A command's output pipe as an async reader.
pub(crate) fn pipe_reader(
    stream: Stream,
) -> io::Result<impl tokio::io::AsyncRead + Unpin + Send + 'static> {
    tokio::net::unix::pipe::Receiver::from_owned_fd(stream)
}

/// Where a command's input is written: a pipe's write end or a terminal's master side, non-blocking and watched by
/// the runtime.
pub(crate) struct InputSink {
    fd: AsyncFd<OwnedFd>,
}

impl InputSink {
    /// Watches `stream` for writability.
    pub(crate) fn new(stream: Stream) -> io::Result<InputSink> {
        let fd = nonblocking(stream)?;
        // SAFETY: the `OwnedFd` moves into the `AsyncFd`, which keeps it open for its whole lifetime.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::WRITABLE) }?;
        Ok(InputSink { fd })
    }

    /// Writes some of `bytes` once the stream can take them; returns how many were written. Cancel-safe: nothing is
    /// written unless the call returns.
    pub(crate) async fn write_some(&self, bytes: &[u8]) -> io::Result<usize> {
        loop {
            let mut ready = self.fd.writable().await?;
            let result = ready.try_io(|fd| {
                // SAFETY: write from a buffer we own to a descriptor the AsyncFd keeps open.
                let n = unsafe {
                    libc::write(fd.get_ref().as_raw_fd(), bytes.as_ptr().cast(), bytes.len())
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match result {
                Err(_would_block) => continue,
                Ok(r) => return r,
            }
        }
    }

    /// The `(device, inode)` the command's processes see as their stdin, where the platform can tell.
    pub(crate) fn identity(&self, terminal: bool) -> Option<(u64, u64)> {
        crate::sys::input_identity(self.fd.get_ref().as_raw_fd(), terminal)
    }
}

/// Whether a failed write means the reading side is gone (the command closed stdin or ended; a terminal hung up).
pub(crate) fn is_input_gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EPIPE | libc::EIO))
}

/// Sets `O_NONBLOCK` on a descriptor (shared by its duplicates: the same open file).
fn nonblocking(fd: OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(fd)
}

/// Reads a terminal's master side, handing each chunk to `record`, until the terminal is gone (every slave
/// descriptor closed: `EIO`, the terminal's end of file). Returns the error that ended it otherwise.
pub(crate) async fn read_terminal(stream: Stream, mut record: impl FnMut(&[u8])) -> io::Result<()> {
    let fd = nonblocking(stream)?;
    // SAFETY: the `OwnedFd` moves into the `AsyncFd`, which keeps it open for its whole lifetime.
    let afd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?;
    let mut buf = vec![0u8; 8 * 1024];
    loop {
        let mut ready = afd.readable().await?;
        let read = ready.try_io(|fd| {
            // SAFETY: read into a buffer we own from a descriptor the AsyncFd keeps open.
            let n =
                unsafe { libc::read(fd.get_ref().as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match read {
            Err(_would_block) => continue,
            Ok(Ok(0)) => return Ok(()),
            Ok(Ok(n)) => record(&buf[..n]),
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
            // EIO: the last slave descriptor closed — the terminal's end of file.
            Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Ok(()),
            Ok(Err(e)) => return Err(e),
        }
    }
}

/// A leader's wait status as an [`ExitState`]: its exit code, or the signal that ended it.
pub(crate) fn exit_state(status: std::process::ExitStatus) -> ExitState {
    match (status.code(), status.signal()) {
        (Some(c), _) => ExitState::Code(c),
        (None, Some(sig)) => ExitState::Signal(sig),
        _ => ExitState::Code(-1),
    }
}
