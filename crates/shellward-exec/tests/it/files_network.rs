//! Per-command confinement of files, network and system calls (`ExecPlan::confinement`): writes only beneath the
//! writable paths (Landlock), a network of the command's own (`none`, `loopback`) or the host's, a seccomp filter — in a session's sandbox and
//! without one, as root and (rerun at the end) as a normal user.

// Unix only: these tests prove Linux containment (`/proc`, signals, namespaces); `portable.rs` holds what every
// platform shares.
#![cfg(unix)]

use crate::common::*;
use shellward_exec::{Confinement, ExecPlan, Executor, ExecutorConfig, Network};
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

/// The machine this project is built on has Landlock; a kernel without it fails the test, never passes it silently.
fn landlock() -> bool {
    Executor::landlock_abi() > 0
}

fn plan(command: &str, mark: &str, writable: Option<Vec<PathBuf>>, network: Network) -> ExecPlan {
    let mut p = marked_plan(command, mark);
    p.confinement = Confinement::new(writable, network);
    p.session = Some("confined".into());
    p
}

/// Executors for the paths a command can take: in a session's sandbox, and without namespaces.
fn configs() -> Vec<(&'static str, ExecutorConfig)> {
    let mut bare = namespaced();
    bare.pid_namespace = false;
    vec![("sandbox", namespaced()), ("no namespaces", bare)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_go_only_beneath_the_writable_paths() {
    assert!(landlock(), "this kernel has no Landlock");
    for (name, config) in configs() {
        let ex = Executor::new(config).unwrap();
        let mark = new_mark();
        let dir = tempfile::tempdir().unwrap();
        let (inside, outside) = (dir.path().join("in"), dir.path().join("out"));
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("kept"), "original").unwrap();
        let writable = Some(vec![inside.clone()]);
        let r = ex
            .execute(plan(
                &format!(
                    "echo new > {i}/made && mkdir {i}/sub && mv {i}/made {i}/sub/ && echo quiet > /dev/null && echo ok",
                    i = inside.display()
                ),
                &mark,
                writable.clone(),
                Network::Host,
            ))
            .await
            .unwrap();
        assert_eq!(r.output.text, "ok\n", "{name}: {r:?}");
        assert!(r.confinement.writes, "{name}");
        assert_eq!(
            std::fs::read_to_string(inside.join("sub/made")).unwrap(),
            "new\n"
        );
        // Outside: creating, overwriting, truncating, removing, renaming in — each refused.
        for attempt in [
            format!("echo x > {}/new", outside.display()),
            format!("echo x > {}/kept", outside.display()),
            format!(": > {}/kept", outside.display()),
            format!("rm {}/kept", outside.display()),
            format!("mv {}/sub/made {}/", inside.display(), outside.display()),
            format!("mkdir {}/d", outside.display()),
        ] {
            let r = ex
                .execute(plan(&attempt, &mark, writable.clone(), Network::Host))
                .await
                .unwrap();
            assert_ne!(r.exit.code(), Some(0), "{name}: {attempt} succeeded: {r:?}");
            assert!(
                r.output.text.contains("Permission denied"),
                "{name}: {attempt}: {r:?}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(outside.join("kept")).unwrap(),
            "original"
        );
        assert!(!outside.join("new").exists() && !outside.join("d").exists());
        // What it starts inherits it, and it cannot lift it.
        let r = ex
            .execute(plan(
                &format!("sh -c 'sh -c \"echo x > {}/deep\"'", outside.display()),
                &mark,
                writable.clone(),
                Network::Host,
            ))
            .await
            .unwrap();
        assert_ne!(r.exit.code(), Some(0), "{name}: {r:?}");
        // The next command of the same session, unconfined, writes anywhere its user may: per command.
        let r = ex
            .execute(plan(
                &format!("echo x > {}/free && echo ok", outside.display()),
                &mark,
                None,
                Network::Host,
            ))
            .await
            .unwrap();
        assert_eq!(r.output.text, "ok\n", "{name}: {r:?}");
        assert!(!r.confinement.writes);
        // A relative writable path is the caller's error.
        let e = ex
            .execute(plan("true", &mark, Some(vec!["rel".into()]), Network::Host))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("relative"), "{e}");
        ex.shutdown().await;
        assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
    }
}

/// A TCP listener of the test on the host's loopback, accepting in the background; its port.
fn host_listener() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
            let _ = s.read(&mut [0u8; 16]);
        }
    });
    port
}

/// Exit 0 when the command can connect to the host's listener on `port`.
fn reach_host(port: u16) -> String {
    format!(
        "bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo reached || echo unreachable"
    )
}

/// Its own loopback: bind a port on 127.0.0.1 and connect to it.
const OWN_LOOPBACK: &str = "python3 -c \"
import socket
s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()
socket.create_connection(s.getsockname(), 2)
print('own loopback works')
\" 2>/dev/null || echo 'no loopback'";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_is_none_its_own_loopback_or_the_hosts() {
    let port = host_listener();
    for (name, config) in configs() {
        let ex = Executor::new(config).unwrap();
        let mark = new_mark();
        let root = shellward_test_support::is_root();
        let run = |command: String, network| {
            let ex = &ex;
            let p = plan(&command, &mark, None, network);
            async move { ex.execute(p).await }
        };
        // The host's network: the test's listener is reached.
        let r = run(reach_host(port), Network::Host).await.unwrap();
        assert_eq!(r.output.text, "reached\n", "{name}: {r:?}");
        if name == "no namespaces" && !root {
            // Without privilege and without the sandbox's user namespace no network namespace can be made: the start
            // is refused (never run on the host's network), naming the fix.
            let e = run(reach_host(port), Network::None).await.unwrap_err();
            let text = e.to_string();
            assert!(
                text.contains("network") && text.contains("not started"),
                "{text}"
            );
            ex.shutdown().await;
            continue;
        }
        // None: nothing, not even a loopback of its own.
        let r = run(reach_host(port), Network::None).await.unwrap();
        assert_eq!(r.output.text, "unreachable\n", "{name}: {r:?}");
        assert_eq!(r.confinement.network, Network::None);
        let r = run(OWN_LOOPBACK.into(), Network::None).await.unwrap();
        assert_eq!(r.output.text, "no loopback\n", "{name}: {r:?}");
        // Loopback: its own works, the host's listener is out of reach.
        let r = run(OWN_LOOPBACK.into(), Network::Loopback).await.unwrap();
        assert_eq!(r.output.text, "own loopback works\n", "{name}: {r:?}");
        let r = run(reach_host(port), Network::Loopback).await.unwrap();
        assert_eq!(r.output.text, "unreachable\n", "{name}: {r:?}");
        // As root in a sandbox, `none` commands of one session share one prepared namespace (so they start as fast as
        // any); `loopback` is another (see the next test: the session's, made by its first such command).
        let ns = |network| {
            let ex = &ex;
            let p = plan("readlink /proc/self/ns/net", &mark, None, network);
            async move { ex.execute(p).await.unwrap().output.text }
        };
        let (a, b, l) = (
            ns(Network::None).await,
            ns(Network::None).await,
            ns(Network::Loopback).await,
        );
        assert_ne!(a, l, "{name}");
        if root && name == "sandbox" {
            assert_eq!(a, b, "{name}: the session's prepared namespace");
        }
        // Per command: the next one in the same session has the host's network again.
        let r = run(reach_host(port), Network::Host).await.unwrap();
        assert_eq!(r.output.text, "reached\n", "{name}: {r:?}");
        ex.shutdown().await;
        assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
    }
}

/// A Unix socket of the host's, at a path (the shape of `docker.sock`, a database's, an agent's): reached with the
/// host's network, out of reach with `none`, `loopback` and `allow` (the namespace does not cover the filesystem;
/// the command may not make a Unix socket at all then), while `socketpair` (a pair of its own) still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_unix_sockets_are_out_of_reach_without_the_host_network() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            use std::io::Write;
            let _ = s.write_all(b"host-socket-answered\n");
        }
    });
    // World-writable, as many such sockets are: the permission is not what stops the command.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let connect = format!(
        "python3 -c \"
import socket
s = socket.socket(socket.AF_UNIX)
s.connect('{}')
print(s.recv(100).decode().strip())
\" 2>&1 | tail -1",
        path.display()
    );
    let pair = "python3 -c \"
import socket
a, b = socket.socketpair(); a.send(b'pair'); print(b.recv(4).decode())
\"";
    for (name, config) in configs() {
        if name == "no namespaces" && !shellward_test_support::is_root() {
            continue; // no network namespace without privilege there (the start is refused, tested above)
        }
        let ex = Executor::new(config).unwrap();
        let mark = new_mark();
        let run = |command: String, network| {
            let ex = &ex;
            let mut p = plan(&command, &mark, None, network);
            if network == Network::Allow {
                p.confinement.allow = vec!["example.invalid".into()];
            }
            async move { ex.execute(p).await.unwrap() }
        };
        let r = run(connect.clone(), Network::Host).await;
        assert_eq!(r.output.text, "host-socket-answered\n", "{name}: {r:?}");
        for network in [Network::None, Network::Loopback, Network::Allow] {
            let r = run(connect.clone(), network).await;
            assert!(
                !r.output.text.contains("answered") && r.output.text.contains("PermissionError"),
                "{name} {network:?}: {r:?}"
            );
            let r = run(pair.into(), network).await;
            assert_eq!(r.output.text, "pair\n", "{name} {network:?}: {r:?}");
        }
        ex.shutdown().await;
        assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
    }
}

/// A session's loopback is the session's: a server one `loopback` command starts in the background is reached by the
/// next `loopback` command of the same session (as in one terminal), never by another session's; an allow-list
/// network is shared the same way, per list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_loopback_is_shared_by_its_commands_and_no_one_else() {
    let ex = Executor::new(namespaced()).unwrap();
    if !ex.pid_namespaces() {
        ex.shutdown().await;
        panic!("this machine runs commands in session sandboxes; none was made");
    }
    let mark = new_mark();
    let in_session = |command: &str, session: &str, network: Network| {
        let mut p = plan(command, &mark, None, network);
        p.session = Some(session.into());
        p
    };
    let server = "python3 -c \"
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', 47001)); s.listen()
print('listening', flush=True)
while True:
    c, _ = s.accept(); c.sendall(b'hello from the session'); c.close()
\"";
    let client = "python3 -c \"
import socket
try:
    print(socket.create_connection(('127.0.0.1', 47001), 2).recv(100).decode())
except OSError as e:
    print('unreachable')
\"";
    let mut bg = in_session(server, "a", Network::Loopback);
    bg.background = true;
    bg.startup_wait = Some(Duration::from_secs(5));
    let started = ex.execute(bg).await.unwrap();
    assert!(started.running, "{started:?}");
    let r = ex
        .execute(in_session(client, "a", Network::Loopback))
        .await
        .unwrap();
    assert_eq!(r.output.text, "hello from the session\n", "{r:?}");
    let r = ex
        .execute(in_session(client, "b", Network::Loopback))
        .await
        .unwrap();
    assert_eq!(
        r.output.text, "unreachable\n",
        "another session's loopback: {r:?}"
    );
    let r = ex
        .execute(in_session(client, "a", Network::None))
        .await
        .unwrap();
    assert_eq!(r.output.text, "unreachable\n", "no network at all: {r:?}");
    let ns = |session: &str, network: Network| {
        let p = in_session("readlink /proc/self/ns/net", session, network);
        let ex = &ex;
        async move { ex.execute(p).await.unwrap().output.text }
    };
    assert_eq!(
        ns("a", Network::Loopback).await,
        ns("a", Network::Loopback).await
    );
    assert_ne!(
        ns("a", Network::Loopback).await,
        ns("b", Network::Loopback).await
    );
    ex.shutdown().await;
    assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
}

/// A tiny HTTP server of the test on the host's loopback that answers every request with `hello from PATH`; its port.
fn host_http_server() -> u16 {
    use std::io::Write;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 2048];
            let n = s.read(&mut buf).unwrap_or(0);
            let text = String::from_utf8_lossy(&buf[..n]).to_string();
            let path = text.split(' ').nth(1).unwrap_or("?").to_string();
            let body = format!("hello from {path}");
            let _ = s.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    });
    port
}

/// Fetches `url` with Python's urllib (which honours `HTTP_PROXY`): the body, or `refused CODE: BODY`.
fn fetch(url: &str) -> String {
    format!(
        "python3 -c \"
import urllib.request, urllib.error
try:
    print(urllib.request.urlopen('{url}', timeout=5).read().decode())
except urllib.error.HTTPError as e:
    print('refused', e.code, e.read().decode().strip())
except Exception as e:
    print('failed', e)
\""
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allow_list_reaches_allowed_names_through_the_proxy_and_nothing_else() {
    let port = host_http_server();
    for (name, mut config) in configs() {
        config
            .proxy_hosts
            .insert("allowed.test".into(), vec!["127.0.0.1".parse().unwrap()]);
        config
            .proxy_hosts
            .insert("other.test".into(), vec!["127.0.0.1".parse().unwrap()]);
        let ex = Executor::new(config).unwrap();
        let mark = new_mark();
        let allowed = |command: String| {
            let mut p = plan(&command, &mark, None, Network::Host);
            p.confinement = Confinement::new(None, Network::Host).allow_only(["allowed.test"]);
            p
        };
        if name == "no namespaces" && !shellward_test_support::is_root() {
            // No network namespace can be made without privilege outside the sandbox: refused, never run open.
            let e = ex
                .execute(allowed(fetch("http://allowed.test/")))
                .await
                .unwrap_err();
            assert!(e.to_string().contains("network"), "{e}");
            ex.shutdown().await;
            continue;
        }
        // The allowed name, by plain HTTP through the proxy.
        let r = ex
            .execute(allowed(fetch(&format!("http://allowed.test:{port}/ok"))))
            .await
            .unwrap();
        assert_eq!(r.output.text, "hello from /ok\n", "{name}: {r:?}");
        assert_eq!(r.confinement.network, Network::Allow);
        // Another name: refused by the proxy with a sentence naming what is allowed.
        let r = ex
            .execute(allowed(fetch(&format!("http://other.test:{port}/no"))))
            .await
            .unwrap();
        assert!(
            r.output.text.starts_with("refused 403") && r.output.text.contains("allowed.test"),
            "{name}: {r:?}"
        );
        // Around the proxy: the host's listener is not reachable directly.
        let r = ex.execute(allowed(reach_host(port))).await.unwrap();
        assert_eq!(r.output.text, "unreachable\n", "{name}: {r:?}");
        // A malformed list is refused before anything runs.
        let mut bad = allowed("true".into());
        bad.confinement.allow = vec!["not a host".into()];
        let e = ex.execute(bad).await.unwrap_err();
        assert!(e.to_string().contains("allow-list"), "{e}");
        ex.shutdown().await;
        assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
    }
}

/// `ptrace(PTRACE_TRACEME)` and `io_uring_setup` from Python: the return value and errno of each.
const SYSCALLS: &str = "python3 -c \"
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(0, 0, 0, 0); print('ptrace', r, ctypes.get_errno())
ctypes.set_errno(0)
r = libc.syscall(425, 0, None); print('io_uring_setup', r, ctypes.get_errno())
\"";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_system_calls_fail_with_eperm_and_others_work() {
    for (name, config) in configs() {
        let ex = Executor::new(config).unwrap();
        let mark = new_mark();
        let mut p = marked_plan(SYSCALLS, &mark);
        p.session = Some("syscalls".into());
        let free = ex.execute(p.clone()).await.unwrap();
        // Unfiltered: PTRACE_TRACEME succeeds; io_uring_setup with zero entries is EINVAL (22), not EPERM.
        assert!(free.output.text.contains("ptrace 0 0"), "{name}: {free:?}");
        assert!(
            !free.output.text.contains("io_uring_setup -1 1\n"),
            "{name}: {free:?}"
        );
        assert!(!free.confinement.syscalls);
        p.confinement = Confinement::none().deny_syscalls(["ptrace", "io_uring_setup"]);
        let denied = ex.execute(p.clone()).await.unwrap();
        assert!(denied.confinement.syscalls, "{name}");
        assert!(
            denied.output.text.contains("ptrace -1 1\n")
                && denied.output.text.contains("io_uring_setup -1 1\n"),
            "{name}: {denied:?}"
        );
        // Everything else still works under the filter (a pipeline, a subshell, python).
        p.command = "echo a | tr a b; (echo c); python3 -c 'print(6*7)'".into();
        let r = ex.execute(p.clone()).await.unwrap();
        assert_eq!(r.output.text, "b\nc\n42\n", "{name}: {r:?}");
        // An unknown name is the caller's error, naming the known ones.
        p.confinement = Confinement::none().deny_syscalls(["fork_bomb"]);
        let e = ex.execute(p).await.unwrap_err().to_string();
        assert!(e.contains("ptrace") && e.contains("fork_bomb"), "{e}");
        ex.shutdown().await;
        assert!(survivors_after(&mark, Duration::from_secs(5)).is_empty());
    }
}

shellward_test_support::every_test_as_user!(
    /// Every test above again as a normal user (the session sandbox in a user namespace of its own).
    every_files_and_network_test_passes_as_a_normal_user,
    "SHELLWARD_TEST_FILES_NETWORK_AS_USER"
);
