//! Serving HTTP connections for `shellward serve`: the accept loop with a connection cap, hyper's HTTP/1 server with a
//! header-read timeout, bounded graceful shutdown, and (in `sys`) safe creation of a unix socket.
//!
//! **Slots go to clients that send requests.** With every slot taken, a new connection closes the one that has been
//! idle longest — connected without a request in progress (it never sent one, sent only part of its headers, or is
//! a keep-alive connection between requests) — instead of waiting behind it. Only when every open connection has a
//! request in progress does a new client wait for one to finish. So idle or slow sockets, which hold a slot until
//! the header timeout, cannot delay a client that sends its request at once: 50 idle sockets against a cap of 8
//! delayed a request by 12 s before this, and by nothing measurable now (`crates/shellward-cli/tests/it/cli_serve.rs`).
//!
//! axum's own `serve` offers neither a header timeout nor a connection cap, so connections are handed to hyper
//! directly (hyper-util's tokio glue and graceful-shutdown watcher); the axum `Router` is the service.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

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
    #[cfg(unix)]
    Unix(tokio::net::UnixListener),
}

/// Largest request head (request line and headers) a client may send.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Serves `app` until SIGTERM/SIGINT arrive through `signals` (made by the caller before it announces the address,
/// so a signal sent at once is not lost); then stops accepting, lets requests in flight finish for at most
/// `limits.shutdown_timeout` (a second signal ends the wait at once), and returns.
pub async fn serve(
    listener: Listener,
    app: Router,
    limits: Limits,
    mut signals: crate::sys::StopSignals,
) -> std::io::Result<()> {
    let table = Arc::new(Connections::default());
    let graceful = GracefulShutdown::new();
    let service = TowerToHyperService::new(app);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    loop {
        let stream = tokio::select! {
            accepted = accept(&listener) => match accepted {
                Ok(stream) => stream,
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = signals.recv() => break,
        };
        // A slot for it: the longest-idle connection gives its up; with every connection busy, wait for one.
        loop {
            let freed = table.freed.notified();
            if table.open() < limits.max_connections.max(1) || table.close_longest_idle() {
                break;
            }
            tokio::select! {
                _ = freed => {}
                _ = signals.recv() => return finish(listener, graceful, limits, signals).await,
            }
        }
        let state = table.add();
        macro_rules! spawn_conn {
            ($stream:expr) => {{
                let tracked = Tracked {
                    inner: service.clone(),
                    state: state.clone(),
                    table: table.clone(),
                };
                let conn = builder.serve_connection(TokioIo::new($stream), tracked);
                let conn = graceful.watch(conn);
                let table = table.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        ended = conn => if let Err(e) = ended {
                            tracing::debug!("connection ended: {e}");
                        },
                        _ = state.close.notified() => tracing::debug!("closed an idle connection for a new client"),
                    }
                    table.remove(&state);
                });
            }};
        }
        match stream {
            Stream::Tcp(s) => spawn_conn!(s),
            #[cfg(unix)]
            Stream::Unix(s) => spawn_conn!(s),
        }
    }
    finish(listener, graceful, limits, signals).await
}

/// Stops accepting and lets requests in flight finish for at most the shutdown timeout (a signal ends it at once).
async fn finish(
    listener: Listener,
    graceful: GracefulShutdown,
    limits: Limits,
    mut signals: crate::sys::StopSignals,
) -> std::io::Result<()> {
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

/// One open connection, as the slot accounting sees it.
#[derive(Default)]
struct ConnState {
    /// Requests of this connection in progress (dispatched to the app, response not yet produced).
    busy: AtomicUsize,
    /// When it was last active, as a tick of [`Connections::clock`]: accepted, or a request ended.
    idle_since: AtomicU64,
    /// Told to close (its task drops the connection).
    close: Notify,
}

/// The open connections, for the cap and for choosing which idle one gives its slot up.
#[derive(Default)]
struct Connections {
    open: Mutex<Vec<Arc<ConnState>>>,
    /// A logical clock ordering activity (cheaper and steadier than reading time).
    clock: AtomicU64,
    /// Signalled when a connection closes.
    freed: Notify,
}

impl Connections {
    fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    fn add(&self) -> Arc<ConnState> {
        let state = Arc::new(ConnState::default());
        state.idle_since.store(self.tick(), Ordering::Relaxed);
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(state.clone());
        state
    }

    fn remove(&self, state: &Arc<ConnState>) {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|s| !Arc::ptr_eq(s, state));
        self.freed.notify_waiters();
    }

    /// Closes the connection idle longest and frees its slot at once; false when every connection is busy.
    fn close_longest_idle(&self) -> bool {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let victim = open
            .iter()
            .enumerate()
            .filter(|(_, s)| s.busy.load(Ordering::Acquire) == 0)
            .min_by_key(|(_, s)| s.idle_since.load(Ordering::Relaxed))
            .map(|(i, _)| i);
        match victim {
            Some(i) => {
                let state = open.swap_remove(i);
                // `notify_one` stores the wake-up if the task is not waiting yet.
                state.close.notify_one();
                true
            }
            None => false,
        }
    }
}

/// The app as one connection's hyper service, counting its requests in progress.
#[derive(Clone)]
struct Tracked {
    inner: TowerToHyperService<Router>,
    state: Arc<ConnState>,
    table: Arc<Connections>,
}

impl hyper::service::Service<hyper::Request<hyper::body::Incoming>> for Tracked {
    type Response = <TowerToHyperService<Router> as hyper::service::Service<
        hyper::Request<hyper::body::Incoming>,
    >>::Response;
    type Error = <TowerToHyperService<Router> as hyper::service::Service<
        hyper::Request<hyper::body::Incoming>,
    >>::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn call(&self, request: hyper::Request<hyper::body::Incoming>) -> Self::Future {
        self.state.busy.fetch_add(1, Ordering::AcqRel);
        let done = Busy {
            state: self.state.clone(),
            table: self.table.clone(),
        };
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            drop(done);
            result
        })
    }
}

/// Ends a request's busy mark however its future ends (completed or dropped).
struct Busy {
    state: Arc<ConnState>,
    table: Arc<Connections>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.state
            .idle_since
            .store(self.table.tick(), Ordering::Relaxed);
        self.state.busy.fetch_sub(1, Ordering::AcqRel);
        // A client may be waiting for a connection to become idle.
        self.table.freed.notify_waiters();
    }
}

enum Stream {
    Tcp(tokio::net::TcpStream),
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

async fn accept(listener: &Listener) -> std::io::Result<Stream> {
    match listener {
        Listener::Tcp(l) => l.accept().await.map(|(s, _)| Stream::Tcp(s)),
        #[cfg(unix)]
        Listener::Unix(l) => l.accept().await.map(|(s, _)| Stream::Unix(s)),
    }
}

/// Compile-time check that both stream kinds fit hyper's I/O bounds.
#[allow(dead_code)]
fn io_bounds<T: AsyncRead + AsyncWrite + Unpin + Send + 'static>() {}
const _: fn() = io_bounds::<tokio::net::TcpStream>;
#[cfg(unix)]
const _: fn() = io_bounds::<tokio::net::UnixStream>;
