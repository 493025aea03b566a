//! The command's streams on Windows. Anonymous pipes have no readiness notifications, so each is served by a
//! thread of its own that blocks in `ReadFile`/`WriteFile` and is bridged to the runtime by an in-memory pipe: the
//! portable core reads and writes them as on Unix.

use super::platform::Leader;
use super::tree::Tree;
use crate::results::ExitState;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::windows::io::OwnedHandle;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// The host's end of one of a command's standard streams (a pipe handle).
pub(crate) type Stream = OwnedHandle;

/// How much a bridge holds between the thread and the runtime.
const BRIDGE: usize = 64 * 1024;

/// A command's output pipe as an async reader: a thread reads the pipe until its end of file.
pub(crate) fn pipe_reader(
    stream: Stream,
) -> io::Result<impl tokio::io::AsyncRead + Unpin + Send + 'static> {
    let runtime = tokio::runtime::Handle::current();
    let (mut to_runtime, reader) = tokio::io::duplex(BRIDGE);
    let mut pipe = File::from(stream);
    std::thread::Builder::new()
        .name("shellward-output".into())
        .spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                // A broken pipe (every writer gone) reads as the end of file.
                match pipe.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if runtime.block_on(to_runtime.write_all(&buf[..n])).is_err() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
        })?;
    Ok(reader)
}

/// Where a command's input is written: a pipe whose writes a thread of its own makes. Dropping it closes the pipe
/// (the command reads its end of file).
pub(crate) struct InputSink {
    to_thread: tokio::sync::Mutex<DuplexStream>,
}

impl InputSink {
    /// Starts the thread that writes to `stream`.
    pub(crate) fn new(stream: Stream) -> io::Result<InputSink> {
        let runtime = tokio::runtime::Handle::current();
        let (to_thread, mut from_runtime) = tokio::io::duplex(BRIDGE);
        let mut pipe = File::from(stream);
        std::thread::Builder::new()
            .name("shellward-input".into())
            .spawn(move || {
                let mut buf = vec![0u8; BRIDGE];
                loop {
                    match runtime.block_on(from_runtime.read(&mut buf)) {
                        Ok(0) | Err(_) => break,
                        // A failed write (the command closed its input or ended) drops the bridge: the next write
                        // of the core fails as a broken pipe.
                        Ok(n) => {
                            if pipe
                                .write_all(&buf[..n])
                                .and_then(|()| pipe.flush())
                                .is_err()
                            {
                                break;
                            }
                        }
                    }
                }
            })?;
        Ok(InputSink {
            to_thread: tokio::sync::Mutex::new(to_thread),
        })
    }

    /// Writes some of `bytes` once the bridge can take them; returns how many were written. Cancel-safe.
    pub(crate) async fn write_some(&self, bytes: &[u8]) -> io::Result<usize> {
        self.to_thread.lock().await.write(bytes).await
    }

    /// Not known on Windows.
    pub(crate) fn identity(&self, _terminal: bool) -> Option<(u64, u64)> {
        None
    }
}

/// Whether a failed write means the reading side is gone.
pub(crate) fn is_input_gone(e: &io::Error) -> bool {
    // ERROR_BROKEN_PIPE, ERROR_NO_DATA.
    e.kind() == io::ErrorKind::BrokenPipe || matches!(e.raw_os_error(), Some(109 | 232))
}

/// There are no terminals on Windows yet (a `tty` start is refused): the stream is read as a pipe.
pub(crate) async fn read_terminal(stream: Stream, mut record: impl FnMut(&[u8])) -> io::Result<()> {
    let mut reader = pipe_reader(stream)?;
    let mut buf = vec![0u8; 8 * 1024];
    loop {
        match reader.read(&mut buf).await? {
            0 => return Ok(()),
            n => record(&buf[..n]),
        }
    }
}

/// Waits for the leader to exit on a thread of its own, then takes its exit code. `exited` runs once it has exited.
pub(crate) async fn wait_leader(
    leader: Leader,
    tree: &Tree,
    exited: impl FnOnce(),
) -> io::Result<ExitState> {
    let reap = tree.leader().clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut child = leader.child;
    std::thread::Builder::new()
        .name("shellward-wait".into())
        .spawn(move || {
            let status = reap.reap(|| child.wait());
            let _ = tx.send(status);
        })?;
    let status = rx.await.unwrap_or_else(|_| {
        Err(io::Error::other(
            "the waiting thread ended without a status",
        ))
    });
    exited();
    status.map(|s| ExitState::Code(s.code().unwrap_or(-1)))
}
