//! Pulls from a hostile registry: a small HTTP server on loopback, written here, that answers with endless
//! manifests, components longer or shorter than declared, bytes at a trickle, and a cache whose entry was edited
//! after it was pulled. Every case must be refused within its bound, with memory bounded by the limits (the server
//! counts what it managed to send before the client hung up).

// Unix only: these tests prove what the facade does on Linux (`/proc` scans, signals, sandboxes); the executor's
// `portable.rs` and the CLI's Windows tests cover what every platform shares.
#![cfg(unix)]

use sha2::{Digest, Sha256};
use shellward::oci::{PullLimits, pull_with};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What the server answers for one path.
#[derive(Clone)]
enum Answer {
    /// 200 with this body and its true length.
    Body(Vec<u8>),
    /// 200 with `declared` as Content-Length (or none), then `byte` repeated until the client hangs up.
    Endless { declared: Option<u64> },
    /// 200 with Content-Length `declared`, one byte every `every`.
    Trickle { declared: u64, every: Duration },
    /// 404.
    Missing,
}

struct Server {
    address: String,
    sent: Arc<AtomicU64>,
    hits: Arc<AtomicU64>,
    /// Connections being answered, and the signal that one ended.
    open: Arc<(Mutex<usize>, Condvar)>,
}

impl Server {
    /// What the server had sent once every connection it answered has ended (the client hung up; at most 10 s).
    fn sent_when_done(&self) -> u64 {
        let (count, ended) = &*self.open;
        let guard = count.lock().unwrap();
        let (_guard, timeout) = ended
            .wait_timeout_while(guard, Duration::from_secs(10), |n| *n > 0)
            .unwrap();
        assert!(!timeout.timed_out(), "a connection is still being answered");
        self.sent.load(Ordering::Relaxed)
    }
}

/// Serves `route(path)` for every request on a free loopback port, one thread per connection, for the test's life.
fn serve(route: impl Fn(&str) -> Answer + Send + Sync + 'static) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let sent = Arc::new(AtomicU64::new(0));
    let hits = Arc::new(AtomicU64::new(0));
    let open = Arc::new((Mutex::new(0usize), Condvar::new()));
    let route = Arc::new(route);
    let (s, h, o) = (sent.clone(), hits.clone(), open.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (route, sent, hits, open) = (route.clone(), s.clone(), h.clone(), o.clone());
            *open.0.lock().unwrap() += 1;
            std::thread::spawn(move || {
                let _ = answer(stream, &*route, &sent, &hits);
                *open.0.lock().unwrap() -= 1;
                open.1.notify_all();
            });
        }
    });
    Server {
        address,
        sent,
        hits,
        open,
    }
}

fn answer(
    stream: TcpStream,
    route: &(dyn Fn(&str) -> Answer + Send + Sync),
    sent: &AtomicU64,
    hits: &AtomicU64,
) -> std::io::Result<()> {
    stream.set_write_timeout(Some(Duration::from_secs(20)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 || header == "\r\n" {
                break;
            }
        }
        let path = request_line.split(' ').nth(1).unwrap_or("/").to_string();
        if path.contains("/blobs/") {
            hits.fetch_add(1, Ordering::Relaxed);
        }
        match route(&path) {
            Answer::Body(body) => {
                write!(
                    out,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                )?;
                out.write_all(&body)?;
            }
            Answer::Missing => {
                write!(out, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?;
            }
            Answer::Endless { declared } => {
                match declared {
                    Some(n) => write!(out, "HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n")?,
                    None => write!(out, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")?,
                }
                let chunk = vec![b'{'; 64 << 10];
                loop {
                    out.write_all(&chunk)?;
                    sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                }
            }
            Answer::Trickle { declared, every } => {
                write!(out, "HTTP/1.1 200 OK\r\nContent-Length: {declared}\r\n\r\n")?;
                for _ in 0..declared {
                    out.write_all(b"x")?;
                    out.flush()?;
                    sent.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(every);
                }
            }
        }
    }
}

fn sha256(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// A manifest whose one layer is a component of `digest` and declared `size`.
fn manifest(digest: &str, size: u64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": sha256(b"{}"), "size": 2},
        "layers": [{"mediaType": "application/wasm", "digest": digest, "size": size}],
    }))
    .unwrap()
}

fn limits(deadline: Duration) -> PullLimits {
    let mut limits = PullLimits::default();
    limits.deadline = deadline;
    limits.read_timeout = Duration::from_secs(5);
    limits
}

/// A tag reference on the server (`tag` picks the route).
fn tagged(server: &Server, tag: &str) -> String {
    format!("{}/hostile/policy:{tag}", server.address)
}

/// A registry answering every manifest with `manifests` and everything else (its components) with `blobs`.
fn registry(manifests: Answer, blobs: Answer) -> Server {
    serve(move |path| {
        if path.contains("/manifests/") {
            manifests.clone()
        } else {
            blobs.clone()
        }
    })
}

/// Pulls the tag `v1` from `server` into a fresh cache with `limits`: the error the pull must end with, and how
/// long it took.
fn refused(server: &Server, limits: &PullLimits) -> (String, Duration) {
    let cache = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let err = pull_with(&tagged(server, "v1"), cache.path(), limits).unwrap_err();
    (err.to_string(), started.elapsed())
}

#[test]
fn an_endless_manifest_is_cut_off_at_its_limit() {
    let server = registry(Answer::Endless { declared: None }, Answer::Missing);
    let (message, took) = refused(&server, &limits(Duration::from_secs(60)));
    assert!(
        message.contains("manifest is longer than the 1048576-byte limit"),
        "{message}"
    );
    assert!(
        message.contains("max_manifest_bytes"),
        "the message names the setting: {message}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
    // What got out of the server before the client hung up: the limit plus socket buffers, not gigabytes.
    let sent = server.sent_when_done();
    assert!(sent < 32 << 20, "the server sent {sent} bytes");
}

#[test]
fn a_declared_oversized_manifest_is_refused_before_its_body() {
    let server = registry(
        Answer::Endless {
            declared: Some(3 << 30),
        },
        Answer::Missing,
    );
    let (err, _) = refused(&server, &limits(Duration::from_secs(60)));
    assert!(err.contains("longer than the 1048576-byte limit"), "{err}");
}

#[test]
fn a_component_longer_than_its_manifest_declares_is_refused_as_it_arrives() {
    let body = manifest(&sha256(b"the declared component"), 1234);
    let server = registry(Answer::Body(body), Answer::Endless { declared: None });
    let (err, _) = refused(&server, &limits(Duration::from_secs(60)));
    assert!(
        err.contains("more than the 1234 bytes the manifest declares"),
        "{err}"
    );
    let sent = server.sent_when_done();
    assert!(sent < 32 << 20, "the server sent {sent} bytes");
}

#[test]
fn a_content_length_other_than_the_declared_size_is_refused_before_the_body() {
    let body = manifest(&sha256(b"x"), 1234);
    let server = registry(
        Answer::Body(body),
        Answer::Endless {
            declared: Some(3 << 30),
        },
    );
    let (err, _) = refused(&server, &limits(Duration::from_secs(60)));
    assert!(
        err.contains("sends 3221225472 bytes for a component its manifest declares as 1234"),
        "{err}"
    );
}

#[test]
fn a_component_declared_over_the_limit_is_not_downloaded() {
    let body = manifest(&sha256(b"big"), 3 << 30);
    let server = registry(Answer::Body(body), Answer::Endless { declared: None });
    let (err, _) = refused(&server, &limits(Duration::from_secs(60)));
    assert!(err.contains("over the 67108864-byte limit"), "{err}");
    assert!(err.contains("max_component_bytes"), "{err}");
    assert_eq!(
        server.hits.load(Ordering::Relaxed),
        0,
        "the blob was requested"
    );
}

#[test]
fn a_registry_trickling_bytes_hits_the_deadline() {
    let body = manifest(&sha256(b"slow"), 1000);
    let trickle = Answer::Trickle {
        declared: 1000,
        every: Duration::from_millis(100),
    };
    let server = registry(Answer::Body(body), trickle);
    let (err, took) = refused(&server, &limits(Duration::from_secs(2)));
    assert!(err.contains("did not finish within 2s"), "{err}");
    assert!(err.contains("[oci] deadline"), "{err}");
    assert!(took < Duration::from_secs(6), "took {took:?}");
}

/// A blob that drips a byte every 100 ms never trips the read timeout and is far under the deadline: the minimum rate
/// cuts it off after one window, naming the registry. With the defaults (1 KiB/s over 15 s, 30 s read timeout) the
/// same drip is refused within 60 s.
#[test]
fn a_registry_dripping_bytes_fails_the_minimum_rate_long_before_the_deadline() {
    let body = manifest(&sha256(b"drip"), 100_000);
    let drip = Answer::Trickle {
        declared: 100_000,
        every: Duration::from_millis(100),
    };
    let server = registry(Answer::Body(body), drip);
    let mut limits = limits(Duration::from_secs(300));
    limits.rate_window = Duration::from_secs(2);
    let (text, took) = refused(&server, &limits);
    assert!(text.contains("under the minimum rate"), "{text}");
    assert!(
        text.contains(&format!("the registry {}", server.address)),
        "{text}"
    );
    assert!(text.contains("[oci] min_rate"), "{text}");
    assert!(took < Duration::from_secs(8), "took {took:?}");
    let defaults = PullLimits::default();
    assert!(
        defaults.rate_window.max(defaults.read_timeout) + defaults.rate_window
            < Duration::from_secs(60)
            && defaults.min_rate > 10,
        "the defaults no longer refuse a 10 byte/s drip within 60 s"
    );
}

#[test]
fn a_pinned_cache_entry_is_verified_on_every_load_and_pulled_again_when_edited() {
    let component = b"\0asm a component's bytes".to_vec();
    let layer = sha256(&component);
    let body = manifest(&layer, component.len() as u64);
    let pin = sha256(&body);
    let server = registry(Answer::Body(body), Answer::Body(component.clone()));
    let cache = tempfile::tempdir().unwrap();
    let reference = format!("{}/hostile/policy@{pin}", server.address);
    let limits = limits(Duration::from_secs(30));
    let first = pull_with(&reference, cache.path(), &limits).unwrap();
    assert!(!first.from_cache);
    assert_eq!(first.component, component);
    let second = pull_with(&reference, cache.path(), &limits).unwrap();
    assert!(second.from_cache, "a verified entry needs no network");
    assert_eq!(server.hits.load(Ordering::Relaxed), 1);

    // Edited in the cache: not served; pulled again from the registry and verified.
    std::fs::write(&first.path, b"\0asm something else entirely").unwrap();
    let third = pull_with(&reference, cache.path(), &limits).unwrap();
    assert!(!third.from_cache, "the edited entry was served");
    assert_eq!(third.component, component);
    assert_eq!(std::fs::read(&third.path).unwrap(), component);
    assert_eq!(server.hits.load(Ordering::Relaxed), 2);

    // Its manifest edited (so a swapped component would match it): refused too.
    let manifest_path = first.path.with_file_name(
        first
            .path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace(".wasm", ".manifest.json"),
    );
    assert!(manifest_path.is_file(), "{manifest_path:?}");
    let other = b"\0asm another component".to_vec();
    std::fs::write(
        &manifest_path,
        manifest(&sha256(&other), other.len() as u64),
    )
    .unwrap();
    std::fs::write(&first.path, &other).unwrap();
    let fourth = pull_with(&reference, cache.path(), &limits).unwrap();
    assert!(!fourth.from_cache);
    assert_eq!(fourth.component, component);
}

#[test]
fn a_registry_that_sends_another_manifest_than_the_pin_is_refused() {
    let component = b"\0asm genuine".to_vec();
    let body = manifest(&sha256(&component), component.len() as u64);
    let server = registry(Answer::Body(body), Answer::Body(component));
    let cache = tempfile::tempdir().unwrap();
    let reference = format!(
        "{}/hostile/policy@{}",
        server.address,
        sha256(b"another manifest")
    );
    let err = pull_with(&reference, cache.path(), &limits(Duration::from_secs(30))).unwrap_err();
    assert!(err.to_string().contains("not the pinned"), "{err}");
}
