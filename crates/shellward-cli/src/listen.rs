//! Serving HTTP connections for `shellward serve`: the accept loop with a connection cap, hyper's HTTP/1 server with a
//! header-read timeout, bounded graceful shutdown, and safe creation of a unix socket.
//!
//! axum's own `serve` offers neither a header timeout nor a connection cap, so connections are handed to hyper
//! directly (hyper-util's tokio glue and graceful-shutdown watcher); the axum `Router` is the service.

use anyhow::{Context, Result, bail};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Semaphore;

/// Connection limits and the shutdown bound.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most connections open at once.
    pub max_connections: usize,
    /// Time allowed to send a request's headers (also closes idle keep-alive connections).
    pub header_timeout: Duration,
    /// Time requests in flight get after the first shutdown signal.
    pub shutdown_timeout: Duration,
}

/// Where connections come from.
pub enum Listener {
    /// TCP.
    Tcp(tokio::net::TcpListener),
    /// A unix socket.
    Unix(tokio::net::UnixListener),
}

/// Largest request head (request line and headers) a client may send.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Serves `app` until SIGTERM/SIGINT; then stops accepting, lets requests in flight finish for at most
/// `limits.shutdown_timeout` (a second signal ends the wait at once), and returns.
pub async fn serve(listener: Listener, app: Router, limits: Limits) -> std::io::Result<()> {
    let mut signals = Signals::new()?;
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let service = TowerToHyperService::new(app);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    loop {
        // Wait for a free slot first: while the cap is reached, new clients wait in the kernel's backlog.
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            _ = signals.recv() => break,
        };
        macro_rules! spawn_conn {
            ($stream:expr) => {{
                let conn = builder.serve_connection(TokioIo::new($stream), service.clone());
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!("connection ended: {e}");
                    }
                    drop(permit);
                });
            }};
        }
        tokio::select! {
            accepted = accept(&listener) => match accepted {
                Ok(Stream::Tcp(s)) => spawn_conn!(s),
                Ok(Stream::Unix(s)) => spawn_conn!(s),
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = signals.recv() => break,
        }
    }
    drop(listener);
    tracing::info!(
        timeout_ms = limits.shutdown_timeout.as_millis() as u64,
        "shutting down: no new connections; waiting for requests in flight"
    );
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(limits.shutdown_timeout) => {
            tracing::warn!("requests still in flight after the shutdown timeout; stopping anyway");
        }
        _ = signals.recv() => tracing::warn!("second signal: stopping now"),
    }
    Ok(())
}

enum Stream {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

async fn accept(listener: &Listener) -> std::io::Result<Stream> {
    match listener {
        Listener::Tcp(l) => l.accept().await.map(|(s, _)| Stream::Tcp(s)),
        Listener::Unix(l) => l.accept().await.map(|(s, _)| Stream::Unix(s)),
    }
}

/// Compile-time check that both stream kinds fit hyper's I/O bounds.
#[allow(dead_code)]
fn io_bounds<T: AsyncRead + AsyncWrite + Unpin + Send + 'static>() {}
const _: fn() = io_bounds::<tokio::net::TcpStream>;
const _: fn() = io_bounds::<tokio::net::UnixStream>;

/// The stop signals (SIGTERM, SIGINT), watched from before the first connection. SIGHUP reloads the policies.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// Binds a unix socket at `path` with permissions `mode`, never exposing it with wider ones: it is bound in a
/// private (0700) directory beside the target, given its mode, then renamed into place. What is already at `path`
/// is replaced only if it is a socket nobody listens on (a stale one); anything else is an error.
pub fn bind_unix(path: &Path, mode: u32) -> Result<tokio::net::UnixListener> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                bail!(
                    "{} is in use: another server listens there; stop it or choose another path",
                    path.display()
                );
            }
            std::fs::remove_file(path)
                .with_context(|| format!("cannot remove the stale socket {}", path.display()))?;
        }
        Ok(_) => bail!(
            "{} exists and is not a socket; refusing to replace it. Remove it yourself or choose another path",
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot inspect {}", path.display())),
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let private = tempfile::Builder::new()
        .prefix(".shellward-sock-")
        .tempdir_in(parent)
        .with_context(|| format!("cannot create a private directory in {}", parent.display()))?;
    let staged = private.path().join("s");
    let listener = std::os::unix::net::UnixListener::bind(&staged)
        .with_context(|| format!("cannot listen on unix socket {}", path.display()))?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot set the mode of {}", path.display()))?;
    std::fs::rename(&staged, path)
        .with_context(|| format!("cannot move the socket into place at {}", path.display()))?;
    listener.set_nonblocking(true)?;
    Ok(tokio::net::UnixListener::from_std(listener)?)
}
