//! The filtering proxy of a command whose network is an allow-list ([`Network::Allow`](crate::Network)): the command
//! runs in a network namespace of its own with nothing but a loopback, where a listener on
//! [`PROXY_ADDR`] (made by the command's process before it execs, and handed to the executor) is served here, on the
//! host's network. `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` point at it.
//!
//! It speaks HTTP `CONNECT host:port` (HTTPS and any TCP protocol a client tunnels) and plain HTTP in absolute form
//! (`GET http://host/path`). A destination is allowed when an allow-list entry matches its host (`pypi.org`, or
//! `*.npmjs.org` for any subdomain) and, if the entry names one, its port. The host's addresses come from the
//! operator's fixed `hosts` (trusted as given) or from DNS, where loopback, link-local (cloud metadata included),
//! unspecified and multicast addresses are refused, so an allowed name cannot be pointed at the host's own services.
//! A refusal is `403 Forbidden` with a sentence the model can act on.
//!
//! Written here rather than taken from a proxy crate: what is needed is a few hundred lines of HTTP/1.1 request-head
//! parsing and a byte copy, with the allow decision and address checks in the middle, and the crates that exist are
//! full servers whose filtering hooks do not cover resolved-address checks.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Where a proxied command finds its proxy, inside its own network namespace.
pub const PROXY_ADDR: &str = "127.0.0.1:3128";
/// The port of [`PROXY_ADDR`].
#[cfg(target_os = "linux")]
pub(crate) const PROXY_PORT: u16 = 3128;

/// Longest request head the proxy reads (request line and headers).
const MAX_HEAD: usize = 16 * 1024;
/// How long a client may take to send its request head, and the proxy to connect to a destination.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Most connections one proxy serves at once. Each holds two of shellward's descriptors (the client's and the
/// destination's), so a command opening connections without end cannot exhaust the supervisor's: past this many,
/// new ones wait in the listener's backlog, then the kernel refuses them.
const MAX_CONNECTIONS: usize = 256;

/// One allow-list entry: a host (or `*.domain`) and an optional port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Destination {
    /// Lower case; `*.` kept for a wildcard.
    host: String,
    port: Option<u16>,
}

impl Destination {
    fn parse(entry: &str) -> Result<Destination, String> {
        let (host, port) = match entry.rsplit_once(':') {
            Some((h, p)) => {
                let port = p
                    .parse::<u16>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("{entry:?}: {p:?} is not a port (1 to 65535)"))?;
                (h, Some(port))
            }
            None => (entry, None),
        };
        let bare = host.strip_prefix("*.").unwrap_or(host);
        let valid = !bare.is_empty()
            && bare.len() <= 253
            && bare
                .split('.')
                .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
        if !valid {
            return Err(format!(
                "{entry:?} is not a destination; give a host name or `*.domain`, with an optional `:port`"
            ));
        }
        Ok(Destination {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    fn matches(&self, host: &str, port: u16) -> bool {
        let host_ok = match self.host.strip_prefix("*.") {
            Some(domain) => host
                .strip_suffix(domain)
                .is_some_and(|sub| sub.ends_with('.') && sub.len() > 1),
            None => host == self.host,
        };
        host_ok && self.port.is_none_or(|p| p == port)
    }
}

/// What a proxied command may reach: its allow-list, and the operator's fixed addresses for names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyRules {
    allow: Vec<Destination>,
    /// As written, for messages.
    listed: Vec<String>,
    hosts: HashMap<String, Vec<IpAddr>>,
}

impl ProxyRules {
    /// Rules for `allow` (entries `host`, `*.domain`, each with an optional `:port`); `hosts` gives fixed addresses
    /// for names (trusted as given: they skip the resolved-address checks). The error names the bad entry.
    pub fn new(
        allow: &[String],
        hosts: &HashMap<String, Vec<IpAddr>>,
    ) -> Result<ProxyRules, String> {
        if allow.is_empty() {
            return Err(
                "an allow-list needs at least one destination (for no network at all, use \"none\")".into(),
            );
        }
        Ok(ProxyRules {
            allow: allow
                .iter()
                .map(|e| Destination::parse(e))
                .collect::<Result<_, _>>()?,
            listed: allow.to_vec(),
            hosts: hosts
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
                .collect(),
        })
    }

    /// Whether `host:port` is on the list.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.allow.iter().any(|d| d.matches(&host, port))
    }

    /// The sentence a refused client gets.
    fn refusal(&self, host: &str, port: u16, why: &str) -> String {
        format!(
            "shellward: {host}:{port} {why}. This command may reach only: {}. Ask the operator (or the policy) to \
             allow it.",
            self.listed.join(", ")
        )
    }

    /// The addresses to connect to for `host:port`, or why not.
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let key = host.trim_end_matches('.').to_ascii_lowercase();
        if let Some(fixed) = self.hosts.get(&key) {
            return Ok(fixed.iter().map(|ip| SocketAddr::new(*ip, port)).collect());
        }
        let found: Vec<SocketAddr> =
            match tokio::time::timeout(STEP_TIMEOUT, tokio::net::lookup_host((key.as_str(), port)))
                .await
            {
                Ok(Ok(addrs)) => addrs.collect(),
                Ok(Err(e)) => return Err(format!("could not be resolved ({e})")),
                Err(_) => return Err("could not be resolved in time".into()),
            };
        let public: Vec<SocketAddr> = found.iter().copied().filter(|a| public(a.ip())).collect();
        if public.is_empty() && !found.is_empty() {
            return Err(format!(
                "resolves only to addresses a command may not reach through the proxy ({}: loopback, link-local or \
                 metadata)",
                found[0].ip()
            ));
        }
        if public.is_empty() {
            return Err("could not be resolved".into());
        }
        Ok(public)
    }
}

/// Whether a resolved address may be reached: not loopback, link-local (cloud metadata lives there), unspecified,
/// multicast or broadcast, nor an IPv4 address in IPv6 clothing that is one of those.
fn public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.octets()[0] == 0)
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => public(IpAddr::V4(v4)),
            None => {
                let seg = v6.segments();
                !(v6.is_loopback()
                    || v6.is_unspecified()
                    || v6.is_multicast()
                    || (seg[0] & 0xffc0) == 0xfe80
                    // AWS's IPv6 metadata endpoint.
                    || seg == [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254])
            }
        },
    }
}

/// Who is told of the destinations a proxy refuses: the proxied commands running on it. A proxy serves a session's
/// network for its life (every command of the session with that allow-list connects to it), and cannot tell which of
/// them a connection comes from, so a refusal is recorded for each of them running at the time (one, as a rule).
#[derive(Default)]
pub(crate) struct Audience {
    running: std::sync::Mutex<Vec<(crate::results::Refusals, tokio::sync::watch::Receiver<bool>)>>,
}

impl Audience {
    /// Adds a command: its refusals, and the flag that turns true once it is done.
    pub(crate) fn join(
        &self,
        refusals: crate::results::Refusals,
        done: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.retain(|(_, d)| !*d.borrow());
        running.push((refusals, done));
    }

    /// Records a refused `host:port` for every command still running.
    fn refused(&self, to: &str) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.retain(|(_, d)| !*d.borrow());
        for (refusals, _) in running.iter() {
            refusals.address(to.to_string());
        }
    }
}

/// Serves `listener` (a proxied command's [`PROXY_ADDR`]) until the task is dropped or aborted, or the listener is
/// shut down (its session ended); each refused destination recorded for `seen`, when given.
pub(crate) async fn serve(
    listener: TcpListener,
    rules: Arc<ProxyRules>,
    seen: Option<Arc<Audience>>,
) {
    serve_at_most(listener, rules, MAX_CONNECTIONS, seen).await
}

/// Whether an accept failed because the listener was shut down or closed (`EINVAL`, `EBADF`, `ENOTSOCK`).
#[cfg(unix)]
fn listener_gone(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::EBADF | libc::ENOTSOCK)
    )
}

/// Whether an accept failed because the listener was shut down or closed (`WSAEINVAL`, `WSAEBADF`,
/// `WSAENOTSOCK`).
#[cfg(windows)]
fn listener_gone(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(10022 | 10009 | 10038))
}

/// [`serve`] with at most `max` connections at once.
async fn serve_at_most(
    listener: TcpListener,
    rules: Arc<ProxyRules>,
    max: usize,
    seen: Option<Arc<Audience>>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(max));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let conn = match listener.accept().await {
            Ok((conn, _)) => conn,
            // Shut down (EINVAL) or closed: done.
            Err(e) if listener_gone(&e) => {
                return;
            }
            // A transient failure (out of descriptors, an aborted connection): wait instead of spinning.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (rules, seen) = (rules.clone(), seen.clone());
        tokio::spawn(async move {
            let _ = handle(conn, &rules, seen.as_deref()).await;
            drop(slot);
        });
    }
}

/// A request head: the method, the target host and port, and for plain HTTP the head to send on (origin form).
struct Head {
    connect: bool,
    host: String,
    port: u16,
    forward: Vec<u8>,
}

/// Reads a request head; whatever followed it in the same reads is returned too.
async fn read_head(conn: &mut TcpStream) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::other("request head too long"));
        }
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// `host[:port]` (or `[v6]:port`) with `default` as the port.
fn host_port(authority: &str, default: u16) -> Option<(String, u16)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => default,
            None => return None,
        };
        return Some((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => Some((h.to_string(), p.parse().ok()?)),
        None => Some((authority.to_string(), default)),
    }
    .filter(|(h, _)| !h.is_empty())
}

/// Parses a request head into where it goes; `None` for a request this proxy does not serve.
fn parse_head(head: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let first = lines.next()?;
    let mut parts = first.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = host_port(target, 443)?;
        return Some(Head {
            connect: true,
            host,
            port,
            forward: Vec::new(),
        });
    }
    let rest = target.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = host_port(authority, 80)?;
    let mut forward = format!("{method} {path} {version}\r\n");
    for line in lines {
        let name = line.split(':').next().unwrap_or("").trim();
        // The proxy's own headers stay here.
        if name.to_ascii_lowercase().starts_with("proxy-") {
            continue;
        }
        forward.push_str(line);
        forward.push_str("\r\n");
    }
    // `lines` ended with the blank line's two empty pieces: the head ends with exactly one blank line.
    while forward.ends_with("\r\n\r\n\r\n") {
        forward.truncate(forward.len() - 2);
    }
    Some(Head {
        connect: false,
        host,
        port,
        forward: forward.into_bytes(),
    })
}

/// A response with `status` and a plain-text body.
async fn respond(conn: &mut TcpStream, status: &str, body: &str) -> io::Result<()> {
    let mut out = String::new();
    let _ = write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\
         X-Shellward-Proxy: refused\r\n\r\n{body}\n",
        body.len() + 1
    );
    conn.write_all(out.as_bytes()).await?;
    conn.shutdown().await
}

async fn handle(
    mut conn: TcpStream,
    rules: &ProxyRules,
    seen: Option<&Audience>,
) -> io::Result<()> {
    let refused = |host: &str, port: u16| {
        if let Some(seen) = seen {
            seen.refused(&format!("{host}:{port}"));
        }
    };
    let (head, rest) = tokio::time::timeout(STEP_TIMEOUT, read_head(&mut conn))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    let Some(head) = parse_head(&head) else {
        return respond(
            &mut conn,
            "400 Bad Request",
            "shellward: this proxy serves CONNECT host:port and plain HTTP requests in absolute form",
        )
        .await;
    };
    if !rules.allows(&head.host, head.port) {
        let body = rules.refusal(
            &head.host,
            head.port,
            "is not on this command's network allow-list",
        );
        tracing::debug!(host = %head.host, port = head.port, "proxy refused a destination");
        refused(&head.host, head.port);
        return respond(&mut conn, "403 Forbidden", &body).await;
    }
    let addrs = match rules.resolve(&head.host, head.port).await {
        Ok(a) => a,
        Err(why) => {
            let body = rules.refusal(&head.host, head.port, &why);
            refused(&head.host, head.port);
            return respond(&mut conn, "403 Forbidden", &body).await;
        }
    };
    let upstream = match tokio::time::timeout(STEP_TIMEOUT, TcpStream::connect(&addrs[..])).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let body = format!(
                "shellward: could not connect to {}:{}: {e}",
                head.host, head.port
            );
            return respond(&mut conn, "502 Bad Gateway", &body).await;
        }
        Err(_) => {
            let body = format!(
                "shellward: connecting to {}:{} timed out",
                head.host, head.port
            );
            return respond(&mut conn, "504 Gateway Timeout", &body).await;
        }
    };
    let mut upstream = upstream;
    if head.connect {
        conn.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await?;
    } else {
        upstream.write_all(&head.forward).await?;
    }
    if !rest.is_empty() {
        upstream.write_all(&rest).await?;
    }
    tokio::io::copy_bidirectional(&mut conn, &mut upstream).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], hosts: &[(&str, &str)]) -> ProxyRules {
        let hosts = hosts
            .iter()
            .map(|(n, ip)| (n.to_string(), vec![ip.parse().unwrap()]))
            .collect();
        ProxyRules::new(
            &allow.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            &hosts,
        )
        .unwrap()
    }

    #[test]
    fn destinations_match_by_host_wildcard_and_port() {
        let r = rules(&["pypi.org", "*.npmjs.org:443"], &[]);
        assert!(r.allows("pypi.org", 443) && r.allows("PyPI.org.", 80));
        assert!(r.allows("registry.npmjs.org", 443));
        assert!(
            !r.allows("npmjs.org", 443),
            "the wildcard needs a subdomain"
        );
        assert!(!r.allows("registry.npmjs.org", 80));
        assert!(!r.allows("evilnpmjs.org", 443) && !r.allows("pypi.org.evil.com", 443));
        for bad in ["", "a b", "x.org:0", "x.org:http", "*.", "a..b"] {
            assert!(
                ProxyRules::new(&[bad.to_string()], &HashMap::new()).is_err(),
                "{bad:?}"
            );
        }
        assert!(ProxyRules::new(&[], &HashMap::new()).is_err());
    }

    #[test]
    fn only_public_addresses_pass_the_resolved_address_check() {
        for ip in [
            "127.0.0.1",
            "169.254.169.254",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "fd00:ec2::254",
        ] {
            assert!(!public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["151.101.0.223", "10.1.2.3", "2a04:4e42::223"] {
            assert!(public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn request_heads_are_parsed_and_proxy_headers_dropped() {
        let h = parse_head(b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n").unwrap();
        assert!(h.connect && h.host == "pypi.org" && h.port == 443);
        let h = parse_head(
            b"GET http://example.test:8080/a?b HTTP/1.1\r\nHost: example.test:8080\r\nProxy-Authorization: x\r\n\r\n",
        )
        .unwrap();
        assert!(!h.connect && h.host == "example.test" && h.port == 8080);
        assert_eq!(
            String::from_utf8(h.forward).unwrap(),
            "GET /a?b HTTP/1.1\r\nHost: example.test:8080\r\n\r\n"
        );
        assert!(parse_head(b"GET /relative HTTP/1.1\r\n\r\n").is_none());
        assert!(
            parse_head(b"CONNECT [::1]:22 HTTP/1.1\r\n\r\n")
                .is_some_and(|h| h.host == "::1" && h.port == 22)
        );
    }

    /// A client through a real proxy on loopback: an allowed name (mapped by `hosts` to a test server) is reached by
    /// CONNECT and plain HTTP, another is refused with a sentence naming the list, and a name resolving to loopback
    /// through DNS is refused.
    #[tokio::test]
    async fn the_proxy_tunnels_allowed_destinations_and_refuses_others() {
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = upstream.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = upstream.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    let got = String::from_utf8_lossy(&buf[..n]).to_string();
                    let body = format!("upstream saw: {}", got.lines().next().unwrap_or(""));
                    let _ = s
                        .write_all(
                            format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                                body.len()
                            )
                            .as_bytes(),
                        )
                        .await;
                });
            }
        });
        let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_addr = proxy.local_addr().unwrap();
        let r = Arc::new(rules(
            &["allowed.test", "localhost"],
            &[("allowed.test", "127.0.0.1")],
        ));
        // Where the command's result learns what was refused (a command running on it; one done is not told).
        let (seen, done) = (
            crate::results::Refusals::default(),
            crate::results::Refusals::default(),
        );
        let audience = Arc::new(Audience::default());
        let (_running, running) = tokio::sync::watch::channel(false);
        audience.join(seen.clone(), running);
        let (_, ended) = tokio::sync::watch::channel(true);
        audience.join(done.clone(), ended);
        tokio::spawn(serve(proxy, r, Some(audience)));
        let exchange = |request: String| async move {
            let mut c = TcpStream::connect(proxy_addr).await.unwrap();
            c.write_all(request.as_bytes()).await.unwrap();
            let mut out = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut out)).await;
            String::from_utf8_lossy(&out).to_string()
        };
        let plain = exchange(format!(
            "GET http://allowed.test:{port}/x HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n"
        ))
        .await;
        assert!(plain.contains("upstream saw: GET /x HTTP/1.1"), "{plain}");
        let mut c = TcpStream::connect(proxy_addr).await.unwrap();
        c.write_all(format!("CONNECT allowed.test:{port} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut buf = [0u8; 256];
        let n = c.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        c.write_all(b"PING tunnel\r\n\r\n").await.unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut out)).await;
        assert!(String::from_utf8_lossy(&out).contains("upstream saw: PING tunnel"));
        let refused = exchange(format!("CONNECT example.test:{port} HTTP/1.1\r\n\r\n")).await;
        assert!(
            refused.starts_with("HTTP/1.1 403") && refused.contains("allowed.test, localhost"),
            "{refused}"
        );
        // `localhost` is on the list but resolves to loopback through DNS: refused.
        let refused = exchange(format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n")).await;
        assert!(
            refused.starts_with("HTTP/1.1 403") && refused.contains("loopback"),
            "{refused}"
        );
        // Both refusals recorded for the command's result (the allowed ones not).
        assert_eq!(
            seen.addresses(),
            [format!("example.test:{port}"), format!("localhost:{port}")]
        );
        assert!(done.addresses().is_empty());
    }

    /// A command opening connections without end holds at most the cap: the next one is served only once one of
    /// the held ones goes.
    #[tokio::test]
    async fn connections_past_the_cap_wait_for_a_free_slot() {
        let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = proxy.local_addr().unwrap();
        tokio::spawn(serve_at_most(
            proxy,
            Arc::new(rules(&["allowed.test"], &[])),
            2,
            None,
        ));
        // Two idle connections take both slots (they never send a head).
        let first = TcpStream::connect(addr).await.unwrap();
        let _second = TcpStream::connect(addr).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut third = TcpStream::connect(addr).await.unwrap();
        third
            .write_all(b"CONNECT refused.test:443 HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 64];
        let early = tokio::time::timeout(Duration::from_millis(300), third.read(&mut buf)).await;
        assert!(early.is_err(), "served past the cap: {early:?}");
        drop(first);
        let n = tokio::time::timeout(Duration::from_secs(5), third.read(&mut buf))
            .await
            .expect("served once a slot is free")
            .unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 403"));
    }
}
